//! Helpers shared by the integration tests: run the real binary on a config, write NDJSON
//! inputs with known rows, and check tables with the independent Python reader
//! (tests/verify/verify_table.py: DuckDB log replay + the deltalake package).
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_landfall")
}

pub fn repo_root() -> PathBuf {
    // At run time first: a build cache shared between clones may hold a test binary built
    // in another checkout, whose compile-time path is gone.
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Run `landfall <args>` and return its output (not asserting success).
pub fn landfall(args: &[&str]) -> Output {
    landfall_env(args, &[])
}

/// Run `landfall <args>` with extra environment variables (failpoints).
pub fn landfall_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(bin())
        .env("LANDFALL_LISTEN", "127.0.0.1:0")
        .args(args)
        .env("LANDFALL_LOG", "info")
        .envs(env.iter().copied())
        .output()
        .expect("landfall runs")
}

/// `landfall run --available-now` that aborts at failpoint `point` (like `kill -9` there).
pub fn crash_at(config: &Path, point: &str) -> Output {
    let o = landfall_env(
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "--available-now",
        ],
        &[("LANDFALL_FAILPOINTS", &format!("{point}=1"))],
    );
    assert!(
        !o.status.success()
            && String::from_utf8_lossy(&o.stderr).contains(&format!("failpoint {point}")),
        "expected an abort at {point}:\n{}",
        text(&o)
    );
    o
}

/// `landfall state <stream> --format json` as JSON rows.
pub fn state_rows(config: &Path, stream: &str) -> Vec<Value> {
    json_rows(config, &["state", stream])
}

/// `landfall <command...> --config <config> --format json`: the JSON array it prints.
pub fn json_rows(config: &Path, command: &[&str]) -> Vec<Value> {
    let mut args = command.to_vec();
    args.extend(["--config", config.to_str().unwrap(), "--format", "json"]);
    let o = landfall(&args);
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice::<Value>(&o.stdout)
        .expect("landfall prints JSON")
        .as_array()
        .unwrap()
        .clone()
}

/// The state row whose path ends with `/name`.
pub fn state_of<'a>(rows: &'a [Value], name: &str) -> &'a Value {
    rows.iter()
        .find(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.ends_with(&format!("/{name}")))
        })
        .unwrap_or_else(|| panic!("no state row for {name} in {rows:?}"))
}

pub fn text(o: &Output) -> String {
    format!(
        "--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `landfall run --available-now` that must succeed.
pub fn drain(config: &Path) -> Output {
    let o = landfall(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--available-now",
    ]);
    assert!(o.status.success(), "landfall run failed:\n{}", text(&o));
    o
}

/// The malformed rows a run's summary reports, over all its streams (`..., N malformed
/// row(s)` on each `this run:` line). Fails the test when no summary line is found.
pub fn malformed_rows(o: &Output) -> u64 {
    let out = String::from_utf8_lossy(&o.stdout);
    let counts: Vec<u64> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("this run:"))
        .map(|l| {
            let before = l
                .rsplit_once(" malformed row(s)")
                .unwrap_or_else(|| panic!("no malformed count in `{l}`"))
                .0;
            before
                .rsplit(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no malformed count in `{l}`"))
        })
        .collect();
    assert!(!counts.is_empty(), "no run summary in:\n{}", text(o));
    counts.iter().sum()
}

/// One NDJSON line with a known id.
pub fn row(id: u64) -> String {
    format!(
        "{{\"id\":{id},\"name\":\"n{id}\",\"amount\":{}.5,\"tag\":\"t{}\"}}\n",
        id % 1000,
        id % 7
    )
}

/// Write file `name` under `dir` holding rows `ids`.
pub fn write_rows(dir: &Path, name: &str, ids: impl Iterator<Item = u64>) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let body: String = ids.map(row).collect();
    let tmp = path.with_extension("tmp-writing");
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(tmp, path).unwrap();
}

/// Rows of the table as the independent reader sees them.
pub fn verify(kind: &str, table: &Path, stream: Option<&str>) -> Value {
    match stream {
        Some(s) => verify_args(kind, table, &["--stream", s]),
        None => verify_args(kind, table, &[]),
    }
}

