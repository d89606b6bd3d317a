#!/usr/bin/env python3
"""Spark's answers for the differential corpus (corpus.py): one local Spark session infers each
case's schema the way Auto Loader's options map onto Spark's readers, and reads the rows of the
cases that compare rows permissively. Needs pyspark (tests/requirements.txt) and Java 17; no
network, no Delta jars.

  oracle.py <corpus_dir> <out.json>

Writes the corpus under <corpus_dir>, then <out.json>:
  {"spark_version", "seconds", "cases": {id: {"format", "typed", "landfall", "rows",
   "columns": [[name, landfall DDL type], ...], "partitions": [name, ...], "corrupt_record": bool,
   "data": [row, ...] | null, "error": str | null}}}
Types are written in landfall's DDL (`BIGINT`, `STRUCT<a: STRING>`) so the Rust side compares
strings; rows use the independent verifier's canonical strings (tests/verify/verify_table.py).
"""

import datetime
import decimal
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

CORRUPT = "_corrupt_record"


def quote(name):
    """A column name as landfall's DDL writes it."""
    if name and all(c.isalnum() or c == "_" for c in name):
        return name
    return "`" + name.replace("`", "``") + "`"


def ddl(t):
    """A Spark type in landfall's DDL spelling (landfall_core::ddl::type_to_ddl)."""
    n = t.typeName()
    simple = {
        "string": "STRING", "long": "BIGINT", "integer": "INT", "short": "SMALLINT",
        "byte": "TINYINT", "double": "DOUBLE", "float": "FLOAT", "boolean": "BOOLEAN",
        "date": "DATE", "timestamp": "TIMESTAMP", "timestamp_ntz": "TIMESTAMP_NTZ",
        "binary": "BINARY", "void": "VOID",
    }
    if n in simple:
        return simple[n]
    if n == "decimal":
        return f"DECIMAL({t.precision},{t.scale})"
    if n == "array":
        return f"ARRAY<{ddl(t.elementType)}>"
    if n == "map":
        return f"MAP<{ddl(t.keyType)}, {ddl(t.valueType)}>"
    if n == "struct":
        return "STRUCT<" + ", ".join(f"{quote(f.name)}: {ddl(f.dataType)}" for f in t.fields) + ">"
    return n.upper()


def canon(v):
    """As verify_table.py's canon(): the strings the Rust tests compare."""
    if v is None:
        return None
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return v.isoformat(sep="T")
    if isinstance(v, (datetime.date, decimal.Decimal)):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True, default=str)
    return str(v)


def reader(spark, case, schema=None):
    fmt = case["format"]
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    if fmt == "json":
        opts["samplingRatio"] = "1.0"
        if not case["typed"]:
            opts["primitivesAsString"] = "true"
    elif fmt == "csv":
        # landfall's dialect: quoted newlines are read (Spark needs multiLine for them) and a
        # doubled quote inside quotes is one quote (Spark's default escape is a backslash).
        opts.update(header="true", multiLine="true", escape='"', samplingRatio="1.0",
                    inferSchema="true" if case["typed"] else "false")
    elif fmt == "xml":
        opts.update(samplingRatio="1.0", inferSchema="true" if case["typed"] else "false")
    opts.update(case["spark"])
    r = spark.read.format(fmt).options(**opts)
    if schema is not None:
        r = r.schema(schema)
    return r


def run_case(spark, case, root):
    from pyspark.sql.types import StringType, StructField, StructType

    path = os.path.join(root, case["id"])
    out = {k: case[k] for k in ("format", "typed", "landfall", "rows")}
    # Hive-style partition columns of the paths (`k=1/a.json`), as both readers find them.
    parts = sorted({p.split("=")[0] for n in case["files"] for p in n.split("/")[:-1] if "=" in p})
    out.update(columns=None, corrupt_record=False, data=None, error=None, partitions=parts)
    sample = path
    if case["sample_first"]:
        sample = os.path.join(path, sorted(case["files"])[0])
    try:
        inferred = reader(spark, case).load(sample).schema
    except Exception as e:  # Spark's refusal is an answer too
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
        return out
    out["corrupt_record"] = CORRUPT in inferred.fieldNames()
    fields = [f for f in inferred.fields if f.name != CORRUPT]
    out["columns"] = [[f.name, ddl(f.dataType)] for f in fields]
    if case["rows"]:
        # Partition columns are found from the paths again; the read schema is the data's.
        data = [f for f in fields if f.name not in parts]
        schema = StructType(data + [StructField(CORRUPT, StringType(), True)])
        rows = []
        for r in reader(spark, case, schema).load(path).collect():
            d = r.asDict(recursive=True)
            corrupt = d.pop(CORRUPT, None) is not None
            row = {k: canon(v) for k, v in d.items()}
            row["_corrupt"] = corrupt
            rows.append(row)
        rows.sort(key=lambda r: json.dumps(r, sort_keys=True))
        out["data"] = rows
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, dest = sys.argv[1], sys.argv[2]
    started = time.monotonic()
    cases = corpus.write(root)
    # Timestamps are collected as naive datetimes in the process zone: UTC, as the verifier's.
    os.environ["TZ"] = "UTC"
    time.tzset()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[1]").appName("landfall-oracle")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.shuffle.partitions", "1")
             # Auto Loader's partition columns are strings unless hinted.
             .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    answers = {c["id"]: run_case(spark, c, root) for c in cases}
    result = {
        "spark_version": spark.version,
        "seconds": round(time.monotonic() - started, 1),
        "cases": answers,
    }
    spark.stop()
    with open(dest, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
