#!/usr/bin/env python3
"""Write N NDJSON files of M rows each into a directory (the quickstart sample and the benchmark
input). Rows: order_id (unique across all files), customer, amount, currency, ordered_at, note.
Deterministic for a given --seed. --pad makes rows larger (benchmark shapes)."""
import argparse, json, os, random

def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--files", type=int, default=20)
    p.add_argument("--rows", type=int, default=50)
    p.add_argument("--start", type=int, default=0, help="first file index (ids continue from it)")
    p.add_argument("--pad", type=int, default=0, help="extra characters in each row's note")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--partitioned", action="store_true", help="write under date=YYYY-MM-DD/ directories")
    a = p.parse_args()
    rnd = random.Random(a.seed + a.start)
    customers = ["acme", "globex", "initech", "umbrella", "hooli", "stark"]
    currencies = ["EUR", "USD", "GBP"]
    os.makedirs(a.out, exist_ok=True)
    for f in range(a.start, a.start + a.files):
        sub = os.path.join(a.out, f"date=2026-11-{1 + f % 28:02d}") if a.partitioned else a.out
        os.makedirs(sub, exist_ok=True)
        path = os.path.join(sub, f"orders-{f:06d}.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            for r in range(a.rows):
                oid = f * a.rows + r
                row = {
                    "order_id": oid,
                    "customer": rnd.choice(customers),
                    "amount": round(rnd.uniform(1, 500), 2),
                    "currency": rnd.choice(currencies),
                    "ordered_at": f"2026-11-{1 + f % 28:02d}T{r % 24:02d}:{r % 60:02d}:00Z",
                    "note": "x" * a.pad,
                }
                fh.write(json.dumps(row, separators=(",", ":")) + "\n")
        os.rename(tmp, path)

if __name__ == "__main__":
    main()
