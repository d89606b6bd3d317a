#!/usr/bin/env python3
"""Managed file events against one queue per stream, on moto server (S3 + SQS on loopback).

Two continuous daemons run side by side, each with `--streams` streams (default 10) on
sibling prefixes of its own bucket:
- file events: one `[locations.raw]` with one queue and one bucket notification, every stream
  `discovery = "file_events"`;
- reference: every stream `discovery = "notifications"` on a queue of its own (one bucket
  notification per prefix, as S3 allows for prefixes that do not nest).

1. PUT-to-commit latency: files are uploaded one at a time, round robin over the prefixes, to
   both buckets; for each, the time from the end of the PUT to the daemon's
   `landfall_files_committed_total` (all streams) counting it, polled every 10 ms.
2. Requests per 1,000 files: a burst spread over the prefixes; the queue and storage requests
   each daemon makes until every file is committed (streams' `landfall_storage_requests_total`
   plus the location's `landfall_location_requests_total`).
3. Idle cost: queue requests per minute with no traffic (long polls of `wait_time`).

  source scripts/lib.sh && start_emulators   # exports LANDFALL_TEST_S3_ENDPOINT
  bench/file_events_bench.py --bin target/debug/landfall --streams 10 --files 60 --burst 1000
"""
import argparse, json, os, shutil, signal, subprocess, sys, tempfile, time

import boto3

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from notify_bench import committed_waiter, free_port, metrics, pct  # noqa: E402


def requests(text):
    """Every storage and queue request of the process, by operation."""
    out = {}
    for line in text.splitlines():
        for family, key in (("landfall_storage_requests_total{", "op"), ("landfall_location_requests_total{", "kind")):
            if line.startswith(family):
                labels = dict(x.split("=", 1) for x in line[len(family):line.index("}")].split(","))
                op = labels[key].strip('"')
                out[op] = out.get(op, 0) + float(line.rsplit(" ", 1)[1])
    return out


