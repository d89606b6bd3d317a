#!/usr/bin/env python3
"""Self-test of tests/verify/verify_table.py: builds small Delta tables by hand (Parquet files
written with pyarrow, _delta_log/N.json lines written here) and one with the `deltalake`
package, and checks that the verifier accepts the good ones and rejects each broken one with
its specific message.

  python3 tests/verify/test_verify_table.py [-k SUBSTRING]

Prints one line per case and a closing "N passed, M failed"; exits 1 if any case failed.
"""
import datetime, decimal, json, os, shutil, subprocess, sys, tempfile, time, traceback

import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
VERIFIER = os.path.join(HERE, "verify_table.py")
sys.path.insert(0, HERE)
import verify_table as vt  # noqa: E402  (unit checks of the typed comparison)


# ---------------------------------------------------------------------------------------------
# Building tables by hand

FIELDS = [("id", "long"), ("name", "string"), ("amount", "double")]


def field(name, ty, nullable=True):
    return {"name": name, "type": ty, "nullable": nullable, "metadata": {}}


def protocol():
    return {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}


def metadata(fields=FIELDS, partition_by=()):
    schema = {"type": "struct", "fields": [field(n, t) for n, t in fields]}
    return {"metaData": {"id": "00000000-0000-0000-0000-000000000001", "name": None, "description": None,
                         "format": {"provider": "parquet", "options": {}},
                         "schemaString": json.dumps(schema), "partitionColumns": list(partition_by),
                         "createdTime": 1700000000000, "configuration": {}}}


def txn(app, version):
    return {"txn": {"appId": app, "version": version, "lastUpdated": 1700000000000}}


def commit_info(op="STREAMING UPDATE"):
    return {"commitInfo": {"timestamp": 1700000000000, "operation": op}}


