"""Test helper: write Avro object container files with fastavro (an independent writer), with
a writer-schema change between them, and print what fastavro reads back.

  avro_files.py DIR  ->  prints {"rows": [record, ...]} (every file's records, in file order)

a.avro (deflate, 2 blocks): id long, name string, score double or null.
b.avro (snappy): the writer schema gained `tags` (array of string) and `city` (string with a
default); `score` is gone.
"""
import json, os, sys

import fastavro

V1 = {
    "type": "record", "name": "R",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "score", "type": ["null", "double"], "default": None},
    ],
}
V2 = {
    "type": "record", "name": "R",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "city", "type": "string", "default": "?"},
    ],
}


def main(out):
    os.makedirs(out, exist_ok=True)
    a = [{"id": i, "name": f"n{i}", "score": (None if i % 3 == 0 else i / 2)} for i in range(0, 25)]
    b = [{"id": i, "name": f"n{i}", "tags": [f"t{i}", "x"][: 1 + i % 2], "city": f"c{i}"}
         for i in range(25, 40)]
    with open(os.path.join(out, "a.avro"), "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(V1), a, codec="deflate", sync_interval=200)
    with open(os.path.join(out, "b.avro"), "wb") as f:
        fastavro.writer(f, fastavro.parse_schema(V2), b, codec="snappy")
    rows = []
    for name in ("a.avro", "b.avro"):
        with open(os.path.join(out, name), "rb") as f:
            rows.extend(fastavro.reader(f))
    print(json.dumps({"rows": rows}))


if __name__ == "__main__":
    main(sys.argv[1])
