#!/usr/bin/env bash
# Build landfall in release mode and run the benchmarks (bench/run_bench.py) against DuckDB.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_system_packages
python3 -m pip install -q --disable-pip-version-check -r tests/requirements.txt 2>&1 | grep -v "Running pip as the 'root' user" || true
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_RELEASE:-$HOME/.cache/landfall/target-release}"
cargo build --release --bin landfall
python3 bench/run_bench.py --bin "$CARGO_TARGET_DIR/release/landfall" "$@"
