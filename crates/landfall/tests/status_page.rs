//! The status page (`GET /`) rendered by Debian's headless Chromium against a running daemon
//! with a known ingest: the numbers and states in the rendered DOM equal what
//! `/api/v1/streams` reports; the charts are drawn from the numbers
//! `/api/v1/streams/{name}/timeline` returns (each series' values and times, and each vertex
//! where its value and time put it); the last batches, skipped files and schema versions equal their
//! endpoints; an error or a skipped file whose name is HTML stays text; and the screenshot is a
//! real picture (kept as `status_page.png` in the test's target tmp dir).

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
        "--window-size=1280,1900",
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
    write_corrupt_parquet(&root.join("skips"), HOSTILE);
    write_parquet_rows(&root.join("skips"), "good.parquet", 0..4);
    // The known ingest (`ev`: 5 files, 15 rows, one batch; the corrupt file stops `bad`), and
    // `skips`, which skips its corrupt file.
    let (mut d, api) = known_ingest(
        root,
        HOSTILE,
        r#"
[streams.skips]
source = "{root}/skips"
format = "parquet"
schema = "id BIGINT, name STRING"
ignore_corrupt_files = true
poll_interval = "100ms"
sink.path = "{root}/skips_table"
"#,
        |list| listed(list, "skips")["last_progress"]["num_input_rows"] == 4,
    );
    let addr = d.addr.clone();
    let (status, page) = get(&addr, "/");
    assert_eq!(status, 200);
    assert!(
        page.contains("api/v1/streams") && !page.contains("http://") && !page.contains("https://"),
        "the page fetches relative URLs and loads nothing from elsewhere"
    );

    // A few points of the timeline after the batches (a point per 200 ms).
    std::thread::sleep(Duration::from_millis(1000));
    let url = format!("http://{addr}/");
    let dom = chromium(&root.join("chromium-dom"), &url, &["--dump-dom"]);
    assert!(
        dom.contains("data-details=\"loaded\""),
        "the details never loaded:\n{dom}"
    );
    details_match_the_api(&dom, &addr);

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
    assert_eq!(cell(&dom, "skips", "files").0, "1");

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

/// The part of the DOM inside `<details data-stream="name">`.
fn section<'a>(dom: &'a str, name: &str) -> &'a str {
    let start = dom
        .find(&format!("<details class=\"stream\" data-stream=\"{name}\""))
        .or_else(|| dom.find(&format!("<details data-stream=\"{name}\"")))
        .unwrap_or_else(|| panic!("no details of {name}:\n{dom}"));
    let rest = &dom[start..];
    &rest[..rest.find("</details>").unwrap()]
}

/// Every value of attribute `attr` in `text`, in order.
fn attrs<'a>(text: &'a str, attr: &str) -> Vec<&'a str> {
    let key = format!(" {attr}=\"");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(&key) {
        let v = &rest[at + key.len()..];
        let end = v.find('"').unwrap();
        out.push(&v[..end]);
        rest = &v[end..];
    }
    out
}

/// The opening tag holding `marker`.
fn tag_with<'a>(text: &'a str, marker: &str) -> &'a str {
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in:\n{text}"));
    let start = text[..=at].rfind('<').unwrap();
    &text[start..start + text[start..].find('>').unwrap()]
}

fn attr<'a>(tag: &'a str, name: &str) -> &'a str {
    attrs(tag, name)
        .first()
        .copied()
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// A table row's cells in a section: `data-field` -> (text, data-value), for the row whose
/// `data-key` is `key`.
fn row_cells(
    text: &str,
    table: &str,
    key: &str,
) -> std::collections::BTreeMap<String, (String, String)> {
    let t = &text[text
        .find(&format!("class=\"small {table}\""))
        .unwrap_or_else(|| panic!("no {table} table in:\n{text}"))..];
    let t = &t[..t.find("</table>").unwrap()];
    let at = t
        .find(&format!("data-key=\"{key}\""))
        .unwrap_or_else(|| panic!("no row {key} in the {table} table:\n{t}"));
    let row_start = t[..at].rfind("<tr").unwrap();
    let tr = &t[row_start..];
    let tr = &tr[..tr.find("</tr>").unwrap()];
    let mut out = std::collections::BTreeMap::new();
    for td in tr.split("<td").skip(1) {
        let (open, body) = td.split_once('>').unwrap();
        let field = attr(open, "data-field").to_string();
        let value = attrs(open, "data-value")
            .first()
            .map(|v| unescape(v))
            .unwrap_or_default();
        let text = unescape(&body[..body.find("</td>").unwrap()]);
        out.insert(field, (text, value));
    }
    out
}

