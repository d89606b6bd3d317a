//! The first open of an older ledger: `N` discovered files (default 1,000,000) written as
//! format 2 wrote them (one column family: file record, queue entry and expiry entry each in
//! `default`), then timed: the open that moves the `p/` and `x/` keys into their families, and
//! the open after it. Prints JSON. Run by bench/move_bench.sh.
//!
//!   cargo run --release -p landfall-state --example move_bench [N]

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("N: a number of files"))
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let t = Instant::now();
    {
        let mut opts = rocksdb::Options::default();
        opts.create_if_missing(true);
        let db = rocksdb::DB::open(&opts, dir.path()).expect("open");
        for start in (1..=n).step_by(10_000) {
            let mut batch = rocksdb::WriteBatch::default();
            for i in start..(start + 10_000).min(n + 1) {
                let path = format!("landing/2026/11/30/{:02}/part-{i:010}.json", i % 24);
                let rec = format!(
                    r#"{{"key":"{path}","meta":{{"path":"{path}","size":1000,"modified":"2026-01-01T00:00:00Z","etag":"\"{i:032x}\""}},"state":"discovered","seq":{i},"discovery_time":"2026-01-01T00:00:01Z"}}"#
                );
                batch.put(format!("f/{path}"), rec);
                batch.put(format!("p/{i:020}"), &path);
                batch.put(
                    format!("x/{:020}/{path}", 1_767_225_600_000u64 + i as u64),
                    b"",
                );
            }
            db.write(batch).expect("write");
        }
        db.put("m/seq", n.to_string()).expect("write");
        db.put("m/format", "2").expect("write");
    }
    let written = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let l = landfall_state::open_rocks("bench", dir.path()).expect("the moving open");
    let moving = t.elapsed().as_secs_f64();
    drop(l);
    let t = Instant::now();
    let l = landfall_state::open_rocks("bench", dir.path()).expect("the next open");
    let next = t.elapsed().as_secs_f64();
    drop(l);
    println!(
        "{{\"files\": {n}, \"write_older_s\": {written:.2}, \"moving_open_s\": {moving:.2}, \
         \"keys_moved_per_s\": {}, \"next_open_s\": {next:.3}}}",
        (2.0 * n as f64 / moving) as u64
    );
}
