//! The exactly-once protocol's steps (docs/exactly-once.md): [`attempt`], one attempt of a
//! batch as types that consume themselves (started, staged, landed, recorded); [`recovery`]
//! at every start (the batch open when the process stopped, and the table checked
//! against the ledger), and [`settle`], the one path for a batch the table already holds,
//! whether recovery finds it there or a commit call finds an earlier attempt's commit.

pub mod attempt;
pub mod owner;
pub mod recovery;
pub mod settle;
