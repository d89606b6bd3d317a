//! Domain types and the seams of landfall.
//!
//! This crate has no I/O and no heavy dependencies. It defines what a file, a batch plan and a
//! per-file record are, the lifecycle a file moves through, and the traits the engine is written
//! against (`StateStore`, `Committer`, `Discovery`, `Decoder`), each with an in-memory
//! implementation for fast unit tests beside it.

pub mod datetime_pattern;
pub mod ddl;
pub mod delta_types;
pub mod failpoint;
pub mod file;
pub mod listing;
pub mod plan;
pub mod seams;
pub mod size;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod text_encoding;
pub mod type_widening;

pub use file::{
    Archive, ArchiveMode, ArchiveStep, FileKey, FileMeta, FileRecord, FileState, METADATA_FIELDS,
    SkipKind, SkipReason,
};
pub use listing::IncrementalListing;
pub use plan::{BatchLimits, BatchPlan, CommitReceipt, StagedFile, staged_attempt};
pub use seams::{
    AckToken, BatchCommit, BatchWriter, Committed, Committer, Compaction, Decoder, Discovery,
    DiscoveryBatch, DiscoveryMemory, MalformedMessage, MalformedRecord, OWNER_KEY, QueueRound,
    RecordedMode, RunStart, SeamError, StateStore, StreamSummary,
};
pub use text_encoding::TextEncoding;
