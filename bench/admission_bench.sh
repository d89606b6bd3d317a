#!/usr/bin/env bash
# Admission with a large ledger: fill a RocksDB ledger with N tracked files (default
# 1,000,000), then time one discovery round's ledger work (lookups of known and new files,
# admission of new ones) and print the process RSS. See
# crates/landfall-state/examples/admission_bench.rs. `--release` for a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
profile=()
if [ "${1:-}" = "--release" ]; then profile=(--release); shift; fi
cargo run -q "${profile[@]}" -p landfall-state --example admission_bench -- "${1:-1000000}"
