#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this script):
#   1. scripts/setup.sh (installs what a fresh machine lacks) and scripts/setup-dlio.sh
#      (the real DLIO benchmark with PyTorch in target/dlio-venv, for tests/dlio.rs)
#   2. cargo fmt --check, clippy -D warnings on the user crates and on the probe crate
#   3. cargo test (unit, golden, integration); root-only tests are #[ignore = "needs root"]:
#      as root they run too (--include-ignored), otherwise one line at the end says how many were skipped
#   4. the book (docs/, mdBook) builds and its and the README's links hold (scripts/docs.sh)
#   5. cross-checks of generated data with pyarrow and numpy (scripts/crosscheck.sh)
#   The fuzz targets' seeds, truncated and bit-flipped, are replayed by cargo test
#   (fuzz-targets/); the fuzzing itself is scripts/fuzz.sh, run on its own (its
#   nightly build of the whole project took 10 of CI's minutes).
# Run as root to include the eBPF integration tests and the scenario suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

# Each step says how long the previous one took and the time so far, so a
# slow CI run shows where its minutes went.
ci_start=$SECONDS
step_start=$SECONDS
step_name=""
step() {
  if [ -n "$step_name" ]; then
    printf '<== %s: %d s (total %d s)\n' "$step_name" $((SECONDS - step_start)) $((SECONDS - ci_start))
  fi
  step_name="$*"
  step_start=$SECONDS
  printf '\n==> %s\n' "$*"
}

# Sum of the "N ignored" of every test binary's "test result:" line in cargo test output $1.
sum_ignored() {
  awk '/^test result:/ { for (i = 2; i <= NF; i++) if ($i == "ignored;") n += $(i - 1) } END { print n + 0 }' "$1"
}

# Disk: a full run takes about 12 GiB under target/ (release build with line
# tables, test binaries, the probe builds, the pyarrow venv, and 7 GiB for
# the DLIO venv with PyTorch's CUDA runtime packages). Say so up front
# rather than failing on ENOSPC half-way.
target_fs="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target_fs"
free_kib=$(df -Pk "$target_fs" | awk 'NR == 2 { print $4 }')
echo "disk: $((free_kib / 1024)) MiB free under $target_fs (a full run needs about 13 GiB)"
if [ "${free_kib:-0}" -lt $((13 * 1024 * 1024)) ]; then
  echo "warning: less than 13 GiB free; the build may fail with 'No space left on device'" >&2
fi

step "setup"
STORPROF_SETUP_QUIET=${STORPROF_SETUP_QUIET:-1} bash scripts/setup.sh
# The real DLIO benchmark with PyTorch for tests/dlio.rs (a venv under target/).
STORPROF_SETUP_QUIET=${STORPROF_SETUP_QUIET:-1} bash scripts/setup-dlio.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "clippy (user crates)"
cargo clippy --release --workspace --exclude storprof-ebpf --all-targets --features storprof/mpi -- -D warnings

step "clippy (probe crate, bpfel-unknown-none)"
bash scripts/clippy-ebpf.sh

step "cargo doc (warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps --workspace --exclude storprof-ebpf --features storprof/mpi

step "docs: the book builds and its links hold"
bash scripts/docs.sh

step "cross-check generated data with pyarrow and numpy"
cargo build --release --features storprof/mpi --bin storprof
bash scripts/crosscheck.sh

step "cargo test"
# One release build serves the tests and the scenario suite (fast readers, real workloads).
test_args=(--release --workspace --exclude storprof-ebpf --features storprof/mpi)
if [ "$(id -u)" = 0 ]; then include_ignored=(--include-ignored); else include_ignored=(); fi
test_log=$(mktemp)
trap 'rm -f "$test_log"' EXIT
cargo test "${test_args[@]}" -- --test-threads="${STORPROF_TEST_THREADS:-1}" "${include_ignored[@]}" 2>&1 | tee "$test_log"
if [ "$(id -u)" = 0 ]; then
  # Every ignored test is a root test (the mpi feature is on): count them from the list.
  ran=$(cargo test "${test_args[@]}" -- --ignored --list 2>/dev/null | grep -c ': test$' || true)
  echo "root-only tests: $ran ran (root)"
  step "kill and soak smoke runs (root)"
  # Short versions of the reliability scripts (README: Reliability).
  STORPROF="${CARGO_TARGET_DIR:-target}/release/storprof" bash scripts/kill-test.sh 6 2
  STORPROF="${CARGO_TARGET_DIR:-target}/release/storprof" bash scripts/soak.sh 20 100 5
else
  # With the mpi feature on, every ignored test is a root test.
  echo "root-only tests: $(sum_ignored "$test_log") ignored (not root)"
fi
echo "disk: target/ holds $(du -sm "$target_fs" 2>/dev/null | cut -f1) MiB after the run"
step "done"