class Table:
    def __init__(self, root):
        self.root = root
        self.log = os.path.join(root, "_delta_log")
        os.makedirs(self.log, exist_ok=True)

    def parquet(self, name, columns, schema=None):
        """Write data file `name` holding `columns` ({column: list}); returns its add action."""
        t = pa.table(columns, schema=schema)
        path = os.path.join(self.root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pq.write_table(t, path)
        return {"add": {"path": name, "partitionValues": {}, "size": os.path.getsize(path),
                        "modificationTime": 1700000000000, "dataChange": True,
                        "stats": json.dumps({"numRecords": t.num_rows})}}

    def commit(self, version, *actions):
        with open(os.path.join(self.log, f"{version:020d}.json"), "w") as fh:
            for a in actions:
                fh.write(json.dumps(a) + "\n")


def rows_file(t, name, ids):
    ids = list(ids)
    return t.parquet(name, {"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids],
                            "amount": pa.array([i + 0.5 for i in ids], pa.float64())})


def remove(path):
    return {"remove": {"path": path, "deletionTimestamp": 1700000000001, "dataChange": True}}


def stream_table(root, batches=2, app="s"):
    """A table as landfall writes it: version 0 creates, each later version adds one file with
    txn {app, batch id}."""
    t = Table(root)
    t.commit(0, commit_info("CREATE TABLE"), protocol(), metadata())
    for b in range(1, batches + 1):
        t.commit(b, commit_info(), rows_file(t, f"part-{b}.parquet", range(b * 10, b * 10 + 3)), txn(app, b))
    return t


# ---------------------------------------------------------------------------------------------
# Running the verifier

def run(*args):
    p = subprocess.run([sys.executable, VERIFIER, *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def ok(*args):
    rc, out, err = run(*args)
    assert rc == 0, f"verifier failed (rc {rc}):\n{err}"
    return json.loads(out)


def fails(expected, *args):
    rc, out, err = run(*args)
    assert rc == 1, f"verifier should exit 1, got {rc}\nstdout: {out[:500]}\nstderr: {err}"
    assert "Traceback" not in err, f"verifier crashed instead of failing cleanly:\n{err}"
    assert expected in err, f"expected {expected!r} in the verifier's message, got:\n{err}"
    return err


CASES = []


def case(fn):
    CASES.append(fn)
    return fn


# ---------------------------------------------------------------------------------------------
# Happy paths

@case
def deltalake_written_table_passes(tmp):
    from deltalake import write_deltalake
    utc = datetime.timezone.utc
    t = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "name": ["a", "b", None],
        "amount": [1.5, 2.0, float("nan")],
        "ts": pa.array([datetime.datetime(2024, 1, 1, 10, 0, 0, 123456, tzinfo=utc)] * 3, pa.timestamp("us", tz="UTC")),
        "d": pa.array([datetime.date(2024, 1, 2)] * 3),
        "dec": pa.array([decimal.Decimal("1.50"), decimal.Decimal("-2.25"), None], pa.decimal128(10, 2)),
        "part": pa.array([7, 8, 7], pa.int64()),
    })
    write_deltalake(tmp, t, partition_by=["part"])
    write_deltalake(tmp, t, mode="append")
    v = ok("delta", tmp, "--stats", "--orphans")
    assert v["rows"] == 6, v["rows"]
    assert v["schema"] == {"id": "long", "name": "string", "amount": "double", "ts": "timestamp",
                           "d": "date", "dec": "decimal(10,2)", "part": "long"}, v["schema"]
    assert v["version"] == 1 and v["txn"] == {} and v["orphans"] == [], v
    row = next(r for r in v["data"] if r["id"] == "1")
    assert row == {"id": "1", "name": "a", "amount": "1.5", "ts": "2024-01-01T10:00:00.123456",
                   "d": "2024-01-02", "dec": "1.50", "part": "7"}, row
    assert next(r for r in v["data"] if r["id"] == "3")["name"] is None
    assert len(v["stats"]) == 4 and all(s["numRecords"] in (1, 2) for s in v["stats"].values()), v["stats"]


@case
def stream_table_passes_with_txn_report(tmp):
    stream_table(tmp, batches=3)
    v = ok("delta", tmp, "--stream", "s", "--stats", "--orphans")
    assert v["rows"] == 9 and v["txn"] == {"s": 3} and v["version"] == 3, v
    assert sorted(int(r["id"]) for r in v["data"]) == [10, 11, 12, 20, 21, 22, 30, 31, 32]
    assert v["schema"] == {"id": "long", "name": "string", "amount": "double"}
    assert v["orphans"] == []


@case
def count_only_still_works(tmp):
    stream_table(tmp, batches=2)
    assert ok("delta", tmp, "--count-only") == {"rows": 6}


@case
def typed_partition_values(tmp):
    t = Table(tmp)
    t.commit(0, protocol(), metadata(FIELDS + [("day", "date"), ("n", "long")], partition_by=["day", "n"]))
    a = rows_file(t, "day=2024-01-05/n=3/a.parquet", [1, 2])
    a["add"]["partitionValues"] = {"day": "2024-01-05", "n": "3"}
    t.commit(1, a, txn("s", 1))
    v = ok("delta", tmp, "--stream", "s")
    assert v["schema"]["day"] == "date" and v["schema"]["n"] == "long"
    assert {(r["day"], r["n"]) for r in v["data"]} == {("2024-01-05", "3")}, v["data"]


# ---------------------------------------------------------------------------------------------
# _delta_log strictness

@case
def version_gap_fails(tmp):
    t = stream_table(tmp, batches=3)
    os.remove(os.path.join(t.log, f"{2:020d}.json"))
    fails("version gap in", "delta", tmp)
    fails("commit 2 is missing (next commit is 3)", "delta", tmp)


@case
def log_not_starting_at_zero_without_checkpoint_fails(tmp):
    t = stream_table(tmp, batches=2)
    os.remove(os.path.join(t.log, f"{0:020d}.json"))
    fails("does not start at version 0 (first commit 1) and has no checkpoint", "delta", tmp)


@case
def readd_of_live_file_fails(tmp):
    t = stream_table(tmp, batches=1)
    again = rows_file(t, "part-1.parquet", range(10, 13))
    t.commit(2, again, txn("s", 2))
    fails("commit 2 adds part-1.parquet, which is already live (added at version 1)", "delta", tmp)


@case
def remove_of_dead_file_fails(tmp):
    t = stream_table(tmp, batches=1)
    t.commit(2, remove("never-there.parquet"))
    fails("commit 2 removes never-there.parquet, which is not live (never added)", "delta", tmp)


@case
def double_remove_fails(tmp):
    t = stream_table(tmp, batches=2)
    t.commit(3, remove("part-1.parquet"))
    t.commit(4, remove("part-1.parquet"))
    fails("commit 4 removes part-1.parquet, which is not live (already removed)", "delta", tmp)


@case
def removed_file_leaves_the_table(tmp):
    t = stream_table(tmp, batches=2)
    t.commit(3, remove("part-1.parquet"))
    v = ok("delta", tmp, "--stream", "s", "--orphans")
    assert sorted(int(r["id"]) for r in v["data"]) == [20, 21, 22]
    assert v["orphans"] == [], "a removed add's file still on disk is referenced, not an orphan"


@case
def version_zero_without_metadata_fails(tmp):
    t = Table(tmp)
    t.commit(0, protocol())
    fails("commit 0 must carry exactly one protocol and one metaData action (has 1 protocol, 0 metaData)", "delta", tmp)


@case
def version_zero_with_two_metadata_fails(tmp):
    t = Table(tmp)
    t.commit(0, protocol(), metadata(), metadata())
    fails("commit 0 must carry exactly one protocol and one metaData action (has 1 protocol, 2 metaData)", "delta", tmp)


@case
def missing_txn_for_stream_fails(tmp):
    t = stream_table(tmp, batches=1)
    t.commit(2, rows_file(t, "part-2.parquet", [5]))
    assert ok("delta", tmp)["rows"] == 4, "without --stream a commit without txn is fine"
    fails("commit 2 adds files but carries 0 txn action(s) [], not exactly one for stream 's'",
          "delta", tmp, "--stream", "s")


@case
def a_rearrangement_needs_no_txn(tmp):
    """OPTIMIZE: files removed and added with dataChange false, no txn: fine. Adds with
    dataChange false that remove nothing are data without a txn: refused."""
    t = stream_table(tmp, batches=2)
    big = rows_file(t, "part-big.parquet", [10, 11, 12, 20, 21, 22])
    big["add"]["dataChange"] = False
    gone = [remove("part-1.parquet"), remove("part-2.parquet")]
    for r in gone:
        r["remove"]["dataChange"] = False
    t.commit(3, commit_info("OPTIMIZE"), *gone, big)
    v = ok("delta", tmp, "--stream", "s")
    assert v["rows"] == 6 and v["txn"] == {"s": 2}, v
    lone = rows_file(t, "part-lone.parquet", [99])
    lone["add"]["dataChange"] = False
    t.commit(4, commit_info(), lone)
    fails("commit 4 adds files but carries 0 txn action(s) [], not exactly one for stream 's'",
          "delta", tmp, "--stream", "s")


@case
def a_rearrangement_that_changes_rows_fails(tmp):
    t = stream_table(tmp, batches=2)
    big = rows_file(t, "part-big.parquet", [10, 11, 12, 20, 21, 22, 23])
    big["add"]["dataChange"] = False
    gone = [remove("part-1.parquet"), remove("part-2.parquet")]
    for r in gone:
        r["remove"]["dataChange"] = False
    t.commit(3, commit_info("OPTIMIZE"), *gone, big)
    fails("commit 3 rearranges files but changes their rows: 6 rows removed, 7 added", "delta", tmp)


@case
def a_rearrangement_that_only_removes_fails(tmp):
    t = stream_table(tmp, batches=2)
    gone = remove("part-1.parquet")
    gone["remove"]["dataChange"] = False
    t.commit(3, commit_info("OPTIMIZE"), gone)
    fails("commit 3 removes files with dataChange false and adds none", "delta", tmp)


@case
def txn_of_wrong_stream_fails(tmp):
    stream_table(tmp, batches=1, app="other")
    fails("commit 1 adds files but carries 1 txn action(s) ['other'], not exactly one for stream 's'",
          "delta", tmp, "--stream", "s")


@case
def two_txns_for_stream_fail(tmp):
    t = stream_table(tmp, batches=1)
    t.commit(2, rows_file(t, "part-2.parquet", [5]), txn("s", 2), txn("s", 3))
    fails("commit 2 carries 2 txn actions for appId 's' (at most one per appId)", "delta", tmp, "--stream", "s")
    fails("commit 2 carries 2 txn actions for appId 's' (at most one per appId)", "delta", tmp)


@case
def two_txns_of_different_apps(tmp):
    t = stream_table(tmp, batches=1)
    t.commit(2, rows_file(t, "part-2.parquet", [5]), txn("s", 2), txn("other", 1))
    fails("commit 2 adds files but carries 2 txn action(s) ['other', 's'], not exactly one for stream 's'",
          "delta", tmp, "--stream", "s")
    v = ok("delta", tmp, "--stream", "s", "--allow-other-writers")
    assert v["txn"] == {"other": 1, "s": 2}, v["txn"]


@case
def other_writers_allowed_only_when_asked(tmp):
    t = stream_table(tmp, batches=1)
    t.commit(2, rows_file(t, "part-2.parquet", [5]), txn("other", 1))
    t.commit(3, rows_file(t, "part-3.parquet", [6]), txn("s", 2))
    fails("commit 2 adds files but carries 1 txn action(s) ['other']", "delta", tmp, "--stream", "s")
    v = ok("delta", tmp, "--stream", "s", "--allow-other-writers")
    assert v["txn"] == {"other": 1, "s": 2} and v["rows"] == 5, v
    t.commit(4, rows_file(t, "part-4.parquet", [7]), txn("other", 2), txn("other", 3))
    fails("commit 4 carries 2 txn actions for appId 'other' (at most one per appId)",
          "delta", tmp, "--stream", "s", "--allow-other-writers")


@case
def txn_version_must_increase(tmp):
    t = stream_table(tmp, batches=2)
    t.commit(3, rows_file(t, "part-3.parquet", [5]), txn("s", 2))
    fails("commit 3: txn version 2 for appId 's' does not increase (last was 2)", "delta", tmp, "--stream", "s")
    fails("commit 3: txn version 2 for appId 's' does not increase (last was 2)", "delta", tmp)


# ---------------------------------------------------------------------------------------------
# Types

@case
def double_in_log_string_in_parquet_fails(tmp):
    t = Table(tmp)
    t.commit(0, protocol(), metadata())
    bad = t.parquet("part-1.parquet", {"id": pa.array([1], pa.int64()), "name": ["a"], "amount": ["1.0"]})
    t.commit(1, bad, txn("s", 1))
    fails("part-1.parquet: column amount is VARCHAR in the Parquet file but double in the Delta schema",
          "delta", tmp, "--stream", "s")


@case
def long_in_log_string_in_parquet_fails(tmp):
    t = Table(tmp)
    t.commit(0, protocol(), metadata())
    bad = t.parquet("part-1.parquet", {"id": ["1"], "name": ["a"], "amount": [1.0]})
    t.commit(1, bad)
    fails("part-1.parquet: column id is VARCHAR in the Parquet file but long in the Delta schema", "delta", tmp)


@case
def decimal_precision_mismatch_fails(tmp):
    t = Table(tmp)
    t.commit(0, protocol(), metadata([("id", "long"), ("dec", "decimal(10,2)")]))
    bad = t.parquet("part-1.parquet", {"id": pa.array([1], pa.int64()),
                                       "dec": pa.array([decimal.Decimal("1.500")], pa.decimal128(12, 3))})
    t.commit(1, bad)
    fails("column dec is DECIMAL(12,3) in the Parquet file but decimal(10,2) in the Delta schema", "delta", tmp)


@case
def column_not_in_schema_fails(tmp):
    t = Table(tmp)
    t.commit(0, protocol(), metadata())
    bad = t.parquet("part-1.parquet", {"id": pa.array([1], pa.int64()), "name": ["a"], "amount": [1.0],
                                       "extra": [True]})
    t.commit(1, bad)
    fails("part-1.parquet has column extra (BOOLEAN) that is not in the Delta schema", "delta", tmp)


@case
def typed_values_compare_by_type(tmp):
    # The row comparison's keys: a DOUBLE 1.0 is not a STRING "1.0", an int 1 not a string "1".
    assert vt.norm(1.0, "double", "c") != vt.norm("1.0", "string", "c")
    assert vt.norm(1, "long", "c") != vt.norm("1", "string", "c")
    assert vt.norm(1, "long", "c") != vt.norm(1.0, "double", "c")
    for v, ty in (("1.0", "double"), ("1", "long"), (1.0, "long"), (True, "long"), (1, "string"),
                  (decimal.Decimal("1"), "double"), (datetime.date(2024, 1, 1), "timestamp")):
        try:
            vt.norm(v, ty, "col")
        except vt.VerifyError as e:
            assert f"col: value {v!r}" in str(e) and f"is not a {ty}" in str(e), str(e)
        else:
            raise AssertionError(f"norm accepted {v!r} as {ty}")
    # Timestamps compare as instants, decimals as Decimal.
    utc = datetime.timezone.utc
    plus2 = datetime.timezone(datetime.timedelta(hours=2))
    a = datetime.datetime(2024, 1, 1, 10, 0, tzinfo=utc)
    assert vt.norm(a, "timestamp", "c") == vt.norm(datetime.datetime(2024, 1, 1, 12, 0, tzinfo=plus2), "timestamp", "c")
    assert vt.norm(a, "timestamp", "c") == vt.norm(datetime.datetime(2024, 1, 1, 10, 0), "timestamp", "c")
    assert vt.norm(a, "timestamp", "c") != vt.norm(datetime.datetime(2024, 1, 1, 10, 0, 0, 1, tzinfo=utc), "timestamp", "c")
    assert vt.norm(decimal.Decimal("1.50"), "decimal(10,2)", "c") == vt.norm(decimal.Decimal("1.5"), "decimal(10,2)", "c")
    assert vt.norm(float("nan"), "double", "c") == vt.norm(float("nan"), "double", "c")
    fields = {"id": "long", "x": "double"}
    try:
        vt.typed_key({"id": 1, "x": "1.0"}, fields, "deltalake")
    except vt.VerifyError as e:
        assert "deltalake column x: value '1.0' (str) is not a double" in str(e), str(e)
    else:
        raise AssertionError("typed_key accepted a string for a double column")


# ---------------------------------------------------------------------------------------------
# Stats

def stats_table(tmp, stats):
    t = Table(tmp)
    t.commit(0, protocol(), metadata())
    a = rows_file(t, "part-1.parquet", [1, 2, 3])
    a["add"]["stats"] = json.dumps(stats)
    t.commit(1, a, txn("s", 1))
    return t


GOOD_STATS = {"numRecords": 3, "minValues": {"id": 1, "name": "n1", "amount": 1.5},
              "maxValues": {"id": 3, "name": "n3", "amount": 3.5},
              "nullCount": {"id": 0, "name": 0, "amount": 0}}


@case
def consistent_stats_pass_and_are_reported(tmp):
    stats_table(tmp, GOOD_STATS)
    v = ok("delta", tmp, "--stats", "--stream", "s")
    assert v["stats"] == {"part-1.parquet": GOOD_STATS}, v["stats"]
    # A looser range (min below, max above every value) is consistent too.
    shutil.rmtree(tmp)
    stats_table(tmp, dict(GOOD_STATS, minValues={"id": 0}, maxValues={"id": 9}))
    ok("delta", tmp, "--stats")


@case
def stats_min_above_data_fails(tmp):
    stats_table(tmp, dict(GOOD_STATS, minValues={"id": 2, "name": "n1", "amount": 1.5}))
    assert ok("delta", tmp)["rows"] == 3, "stats are only checked with --stats"
    fails("stats of part-1.parquet: minValues of id is 2 but the file holds 1", "delta", tmp, "--stats")


@case
def stats_max_below_data_fails(tmp):
    stats_table(tmp, dict(GOOD_STATS, maxValues={"id": 3, "name": "n2", "amount": 3.5}))
    fails("stats of part-1.parquet: maxValues of name is 'n2' but the file holds 'n3'", "delta", tmp, "--stats")


@case
def stats_num_records_wrong_fails(tmp):
    stats_table(tmp, dict(GOOD_STATS, numRecords=4))
    fails("stats of part-1.parquet: numRecords is 4 but the file holds 3 rows", "delta", tmp, "--stats")


@case
def stats_null_count_wrong_fails(tmp):
    stats_table(tmp, dict(GOOD_STATS, nullCount={"id": 0, "name": 1, "amount": 0}))
    fails("stats of part-1.parquet: nullCount of name is 1 but the file holds 0 nulls", "delta", tmp, "--stats")


@case
def stats_of_unknown_column_fails(tmp):
    stats_table(tmp, dict(GOOD_STATS, minValues={"nope": 1}))
    fails("stats of part-1.parquet: minValues names column nope, which is not in the Delta schema", "delta", tmp, "--stats")


# ---------------------------------------------------------------------------------------------
# Checkpoints

@case
def checkpoint_replay_after_cleanup(tmp):
    from deltalake import DeltaTable, write_deltalake
    for i in range(3):
        write_deltalake(tmp, pa.table({"id": pa.array([i * 10, i * 10 + 1], pa.int64()), "name": ["a", "b"]}),
                        mode="append")
    DeltaTable(tmp).create_checkpoint()  # at version 2
    write_deltalake(tmp, pa.table({"id": pa.array([30], pa.int64()), "name": ["c"]}), mode="append")
    log = os.path.join(tmp, "_delta_log")
    assert os.path.exists(os.path.join(log, "_last_checkpoint"))
    assert ok("delta", tmp)["rows"] == 7, "full log: the checkpoint is cross-checked against the replay"
    for v in range(3):
        os.remove(os.path.join(log, f"{v:020d}.json"))
    v = ok("delta", tmp, "--stats", "--orphans")
    assert v["version"] == 3 and v["rows"] == 7, v
    assert sorted(int(r["id"]) for r in v["data"]) == [0, 1, 10, 11, 20, 21, 30]
    assert v["schema"] == {"id": "long", "name": "string"} and v["orphans"] == []


def hand_checkpoint(t, version, live, txns=(), removed=()):
    """Write a single-part checkpoint at `version` holding protocol, metaData, the add actions
    `live`, txns and remove tombstones, like a writer's checkpoint, plus _last_checkpoint."""
    rows = [protocol(), metadata()] + [txn(a, v) for a, v in txns] + list(live) + [remove(p) for p in removed]
    for r in rows:
        if "metaData" in r:
            r["metaData"]["configuration"] = list(r["metaData"]["configuration"].items())
            r["metaData"]["format"]["options"] = []
        if "add" in r:
            r["add"]["partitionValues"] = list(r["add"]["partitionValues"].items())
    add_t = pa.struct([("path", pa.string()), ("partitionValues", pa.map_(pa.string(), pa.string())),
                       ("size", pa.int64()), ("modificationTime", pa.int64()), ("dataChange", pa.bool_()),
                       ("stats", pa.string())])
    schema = pa.schema([
        ("protocol", pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])),
        ("metaData", pa.struct([("id", pa.string()), ("name", pa.string()), ("description", pa.string()),
                                ("format", pa.struct([("provider", pa.string()), ("options", pa.map_(pa.string(), pa.string()))])),
                                ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
                                ("createdTime", pa.int64()), ("configuration", pa.map_(pa.string(), pa.string()))])),
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])),
        ("add", add_t),
        ("remove", pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_())])),
    ])
    cols = {n: [r.get(n) for r in rows] for n in schema.names}
    pq.write_table(pa.table(cols, schema=schema), os.path.join(t.log, f"{version:020d}.checkpoint.parquet"))
    with open(os.path.join(t.log, "_last_checkpoint"), "w") as fh:
        json.dump({"version": version, "size": len(rows)}, fh)


