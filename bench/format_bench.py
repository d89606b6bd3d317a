#!/usr/bin/env python3
"""Decode throughput per format, against a reference reader of the same files in the same
run, and schema inference time over many small files.

For each format one file of about `--mb` MB holding the same rows (id, name, amount, tag) is
ingested by `landfall run --available-now` into a local Delta table with an explicit schema
(no inference); wall time and peak RSS come from bench/measure.py (a fresh process per run,
so process start and the Delta commit are included: the figures are end to end, not the
decoder alone). References, in this process: pyarrow (json, csv, parquet, orc), fastavro (avro),
Python's xml.etree iterparse (xml), a plain line read (text).

Inference: `--infer-files` small JSON files ingested without a schema (inferred from a sample
of all of them) and with one; the difference is what inference costs.

  bench/format_bench.py --bin target/debug/landfall --mb 32 --infer-files 1000 [--formats json,csv]
"""
import argparse, csv, io, json, os, shutil, subprocess, sys, tempfile, time
import xml.etree.ElementTree as ET

import fastavro
import pyarrow as pa
import pyarrow.csv as pc
import pyarrow.json as pj
import pyarrow.orc as po
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = "id BIGINT, name STRING, amount DOUBLE, tag STRING"


def records(mb):
    """Rows of about `mb` MB of NDJSON."""
    out, size, i = [], 0, 0
    while size < mb << 20:
        r = {"id": i, "name": f"customer {i % 9973}", "amount": i * 0.25, "tag": "abc"[i % 3]}
        out.append(r)
        size += 70
        i += 1
    return out


def write(fmt, path, rows):
    if fmt == "json":
        with open(path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    elif fmt == "csv":
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["id", "name", "amount", "tag"])
            w.writeheader()
            w.writerows(rows)
    elif fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif fmt == "orc":
        po.write_table(pa.Table.from_pylist(rows), path, compression="zstd")
    elif fmt == "avro":
        schema = {"type": "record", "name": "R", "fields": [
            {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
            {"name": "amount", "type": "double"}, {"name": "tag", "type": "string"}]}
        with open(path, "wb") as f:
            fastavro.writer(f, fastavro.parse_schema(schema), rows, codec="deflate")
    elif fmt == "xml":
        with open(path, "w") as f:
            f.write("<rows>\n")
            f.writelines(f'<row id="{r["id"]}"><name>{r["name"]}</name><amount>{r["amount"]}</amount>'
                         f'<tag>{r["tag"]}</tag></row>\n' for r in rows)
            f.write("</rows>\n")
    elif fmt == "text":
        with open(path, "w") as f:
            f.writelines(r["name"] + "\n" for r in rows)


def reference(fmt, path):
    t = time.perf_counter()
    if fmt == "json":
        n = pj.read_json(path).num_rows
    elif fmt == "csv":
        n = pc.read_csv(path).num_rows
    elif fmt == "parquet":
        n = pq.read_table(path).num_rows
    elif fmt == "orc":
        n = po.read_table(path).num_rows
    elif fmt == "avro":
        with open(path, "rb") as f:
            n = sum(1 for _ in fastavro.reader(f))
    elif fmt == "xml":
        n = 0
        for _, el in ET.iterparse(path):
            if el.tag == "row":
                n += 1
                el.clear()
    else:
        with open(path) as f:
            n = sum(1 for _ in f)
    return time.perf_counter() - t, n


STREAM = {
    "json": f'format = "json"\nschema = "{SCHEMA}"',
    "csv": f'format = "csv"\nschema = "{SCHEMA}"',
    "parquet": f'format = "parquet"\nschema = "{SCHEMA}"',
    "avro": f'format = "avro"\nschema = "{SCHEMA}"',
    "orc": f'format = "orc"\nschema = "{SCHEMA}"',
    "xml": 'format = "xml"\nxml.row_tag = "row"\nschema = "_id BIGINT, name STRING, amount DOUBLE, tag STRING"',
    "text": 'format = "text"',
}


def landfall(bin_, root, src, name, stream):
    cfg = os.path.join(root, f"{name}.toml")
    with open(cfg, "w") as fh:
        fh.write(f'[server]\nstate_dir = "{root}/state-{name}"\n[streams.s]\nsource = "{src}"\n'
                 f'{stream}\nsink.path = "{root}/table-{name}"\n')
    out = subprocess.run([sys.executable, os.path.join(HERE, "measure.py"), bin_, "run", "--config", cfg,
                          "--available-now"],
                         capture_output=True, text=True, env={**os.environ, "LANDFALL_LOG": "warn"})
    if out.returncode != 0:
        sys.exit(f"landfall failed on {name}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--mb", type=int, default=32)
    ap.add_argument("--infer-files", type=int, default=1000)
    ap.add_argument("--formats", default=",".join(STREAM),
                    help="comma-separated formats to run (default: all)")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="landfall-format-bench-")
    rows = records(a.mb)
    out = {"json_mb": a.mb, "rows": len(rows), "formats": {}}
    for fmt in a.formats.split(","):
        d = os.path.join(root, f"in-{fmt}")
        os.makedirs(d)
        f = os.path.join(d, f"data.{fmt if fmt != 'text' else 'txt'}")
        write(fmt, f, rows)
        mb = os.path.getsize(f) / 2**20
        m = landfall(a.bin, root, d, fmt, STREAM[fmt])
        s, n = reference(fmt, f)
        assert n == len(rows), (fmt, n, len(rows))
        r = {"file_mb": round(mb, 1), "landfall_s": round(m["wall_s"], 2),
             "landfall_mb_per_s": round(mb / m["wall_s"], 1),
             "landfall_rows_per_s": round(len(rows) / m["wall_s"]),
             "landfall_peak_rss_mb": round(m["peak_rss_mb"]),
             "reference_s": round(s, 2), "landfall_over_reference_time": round(m["wall_s"] / s, 1)}
        out["formats"][fmt] = r
        print(fmt, r, file=sys.stderr)
    d = os.path.join(root, "many")
    os.makedirs(d)
    for i in range(a.infer_files):
        with open(os.path.join(d, f"f{i:05}.json"), "w") as f:
            f.write(json.dumps({"id": i, "name": f"n{i}", "amount": i / 4, "tag": "t", f"k{i % 50}": i}) + "\n")
    inferred = landfall(a.bin, root, d, "inferred", 'format = "json"\ninfer_column_types = true')
    explicit = landfall(a.bin, root, d, "explicit", f'format = "json"\nschema = "{SCHEMA}"')
    out["inference"] = {"files": a.infer_files, "inferred_run_s": round(inferred["wall_s"], 2),
                        "explicit_run_s": round(explicit["wall_s"], 2),
                        "inference_cost_s": round(inferred["wall_s"] - explicit["wall_s"], 2)}
    print(json.dumps(out, indent=1))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
