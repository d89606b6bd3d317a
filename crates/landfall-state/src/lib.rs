//! The per-stream ledger: which files exist, which batch took them, what landed.
//!
//! The ledger logic ([`Ledger`]) is written once over a tiny ordered key-value interface
//! ([`Kv`]) with two implementations: RocksDB ([`RocksKv`], one database directory per stream,
//! every change one synced `WriteBatch`) and an in-memory map ([`MemoryKv`]) for fast tests.
//! The key layout is documented in `docs/state-layout.md`.
//!
//! A storage location's event cache (managed file events, [`EventCache`]) uses the same
//! [`Kv`] interface.

mod error;
mod event_cache;
mod kv;
mod ledger;
mod rocks;

pub use error::StateError;
pub use event_cache::{CacheStats, CachedEvent, EventCache, NewEvent, bare_etag, seq_after};
pub use kv::{Kv, KvError, KvOp, MemoryKv};
pub use ledger::{FileRecords, LEDGER_FORMAT, Ledger};
pub use rocks::RocksKv;

use std::path::Path;

/// Open (or create) the RocksDB ledger of one stream.
/// A ledger of a newer format is refused before anything in it is changed.
pub fn open_rocks(stream: &str, dir: &Path) -> Result<Ledger<RocksKv>, StateError> {
    let as_is = Ledger::new(stream, RocksKv::open_as_is(dir)?);
    as_is.refuse_newer()?;
    let ledger = Ledger::new(stream, as_is.into_kv().with_families()?);
    ledger.check_format()?;
    Ok(ledger)
}

/// Open a stream's ledger read-only (works while the daemon holds it). A ledger of a newer
/// format is refused: its records would read as damaged.
pub fn open_rocks_read_only(stream: &str, dir: &Path) -> Result<Ledger<RocksKv>, StateError> {
    let ledger = Ledger::new(stream, RocksKv::open_read_only(dir)?);
    ledger.refuse_newer()?;
    Ok(ledger)
}

/// Open (or create) the event cache of location `name` (managed file events).
pub fn open_event_cache(name: &str, dir: &Path) -> Result<EventCache<RocksKv>, StateError> {
    // No column families: the cache keeps none of the ledger's queues (empty ones a landfall
    // made for every database are dropped).
    let kv = RocksKv::open_as_is(dir)
        .and_then(RocksKv::without_empty_families)
        .map_err(|e| match e {
            // A damaged cache is rebuilt, not reset: its own advice.
            StateError::Corrupted { dir, reason } => StateError::CacheDamaged {
                location: name.to_string(),
                dir,
                reason,
            },
            e => e,
        })?;
    Ok(EventCache::new(name, kv))
}

/// Open a location's event cache read-only (works while the daemon holds it).
pub fn open_event_cache_read_only(
    name: &str,
    dir: &Path,
) -> Result<EventCache<RocksKv>, StateError> {
    Ok(EventCache::new(name, RocksKv::open_read_only(dir)?))
}

/// An in-memory ledger for tests.
pub fn memory(stream: &str) -> Ledger<MemoryKv> {
    Ledger::new(stream, MemoryKv::default())
}
