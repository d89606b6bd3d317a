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
    /// Open (or create) a ledger's database: [`Self::open_as_is`], then
    /// [`Self::with_families`].
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        Self::open_as_is(dir)?.with_families()
    }

    /// Open (or create) the database in `dir` with the column families it has, creating none
    /// and moving nothing: what a store without families of its own (an event cache) keeps,
    /// and what the ledger's format is read from before anything is changed.
    pub fn open_as_is(dir: &Path) -> Result<Self, StateError> {
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
        let opts = tuned();
        let db = DB::open_cf_descriptors(&opts, dir, existing_families(dir)?)
            .map_err(|e| open_error(dir, e))?;
        Ok(RocksKv {
            db,
            dir: dir.to_path_buf(),
        })
    }

    /// The ledger's layout: the families of [`FAMILIES`] created where missing, and an older
    /// ledger's keys moved into them ([`Self::move_into_families`]) before this returns.
    pub fn with_families(mut self) -> Result<Self, StateError> {
        for (name, _) in FAMILIES {
            if self.db.cf_handle(name).is_none() {
                self.db
                    .create_cf(name, &tuned())
                    .map_err(|e| open_error(&self.dir, e))?;
            }
        }
        self.move_into_families().map_err(|e| match e {
            KvError::Damaged { dir, reason } => StateError::Corrupted { dir, reason },
            KvError::Failed(reason) => StateError::Backend {
                stream: self.dir.display().to_string(),
                op: "move the pending queue and expiry index into their column families",
                reason,
            },
        })?;
        Ok(self)
    }

    /// Drop the families of [`FAMILIES`] where they are empty: a store that has no keys of
    /// theirs (an event cache) got them from a landfall that made them for every database,
    /// and a landfall before them cannot open a database that has them.
    pub fn without_empty_families(mut self) -> Result<Self, StateError> {
        for (name, _) in FAMILIES {
            let Some(cf) = self.db.cf_handle(name) else {
                continue;
            };
            let empty = self
                .db
                .iterator_cf(cf, IteratorMode::Start)
                .next()
                .transpose()
                .map_err(|e| open_error(&self.dir, e))?
                .is_none();
            if empty {
                self.db
                    .drop_cf(name)
                    .map_err(|e| open_error(&self.dir, e))?;
            }
        }
        Ok(self)
    }

    /// Keys of [`FAMILIES`] that a ledger written before the families existed holds in the
    /// default family are moved into theirs, [`MOVE_CHUNK`] keys to an atomic, synced write
    /// (each key deleted from one family and put into the other in the same write), so an
    /// interrupted move loses nothing and the next open goes on with what is left. One
    /// iterator walks each prefix: it reads the snapshot taken when it was made, so the moves
    /// written meanwhile neither disturb it nor leave tombstones in its way (a fresh seek per
    /// chunk would step over every tombstone of the chunks before it: quadratic in the keys).
    /// The moved range of the default family is then compacted, so the tombstones do not slow
    /// later seeks. It runs before the open returns: nothing reads the ledger half moved.
    fn move_into_families(&self) -> Result<u64, KvError> {
        let default = self
            .db
            .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
            .expect("the default column family is always open");
        let mut moved = 0u64;
        let write = |batch: WriteBatch| {
            let mut wo = WriteOptions::default();
            wo.set_sync(true);
            self.db.write_opt(batch, &wo).map_err(|e| self.kv_error(e))
        };
        for (name, prefix) in FAMILIES {
            let target = self.db.cf_handle(name).expect("created with every family");
            let mut batch = WriteBatch::default();
            let (mut n, mut here) = (0usize, 0u64);
            for item in self
                .db
                .iterator_cf(default, IteratorMode::From(prefix, Direction::Forward))
            {
                let (k, v) = item.map_err(|e| self.kv_error(e))?;
                if !k.starts_with(prefix) {
                    break;
                }
                batch.delete_cf(default, &k);
                batch.put_cf(target, &k, &v);
                n += 1;
                if n == MOVE_CHUNK {
                    write(std::mem::take(&mut batch))?;
                    here += n as u64;
                    n = 0;
                    landfall_core::failpoint::hit("state_move_chunk");
                    if here % 1_000_000 == 0 {
                        tracing::info!(
                            dir = %self.dir.display(),
                            family = name,
                            moved = here,
                            "ledger: moving keys into their column family"
                        );
                    }
                }
            }
            if n > 0 {
                write(batch)?;
                here += n as u64;
            }
            if here > 0 {
                let mut end = prefix.to_vec();
                *end.last_mut().expect("a prefix has bytes") += 1;
                self.db
                    .compact_range_cf(default, Some(prefix), Some(&end[..]));
            }
            moved += here;
        }
        if moved > 0 {
            tracing::info!(
                dir = %self.dir.display(),
                moved,
                "ledger: pending queue and expiry index moved into their column families"
            );
        }
        Ok(moved)
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
        // The families the ledger has (one, before format 3 moved the queues out).
        let db = DB::open_cf_descriptors_read_only(&opts, dir, existing_families(dir)?, false)
            .map_err(|e| open_error(dir, e))?;
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

impl RocksKv {
    /// The column family holding keys that start with `key` (see [`FAMILIES`]).
    fn family(&self, key: &[u8]) -> &rocksdb::ColumnFamily {
        let name = FAMILIES
            .iter()
            .find(|(_, prefix)| key.starts_with(prefix))
            .map_or(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, |(name, _)| name);
        self.db
            .cf_handle(name)
            .or_else(|| self.db.cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME))
            .expect("the default column family is always open")
    }
}

