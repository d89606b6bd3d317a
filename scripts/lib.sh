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
  if ! ldconfig -p 2>/dev/null | grep -q "libclang"; then
    echo "installing libclang (RocksDB bindings)..." >&2
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends libclang1-14 libclang-common-14-dev >/dev/null
  fi
}
