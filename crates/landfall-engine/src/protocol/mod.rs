//! The exactly-once protocol's steps that settle a batch against the table (docs/exactly-once.md):
//! [`recovery`] at every start (the batch open when the process stopped, and the table checked
//! against the ledger), and [`settle`], the one path for a batch the table already holds,
//! whether recovery finds it there or a commit call finds an earlier attempt's commit.

pub mod recovery;
pub mod settle;