/// The independent verifier with extra arguments (`--orphans`, `--stats`, ...).
pub fn verify_args(kind: &str, table: &Path, args: &[&str]) -> Value {
    let script = repo_root().join("tests/verify/verify_table.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(kind)
        .arg(table)
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "independent verification failed:\n{}",
        text(&o)
    );
    serde_json::from_slice(&o.stdout).expect("verifier prints JSON")
}

/// The sorted values of integer column `col`.
pub fn ids(v: &Value, col: &str) -> Vec<u64> {
    let mut out: Vec<u64> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r[col]
                .as_str()
                .unwrap_or_else(|| panic!("no {col} in {r}"))
                .parse()
                .unwrap()
        })
        .collect();
    out.sort_unstable();
    out
}

/// Assert `got` is exactly `0..n` style `expected`: reports lost and duplicated ids.
pub fn assert_exactly(got: &[u64], expected: &[u64]) {
    use std::collections::BTreeMap;
    let mut counts: BTreeMap<u64, i64> = BTreeMap::new();
    for id in expected {
        *counts.entry(*id).or_default() -= 1;
    }
    for id in got {
        *counts.entry(*id).or_default() += 1;
    }
    let lost: Vec<_> = counts
        .iter()
        .filter(|(_, c)| **c < 0)
        .map(|(k, _)| *k)
        .take(20)
        .collect();
    let dup: Vec<_> = counts
        .iter()
        .filter(|(_, c)| **c > 0)
        .map(|(k, _)| *k)
        .take(20)
        .collect();
    assert!(
        lost.is_empty() && dup.is_empty(),
        "rows lost (first 20): {lost:?}; rows duplicated or unexpected (first 20): {dup:?}; got {} rows, expected {}",
        got.len(),
        expected.len()
    );
}

/// The Delta table's latest version, read from the log directory.
pub fn delta_version(table: &Path) -> i64 {
    let Ok(log) = std::fs::read_dir(table.join("_delta_log")) else {
        return -1;
    };
    log.filter_map(|e| {
        e.ok()?
            .file_name()
            .to_str()?
            .strip_suffix(".json")?
            .parse::<i64>()
            .ok()
    })
    .max()
    .unwrap_or(-1)
}

pub fn write_config(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("landfall.toml");
    std::fs::write(&p, body).unwrap();
    p
}

/// Write a config whose `[server]` section keeps state under `root`; `{root}` in `streams` is
/// replaced by the directory.
pub fn config_in(root: &Path, streams: &str) -> PathBuf {
    let body = format!("[server]\nstate_dir = \"{{root}}/state\"\n{streams}");
    write_config(root, &body.replace("{root}", &root.display().to_string()))
}

/// The verifier's row whose `id` column is `id`.
pub fn row_by_id(v: &Value, id: u64) -> &Value {
    let id = id.to_string();
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap_or_else(|| panic!("no row with id {id}"))
}

/// `landfall run --available-now --stream <stream>` that must succeed.
pub fn drain_stream(config: &Path, stream: &str) -> Output {
    let o = landfall(&[
        "run",
        "--config",
        config.to_str().unwrap(),
        "--available-now",
        "--stream",
        stream,
    ]);
    assert!(
        o.status.success(),
        "landfall run --stream {stream} failed:\n{}",
        text(&o)
    );
    o
}

/// Write a Parquet file of rows `ids` (columns id BIGINT, name STRING) with pyarrow, atomically.
pub fn write_parquet_rows(dir: &Path, name: &str, ids: impl Iterator<Item = u64>) {
    write_parquet_row_groups(dir, name, ids, None)
}

