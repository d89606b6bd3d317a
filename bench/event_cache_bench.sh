#!/usr/bin/env bash
# Events per second into a location's event cache (managed file events), against bare
# RocksDB writes of the same records in the same synced batches, and the reading side. See
# crates/landfall-state/examples/event_cache_bench.rs. `--release` for a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
profile=()
if [ "${1:-}" = "--release" ]; then profile=(--release); shift; fi
cargo run -q "${profile[@]}" -p landfall-state --example event_cache_bench -- "${1:-200000}" "${2:-1000}"
