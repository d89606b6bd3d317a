#!/usr/bin/env python3
"""Compaction against a continuous stream: an hour of one commit a second, replayed compressed.

The hour: --seconds one-file batches (default 3600), each file --rows NDJSON rows (default
100), written in --rounds rounds (default 12, one per 5 minutes, the default
`sink.compaction.check_interval`). Two tables are built side by side from the same files:

- `plain`: each round drained with `landfall run --available-now` (one commit per file);
- `compacted`: the same, then `landfall optimize` (the code the daemon's auto compaction runs
  every check_interval once `min_files` small files are there).

Then, for each table: its live data files (the log replayed by the `deltalake` package) and
DuckDB's time to read them all (`SELECT count(*), sum(id), max(note) FROM read_parquet([...])`),
alternating between the tables, medians of --reads (default 7). Every table is checked: every
row, counted by the independent reader. Prints the figures and the ratios.

  python3 bench/compaction_bench.py --bin target-release/release/landfall [--seconds 3600]
Use a release build: debug figures mislead.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_bench import bench_config, table_rows  # noqa: E402


def live_files(table):
    from deltalake import DeltaTable
    return DeltaTable(table).file_uris()


def duckdb_read(files):
    import duckdb
    con = duckdb.connect()
    t = time.perf_counter()
    rows, total, _ = con.execute(
        "SELECT count(*), sum(id), max(note) FROM read_parquet(?)", [files]).fetchone()
    return time.perf_counter() - t, rows, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--reads", type=int, default=7)
    ap.add_argument("--work", default=os.path.join(HERE, "out", "compaction"))
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    landing = os.path.join(a.work, "landing")
    os.makedirs(landing)
    outs = {k: os.path.join(a.work, k) for k in ("plain", "compacted")}
    cfgs = {k: bench_config(o, landing, "id BIGINT, note STRING", 1, server='log_format = "json"')
            for k, o in outs.items()}
    spent = {k: 0.0 for k in outs}
    optimize_s, compactions, rewritten = 0.0, 0, 0
    per_round = a.seconds // a.rounds
    n = 0
    for r in range(a.rounds):
        for _ in range(per_round):
            with open(os.path.join(landing, f"f-{n:07d}.json"), "w") as fh:
                for i in range(a.rows):
                    row_id = n * a.rows + i
                    fh.write(json.dumps({"id": row_id, "note": f"second {n} row {i}"}) + "\n")
            n += 1
        # Alternate which table drains first.
        for k in (("plain", "compacted") if r % 2 == 0 else ("compacted", "plain")):
            t = time.perf_counter()
            p = subprocess.run([a.bin, "run", "--config", cfgs[k], "--available-now"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            spent[k] += time.perf_counter() - t
            if p.returncode != 0:
                sys.exit(f"{k}: landfall failed:\n{p.stderr[-3000:]}")
        t = time.perf_counter()
        p = subprocess.run([a.bin, "optimize", "bench", "--config", cfgs["compacted"], "--format", "json"],
                           capture_output=True, text=True)
        took = time.perf_counter() - t
        if p.returncode != 0:
            sys.exit(f"optimize failed:\n{p.stderr[-3000:]}")
        rep = json.loads(p.stdout)
        optimize_s += took
        compactions += rep["version"] is not None
        rewritten += rep["bytes_rewritten"]
        print(f"round {r + 1}/{a.rounds}: {n} files; optimize {took:.2f} s, "
              f"{rep['files_removed']} -> {rep['files_added']} file(s)", flush=True)
    expect = n * a.rows
    files = {}
    for k, o in outs.items():
        got = table_rows(o)
        if got != expect:
            sys.exit(f"{k}: the table has {got} rows, expected {expect}")
        files[k] = live_files(os.path.join(o, "delta"))
    reads = {k: [] for k in outs}
    for i in range(a.reads):
        for k in (("plain", "compacted") if i % 2 == 0 else ("compacted", "plain")):
            s, rows, _ = duckdb_read(files[k])
            if rows != expect:
                sys.exit(f"{k}: DuckDB read {rows} rows, expected {expect}")
            reads[k].append(s)
    med = {k: statistics.median(v) for k, v in reads.items()}
    print()
    print(f"replayed: {a.seconds} one-second commits of {a.rows} rows ({expect} rows), "
          f"{a.rounds} rounds")
    print(f"{'table':<10} {'data files':>10} {'DuckDB read p50':>16} {'ingest':>9}")
    for k in outs:
        print(f"{k:<10} {len(files[k]):>10} {med[k]:>14.3f} s {spent[k]:>7.1f} s")
    print(f"files: {len(files['plain']) / max(1, len(files['compacted'])):.1f}x fewer with compaction; "
          f"DuckDB read {med['plain'] / med['compacted']:.1f}x faster; "
          f"{compactions} compaction(s) took {optimize_s:.1f} s in all and rewrote "
          f"{rewritten / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
