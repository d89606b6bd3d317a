//! In-memory seams for tests of the engine (feature `testkit`): a table that keeps its commits
//! in memory and can be told to fail the way production fails ([`MemoryCommitter`]), and a
//! discovery that plays a script of rounds ([`ScriptedDiscovery`]). With the ledger's own
//! in-memory store they drive a stream worker without a binary, a network or a disk.

mod committer;
mod discovery;

pub use committer::*;
pub use discovery::*;