impl Kv for RocksKv {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.db
            .get_cf(self.family(key), key)
            .map_err(|e| self.kv_error(e))
    }

    fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        let Some(first) = keys.first() else {
            return Ok(Vec::new());
        };
        let cf = self.family(first);
        if keys.iter().any(|k| !std::ptr::eq(self.family(k), cf)) {
            return keys.iter().map(|k| self.get(k)).collect();
        }
        let sorted = keys.is_sorted();
        self.db
            .batched_multi_get_cf(cf, keys, sorted)
            .into_iter()
            .map(|r| {
                r.map(|v| v.map(|v| v.to_vec()))
                    .map_err(|e| self.kv_error(e))
            })
            .collect()
    }

    fn scan(
        &self,
        prefix: &[u8],
        from: &[u8],
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), KvError> {
        crate::kv::check_scan_prefix(prefix)?;
        for item in self.db.iterator_cf(
            self.family(prefix),
            IteratorMode::From(from, Direction::Forward),
        ) {
            let (k, v) = item.map_err(|e| self.kv_error(e))?;
            if !k.starts_with(prefix) || !visit(&k, &v) {
                break;
            }
        }
        Ok(())
    }

    fn write(&self, mut ops: Vec<KvOp>) -> Result<(), KvError> {
        // In key order, so that the memtable's skip list inserts each key next to the one
        // before it (a page of admissions interleaves three key families); a stable sort
        // keeps the order of two changes to one key, so the batch means the same.
        ops.sort_by(|a, b| a.key().cmp(b.key()));
        let mut batch = WriteBatch::default();
        for op in ops {
            match op {
                KvOp::Put(k, v) => batch.put_cf(self.family(&k), k, v),
                KvOp::Delete(k) => batch.delete_cf(self.family(&k), k),
            }
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(true);
        self.db.write_opt(batch, &wo).map_err(|e| self.kv_error(e))
    }
}

/// The key families kept in column families of their own, with the prefix of their keys:
/// the pending queue and the expiry index are appended in order (seq, modification time), so
/// in a family of their own their table files do not overlap and move down the levels
/// without being rewritten; beside the file records they shared every compaction. Every other
/// key lives in the default family.
const FAMILIES: [(&str, &[u8]); 2] = [("pending", b"p/"), ("expiry", b"x/")];
/// Keys moved into their family per write when an older ledger is opened.
const MOVE_CHUNK: usize = 10_000;

