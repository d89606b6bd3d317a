//! RocksDB behind the [`Kv`] interface: one database per stream, synced write batches.

use crate::error::StateError;
use crate::kv::{Kv, KvError, KvOp};
use rocksdb::{DB, Direction, IteratorMode, Options, WriteBatch, WriteOptions};
use std::path::{Path, PathBuf};

pub struct RocksKv {
    db: DB,
    dir: PathBuf,
}

impl RocksKv {
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        std::fs::create_dir_all(dir).map_err(|e| StateError::Backend {
            stream: dir.display().to_string(),
            op: "create state directory",
            reason: e.to_string(),
        })?;
        // RocksDB takes a directory without CURRENT for a new database: it writes a new one,
        // and at the next open deletes the old files as obsolete. Refuse before it does.
        if let Some(reason) = headless(dir) {
            return Err(StateError::Corrupted {
                dir: dir.to_path_buf(),
                reason,
            });
        }
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Zstd);
        // Small footprint per stream: a daemon may run dozens of streams.
        opts.set_write_buffer_size(8 << 20);
        opts.set_max_open_files(256);
        opts.set_keep_log_file_num(3);
        // Admission looks up every listed file, most of them absent from the ledger on a
        // new prefix: a bloom filter per table file (10 bits a key, about 1% false positives)
        // answers "not here" without reading the file's blocks. Table files written before
        // this option have none and are read as before.
        let mut table = rocksdb::BlockBasedOptions::default();
        table.set_bloom_filter(10.0, false);
        opts.set_block_based_table_factory(&table);
        let db = DB::open(&opts, dir).map_err(|e| open_error(dir, e))?;
        Ok(RocksKv {
            db,
            dir: dir.to_path_buf(),
        })
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
        let mut opts = Options::default();
        // An inspection (the API, the CLI) keeps few table files open, whatever the ledger's size.
        opts.set_max_open_files(64);
        let db = DB::open_for_read_only(&opts, dir, false).map_err(|e| open_error(dir, e))?;
        Ok(RocksKv {
            db,
            dir: dir.to_path_buf(),
        })
    }
}

/// Why a directory holding a database's files has no usable head: `CURRENT` gone while table
/// files, logs or a MANIFEST other than a new database's first remain; or `CURRENT` naming a fresh `MANIFEST-000001`
/// beside an older MANIFEST (a new database made over the old files by an open that followed
/// the loss of `CURRENT`).
fn headless(dir: &Path) -> Option<String> {
    let names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    let manifests: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("MANIFEST-"))
        .collect();
    match std::fs::read_to_string(dir.join("CURRENT")) {
        Err(_) => {
            // A new database that failed before it wrote CURRENT (a full disk) leaves at most
            // MANIFEST-000001 and options behind: no data, nothing to refuse.
            let data = names
                .iter()
                .any(|n| n.ends_with(".sst") || n.ends_with(".log"))
                || manifests.iter().any(|m| m.as_str() != "MANIFEST-000001");
            data.then(|| {
                format!(
                    "its CURRENT file is gone while its data files remain ({}); if only CURRENT \
                     was lost, writing the name of the newest MANIFEST into it (echo \
                     MANIFEST-<n> > CURRENT) repairs it",
                    manifests
                        .iter()
                        .map(|m| m.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
        }
        Ok(current) => (current.trim() == "MANIFEST-000001" && manifests.len() > 1).then(|| {
            "CURRENT names a new, empty database (MANIFEST-000001) beside an older MANIFEST: it \
             was made over the old files after CURRENT was lost"
                .to_string()
        }),
    }
}

/// Tell the lock case (another process has the directory) from corruption and other failures.
fn open_error(dir: &Path, e: rocksdb::Error) -> StateError {
    let text = e.to_string();
    // RocksDB: "IO error: While lock file: <dir>/LOCK: Resource temporarily unavailable" (another
    // process) or "lock hold by current process" (this one).
    if text.contains("While lock file") || text.contains("lock hold by current process") {
        return StateError::Locked {
            dir: dir.to_path_buf(),
            holder: lock_holder(&dir.join("LOCK")),
        };
    }
    // The MANIFEST that CURRENT names is gone: as damaged as a bad checksum, and no retry
    // brings it back.
    let missing = e.kind() == rocksdb::ErrorKind::IOError
        && text.contains("No such file or directory")
        && std::fs::read_to_string(dir.join("CURRENT")).is_ok_and(|c| {
            let manifest = c.trim();
            !manifest.is_empty() && text.contains(manifest) && !dir.join(manifest).exists()
        });
    if e.kind() == rocksdb::ErrorKind::Corruption || missing {
        return StateError::Corrupted {
            dir: dir.to_path_buf(),
            reason: text,
        };
    }
    StateError::Open {
        dir: dir.to_path_buf(),
        source: e,
    }
}

/// The pid of a process holding `lock` open, where /proc tells (Linux); best effort.
fn lock_holder(lock: &Path) -> Option<u32> {
    let target = lock.canonicalize().ok()?;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        if fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|p| p == target))
        {
            return Some(pid);
        }
    }
    None
}

impl RocksKv {
    /// RocksDB's corruption errors (a checksum mismatch, a truncated table file) are damage;
    /// the rest (I/O, a full disk) may heal.
    fn kv_error(&self, e: rocksdb::Error) -> KvError {
        match e.kind() {
            rocksdb::ErrorKind::Corruption => KvError::Damaged {
                dir: self.dir.clone(),
                reason: e.to_string(),
            },
            _ => KvError::Failed(e.to_string()),
        }
    }
}

impl Kv for RocksKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.db.get(key).map_err(|e| self.kv_error(e))
    }

    fn scan(
        &self,
        prefix: &[u8],
        from: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), KvError> {
        for item in self
            .db
            .iterator(IteratorMode::From(from, Direction::Forward))
        {
            let (k, v) = item.map_err(|e| self.kv_error(e))?;
            if !k.starts_with(prefix) || !visit(&k, &v) {
                break;
            }
        }
        Ok(())
    }

    fn write(&self, ops: Vec<KvOp>) -> Result<(), KvError> {
        let mut batch = WriteBatch::default();
        for op in ops {
            match op {
                KvOp::Put(k, v) => batch.put(k, v),
                KvOp::Delete(k) => batch.delete(k),
            }
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(batch, &wo).map_err(|e| self.kv_error(e))
    }
}
