#!/usr/bin/env bash
# A longer exactly-once crash run than CI's: 20,000 files, 200 kills per sink (override with the
# env: LANDFALL_CRASH_FILES, LANDFALL_CRASH_KILLS, LANDFALL_CRASH_SEED to replay a printed seed).
# Extra arguments filter the tests: `bench/crash_soak.sh delta` or `bench/crash_soak.sh parquet`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
LANDFALL_CRASH_FILES="${LANDFALL_CRASH_FILES:-20000}" LANDFALL_CRASH_KILLS="${LANDFALL_CRASH_KILLS:-200}" \
  cargo test -p landfall --test exactly_once_crash -- --nocapture "$@"
