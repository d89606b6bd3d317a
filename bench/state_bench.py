#!/usr/bin/env python3
"""`landfall state` over large ledgers: does it stream in constant memory?

Fills two ledgers with the admission benchmark (crates/landfall-state/examples/
admission_bench.rs, `--keep`): a small one (the reference, default 1,000,000 files) and a large
one (default 10,000,000), then prints every file of each with `landfall state <stream>
--format csv` and `--format json` (to /dev/null), in alternating rounds, each run in a fresh
process measured by bench/measure.py (wall time, peak RSS). Prints medians, rows per second,
and the ratio of the large ledger's peak RSS to the small one's: a listing that holds rows
shows a ratio near the ratio of sizes (10x), one that streams a ratio near 1. Each run's line
count is checked against the ledger's size (every file printed once).

  python3 bench/state_bench.py [--small N] [--large N] [--runs 3] [--bin target/release/landfall]

Release builds only (bash scripts/bench.sh builds one; the admission example is built here).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def fill(n, work):
    """A ledger of `n` tracked files under `work`, made by the admission benchmark."""
    ledger = os.path.join(work, f"ledger-{n}")
    os.makedirs(ledger)
    out = subprocess.run(
        [os.path.join(TARGET, "release", "examples", "admission_bench"), str(n), "--keep", ledger],
        check=True, capture_output=True, text=True,
    ).stdout
    print(f"filled {n:,} files: {out.strip()}", flush=True)
    # The benchmark admits 20 pages of 1,000 new files after the fill.
    return ledger, n + 20_000


def config(ledger, work, n):
    path = os.path.join(work, f"landfall-{n}.toml")
    with open(path, "w") as f:
        f.write(
            f"""[server]
state_dir = "{work}/state"

[streams.bench]
source = "{work}/landing"
format = "json"
schema = "a BIGINT"
state_dir = "{ledger}"

[streams.bench.sink]
format = "delta"
path = "{work}/table-{n}"
"""
        )
    return path


def measure(cmd):
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "measure.py"), *cmd],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def count_lines(bin_, cfg, fmt):
    """Rows printed: CSV lines after the header, JSON objects (one a line between [ and ])."""
    p = subprocess.Popen([bin_, "state", "bench", "--config", cfg, "--format", fmt], stdout=subprocess.PIPE)
    lines = sum(1 for _ in p.stdout)
    if p.wait() != 0:
        sys.exit(f"landfall state exited {p.returncode}")
    return lines - (1 if fmt == "csv" else 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=1_000_000)
    ap.add_argument("--large", type=int, default=10_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bin", default=os.path.join(TARGET, "release", "landfall"))
    args = ap.parse_args()
    subprocess.run(
        ["cargo", "build", "-q", "--release", "-p", "landfall-state", "--example", "admission_bench"],
        check=True, cwd=ROOT,
    )
    with tempfile.TemporaryDirectory(prefix="state-bench-") as work:
        sizes = {}
        for n in (args.small, args.large):
            ledger, files = fill(n, work)
            sizes[n] = (config(ledger, work, n), files)
        for fmt in ("csv", "json"):
            for n, (cfg, files) in sizes.items():
                got = count_lines(args.bin, cfg, fmt)
                if got != files:
                    sys.exit(f"{fmt}, {n:,}: printed {got:,} rows, the ledger holds {files:,}")
        results = {(n, fmt): [] for n in sizes for fmt in ("csv", "json")}
        for r in range(args.runs):
            order = list(results)
            order = order[r % len(order):] + order[: r % len(order)]
            for n, fmt in order:
                cfg, _ = sizes[n]
                results[(n, fmt)].append(
                    measure([args.bin, "state", "bench", "--config", cfg, "--format", fmt])
                )
        print()
        print("| ledger | format | wall (median) | rows/s | peak RSS (median) |")
        print("|---|---|---|---|---|")
        med = {}
        for (n, fmt), runs in results.items():
            wall = statistics.median(r["wall_s"] for r in runs)
            rss = statistics.median(r["peak_rss_mb"] for r in runs)
            med[(n, fmt)] = (wall, rss)
            files = sizes[n][1]
            print(f"| {files:,} files | {fmt} | {wall:.2f} s | {files / wall:,.0f} | {rss:.1f} MB |")
        for fmt in ("csv", "json"):
            small, large = med[(args.small, fmt)], med[(args.large, fmt)]
            print(
                f"{fmt}: peak RSS large / small = {large[1] / small[1]:.2f}x "
                f"for {args.large / args.small:.0f}x the files; "
                f"wall {large[0] / small[0]:.2f}x"
            )


if __name__ == "__main__":
    main()
