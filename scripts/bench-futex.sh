#!/usr/bin/env bash
# Two storprof builds side by side on a futex storm (tests/helpers/
# futex_storm.c: PAIRS pairs of threads passing a token through a mutex
# and a condition variable), interleaved with plain runs: per round,
# plain → OLD → NEW, each under `storprof record`. Every wait and wake-up
# runs the wake-up probes' futex bookkeeping, so this is where its per-event
# cost shows. With bpftrace installed, each round also runs the peer: a
# bpftrace off-CPU profile (kernel and user stack at every switch-out of the
# workload, blocked time summed per stack pair at the switch-in), the least
# an off-CPU profiler does per switch. Prints the round trips per second of
# each run, then the median of each and its ratio to plain. Needs root, gcc.
#   bash scripts/bench-futex.sh OLD_STORPROF NEW_STORPROF [ROUNDS=7] [SECONDS=5] [PAIRS=2]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
OLD=$1 NEW=$2 ROUNDS=${3:-7} SECS=${4:-5} PAIRS=${5:-2}
[ "$(id -u)" = 0 ] || { echo "bench-futex.sh: needs root" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/storprof-futex.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
STORM=$WORK/futex_storm
gcc -O2 -static -pthread -o "$STORM" tests/helpers/futex_storm.c
OFFCPU_BT='tracepoint:sched:sched_switch /pid == cpid/ {
    @start[tid] = nsecs; @kernel[tid] = kstack; @user[tid] = ustack; }
tracepoint:sched:sched_switch /@start[args->next_pid]/ {
    $t = args->next_pid;
    @blocked[@kernel[$t], @user[$t]] = sum(nsecs - @start[$t]);
    delete(@start[$t]); }'
peer() {   # bpftrace -c runs the storm itself: same output as the others
    bpftrace -c "$*" -e "$OFFCPU_BT" 2> /dev/null | grep '^round_trips'
}
LABELS="plain old new"
command -v bpftrace > /dev/null && LABELS="$LABELS bpftrace"

run() {   # LABEL CMD... → appends "LABEL round_trips_per_s" to $WORK/runs
    local label=$1; shift
    local n
    n=$("$@" "$STORM" "$PAIRS" "$SECS" 2> /dev/null | sed -n 's/^round_trips \([0-9]*\)$/\1/p' || true)
    [ -n "$n" ] || { echo "bench-futex.sh: $label run printed no count" >&2; exit 1; }
    awk -v l="$label" -v n="$n" -v s="$SECS" 'BEGIN { printf "%-8s %12.0f\n", l, n / s }' \
        | tee -a "$WORK/runs"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds of ${SECS} s, $PAIRS pairs"
printf "%-8s %12s\n" run "trips/s"
for _ in $(seq "$ROUNDS"); do
    run plain
    run old "$OLD" record --output "$WORK/old" --
    rm -rf "$WORK/old"
    run new "$NEW" record --output "$WORK/new" --
    rm -rf "$WORK/new"
    case $LABELS in *bpftrace) run bpftrace peer ;; esac
done
echo
echo "medians:"
for label in $LABELS; do
    awk -v l="$label" '$1 == l { print $2 }' "$WORK/runs" | sort -n \
        | awk -v l="$label" '{ v[NR] = $1 } END {
            m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%-8s %12.0f\n", l, m }'
done | tee "$WORK/medians"
awk '$1 == "plain" { p = $2 } $1 != "plain" { printf "%-8s %.3f of plain\n", $1, $2 / p }' "$WORK/medians"
