#!/usr/bin/env bash
# Probe overhead, side by side in one run (not a timed test):
#   - a static pread storm (tests/helpers/pread_n.c: N preads of 512 B of one
#     page-cached file, 1M+ syscalls/s) plain, under `storprof record` (the
#     default: exit hook, time switched out inside calls from the scheduler;
#     --syscall-timing exact: enter+exit hooks; --syscall-timing off: exit
#     hook, counts only), and under bpftrace counting syscalls per tid
#     (syscount-style, the peer);
#   - a CPU-bound run (a fixed amount of arithmetic, static) plain and under
#     `storprof record`.
# Each case runs once per round, REPS interleaved rounds; the table shows the median time and the ratio to
# plain: for the storm, the helper's own loop time (so the one-off cost of
# loading/attaching/writing the session is left out; it is shown separately);
# for the CPU-bound run, wall time of the whole `storprof record` invocation. Run as root: sudo scripts/bench-overhead.sh [N] [REPS]
# STORPROF_OLD=path/to/an/older/storprof adds its default record of both
# workloads to every round (rows *_old), to compare two builds in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-3000000}
REPS=${2:-5}
export PATH="$HOME/.cargo/bin:$PATH"
if [ "$(id -u)" != 0 ]; then echo "bench-overhead.sh: needs root (sudo)" >&2; exit 2; fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
# STORPROF=path/to/storprof skips the build (the probes are always release-built).
if [ -z "${STORPROF:-}" ]; then
    cargo build --release -p storprof -q
    STORPROF=$CARGO_TARGET_DIR/release/storprof
fi
WORK=$(mktemp -d /tmp/storprof-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
gcc -static -O2 -fno-omit-frame-pointer -o "$WORK/pread_n" tests/helpers/pread_n.c
# CPU-bound work of fixed size (not fixed time): a loop of arithmetic.
cat > "$WORK/spin.c" <<'C'
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) unsigned long spin(unsigned long n) {
    unsigned long x = 1;
    for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    return x;
}
int main(int argc, char **argv) { sink = spin(strtoul(argv[1], 0, 10)); return 0; }
C
gcc -static -O2 -fno-omit-frame-pointer -o "$WORK/spin" "$WORK/spin.c"
SPIN=${SPIN:-10000000000} # about 10 s here
head -c 4096 /dev/urandom > "$WORK/data"
cat "$WORK/data" > /dev/null
mount | grep -q tracefs || mount -t tracefs nodev /sys/kernel/tracing

secs() { # run a command, print its wall time in seconds (storm: the helper's own loop time)
    # and, in $WORK/cpu, its CPU time (user + sys of it and its children).
    local t0 t1 loop
    t0=$(date +%s.%N)
    /usr/bin/time -f "%U %S" -o "$WORK/time" "$@" > /dev/null 2> "$WORK/err" || true
    t1=$(date +%s.%N)
    awk '{print $1 + $2}' "$WORK/time" > "$WORK/cpu"
    loop=$(awk '/^loop_ns/ {print $2}' "$WORK/err" | tail -1)
    if [ -n "$loop" ]; then echo "$loop / 1000000000" | bc -l; else echo "$t1 - $t0" | bc -l; fi
}
export STORPROF_BENCH_TIMING=1
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

STORM=("$WORK/pread_n" "$WORK/data" "$N" 512)
BPFTRACE_PROG='tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @[tid, args->id] = count(); }'
declare -A RESULT SPREAD CPU TIMES CPUS
CASES=()
declare -A CMD
add_case() { # name, command... (run later, once per round)
    local name=$1; shift
    CASES+=("$name")
    CMD[$name]=$(printf '%q ' "$@")
}
add_case storm_plain "${STORM[@]}"
add_case storm_record "$STORPROF" record -o "$WORK/s1" -- "${STORM[@]}"
add_case storm_record_exact "$STORPROF" record --syscall-timing exact -o "$WORK/s5" -- "${STORM[@]}"
add_case storm_record_timing_off "$STORPROF" record --syscall-timing off -o "$WORK/s2" -- "${STORM[@]}"
add_case storm_bpftrace bpftrace -q -e "$BPFTRACE_PROG" -c "${STORM[*]}"
add_case cpu_plain "$WORK/spin" "$SPIN"
add_case cpu_record "$STORPROF" record -o "$WORK/s3" -- "$WORK/spin" "$SPIN"
if [ -n "${STORPROF_OLD:-}" ]; then
    add_case storm_record_old "$STORPROF_OLD" record -o "$WORK/s6" -- "${STORM[@]}"
    add_case cpu_record_old "$STORPROF_OLD" record -o "$WORK/s7" -- "$WORK/spin" "$SPIN"
fi
# Startup/teardown of record itself (load, attach, write), for reference.
add_case record_true "$STORPROF" record -o "$WORK/s4" -- /bin/true

# Rounds are interleaved (every case once per round), so a noisy moment
# hits all cases alike; each case's figure is its median over the rounds.
for round in $(seq "$REPS"); do
    for name in "${CASES[@]}"; do
        # A fresh session directory each time (record refuses a full one).
        rm -rf "$WORK"/s[0-9]
        eval "set -- ${CMD[$name]}"
        TIMES[$name]+="$(secs "$@") "
        CPUS[$name]+="$(cat "$WORK/cpu") "
    done
    echo "round $round/$REPS done" >&2
done
for name in "${CASES[@]}"; do
    RESULT[$name]=$(printf '%s\n' ${TIMES[$name]} | median)
    SPREAD[$name]=$(printf '%s\n' ${TIMES[$name]} | sort -n | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%.3f..%.3f", lo, hi}')
    CPU[$name]=$(printf '%s\n' ${CPUS[$name]} | median)
done

printf '\n%-34s %10s %14s %8s %12s %8s\n' case "median s" "min..max" ratio "ns/syscall" "cpu s"
row() { # name base
    local v=${RESULT[$1]} b=${RESULT[$2]}
    local per=""
    case $1 in storm*) per=$(echo "$v * 1000000000 / $N" | bc -l | xargs printf '%.0f');; esac
    printf '%-34s %10.3f %14s %8.3f %12s %8.2f\n' "$1" "$v" "${SPREAD[$1]}" "$(echo "$v / $b" | bc -l)" "$per" "${CPU[$1]}"
}
row storm_plain storm_plain
row storm_record storm_plain
row storm_record_exact storm_plain
row storm_record_timing_off storm_plain
row storm_bpftrace storm_plain
row cpu_plain cpu_plain
row cpu_record cpu_plain
if [ -n "${STORPROF_OLD:-}" ]; then
    row storm_record_old storm_plain
    row cpu_record_old cpu_plain
fi
printf '%-34s %10.3f %14s %8s %12s %8.2f\n' "record -- /bin/true (fixed cost)" "${RESULT[record_true]}" "${SPREAD[record_true]}" "" "" "${CPU[record_true]}"
echo "cpu s: user+sys of the whole invocation (storprof and the command); cpu_record's CPU"
echo "ratio: $(echo "${CPU[cpu_record]} / ${CPU[cpu_plain]}" | bc -l | xargs printf '%.3f'); without record's fixed start and stop"
echo "(the CPU of 'record -- /bin/true'): $(echo "(${CPU[cpu_record]} - ${CPU[record_true]}) / ${CPU[cpu_plain]}" | bc -l | xargs printf '%.3f')"
echo
echo "storm: $N pread64 calls of 512 B (static helper); cpu: spin $SPIN; reps=$REPS; load $(cut -d" " -f1-3 /proc/loadavg); kernel $(uname -r); $(nproc) cpus"