@case
def hand_checkpoint_replay_checks_later_commits(tmp):
    t = stream_table(tmp, batches=3)
    live = [rows_file(t, f"part-{b}.parquet", range(b * 10, b * 10 + 3)) for b in (2, 3)]
    hand_checkpoint(t, 3, live, txns=[("s", 3)], removed=["part-1.parquet"])
    t.commit(4, rows_file(t, "part-4.parquet", [40]), txn("s", 4))
    for v in range(4):
        os.remove(os.path.join(t.log, f"{v:020d}.json"))
    v = ok("delta", tmp, "--stream", "s", "--orphans")
    assert v["txn"] == {"s": 4} and v["version"] == 4, v
    assert sorted(int(r["id"]) for r in v["data"]) == [20, 21, 22, 30, 31, 32, 40], v["data"]
    assert v["orphans"] == [], "part-1.parquet is a tombstone in the checkpoint, so referenced"
    # The checkpoint's txn carries on: a later commit must go above it ...
    t.commit(5, rows_file(t, "part-5.parquet", [50]), txn("s", 3))
    fails("commit 5: txn version 3 for appId 's' does not increase (last was 4)", "delta", tmp, "--stream", "s")
    # ... and its live set too: re-adding a file live in the checkpoint fails.
    t.commit(5, rows_file(t, "part-2.parquet", range(20, 23)), txn("s", 5))
    fails("commit 5 adds part-2.parquet, which is already live (added at the checkpoint)", "delta", tmp)


