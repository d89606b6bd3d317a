//! The known ingest the operator's views (status page, `landfall top`) are checked against.

use super::*;
use crate::common::{bin, config_in, write_corrupt_parquet, write_rows};
use serde_json::Value;

/// The stream `name` of an `/api/v1/streams` answer, or null.
pub fn listed<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["streams"]
        .as_array()
        .and_then(|l| l.iter().find(|s| s["name"] == name))
        .unwrap_or(&Value::Null)
}

/// A daemon running stream `ev` (five JSON files, 15 rows, one batch) and stream `bad`, stopped
/// by the corrupt Parquet file `bad_file`, each stream's timeline sampled every 200 ms; `more`
/// adds streams (TOML; `{root}` is `root`). Returns it with `/api/v1/streams` once `ev`
/// committed, `bad` stopped and `ready` holds of the answer.
pub fn known_ingest(
    root: &Path,
    bad_file: &str,
    more: &str,
    ready: impl Fn(&Value) -> bool,
) -> (Daemon, Value) {
    for f in 0..5u64 {
        write_rows(
            &root.join("landing"),
            &format!("f{f}.json"),
            f * 3..f * 3 + 3,
        );
    }
    write_corrupt_parquet(&root.join("bad"), bad_file);
    let cfg = config_in(
        root,
        &format!(
            r#"chart_step = "200ms"
{more}
[streams.ev]
source = "{{root}}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
poll_interval = "100ms"
sink.path = "{{root}}/table"

[streams.bad]
source = "{{root}}/bad"
format = "parquet"
schema = "id BIGINT, name STRING"
poll_interval = "100ms"
sink.path = "{{root}}/bad_table"
"#
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let d = Daemon::start(bin(), &cfg, &root.join("daemon.log"), deadline);
    let list = loop {
        let (status, list) = get_json(&d.addr, "/api/v1/streams");
        assert_eq!(status, 200, "{list}");
        if listed(&list, "ev")["last_progress"]["num_input_rows"] == 15
            && listed(&list, "bad")["state"] == "stopped"
            && ready(&list)
        {
            break list;
        }
        assert!(Instant::now() < deadline, "no commit in time: {list}");
        std::thread::sleep(Duration::from_millis(100));
    };
    (d, list)
}
