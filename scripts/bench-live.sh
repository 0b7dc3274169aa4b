#!/usr/bin/env bash
# Early verdicts and the live view's cost, measured (not a timed test):
#
#   1. Time to a correct verdict: every scenario of the suite
#      (tests/scenarios.rs: the C workloads, storprof bench, pipeline.py),
#      made to run far longer than needed, under
#      `storprof diagnose --until-verdict HOLD`. Per scenario: the verdict,
#      whether it is the suite's expected one, and the seconds from the
#      training window's start (from the recording's start for workloads
#      without a consumer) to the early verdict; a stall is timed from the
#      start. Plus the two stalls of tests/live.rs (a fork deadlock, a job
#      that read, then loops), at the default --stall-after (60 s).
#   2. The live view's own cost: storprof's CPU seconds (session.json
#      `recorder_cpu_s`: user + system of storprof alone, the traced command
#      excluded) recording the CPU-bound pipeline for SECS s with
#      `--live lines` (an analysis every 5 s) against `--live off`, REPS
#      interleaved runs each; medians.
#
# Run as root: sudo scripts/bench-live.sh [HOLD] [REPS] [SECS]
set -euo pipefail
cd "$(dirname "$0")/.."
HOLD=${1:-10}
REPS=${2:-5}
SECS=${3:-30}
export PATH="$HOME/.cargo/bin:$PATH"
if [ "$(id -u)" != 0 ]; then echo "bench-live.sh: needs root (sudo)" >&2; exit 2; fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${STORPROF:-}" ]; then
    cargo build --release -p storprof -q
    STORPROF=$CARGO_TARGET_DIR/release/storprof
