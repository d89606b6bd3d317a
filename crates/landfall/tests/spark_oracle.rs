//! Differential test against Spark (issue 16): Auto Loader's schema inference is Spark's, so
//! landfall's inferred schema for each case of tests/spark/corpus.py must be the one Spark 4
//! infers (tests/spark/oracle.py, one local session for the whole corpus), column by column and
//! in the same order; for the cases that say so, the rows landfall commits (read back by the
//! independent verifier) must be Spark's permissive read of the same files, a row Spark marks
//! corrupt being one with rescued data here.
//!
//! A difference fails the test unless tests/spark/intended_differences.json lists it (case,
//! column, both answers) under an id that docs/schema-evolution.md names with its reason; a
//! listed difference that no longer happens fails too, so the list stays true. Needs pyspark
//! (tests/requirements.txt) and Java 17; no emulators.

mod common;

use common::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Where landfall and Spark disagree: `column` is a column name, `(order)` for the column
/// order, `(rows)` for the rows, `*` when Spark refused the case.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Difference {
    case: String,
    column: String,
    landfall: String,
    spark: String,
}

impl Difference {
    fn new(
        case: &str,
        column: &str,
        landfall: impl Into<String>,
        spark: impl Into<String>,
    ) -> Self {
        Difference {
            case: case.into(),
            column: column.into(),
            landfall: landfall.into(),
            spark: spark.into(),
        }
    }
}

const RESCUED: &str = "_rescued_data";

fn oracle(root: &Path) -> Value {
    let out = root.join("spark.json");
    let started = std::time::Instant::now();
    let o = Command::new("python3")
        .arg(repo_root().join("tests/spark/oracle.py"))
        .arg(root.join("corpus"))
        .arg(&out)
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "the Spark oracle failed (pip install -r tests/requirements.txt; it needs Java 17):\n{}",
        text(&o)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    eprintln!(
        "spark {}: {} cases in {:.1}s",
        v["spark_version"],
        v["cases"].as_object().unwrap().len(),
        started.elapsed().as_secs_f64()
    );
    v
}

/// One stream per case, reading the case's directory as Auto Loader would.
fn config(root: &Path, cases: &serde_json::Map<String, Value>) -> std::path::PathBuf {
    let mut streams = String::new();
    for (id, c) in cases {
        streams.push_str(&format!(
            "\n[streams.{id}]\nsource = \"{{root}}/corpus/{id}\"\nformat = \"{}\"\n\
             infer_column_types = {}\nsink.path = \"{{root}}/tables/{id}\"\n",
            c["format"].as_str().unwrap(),
            c["typed"].as_bool().unwrap(),
        ));
        for line in c["landfall"].as_array().unwrap() {
            streams.push_str(line.as_str().unwrap());
            streams.push('\n');
        }
    }
    config_in(root, &streams)
}

