#!/usr/bin/env bash
# The whole test suite on a fresh machine: installs libclang, promtool, systemd-analyze, the
# Python verification and linting tools and Azurite, starts moto server and Azurite on loopback,
# checks the deployment files, and runs every test (unit, integration against the emulators,
# the exactly-once crash test) in a debug build.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_system_packages
ensure_test_tools
start_emulators
# Self-test of the independent table verifier the Rust tests rely on (fails the run on any failure).
python3 tests/verify/test_verify_table.py
# systemd unit, Dockerfile, Kubernetes manifests, alert rules and dashboard (seconds).
bash tests/deploy/check_deploy.sh
# Every CLI output and daemon log of the run is kept and scanned for the tests' credentials.
export LANDFALL_TEST_OUTPUTS="${TMPDIR:-/tmp}/landfall-test-outputs-$$"
rm -rf "$LANDFALL_TEST_OUTPUTS"
status=0
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast || status=$?
else
  cargo test --workspace --no-fail-fast || status=$?
fi
python3 tests/deploy/scan_secrets.py "$LANDFALL_TEST_OUTPUTS" || status=$((status == 0 ? 1 : status))
rm -rf "$LANDFALL_TEST_OUTPUTS"
exit "$status"
