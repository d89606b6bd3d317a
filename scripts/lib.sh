# Shared helpers for the scripts (sourced, not run).

# Build output outside the clone so repeated runs (and CI on the same machine) reuse it.
target_dir() {
  echo "${CARGO_TARGET_DIR:-$HOME/.cache/landfall/target}"
}
export CARGO_TARGET_DIR="$(target_dir)"

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# libclang for RocksDB's bindgen.
ensure_system_packages() {
  if ! dpkg -s libclang1-14 libclang-common-14-dev >/dev/null 2>&1; then
    echo "installing libclang (RocksDB bindings)..." >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends libclang1-14 libclang-common-14-dev >/dev/null
  fi
}

NODE_PREFIX="$HOME/.cache/landfall/node"

# Python verification tools and emulators, Azurite from npm.
ensure_test_tools() {
  python3 -m pip install -q --disable-pip-version-check -r tests/requirements.txt 2>&1 | grep -v "Running pip as the 'root' user" || true
  if [ ! -x "$NODE_PREFIX/node_modules/.bin/azurite-blob" ]; then
    echo "installing azurite..." >&2
    npm install --silent --no-audit --no-fund --prefix "$NODE_PREFIX" azurite@3.35.0 >/dev/null
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_for() { # url, name
  for _ in $(seq 1 120); do
    if curl -s -o /dev/null "$1"; then return 0; fi
    sleep 0.5
  done
  echo "error: $2 did not start ($1)" >&2
  return 1
}

# Start moto server and Azurite on free loopback ports; export where the tests find them.
start_emulators() {
  local logs="${LANDFALL_TEST_LOGS:-$(mktemp -d)}"
  local s3_port az_port
  s3_port=$(free_port)
  az_port=$(free_port)
  moto_server -H 127.0.0.1 -p "$s3_port" >"$logs/moto.log" 2>&1 &
  EMULATOR_PIDS="$!"
  "$NODE_PREFIX/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$az_port" --inMemoryPersistence \
    --skipApiVersionCheck --loose --disableTelemetry >"$logs/azurite.log" 2>&1 &
  EMULATOR_PIDS="$EMULATOR_PIDS $!"
  trap 'kill $EMULATOR_PIDS 2>/dev/null || true' EXIT
  wait_for "http://127.0.0.1:$s3_port/moto-api/" "moto server"
  wait_for "http://127.0.0.1:$az_port/" "Azurite"
  export LANDFALL_TEST_S3_ENDPOINT="http://127.0.0.1:$s3_port"
  export AZURITE_BLOB_STORAGE_URL="http://127.0.0.1:$az_port"
  export LANDFALL_TEST_AZURITE=1
  python3 tests/emulators.py prepare --s3 "$LANDFALL_TEST_S3_ENDPOINT" --azure "$AZURITE_BLOB_STORAGE_URL/devstoreaccount1"
  echo "emulator logs in $logs" >&2
}