/// The charts, last batches, skipped files and schema versions of each stream as the page
/// drew them, against the API read after the page (a timeline only grows at its end here).
fn details_match_the_api(dom: &str, addr: &str) {
    use landfall_server::chart::{PLOT_H, PLOT_LEFT, PLOT_TOP, PLOT_W, y};
    for name in ["ev", "skips", "bad"] {
        let sec = section(dom, name);
        let (status, tl) = get_json(addr, &format!("/api/v1/streams/{name}/timeline"));
        assert_eq!(status, 200);
        assert_eq!(tl["step_ms"], 200);
        let points = tl["points"].as_array().unwrap();
        let at = |t: &str| {
            points.iter().find(|p| p["t"] == t).unwrap_or_else(|| {
                panic!("{name}: the chart's time {t} is not in the API's timeline")
            })
        };
        let svg = &sec[sec
            .find("<svg")
            .unwrap_or_else(|| panic!("{name}: no chart:\n{sec}"))..];
        let svg_tag = tag_with(svg, "<svg");
        assert_eq!(attr(svg_tag, "data-step-ms"), "200");
        let end = chrono::DateTime::parse_from_rfc3339(attr(svg_tag, "data-end")).unwrap();
        let window: f64 = attr(svg_tag, "data-window-ms").parse().unwrap();
        // Where a time sits on the axis: `now` at the right edge, the window's start at the left.
        let x_of = |t: &str| {
            let t = chrono::DateTime::parse_from_rfc3339(t).unwrap();
            let before = (end - t).num_milliseconds().max(0) as f64;
            PLOT_LEFT + PLOT_W * (1.0 - (before / window).min(1.0))
        };
        for series in [
            "rows_per_second",
            "files_per_second",
            "files_outstanding",
            "bytes_outstanding",
        ] {
            let tag = tag_with(svg, &format!("data-series=\"{series}\""));
            let values: Vec<f64> = attr(tag, "data-values")
                .split_whitespace()
                .map(|v| v.parse().unwrap())
                .collect();
            let times: Vec<&str> = attr(tag, "data-times").split_whitespace().collect();
            let max: f64 = attr(tag, "data-max").parse().unwrap();
            let coords: Vec<(f64, f64)> = attr(tag, "points")
                .split_whitespace()
                .map(|xy| {
                    let (x, y) = xy.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            assert!(
                values.len() >= 3,
                "{name} {series}: {} points",
                values.len()
            );
            assert_eq!((times.len(), coords.len()), (values.len(), values.len()));
            for ((v, t), (x, py)) in values.iter().zip(&times).zip(&coords) {
                let api = at(t)[series].as_f64().unwrap();
                assert!(
                    close(*v, api),
                    "{name} {series} at {t}: drawn {v}, API {api}"
                );
                // Drawn where the value says: the top is the round maximum, the bottom zero.
                assert!(*v <= max, "{name} {series}: {v} above the top {max}");
                assert!(
                    (py - y(*v, max)).abs() < 0.01,
                    "{name} {series}: {v} at y {py}"
                );
                assert!((PLOT_TOP..=PLOT_TOP + PLOT_H).contains(py));
                assert!((x - x_of(t)).abs() < 0.01, "{name} {series}: {t} at x {x}");
            }
            assert!(
                coords.windows(2).all(|w| w[0].0 < w[1].0),
                "{name} {series}: time runs right"
            );
            // The API's points between the chart's first and last are all drawn.
            let first = points.iter().position(|p| p["t"] == times[0]).unwrap();
            assert_eq!(
                points[first..first + times.len()]
                    .iter()
                    .map(|p| p["t"].as_str().unwrap())
                    .collect::<Vec<_>>(),
                times
            );
        }
        // Batch durations: every bar is one phase of a point the API has, with its mean.
        let bars: Vec<&str> = svg
            .split("<rect")
            .filter(|r| r.contains("data-phase="))
            .collect();
        for bar in &bars {
            let t = attr(bar, "data-t");
            let phase = attr(bar, "data-phase");
            let ms: f64 = attr(bar, "data-ms").parse().unwrap();
            let api = at(t)["batch_ms"][phase].as_f64().unwrap();
            assert!(
                close(ms, api),
                "{name} {phase} at {t}: drawn {ms}, API {api}"
            );
        }
        let (_, progress) = get_json(addr, &format!("/api/v1/streams/{name}/progress?limit=10"));
        let progress = progress["progress"].as_array().unwrap();
        if name == "bad" {
            assert!(progress.is_empty());
            assert!(
                sec.contains("no batch committed by this process yet"),
                "{sec}"
            );
            assert!(bars.is_empty());
        } else {
            // The batch is in the timeline: a step with rows, and its bars.
            assert!(!progress.is_empty());
            assert!(
                points
                    .iter()
                    .any(|p| p["rows_per_second"].as_f64().unwrap() > 0.0
                        && p["batches"].as_u64().unwrap() > 0),
                "{name}: no step with the batch: {tl}"
            );
            assert_eq!(bars.len() % 5, 0);
            assert!(!bars.is_empty(), "{name}: no batch bar");
        }
        for p in progress {
            let id = p["batch_id"].to_string();
            let c = row_cells(sec, "batches", &id);
            assert_eq!(
                c["files"].0,
                p["num_input_files"].to_string(),
                "{name} batch {id}"
            );
            assert_eq!(
                c["rows"].0,
                p["num_input_rows"].to_string(),
                "{name} batch {id}"
            );
            assert_eq!(c["table_version"].0, p["sink"]["table_version"].to_string());
            assert_eq!(c["duration"].1, p["duration_ms"]["total"].to_string());
            assert_eq!(c["time"].1, p["timestamp"].as_str().unwrap());
        }
        // Skipped files: the page's list is the endpoint's, the hostile name as text.
        let (_, skipped) = get_json(addr, &format!("/api/v1/streams/{name}/skipped"));
        let in_ledger = tag_with(sec, "data-field=\"skipped_in_ledger\"");
        assert_eq!(
            attr(in_ledger, "data-value"),
            skipped["in_ledger"].to_string()
        );
        let recent = skipped["recent"].as_array().unwrap();
        for (i, f) in recent.iter().enumerate() {
            let c = row_cells(sec, "skipped", &i.to_string());
            assert_eq!(c["path"].0, f["path"].as_str().unwrap());
            assert_eq!(c["reason"].0, f["reason"].as_str().unwrap());
            assert_eq!(c["reason"].1, f["kind"].as_str().unwrap());
        }
        if name == "skips" {
            assert_eq!(skipped["in_ledger"], 1, "{skipped}");
            assert_eq!(recent.len(), 1, "{skipped}");
            assert_eq!(recent[0]["kind"], "corrupt");
            assert!(recent[0]["path"].as_str().unwrap().ends_with(HOSTILE));
        } else {
            assert_eq!(skipped["in_ledger"], 0, "{name}: {skipped}");
            assert!(recent.is_empty());
        }
        // Schema versions.
        let (status, schemas) = get_json(addr, &format!("/api/v1/streams/{name}/schemas"));
        assert_eq!(status, 200, "{schemas}");
        let versions = schemas["versions"].as_array().unwrap();
        for v in versions {
            let c = row_cells(sec, "schemas", &v["version"].to_string());
            assert_eq!(c["schema"].0, v["schema"].as_str().unwrap());
            assert_eq!(c["reason"].0, v["reason"].as_str().unwrap());
        }
        if name != "bad" {
            assert_eq!(versions.len(), 1, "{name}: {schemas}");
            assert!(
                versions[0]["schema"]
                    .as_str()
                    .unwrap()
                    .contains("id BIGINT"),
                "{schemas}"
            );
        }
    }
    assert!(dom.contains("no [locations] configured"), "{dom}");
}
