#!/usr/bin/env python3
"""LIST requests per 1,000 new files, full vs incremental listing (issue 7).

A lexically ordered prefix (date directories, zero-padded sequence numbers) holds --existing
files. One daemon runs three streams on that same prefix, each with its own state and table:
`full` (incremental_listing = "off"), `incremental` ("on") and `auto` (the default), with
full_listing_interval --full-interval (default 7) and the same cadence: trigger.processing_time
and poll_interval --every, so each stream lists once per interval whatever its listing costs
(a full listing of a large prefix is slow, and a stream left to poll freely would list less
often and batch more files per listing). Once every stream has ingested the existing files,
--new files arrive at --rate per second. When a stream has committed them all, its counters are
read from the daemon's /metrics: LIST requests (landfall_storage_requests_total{op="LIST"}) and
listing rounds (landfall_listings_total{kind}) since the first new file; its debug log gives
each round's LIST requests and time (`list_requests`, `took_ms` of the "files discovered" /
"no new files" lines). Prints, per stream, the LIST requests per 1,000 new files, per full and
per incremental round, and the ratio full / incremental; then checks every table with
tests/verify/verify_table.py (exact row count, no duplicate).

  --store s3     (default) S3 on moto: without --s3-endpoint the script runs moto's server in
                 its own process and writes the existing objects straight into moto's backend
                 (thousands a second; through HTTP moto takes ~20 ms per PUT). moto pages like
                 S3, 1,000 keys (--page-keys sets LANDFALL_S3_LIST_MAX_KEYS to shrink pages);
                 it answers a page in time proportional to the bucket's size (0.3 s at 10,000
                 keys), which is what bounds --existing, not S3.
  --store local  a local directory: LIST is one call per round whatever the mode (object_store
                 walks the directory; the offset is applied on the client), so the figure to
                 compare there is the round time (ledger lookups), not the requests.

  python3 bench/listing_bench.py --bin ~/.cache/landfall/target/debug/landfall
  python3 bench/listing_bench.py --bin ... --store local --existing 50000 --new 2000 --rate 100 --every 2s
"""
import argparse, datetime, json, os, re, shutil, signal, socket, subprocess, sys, tempfile, threading, time
import concurrent.futures as cf
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUCKET = "landfall-bench"
STREAMS = {"full": 'incremental_listing = "off"', "incremental": 'incremental_listing = "on"', "auto": ""}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def row(i):
    return f'{{"id":{i},"name":"n{i}"}}\n'.encode()


def key(i):
    """Lexically ordered: 100 files an hour, 2,400 a day."""
    return f"{2026}/01/{1 + i // 2400:02d}/{(i // 100) % 24:02d}/part-{i:07d}.json"


class S3:
    def __init__(self, endpoint, prefix):
        import boto3
        self.server = None
        if not endpoint:
            import logging
            from moto.server import ThreadedMotoServer
            logging.getLogger("werkzeug").setLevel(logging.ERROR)
            self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
            self.server.start()
            host, port = self.server.get_host_and_port()
            endpoint = f"http://{host}:{port}"
        self.endpoint, self.prefix = endpoint, prefix
        self.client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test",
                                   aws_secret_access_key="test", region_name="us-east-1")
        try:
            self.client.create_bucket(Bucket=BUCKET)
        except self.client.exceptions.BucketAlreadyOwnedByYou:
            pass

    def put(self, i):
        self.client.put_object(Bucket=BUCKET, Key=f"{self.prefix}/{key(i)}", Body=row(i))

    def seed(self, n):
        """The first `n` objects: into moto's backend directly when it runs here."""
        if not self.server:
            with cf.ThreadPoolExecutor(8) as ex:
                list(ex.map(self.put, range(n)))
            return
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends
        backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
        for i in range(n):
            backend.put_object(BUCKET, f"{self.prefix}/{key(i)}", row(i))

    def stop(self):
        if self.server:
            self.server.stop()

    def source_toml(self):
        return f'source = "s3://{BUCKET}/{self.prefix}"\nsource_store = "moto"\n'

    def store_toml(self):
        return (f'[stores.moto]\nendpoint = "{self.endpoint}"\nregion = "us-east-1"\n'
                f'access_key_id = "test"\nsecret_access_key = "test"\nallow_http = true\n')


class Local:
    def __init__(self, landing):
        self.landing = landing

    def put(self, i):
        path = os.path.join(self.landing, key(i))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(row(i))
        os.rename(tmp, path)

    def source_toml(self):
        return f'source = "{self.landing}"\n'

    def seed(self, n):
        for i in range(n):
            self.put(i)

    def stop(self):
        pass

    def store_toml(self):
        return ""


