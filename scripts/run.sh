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
exec "${CARGO_TARGET_DIR:-target}/release/storprof" demo "$@"
