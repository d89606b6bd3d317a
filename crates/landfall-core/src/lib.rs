//! landfall-core
