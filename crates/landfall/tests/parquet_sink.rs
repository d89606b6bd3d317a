//! Local directory -> plain Parquet directory with commit manifests.

mod common;
use common::*;

#[test]
fn parquet_directory_with_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for f in 0..5u64 {
        write_rows(
            &root.join("landing"),
            &format!("f{f}.json"),
            f * 20..f * 20 + 20,
        );
    }
    let cfg = config_in(
        root,
        r#"
[streams.pq]
source = "{root}/landing"
format = "json"
schema = "id BIGINT, name STRING, amount DOUBLE, tag STRING"
max_files_per_trigger = 2

[streams.pq.sink]
format = "parquet"
path = "{root}/out"
partition_by = ["tag"]
"#,
    );
    drain(&cfg);
    drain(&cfg);
    let v = verify("parquet", &root.join("out"), Some("pq"));
    assert_exactly(&ids(&v, "id"), &(0..100).collect::<Vec<_>>());
    let manifests = std::fs::read_dir(root.join("out/_landfall/manifests/pq"))
        .unwrap()
        .count();
    assert_eq!(manifests, 3, "5 files in batches of 2");
    let staged = walk(&root.join("out/_landfall/staging"));
    assert!(
        staged.is_empty(),
        "staged copies are removed after publication: {staged:?}"
    );
}

/// Every file below `p`; a directory that does not exist holds none (the staging directory
/// may be removed once empty), but one that cannot be read fails the test.
fn walk(p: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(p) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => panic!("{}: {e}", p.display()),
    };
    for e in rd {
        let e = e.unwrap();
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}
