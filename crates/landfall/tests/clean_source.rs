//! `clean_source` on the local store: committed files moved or deleted once their retention
//! passed, the process killed between the archive steps, and every file still ingested
//! exactly once (checked by the independent reader). The same on moto and Azurite is in
//! `clean_source_cloud.rs`.

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;

/// Eight days, past the 7-day minimum retention of `delete`.
const EIGHT_DAYS: &str = "691200";

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn by_state<'a>(rows: &'a [Value], state: &str) -> Vec<&'a Value> {
    rows.iter().filter(|r| r["state"] == state).collect()
}

/// `move` with a retention of 0: every committed file goes below the destination, keeping
/// its path below the source (spaces and accents included); a file already at a target is
/// never overwritten (the moved file takes the name with `.landfall-<version>`). The process
/// is killed after a move and before its record; the next run finishes the moves, records
/// each once, and ingests nothing twice. Files added later are ingested, never the moved
/// ones.
#[test]
fn move_survives_kills_between_moving_and_recording() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("landing zone");
    let dest = root.join("archive é");
    let table = root.join("table");
    let names: Vec<String> = (0..6u64)
        .map(|f| format!("day {}/f{f}.json", f % 2))
        .collect();
    for (f, name) in names.iter().enumerate() {
        let f = f as u64;
        write_rows(&src, name, f * 10..f * 10 + 10);
    }
    let originals: Vec<Vec<u8>> = names
        .iter()
        .map(|n| std::fs::read(src.join(n)).unwrap())
        .collect();
    // Something else already sits where f1 would go: it is never overwritten.
    std::fs::create_dir_all(dest.join("day 1")).unwrap();
    std::fs::write(dest.join("day 1/f1.json"), "someone else's\n").unwrap();
    let cfg = Config::in_dir(root)
        .stream(
            Stream::rows("s", &src, &table)
                .set("max_files_per_trigger", 2)
                .set("clean_source.mode", "MOVE")
                .set("clean_source.move_destination", &dest)
                .set("clean_source.retention_duration", "0s"),
        )
        .write();
    // Killed after the first move of the page, before the page is recorded: that file (and
    // whichever others moved meanwhile) is at its recorded target, none is recorded.
    crash_at_hit(&cfg, "archive_before_record", 1);
    assert!(files_under(&dest).len() > 1);
    assert!(by_state(&state_rows(&cfg, "s"), "archived").is_empty());
    drain(&cfg);

    assert_eq!(files_under(&src), Vec::<String>::new());
    let at_dest = files_under(&dest);
    assert_eq!(at_dest.len(), 7, "{at_dest:?}");
    assert_eq!(
        std::fs::read_to_string(dest.join("day 1/f1.json")).unwrap(),
        "someone else's\n"
    );
    let rows = state_rows(&cfg, "s");
    assert_eq!(by_state(&rows, "archived").len(), 6, "{rows:?}");
    for (n, body) in names.iter().zip(&originals) {
        let r = state_of(&rows, n.rsplit('/').next().unwrap());
        assert_eq!(r["archive_mode"], "MOVE", "{r}");
        assert_eq!(r["ingestion_state"], "INGESTED", "{r}");
        assert!(r["archive_time"].is_string(), "{r}");
        assert!(r["reason"].is_null(), "{r}");
        let location = r["move_location"].as_str().unwrap();
        if n == "day 1/f1.json" {
            assert!(
                location.starts_with(&format!("{}.landfall-", dest.join(n).display())),
                "{r}"
            );
        } else {
            assert_eq!(location, dest.join(n).display().to_string(), "{r}");
        }
        assert_eq!(&std::fs::read(location).unwrap(), body, "{n}");
    }
    let v = verify("delta", &table, Some("s"));
    assert_exactly(&ids(&v, "id"), &(0..60).collect::<Vec<_>>());

    // New files are ingested and moved; the moved ones are never seen again.
    write_rows(&src, "day 2/f6.json", 60..70);
    let out = drain(&cfg);
    assert!(
        text(&out).contains("this run:  1 file(s), 10 row(s)"),
        "{}",
        text(&out)
    );
    assert!(dest.join("day 2/f6.json").exists());
    let v = verify("delta", &table, Some("s"));
    assert_exactly(&ids(&v, "id"), &(0..70).collect::<Vec<_>>());
    let out = drain(&cfg);
    assert!(
        text(&out).contains("this run:  0 file(s), 0 row(s)"),
        "{}",
        text(&out)
    );
}

