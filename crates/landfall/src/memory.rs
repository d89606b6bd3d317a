//! The process's allocator: jemalloc, for every allocation (Rust's, RocksDB's C++ and the
//! AWS crypto library's alike).
//!
//! A long-running daemon's live heap is small and bounded (about 20-30 MB: RocksDB's memtables
//! and block cache, one batch's buffers), but what it frees must go back to the system or the
//! resident size climbs for hours. glibc's malloc needed hand tuning for that (two arenas, a
//! fixed 256 KiB mmap threshold and `malloc_trim` every 5 s), and the fixed threshold cost
//! throughput: every buffer above 256 KiB became its own mapping (241,000 minor faults and a
//! munmap each on 1 GB of NDJSON, docs/benchmarks.md). jemalloc purges by itself instead:
//! - `background_thread:true`: a background thread returns unused dirty pages on a timer, so
//!   an idle daemon shrinks without an allocation to trigger the purge;
//! - `dirty_decay_ms:1000,muzzy_decay_ms:0`: freed pages are handed back (`MADV_DONTNEED`)
//!   after about a second, never parked as "muzzy" pages (`MADV_FREE`), which the kernel
//!   counts as resident until it needs them;
//! - `narenas:4`: fewer arenas than jemalloc's default of four per core, since the daemon's
//!   threads are a few tokio workers and blocking readers, not hundreds of clients.
//!
//! An operator's `MALLOC_CONF` is read after these and wins (jemalloc's own rule), e.g.
//! `MALLOC_CONF=dirty_decay_ms:10000` for more throughput at a higher resident size.

/// jemalloc serves every allocation of the process (`unprefixed_malloc_on_supported_platforms`
/// also replaces `malloc` for C and C++ code on Linux).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The options jemalloc reads when it starts (a NUL-terminated C string; the symbol is the
/// unprefixed `malloc_conf` because the allocator replaces `malloc`).
#[allow(non_upper_case_globals)]
#[unsafe(export_name = "malloc_conf")]
pub static malloc_conf: &[u8; 70] =
    b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:4\0";
