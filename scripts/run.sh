#!/usr/bin/env bash
# The main job: build storprof and run its embedded diagnosis as root.
#
# `storprof demo` generates (once, cached) a small flux
# dataset, diagnoses `storprof bench` with DLIO's legacy reader and with the
# raw reader, and prints both verdicts side by side with the differential
# flamegraph: mlcommons/storage#330, found and fixed, in one command.
# Extra arguments are passed to `storprof demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
STORPROF_SETUP_QUIET=${STORPROF_SETUP_QUIET:-1} bash scripts/setup.sh
cargo build --release --bin storprof
bin="$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)/storprof"
# On PATH as `storprof` (a link, so a rebuild updates it), for the
# README's `sudo storprof ...`; STORPROF_BIN_DIR= (empty) skips it.
bin_dir=${STORPROF_BIN_DIR-/usr/local/bin}
if [ -n "$bin_dir" ]; then
    if ln -sf "$bin" "$bin_dir/storprof" 2>/dev/null; then
        echo "[run] storprof linked into $bin_dir (-> $bin)" >&2
    else
        echo "[run] could not link storprof into $bin_dir; run it as $bin" >&2
    fi
fi
exec "$bin" demo "$@"
