//! landfall-sink
