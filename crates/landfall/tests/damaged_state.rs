//! A damaged state directory, the way disks and file systems damage them: bytes of a table file
//! flipped (found only when read), a table file cut short, the MANIFEST or CURRENT gone, the
//! write-ahead log cut short. Each time the stream stops at once (never retried, never a
//! panic) with a message naming the state directory and the ways out (docs/operations.md), and
//! the table is untouched: nothing re-ingested, nothing lost. The ways out work: `landfall
//! reset` sets a damaged state aside, and restoring the newest backup resumes the stream with
//! every file exactly once.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Output;

const FILES: u64 = 30;

struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    cfg: PathBuf,
    state: PathBuf,
}

/// A stream that committed `FILES` one-row files in batches of five. `flushed`: run once more
/// so RocksDB moves the write-ahead log into a table file (it does so when it opens).
fn ingested(flushed: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    for i in 0..FILES {
        write_rows(&root.join("in"), &format!("f{i:02}.json"), i..i + 1);
    }
    let cfg = config_in(
        &root,
        r#"
[streams.s]
source = "{root}/in"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
max_files_per_trigger = 5
sink.path = "{root}/table"
"#,
    );
    drain_stream(&cfg, "s");
    if flushed {
        drain_stream(&cfg, "s");
    }
    let state = root.join("state/s");
    Setup {
        _dir: dir,
        root,
        cfg,
        state,
    }
}

fn files_named(dir: &Path, ends: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(ends))
        .collect();
    out.sort();
    out
}

fn one(dir: &Path, ends: &str) -> PathBuf {
    let all = files_named(dir, ends);
    assert_eq!(
        all.len(),
        1,
        "one {ends} file in {}: {all:?}",
        dir.display()
    );
    all[0].clone()
}

/// The largest table file: the default column family's, which holds the file records (the
/// pending queue and expiry index have families, and table files, of their own).
fn largest_table(dir: &Path) -> PathBuf {
    let all = files_named(dir, ".sst");
    assert!(!all.is_empty(), "no table file in {}", dir.display());
    all.into_iter()
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap()
}

fn drain(s: &Setup) -> Output {
    landfall(&[
        "run",
        "--config",
        s.cfg.to_str().unwrap(),
        "--available-now",
    ])
}

/// The table holds every file's row exactly once.
fn table_exact(s: &Setup) {
    let v = verify("delta", &s.root.join("table"), Some("s"));
    assert_exactly(&ids(&v, "id"), &(0..FILES).collect::<Vec<_>>());
}

/// The run failed at once, naming the directory and the ways out, with no retry or panic.
fn stopped_clearly(s: &Setup, o: &Output, why: &str) {
    let out = text(o);
    assert!(!o.status.success(), "{why}: the run succeeded:\n{out}");
    assert!(!out.contains("panicked"), "{why}: a panic:\n{out}");
    assert!(
        out.contains("this error does not heal by retrying") && !out.contains("restarting"),
        "{why}: not a stop at once:\n{out}"
    );
    let dir = s.state.display().to_string();
    assert!(
        out.contains(&format!("state directory {dir} is damaged")),
        "{why}: the damage is not named with its directory:\n{out}"
    );
    assert!(
        out.contains("landfall reset") && out.contains("Back up and restore the state"),
        "{why}: the ways out are not named:\n{out}"
    );
}

#[test]
fn flipped_bytes_in_a_table_file_stop_the_stream_when_read() {
    let s = ingested(true);
    let sst = largest_table(&s.state);
    let mut bytes = std::fs::read(&sst).unwrap();
    // Damage the data blocks (the file starts with them), not the footer: RocksDB opens the
    // file and finds the damage when a read meets it.
    let n = bytes.len();
    for b in &mut bytes[n / 8..n / 2] {
        *b ^= 0x5a;
    }
    std::fs::write(&sst, bytes).unwrap();
    let o = drain(&s);
    stopped_clearly(&s, &o, "flipped bytes");
    assert!(text(&o).contains("Corruption"), "{}", text(&o));
    table_exact(&s);
}

#[test]
fn a_table_file_cut_short_stops_the_stream() {
    let s = ingested(true);
    let sst = largest_table(&s.state);
    let len = std::fs::metadata(&sst).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&sst)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    stopped_clearly(&s, &drain(&s), "a truncated table file");
    table_exact(&s);
}

