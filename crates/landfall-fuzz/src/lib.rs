//! What each fuzz target runs, one function per target, shared by the coverage-guided fuzzer
//! (`fuzz/`, cargo-fuzz on a nightly toolchain) and the test suite (`tests/smoke.rs` replays the
//! kept corpora and a few thousand mutations of them on the stable toolchain, in seconds).
//!
//! A target returns normally for any input: an error is the right answer to hostile bytes. A
//! panic, an abort, an allocation past the fuzzer's limit or a broken invariant (asserted
//! here) is a finding. The invariants are the promises the daemon relies on:
//! - a decoder's batches have exactly the schema it was built with, and a text file decodes to
//!   the same rows, the same malformed count and the same verdict however its bytes are cut
//!   into chunks ([`decode`]);
//! - a schema printed as DDL parses back to itself ([`ddl`]);
//! - the Delta log readers refuse a commit with a line that is not an action (a JSON object)
//!   instead of reading it as "no txn here" ([`delta_log`]).
//!
//! Inputs carry their own knobs: the leading bytes pick the format, codec, schema and options
//! (see each function), so one target covers every combination the config allows.

mod decode;
mod parsers;
#[cfg(feature = "services")]
mod services;

pub use decode::{decode, decode_orc, infer};
pub use parsers::{config, ddl};
#[cfg(feature = "services")]
pub use services::{delta_log, listing_page, messages};

/// What a fuzz target runs.
pub type Target = fn(&[u8]);

/// Every target by name, as `fuzz/fuzz_targets/<name>.rs` and `fuzz/corpus/<name>/` call it.
#[cfg(feature = "services")]
pub const TARGETS: &[(&str, Target)] = &[
    ("decode", decode),
    ("decode_orc", decode_orc),
    ("infer", infer),
    ("messages", messages),
    ("ddl", ddl),
    ("config", config),
    ("delta_log", delta_log),
    ("listing_page", listing_page),
];

/// The first `n` bytes of `data` as knobs (zero where the input is shorter) and the rest.
pub(crate) fn knobs<const N: usize>(data: &[u8]) -> ([u8; N], &[u8]) {
    let mut k = [0u8; N];
    let n = data.len().min(N);
    k[..n].copy_from_slice(&data[..n]);
    (k, &data[n..])
}
