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
    let got: Vec<&str> = r
        .iter()
        .map(|x| x["id"].as_str().unwrap_or("<null>"))
        .collect();
    assert_eq!(got, ["1", "2"], "{r:?}");
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
    assert_eq!(ids(&v, "id"), [1, 2]);

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

/// `json.prefers_decimal`: fractions are inferred as exact decimals (Spark's rules: 12.50 is
/// DECIMAL(4,2), 0.001 DECIMAL(3,3), a value past 38 digits keeps the column DOUBLE), nested
/// ones too, and a new column of fractions is a decimal as well. A later value with more
/// fraction digits than its column keeps is rescued with every digit, never rounded into it.
#[test]
fn prefers_decimal_infers_exact_decimals_and_rescues_what_would_be_rounded() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    put_file(
        &src,
        "a.json",
        "{\"id\":1,\"price\":12.50,\"rate\":0.001,\"big\":1e40,\"q\":{\"w\":3.25}}\n\
         {\"id\":2,\"price\":7.1,\"rate\":0.5,\"big\":2.5,\"q\":{\"w\":-0.5}}\n",
    );
    let cfg = config_in(
        root,
        r#"
[streams.d]
source = "{root}/src"
format = "json"
infer_column_types = true
json.prefers_decimal = true
sink.path = "{root}/table"
"#,
    );
    drain_stream(&cfg, "d");
    put_file(
        &src,
        "b.json",
        "{\"id\":3,\"price\":1.255,\"rate\":0.25,\"fee\":0.75}\n",
    );
    drain_stream(&cfg, "d");
    let v = verify("delta", &root.join("table"), Some("d"));
    let schema = &v["schema"];
    assert_eq!(schema["price"], "decimal(4,2)", "{schema}");
    assert_eq!(schema["rate"], "decimal(3,3)", "{schema}");
    assert_eq!(schema["big"], "double", "{schema}");
    assert_eq!(schema["fee"], "decimal(2,2)", "{schema}");
    assert!(schema["q"].to_string().contains("decimal(3,2)"), "{schema}");
    let rows = sorted_rows(&v, "id");
    assert_eq!(rows[0]["price"], "12.50");
    assert_eq!(rows[0]["rate"], "0.001");
    assert_eq!(rows[1]["price"], "7.10");
    assert_eq!(rows[1]["rate"], "0.500");
    assert_eq!(rows[1]["big"], "2.5");
    assert_eq!(rows[2]["rate"], "0.250");
    assert_eq!(rows[2]["fee"], "0.75");
    assert!(rows[2]["price"].is_null(), "{}", rows[2]);
    let rescued: Value = serde_json::from_str(rows[2]["_rescued_data"].as_str().unwrap()).unwrap();
    assert_eq!(rescued["price"].to_string(), "1.255", "{rescued}");
    assert!(rows[0]["_rescued_data"].is_null() && rows[1]["_rescued_data"].is_null());
}
