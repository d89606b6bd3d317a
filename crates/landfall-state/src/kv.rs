//! The ordered key-value interface the ledger needs, and its in-memory implementation.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// One change inside an atomic write.
#[derive(Debug, Clone)]
pub enum KvOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

/// An ordered byte-key store. `write` applies all ops atomically and durably.
pub trait Kv: Send + Sync {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
    /// Visit keys starting with `prefix`, from `from` (inclusive, must start with `prefix`), in
    /// order, until `visit` returns false.
    fn scan(
        &self,
        prefix: &[u8],
        from: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), String>;
    fn write(&self, ops: Vec<KvOp>) -> Result<(), String>;
}

/// A `BTreeMap` behind a mutex: the same semantics as RocksDB without durability.
#[derive(Debug, Default)]
pub struct MemoryKv {
    map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Kv for MemoryKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
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
    ) -> Result<(), String> {
        // Copy the range out first: `visit` may call back into this store (as the ledger does
        // when it follows the pending queue to file records), and the mutex is not reentrant.
        let entries: Vec<(Vec<u8>, Vec<u8>)> = {
            let map = self.map.lock().expect("memory kv poisoned");
            map.range(from.to_vec()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        for (k, v) in entries {
            if !visit(&k, &v) {
                break;
            }
        }
        Ok(())
    }

    fn write(&self, ops: Vec<KvOp>) -> Result<(), String> {
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
