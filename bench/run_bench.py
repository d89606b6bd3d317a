#!/usr/bin/env python3
"""Benchmark: landfall --available-now into a local Delta table against DuckDB writing the same
NDJSON files to one Parquet file, same machine, one script, runs alternating.

Tools (each run in a fresh process measured by bench/measure.py: wall time, peak RSS):
  landfall      landfall run --available-now, explicit schema, into Delta (the table is checked
                after every run: every row, counted by tests/verify/verify_table.py)
  duckdb_typed  COPY (SELECT * FROM read_json(..., columns = {...})) TO ... (FORMAT parquet)
  duckdb_infer  COPY (SELECT * FROM read_json_auto(...)) TO ... (FORMAT parquet)
  baseline      another landfall binary (--baseline-bin), e.g. the previous commit's release build

Shapes: large = 100 files, ~1 GB in all; small = 20,000 files of ~2 KB; one = one ~1 GB file.
Each round runs every tool once, the order rotating from round to round; figures are medians of
--runs rounds (at least 3 for a figure worth keeping). Ratios are landfall's throughput over each
other tool's (above 1: landfall is faster) and the other tool's peak RSS over landfall's.

  python3 bench/run_bench.py [--shapes large,small,one] [--runs 3] [--scale 1.0]
                             [--baseline-bin PATH] [--work DIR] [--bin PATH]
The landfall binary defaults to the release build (scripts/bench.sh builds it); debug builds
mislead, so only release figures go into docs/benchmarks.md.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = "order_id BIGINT, customer STRING, amount DOUBLE, currency STRING, ordered_at TIMESTAMP, note STRING"
DUCK_COLUMNS = "{'order_id': 'BIGINT', 'customer': 'VARCHAR', 'amount': 'DOUBLE', 'currency': 'VARCHAR', 'ordered_at': 'TIMESTAMP', 'note': 'VARCHAR'}"


def measure(cmd, env=None):
    out = subprocess.run([sys.executable, os.path.join(HERE, "measure.py")] + cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"benchmark command failed: {' '.join(cmd)}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def gen(dirpath, files, rows, pad):
    if os.path.isdir(dirpath) and len(os.listdir(dirpath)) == files:
        return
    shutil.rmtree(dirpath, ignore_errors=True)
    subprocess.run([sys.executable, os.path.join(HERE, "gen_ndjson.py"), "--out", dirpath, "--files", str(files), "--rows", str(rows), "--pad", str(pad)], check=True)


def dir_stats(d):
    total, n = 0, 0
    for root, _, fs in os.walk(d):
        for f in fs:
            total += os.path.getsize(os.path.join(root, f))
            n += 1
    return total, n


def bench_config(out, landing, schema, per_trigger, server="", sink=""):
    """A fresh `out` directory with the config of one JSON stream `bench` from `landing` into a
    Delta table at `out`/delta; `server` and `sink` add lines to those tables. Returns its path."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cfg = os.path.join(out, "bench.toml")
    with open(cfg, "w") as fh:
        fh.write(f"""
[server]
state_dir = "{out}/state"
{server}
[streams.bench]
source = "{landing}"
format = "json"
schema = "{schema}"
max_files_per_trigger = {per_trigger}
[streams.bench.sink]
path = "{out}/delta"
{sink}
""")
    return cfg


def table_rows(out):
    """The rows of the Delta table at `out`/delta, counted by the independent reader."""
    v = subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "verify", "verify_table.py"), "delta", f"{out}/delta", "--count-only"], capture_output=True, text=True, check=True)
    return json.loads(v.stdout)["rows"]


def run_landfall(binary, landing, out, expect_rows):
    cfg = bench_config(out, landing, SCHEMA, 1000)
    m = measure([binary, "run", "--config", cfg, "--available-now"])
    # Every row, independently counted: a fast run that lost rows is no result.
    got = table_rows(out)
    if got != expect_rows:
        sys.exit(f"{binary}: the table has {got} rows, expected {expect_rows}")
    shutil.rmtree(out, ignore_errors=True)
    return m


