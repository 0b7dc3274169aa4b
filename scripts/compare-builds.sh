#!/usr/bin/env bash
# Two storprof builds side by side on the Python-frames workload
# (tests/python/loader.py, 2 forked workers), interleaved with plain runs:
# per round, plain → OLD → NEW, each `storprof record --unwind dwarf` at 99 Hz.
# Prints per run: items done in SECONDS, CPU µs per item (the whole
# invocation's user+sys), and the recorder's own CPU as a share of the
# workload's (its `time` less the CPU the workload reports for itself).
# Needs root and target/venv (made by scripts/compare-pyspy.sh).
#   bash scripts/compare-builds.sh OLD_STORPROF NEW_STORPROF [ROUNDS=6] [SECONDS=8]
# An old build: git worktree add /tmp/old REV && (cd /tmp/old &&
#   CARGO_TARGET_DIR=$PWD/target-old cargo build --release --bin storprof)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
OLD=$1 NEW=$2 ROUNDS=${3:-6} SECS=${4:-8}
[ "$(id -u)" = 0 ] || { echo "compare-builds.sh: needs root" >&2; exit 2; }
PY=${STORPROF_VENV:-${CARGO_TARGET_DIR:-target}/venv}/bin/python
"$PY" -c 'import pyarrow' 2> /dev/null \
    || { echo "compare-builds.sh: no pyarrow venv at $PY (run scripts/compare-pyspy.sh once)" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/storprof-builds.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
LOADER=tests/python/loader.py
"$PY" "$LOADER" "$WORK/data" 0.1 1 > /dev/null   # makes the Parquet file

run() {   # LABEL CMD... → "LABEL items cpu_us_per_item recorder_%"
    local label=$1; shift
    local TIMEFORMAT='%U %S'
    { time "$@" "$PY" "$LOADER" "$WORK/data" "$SECS" > "$WORK/run.out" 2> /dev/null; } 2> "$WORK/run.time"
    awk -v l="$label" \
        -v n="$(sed -n 's/.*workers, \([0-9]*\) items.*/\1/p' "$WORK/run.out")" \
        -v o="$(sed -n 's/.*total cpu \([0-9.]*\) s.*/\1/p' "$WORK/run.out")" \
        '{ c = $1 + $2; printf "%-6s %8d %10.1f %10.2f\n", l, n, 1e6 * c / n, 100 * (c - o) / o }' "$WORK/run.time"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds of ${SECS} s"
printf "%-6s %8s %10s %10s\n" run items "us/item" "recorder%"
for _ in $(seq "$ROUNDS"); do
    run plain
    run old "$OLD" record --unwind dwarf --output "$WORK/old" --
    rm -rf "$WORK/old"
    run new "$NEW" record --unwind dwarf --output "$WORK/new" --
    rm -rf "$WORK/new"
done
