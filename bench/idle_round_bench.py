#!/usr/bin/env python3
"""An idle continuous stream over a large local prefix: what does a round cost when nothing
is new?

Seeds `--files` one-line NDJSON files (default 1,000,000, in directories of 1,000) in a local
directory, ingests them all with `landfall run --available-now` (timed, every row counted
afterwards by tests/verify/verify_table.py), then runs the daemon continuously on the same
stream (`incremental_listing = "on"`, `poll_interval = "1s"`, a large
`full_listing_interval`) and reads each round from its log ("no new files" / "files
discovered", with the listing's kind and `took_ms`): the first round of a run lists in full
(the reference), the next ones incrementally, after the discovery cursor. Prints the full
round's time, the median idle incremental round, their ratio, and the daemon's RSS. Then
writes `--new` files (sorting after every existing one), waits until the daemon has committed
them, and checks the table again.

  python3 bench/idle_round_bench.py --bin target/release/landfall [--files 1000000] [--rounds 10]

Release builds only.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PAT = re.compile(r"listing=(\w+) list_requests=(\d+) listed=(\d+) .*took_ms=(\d+)")


def seed(landing, start, n):
    for i in range(start, start + n):
        d = os.path.join(landing, f"d{i // 1000:05d}")
        if i % 1000 == 0 or i == start:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"part-{i:08d}.json"), "w") as f:
            f.write(f'{{"id": {i}, "note": "n{i}"}}\n')


def config(work, landing):
    path = os.path.join(work, "landfall.toml")
    with open(path, "w") as f:
        f.write(
            f"""[server]
state_dir = "{work}/state"

[streams.idle]
source = "{landing}"
format = "json"
schema = "id BIGINT, note STRING"
max_files_per_trigger = 10000
incremental_listing = "on"
full_listing_interval = 100000
poll_interval = "1s"

[streams.idle.sink]
format = "delta"
path = "{work}/table"
"""
        )
    return path


def table_rows(table):
    v = subprocess.run(
        [sys.executable, os.path.join(HERE, "..", "tests", "verify", "verify_table.py"), "delta", table, "--count-only"],
        capture_output=True, text=True, check=True,
    )
    return json.loads(v.stdout)["rows"]


def committed(table):
    """Rows of a table the daemon is writing to: a read that meets a commit half-written (a
    checkpoint being replaced) is retried by the caller's loop."""
    try:
        return table_rows(table)
    except subprocess.CalledProcessError as e:
        print(f"(a read during a commit failed, retried: {e.stderr.strip()[-300:]})", flush=True)
        return None


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=10, help="idle incremental rounds to time")
    ap.add_argument("--new", type=int, default=100)
    ap.add_argument("--work", help="working directory (default: a temporary one, removed)")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="idle-round-")
    landing = os.path.join(work, "landing")
    os.makedirs(landing, exist_ok=True)
    cfg = config(work, landing)
    t = time.perf_counter()
    seed(landing, 0, a.files)
    print(f"seeded {a.files:,} files in {time.perf_counter() - t:.1f} s", flush=True)

    t = time.perf_counter()
    subprocess.run([a.bin, "run", "--config", cfg, "--available-now"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ingest = time.perf_counter() - t
    rows = table_rows(f"{work}/table")
    if rows != a.files:
        sys.exit(f"the table has {rows:,} rows after the drain, expected {a.files:,}")
    print(f"ingested {a.files:,} files in {ingest:.1f} s ({a.files / ingest:,.0f} files/s); table checked", flush=True)

    env = dict(os.environ, LANDFALL_LOG="info,landfall_engine=debug", NO_COLOR="1")
    log_path = os.path.join(work, "daemon.log")
    log = open(log_path, "w")
    daemon = subprocess.Popen([a.bin, "run", "--config", cfg, "--listen", "127.0.0.1:0"],
                              stdout=log, stderr=subprocess.STDOUT, env=env)
    rounds, rss = [], []
    try:
        deadline = time.time() + 600
        while time.time() < deadline:
            time.sleep(0.5)
            with open(log_path) as f:
                rounds = [m.groups() for m in map(PAT.search, f) if m]
            if rounds:
                rss.append(rss_mb(daemon.pid))
            if sum(1 for r in rounds if r[0] == "incremental") >= a.rounds:
                break
        if daemon.poll() is not None:
            sys.exit(f"the daemon exited {daemon.returncode}; see {log_path}")
        t = time.perf_counter()
        seed(landing, a.files, a.new)
        while committed(f"{work}/table") != a.files + a.new:
            if time.perf_counter() - t > 120:
                sys.exit(f"{a.new} new files not committed within 120 s; see {log_path}")
            time.sleep(1)
        new_s = time.perf_counter() - t
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        log.close()

    rows = table_rows(f"{work}/table")
    if rows != a.files + a.new:
        sys.exit(f"the table has {rows:,} rows, expected {a.files + a.new:,}")
    full = [int(r[3]) for r in rounds if r[0] == "full"]
    incr = [r for r in rounds if r[0] == "incremental"]
    idle = [int(r[3]) for r in incr if r[2] == "0"]
    if not full or not idle:
        sys.exit(f"rounds seen: {rounds[:5]}...; see {log_path}")
    print()
    print(f"| round over {a.files:,} files | took (ms) | LIST calls | listed |")
    print("|---|---|---|---|")
    print(f"| first (full) | {full[0]:,} | {rounds[0][1]} | {rounds[0][2]} |")
    print(f"| idle incremental, median of {len(idle)} | {statistics.median(idle):,.0f} (min {min(idle):,}, max {max(idle):,}) | "
          f"{incr[0][1]} | 0 |")
    print(f"full / idle incremental: {full[0] / max(statistics.median(idle), 1):.1f}x")
    print(f"daemon RSS while idle: median {statistics.median(rss):.0f} MB, max {max(rss):.0f} MB")
    print(f"{a.new} new files committed {new_s:.1f} s after they were written; table checked ({a.files + a.new:,} rows)")
    if not a.work:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
