"""Test helper: write ORC files with pyarrow (an independent writer: the ORC C++ library) and
print what pyarrow reads back, each value rendered as the table verifier renders it.

  orc_files.py DIR  ->  prints {"a": [row, ...], "b": [...], "c": [...]} (each file's rows)

a.orc (zstd): id long, name string, score double or null, amount decimal(10,2), day date,
  ts timestamp (zone-less), ts_utc timestamp with local time zone, ts_ns timestamp with
  nanosecond digits, ts_far timestamps outside 1677-2262 (nanosecond timestamps cannot hold
  them), tags list<string>, info struct<city string, zip int, seen timestamp>, attrs
  map<string, int>. Its rows are rendered from the table written (pyarrow reads ORC timestamps
  back as nanoseconds, which overflow for ts_far), after checking that every other column
  reads back the same; timestamps floored to microseconds, as Spark and Delta keep them.
b.orc (snappy): columns in another order, `score` gone, a new column `extra`.
c.orc (uncompressed, many stripes): id long, name string; big enough for the ranged path.
d.orc: a.orc cut short (its tail is gone): corrupt.
e.orc, f.orc: a timestamp before 1970 with a fraction of a second (microseconds, nanoseconds),
  as the ORC C++ writer stores it: corrupt to landfall (orc-rust 0.9 cannot read it).
"""
import datetime, decimal, json, os, sys

import pyarrow as pa
import pyarrow.orc as orc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "verify"))
from verify_table import canon  # noqa: E402


def render(table):
    rows = []
    maps = {f.name for f in table.schema if pa.types.is_map(f.type)}
    for r in table.to_pylist():
        out = {}
        for k, v in r.items():
            if k in maps and v is not None:
                v = dict(v)
            out[k] = canon(v)
        rows.append(out)
    return rows


def main(out):
    os.makedirs(out, exist_ok=True)
    n = 3000
    utc = datetime.timezone.utc
    a = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "name": [f"n{i}" if i % 7 else None for i in range(n)],
        "score": [None if i % 3 == 0 else i / 4 for i in range(n)],
        "amount": pa.array([decimal.Decimal(i * 101 - 5000).scaleb(-2) for i in range(n)],
                           pa.decimal128(10, 2)),
        "day": pa.array([datetime.date(2026, 1, 1) + datetime.timedelta(days=i % 400)
                         for i in range(n)], pa.date32()),
        "ts": pa.array([datetime.datetime(2026, 11, 30, 13, 5) + datetime.timedelta(seconds=i * 61,
                                                                                  microseconds=i)
                        for i in range(n)], pa.timestamp("us")),
        "ts_utc": pa.array([datetime.datetime(2020, 2, 29, 23, 59, 59, tzinfo=utc)
                            + datetime.timedelta(hours=i) for i in range(n)],
                           pa.timestamp("us", tz="UTC")),
        "ts_ns": pa.array([1_700_000_000_123_456_789 + i * 1_000_000_007 for i in range(n)],
                          pa.timestamp("ns")),
        "ts_far": pa.array([datetime.datetime(9999, 12, 31, 23, 59, 59, 999999) if i % 2
                            else datetime.datetime(1066, 10, 14, 9, 0, 0) for i in range(n)],
                           pa.timestamp("us")),
        "tags": [[f"t{i}", "x"][: i % 3] for i in range(n)],
        "info": pa.array([{"city": f"c{i % 11}", "zip": i,
                           "seen": datetime.datetime(2026, 1, 1, tzinfo=utc) + datetime.timedelta(minutes=i)}
                          if i % 5 else None for i in range(n)],
                         pa.struct([("city", pa.string()), ("zip", pa.int64()),
                                    ("seen", pa.timestamp("us", tz="UTC"))])),
        "attrs": pa.array([[("k", i), ("j", -i)] if i % 4 else [] for i in range(n)],
                          pa.map_(pa.string(), pa.int32())),
    })
    orc.write_table(a, os.path.join(out, "a.orc"), compression="zstd", stripe_size=64 * 1024)
    b = pa.table({
        "extra": [f"e{i}" for i in range(n, n + 40)],
        "name": [f"n{i}" for i in range(n, n + 40)],
        "id": pa.array(range(n, n + 40), pa.int64()),
    })
    orc.write_table(b, os.path.join(out, "b.orc"), compression="snappy")
    m = 20000
    c = pa.table({
        "id": pa.array(range(10 * n, 10 * n + m), pa.int64()),
        "name": [f"big{i}" for i in range(m)],
    })
    orc.write_table(c, os.path.join(out, "c.orc"), compression="uncompressed",
                    stripe_size=16 * 1024)
    # Before 1970 with a fraction of a second: the ORC C++ writer stores a negative
    # nanosecond part, which orc-rust 0.9 cannot decode (it follows the Java writer's
    # non-negative one). landfall must report the file corrupt, never ingest wrong values.
    e = pa.table({"id": pa.array([-1], pa.int64()),
                  "ts": pa.array([datetime.datetime(1969, 12, 31, 23, 59, 59, 500000)],
                                 pa.timestamp("us"))})
    orc.write_table(e, os.path.join(out, "e.orc"))
    # The same before 1970 with nanosecond digits: orc-rust 0.9 reads it about 73 years late,
    # without an error; landfall finds it outside the file's statistics.
    f = pa.table({"id": pa.array([-2], pa.int64()),
                  "ts": pa.array([-123_456_789], pa.timestamp("ns"))})
    orc.write_table(f, os.path.join(out, "f.orc"))
    with open(os.path.join(out, "a.orc"), "rb") as f:
        whole = f.read()
    with open(os.path.join(out, "d.orc"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    stripes = {k: orc.ORCFile(os.path.join(out, f"{k}.orc")).nstripes for k in "ac"}
    cols = ["id", "name", "score", "amount", "day", "tags", "attrs"]
    back = orc.read_table(os.path.join(out, "a.orc"), columns=cols)
    for col in cols:
        assert back.column(col).equals(a.column(col)), col
    floored = a.set_column(a.schema.get_field_index("ts_ns"), "ts_ns",
                           a.column("ts_ns").cast(pa.timestamp("us"), safe=False))
    print(json.dumps({
        "a": render(floored),
        "b": render(orc.read_table(os.path.join(out, "b.orc"))),
        "c": render(orc.read_table(os.path.join(out, "c.orc"))),
        "stripes": stripes,
    }))


if __name__ == "__main__":
    main(sys.argv[1])
