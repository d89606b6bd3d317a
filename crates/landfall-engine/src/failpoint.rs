//! Crash injection for the exactly-once tests: it lives in `landfall_core::failpoint` (so the
//! sinks can call it too) and is re-exported here for the engine's call sites.

pub use landfall_core::failpoint::*;
