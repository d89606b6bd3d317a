//! RocksDB behind the [`Kv`] interface: one database per stream, synced write batches.

use crate::error::StateError;
use crate::kv::{Kv, KvOp};
use rocksdb::{DB, Direction, IteratorMode, Options, WriteBatch, WriteOptions};
use std::path::Path;

pub struct RocksKv {
    db: DB,
}

impl RocksKv {
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        std::fs::create_dir_all(dir).map_err(|e| StateError::Backend {
            stream: dir.display().to_string(),
            op: "create state directory",
            reason: e.to_string(),
        })?;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Zstd);
        // Small footprint per stream: a daemon may run dozens of streams.
        opts.set_write_buffer_size(8 << 20);
        opts.set_max_open_files(256);
        opts.set_keep_log_file_num(3);
        let db = DB::open(&opts, dir).map_err(|e| {
            if e.to_string().contains("lock") {
                StateError::Locked {
                    dir: dir.to_path_buf(),
                }
            } else {
                StateError::Open {
                    dir: dir.to_path_buf(),
                    source: e,
                }
            }
        })?;
        Ok(RocksKv { db })
    }

    /// Open without taking the directory lock, for inspection while a daemon runs. Writes fail.
    pub fn open_read_only(dir: &Path) -> Result<Self, StateError> {
        if !dir.join("CURRENT").exists() {
            return Err(StateError::Backend {
                stream: dir.display().to_string(),
                op: "open",
                reason: "no state here yet (the stream has never run)".into(),
            });
        }
        let db = DB::open_for_read_only(&Options::default(), dir, false).map_err(|e| {
            StateError::Open {
                dir: dir.to_path_buf(),
                source: e,
            }
        })?;
        Ok(RocksKv { db })
    }
}

impl Kv for RocksKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.db.get(key).map_err(|e| e.to_string())
    }

    fn scan(
        &self,
        prefix: &[u8],
        from: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), String> {
        for item in self
            .db
            .iterator(IteratorMode::From(from, Direction::Forward))
        {
            let (k, v) = item.map_err(|e| e.to_string())?;
            if !k.starts_with(prefix) || !visit(&k, &v) {
                break;
            }
        }
        Ok(())
    }

    fn write(&self, ops: Vec<KvOp>) -> Result<(), String> {
        let mut batch = WriteBatch::default();
        for op in ops {
            match op {
                KvOp::Put(k, v) => batch.put(k, v),
                KvOp::Delete(k) => batch.delete(k),
            }
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(batch, &wo).map_err(|e| e.to_string())
    }
}
