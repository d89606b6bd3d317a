//! The emulators scripts/test.sh starts: moto server (S3, SQS, SNS), Azurite (blobs,
//! queues), and the Python clients the tests drive them with.

#[allow(unused_imports)]
use super::*;
use serde_json::Value;
use std::process::Command;

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

/// An object_store client of `url` with `opts`.
pub fn store(
    url: &str,
    opts: &std::collections::BTreeMap<&str, &str>,
) -> std::sync::Arc<dyn object_store::ObjectStore> {
    let (s, _) = object_store::parse_url_opts(
        &url::Url::parse(url).unwrap(),
        opts.iter().map(|(k, v)| (*k, *v)),
    )
    .unwrap();
    std::sync::Arc::from(s)
}

/// An object_store client of `url` (`s3://bucket`) on moto server, with the test credentials.
pub fn moto_store(url: &str) -> std::sync::Arc<dyn object_store::ObjectStore> {
    let endpoint = moto_endpoint();
    let opts = std::collections::BTreeMap::from([
        ("aws_endpoint", endpoint.as_str()),
        ("aws_access_key_id", "test"),
        ("aws_secret_access_key", "test"),
        ("aws_region", "us-east-1"),
        ("allow_http", "true"),
    ]);
    store(url, &opts)
}

/// Copy every object under `prefix` of `s` into the directory `to`.
pub async fn download(
    s: &std::sync::Arc<dyn object_store::ObjectStore>,
    prefix: &str,
    to: &std::path::Path,
) {
    let p = object_store::path::Path::from(prefix);
    let metas: Vec<_> = futures::TryStreamExt::try_collect(s.list(Some(&p)))
        .await
        .unwrap();
    assert!(!metas.is_empty(), "nothing under {prefix}");
    for m in metas {
        let rel = m
            .location
            .as_ref()
            .strip_prefix(prefix)
            .unwrap()
            .trim_start_matches('/');
        let dest = to.join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        let bytes = object_store::ObjectStoreExt::get(s.as_ref(), &m.location)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        std::fs::write(dest, bytes).unwrap();
    }
}

/// A config with one JSON stream `cloud` of [`super::row`]'s lines, reading `source` through the store `emu`
/// (`store_toml`), `stream_extra` added to the stream's table and `sink` as its sink's table.
pub fn cloud_config(
    root: &std::path::Path,
    store_toml: &str,
    source: &str,
    stream_extra: &str,
    sink: &str,
) -> std::path::PathBuf {
    write_config(
        root,
        &format!(
            r#"
[server]
state_dir = "{local}/state"

[stores.emu]
{store_toml}

[streams.cloud]
source = "{source}"
source_store = "emu"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
{stream_extra}

[streams.cloud.sink]
{sink}
"#,
            local = root.display()
        ),
    )
}
