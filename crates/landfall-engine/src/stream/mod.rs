//! A stream's own parts beside the worker: [`memory`], the typed facts it keeps in its ledger.

pub mod memory;
