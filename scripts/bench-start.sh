#!/usr/bin/env bash
# What a recording costs before the job does anything: `storprof record --
# /bin/true` (load, verify, attach, write the session) per build, at this
# host's kernel.pid_max and at systemd's 4194304 (most distributions since
# systemd 243: the per-thread arrays of the probes are sized to pid_max),
# interleaved (2 s apart: the last run's maps are freed after its
# exit, and a run that starts meanwhile pays for part of it), ROUNDS rounds. Prints per build and pid_max the median CPU
# (user + sys of the whole invocation, from getrusage) with its range, and the
# kernel memory its BPF maps pin (the `memlock` of every map and program fd
# of a `record -- sleep 3`, read at 2 s). Restores pid_max. Needs root.
#   bash scripts/bench-start.sh STORPROF [OTHER_STORPROF] [ROUNDS=7]
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "bench-start.sh: needs root" >&2; exit 1; }
[ $# -ge 1 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
BUILDS=("$1")
if [ $# -ge 2 ] && [ -x "$2" ]; then BUILDS+=("$2"); shift; fi
ROUNDS=${2:-7}
HOST_PID_MAX=$(cat /proc/sys/kernel/pid_max)
PID_MAXES=("$HOST_PID_MAX")
[ "$HOST_PID_MAX" = 4194304 ] || PID_MAXES+=(4194304)
WORK=$(mktemp -d)
trap 'echo "$HOST_PID_MAX" > /proc/sys/kernel/pid_max; rm -rf "$WORK"' EXIT

# CPU seconds (user + sys) of one command and its children.
cpu_of() {
    python3 - "$@" <<'EOF'
import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{r.ru_utime + r.ru_stime:.3f}")
EOF
}

# MiB the BPF objects of a running `record` pin.
pinned_mib() {
    local storprof=$1 dir=$WORK/pinned
    rm -rf "$dir"
    "$storprof" record -q -o "$dir" -- sleep 3 > /dev/null 2>&1 &
    local pid=$!
    sleep 2
    local total=0 f m
    for f in /proc/$pid/fdinfo/*; do
        m=$(awk '/^memlock:/ {print $2}' "$f" 2> /dev/null || true)
        [ -n "$m" ] && total=$((total + m))
    done
    wait "$pid"
    echo $((total / 1048576))
}

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

declare -A CPU
for round in $(seq "$ROUNDS"); do
    for pm in "${PID_MAXES[@]}"; do
        echo "$pm" > /proc/sys/kernel/pid_max
        for i in "${!BUILDS[@]}"; do
            rm -rf "$WORK/s"
            # The last run's maps are freed after it exits (deferred, and
            # vmalloc's lazy purge bills the next allocation): let them go.
            sleep 2
            CPU[$i/$pm]+="$(cpu_of "${BUILDS[$i]}" record -q -o "$WORK/s" -- /bin/true) "
        done
    done
    echo "round $round/$ROUNDS done" >&2
done

echo "storprof record -- /bin/true, $ROUNDS interleaved rounds, $(nproc) CPUs, $(uname -r)"
printf '%-40s %10s %12s %16s %12s\n' build pid_max "CPU s" range "pinned MiB"
for i in "${!BUILDS[@]}"; do
    for pm in "${PID_MAXES[@]}"; do
        echo "$pm" > /proc/sys/kernel/pid_max
        values=$(printf '%s\n' ${CPU[$i/$pm]})
        med=$(echo "$values" | median)
        range=$(echo "$values" | sort -n | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%.3f..%.3f", lo, hi}')
        printf '%-40s %10s %12.3f %16s %12s\n' "${BUILDS[$i]}" "$pm" "$med" "$range" \
            "$(pinned_mib "${BUILDS[$i]}")"
    done
done