fi
VENV=${STORPROF_VENV:-$CARGO_TARGET_DIR/venv}
if ! "$VENV/bin/python" -c 'import pyarrow' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check 'pyarrow==26.0.1' numpy
fi
PY=$VENV/bin/python
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/storprof-live.XXXXXX")
CG=/sys/fs/cgroup/blkio/storprof-bench-live-$$
cleanup() { rmdir "$CG" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

gcc -O2 -static -pthread -fno-omit-frame-pointer -o "$WORK/workload" tests/workloads/workload.c
WL=$WORK/workload
"$WL" make-file "$WORK/data.bin" 256
"$PY" tests/python/pipeline.py --make-data "$WORK/parquet" --format parquet > /dev/null
"$PY" tests/python/pipeline.py --make-data "$WORK/files" --format files > /dev/null
SMALL=(--param dataset.num_files_train=4 --param dataset.num_samples_per_file=8
       --param dataset.parquet_row_group_size=8)
"$STORPROF" datagen --workload flux --data-dir "$WORK/bench" "${SMALL[@]}" > /dev/null
bench() { # READER COMPUTATION
    echo "$STORPROF bench --workload flux --data-dir $WORK/bench --reader $1 --read-threads 2" \
         "--computation-time $2 --results-dir $WORK/results-$1 ${SMALL[*]}" \
         "--param reader.batch_size=4 --param train.epochs=1000"
}
pipeline() { echo "$PY tests/python/pipeline.py --data $*"; }
throttled() { # BYTES/S FILE COMMAND...: the command reads FILE's device at BYTES/S
    local bps=$1 file=$2; shift 2
    mkdir -p "$CG"
    local dev; dev=$(stat -c '%d' "$file")
    echo "$((dev >> 8)):$((dev & 255)) $bps" > "$CG/blkio.throttle.read_bps_device"
    echo "echo \$\$ > $CG/cgroup.procs && exec $*"
}

printf '\n%-24s %-19s %-19s %8s %10s\n' scenario expected got correct "to verdict"
run() { # NAME EXPECTED SHELL-COMMAND
    local name=$1 expected=$2 cmd=$3 dir=$WORK/s-$1
    "$STORPROF" diagnose --until-verdict "$HOLD" --live off --output "$dir" -- sh -c "$cmd" \
        > "$WORK/$name.out" 2> "$WORK/$name.err" || true
    python3 - "$dir" "$name" "$expected" <<'PY'
import json, sys
d, name, expected = sys.argv[1:]
try:
    v = json.load(open(f"{d}/verdict.json"))
    s = json.load(open(f"{d}/session.json"))
except OSError as e:
    print(f"{name:<24} {expected:<19} {'(no verdict)':<19} {'no':>8} {'-':>10}")
    sys.exit(0)
got = v["verdict"]
early = s.get("early_verdict")
if early is None:
    when = "ran out"
else:
    start = (v.get("window") or {}).get("start_s")
    if start is None or got == "stalled":
        start = 0.0
    when = f"{early['held_to_s'] - start:.1f} s"
ok = "yes" if got == expected else "no"
print(f"{name:<24} {expected:<19} {got:<19} {ok:>8} {when:>10}")
PY
}
run storage-bound storage-bound "$(throttled $((20 << 20)) "$WORK/data.bin" "$WL" odirect-read "$WORK/data.bin" 600)"
rmdir "$CG" 2>/dev/null || true
cat "$WORK/data.bin" > /dev/null
run page-cache-served page-cache-served "$WL cached-read $WORK/data.bin 600"
run cpu-starved cpu-starved "$WL spin $(( $(nproc) * 3 )) 600"
run lock-contention lock-contention "$WL lock 8 600"
run cpu-bound-reader cpu-bound-reader "$(bench dlio-legacy 0)"
run compute-bound compute-bound "$(bench raw 0.4)"
run pool-cpu-bound-reader cpu-bound-reader "$(pipeline "$WORK/parquet" --computation-time 0.005 --duration 600)"
run pool-compute-bound compute-bound "$(pipeline "$WORK/parquet" --computation-time 0.5 --duration 600)"
run pool-storage-bound storage-bound "$(throttled $((10 << 20)) "$WORK/parquet" \
    "$(pipeline "$WORK/parquet" --odirect --no-format-dict --computation-time 0.005 --duration 600)")"
rmdir "$CG" 2>/dev/null || true
run files-spawn compute-bound "$(pipeline "$WORK/files" --format files --start spawn --computation-time 0.05 --duration 600)"
run threads-lock-contention lock-contention "$(pipeline "$WORK/parquet" --loader threads --workers 4 --computation-time 0.005 --duration 600)"
run fork-deadlock stalled "$WL fork-deadlock $WORK/data.bin 2"
run busy-loop stalled "$WL read-then-spin $WORK/data.bin 2"

# The live view's cost: storprof's own CPU, live lines vs off, interleaved.
echo
cost() { # MODE REP
    local dir=$WORK/cost-$1-$2
    "$STORPROF" record --live "$1" --output "$dir" -- \
        sh -c "$(pipeline "$WORK/parquet" --computation-time 0.005 --duration "$SECS")" \
        > /dev/null 2>&1
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['recorder_cpu_s'])" "$dir/session.json"
}
on=(); off=()
for rep in $(seq 1 "$REPS"); do
    on+=("$(cost lines "$rep")")
    off+=("$(cost off "$rep")")
done
python3 - "$SECS" "${on[*]}" "${off[*]}" <<'PY'
import statistics, sys
secs = float(sys.argv[1])
on = [float(x) for x in sys.argv[2].split()]
off = [float(x) for x in sys.argv[3].split()]
m_on, m_off = statistics.median(on), statistics.median(off)
print(f"storprof CPU over a {secs:.0f} s CPU-bound pipeline, median of {len(on)} interleaved runs:")
print(f"  --live lines (analysis every 5 s): {m_on:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in on)})")
print(f"  --live off:                        {m_off:.2f} s  (runs: {', '.join(f'{x:.2f}' for x in off)})")
print(f"  the live view's cost: {m_on - m_off:+.2f} s of CPU, {(m_on - m_off) / secs * 100:+.1f}% of one CPU")
PY
