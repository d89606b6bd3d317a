"""The differential corpus: small tricky files whose inferred schema (and, for some, rows) landfall
and Spark must agree on. Each case is one group of files inferred together, as one stream's
sample; `write(root)` writes case `id` under `root/<id>/`.

A case says how landfall reads it (`landfall`: TOML lines of its stream) and how Spark does
(`spark`: reader options), so both see the same dialect. `typed` is `infer_column_types` on
landfall's side; on Spark's it is `inferSchema` for CSV and XML, and the absence of
`primitivesAsString` for JSON (Auto Loader without `inferColumnTypes` keeps JSON structure and
types every leaf as a string). `rows`: also compare the rows landfall commits with Spark's
permissive read of the same files. `sample_first`: the schema comes from the first file (by
name) alone (landfall's `schema_sample_files = 1`), so later files hold values that do not fit
it: rescued by landfall, corrupt records for Spark.

Used by oracle.py (Spark's answers) and crates/landfall/tests/spark_oracle.rs (landfall's).
"""

import json
import os

BOM = "\ufeff"


def _lines(*records):
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)


def _pretty(*docs):
    return "".join(json.dumps(d, indent=2) + "\n" for d in docs)


def _case(id, fmt, files, typed=True, landfall=(), spark=None, rows=False, sample_first=False):
    if sample_first:
        landfall = ["schema_sample_files = 1", *landfall]
    return {
        "id": id,
        "format": fmt,
        "files": files,
        "typed": typed,
        "landfall": list(landfall),
        "spark": spark or {},
        "rows": rows,
        "sample_first": sample_first,
    }


