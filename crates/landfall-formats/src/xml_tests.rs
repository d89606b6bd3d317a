use super::*;
use crate::{DecodeOptions, FileFormat, SchemaPolicy};
use arrow::array::{Array, AsArray};
use arrow::compute::concat_batches;
use arrow_schema::{DataType, Field, Schema};
use landfall_core::{Decoder, FileMeta};
use std::sync::Arc;

const BOOKS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- a catalog -->
<catalog xmlns:bk="urn:books">
  <bk:book id="b1" lang="en">
    <title>Rust &amp; Arrow</title>
    <author>Ann</author>
    <author>Bob</author>
    <price currency="EUR">12.5</price>
    <note><![CDATA[<raw> text]]></note>
  </bk:book>
  <book id="b2">
    <title>Delta</title>
    <author>Cy</author>
    <price>7</price>
    <empty/>
  </book>
</catalog>
"#;

fn fmt() -> XmlFormat {
    XmlFormat {
        row_tag: "book".into(),
        ..Default::default()
    }
}

#[test]
fn attributes_text_repeats_namespaces_and_entities() {
    let ndjson = xml_to_ndjson(BOOKS.as_bytes(), &fmt());
    let rows: Vec<Value> = ndjson
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    let b1 = &rows[0];
    assert_eq!(b1["_id"], "b1");
    assert_eq!(b1["_lang"], "en");
    assert_eq!(b1["title"], "Rust & Arrow");
    assert_eq!(b1["author"], serde_json::json!(["Ann", "Bob"]));
    assert_eq!(b1["price"]["_currency"], "EUR");
    assert_eq!(b1["price"]["_VALUE"], 12.5);
    assert_eq!(b1["note"], "<raw> text");
    // Shapes are made consistent across rows for inference: author repeats in b1, so it is
    // an array in b2 too; price has an attribute in b1, so it is a struct in b2.
    let b2 = &rows[1];
    assert_eq!(b2["author"], serde_json::json!(["Cy"]));
    assert_eq!(b2["price"], serde_json::json!({"_VALUE": 7}));
    assert!(b2["empty"].is_null());
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("_id", DataType::Utf8, true),
        Field::new(
            "author",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        ),
        Field::new(
            "price",
            DataType::Struct(
                vec![
                    Field::new("_VALUE", DataType::Float64, true),
                    Field::new("_currency", DataType::Utf8, true),
                ]
                .into(),
            ),
            true,
        ),
        Field::new("title", DataType::Utf8, true),
    ]))
}

fn decode(input: &[u8], cut: usize) -> (RecordBatch, Box<dyn Decoder>) {
    let opts = DecodeOptions {
        batch_size: 1,
        xml: fmt(),
        policy: SchemaPolicy::default(),
        ..Default::default()
    };
    let meta = FileMeta {
        path: "b.xml".into(),
        size: input.len() as u64,
        modified: chrono::Utc::now(),
        etag: None,
        version: None,
    };
    let mut d = crate::decoder(FileFormat::Xml, "b.xml", &meta, schema(), &opts).unwrap();
    let batches = crate::decode_in_two(d.as_mut(), input, cut);
    (concat_batches(&schema(), &batches).unwrap(), d)
}

/// Every cut of the input gives the same rows; a single author is an array of one, a price
/// with only text a struct with `_VALUE`.
#[test]
fn decodes_to_the_schema_at_every_cut() {
    for cut in 0..=BOOKS.len() {
        let (b, d) = decode(BOOKS.as_bytes(), cut);
        assert_eq!(b.num_rows(), 2, "cut {cut}");
        assert_eq!(
            d.malformed_rows(),
            0,
            "cut {cut}: {:?}",
            d.first_malformed()
        );
        let authors = b.column_by_name("author").unwrap().as_list::<i32>();
        assert_eq!(authors.value(0).len(), 2);
        assert_eq!(authors.value(1).len(), 1, "one element is an array of one");
        let price = b.column_by_name("price").unwrap().as_struct();
        let v = price
            .column_by_name("_VALUE")
            .unwrap()
            .as_primitive::<arrow::datatypes::Float64Type>();
        assert_eq!((v.value(0), v.value(1)), (12.5, 7.0));
        assert!(price.column_by_name("_currency").unwrap().is_null(1));
    }
}