def scrape(addr):
    text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def counters(m, stream):
    g = lambda s: m.get(s, 0.0)
    return {
        "committed": g(f'landfall_files_committed_total{{stream="{stream}"}}'),
        "list": g(f'landfall_storage_requests_total{{stream="{stream}",op="LIST"}}'),
        "full": g(f'landfall_listings_total{{stream="{stream}",kind="full"}}'),
        "incremental": g(f'landfall_listings_total{{stream="{stream}",kind="incremental"}}'),
    }


def round_log(log_path, stream, since_line, until):
    """The stream's listing rounds logged after line `since_line` and before `until` (a UTC
    datetime), by kind: count, LIST requests and mean time."""
    out = {k: {"rounds": 0, "list": 0, "ms": 0} for k in ("full", "incremental")}
    pat = re.compile(r"^(\S+)Z .*stream=(\S+) listing=(\w+) list_requests=(\d+) .*took_ms=(\d+)")
    with open(log_path, errors="replace") as fh:
        for n, line in enumerate(fh):
            m = pat.search(line)
            if n < since_line or not m or m.group(2) != stream:
                continue
            at = datetime.datetime.fromisoformat(m.group(1)[:26])
            if at > until:
                break
            r = out[m.group(3)]
            r["rounds"] += 1
            r["list"] += int(m.group(4))
            r["ms"] += int(m.group(5))
    return {k: {"rounds": v["rounds"],
                "list_per_round": round(v["list"] / v["rounds"], 2) if v["rounds"] else None,
                "ms_per_round": round(v["ms"] / v["rounds"]) if v["rounds"] else None}
            for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--store", choices=["s3", "local"], default="s3")
    ap.add_argument("--s3-endpoint")
    ap.add_argument("--existing", type=int, default=10000)
    ap.add_argument("--new", type=int, default=800)
    ap.add_argument("--rate", type=float, default=5, help="new files per second")
    ap.add_argument("--every", default="10s", help="trigger.processing_time and poll_interval of every stream")
    ap.add_argument("--full-interval", type=int, default=7, help="full_listing_interval (incremental and auto)")
    ap.add_argument("--page-keys", type=int, default=0, help="S3: LANDFALL_S3_LIST_MAX_KEYS (0: S3's 1,000)")
    ap.add_argument("--work", help="working directory (default: a temporary one, removed)")
    a = ap.parse_args()

    work = a.work or tempfile.mkdtemp(prefix="landfall-listing-bench-")
    os.makedirs(work, exist_ok=True)
    if a.store == "s3":
        src = S3(a.s3_endpoint, f"bench-{os.getpid()}-{int(time.time())}/landing")
    else:
        src = Local(os.path.join(work, "landing"))
        os.makedirs(src.landing, exist_ok=True)
    daemon = None
    try:
        t = time.monotonic()
        src.seed(a.existing)
        print(f"{a.existing} existing files written in {time.monotonic() - t:.1f} s", file=sys.stderr)

        port = free_port()
        addr = f"127.0.0.1:{port}"
        cfg = os.path.join(work, "landfall.toml")
        with open(cfg, "w") as fh:
            fh.write(f'[server]\nstate_dir = "{work}/state"\nlisten = "{addr}"\n\n{src.store_toml()}\n')
            for name, option in STREAMS.items():
                interval = f"full_listing_interval = {a.full_interval}\n" if name != "full" else ""
                fh.write(f'[streams.{name}]\n{src.source_toml()}format = "json"\n'
                         f'schema = "id BIGINT, name STRING"\npoll_interval = "{a.every}"\n'
                         f'trigger.processing_time = "{a.every}"\n{option}\n{interval}'
                         f'sink.path = "{work}/table_{name}"\n\n')
        env = dict(os.environ, LANDFALL_LOG="info,landfall_engine=debug", NO_COLOR="1")
        if a.store == "s3" and a.page_keys:
            env["LANDFALL_S3_LIST_MAX_KEYS"] = str(a.page_keys)
        log_path = os.path.join(work, "daemon.log")
        log = open(log_path, "w")
        daemon = subprocess.Popen([a.bin, "run", "--config", cfg], stdout=log, stderr=log, env=env)

        def wait(pred, what, timeout):
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                if daemon.poll() is not None:
                    sys.exit(f"landfall exited {daemon.returncode}; log: {log_path}")
                try:
                    m = scrape(addr)
                    if pred(m):
                        return m
                except OSError:
                    pass
                time.sleep(0.1)
            sys.exit(f"timed out waiting for {what}; log: {log_path}")

        t = time.monotonic()
        m = wait(lambda m: all(counters(m, s)["committed"] >= a.existing for s in STREAMS),
                 "the existing files", 3600)
        print(f"existing files ingested by every stream in {time.monotonic() - t:.1f} s", file=sys.stderr)
        with open(log_path, errors="replace") as fh:
            since_line = sum(1 for _ in fh)
        base = {s: counters(m, s) for s in STREAMS}

        def writer():
            start = time.monotonic()
            for n, i in enumerate(range(a.existing, a.existing + a.new)):
                delay = start + n / a.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                src.put(i)
        w = threading.Thread(target=writer)
        t0 = time.monotonic()
        w.start()
        end, target = {}, a.existing + a.new
        while len(end) < len(STREAMS):
            m = wait(lambda m: True, "metrics", 60)
            for s in STREAMS:
                c = counters(m, s)
                if s not in end and c["committed"] >= target:
                    end[s] = dict(c, seconds=time.monotonic() - t0,
                                  at=datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None))
            if time.monotonic() - t0 > 3600:
                sys.exit(f"timed out: {end}; log: {log_path}")
            time.sleep(0.05)
        w.join()
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)

        results = {}
        for s in STREAMS:
            d = {k: end[s][k] - base[s][k] for k in ("list", "full", "incremental")}
            rounds = d["full"] + d["incremental"]
            results[s] = {
                "list_requests": int(d["list"]),
                "full_listings": int(d["full"]),
                "incremental_listings": int(d["incremental"]),
                "list_per_1000_files": round(d["list"] * 1000 / a.new, 1),
                "list_per_listing": round(d["list"] / rounds, 2) if rounds else None,
                "rounds": round_log(log_path, s, since_line, end[s]["at"]),
                "seconds": round(end[s]["seconds"], 1),
            }
        for s in STREAMS:
            v = subprocess.run([sys.executable, os.path.join(ROOT, "tests/verify/verify_table.py"), "delta",
                                os.path.join(work, f"table_{s}"), "--stream", s], capture_output=True, text=True)
            if v.returncode != 0:
                sys.exit(f"verify {s}: {v.stderr[-2000:]}")
            out = json.loads(v.stdout)
            ids = [r["id"] for r in out["data"]]
            if len(ids) != target or len(set(ids)) != target:
                sys.exit(f"table {s}: {len(ids)} rows, {len(set(ids))} distinct, expected {target}")
            results[s]["rows_verified"] = len(ids)

        print(f"\n{a.store}: {a.existing:,} existing files, {a.new:,} new at {a.rate:g}/s, a listing every {a.every}, "
              f"full_listing_interval {a.full_interval}"
              + (f", {a.page_keys} keys per LIST page" if a.store == "s3" and a.page_keys else ""))
        print(f"{'stream':<12} {'LIST':>6} {'full':>5} {'incr':>5} {'LIST/1,000 files':>17} "
              f"{'LIST/full round':>16} {'LIST/incr round':>16} {'ms/full round':>14} {'ms/incr round':>14}")
        for s, r in results.items():
            f, i = r["rounds"]["full"], r["rounds"]["incremental"]
            print(f"{s:<12} {r['list_requests']:>6} {r['full_listings']:>5} {r['incremental_listings']:>5} "
                  f"{r['list_per_1000_files']:>17} {str(f['list_per_round']):>16} {str(i['list_per_round']):>16} "
                  f"{str(f['ms_per_round']):>14} {str(i['ms_per_round']):>14}")
        per = {s: results[s]["list_per_1000_files"] for s in STREAMS}
        ratio = per["full"] / per["incremental"] if per["incremental"] else float("inf")
        ratio_auto = per["full"] / per["auto"] if per["auto"] else float("inf")
        print(f"ratio full / incremental (LIST per 1,000 files): {ratio:.1f}x; full / auto: {ratio_auto:.1f}x")
        print(json.dumps({"store": a.store, "existing": a.existing, "new": a.new, "rate": a.rate,
                          "every": a.every, "full_listing_interval": a.full_interval, "page_keys": a.page_keys if a.store == "s3" else None,
                          "streams": results, "ratio_full_over_incremental": round(ratio, 2)}))
    finally:
        if daemon and daemon.poll() is None:
            daemon.kill()
        src.stop()
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