def _json_cases():
    nulls = {"id": 1, "a": None, "s": None, "l": None}
    nested = {"id": 2, "a": [1, 2], "s": {"y": "x", "b": True}, "l": [{"k": 1}]}
    out = []
    for typed in (True, False):
        suffix = "typed" if typed else "strings"
        out.append(_case(f"json_null_vs_nested_{suffix}", "json",
                         {"a.json": _lines(nulls), "b.json": _lines(nested)}, typed=typed,
                         rows=typed))
        out.append(_case(f"json_ml_null_vs_nested_{suffix}", "json",
                         {"a.json": _pretty(nulls), "b.json": _pretty(nested)}, typed=typed,
                         landfall=["json.multi_line = true"], spark={"multiLine": "true"}))
    out += [
        _case("json_mixed_depth_arrays", "json", {
            "a.json": '{"id":1,"a":[1.5,2]}\n{"id":2,"a":[[1,2]]}\n'
                      '{"id":3,"b":[1,[2]],"c":[[1],[2.5]]}\n',
        }, rows=True),
        _case("json_numbers", "json", {
            "a.json": '{"i":1,"d":1.5,"mix":1,"big":12345678901234567890123,"neg":-5,'
                      '"exp":1e3,"bigmix":1}\n'
                      '{"i":2,"mix":2.5,"big":7,"bigmix":1.5,"huge":1234567890123456789012345678901234567890}\n',
        }, rows=True),
        _case("json_empty_values", "json", {
            "a.json": '{"id":1,"o":{},"l":[],"lo":[{}],"e":"","n":null,"nn":{"x":null}}\n',
            "b.json": '{"id":2,"e":5,"l":["x"]}\n',
        }, rows=True),
        _case("json_field_order", "json", {
            "a.json": '{"z":1,"b":{"y":1,"x":{"q":1,"p":2}},"C":2,"_a":1,"a1":[{"d":1,"c":2}]}\n',
            "b.json": '{"m":"new","b":{"w":0}}\n',
        }, rows=True),
        _case("json_timestamp_strings", "json", {
            "a.json": _lines({"ts": "2013-01-01 01:00:00", "tz": "2013-01-01T01:00:00Z",
                              "d": "2013-01-01", "n": "12"}),
        }, rows=True),
        _case("json_prefers_decimal", "json", {
            "a.json": '{"p":12.50,"r":0.001,"i":1,"s":"12.5","w":123456789012345678901234567890.5}\n'
                      '{"p":7.1,"i":0.5,"r":0.25,"s":"x","sd":"-12.5","sz":"0.05"}\n',
        }, landfall=["json.prefers_decimal = true"], spark={"prefersDecimal": "true"}),
        # Spark refuses the negative scale of 1e3 as a decimal; landfall widens it.
        _case("json_prefers_decimal_exponent", "json", {
            "a.json": '{"e3":1e3,"big":1e40}\n',
        }, landfall=["json.prefers_decimal = true"], spark={"prefersDecimal": "true"}),
        _case("json_bom_and_empty_files", "json", {
            "a.json": BOM + '{"id":1,"name":"x"}\n',
            "b.json": "",
            "c.json": "\n\n",
            "d.json": '{"id":2,"extra":true}\n',
        }, rows=True),
        _case("json_type_conflicts", "json", {
            "a.json": '{"a":1,"b":true,"c":"x","d":{"x":1},"e":[1],"f":1}\n',
            "b.json": '{"a":"s","b":1,"c":{"y":1},"d":[1],"e":{"z":1},"f":[1]}\n',
        }, rows=True),
        _case("json_ml_top_level_array", "json", {
            "a.json": json.dumps([{"b": 1}, {"a": 2, "b": None}], indent=2),
        }, landfall=["json.multi_line = true"], spark={"multiLine": "true"}, rows=True),
        _case("json_line_arrays_and_scalars", "json", {
            "a.json": '[{"b":1},{"a":2}]\n7\n"x"\n{"c":true}\n',
        }, rows=True),
        _case("json_nested_nulls", "json", {
            "a.json": '{"s":{"a":null},"l":[null]}\n',
            "b.json": '{"s":{"a":{"b":1}},"l":[{"x":1}]}\n',
        }),
        _case("json_malformed_record", "json", {
            "a.json": '{"a":1}\n{"a":\n{"b":2}\n',
        }, rows=True),
        # Strict JSON, as Jackson reads it by default: leading zeros, an unescaped control
        # character in a string, a missing or trailing comma and `1.` are corrupt records;
        # a tab between tokens and a \r\n line end are whitespace.
        _case("json_strict_syntax", "json", {
            "a.json": '{"a":1,"s":"x"}\n{"a":007,"s":"lead"}\n{"a":2,"s":"tab\there"}\n'
                      '{"a":3,"l":[1 2]}\n{"a":4,"s":"y",}\n{"a":5,"s":"z"}\r\n'
                      '{"a":6,\t"s":"w"}\n{"a":7,"d":1.}\n{"a":8,"s":"ok"}\n',
        }, rows=True),
        _case("json_later_misfits", "json", {
            "a.json": '{"id":1,"n":5,"s":"x","o":{"k":1}}\n',
            "b.json": '{"id":2,"n":"five","s":"y","o":{"k":"z"}}\n{"id":3,"n":7,"s":8,"o":{"k":2}}\n',
        }, rows=True, sample_first=True),
        _case("json_partitioned", "json", {
            "k=1/a.json": '{"z":1,"a":"x"}\n',
            "k=2/b.json": '{"z":2,"m":true}\n',
        }, rows=True),
    ]
    return out


