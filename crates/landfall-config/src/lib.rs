//! landfall-config
