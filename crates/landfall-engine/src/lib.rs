//! The engine: one worker per stream (discover, plan, run, commit, record), recovery at start,
//! and a supervisor that restarts failed workers with backoff without touching the others.
//!
//! The exactly-once protocol is described in docs/exactly-once.md; the code that carries it
//! out is [`stream`] (steps in order, each durable before the next) and [`protocol`] (recovery,
//! and the one path for a batch the table already holds).

pub mod clean_source;
pub mod compaction;
pub mod decode_options;
pub mod events;
pub mod failpoint;
pub mod health;
mod hints;
pub mod hub;
pub mod locations;
pub mod metrics;
pub mod notify_setup;
mod partition;
mod pinned;
mod pipeline;
pub mod progress;
pub mod protocol;
pub mod schema;
pub mod shard;
mod split;
pub mod stream;
pub mod supervisor;
pub mod timeline;
pub mod vacuum;
pub mod wiring;

pub use hub::{AdminAction, AdminRequest, Hub};
pub use landfall_discovery::{display_path, object_path};
pub use protocol::recovery;
pub use shard::Shard;
pub use stream::{RunEnd, StreamParts, StreamWorker};
pub use supervisor::{Reloaded, RunOptions, StreamOutcome, StreamSet, run_streams};
