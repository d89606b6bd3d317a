#!/usr/bin/env bash
# The first open of an older (format 2, one column family) ledger of N files (default
# 1,000,000): how long the move of its queue and expiry index into their column families takes,
# and the open after it. See crates/landfall-state/examples/move_bench.rs. Release build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
cargo run -q --release -p landfall-state --example move_bench -- "${1:-1000000}"
