"""Write the starting corpus of every fuzz target into fuzz/corpus/<target>/ (kept in the repo;
the fuzzer adds what it finds beside them). Run from anywhere: python3 fuzz/seeds.py

A decode seed is its knob bytes (format, codec, schema/batch size, option bits, cut) followed
by a valid file; an infer seed (format, codec, bits) likewise; see crates/landfall-fuzz.
Files come from independent writers: pyarrow (Parquet, ORC), fastavro (Avro), Python's
gzip/bz2/lzma/zlib/zipfile.
"""
import bz2, gzip, hashlib, io, json, lzma, os, zipfile, zlib

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
FORMATS = ["json", "csv", "txt", "xml", "avro", "parquet", "bin", "orc"]
CODECS = ["", "gz", "bz2", "xz", "zst", "lz4", "snappy", "zip", "deflate"]


def put(target, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def compress(codec, data):
    if codec == "gz":
        return gzip.compress(data)
    if codec == "bz2":
        return bz2.compress(data)
    if codec == "xz":
        return lzma.compress(data)
    if codec == "deflate":
        return zlib.compress(data)
    if codec == "zip":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("f", data)
        return buf.getvalue()
    return data


TEXT = {
    "json": [
        b'{"a": 1, "b": "x", "c": 1.5, "d": true}\n{"a": "oops", "b": null, "e": [1]}\n',
        b'{"ts": "2026-12-02T10:00:00Z", "d": "2026-12-02", "n": 12.34, "s": "\\u00e9", "i": 7}\n',
        b'{"o": {"x": 1, "y": ["a"]}, "m": {"k": 2}, "l": [{"z": 0.5}]}\n{"o": 3}\n',
        b'[{"a": 1}, {"a": 2,\n "b": "multi"}]',
        b"// comment\n{'a': 1, b: 'single'}\n",
    ],
    "csv": [
        b"a,b,c,d\n1,x,1.5,true\n2,\"q,uo\"\"te\",NaN,false\nbad,,,\n",
        b"ts,d,n,s,i\n2026-12-02 10:00:00,2026-12-02,12.34,s,7\n,,x,\"multi\nline\",\n",
    ],
    "txt": [b"one\ntwo\r\nthree\rfour", b"\xef\xbb\xbfbom line\n"],
    "xml": [
        b"<rows><row a=\"1\"><b>x</b><c>1.5</c><d>true</d></row><row><a>no</a></row></rows>",
        b"<row><o><x>1</x><y>a</y><y>b</y></o><l><z>0.5</z></l></row>",
    ],
    "bin": [b"\x00\x01binary"],
}


def avro_files():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "long"}, {"name": "b", "type": ["null", "string"]},
        {"name": "c", "type": "double"}, {"name": "d", "type": "boolean"}]}
    for codec in ["null", "deflate", "snappy"]:
        buf = io.BytesIO()
        fastavro.writer(buf, schema, [{"a": 1, "b": "x", "c": 1.5, "d": True},
                                      {"a": 2, "b": None, "c": -0.0, "d": False}], codec=codec)
        yield buf.getvalue()


def arrow_table():
    return pa.table({
        "a": pa.array([1, None], pa.int64()), "b": ["x", None], "c": [1.5, 2.0], "d": [True, False],
        "o": pa.array([{"x": 1, "y": ["a"]}, None], pa.struct([("x", pa.int32()), ("y", pa.list_(pa.string()))])),
    })


def parquet_files():
    for compression in ["none", "snappy", "zstd"]:
        buf = io.BytesIO()
        pq.write_table(arrow_table(), buf, compression=compression)
        yield buf.getvalue()


def orc_files():
    for compression in ["uncompressed", "zlib", "snappy"]:
        buf = io.BytesIO()
        orc.write_table(arrow_table(), buf, compression=compression)
        yield buf.getvalue()


def main():
    for fi, fmt in enumerate(FORMATS):
        bodies = TEXT.get(fmt) or {"avro": avro_files, "parquet": parquet_files, "orc": orc_files}[fmt]()
        bodies = list(bodies)
        for si, body in enumerate(bodies):
            codecs = ["", "gz", "bz2", "xz", "zip", "deflate"] if fmt in TEXT else [""]
            for codec in codecs:
                ci = CODECS.index(codec)
                for bits in (0, 1 | 16 | 32, 2 | 4 | 8 | 64 | 128):
                    put("decode", bytes([fi, ci, si % 3 + 16 * (bits % 3), bits, 100]) + compress(codec, body))
                put("infer", bytes([fi, ci, 1]) + compress(codec, body))
    for si, body in enumerate(orc_files()):
        for bits in (0, 16 | 32):
            put("decode_orc", bytes([0, 2 + si, bits, 128]) + body)
    messages()
    ddl()
    config()
    delta_log()
    listing()


