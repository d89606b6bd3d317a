//! Input files with known rows: NDJSON lines, Parquet files written by pyarrow, and damaged
//! ones.

#[allow(unused_imports)]
use super::*;
use std::path::Path;
use std::process::Command;

/// The schema of [`row`]'s lines.
pub const ROW_SCHEMA: &str = "id BIGINT, name STRING, amount DOUBLE, tag STRING";

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
