//! `landfall top` on a real terminal: Debian's tmux runs it in a detached session of a known
//! size against a running daemon with a known ingest; the test reads the screen
//! (`capture-pane`) and types (`send-keys`). Each stream's row shows what `/api/v1/streams`
//! reports; ↓ moves the detail (last hour, last batches, error) to the next stream; a daemon
//! that goes away is said so while the last rows stay; `q` ends it with status 0. Without a
//! terminal it refuses with a clear error.

mod common;
mod daemon;
use common::*;
use daemon::*;
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

const MISSING: &str = "Debian's `tmux` package is not installed: run scripts/test.sh \
                       (scripts/lib.sh ensure_system_packages installs it) or \
                       `apt-get install tmux`";

/// A tmux server of the test's own (its own socket, no user configuration), killed when
/// dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn new(command: &str) -> Tmux {
        let t = Tmux {
            socket: format!("landfall-top-{}", std::process::id()),
        };
        let out = t
            .cmd(&[
                "new-session",
                "-d",
                "-s",
                "top",
                "-x",
                "150",
                "-y",
                "45",
                command,
            ])
            .output()
            .unwrap_or_else(|e| panic!("cannot run tmux ({e}): {MISSING}"));
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        t
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]).args(args);
        c
    }

    fn screen(&self) -> String {
        let out = self
            .cmd(&["capture-pane", "-p", "-t", "top"])
            .output()
            .kept();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        assert!(
            self.cmd(&["send-keys", "-t", "top", keys])
                .status()
                .unwrap()
                .success()
        );
    }

    /// The screen once `ok` holds of it; fails with the screen after `within`.
    fn wait_for(&self, what: &str, within: Duration, ok: impl Fn(&str) -> bool) -> String {
        let t = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(t.elapsed() < within, "{what}: not on the screen:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).output();
    }
}

/// The words of `stream`'s row in the streams table (after its name), if it is on screen.
fn row(screen: &str, stream: &str) -> Option<Vec<String>> {
    screen.lines().find_map(|l| {
        let words: Vec<&str> = l
            .split(|c: char| c.is_whitespace() || c == '│')
            .filter(|w| !w.is_empty() && *w != ">")
            .collect();
        (words.first() == Some(&stream) && words.len() == 11)
            .then(|| words[1..].iter().map(|w| w.to_string()).collect())
    })
}

fn int(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        v => v.to_string(),
    }
}

/// The row as `landfall top` should draw the API's stream `s`.
fn expected(s: &Value) -> Vec<String> {
    let p = &s["last_progress"];
    let bytes = match p["source"]["bytes_outstanding"].as_u64() {
        None => "-".to_string(),
        Some(n) if n < 1024 => format!("{n}B"),
        Some(n) => panic!("the test's backlog is under 1 KiB, not {n}"),
    };
    vec![
        s["state"].as_str().unwrap().to_string(),
        int(&p["source"]["files_outstanding"]),
        bytes,
        int(&p["batch_id"]),
        int(&p["num_input_rows"]),
        int(&p["num_input_files"]),
        int(&p["sink"]["table_version"]),
        p["input_rows_per_second"]
            .as_f64()
            .map_or("-".into(), |r| format!("{r:.1}")),
        int(&s["restarts"]),
        if s["falling_behind"] == true {
            "yes"
        } else {
            "no"
        }
        .into(),
    ]
}

#[test]
fn top_in_tmux_shows_the_api_and_follows_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (mut d, list) = known_ingest(dir.path(), "broken.parquet", "", |_| true);
    let addr = d.addr.clone();
    let api = list["streams"].as_array().unwrap().clone();

    // Without a terminal: a clear refusal, no escape codes.
    let piped = Command::new(bin())
        .args(["top", "--listen", &addr])
        .output()
        .kept();
    assert!(!piped.status.success());
    let err = String::from_utf8_lossy(&piped.stderr);
    assert!(
        err.contains("error: landfall top draws on a terminal"),
        "{err}"
    );
    assert!(piped.stdout.is_empty());

    let tmux = Tmux::new(&format!(
        "{} top --listen {addr}; echo TOP-EXITED=$?; sleep 600",
        bin()
    ));
    let within = Duration::from_secs(20);
    let screen = tmux.wait_for("both streams", within, |s| {
        row(s, "ev").is_some() && row(s, "bad").is_some()
    });
    for s in &api {
        let name = s["name"].as_str().unwrap();
        assert_eq!(
            row(&screen, name).unwrap(),
            expected(s),
            "{name}'s row vs the API:\n{screen}"
        );
    }
    assert!(screen.contains("2 streams, 1 failing"), "{screen}");
    // The first stream (by name) is selected: `bad`, with its error and no batch.
    let screen = tmux.wait_for("the detail of bad", within, |s| {
        s.contains("last batches of bad: none in this process yet")
    });
    assert!(screen.contains("error of bad"), "{screen}");
    assert!(screen.contains("broken.parquet"), "{screen}");

    // ↓: the detail of `ev`, its batch as the progress API has it, its last hour.
    tmux.keys("Down");
    let screen = tmux.wait_for("the detail of ev", within, |s| {
        s.contains("last batches of ev")
    });
    let (_, progress) = get_json(&addr, "/api/v1/streams/ev/progress?limit=8");
    let p = &progress["progress"][0];
    let batch: Vec<String> = [
        int(&p["batch_id"]),
        int(&p["num_input_files"]),
        int(&p["num_input_rows"]),
        format!("{}ms", p["duration_ms"]["total"]),
        int(&p["sink"]["table_version"]),
    ]
    .to_vec();
    let shown = screen
        .lines()
        .map(|l| {
            l.split(|c: char| c.is_whitespace() || c == '│')
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
        })
        .find(|w| w.len() == 6 && w[0] == batch[0] && w[2] == batch[1])
        .unwrap_or_else(|| panic!("no row of batch {batch:?}:\n{screen}"));
    assert_eq!(
        [shown[0], shown[2], shown[3], shown[4], shown[5]].to_vec(),
        batch,
        "{screen}"
    );
    assert!(screen.contains("ev: rows/s now"), "{screen}");
    assert!(screen.contains("a point per 0.2 s"), "{screen}");
    assert!(!screen.contains("error of"), "ev has no error:\n{screen}");
    // For a person reading the test's output.
    eprintln!("landfall top, ev selected:\n{screen}");
    // ↑ goes back.
    tmux.keys("Up");
    tmux.wait_for("the detail of bad again", within, |s| {
        s.contains("last batches of bad")
    });

    // The daemon goes away: said on the header, the rows stay, top goes on.
    d.stop(Duration::from_secs(30));
    let screen = tmux.wait_for("the daemon gone", within, |s| {
        s.contains("cannot read the daemon")
    });
    assert!(row(&screen, "ev").is_some(), "{screen}");

    tmux.keys("q");
    let screen = tmux.wait_for("top ended with 0", within, |s| s.contains("TOP-EXITED=0"));
    // The terminal is given back: the alternate screen left, the shell's output on the normal one.
    assert!(
        !screen.contains("streams ─"),
        "the view is still on the screen:\n{screen}"
    );
}