#[test]
fn a_missing_manifest_or_current_stops_the_stream_and_reset_sets_it_aside() {
    for gone in ["MANIFEST-", "CURRENT"] {
        let s = ingested(true);
        let backup = s.root.join("backup");
        copy_dir(&s.state, &backup);
        for f in files_named(&s.state, "")
            .into_iter()
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(gone))
        {
            std::fs::remove_file(f).unwrap();
        }
        stopped_clearly(&s, &drain(&s), gone);
        table_exact(&s);
        // The failed open may leave the directory looking like a new database (RocksDB writes
        // a new CURRENT before it finds the old log): the next start must stop as well, not
        // take the table's files for new ones.
        let o = drain(&s);
        assert!(
            !o.status.success(),
            "{gone}: the second start ran:\n{}",
            text(&o)
        );
        table_exact(&s);
        // The way out that loses and duplicates nothing: the newest backup.
        let damaged = s.root.join("damaged");
        std::fs::rename(&s.state, &damaged).unwrap();
        copy_dir(&backup, &s.state);
        write_rows(&s.root.join("in"), "late.json", FILES..FILES + 1);
        let o = drain(&s);
        assert!(o.status.success(), "{gone}: from the backup:\n{}", text(&o));
        let v = verify("delta", &s.root.join("table"), Some("s"));
        assert_exactly(&ids(&v, "id"), &(0..=FILES).collect::<Vec<_>>());
        // `landfall reset` accepts a damaged state: it is what a reset is for.
        std::fs::remove_dir_all(&s.state).unwrap();
        std::fs::rename(&damaged, &s.state).unwrap();
        let o = landfall(&["reset", "s", "--config", s.cfg.to_str().unwrap()]);
        let out = text(&o);
        assert!(o.status.success(), "{gone}: reset refused:\n{out}");
        assert!(out.contains("is damaged"), "{out}");
        assert!(out.contains("state moved to"), "{out}");
        let aside = files_named(&s.root.join("state"), "")
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("s.reset-")
            })
            .count();
        assert_eq!(aside, 1, "{gone}: the damaged state is not set aside");
        // The new state opens: the stream runs again (it ingests the table's files again, as
        // `landfall reset` says; only a backup avoids that).
        let o = drain(&s);
        assert!(o.status.success(), "{gone}: after the reset:\n{}", text(&o));
    }
}

#[test]
fn a_write_ahead_log_cut_short_never_re_ingests() {
    // Everything is in the write-ahead log (no table file yet); cut its tail: RocksDB recovers
    // the records before the cut, so the state knows fewer batches than the table holds.
    let s = ingested(false);
    assert!(files_named(&s.state, ".sst").is_empty());
    let log = one(&s.state, ".log");
    let len = std::fs::metadata(&log).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let o = drain(&s);
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(!out.contains("panicked"), "{out}");
    assert!(
        out.contains("already holds batch") && out.contains("lost its last writes"),
        "{out}"
    );
    table_exact(&s);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// `CURRENT` gone while the last batch is still in the write-ahead log only (a running
/// daemon's usual state): RocksDB would make a new database over the old files and, at the next
/// open, replay the log into it and delete the old table files, so the ledger would know the
/// last batch and forget the files before it. landfall refuses to open such a directory, at
/// every start, and writing the MANIFEST's name back into `CURRENT` repairs it.
#[test]
fn a_lost_current_is_refused_at_every_start_and_repaired_by_hand() {
    let s = ingested(true);
    // One more file, one more batch: in the write-ahead log, not yet in a table file.
    write_rows(&s.root.join("in"), "late.json", FILES..FILES + 1);
    drain_stream(&s.cfg, "s");
    let manifest = std::fs::read_to_string(s.state.join("CURRENT")).unwrap();
    std::fs::remove_file(s.state.join("CURRENT")).unwrap();
    for start in 1..=2 {
        let o = drain(&s);
        stopped_clearly(&s, &o, &format!("start {start} without CURRENT"));
        assert!(text(&o).contains("CURRENT file is gone"), "{}", text(&o));
        assert!(
            !s.state.join("CURRENT").exists(),
            "a new CURRENT was written"
        );
    }
    std::fs::write(s.state.join("CURRENT"), manifest).unwrap();
    write_rows(&s.root.join("in"), "later.json", FILES + 1..FILES + 2);
    let o = drain(&s);
    assert!(o.status.success(), "after the repair:\n{}", text(&o));
    let v = verify("delta", &s.root.join("table"), Some("s"));
    assert_exactly(&ids(&v, "id"), &(0..FILES + 2).collect::<Vec<_>>());
}
