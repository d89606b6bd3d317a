#!/usr/bin/env python3
"""Commit cost against table size: does a Delta commit get slower as the table grows?

Writes --files one-row NDJSON files (default 100,000), each with its own value of a partition
column among --per-batch values, and runs `landfall run --available-now` with
`max_files_per_trigger = --per-batch` (default 10) and `partition_by = ["part"]`: every batch
commits --per-batch data files, so the default run makes 10,000 table versions and 100,000 data
files. The commit phase of every batch (its `duration_ms.commit` in the JSON progress log) is
collected in order; the script prints the p50 and p90 of each tenth of the run and the ratio of
the last 100 commits' p50 to the first 100's (the goal: within 2x, i.e. checkpoints are read and
no commit replays the whole log). The table is then checked: every row, counted independently.

  python3 bench/commit_cost.py --bin target-release/release/landfall [--files 100000]
                               [--per-batch 10] [--work DIR]
Use a release build: debug figures mislead.
"""
import argparse, json, os, shutil, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_bench import bench_config, table_rows  # noqa: E402  (one config writer and row count)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--per-batch", type=int, default=10)
    ap.add_argument("--work", default=os.path.join(HERE, "out", "commit_cost"))
    a = ap.parse_args()
    landing = os.path.join(a.work, "landing")
    if not (os.path.isdir(landing) and sum(len(f) for _, _, f in os.walk(landing)) == a.files):
        shutil.rmtree(landing, ignore_errors=True)
        os.makedirs(landing)
        for i in range(a.files):
            # Names sort in the order written, so batches take files in order.
            with open(os.path.join(landing, f"f-{i:07d}.json"), "w") as fh:
                fh.write(json.dumps({"id": i, "part": i % a.per_batch, "note": "x"}) + "\n")
    out = os.path.join(a.work, "out")
    cfg = bench_config(out, landing, "id BIGINT, part INT, note STRING", a.per_batch,
                       server='log_format = "json"', sink='partition_by = ["part"]')
    t = time.perf_counter()
    p = subprocess.run([a.bin, "run", "--config", cfg, "--available-now"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"landfall failed:\n{p.stderr[-3000:]}")
    commits, files = [], []
    for line in p.stderr.splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        fields = ev.get("fields", ev)
        if fields.get("message") != "batch progress":
            continue
        prog = json.loads(fields["progress"])
        commits.append(prog["duration_ms"]["commit"])
        files.append(fields.get("data_files"))
    if not commits:
        sys.exit("no batch progress events in the log")
    rows = table_rows(out)
    if rows != a.files:
        sys.exit(f"the table has {rows} rows, expected {a.files}")
    n = len(commits)
    print(f"{n} commits, {sum(f or 0 for f in files)} data files, {rows} rows verified, {wall:.1f} s in all ({n / wall:.1f} batches/s)")
    # The progress log counts whole milliseconds: below a few ms the p50 is all resolution, so
    # the mean is printed beside it, and the ratio is taken of the means when the p50 is under
    # 5 ms. The mean of a hundred leaves out its two slowest commits: the one in every 100 that
    # also writes a checkpoint (which holds every file of the table, so it grows with the
    # table by design; the max column shows it), and one more for noise.
    def trimmed(xs):
        return statistics.mean(sorted(xs)[:-max(1, len(xs) // 50)] if len(xs) > 10 else xs)
    print("commit ms by tenth of the run: p50 / p90 / mean without the slowest 2% / max (checkpoint commits)")
    for k in range(10):
        part = commits[k * n // 10:(k + 1) * n // 10]
        if part:
            q = statistics.quantiles(part, n=10) if len(part) > 1 else [part[0]] * 9
            print(f"  batches {k * n // 10 + 1:6d}-{(k + 1) * n // 10:6d}: {statistics.median(part):6.1f} / {q[8]:6.1f} / {trimmed(part):6.2f} / {max(part):6.0f}")
    first, last = statistics.median(commits[:100]), statistics.median(commits[-100:])
    mfirst, mlast = trimmed(commits[:100]), trimmed(commits[-100:])
    by_mean = last < 5
    ratio = (mlast / max(mfirst, 0.001)) if by_mean else (last / max(first, 0.001))
    print(f"p50 first 100: {first:.1f} ms, last 100: {last:.1f} ms; mean first 100: {mfirst:.2f} ms, last 100: {mlast:.2f} ms; ratio ({'means' if by_mean else 'p50'}) {ratio:.2f}x")
    print(json.dumps({"commits": n, "wall_s": round(wall, 1), "p50_first_100": first, "p50_last_100": last,
                      "mean_first_100": round(mfirst, 2), "mean_last_100": round(mlast, 2), "ratio": round(ratio, 2)}))


if __name__ == "__main__":
    main()