/// What every ledger of the process shares, so that memory is bounded whatever the number of
/// streams and the size of their ledgers: one block cache for data, index and filter blocks
/// ([`BLOCK_CACHE`]), and one budget for all memtables ([`MEMTABLES`]); when the memtables
/// of all streams together pass it, the largest is flushed.
struct Shared {
    cache: rocksdb::Cache,
    buffers: rocksdb::WriteBufferManager,
}

/// The block cache every ledger shares. Index and filter blocks live in it (partitioned, so
/// only the parts a lookup needs are loaded): their memory no longer grows with the ledger
/// (at 10 million files they are tens of megabytes).
const BLOCK_CACHE: usize = 64 << 20;
/// The memtable budget of the process.
const MEMTABLES: usize = 128 << 20;
/// One stream's memtable: large enough that a backlog of admissions flushes in few, large
/// level-0 files.
const MEMTABLE: usize = 64 << 20;

fn shared() -> &'static Shared {
    static SHARED: std::sync::OnceLock<Shared> = std::sync::OnceLock::new();
    SHARED.get_or_init(|| Shared {
        cache: rocksdb::Cache::new_lru_cache(BLOCK_CACHE),
        buffers: rocksdb::WriteBufferManager::new_write_buffer_manager(MEMTABLES, false),
    })
}

/// The column families the database in `dir` has (only the default one for a new database),
/// each with the database's options: RocksDB opens a database only with all of its families.
fn existing_families(dir: &Path) -> Result<Vec<rocksdb::ColumnFamilyDescriptor>, StateError> {
    let names = if dir.join("CURRENT").exists() {
        DB::list_cf(&Options::default(), dir).map_err(|e| open_error(dir, e))?
    } else {
        vec![rocksdb::DEFAULT_COLUMN_FAMILY_NAME.to_string()]
    };
    Ok(names
        .into_iter()
        .map(|name| rocksdb::ColumnFamilyDescriptor::new(name, tuned()))
        .collect())
}

/// The options of a ledger, measured with `bench/admission_bench.sh --release 10000000`
/// (docs/benchmarks.md, "Admission with 10,000,000 tracked files"). Every option here reads
/// table files written under earlier options: none changes the format on disk.
fn tuned() -> Options {
    use rocksdb::DBCompressionType as C;
    let shared = shared();
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_max_open_files(256);
    opts.set_keep_log_file_num(3);
    opts.set_write_buffer_size(MEMTABLE);
    opts.set_write_buffer_manager(&shared.buffers);
    // Fewer, larger compactions from level 0 (each one rewrites the base level's files
    // that overlap it; a page of admissions touches the file, pending and expiry keys).
    opts.set_level_zero_file_num_compaction_trigger(8);
    // zstd only where the data settles (the bottom level, most of it): the upper levels are
    // rewritten often and compressing them cost more CPU than it saved.
    opts.set_compression_type(C::None);
    opts.set_compression_per_level(&[C::None; 7]);
    opts.set_bottommost_compression_type(C::Zstd);
    let mut table = rocksdb::BlockBasedOptions::default();
    // Admission looks up every listed file, most of them absent on a new prefix: a bloom
    // filter (10 bits a key, about 1% false positives) answers "not here" without reading
    // the file's blocks. Table files written before this option have none and are read as
    // before.
    table.set_bloom_filter(10.0, false);
    // 16 KiB blocks: a quarter of the index entries of the default 4 KiB, and zstd builds its
    // tables once per block.
    table.set_block_size(16 << 10);
    table.set_block_cache(&shared.cache);
    table.set_cache_index_and_filter_blocks(true);
    table.set_cache_index_and_filter_blocks_with_high_priority(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    table.set_index_type(rocksdb::BlockBasedIndexType::TwoLevelIndexSearch);
    table.set_partition_filters(true);
    table.set_pin_top_level_index_and_filter(true);
    opts.set_block_based_table_factory(&table);
    opts
}