/// [`write_parquet_rows`] with at most `row_group_size` rows per row group.
pub fn write_parquet_row_groups(
    dir: &Path,
    name: &str,
    ids: impl Iterator<Item = u64>,
    row_group_size: Option<usize>,
) {
    std::fs::create_dir_all(dir).unwrap();
    let ids: Vec<String> = ids.map(|i| i.to_string()).collect();
    let script = format!(
        "import pyarrow as pa, pyarrow.parquet as pq, os\n\
ids = [{}]\n\
t = pa.table({{'id': pa.array(ids, pa.int64()), 'name': pa.array(['n%d' % i for i in ids])}})\n\
pq.write_table(t, {tmp:?}, row_group_size={rg})\n\
assert pq.ParquetFile({tmp:?}).metadata.num_row_groups == {groups}\n\
os.rename({tmp:?}, {dst:?})\n",
        ids.join(","),
        rg = row_group_size.map_or("None".to_string(), |n| n.to_string()),
        groups = row_group_size.map_or(1, |n| ids.len().div_ceil(n).max(1)),
        tmp = dir.join(format!(".{name}.tmp")).display().to_string(),
        dst = dir.join(name).display().to_string(),
    );
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .output()
        .unwrap();
    assert!(o.status.success(), "pyarrow failed:\n{}", text(&o));
}

/// Bytes that no Parquet reader accepts (no footer magic).
pub fn write_corrupt_parquet(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join(name),
        b"PAR1 this is not a parquet file at all, no footer",
    )
    .unwrap();
}

/// moto server's address, started by scripts/test.sh.
pub fn moto_endpoint() -> String {
    std::env::var("LANDFALL_TEST_S3_ENDPOINT").expect(
        "LANDFALL_TEST_S3_ENDPOINT is not set: run the suite with scripts/test.sh, which starts moto server",
    )
}

/// The body of a `[stores.<name>]` section for moto server at `endpoint`.
pub fn moto_store_toml(endpoint: &str) -> String {
    format!(
        "endpoint = \"{endpoint}\"\nregion = \"us-east-1\"\naccess_key_id = \"test\"\nsecret_access_key = \"test\"\nallow_http = true"
    )
}

/// A fresh bucket, queue or prefix name: lowercase, unique per test run.
pub fn unique(tag: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("lf-{tag}-{}-{}", std::process::id(), n % 1_000_000_000)
}

/// Run tests/notify/aws.py (boto3 against moto server) and parse its JSON output.
pub fn aws(args: &[&str]) -> Value {
    let script = repo_root().join("tests/notify/aws.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(moto_endpoint())
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(o.status.success(), "aws.py {args:?} failed:\n{}", text(&o));
    serde_json::from_slice(&o.stdout).expect("aws.py prints JSON")
}

/// The URL of blob `name` in `container` of the emulator's account as Event Grid writes it
/// into an event: the service's own host (`https://<account>.blob.core.windows.net`), every
/// byte of the name but unreserved ones and `/` percent-encoded (`landing zone/é` ->
/// `landing%20zone/%C3%A9`). landfall takes the account and container from it, whatever
/// endpoint it reads the blobs from.
pub fn event_blob_url(container: &str, name: &str) -> String {
    let encoded: String = name
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("https://devstoreaccount1.blob.core.windows.net/{container}/{encoded}")
}

/// Azurite's blob and queue service URLs, started by scripts/test.sh.
pub fn azurite() -> (String, String) {
    let blob = std::env::var("AZURITE_BLOB_STORAGE_URL")
        .expect("AZURITE_BLOB_STORAGE_URL is not set: run the suite with scripts/test.sh");
    let queue = std::env::var("AZURITE_QUEUE_STORAGE_URL")
        .expect("AZURITE_QUEUE_STORAGE_URL is not set: run the suite with scripts/test.sh");
    (blob, queue)
}

/// Run tests/notify/azurite.py (Azure's Python SDK against Azurite).
pub fn az(args: &[&str]) -> Value {
    let (blob, queue) = azurite();
    let o = Command::new("python3")
        .arg(repo_root().join("tests/notify/azurite.py"))
        .args([&blob, &queue])
        .args(args)
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "azurite.py {args:?} failed:\n{}",
        text(&o)
    );
    serde_json::from_slice(&o.stdout).expect("azurite.py prints JSON")
}

