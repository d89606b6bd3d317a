#!/usr/bin/env bash
# A longer fault soak than CI's (crates/landfall/tests/fault_soak.rs): three continuous streams,
# one per discovery mode, every request through the fault proxy with one in ten faulted, the
# daemon killed with SIGKILL at random instants while writers upload files. Prints the
# `fault soak:` line (kills, requests, faults by kind, files, lost, duplicated, drain time).
#   LANDFALL_SOAK_KILLS (default 60), LANDFALL_SOAK_FAULT_PCT (default 10),
#   LANDFALL_TEST_KILL_SEED to replay a printed seed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
start_emulators
LANDFALL_SOAK_KILLS="${LANDFALL_SOAK_KILLS:-60}" \
  cargo test -p landfall --test fault_soak -- --nocapture "$@" 2>&1 | grep -E "fault soak:|files written|LANDFALL_TEST_KILL_SEED|test result|panicked|FAILED"
