//! landfall-formats
