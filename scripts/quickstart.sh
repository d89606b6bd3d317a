#!/usr/bin/env bash
# Build landfall, generate a small NDJSON landing area, ingest it into a local Delta table with
# config/quickstart.toml, and print the run summary. Safe to run again: only new files are
# ingested the second time.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_system_packages
# Debug build: shares the cache with the test suite (the benchmarks build --release).
cargo build --bin landfall
python3 bench/gen_ndjson.py --out .landfall/quickstart/landing/orders --files 20 --rows 50
"$(target_dir)/debug/landfall" check --config config/quickstart.toml
"$(target_dir)/debug/landfall" run --config config/quickstart.toml --available-now
