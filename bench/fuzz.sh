#!/usr/bin/env bash
# Coverage-guided fuzzing of every target in fuzz/ with cargo-fuzz (libFuzzer), on the nightly
# toolchain: each target runs for FUZZ_SECONDS (default 600: ten CPU-minutes, one process), its
# corpus in fuzz/corpus/<target> growing with what it finds and then minimised by edges, so the
# kept corpus stays small. A crash stops the script with the failing input in
# fuzz/artifacts/<target>/. Run two invocations on disjoint targets to use two cores.
#   bench/fuzz.sh                 every target
#   bench/fuzz.sh decode ddl      some
#   FUZZ_SERVICES=1 bench/fuzz.sh decode   with the services build (one build for every target)
# Prints, per target: CPU seconds, executions, corpus size before and after, crashes.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz.sh: no nightly toolchain (rustup toolchain install nightly)" >&2; exit 2
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
seconds="${FUZZ_SECONDS:-600}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
# The decoder targets build without the `services` crates (RocksDB, AWS SDKs, deltalake); the
# three targets over queue messages, list pages and the Delta log need them.
features=()
[ -z "${FUZZ_SERVICES:-}" ] || features=(--features services)
for t in "${targets[@]}"; do
  case "$t" in messages|delta_log|listing_page) features=(--features services) ;; esac
done
(cd fuzz && cargo +nightly fuzz build -O "${features[@]}")
for t in "${targets[@]}"; do
  before=$(ls fuzz/corpus/"$t" | wc -l)
  log="fuzz/artifacts/$t.log"
  mkdir -p fuzz/artifacts
  start=$(date +%s)
  set +e
  /usr/bin/time -f "cpu %U %S" -o "fuzz/artifacts/$t.time" \
    bash -c "cd fuzz && exec cargo +nightly fuzz run -O ${features[*]} $t -- -max_total_time=$seconds -rss_limit_mb=4096 -print_final_stats=1" > "$log" 2>&1
  rc=$?
  set -e
  if [ $rc -eq 0 ]; then
    # Minimised by edges (not edge counters): what the repository keeps stays small. The
    # regression-* inputs (earlier findings) stay whatever they add.
    min=$(mktemp -d)
    "fuzz/target/x86_64-unknown-linux-gnu/release/$t" -merge=1 -use_counters=0 "$min" "fuzz/corpus/$t" >> "$log" 2>&1
    cp fuzz/corpus/"$t"/regression-* "$min"/ 2>/dev/null || true
    rm -rf "fuzz/corpus/$t" && mv "$min" "fuzz/corpus/$t"
  fi
  cpu=$(awk '{printf "%.1f", ($2 + $3) / 60}' "fuzz/artifacts/$t.time" 2>/dev/null || echo "?")
  after=$(ls fuzz/corpus/"$t" | wc -l)
  execs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$log" | grep -o "[0-9]*$" || echo "?")
  echo "$t: $(( $(date +%s) - start )) s wall, $cpu CPU-minutes, $execs executions, corpus $before -> $after, exit $rc"
  if [ $rc -ne 0 ]; then tail -40 "$log"; exit $rc; fi
done