#[test]
fn a_broken_row_is_one_malformed_record_and_the_rest_land() {
    let input = b"<r><book id=\"1\"><title>a</title></book><book id=\"2\"><title>b</oops></book><book id=\"3\"><title>c</title></book></r>";
    let (b, d) = decode(input, 20);
    let ids: Vec<&str> = (0..b.num_rows())
        .map(|i| b.column_by_name("_id").unwrap().as_string::<i32>().value(i))
        .collect();
    assert_eq!(ids, ["1", "3"]);
    assert_eq!(d.malformed_rows(), 1);
    assert!(d.first_malformed().unwrap().contains("not well-formed"));
    // Cut inside the last row: that row is malformed, the others land.
    let (b, d) = decode(&input[..input.len() - 12], 9);
    assert_eq!(b.num_rows(), 1);
    assert_eq!(d.malformed_rows(), 2);
}

#[test]
fn random_bytes_and_truncations_never_panic() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..300 {
        let mut input = BOOKS.as_bytes().to_vec();
        for _ in 0..(next() % 8) {
            let i = (next() as usize) % input.len();
            input[i] = (next() % 256) as u8;
        }
        input.truncate((next() as usize) % (input.len() + 1));
        let cut = (next() as usize) % (input.len() + 1);
        let opts = DecodeOptions {
            xml: fmt(),
            ..Default::default()
        };
        let meta = FileMeta {
            path: "r.xml".into(),
            size: 0,
            modified: chrono::Utc::now(),
            etag: None,
            version: None,
        };
        let mut d = crate::decoder(FileFormat::Xml, "r.xml", &meta, schema(), &opts).unwrap();
        let _ = d.push(Bytes::copy_from_slice(&input[..cut]));
        let _ = d.push(Bytes::copy_from_slice(&input[cut..]));
        let _ = d.finish();
    }
}

/// Comments and CDATA between rows are not rows; an attribute quote left open is one broken
/// row, not the end of the file's rows; booleans decode.
#[test]
fn markup_between_rows_and_an_unclosed_quote_cost_at_most_their_row() {
    let input = concat!(
        "<r><!-- <book id=\"99\"><title>no</title></book> -->",
        "<book id=\"1\"><title>a</title></book>",
        "<book id=\"2\"><title x=\"1>b</title></book>",
        "<book id=\"3\"><title>c</title></book><book id=\"4\"><title>d</title></book>",
        "<book id=\"5\"><title>e</title></book><book id=\"6\"><title>f</title></book>",
        "<book id=\"7\"><title>g</title></book><![CDATA[<book id=\"98\"/>]]></r>",
    );
    let (b, d) = decode(input.as_bytes(), 40);
    let ids: Vec<&str> = (0..b.num_rows())
        .map(|i| b.column_by_name("_id").unwrap().as_string::<i32>().value(i))
        .collect();
    assert!(!ids.contains(&"99") && !ids.contains(&"98"), "{ids:?}");
    assert!(ids.contains(&"1") && ids.contains(&"7"), "{ids:?}");
    assert!(d.malformed_rows() >= 1);
    assert!(
        ids.len() >= 3,
        "the unclosed quote costs a few rows at most: {ids:?}"
    );

    let schema = Arc::new(Schema::new(vec![Field::new("ok", DataType::Boolean, true)]));
    let opts = DecodeOptions {
        xml: fmt(),
        ..Default::default()
    };
    let meta = FileMeta {
        path: "b.xml".into(),
        size: 0,
        modified: chrono::Utc::now(),
        etag: None,
        version: None,
    };
    let mut d = crate::decoder(FileFormat::Xml, "b.xml", &meta, schema.clone(), &opts).unwrap();
    let input = b"<r><book><ok>true</ok></book><book><ok>false</ok></book></r>";
    let batches = crate::decode_in_two(d.as_mut(), input, 7);
    let b = concat_batches(&schema, &batches).unwrap();
    assert_eq!(
        b.column(0).as_boolean().values().iter().collect::<Vec<_>>(),
        [true, false]
    );
    assert_eq!(d.malformed_rows(), 0);
}
