#!/usr/bin/env python3
"""Run one command and print its wall time and peak RSS (of it and its children) as JSON.
Run in a fresh process per measurement so RUSAGE_CHILDREN covers only that command."""
import json, resource, subprocess, sys, time

cmd = sys.argv[1:]
t = time.perf_counter()
p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
wall = time.perf_counter() - t
if p.returncode != 0:
    sys.stderr.write(p.stderr.decode(errors="replace")[-4000:])
    sys.exit(f"measure: {cmd[0]} exited {p.returncode}")
print(json.dumps({"wall_s": wall, "peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
