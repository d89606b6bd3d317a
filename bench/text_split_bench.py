#!/usr/bin/env python3
"""Benchmark: one large `text` file decoded in parts on every core (the default separators, cut
at newlines, crates/landfall-engine/src/split.rs) against the same file decoded in one go (the
reference: the same stream with `line_sep = "\\n"`, which reads the same lines of a file that has
only `\\n` endings but is never cut), same binary, same file, runs alternating, medians.

  python3 bench/text_split_bench.py --bin <release landfall> [--mb 1024] [--runs 3]

Each run is a fresh `landfall run --available-now` into a local Delta table, measured by
bench/measure.py (wall time, peak RSS); every table is counted by the independent reader
(tests/verify/verify_table.py) and must hold every line. Release builds only.
"""
import argparse, json, os, shutil, statistics, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(cmd):
    out = subprocess.run([sys.executable, os.path.join(HERE, "measure.py")] + cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"benchmark command failed: {' '.join(cmd)}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def gen(path, mb):
    """Lines of 60 to 140 bytes (log-like), `mb` MB in all; returns the line count."""
    # The line count is kept beside the landing directory (a file in it would be ingested).
    count = os.path.join(os.path.dirname(os.path.dirname(path)), "lines")
    if os.path.exists(path) and os.path.exists(count):
        return int(open(count).read())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    n, size, target = 0, 0, mb * 1_000_000
    with open(path + ".tmp", "w") as f:
        while size < target:
            line = f"2026-12-06T21:{n % 60:02d}:{(n * 7) % 60:02d}Z host-{n % 97:02d} GET /api/v1/items/{n} 200 {n % 1000} ms " + "x" * (n % 80) + "\n"
            f.write(line)
            size += len(line)
            n += 1
    os.rename(path + ".tmp", path)
    open(count, "w").write(str(n))
    return n


def run(binary, landing, out, line_sep, expect):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cfg = os.path.join(out, "bench.toml")
    sep = 'text.line_sep = "\\n"\n' if line_sep else ""
    with open(cfg, "w") as fh:
        fh.write(f"""
[server]
state_dir = "{out}/state"
[streams.bench]
source = "{landing}"
format = "text"
{sep}[streams.bench.sink]
path = "{out}/delta"
""")
    m = measure([binary, "run", "--config", cfg, "--available-now"])
    v = subprocess.run([sys.executable, os.path.join(HERE, "..", "tests", "verify", "verify_table.py"), "delta", f"{out}/delta", "--count-only"], capture_output=True, text=True, check=True)
    got = json.loads(v.stdout)["rows"]
    if got != expect:
        sys.exit(f"the table has {got} rows, expected {expect}")
    shutil.rmtree(out, ignore_errors=True)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default=os.path.join(HERE, "out", "text_split"))
    a = ap.parse_args()
    landing = os.path.join(a.work, "landing")
    lines = gen(os.path.join(landing, "big.txt"), a.mb)
    size = os.path.getsize(os.path.join(landing, "big.txt"))
    tools = {"split": False, "one_go": True}
    runs = {t: [] for t in tools}
    for r in range(a.runs):
        order = list(tools) if r % 2 == 0 else list(reversed(tools))
        for t in order:
            m = run(a.bin, landing, os.path.join(a.work, "out"), tools[t], lines)
            runs[t].append(m)
            print(f"  [round {r + 1}] {t:7s} {m['wall_s']:7.2f} s  peak RSS {m['peak_rss_mb']:6.0f} MB", flush=True)
    res = {"input": {"bytes": size, "lines": lines}, "runs": a.runs}
    for t in tools:
        wall = statistics.median(m["wall_s"] for m in runs[t])
        res[t] = {"wall_s": round(wall, 2), "MB_s": round(size / 1e6 / wall, 1), "peak_rss_mb": round(statistics.median(m["peak_rss_mb"] for m in runs[t]), 1), "walls": [round(m["wall_s"], 2) for m in runs[t]]}
    res["ratio_split_over_one_go"] = round(res["one_go"]["wall_s"] / res["split"]["wall_s"], 2)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
