//! landfall-engine
