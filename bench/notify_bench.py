#!/usr/bin/env python3
"""Notification mode against listing mode on moto server (S3 + SQS on loopback).

Two continuous daemons run side by side, one per bucket: one reads S3 -> SQS events
(`discovery = "notifications"`, `processing_time = "0s"`), the reference lists its prefix
(`poll_interval = "1s"`, `processing_time = "0s"`).

1. PUT-to-commit latency: files are uploaded one at a time to both buckets; for each, the time
   from the end of the PUT to the daemon's `landfall_files_committed_total` counting it
   (polled every 10 ms). Prints p50/p99/max per mode and the ratio.
2. Requests per 1,000 files: a burst of files is uploaded to both buckets, and each daemon's
   `landfall_storage_requests_total{op}` grows by what, until every file is committed.
   The prefix also holds `--existing` files committed before the burst, as a real landing
   prefix does: listing cost grows with them, notification cost does not.

  source scripts/lib.sh && start_emulators   # exports LANDFALL_TEST_S3_ENDPOINT
  bench/notify_bench.py --bin target/debug/landfall --files 60 --burst 1000 --existing 2000
"""
import argparse, json, os, re, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.request

import boto3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def series(text, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        m = re.match(r"([a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total


def requests_by_op(text, stream):
    out = {}
    for line in text.splitlines():
        if line.startswith("landfall_storage_requests_total{"):
            got = dict(re.findall(r'(\w+)="([^"]*)"', line))
            if got.get("stream") == stream:
                out[got["op"]] = out.get(got["op"], 0) + float(line.rsplit(" ", 1)[1])
    return out


def committed_waiter(daemons, ports, root, **labels):
    """`wait(mode, n)`: poll daemon `mode`'s `landfall_files_committed_total` (samples with
    `labels`) every 10 ms until it reaches `n`; exit if the daemon dies or `limit` passes."""
    def committed(mode):
        try:
            return series(metrics(ports[mode]), "landfall_files_committed_total", **labels)
        except OSError:
            return -1

    def wait(mode, n, limit=600):
        t = time.monotonic()
        while committed(mode) < n:
            if daemons[mode].poll() is not None:
                sys.exit(f"{mode} daemon exited; see {root}/{mode}.log")
            if time.monotonic() - t > limit:
                sys.exit(f"{mode}: {committed(mode)} of {n} files committed after {limit} s")
            time.sleep(0.01)
    return wait


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--endpoint", default=os.environ.get("LANDFALL_TEST_S3_ENDPOINT"))
    ap.add_argument("--files", type=int, default=60, help="files for the latency part")
    ap.add_argument("--burst", type=int, default=1000, help="files for the request count")
    ap.add_argument("--existing", type=int, default=2000, help="files already in the prefix")
    a = ap.parse_args()
    if not a.endpoint:
        sys.exit("no moto endpoint: run `source scripts/lib.sh && start_emulators` or pass --endpoint")
    kw = dict(endpoint_url=a.endpoint, aws_access_key_id="test", aws_secret_access_key="test",
              region_name="us-east-1")
    s3, sqs = boto3.client("s3", **kw), boto3.client("sqs", **kw)
    tag = f"nb{os.getpid()}"
    buckets = {"notifications": f"{tag}-notify", "listing": f"{tag}-list"}
    for b in buckets.values():
        s3.create_bucket(Bucket=b)
    q = sqs.create_queue(QueueName=tag)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=q, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    s3.put_bucket_notification_configuration(Bucket=buckets["notifications"], NotificationConfiguration={
        "QueueConfigurations": [{"QueueArn": arn, "Events": ["s3:ObjectCreated:*"],
                                 "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "in/"}]}}}]})
    body = b'{"id":1,"name":"n"}\n'

    def put_all(prefix, n, start=0):
        for b in buckets.values():
            for i in range(start, start + n):
                s3.put_object(Bucket=b, Key=f"in/{prefix}/f{i:07d}.json", Body=body)

    put_all("old", a.existing)
    root = tempfile.mkdtemp(prefix="landfall-notify-bench-")
    daemons, ports = {}, {}
    for mode, bucket in buckets.items():
        ports[mode] = free_port()
        extra = (f'discovery = "notifications"\n[streams.s.notifications]\nqueue_url = "{q}"\n'
                 if mode == "notifications" else 'poll_interval = "1s"\n')
        cfg = os.path.join(root, f"{mode}.toml")
        with open(cfg, "w") as fh:
            fh.write(f"""[server]
state_dir = "{root}/{mode}-state"
listen = "127.0.0.1:{ports[mode]}"
[stores.moto]
endpoint = "{a.endpoint}"
region = "us-east-1"
access_key_id = "test"
secret_access_key = "test"
allow_http = true
[streams.s]
source = "s3://{bucket}/in"
source_store = "moto"
format = "json"
schema = "id BIGINT, name STRING"
trigger.processing_time = "0s"
sink.path = "{root}/{mode}-table"
{extra}""")
        daemons[mode] = subprocess.Popen([a.bin, "run", "--config", cfg], stdout=subprocess.DEVNULL,
                                         stderr=open(os.path.join(root, f"{mode}.log"), "w"),
                                         env={**os.environ, "LANDFALL_LOG": "warn"}, start_new_session=True)
    try:
        wait_committed = committed_waiter(daemons, ports, root, stream="s")

        for mode in buckets:
            wait_committed(mode, a.existing)
        # 1. Latency, one file at a time.
        lat = {m: [] for m in buckets}
        for i in range(a.files):
            for mode, b in buckets.items():
                s3.put_object(Bucket=b, Key=f"in/lat/f{i:07d}.json", Body=body)
                t = time.monotonic()
                wait_committed(mode, a.existing + i + 1)
                lat[mode].append(time.monotonic() - t)
        # 2. Requests per 1,000 files over a burst.
        before = {m: requests_by_op(metrics(ports[m]), "s") for m in buckets}
        put_all("burst", a.burst)
        for mode in buckets:
            wait_committed(mode, a.existing + a.files + a.burst)
        after = {m: requests_by_op(metrics(ports[m]), "s") for m in buckets}
    finally:
        for d in daemons.values():
            os.killpg(d.pid, signal.SIGTERM)
        for d in daemons.values():
            d.wait(timeout=60)
    out = {"files_latency": a.files, "burst": a.burst, "existing": a.existing}
    for mode in buckets:
        ms = [x * 1000 for x in lat[mode]]
        out[f"{mode}_latency_ms"] = {"p50": round(pct(ms, 50)), "p99": round(pct(ms, 99)), "max": round(max(ms))}
        delta = {op: after[mode].get(op, 0) - before[mode].get(op, 0) for op in after[mode]}
        out[f"{mode}_requests_per_1000_files"] = {op: round(v * 1000 / a.burst, 1) for op, v in sorted(delta.items()) if v}
    out["latency_p50_ratio_listing_over_notifications"] = round(
        out["listing_latency_ms"]["p50"] / max(1, out["notifications_latency_ms"]["p50"]), 2)
    lists = lambda m: out[f"{m}_requests_per_1000_files"].get("LIST", 0)
    out["list_requests_per_1000_files"] = {m: lists(m) for m in buckets}
    print(json.dumps(out, indent=1))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
