//! The status page (`GET /`) rendered by Debian's headless Chromium against a running daemon
//! with a known ingest: the numbers and states in the rendered DOM equal what
//! `/api/v1/streams` reports, an error naming a file whose name is HTML stays text, and the
//! screenshot is a real picture (kept as `status_page.png` in the test's target tmp dir).

mod common;
mod daemon;
use common::*;
use daemon::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const MISSING: &str = "Debian's `chromium` package is not installed: run scripts/test.sh \
                       (scripts/lib.sh ensure_system_packages installs it) or \
                       `apt-get install --no-install-recommends chromium`";

/// A file name the page must show as text, never as markup.
const HOSTILE: &str = "<img src=x onerror=document.title='pwned'>.parquet";

/// Run headless Chromium on `url` with `args`; its stdout. Fails the test if chromium is
/// missing, fails or runs past two minutes.
fn chromium(profile: &Path, url: &str, args: &[&str]) -> String {
    let out = profile.with_extension("out");
    let log = profile.with_extension("log");
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless=new",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--disable-extensions",
        // Nothing but the daemon on loopback: no update, sync or telemetry requests.
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-domain-reliability",
        "--no-default-browser-check",
        "--window-size=1200,800",
        "--virtual-time-budget=5000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .arg(url)
    .stdin(std::process::Stdio::null())
    .stdout(std::fs::File::create(&out).unwrap())
    .stderr(std::fs::File::create(&log).unwrap());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{MISSING}"),
        Err(e) => panic!("cannot start chromium: {e}"),
    };
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium ran past 120 s:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.success(),
        "chromium failed ({status}):\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    std::fs::read_to_string(&out).unwrap()
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// The rendered cell of `stream`'s `field`: (text, data-value attribute).
fn cell(dom: &str, stream: &str, field: &str) -> (String, Option<String>) {
    let key = format!("data-stream=\"{stream}\" data-field=\"{field}\"");
    let at = dom
        .find(&key)
        .unwrap_or_else(|| panic!("no cell {key} in the rendered page:\n{dom}"));
    let rest = &dom[at..];
    let tag_end = rest.find('>').unwrap();
    let tag = &rest[..tag_end];
    let value = tag.find("data-value=\"").map(|v| {
        let v = &tag[v + 12..];
        unescape(&v[..v.find('"').unwrap()])
    });
    let text = &rest[tag_end + 1..];
    let text = &text[..text.find("</td>").unwrap()];
    (unescape(text), value)
}

/// The API's value as the page shows an integer: its digits, or a dash when absent.
fn shown(v: &Value) -> String {
    match v {
        Value::Null => "\u{2013}".to_string(),
        v => v.to_string(),
    }
}

