//! Helpers shared by the integration tests: run the real binary on a config, write NDJSON
//! inputs with known rows, and check tables with the independent Python reader
//! (tests/verify/verify_table.py: DuckDB log replay + the deltalake package).
//!
//! Split by concern: [`process`] (the binary), [`config`] (configurations built typed),
//! [`data`] (input files), [`verify`] (the independent reader), [`emulators`] (moto,
//! Azurite), [`fault_proxy`] (network faults between landfall and an emulator); everything is
//! re-exported here.
#![allow(dead_code)]

mod config;
mod data;
mod emulators;
mod fault_proxy;
mod outputs;
mod process;
mod verify;
pub use outputs::keep_output;

// Each test binary uses some of them.
#[allow(unused_imports)]
pub use config::*;
#[allow(unused_imports)]
pub use data::*;
#[allow(unused_imports)]
pub use emulators::*;
#[allow(unused_imports)]
pub use fault_proxy::*;
#[allow(unused_imports)]
pub use process::*;
#[allow(unused_imports)]
pub use verify::*;
