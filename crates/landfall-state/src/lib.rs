//! landfall-state