@case
def checkpoint_must_agree_with_full_log(tmp):
    t = stream_table(tmp, batches=2)
    hand_checkpoint(t, 2, [rows_file(t, f"part-{b}.parquet", range(b * 10, b * 10 + 3)) for b in (1, 2)], txns=[("s", 2)])
    assert ok("delta", tmp, "--stream", "s")["rows"] == 6
    hand_checkpoint(t, 2, [rows_file(t, "part-2.parquet", range(20, 23))], txns=[("s", 2)])
    fails("checkpoint 2 disagrees with the replayed log at version 2: live files only in the checkpoint [], "
          "only in the log ['part-1.parquet']", "delta", tmp)


@case
def checkpoint_followed_by_gap_fails(tmp):
    t = stream_table(tmp, batches=2)
    hand_checkpoint(t, 2, [rows_file(t, f"part-{b}.parquet", range(b * 10, b * 10 + 3)) for b in (1, 2)], txns=[("s", 2)])
    t.commit(4, rows_file(t, "part-4.parquet", [40]), txn("s", 4))
    for v in range(3):
        os.remove(os.path.join(t.log, f"{v:020d}.json"))
    fails("version gap in", "delta", tmp)
    fails("commit 3 is missing (next commit is 4)", "delta", tmp)


@case
def multipart_checkpoint_refused(tmp):
    t = stream_table(tmp, batches=2)
    for v in range(2):
        os.remove(os.path.join(t.log, f"{v:020d}.json"))
    with open(os.path.join(t.log, "_last_checkpoint"), "w") as fh:
        json.dump({"version": 1, "size": 4, "parts": 2}, fh)
    fails("names a multi-part checkpoint (2 parts) at version 1, which this verifier does not read", "delta", tmp)


