#!/usr/bin/env bash
# What each probe program costs per run while a command runs under
# `storprof record`: turns on kernel.bpf_stats_enabled (which adds its own
# timing to every program run), records the command, reads every
# program's run_time_ns and run_cnt just before the recording ends, and
# prints programs that ran 5 ms or more with their ns per run, and the
# total. Restores bpf_stats_enabled. Needs root and bpftool.
#   sudo bash scripts/bpf-stats.sh STORPROF CMD [ARGS...]
# e.g. the futex storm: gcc -O2 -static -pthread -o /tmp/storm
#   tests/helpers/futex_storm.c && sudo bash scripts/bpf-stats.sh
#   target/release/storprof /tmp/storm 2 9
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "bpf-stats.sh: needs root" >&2; exit 1; }
[ $# -ge 2 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
command -v bpftool > /dev/null || { echo "bpf-stats.sh: needs bpftool" >&2; exit 1; }
STORPROF=$1
shift
WORK=$(mktemp -d)
WAS=$(cat /proc/sys/kernel/bpf_stats_enabled)
trap 'echo "$WAS" > /proc/sys/kernel/bpf_stats_enabled; rm -rf "$WORK"' EXIT
echo 1 > /proc/sys/kernel/bpf_stats_enabled
"$STORPROF" record -q -o "$WORK/session" -- "$@" > "$WORK/out" 2>&1 &
pid=$!
# The programs go with the recording: keep the last listing taken while
# they were loaded.
while kill -0 "$pid" 2> /dev/null; do
    bpftool prog show > "$WORK/listing" 2> /dev/null \
        && grep -q " name sched_switch " "$WORK/listing" \
        && cp "$WORK/listing" "$WORK/last"
    sleep 0.5
done
wait "$pid" || { echo "bpf-stats.sh: the recording failed:" >&2; tail -5 "$WORK/out" >&2; exit 1; }
[ -s "$WORK/last" ] || { echo "bpf-stats.sh: no listing caught the probes" >&2; exit 1; }
awk '/ name / {
    for (i = 1; i <= NF; i++) {
        if ($i == "name") n = $(i + 1)
        if ($i == "run_time_ns") t = $(i + 1)
        if ($i == "run_cnt") c = $(i + 1)
    }
    if (t == "") next
    all += t
    if (t >= 5e6) printf "%-26s %9.3f s %10d runs %8.0f ns/run\n", n, t / 1e9, c, t / (c ? c : 1)
    t = ""; c = ""
} END { printf "%-26s %9.3f s\n", "all programs", all / 1e9 }' "$WORK/last"