def messages():
    s3 = {"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                       "eventTime": "2026-12-02T10:00:00.000Z",
                       "s3": {"bucket": {"name": "b"}, "object": {"key": "in/a+b%2Bc.json", "size": 10,
                                                                   "eTag": "abc", "sequencer": "0A"}}}]}
    put("messages", json.dumps(s3).encode())
    put("messages", json.dumps({"Type": "Notification", "MessageId": "m", "TopicArn": "arn:aws:sns:us-east-1:1:t",
                                "Message": json.dumps(s3)}).encode())
    put("messages", json.dumps({"Event": "s3:TestEvent", "Service": "Amazon S3"}).encode())
    eg = [{"id": "1", "eventType": "Microsoft.Storage.BlobCreated", "subject": "/blobServices/default/containers/c/blobs/in/a.json",
           "eventTime": "2026-12-02T10:00:00Z", "data": {"api": "PutBlob", "url": "https://acct.blob.core.windows.net/c/in/a.json",
                                                        "contentLength": 10, "eTag": "0x1", "blobType": "BlockBlob"}}]
    put("messages", json.dumps(eg).encode())
    import base64
    put("messages", base64.b64encode(json.dumps(eg[0]).encode()))
    ce = {"specversion": "1.0", "type": "Microsoft.Storage.BlobCreated", "source": "/subscriptions/x", "id": "1",
          "time": "2026-12-02T10:00:00Z", "subject": "/blobServices/default/containers/c/blobs/b.json",
          "data": {"api": "PutBlob", "url": "https://acct.blob.core.windows.net/c/b.json", "contentLength": 3}}
    put("messages", json.dumps(ce).encode())
    ps = {"message": {"attributes": {"eventType": "OBJECT_FINALIZE", "bucketId": "b", "objectId": "in/x.json"},
                      "data": base64.b64encode(json.dumps({"name": "in/x.json", "bucket": "b", "size": "3"}).encode()).decode()}}
    put("messages", json.dumps(ps).encode())


def ddl():
    for text in ["a INT, b STRING NOT NULL, c DECIMAL(10,2)", "`we ird` STRUCT<x: ARRAY<MAP<STRING, BIGINT>>>",
                 "ts TIMESTAMP_NTZ, d DATE, v VARIANT", "a.b.c LONG, `x.y` DOUBLE COMMENT 'hi'", "a BINARY, b SMALLINT, c TINYINT, d FLOAT"]:
        put("ddl", text.encode())


def config():
    put("config", b'''[[streams]]
name = "orders"
source = "file:///tmp/in"
format = "json"
schema = "id BIGINT, name STRING"
[streams.sink]
kind = "delta"
uri = "file:///tmp/out"
''')
    put("config", b'''[server]
listen = "127.0.0.1:${PORT:-9000}"
[[streams]]
name = "s"
source = "s3://bucket/in/"
format = "csv"
schema_evolution_mode = "rescue"
[streams.discovery]
mode = "notifications"
queue_url = "http://localhost:5000/q"
[streams.sink]
kind = "parquet"
uri = "s3://bucket/out/"
''')


def delta_log():
    put("delta_log", b'{"commitInfo":{"timestamp":1,"operation":"WRITE","landfall.owner":"o1"}}\n'
                     b'{"txn":{"appId":"stream","version":4,"lastUpdated":1}}\n'
                     b'{"add":{"path":"part-0.parquet","size":1,"modificationTime":1,"dataChange":true,"tags":{"landfall.owner":"o1"}}}\n')
    put("delta_log", b'{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}\n{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{}","partitionColumns":[],"configuration":{}}}\n')


def listing():
    put("listing_page", b'\x00<?xml version="1.0"?><ListBucketResult><IsTruncated>false</IsTruncated><EncodingType>url</EncodingType>'
                        b'<Contents><Key>in/a%2Bb+c.json</Key><LastModified>2026-11-30T10:00:00.000Z</LastModified><ETag>"e"</ETag><Size>10</Size></Contents>'
                        b'<Contents><Key>in/x//y.json</Key><LastModified>2026-11-30T10:00:01.000Z</LastModified><Size>1</Size></Contents></ListBucketResult>')
    put("listing_page", b'\x01<EnumerationResults><Blobs><Blob><Name Encoded="true">in/%01b.json</Name><Properties>'
                        b'<Last-Modified>Tue, 01 Dec 2026 01:00:02 GMT</Last-Modified><Etag>0x1</Etag><Content-Length>12</Content-Length>'
                        b'</Properties></Blob></Blobs><NextMarker>m</NextMarker></EnumerationResults>')


if __name__ == "__main__":
    main()