QUEUE_OPS = ("ReceiveMessage", "DeleteMessageBatch", "DeleteMessage", "ChangeMessageVisibilityBatch",
             "GetQueueAttributes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--endpoint", default=os.environ.get("LANDFALL_TEST_S3_ENDPOINT"))
    ap.add_argument("--streams", type=int, default=10)
    ap.add_argument("--files", type=int, default=60, help="files for the latency part")
    ap.add_argument("--burst", type=int, default=1000, help="files for the request count")
    ap.add_argument("--idle", type=int, default=60, help="seconds of the idle part")
    a = ap.parse_args()
    if not a.endpoint:
        sys.exit("no moto endpoint: run `source scripts/lib.sh && start_emulators` or pass --endpoint")
    kw = dict(endpoint_url=a.endpoint, aws_access_key_id="test", aws_secret_access_key="test",
              region_name="us-east-1")
    s3, sqs = boto3.client("s3", **kw), boto3.client("sqs", **kw)
    tag = f"feb{os.getpid()}"
    modes = {"file_events": f"{tag}-events", "queue_per_stream": f"{tag}-queues"}
    for b in modes.values():
        s3.create_bucket(Bucket=b)

    def queue(name):
        url = sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        return url, arn

    def rule(q_arn, prefix):
        return {"QueueArn": q_arn, "Events": ["s3:ObjectCreated:*"],
                "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}}}

    loc_url, loc_arn = queue(f"{tag}-loc")
    s3.put_bucket_notification_configuration(Bucket=modes["file_events"], NotificationConfiguration={
        "QueueConfigurations": [rule(loc_arn, "raw/")]})
    per_stream = [queue(f"{tag}-s{i}") for i in range(a.streams)]
    s3.put_bucket_notification_configuration(Bucket=modes["queue_per_stream"], NotificationConfiguration={
        "QueueConfigurations": [rule(arn, f"raw/s{i}/") for i, (_, arn) in enumerate(per_stream)]})
    body = b'{"id":1,"name":"n"}\n'
    root = tempfile.mkdtemp(prefix="landfall-fe-bench-")
    daemons, ports = {}, {}
    store = f"""[stores.moto]
endpoint = "{a.endpoint}"
region = "us-east-1"
access_key_id = "test"
secret_access_key = "test"
allow_http = true
"""
    for mode, bucket in modes.items():
        ports[mode] = free_port()
        text = f'[server]\nstate_dir = "{root}/{mode}-state"\nlisten = "127.0.0.1:{ports[mode]}"\n{store}'
        if mode == "file_events":
            text += f'[locations.raw]\nurl = "s3://{bucket}/raw"\nstore = "moto"\nfile_events = true\nqueue_url = "{loc_url}"\n'
        for i in range(a.streams):
            text += f"""[streams.s{i}]
source = "s3://{bucket}/raw/s{i}"
source_store = "moto"
format = "json"
schema = "id BIGINT, name STRING"
trigger.processing_time = "0s"
sink.path = "{root}/{mode}-table-{i}"
"""
            if mode == "file_events":
                text += 'discovery = "file_events"\n'
            else:
                text += f'discovery = "notifications"\n[streams.s{i}.notifications]\nqueue_url = "{per_stream[i][0]}"\n'
        cfg = os.path.join(root, f"{mode}.toml")
        with open(cfg, "w") as fh:
            fh.write(text)
        daemons[mode] = subprocess.Popen([a.bin, "run", "--config", cfg], stdout=subprocess.DEVNULL,
                                         stderr=open(os.path.join(root, f"{mode}.log"), "w"),
                                         env={**os.environ, "LANDFALL_LOG": "warn"}, start_new_session=True)
    try:
        wait_committed = committed_waiter(daemons, ports, root)

        # Every stream's first listing (empty prefixes) done: the metrics endpoint answers.
        for mode in modes:
            wait_committed(mode, 0)
        time.sleep(5)
        lat = {m: [] for m in modes}
        for i in range(a.files):
            for mode, b in modes.items():
                s3.put_object(Bucket=b, Key=f"raw/s{i % a.streams}/lat{i:07d}.json", Body=body)
                t = time.monotonic()
                wait_committed(mode, i + 1)
                lat[mode].append(time.monotonic() - t)
        before = {m: requests(metrics(ports[m])) for m in modes}
        for mode, b in modes.items():
            for i in range(a.burst):
                s3.put_object(Bucket=b, Key=f"raw/s{i % a.streams}/burst{i:07d}.json", Body=body)
        for mode in modes:
            wait_committed(mode, a.files + a.burst)
        after = {m: requests(metrics(ports[m])) for m in modes}
        time.sleep(25)
        idle0 = {m: requests(metrics(ports[m])) for m in modes}
        time.sleep(a.idle)
        idle1 = {m: requests(metrics(ports[m])) for m in modes}
    finally:
        for d in daemons.values():
            os.killpg(d.pid, signal.SIGTERM)
        for d in daemons.values():
            d.wait(timeout=60)
    out = {"streams": a.streams, "files_latency": a.files, "burst": a.burst}
    for mode in modes:
        ms = [x * 1000 for x in lat[mode]]
        out[f"{mode}_latency_ms"] = {"p50": round(pct(ms, 50)), "p99": round(pct(ms, 99)), "max": round(max(ms))}
        delta = {op: after[mode].get(op, 0) - before[mode].get(op, 0) for op in after[mode]}
        out[f"{mode}_requests_per_1000_files"] = {op: round(v * 1000 / a.burst, 1) for op, v in sorted(delta.items()) if v}
        out[f"{mode}_queue_requests_per_1000_files"] = round(
            sum(v for op, v in delta.items() if op in QUEUE_OPS) * 1000 / a.burst, 1)
        idle = {op: idle1[mode].get(op, 0) - idle0[mode].get(op, 0) for op in idle1[mode]}
        out[f"{mode}_idle_queue_requests_per_min"] = round(
            sum(v for op, v in idle.items() if op in QUEUE_OPS) * 60 / a.idle, 1)
    out["queue_requests_ratio_per_stream_over_file_events"] = round(
        out["queue_per_stream_queue_requests_per_1000_files"] / max(0.1, out["file_events_queue_requests_per_1000_files"]), 2)
    out["idle_ratio_per_stream_over_file_events"] = round(
        out["queue_per_stream_idle_queue_requests_per_min"] / max(0.1, out["file_events_idle_queue_requests_per_min"]), 2)
    print(json.dumps(out, indent=1))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
