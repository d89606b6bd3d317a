#!/usr/bin/env python3
"""Memory soak of a continuous stream: files keep arriving at a fixed rate while `landfall run`
ingests them; the daemon's RSS is sampled over time. A healthy daemon's RSS plateaus; a leak
shows as steady growth per ingested file.

  bench/soak_memory.py --bin target/release/landfall --minutes 10 --rate 100

Prints one line per sample (elapsed s, files written, files committed, RSS MB) and, at the end,
the RSS growth per 1,000 files between the first and second half of the run (the plateau test:
near zero when memory is bounded) as JSON. Runs only on loopback / local directories.
"""
import argparse, json, os, signal, subprocess, sys, tempfile, threading, time


def rss_mb(pid, field="VmRSS"):
    """A resident-memory figure of /proc/<pid>/status in MB: VmRSS (all), RssAnon (heap and
    other anonymous memory) or RssFile (mapped files: mostly the binary's own pages)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def committed(table):
    """Files committed so far: rows / rows per file, from the Delta log's add stats."""
    log = os.path.join(table, "_delta_log")
    rows = 0
    if not os.path.isdir(log):
        return 0
    for name in os.listdir(log):
        if name.endswith(".json"):
            with open(os.path.join(log, name)) as fh:
                for line in fh:
                    a = json.loads(line)
                    if "add" in a and a["add"].get("stats"):
                        rows += json.loads(a["add"]["stats"]).get("numRecords", 0)
    return rows // 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--rate", type=int, default=100, help="files per second")
    ap.add_argument("--sample", type=float, default=15, help="seconds between samples")
    ap.add_argument("--wrap", default="", help="a profiler to run the daemon under, e.g. heaptrack")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="landfall-soak-")
    landing, table = os.path.join(root, "landing"), os.path.join(root, "table")
    os.makedirs(landing)
    cfg = os.path.join(root, "landfall.toml")
    with open(cfg, "w") as fh:
        fh.write(f"""[server]
state_dir = "{root}/state"
listen = "127.0.0.1:0"

[streams.soak]
source = "{landing}"
format = "json"
schema = "id BIGINT, name STRING"
poll_interval = "1s"
sink.path = "{table}"
""")
    stop = threading.Event()
    written = [0]

    def writer():
        start = time.monotonic()
        while not stop.is_set():
            due = int((time.monotonic() - start) * a.rate)
            while written[0] < due:
                i = written[0]
                d = os.path.join(landing, f"d{i // 10000:04d}")
                os.makedirs(d, exist_ok=True)
                tmp = os.path.join(d, f".f{i:08d}.tmp")
                with open(tmp, "w") as fh:
                    fh.write(f'{{"id":{2*i},"name":"n"}}\n{{"id":{2*i+1},"name":"n"}}\n')
                os.rename(tmp, os.path.join(d, f"f{i:08d}.json"))
                written[0] += 1
            time.sleep(0.01)

    daemon = subprocess.Popen(a.wrap.split() + [a.bin, "run", "--config", cfg], stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(root, "daemon.log"), "w"),
                              env={**os.environ, "LANDFALL_LOG": "warn"}, start_new_session=True)
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    samples = []
    start = time.monotonic()
    try:
        while time.monotonic() - start < a.minutes * 60:
            time.sleep(a.sample)
            if daemon.poll() is not None:
                sys.exit(f"soak: the daemon exited ({daemon.returncode}); see {root}/daemon.log")
            s = (round(time.monotonic() - start), written[0], committed(table), round(rss_mb(daemon.pid), 1),
                 round(rss_mb(daemon.pid, "RssAnon"), 1), round(rss_mb(daemon.pid, "RssFile"), 1))
            samples.append(s)
            print(f"t={s[0]:>5}s written={s[1]:>7} committed={s[2]:>7} rss={s[3]:>7} MB"
                  f" (anon {s[4]} MB, file {s[5]} MB)", flush=True)
    finally:
        stop.set()
        # The whole process group: with --wrap the daemon is the wrapper's child.
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=60)
    half = len(samples) // 2
    first, mid, last = samples[0], samples[half], samples[-1]
    per_k = lambda x, y: (y[3] - x[3]) / max(1, (y[2] - x[2]) / 1000)
    print(json.dumps({
        "files_committed": last[2], "rss_first_mb": first[3], "rss_mid_mb": mid[3], "rss_last_mb": last[3],
        "mb_per_1000_files_first_half": round(per_k(first, mid), 3),
        "mb_per_1000_files_second_half": round(per_k(mid, last), 3),
        "anon_first_mb": first[4], "anon_mid_mb": mid[4], "anon_last_mb": last[4],
        "state_dir": f"{root}/state",
    }))


if __name__ == "__main__":
    main()
