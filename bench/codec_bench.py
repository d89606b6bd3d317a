#!/usr/bin/env python3
"""Decode throughput of compressed NDJSON per codec, against pyarrow reading the same files in
the same run, and the peak RSS of one large `.json.gz`.

For each codec, one file of `--mb` MB of NDJSON (compressed by Python's codecs and cramjam,
as tests/formats/compressed.py does) is ingested by `landfall run --available-now` into a
local Delta table (explicit schema, so no inference); wall time and peak RSS come from
bench/measure.py (a fresh process per run). The reference is pyarrow.json.read_json over a
pyarrow.CompressedInputStream of the same file (codecs pyarrow streams: gzip, bz2, zstd, lz4
frame) and over the plain file. Then one `--big-mb` MB NDJSON file gzipped: landfall's peak
RSS while ingesting it, against its compressed and uncompressed sizes.

  bench/codec_bench.py --bin target/debug/landfall --mb 64 --big-mb 512
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, time

import pyarrow as pa
import pyarrow.json as pj

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "formats"))
from compressed import CODECS  # noqa: E402

SCHEMA = "id BIGINT, name STRING, amount DOUBLE, tag STRING, ts STRING"
PYARROW = {"gz": "gzip", "bz2": "bz2", "zst": "zstd", "lz4": "lz4"}


def ndjson(path, mb):
    row = 0
    with open(path, "w") as f:
        while f.tell() < mb << 20:
            f.write("".join(
                json.dumps({"id": i, "name": f"customer {i % 9973}", "amount": i * 0.25,
                            "tag": ["a", "b", "c"][i % 3], "ts": "2026-11-30T12:00:00Z"}) + "\n"
                for i in range(row, row + 10_000)))
            row += 10_000
    return row


def landfall(bin_, root, src, name):
    cfg = os.path.join(root, f"{name}.toml")
    with open(cfg, "w") as fh:
        fh.write(f"""[server]
state_dir = "{root}/state-{name}"
[streams.s]
source = "{src}"
format = "json"
schema = "{SCHEMA}"
sink.path = "{root}/table-{name}"
""")
    out = subprocess.run([sys.executable, os.path.join(HERE, "measure.py"), bin_, "run", "--config", cfg,
                          "--available-now", "--log-format", "json"],
                         capture_output=True, text=True, env={**os.environ, "LANDFALL_LOG": "warn"})
    if out.returncode != 0:
        sys.exit(f"landfall failed on {name}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def pyarrow_read(path, codec):
    t = time.perf_counter()
    if codec is None:
        table = pj.read_json(path)
    else:
        with pa.CompressedInputStream(pa.OSFile(path), codec) as s:
            table = pj.read_json(s)
    return time.perf_counter() - t, table.num_rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("--big-mb", type=int, default=512)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="landfall-codec-bench-")
    plain = os.path.join(root, "data.json")
    rows = ndjson(plain, a.mb)
    raw = open(plain, "rb").read()
    out = {"mb": a.mb, "rows": rows, "codecs": {}}
    for ext in ["none"] + list(CODECS):
        d = os.path.join(root, f"in-{ext}")
        os.makedirs(d)
        if ext == "none":
            f = os.path.join(d, "data.json")
            shutil.copy(plain, f)
        else:
            f = os.path.join(d, f"data.json.{ext}")
            with open(f, "wb") as fh:
                fh.write(CODECS[ext](raw))
        m = landfall(a.bin, root, d, ext)
        r = {"file_mb": round(os.path.getsize(f) / 2**20, 1), "landfall_s": round(m["wall_s"], 2),
             "landfall_mb_per_s": round(a.mb / m["wall_s"], 1),
             "landfall_rows_per_s": round(rows / m["wall_s"]),
             "landfall_peak_rss_mb": round(m["peak_rss_mb"])}
        if ext == "none" or ext in PYARROW:
            s, n = pyarrow_read(f, None if ext == "none" else PYARROW[ext])
            assert n == rows, (ext, n, rows)
            r["pyarrow_s"] = round(s, 2)
            r["landfall_over_pyarrow_time"] = round(m["wall_s"] / s, 1)
        out["codecs"][ext] = r
        print(ext, r, file=sys.stderr)
    big = os.path.join(root, "big")
    os.makedirs(big)
    big_plain = os.path.join(root, "big.json")
    ndjson(big_plain, a.big_mb)
    subprocess.run(f"gzip -c {big_plain} > {big}/big.json.gz", shell=True, check=True)
    gz_mb = os.path.getsize(f"{big}/big.json.gz") / 2**20
    os.remove(big_plain)
    m = landfall(a.bin, root, big, "big")
    out["big_json_gz"] = {"uncompressed_mb": a.big_mb, "gz_mb": round(gz_mb), "landfall_s": round(m["wall_s"], 1),
                          "landfall_peak_rss_mb": round(m["peak_rss_mb"])}
    print(json.dumps(out, indent=1))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