def _csv_cases():
    numbers = ("small,big,beyond,mixed,nan,inf,exp,plus,dot\n"
               "1,3000000000,12345678901234567890,1,NaN,Inf,1e5,+5,5.\n"
               "-2,1,1,2.5,1.5,-Inf,2.5E-3,6,6.\n")
    return [
        _case("csv_null_value_tokens", "csv", {
            "a.csv": "n,x,day,at,flag,s\n1,NA,2013-01-01,NA,true,NA\n"
                     "NA,2.5,NA,2013-01-01 01:00:00,NA,a\n3,1,2013-01-02,2013-01-02 02:00:00,false,NA\n",
        }, landfall=['csv.null_value = "NA"'], spark={"nullValue": "NA"}, rows=True),
        _case("csv_timestamps", "csv", {
            "a.csv": "space,t,frac,zulu,offset,hours,compact,date_then_ts,d\n"
                     "2013-01-01 01:00:00,2013-01-01T01:00:00,2013-01-01 01:00:00.123456,"
                     "2013-01-01T01:00:00Z,2013-01-01T01:00:00+02:00,2013-01-01 01:00:00+02,"
                     "2013-01-01T01:00:00+0530,2013-01-01,2013-01-01\n"
                     "2013-01-02 23:59:59,2013-01-02T00:00:00,2013-01-02 00:00:00.5,"
                     "2013-01-02T00:00:00Z,2013-01-02T00:00:00-05:30,2013-01-02 00:00:00-01,"
                     "2013-01-02T00:00:00-0100,2013-01-02 03:00:00,2013-02-28\n",
        }, rows=True),
        _case("csv_numbers", "csv", {"a.csv": numbers}, rows=True),
        _case("csv_numbers_strings", "csv", {"a.csv": numbers}, typed=False, rows=True),
        _case("csv_quoted_newlines", "csv", {
            "a.csv": 'id,text,flag\n1,"line one\nline two",true\n2,"a, ""quoted"" b",False\n',
        }, rows=True),
        _case("csv_bom", "csv", {"a.csv": BOM + "id,name\n1,x\n2,y\n"}, rows=True),
        _case("csv_empty_column_and_file", "csv", {
            "a.csv": "id,none,later\n1,,\n2,,\n",
            "b.csv": "id,none,later\n3,,4.5\n",
        }, rows=True),
        _case("csv_stream_formats", "csv", {
            "a.csv": "d,t\n30.11.2026,30/11/2026 13:05\n01.12.2026,01/12/2026 00:00\n",
        }, landfall=['csv.date_format = "dd.MM.yyyy"', 'csv.timestamp_format = "dd/MM/yyyy HH:mm"'],
           spark={"dateFormat": "dd.MM.yyyy", "timestampFormat": "dd/MM/yyyy HH:mm"}, rows=True),
        _case("csv_later_misfits", "csv", {
            "a.csv": "id,n,d,f\n1,5,2013-01-01,true\n",
            "b.csv": "id,n,d,f\n2,five,soon,maybe\n3,7,2013-01-02,false\n",
        }, rows=True, sample_first=True),
        _case("csv_ragged_records", "csv", {
            "a.csv": "id,name\n1,a\n2,b,extra\n3\n",
        }, rows=True),
        _case("csv_lenient_temporal", "csv", {
            "a.csv": "onedigit,yearmonth,timeonly,named,minutes\n"
                     "2013-1-1,2013-01,01:00:00,2013-01-01 01:00:00 UTC,2013-01-01T01:00\n",
        }),
        _case("csv_partitioned", "csv", {
            "k=1/a.csv": "z,a\n1,x\n",
            "k=2/b.csv": "z,a\n2,y\n",
        }, rows=True),
    ]


def _xml_cases():
    books = ("<catalog>\n"
             '  <book id="b1"><title>Rust</title><author>Ann</author><author>Bob</author>'
             '<price currency="EUR">12.5</price><year>2020</year><ok>true</ok>'
             "<published>2020-01-02</published><at>2020-01-02T03:04:05</at><empty/></book>\n"
             '  <book id="b2"><title>Delta</title><author>Cy</author><price>7</price>'
             "<year>2021</year><ok>false</ok></book>\n"
             "</catalog>\n")
    return [
        _case("xml_books", "xml", {"a.xml": books},
              landfall=['xml.row_tag = "book"'], spark={"rowTag": "book"}, rows=True),
        _case("xml_books_strings", "xml", {"a.xml": books}, typed=False,
              landfall=['xml.row_tag = "book"'], spark={"rowTag": "book"}),
        _case("xml_text_and_structs", "xml", {
            "a.xml": "<rows><row><a>1</a><p c=\"x\">1</p><z>1</z></row>"
                     "<row><a><b>1</b></a><p>2.5</p><z>2</z></row></rows>\n",
        }, landfall=['xml.row_tag = "row"'], spark={"rowTag": "row"}, rows=True),
        _case("xml_two_files", "xml", {
            "a.xml": "<rows><row><n>1</n><l>1</l></row></rows>\n",
            "b.xml": "<rows><row><n>x</n><l>2</l><l>3</l></row></rows>\n",
        }, landfall=['xml.row_tag = "row"'], spark={"rowTag": "row"}),
    ]


def cases():
    return _json_cases() + _csv_cases() + _xml_cases()


def write(root):
    """Write every case's files under `root/<id>/`; return the cases."""
    all_cases = cases()
    for c in all_cases:
        for name, text in c["files"].items():
            path = os.path.join(root, c["id"], name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(text)
    return all_cases
