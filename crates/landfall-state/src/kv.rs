//! The ordered key-value interface the ledger needs, and its in-memory implementation.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::Mutex;

/// Why a key-value operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// The store's files in `dir` are damaged (a checksum mismatch, a truncated or missing table
    /// file): retrying cannot help; the directory must be restored or set aside.
    #[error("{reason}")]
    Damaged { dir: PathBuf, reason: String },
    /// Anything else (an I/O error such as a full disk): it may heal.
    #[error("{0}")]
    Failed(String),
}

/// One change inside an atomic write.
#[derive(Debug, Clone)]
pub enum KvOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl KvOp {
    pub fn key(&self) -> &[u8] {
        match self {
            KvOp::Put(k, _) | KvOp::Delete(k) => k,
        }
    }
}

/// An ordered byte-key store. `write` applies all ops atomically and durably.
pub trait Kv: Send + Sync {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError>;
    /// The values of many keys, in the order asked: one call for a page of lookups (RocksDB
    /// batches the filter and index probes of sorted keys).
    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        keys.iter().map(|k| self.get(k)).collect()
    }
    /// Visit keys starting with `prefix`, from `from` (inclusive, must start with `prefix`), in
    /// order, until `visit` returns false.
    fn scan(
        &self,
        prefix: &[u8],
        from: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), KvError>;
    fn write(&self, ops: Vec<KvOp>) -> Result<(), KvError>;
}

/// A scan names one key family, `<family>/` and more: in RocksDB a family may live in a column
/// family of its own, and a prefix spanning several would miss keys. Both stores refuse it.
pub(crate) fn check_scan_prefix(prefix: &[u8]) -> Result<(), KvError> {
    if prefix.contains(&b'/') {
        return Ok(());
    }
    Err(KvError::Failed(format!(
        "a scan names one key family (`<family>/`), not {:?}",
        String::from_utf8_lossy(prefix)
    )))
}

/// A `BTreeMap` behind a mutex: the same semantics as RocksDB without durability.
#[derive(Debug, Default)]
pub struct MemoryKv {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Kv for MemoryKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        Ok(self
            .map
            .lock()
            .expect("memory kv poisoned")
            .get(key)
            .cloned())
    }

    fn scan(
        &self,
        prefix: &[u8],
        from: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), KvError> {
        check_scan_prefix(prefix)?;
        // Copy the range out a chunk at a time: `visit` may call back into this store (as the
        // ledger does when it follows the pending queue to file records), and the mutex is not
        // reentrant. A chunk, not the whole range, so a scan that stops early (a page of the
        // ledger) costs what it visits, as with RocksDB's iterator.
        const CHUNK: usize = 256;
        let mut lower = Bound::Included(from.to_vec());
        loop {
            let entries: Vec<(Vec<u8>, Vec<u8>)> = {
                let map = self.map.lock().expect("memory kv poisoned");
                map.range((lower, Bound::Unbounded))
                    .take_while(|(k, _)| k.starts_with(prefix))
                    .take(CHUNK)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            };
            let full = entries.len() == CHUNK;
            for (k, v) in &entries {
                if !visit(k, v) {
                    return Ok(());
                }
            }
            match entries.into_iter().next_back() {
                Some((last, _)) if full => lower = Bound::Excluded(last),
                _ => return Ok(()),
            }
        }
    }

    fn write(&self, ops: Vec<KvOp>) -> Result<(), KvError> {
        let mut map = self.map.lock().expect("memory kv poisoned");
        for op in ops {
            match op {
                KvOp::Put(k, v) => {
                    map.insert(k, v);
                }
                KvOp::Delete(k) => {
                    map.remove(&k);
                }
            }
        }
        Ok(())
    }
}
