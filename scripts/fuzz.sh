#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser of outside input (fuzz/, libFuzzer
# through cargo-fuzz): runs each target for SECONDS_PER_TARGET seconds and
# prints executions, execs/s and crashes per target. Exit 1 when a target
# crashed (its input is in fuzz/artifacts/TARGET/), 2 on a usage error.
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 60 s, every target)
#
# Installs what it needs: a nightly toolchain (rustup) and cargo-fuzz
# $CARGO_FUZZ_VERSION. Targets are built optimised (-O) with overflow checks
# and debug assertions on in storprof's crates (fuzz/Cargo.toml's profile;
# third-party crates as in the release build), without a sanitizer (-s none:
# the fuzzed code is safe Rust; a panic, an overflow, a hang over
# $FUZZ_TIMEOUT s or more than $FUZZ_RSS_MB MiB is the crash looked for).
# Seeds are written at start by each target from the project's own writers
# and fixtures (fuzz/seeds/TARGET, regenerated); what libFuzzer finds grows
# fuzz/corpus/TARGET, kept between runs. Both are outside git.
#
# Builds take /tmp/storprof-cargo.lock (shared with other builds on this
# machine); the fuzzing itself does not hold it. FUZZ_JOBS=N runs N targets
# at once (default 1); FUZZ_NICE=N runs them at nice N; FUZZ_TARGET_DIR
# moves the build (default fuzz/target).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

CARGO_FUZZ_VERSION=0.13.1
ALL_TARGETS=(parquet npz jpeg tfrecord session_files session_dir config thresholds elf python)
LOCK=/tmp/storprof-cargo.lock
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10}
FUZZ_RSS_MB=${FUZZ_RSS_MB:-2048}
FUZZ_JOBS=${FUZZ_JOBS:-1}
FUZZ_TARGET_DIR=${FUZZ_TARGET_DIR:-fuzz/target}

secs=${1:-60}
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 1 ]; then
  echo "usage: $0 [SECONDS_PER_TARGET] [TARGET...]   (targets: ${ALL_TARGETS[*]})" >&2
  exit 2
fi
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")
for t in "${targets[@]}"; do
  if [ ! -f "fuzz/fuzz_targets/$t.rs" ]; then
    echo "unknown target '$t' (targets: ${ALL_TARGETS[*]})" >&2
    exit 2
  fi
done

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }

t0=$(now)
if ! rustup toolchain list | grep -q '^nightly'; then
  echo "fuzz: installing a nightly toolchain (cargo-fuzz needs -Z flags)"
  rustup toolchain install nightly --profile minimal
fi
if [ "$(cargo-fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION"
  flock "$LOCK" cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi
t_install=$(elapsed "$t0")

t1=$(now)
# The fuzz targets load no probes: skip building the eBPF object.
build_log=$(mktemp)
if ! STORPROF_SKIP_EBPF=1 flock "$LOCK" cargo +nightly fuzz build -O -s none --target-dir "$FUZZ_TARGET_DIR" >"$build_log" 2>&1; then
  grep -Ev '^\s+(Compiling|Downloaded|Downloading|Fresh)' "$build_log" >&2 || true
  rm -f "$build_log"
  echo "fuzz: building the targets failed" >&2
  exit 1
fi
rm -f "$build_log"
bin_dir=$FUZZ_TARGET_DIR/x86_64-unknown-linux-gnu/release
t_build=$(elapsed "$t1")
echo "fuzz: tools ready in ${t_install} s, targets built in ${t_build} s"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

run_one() {
  local t=$1
  local corpus=fuzz/corpus/$t seeds=fuzz/seeds/$t artifacts=fuzz/artifacts/$t
  mkdir -p "$corpus" "$seeds" "$artifacts"
  rm -f "$seeds"/*
  local env=(STORPROF_FUZZ_SEEDS="$seeds")
  # First start: the target writes its seeds (libFuzzer reads the
  # directories after the target's init), nothing is fuzzed.
  env "${env[@]}" "$bin_dir/$t" -runs=0 "$seeds" >"$logs/$t.seed" 2>&1 || true
  local start rc=0
  start=$(now)
  env "${env[@]}" nice -n "${FUZZ_NICE:-0}" "$bin_dir/$t" \
    -max_total_time="$secs" -print_final_stats=1 -timeout="$FUZZ_TIMEOUT" \
    -rss_limit_mb="$FUZZ_RSS_MB" -artifact_prefix="$artifacts/" \
    "$corpus" "$seeds" >"$logs/$t.log" 2>&1 || rc=$?
  echo "$rc $(elapsed "$start")" >"$logs/$t.rc"
}

running=0
for t in "${targets[@]}"; do
  echo "fuzz: $t for $secs s"
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$FUZZ_JOBS" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

printf '\n%-14s %8s %14s %10s %8s %8s %s\n' target seconds executions execs/s crashes corpus seeds
failed=0
for t in "${targets[@]}"; do
  read -r rc took <"$logs/$t.rc"
  log=$logs/$t.log
  execs=$(awk -F: '/stat::number_of_executed_units/ { gsub(/ /, "", $NF); print $NF }' "$log" | tail -1)
  rate=$(awk -F: '/stat::average_exec_per_sec/ { gsub(/ /, "", $NF); print $NF }' "$log" | tail -1)
  corpus_n=$(find "fuzz/corpus/$t" -type f | wc -l)
  seeds_n=$(find "fuzz/seeds/$t" -type f | wc -l)
  crashes=0
  if [ "$rc" != 0 ]; then
    crashes=1
    failed=1
  fi
  printf '%-14s %8s %14s %10s %8s %8s %s\n' "$t" "$took" "${execs:-?}" "${rate:-?}" "$crashes" "$corpus_n" "$seeds_n"
done
for t in "${targets[@]}"; do
  read -r rc _ <"$logs/$t.rc"
  if [ "$rc" != 0 ]; then
    echo
    echo "== $t crashed (exit $rc); libFuzzer's report:"
    grep -E -A30 'panicked|ERROR: libFuzzer|==[0-9]+== ERROR|deadly signal|Test unit written' "$logs/$t.log" | head -60
    echo "reproduce: $bin_dir/$t fuzz/artifacts/$t/<file>"
  elif ! grep -q 'stat::number_of_executed_units' "$logs/$t.log"; then
    echo "fuzz: $t printed no statistics:" >&2
    tail -20 "$logs/$t.log" >&2
    failed=1
  fi
done
echo "fuzz: total $(elapsed "$t0") s"
exit "$failed"
