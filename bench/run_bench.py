#!/usr/bin/env python3
"""Benchmark: landfall --available-now into Delta against DuckDB's
COPY (SELECT * FROM read_json_auto(...)) TO '...' (FORMAT parquet), same data, same machine, one
script. Prints MB/s, rows/s, files/s and peak RSS for both, and the ratios.

Shapes: large = 100 NDJSON files, ~1 GB in all; small = 20,000 files of ~2 KB.
  python3 bench/run_bench.py [--shapes large,small] [--scale 1.0] [--work DIR] [--bin PATH]
The landfall binary defaults to the release build (scripts/bench.sh builds it).
"""
import argparse, json, os, shutil, subprocess, sys, textwrap

HERE = os.path.dirname(os.path.abspath(__file__))


def sh(args):
    subprocess.run(args, check=True)


def measure(cmd):
    out = subprocess.run([sys.executable, os.path.join(HERE, "measure.py")] + cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"benchmark command failed: {' '.join(cmd)}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def gen(dirpath, files, rows, pad):
    if os.path.isdir(dirpath) and len(os.listdir(dirpath)) == files:
        return
    shutil.rmtree(dirpath, ignore_errors=True)
    sh([sys.executable, os.path.join(HERE, "gen_ndjson.py"), "--out", dirpath, "--files", str(files), "--rows", str(rows), "--pad", str(pad)])


def dir_stats(d):
    total, n = 0, 0
    for root, _, fs in os.walk(d):
        for f in fs:
            total += os.path.getsize(os.path.join(root, f))
            n += 1
    return total, n


def run_shape(name, files, rows, pad, work, binary):
    landing = os.path.join(work, name, "landing")
    gen(landing, files, rows, pad)
    size, n = dir_stats(landing)
    total_rows = files * rows
    out = os.path.join(work, name, "out")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cfg = os.path.join(out, "bench.toml")
    with open(cfg, "w") as fh:
        fh.write(textwrap.dedent(f"""
            [server]
            state_dir = "{out}/state"
            [streams.bench]
            source = "{landing}"
            format = "json"
            schema = "order_id BIGINT, customer STRING, amount DOUBLE, currency STRING, ordered_at TIMESTAMP, note STRING"
            max_files_per_trigger = 1000
            [streams.bench.sink]
            path = "{out}/delta"
        """))
    lf = measure([binary, "run", "--config", cfg, "--available-now"])
    duck_sql = f"COPY (SELECT * FROM read_json_auto('{landing}/*.json')) TO '{out}/duck.parquet' (FORMAT parquet)"
    dk = measure([sys.executable, "-c", f"import duckdb; duckdb.sql({duck_sql!r})"])
    # The landfall table must hold every row (independent check).
    v = subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "verify", "verify_table.py"), "delta", f"{out}/delta", "--count-only"], capture_output=True, text=True, check=True)
    got = json.loads(v.stdout)["rows"]
    if got != total_rows:
        sys.exit(f"{name}: landfall table has {got} rows, expected {total_rows}")
    res = {}
    for who, m in (("landfall", lf), ("duckdb", dk)):
        s = m["wall_s"]
        res[who] = {"wall_s": round(s, 2), "MB_s": round(size / 1e6 / s, 1), "rows_s": int(total_rows / s), "files_s": int(n / s), "peak_rss_mb": round(m["peak_rss_mb"], 1)}
    res["input"] = {"files": n, "bytes": size, "rows": total_rows}
    res["ratio_landfall_over_duckdb_MB_s"] = round(res["landfall"]["MB_s"] / res["duckdb"]["MB_s"], 2)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="large,small")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply file counts (quick runs: 0.1)")
    ap.add_argument("--work", default=os.path.join(HERE, "out"))
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/landfall/target-release")), "release", "landfall"))
    a = ap.parse_args()
    shapes = {
        # ~10 MB per file: 50,000 rows of ~200 bytes.
        "large": (max(1, int(100 * a.scale)), 50_000, 90),
        # ~2 KB per file: 15 rows of ~140 bytes.
        "small": (max(1, int(20_000 * a.scale)), 15, 20),
    }
    results = {}
    for name in a.shapes.split(","):
        files, rows, pad = shapes[name]
        results[name] = run_shape(name, files, rows, pad, a.work, a.bin)
        r = results[name]
        print(f"\n== {name}: {r['input']['files']} files, {r['input']['bytes'] / 1e6:.1f} MB, {r['input']['rows']} rows")
        for who in ("landfall", "duckdb"):
            x = r[who]
            print(f"  {who:9s} {x['wall_s']:7.2f} s  {x['MB_s']:8.1f} MB/s  {x['rows_s']:10d} rows/s  {x['files_s']:7d} files/s  peak RSS {x['peak_rss_mb']:.0f} MB")
        print(f"  ratio landfall/duckdb MB/s: {r['ratio_landfall_over_duckdb_MB_s']}")
    print("\n" + json.dumps(results))


if __name__ == "__main__":
    main()