# ---------------------------------------------------------------------------------------------
# Orphans

@case
def orphans_are_listed_not_failed(tmp):
    t = stream_table(tmp, batches=2)
    t.commit(3, remove("part-1.parquet"))
    for junk in ("part-9.parquet", "part-2.parquet#1", ".part-3.parquet.tmp", "_landfall/staged/x.parquet",
                 "sub dir/y.parquet", "_delta_log.bak"):
        p = os.path.join(tmp, junk)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "w").close()
    open(os.path.join(t.log, "00000000000000000099.json.tmp"), "w").close()  # inside _delta_log: ignored
    v = ok("delta", tmp, "--orphans", "--stream", "s")
    assert v["orphans"] == sorted([".part-3.parquet.tmp", "_delta_log.bak", "_landfall/staged/x.parquet",
                                   "part-2.parquet#1", "part-9.parquet", "sub dir/y.parquet"]), v["orphans"]
    assert "orphans" not in ok("delta", tmp), "orphans are only listed with --orphans"


@case
def url_encoded_paths_are_not_orphans(tmp):
    t = Table(tmp)
    t.commit(0, protocol(), metadata())
    a = rows_file(t, "sub dir/a b.parquet", [1])
    a["add"]["path"] = "sub%20dir/a%20b.parquet"
    t.commit(1, a)
    v = ok("delta", tmp, "--orphans")
    assert v["orphans"] == [] and v["rows"] == 1, v