/// The first schema landfall stored for `stream`: its columns as (name, DDL type).
fn inferred(cfg: &Path, stream: &str) -> Vec<(String, String)> {
    let history = schema_history(cfg, stream);
    let first = history
        .iter()
        .find(|v| v["version"] == 0)
        .unwrap_or_else(|| panic!("{stream}: no schema version 0 in {history:?}"));
    let schema = landfall_core::ddl::parse_schema(first["schema"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{stream}: {e}: {first}"));
    schema
        .fields()
        .iter()
        .map(|f| {
            (
                f.name().clone(),
                landfall_core::ddl::type_to_ddl(f.data_type()),
            )
        })
        .collect()
}

fn schema_differences(case: &str, ours: &[(String, String)], spark: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    let shown = |cols: &[(String, String)]| {
        cols.iter()
            .map(|(n, t)| format!("{n} {t}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !spark["error"].is_null() {
        out.push(Difference::new(
            case,
            "*",
            shown(ours),
            spark["error"].as_str().unwrap(),
        ));
        return out;
    }
    if spark["corrupt_record"] == true {
        out.push(Difference::new(case, "_corrupt_record", "absent", "STRING"));
    }
    let theirs: Vec<(String, String)> = spark["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c[0].as_str().unwrap().into(), c[1].as_str().unwrap().into()))
        .collect();
    let mine: BTreeMap<&str, &str> = ours.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let spark_cols: BTreeMap<&str, &str> = theirs
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let names: std::collections::BTreeSet<&str> =
        mine.keys().chain(spark_cols.keys()).copied().collect();
    for n in names {
        let (a, b) = (mine.get(n), spark_cols.get(n));
        if a != b {
            out.push(Difference::new(
                case,
                n,
                a.copied().unwrap_or("absent"),
                b.copied().unwrap_or("absent"),
            ));
        }
    }
    let order = |cols: &[(String, String)], other: &BTreeMap<&str, &str>| {
        cols.iter()
            .filter(|(n, _)| other.contains_key(n.as_str()))
            .map(|(n, _)| n.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (a, b) = (order(ours, &spark_cols), order(&theirs, &mine));
    if a != b {
        out.push(Difference::new(case, "(order)", a, b));
    }
    out
}

/// Rows as comparable strings: data columns only, with whether the row had something wrong
/// (rescued data here, a corrupt record in Spark).
fn row_keys(rows: &[Value], flag: &str) -> Vec<String> {
    let mut out: Vec<String> = rows
        .iter()
        .map(|r| {
            let mut m = r.as_object().unwrap().clone();
            let bad = match m.remove(flag) {
                Some(Value::Bool(b)) => b,
                Some(Value::Null) | None => false,
                Some(_) => true,
            };
            m.insert("(bad)".into(), json!(bad));
            serde_json::to_string(&m).unwrap()
        })
        .collect();
    out.sort();
    out
}

fn row_differences(case: &str, root: &Path, spark: &Value) -> Vec<Difference> {
    let v = verify("delta", &root.join("tables").join(case), Some(case));
    let ours = row_keys(v["data"].as_array().unwrap(), RESCUED);
    let theirs = row_keys(spark["data"].as_array().unwrap(), "_corrupt");
    if ours == theirs {
        return Vec::new();
    }
    vec![Difference::new(
        case,
        "(rows)",
        ours.join("\n"),
        theirs.join("\n"),
    )]
}

/// The intended differences, each tagged with its id; every id must be named in the doc.
fn intended() -> BTreeMap<(String, String), (String, Difference)> {
    let path = repo_root().join("tests/spark/intended_differences.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let doc = std::fs::read_to_string(repo_root().join("docs/schema-evolution.md")).unwrap();
    let mut out = BTreeMap::new();
    for d in v["differences"].as_array().unwrap() {
        let id = d["id"].as_str().unwrap();
        assert!(
            doc.contains(&format!("`{id}`")) && !d["reason"].as_str().unwrap_or("").is_empty(),
            "intended difference `{id}` needs a reason and a mention in docs/schema-evolution.md"
        );
        for c in d["columns"].as_array().unwrap() {
            // A case's rows are listed as arrays of row keys (see `row_keys`).
            let s = |k: &str| match &c[k] {
                Value::Array(rows) => rows
                    .iter()
                    .map(|r| r.as_str().unwrap_or("").to_string())
                    .collect::<Vec<_>>()
                    .join("\n"),
                v => v.as_str().unwrap_or("").to_string(),
            };
            let diff = Difference::new(&s("case"), &s("column"), s("landfall"), s("spark"));
            let key = (diff.case.clone(), diff.column.clone());
            assert!(
                out.insert(key, (id.to_string(), diff)).is_none(),
                "{id}: {c} is listed twice"
            );
        }
    }
    out
}

/// Whether a found difference is the listed one: same answers on both sides, row for row for
/// a case's rows (Spark refusals are matched by case only, their text being long).
fn matches(listed: &Difference, found: &Difference) -> bool {
    if found.column == "*" {
        return true;
    }
    listed.landfall == found.landfall && listed.spark == found.spark
}

#[test]
fn inferred_schemas_and_rows_match_spark() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let spark = oracle(root);
    let cases = spark["cases"].as_object().unwrap();
    let cfg = config(root, cases);
    let o = landfall(&["run", "--config", cfg.to_str().unwrap(), "--available-now"]);
    assert!(o.status.success(), "landfall run failed:\n{}", text(&o));

    let mut found = Vec::new();
    for (id, c) in cases {
        let mut ours = inferred(&cfg, id);
        // Auto Loader's rescued-data column: after the data columns, before partition ones.
        let at = ours
            .iter()
            .position(|(n, _)| n == RESCUED)
            .unwrap_or_else(|| panic!("{id}: no {RESCUED} in {ours:?}"));
        let partitions = c["partitions"].as_array().unwrap().len();
        assert_eq!(
            at,
            ours.len() - 1 - partitions,
            "{id}: {RESCUED} follows the data columns and precedes the partition columns: {ours:?}"
        );
        ours.remove(at);
        found.extend(schema_differences(id, &ours, c));
        if c["rows"] == true {
            found.extend(row_differences(id, root, c));
        }
    }

    let listed = intended();
    let mut unexpected = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for f in &found {
        match listed.get(&(f.case.clone(), f.column.clone())) {
            Some((id, l)) if matches(l, f) => {
                seen.insert((f.case.clone(), f.column.clone()));
                eprintln!("intended difference {id}: {} {}", f.case, f.column);
            }
            _ => unexpected.push(f),
        }
    }
    let stale: Vec<_> = listed
        .iter()
        .filter(|(k, _)| !seen.contains(*k))
        .map(|(_, (id, d))| format!("{id}: {} {}", d.case, d.column))
        .collect();
    // LANDFALL_SPARK_DIFFERENCES=<file>: every difference found, as JSON (to list the rows of
    // an intended one exactly).
    if let Some(out) = std::env::var_os("LANDFALL_SPARK_DIFFERENCES") {
        let all: Vec<Value> = found
            .iter()
            .map(|d| {
                let rows = |t: &str| json!(t.split('\n').collect::<Vec<_>>());
                json!({"case": d.case, "column": d.column, "landfall": rows(&d.landfall), "spark": rows(&d.spark)})
            })
            .collect();
        std::fs::write(out, serde_json::to_string_pretty(&all).unwrap()).unwrap();
    }
    let report: Vec<String> = unexpected
        .iter()
        .map(|d| {
            format!(
                "{} / {}:\n  landfall: {}\n  spark:    {}",
                d.case, d.column, d.landfall, d.spark
            )
        })
        .collect();
    assert!(
        unexpected.is_empty() && stale.is_empty(),
        "landfall differs from Spark {} where no intended difference says so:\n{}\n\
         listed differences that no longer happen: {stale:?}",
        spark["spark_version"],
        report.join("\n")
    );
}