/// Standard base64 (Event Grid encodes queue messages with it).
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Files uploaded to moto one after another by a long-lived boto3 process, until stopped:
/// file `i` holds rows `rows * i .. rows * (i + 1)` and is written to the key the Python
/// expression `key` (of `i`) gives.
pub struct FlowingWriter {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    written: std::sync::Arc<std::sync::atomic::AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl FlowingWriter {
    pub fn start(bucket: &str, key: &str, rows: u64) -> Self {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let script = format!(
            "import boto3, sys\n\
s3 = boto3.client('s3', endpoint_url={endpoint:?}, aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\n\
for line in sys.stdin:\n    i = int(line)\n    body = ''.join('{{\"id\":%d,\"name\":\"n\",\"amount\":1.0,\"tag\":\"t\"}}\\n' % r for r in range({rows}*i, {rows}*i+{rows}))\n    s3.put_object(Bucket={bucket:?}, Key={key}, Body=body.encode())\n    print(i, flush=True)\n",
            endpoint = moto_endpoint(),
        );
        let thread = {
            let (stop, written) = (stop.clone(), written.clone());
            std::thread::spawn(move || {
                let mut child = Command::new("python3")
                    .args(["-c", &script])
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut input = child.stdin.take().unwrap();
                let mut output = std::io::BufReader::new(child.stdout.take().unwrap());
                let mut i = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    use std::io::{BufRead, Write};
                    writeln!(input, "{i}").unwrap();
                    let mut line = String::new();
                    output.read_line(&mut line).unwrap();
                    i += 1;
                    written.store(i, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                drop(input);
                child.wait().unwrap();
            })
        };
        FlowingWriter {
            stop,
            written,
            thread,
        }
    }

    /// Stop writing; how many files were written.
    pub fn stop(self) -> u64 {
        use std::sync::atomic::Ordering;
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap();
        self.written.load(Ordering::SeqCst)
    }
}

/// Start a continuous daemon on `config` and kill -9 it after a random `min_ms` to
/// `min_ms + spread_ms`, `times` times. Each daemon must still be running when it is killed and
/// its log (kept in the config's directory, `kill-<n>.log`) must hold no stream failure: a
/// continuous mode that crashed or stopped at start would otherwise reduce a crash test to its
/// final drain. The kill instants come from `LANDFALL_TEST_KILL_SEED` when set (else from the
/// clock), and the seed is printed, so a failure replays. Returns how many runs logged a
/// committed batch (the callers check progress against it).
pub fn kill_9_repeatedly(config: &Path, times: usize, min_ms: u64, spread_ms: u64) -> usize {
    let seed: u64 = match std::env::var("LANDFALL_TEST_KILL_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("LANDFALL_TEST_KILL_SEED `{s}` is not a number")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    };
    eprintln!("kill_9_repeatedly: LANDFALL_TEST_KILL_SEED={seed}");
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15 | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let dir = config.parent().unwrap();
    let mut progressed = 0;
    for n in 0..times {
        let log = dir.join(format!("kill-{n}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let mut daemon = Command::new(bin())
            .args(["run", "--config", config.to_str().unwrap()])
            .env("LANDFALL_LISTEN", "127.0.0.1:0")
            .env("LANDFALL_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let after = min_ms + next() % spread_ms;
        std::thread::sleep(std::time::Duration::from_millis(after));
        let alive = daemon.try_wait().unwrap().is_none();
        daemon.kill().unwrap();
        daemon.wait().unwrap();
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            alive,
            "run {n} (seed {seed}) exited before its kill at {after} ms:\n{text}"
        );
        for bad in ["stream failed", "stream stopped", "panicked", "giving up"] {
            assert!(
                !text.contains(bad),
                "run {n} (seed {seed}) logged `{bad}`:\n{text}"
            );
        }
        if text.contains("batch committed") {
            progressed += 1;
        }
    }
    progressed
}

/// `data` gzipped (flate2, an encoder independent of the decoder's write path).
pub fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut w = flate2::write::GzEncoder::new(Vec::new(), Default::default());
    w.write_all(data).unwrap();
    w.finish().unwrap()
}

/// Write `body` to `dir/name`, creating `dir`.
pub fn put_file(dir: &Path, name: &str, body: impl AsRef<[u8]>) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), body).unwrap();
}

/// `landfall schema <stream> --format json`: the stream's schema versions, oldest first.
pub fn schema_history(config: &Path, stream: &str) -> Vec<Value> {
    json_rows(config, &["schema", stream])
}