@case
def parquet_directory_kind_still_works(tmp):
    t = Table(tmp)  # (its _delta_log is unused here)
    rows_file(t, "p=a/b1.parquet", [1, 2])
    mdir = os.path.join(tmp, "_landfall", "manifests", "pq")
    os.makedirs(mdir)
    with open(os.path.join(mdir, "1.json"), "w") as fh:
        json.dump({"files": [{"path": "p=a/b1.parquet", "partition_values": [["p", "a"]]}]}, fh)
    v = ok("parquet", tmp, "--stream", "pq")
    assert v["rows"] == 2 and {r["p"] for r in v["data"]} == {"a"}, v
    assert v["schema"] == {"id": "long", "name": "string", "amount": "double", "p": "string"}, v["schema"]
    rows_file(t, "stray.parquet", [3])
    fails("a manifest-unaware reader sees files outside the manifests: ['stray.parquet']", "parquet", tmp, "--stream", "pq")


# ---------------------------------------------------------------------------------------------

def main():
    only = sys.argv[sys.argv.index("-k") + 1] if "-k" in sys.argv else None
    passed = failed = 0
    for fn in CASES:
        if only and only not in fn.__name__:
            continue
        tmp = tempfile.mkdtemp(prefix="verify-selftest-")
        t0 = time.monotonic()
        try:
            fn(os.path.join(tmp, "table"))
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL {fn.__name__}\n{traceback.format_exc()}")
        else:
            passed += 1
            print(f"ok   {fn.__name__} ({time.monotonic() - t0:.1f}s)")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.stdout.flush()
    # Skip interpreter teardown (deltalake's native threads sometimes abort there).
    os._exit(1 if failed or not passed else 0)


if __name__ == "__main__":
    main()