/// `delete` keeps files for the retention (7 days at least): a drain commits them and deletes
/// nothing; eight days later (the archiver's clock moved by the test knob) they are deleted.
/// A file overwritten after its commit is left in place, and stays committed with the reason;
/// a file someone else deleted is recorded archived, with its note. A kill after a
/// delete and before its record is finished by the next run.
#[test]
fn delete_waits_for_the_retention_and_spares_overwritten_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("landing");
    let table = root.join("table");
    for f in 0..5u64 {
        write_rows(&src, &format!("f{f}.json"), f * 10..f * 10 + 10);
    }
    let cfg = Config::in_dir(root)
        .stream(
            Stream::rows("s", &src, &table)
                .set("clean_source.mode", "delete")
                .set("clean_source.retention_duration", "7d"),
        )
        .write();
    drain(&cfg);
    assert_eq!(files_under(&src).len(), 5);
    let rows = state_rows(&cfg, "s");
    assert_eq!(by_state(&rows, "committed").len(), 5, "{rows:?}");

    // f3 is overwritten (a new version, ignored without allow_overwrites); f4 is deleted by
    // someone else.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_rows(&src, "f3.json", 1000..1020);
    std::fs::remove_file(src.join("f4.json")).unwrap();

    let later = [("LANDFALL_TEST_CLOCK_AHEAD_SECS", EIGHT_DAYS)];
    let o = landfall_env(
        &["run", "--config", cfg.to_str().unwrap(), "--available-now"],
        &[
            later[0],
            ("LANDFALL_FAILPOINTS", "archive_before_record=#1"),
        ],
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("failpoint archive_before_record"),
        "{}",
        text(&o)
    );
    drain_env(&cfg, &later);
    assert_eq!(files_under(&src), ["f3.json"]);
    let rows = state_rows(&cfg, "s");
    assert_eq!(by_state(&rows, "archived").len(), 4, "{rows:?}");
    for r in by_state(&rows, "archived") {
        assert_eq!(r["archive_mode"], "DELETE", "{r}");
        assert!(r["move_location"].is_null(), "{r}");
    }
    // f3 stays committed with the reason, never tried again.
    let f3 = state_of(&rows, "f3.json");
    assert_eq!(f3["state"], "committed", "{f3}");
    assert!(f3["archive_mode"].is_null(), "{f3}");
    assert!(
        f3["reason"]
            .as_str()
            .is_some_and(|r| r.contains("overwritten after its commit; left in place")),
        "{f3}"
    );
    let f4 = state_of(&rows, "f4.json");
    assert!(
        f4["reason"]
            .as_str()
            .is_some_and(|r| r.contains("already gone")),
        "{f4}"
    );
    // The table is untouched: every committed row once.
    let v = verify("delta", &table, Some("s"));
    assert_exactly(&ids(&v, "id"), &(0..50).collect::<Vec<_>>());
}

/// A stream whose retention has not passed archives nothing, and turning `clean_source` on
/// for a stream that committed files before archives those too.
#[test]
fn files_committed_before_clean_source_was_turned_on_are_archived() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("landing");
    let dest = root.join("done");
    let table = root.join("table");
    for f in 0..3u64 {
        write_rows(&src, &format!("f{f}.json"), f * 10..f * 10 + 10);
    }
    let stream = || Stream::rows("s", &src, &table);
    let off = Config::in_dir(root).stream(stream()).write();
    drain(&off);
    let on_later = Config::in_dir(root)
        .stream(
            stream()
                .set("clean_source.mode", "move")
                .set("clean_source.move_destination", &dest)
                .set("clean_source.retention_duration", "1h"),
        )
        .write();
    drain(&on_later);
    assert_eq!(files_under(&src).len(), 3, "retention not passed");
    let on = Config::in_dir(root)
        .stream(
            stream()
                .set("clean_source.mode", "move")
                .set("clean_source.move_destination", &dest)
                .set("clean_source.retention_duration", "0s"),
        )
        .write();
    drain(&on);
    assert_eq!(files_under(&src), Vec::<String>::new());
    assert_eq!(files_under(&dest), ["f0.json", "f1.json", "f2.json"]);
    let v = verify("delta", &table, Some("s"));
    assert_exactly(&ids(&v, "id"), &(0..30).collect::<Vec<_>>());
}

/// A table lost behind the stream's back (deleted, restored from an older copy): the stream
/// refuses to go on, and archives nothing meanwhile: the source files are what a rebuild of
/// the table needs.
#[test]
fn nothing_is_archived_while_the_table_is_behind_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("landing");
    let dest = root.join("done");
    let table = root.join("table");
    for f in 0..3u64 {
        write_rows(&src, &format!("f{f}.json"), f * 10..f * 10 + 10);
    }
    let cfg = |retention: &str| {
        Config::in_dir(root)
            .stream(
                Stream::rows("s", &src, &table)
                    .set("clean_source.mode", "move")
                    .set("clean_source.move_destination", &dest)
                    .set("clean_source.retention_duration", retention),
            )
            .write()
    };
    drain(&cfg("1h"));
    std::fs::remove_dir_all(&table).unwrap();
    let cfg = cfg("0s");
    let o = landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"]);
    assert!(
        !o.status.success() && text(&o).contains("recorded batch 0 as committed"),
        "{}",
        text(&o)
    );
    assert_eq!(files_under(&src).len(), 3, "{}", text(&o));
    assert!(files_under(&dest).is_empty(), "{}", text(&o));
    // A continuous run (its archiver would run beside the loop): 4 s, then stopped.
    let mut child = std::process::Command::new(bin())
        .args(["run", "--config", cfg.to_str().unwrap()])
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(4));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(files_under(&src).len(), 3);
    assert!(files_under(&dest).is_empty());
}
