//! The four seams the engine is written against.
//!
//! - [`Discovery`] yields candidate files and, for queues, acknowledgement tokens that are
//!   acknowledged only after the files are durably admitted.
//! - [`StateStore`] is the per-stream ledger; every call is one atomic, synced change.
//! - [`Decoder`] turns the bytes of one file into Arrow record batches under a given schema.
//! - [`Committer`] stages data files for a batch and commits them atomically with the batch id.
//!
//! Errors crossing a seam are [`SeamError`]: the implementing crates keep their own rich error
//! enums and convert at the boundary, keeping the context (stream, path, batch) in the message.

mod committer;
mod decoder;
mod discovery;
mod error;
mod state;

pub use committer::*;
pub use decoder::*;
pub use discovery::*;
pub use error::*;
pub use state::*;
