#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this script):
#   1. scripts/setup.sh (installs what a fresh machine lacks)
#   2. cargo fmt --check, clippy -D warnings on the user crates and on the probe crate
#   3. cargo test (unit, golden, integration; root-only tests skip with a reason when not root)
#   4. cross-checks of generated data with pyarrow and numpy (scripts/crosscheck.sh)
# Run as root to include the eBPF integration tests and the scenario suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

step() { printf '\n==> %s\n' "$*"; }

step "setup"
STORPROF_SETUP_QUIET=${STORPROF_SETUP_QUIET:-1} bash scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "clippy (user crates)"
cargo clippy --release --workspace --exclude storprof-ebpf --all-targets --features storprof/mpi -- -D warnings

step "clippy (probe crate, bpfel-unknown-none)"
bash scripts/clippy-ebpf.sh

step "cross-check generated data with pyarrow and numpy"
cargo build --release --features storprof/mpi --bin storprof
bash scripts/crosscheck.sh

step "cargo test"
# One release build serves the tests and the scenario suite (fast readers, real workloads).
cargo test --release --workspace --exclude storprof-ebpf --features storprof/mpi -- --test-threads="${STORPROF_TEST_THREADS:-1}"