def run_duckdb(landing, out, typed):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    reader = f"read_json('{landing}/*.json', format = 'newline_delimited', columns = {DUCK_COLUMNS})" if typed else f"read_json_auto('{landing}/*.json')"
    sql = f"COPY (SELECT * FROM {reader}) TO '{out}/duck.parquet' (FORMAT parquet)"
    m = measure([sys.executable, "-c", f"import duckdb; duckdb.sql({sql!r})"])
    shutil.rmtree(out, ignore_errors=True)
    return m


def run_shape(name, files, rows, pad, a):
    landing = os.path.join(a.work, name, "landing")
    gen(landing, files, rows, pad)
    size, n = dir_stats(landing)
    total_rows = files * rows
    out = os.path.join(a.work, name, "out")
    tools = {
        "landfall": lambda: run_landfall(a.bin, landing, out, total_rows),
        "duckdb_typed": lambda: run_duckdb(landing, out, True),
        "duckdb_infer": lambda: run_duckdb(landing, out, False),
    }
    if a.baseline_bin:
        tools["baseline"] = lambda: run_landfall(a.baseline_bin, landing, out, total_rows)
    names = list(tools)
    runs = {t: [] for t in names}
    for r in range(a.runs):
        order = names[r % len(names):] + names[:r % len(names)]
        for t in order:
            m = tools[t]()
            runs[t].append(m)
            print(f"  [{name} round {r + 1}] {t:13s} {m['wall_s']:7.2f} s  peak RSS {m['peak_rss_mb']:6.0f} MB", flush=True)
    res = {"input": {"files": n, "bytes": size, "rows": total_rows}, "runs": a.runs}
    for t in names:
        wall = statistics.median(m["wall_s"] for m in runs[t])
        rss = statistics.median(m["peak_rss_mb"] for m in runs[t])
        res[t] = {"wall_s": round(wall, 2), "MB_s": round(size / 1e6 / wall, 1), "rows_s": int(total_rows / wall), "files_s": int(n / wall), "peak_rss_mb": round(rss, 1), "walls": [round(m["wall_s"], 2) for m in runs[t]]}
    lf = res["landfall"]
    res["ratios"] = {t: {"throughput": round(res[t]["wall_s"] / lf["wall_s"], 2), "memory": round(res[t]["peak_rss_mb"] / lf["peak_rss_mb"], 2)} for t in names if t != "landfall"}
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="large,small,one")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply file counts (one: rows) (quick runs: 0.1)")
    ap.add_argument("--work", default=os.path.join(HERE, "out"))
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/landfall/target-release")), "release", "landfall"))
    ap.add_argument("--baseline-bin", help="a second landfall binary run alternately with the first")
    a = ap.parse_args()
    shapes = {
        # ~10 MB per file: 50,000 rows of ~200 bytes.
        "large": (max(1, int(100 * a.scale)), 50_000, 90),
        # ~2 KB per file: 15 rows of ~140 bytes.
        "small": (max(1, int(20_000 * a.scale)), 15, 20),
        # One ~1 GB file: 5,000,000 rows of ~200 bytes.
        "one": (1, max(1, int(5_000_000 * a.scale)), 90),
    }
    commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"landfall benchmark, commit {commit}, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, {a.runs} rounds", flush=True)
    results = {}
    for name in a.shapes.split(","):
        files, rows, pad = shapes[name]
        r = results[name] = run_shape(name, files, rows, pad, a)
        print(f"\n== {name}: {r['input']['files']} files, {r['input']['bytes'] / 1e6:.1f} MB, {r['input']['rows']} rows (medians of {a.runs})")
        for t in [k for k in r if isinstance(r[k], dict) and "wall_s" in r[k]]:
            x = r[t]
            print(f"  {t:13s} {x['wall_s']:7.2f} s  {x['MB_s']:8.1f} MB/s  {x['rows_s']:10d} rows/s  {x['files_s']:7d} files/s  peak RSS {x['peak_rss_mb']:5.0f} MB  runs {x['walls']}")
        for t, q in r["ratios"].items():
            print(f"  landfall vs {t:13s} throughput {q['throughput']:5.2f}x   memory {q['memory']:5.2f}x less")
    print("\n" + json.dumps(results))


if __name__ == "__main__":
    main()
