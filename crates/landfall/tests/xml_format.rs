//! The `xml` format end to end into Delta, checked by the independent reader: attributes,
//! namespaces, repeated elements, entities and CDATA, a gzip file, type inference, a new
//! element later (schema evolution) and a broken row (counted, the rest lands).

mod common;
use common::*;
use serde_json::Value;

const FIRST: &str = r#"<?xml version="1.0"?>
<orders xmlns:o="urn:orders">
  <o:order id="1" status="open">
    <customer>Ann &amp; Co</customer>
    <item sku="a">2</item>
    <item sku="b">3</item>
    <total>12.5</total>
  </o:order>
  <order id="2" status="done">
    <customer><![CDATA[Bob <b>]]></customer>
    <item sku="c">1</item>
    <total>7</total>
  </order>
</orders>
"#;

#[test]
fn xml_rows_land_with_attributes_arrays_inference_and_evolution() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("src");
    put_file(&src, "a.xml", FIRST);
    let cfg = config_in(
        root,
        r#"
[streams.x]
source = "{root}/src"
format = "xml"
xml.row_tag = "order"
infer_column_types = true
sink.path = "{root}/x_table"
"#,
    );
    drain_stream(&cfg, "x");
    // Later: a gzip file with a new element, and a row that is not well-formed.
    let later = concat!(
        "<orders><order id=\"3\" status=\"open\"><customer>Cy</customer>",
        "<item sku=\"d\">4</item><total>1</total><coupon>XMAS</coupon></order>",
        "<order id=\"4\"><customer>Dee</oops></order>",
        "<order id=\"5\" status=\"open\"><customer>Eve</customer><total>2</total></order></orders>",
    );
    put_file(&src, "b.xml.gz", gzip(later.as_bytes()));
    let o = drain_stream(&cfg, "x");
    assert_eq!(malformed_rows(&o), 1, "{}", text(&o));

    let v = verify("delta", &root.join("x_table"), Some("x"));
    let schema = &v["schema"];
    assert_eq!(schema["_id"], "long", "{schema}");
    assert_eq!(
        schema["coupon"], "string",
        "the new element became a column: {schema}"
    );
    let mut rows = v["data"].as_array().unwrap().clone();
    rows.sort_by_key(|r| r["_id"].as_str().unwrap().parse::<u64>().unwrap());
    let ids: Vec<&str> = rows.iter().map(|r| r["_id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        ["1", "2", "3", "5"],
        "the broken row 4 is counted, not landed"
    );
    assert_eq!(rows[0]["customer"], "Ann & Co");
    assert_eq!(rows[1]["customer"], "Bob <b>");
    assert_eq!(rows[0]["total"], "12.5");
    assert!(rows[0]["coupon"].is_null());
    assert_eq!(rows[2]["coupon"], "XMAS");
    // item: an array of structs {_VALUE, _sku}; a single item is an array of one.
    let items = |r: &Value| -> Value { serde_json::from_str(r["item"].as_str().unwrap()).unwrap() };
    assert_eq!(
        items(&rows[0]),
        serde_json::json!([{"_VALUE": 2, "_sku": "a"}, {"_VALUE": 3, "_sku": "b"}])
    );
    assert_eq!(
        items(&rows[1]),
        serde_json::json!([{"_VALUE": 1, "_sku": "c"}])
    );
    assert!(rows[3]["item"].is_null());
    let history = schema_history(&cfg, "x");
    assert_eq!(history.len(), 2);
    assert_eq!(history[1]["reason"], "new columns: coupon");
}
