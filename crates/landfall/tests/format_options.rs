//! JSON and CSV options end to end into Delta, checked by the independent reader: lenient JSON
//! (comments, single quotes, unquoted names) with primitives kept as strings, and CSV in
//! UTF-16 and ISO-8859-1 with rows to skip, trimming, empty and NaN values.

mod common;
use common::*;
use serde_json::Value;

fn sorted_rows(v: &Value, key: &str) -> Vec<Value> {
    let mut rows = v["data"].as_array().unwrap().clone();
    rows.sort_by_key(|r| r[key].as_str().unwrap_or("").to_string());
    rows
}

#[test]
fn lenient_json_and_csv_encodings_land_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let json = root.join("json");
    put_file(
        &json,
        "a.json",
        "// exported\n{id: 1, 'name': 'it\\'s', /* inline */ n: 2.5}\n{\"id\": 2, \"name\": \"b\", \"n\": 3}\n",
    );
    let csv = root.join("csv");
    let body = "report\nid,name,x\n1, Zoë ,NA\n2,,1.5\n";
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain(body.encode_utf16().flat_map(|u| u.to_le_bytes()))
        .collect();
    put_file(&csv, "a.csv", utf16);
    let latin = root.join("latin");
    put_file(&latin, "b.csv", b"report\nid,name,x\n3,caf\xe9,2\n");
    let cfg = config_in(
        root,
        r#"
[streams.j]
source = "{root}/json"
format = "json"
infer_column_types = true
json.allow_comments = true
json.allow_single_quotes = true
json.allow_unquoted_field_names = true
json.primitives_as_string = true
sink.path = "{root}/j_table"

[streams.jt]
source = "{root}/jt"
format = "json"
schema = "id BIGINT, at TIMESTAMP, day DATE"
rescued_data_column = "_rescued_data"
json.timestamp_format = "dd/MM/yyyy HH:mm"
json.date_format = "dd.MM.yyyy"
sink.path = "{root}/jt_table"

[streams.c16]
source = "{root}/csv"
format = "csv"
schema = "id BIGINT, name STRING, x DOUBLE"
csv.encoding = "UTF-16"
csv.skip_rows = 1
csv.ignore_leading_white_space = true
csv.ignore_trailing_white_space = true
csv.nan_value = "NA"
csv.empty_value = ""
sink.path = "{root}/c16_table"

[streams.c16i]
source = "{root}/csv"
format = "csv"
infer_column_types = true
csv.encoding = "UTF-16"
csv.skip_rows = 1
sink.path = "{root}/c16i_table"

[streams.c1]
source = "{root}/latin"
format = "csv"
schema = "id BIGINT, name STRING, x DOUBLE"
csv.encoding = "ISO-8859-1"
csv.skip_rows = 1
sink.path = "{root}/c1_table"
"#,
    );
    put_file(
        &root.join("jt"),
        "a.json",
        "{\"id\":1,\"at\":\"30/11/2026 13:05\",\"day\":\"30.11.2026\"}\n{\"id\":2,\"at\":\"soon\",\"day\":\"30.11.2026\"}\n",
    );
    for s in ["j", "jt", "c16", "c16i", "c1"] {
        drain_stream(&cfg, s);
    }
    let v = verify("delta", &root.join("j_table"), Some("j"));
    assert_eq!(
        v["schema"]["id"], "string",
        "primitives_as_string: {}",
        v["schema"]
    );
    assert_eq!(v["schema"]["n"], "string");
    let r = sorted_rows(&v, "id");
    assert_eq!(r.len(), 2);
    assert_eq!(r[0]["name"], "it's");
    assert_eq!(r[0]["n"], "2.5");
    assert!(r[0]["_rescued_data"].is_null(), "{}", r[0]);
    assert_eq!(r[1]["n"], "3");

    let v = verify("delta", &root.join("jt_table"), Some("jt"));
    let r = sorted_rows(&v, "id");
    assert_eq!(r[0]["at"], "2026-11-30T13:05:00", "UTC: {}", r[0]);
    assert_eq!(r[0]["day"], "2026-11-30");
    assert!(r[1]["at"].is_null());
    let rescued: Value = serde_json::from_str(r[1]["_rescued_data"].as_str().unwrap()).unwrap();
    assert_eq!(
        rescued["at"], "soon",
        "a value that does not match its format is rescued"
    );

    let v = verify("delta", &root.join("c16_table"), Some("c16"));
    let r = sorted_rows(&v, "id");
    assert_eq!(r[0]["name"], "Zoë", "trimmed, decoded from UTF-16");
    assert_eq!(r[0]["x"], "nan", "the verifier prints NaN as nan");
    assert_eq!(r[1]["name"], "", "empty_value: an empty string, not null");
    assert_eq!(r[1]["x"], "1.5");

    // Inference sees the file as the decoder does: transcoded, the report line skipped.
    let v = verify("delta", &root.join("c16i_table"), Some("c16i"));
    assert_eq!(v["schema"]["id"], "long", "{}", v["schema"]);
    assert_eq!(v["data"].as_array().unwrap().len(), 2);

    let v = verify("delta", &root.join("c1_table"), Some("c1"));
    assert_eq!(sorted_rows(&v, "id")[0]["name"], "café");

    // An encoding that is not supported is refused with the ones that are.
    let bad = config_in(
        root,
        r#"
[streams.x]
source = "{root}/latin"
format = "csv"
csv.encoding = "EBCDIC"
sink.path = "{root}/x_table"
"#,
    );
    let o = landfall(&["check", "--config", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o).contains("UTF-16LE"), "{}", text(&o));
}
