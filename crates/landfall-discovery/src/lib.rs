//! landfall-discovery
