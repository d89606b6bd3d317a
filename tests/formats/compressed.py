"""Test helper: write NDJSON or CSV files compressed with every codec landfall reads, by
independent encoders (Python's gzip, bz2, lzma, zlib and zipfile; cramjam for zstd, lz4 and
snappy), into a directory.

  compressed.py DIR json|csv FIRST_ID  ->  prints {"files": {name: [first_id, rows]}, "next": id}

Each file holds `ROWS` rows with ids from its first id on; names end in the codec's extension.
Also written: a gzip file of two members, a file with a UTF-8 BOM (plain and gzipped), files in
Hadoop's block format as Spark writes `.snappy` and `.lz4` (SnappyCodec, Lz4Codec: blocks of at
most 64 KiB here, each a big-endian uncompressed length and one or more big-endian-length raw
chunks), and a truncated gzip (`cut.json.gz` / `cut.csv.gz`, listed under "corrupt").
"""
import bz2, gzip, io, json, lzma, os, sys, zipfile, zlib

import cramjam

ROWS = 50


def text(fmt, first, rows=ROWS, header=True):
    if fmt == "json":
        return "".join(json.dumps({"id": i, "name": f"n{i}, \"q\"", "amount": i / 4, "tag": "t"}) + "\n"
                       for i in range(first, first + rows)).encode()
    head = "id,name,amount,tag\n" if header else ""
    return (head + "".join(f'{i},"n{i}, ""q""",{i / 4},t\n' for i in range(first, first + rows))).encode()


def zipped(data, method):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as z:
        z.writestr("data", data)
    return buf.getvalue()


CODECS = {
    "gz": lambda d: gzip.compress(d),
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "deflate": zlib.compress,
    "zst": lambda d: bytes(cramjam.zstd.compress(d)),
    "lz4": lambda d: bytes(cramjam.lz4.compress(d)),
    "snappy": lambda d: bytes(cramjam.snappy.compress(d)),
    "zip": lambda d: zipped(d, zipfile.ZIP_DEFLATED),
}


def hadoop_blocks(data, raw, block=64 * 1024, chunk=16 * 1024):
    """Hadoop's BlockCompressorStream: per block of input, its length (4 bytes, big-endian),
    then its compressed chunks, each with its length; a block is split into several chunks
    here (as Hadoop does when a block's output exceeds its buffer) to cover that shape too."""
    out = bytearray()
    for b in range(0, len(data), block):
        piece = data[b:b + block]
        out += len(piece).to_bytes(4, "big")
        for c in range(0, len(piece), chunk):
            z = raw(piece[c:c + chunk])
            out += len(z).to_bytes(4, "big") + z
    return bytes(out)


HADOOP = {
    "snappy": lambda d: bytes(cramjam.snappy.compress_raw(d)),
    "lz4": lambda d: bytes(cramjam.lz4.compress_block(d, store_size=False)),
}


def main(out, fmt, first):
    os.makedirs(out, exist_ok=True)
    files, corrupt = {}, {}
    n = first

    def put(name, data, rows=ROWS):
        nonlocal n
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        files[name] = [n, rows]
        n += rows

    for ext, enc in CODECS.items():
        put(f"rows-{ext}.{fmt}.{ext}", enc(text(fmt, n)))
    put(f"stored.{fmt}.zip", zipped(text(fmt, n), zipfile.ZIP_STORED))
    # Spark's own writers: several blocks (3,000 rows are about 230 KB).
    for ext, raw in HADOOP.items():
        put(f"hadoop-{ext}.{fmt}.{ext}", hadoop_blocks(text(fmt, n, 3000), raw), 3000)
    # Two gzip members (as `cat a.gz b.gz` makes); a CSV's second member has no header.
    a, b = text(fmt, n, 20), text(fmt, n + 20, 30, header=False)
    put(f"members.{fmt}.gz", gzip.compress(a) + gzip.compress(b))
    bom = b"\xef\xbb\xbf"
    put(f"bom.{fmt}", bom + text(fmt, n))
    put(f"bom.{fmt}.gz", gzip.compress(bom + text(fmt, n)))
    whole = gzip.compress(text(fmt, 1_000_000))
    with open(os.path.join(out, f"cut.{fmt}.gz"), "wb") as f:
        f.write(whole[: len(whole) // 2])
    corrupt[f"cut.{fmt}.gz"] = "truncated gzip"
    print(json.dumps({"files": files, "corrupt": corrupt, "next": n}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