#[test]
fn status_page_in_chromium_shows_the_api_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for f in 0..5u64 {
        write_rows(
            &root.join("landing"),
            &format!("f{f}.json"),
            f * 3..f * 3 + 3,
        );
    }
    write_corrupt_parquet(&root.join("bad"), HOSTILE);
    let cfg = config_in(
        root,
        r#"
[streams.ev]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
poll_interval = "100ms"
sink.path = "{root}/table"

[streams.bad]
source = "{root}/bad"
format = "parquet"
schema = "id BIGINT, name STRING"
poll_interval = "100ms"
sink.path = "{root}/bad_table"
"#,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut d = Daemon::start(bin(), &cfg, &root.join("daemon.log"), deadline);
    let addr = d.addr.clone();
    // The known ingest: 5 files, 15 rows, one batch; the corrupt file stops `bad`.
    let api = loop {
        let (status, list) = get_json(&addr, "/api/v1/streams");
        assert_eq!(status, 200);
        let s = |n: &str| -> Value {
            list["streams"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == n)
                .cloned()
                .unwrap_or(Value::Null)
        };
        if s("ev")["last_progress"]["num_input_rows"] == 15 && s("bad")["state"] == "stopped" {
            break list;
        }
        assert!(Instant::now() < deadline, "no commit in time: {list}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let (status, page) = get(&addr, "/");
    assert_eq!(status, 200);
    assert!(
        page.contains("api/v1/streams") && !page.contains("http://") && !page.contains("https://"),
        "the page fetches relative URLs and loads nothing from elsewhere"
    );

    let url = format!("http://{addr}/");
    let dom = chromium(&root.join("chromium-dom"), &url, &["--dump-dom"]);

    for s in api["streams"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        let p = &s["last_progress"];
        let c = |field: &str| cell(&dom, name, field);
        assert_eq!(c("state").0, s["state"].as_str().unwrap(), "{name}");
        assert_eq!(c("restarts").0, shown(&s["restarts"]), "{name}");
        assert_eq!(
            c("falling_behind").0,
            if s["falling_behind"] == true {
                "yes"
            } else {
                "no"
            }
        );
        assert_eq!(c("rows").0, shown(&p["num_input_rows"]), "{name}");
        assert_eq!(c("files").0, shown(&p["num_input_files"]), "{name}");
        assert_eq!(c("batch_id").0, shown(&p["batch_id"]), "{name}");
        assert_eq!(
            c("table_version").0,
            shown(&p["sink"]["table_version"]),
            "{name}"
        );
        assert_eq!(
            c("files_outstanding").0,
            shown(&p["source"]["files_outstanding"]),
            "{name}"
        );
        let bytes_out = c("bytes_outstanding").1.unwrap();
        assert_eq!(
            bytes_out,
            p["source"]["bytes_outstanding"]
                .as_u64()
                .map_or(String::new(), |b| b.to_string())
        );
        for rate in ["input_rows_per_second", "processed_rows_per_second"] {
            let (text, value) = c(rate);
            match p[rate].as_f64() {
                Some(r) => {
                    // serde_json's default float parsing may be one ulp off the correctly
                    // rounded value the browser shows: equal to 12 significant digits.
                    let shown_value = value.unwrap().parse::<f64>().unwrap();
                    assert!(
                        (shown_value - r).abs() <= r.abs() * 1e-12,
                        "{name} {rate}: {shown_value} vs {r}"
                    );
                    // One decimal (JavaScript rounds ties up, Rust to even: compare
                    // numerically).
                    let t: f64 = text.parse().unwrap();
                    assert!(
                        text.split_once('.').is_some_and(|(_, d)| d.len() == 1)
                            && (t - r).abs() <= 0.05 + 1e-9,
                        "{name} {rate}: {text} vs {r}"
                    );
                }
                None => assert_eq!(text, "\u{2013}"),
            }
        }
        let (time, value) = c("time");
        assert_eq!(value.unwrap(), p["timestamp"].as_str().unwrap_or(""));
        if let Some(ts) = p["timestamp"].as_str() {
            // HH:MM:SS of the commit (with the date when not today).
            assert!(
                time.ends_with('Z') && ts.contains(&time[time.len() - 9..time.len() - 1]),
                "{name}: {time} vs {ts}"
            );
        }
    }
    // The known values themselves.
    assert_eq!(cell(&dom, "ev", "state").0, "running");
    assert_eq!(cell(&dom, "ev", "rows").0, "15");
    assert_eq!(cell(&dom, "ev", "files").0, "5");
    assert_eq!(cell(&dom, "ev", "files_outstanding").0, "0");
    assert_eq!(cell(&dom, "ev", "table_version").0, "1");
    assert_eq!(cell(&dom, "bad", "state").0, "stopped");

    // The error names the hostile file as text: escaped in the DOM, no element made of it,
    // its handler never ran.
    let (error, _) = cell(&dom, "bad", "error");
    assert!(error.contains(HOSTILE), "{error}");
    let bad = api["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "bad")
        .unwrap();
    assert_eq!(Some(error.as_str()), bad["error"].as_str());
    assert!(
        !dom.contains("<img"),
        "markup from the API was parsed:\n{dom}"
    );
    assert!(dom.contains("&lt;img src=x"), "{dom}");
    assert!(
        !dom.contains("pwned</title>"),
        "a handler from the API ran:\n{dom}"
    );

    // The screenshot: a real PNG of some size, kept for a person to look at.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status_page.png");
    let _ = std::fs::remove_file(&shot);
    chromium(
        &root.join("chromium-shot"),
        &url,
        &[&format!("--screenshot={}", shot.display())],
    );
    let png =
        std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot at {}: {e}", shot.display()));
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        png.len() > 5 * 1024,
        "a {} byte screenshot is blank",
        png.len()
    );
    eprintln!("screenshot: {}", shot.display());
    d.stop(Duration::from_secs(30));
}
