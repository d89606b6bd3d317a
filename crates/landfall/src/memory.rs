//! Keeping a long-running daemon's resident memory flat under glibc's allocator.
//!
//! The daemon's live heap is small and bounded (about 20-30 MB: RocksDB's memtables and block
//! cache, a batch's buffers), but glibc's malloc keeps what is freed: each thread that
//! allocates may get an arena of its own (up to 8 per core), freed blocks stay inside arenas,
//! and the threshold above which blocks get their own mapping grows with every large block
//! freed, so later large blocks fragment the arenas too. The memory soak
//! (bench/soak_memory.py, docs/benchmarks.md) showed resident memory climbing for minutes
//! while the heap stayed flat. So, on glibc:
//! - at most two arenas and a fixed 256 KiB mmap threshold (unless the operator set
//!   `MALLOC_ARENA_MAX` / `MALLOC_MMAP_THRESHOLD_`, which then win);
//! - `malloc_trim` every few seconds hands free pages of every arena back to the system.
//!
//! Other allocators and platforms are left alone.

use std::time::Duration;

/// How often free memory is returned to the system.
const TRIM_EVERY: Duration = Duration::from_secs(5);

/// Set the allocator's limits; call before any thread is started.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator parameters; it is called before other
        // threads exist.
        unsafe {
            if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
                libc::mallopt(libc::M_ARENA_MAX, 2);
            }
            if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
            }
        }
    }
}

/// Return free memory to the system periodically, for as long as the runtime runs.
pub fn spawn_trimmer() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    tokio::spawn(async {
        let mut every = tokio::time::interval(TRIM_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            // SAFETY: malloc_trim is thread-safe; it only releases free pages.
            let _ = tokio::task::spawn_blocking(|| unsafe { libc::malloc_trim(0) }).await;
        }
    });
}
