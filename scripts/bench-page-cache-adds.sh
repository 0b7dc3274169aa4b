#!/usr/bin/env bash
# Cost of the page-cache-add probe on buffered writes: two storprof builds
# side by side, interleaved with plain runs (per round: plain → OLD → NEW),
# each a `dd` of MIB MiB of zeros in 1 MiB writes into a new file under DIR
# (a block-device file system; the file is removed before writeback, so no
# device I/O), under `storprof record` for OLD and NEW. Prints dd's own
# elapsed time per run and the medians; storprof's start and stop are
# outside dd's figure.
#   bash scripts/bench-page-cache-adds.sh OLD_STORPROF NEW_STORPROF [ROUNDS=5] [MIB=1024] [DIR=/var/tmp]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,9p' "$0" >&2; exit 2; }
OLD=$1 NEW=$2 ROUNDS=${3:-5} MIB=${4:-1024} DIR=${5:-/var/tmp}
[ "$(id -u)" = 0 ] || { echo "bench-page-cache-adds.sh: needs root" >&2; exit 2; }
WORK=$(mktemp -d "$DIR/storprof-pcadds.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

run() {   # LABEL [STORPROF] → "LABEL seconds" (dd's own figure)
    local label=$1 prof=${2:-}
    local cmd=(dd if=/dev/zero of="$WORK/file" bs=1M count="$MIB")
    if [ -n "$prof" ]; then
        "$prof" record --live off --output "$WORK/session" -- "${cmd[@]}" 2> "$WORK/err" > /dev/null
        rm -rf "$WORK/session"
    else
        "${cmd[@]}" 2> "$WORK/err"
    fi
    rm -f "$WORK/file"
    printf "%-6s %s\n" "$label" "$(sed -n 's/.* copied, \([0-9.]*\) s.*/\1/p' "$WORK/err")"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds of $MIB MiB"
for _ in $(seq "$ROUNDS"); do
    run plain
    run old "$OLD"
    run new "$NEW"
done | tee "$WORK/runs"
for label in plain old new; do
    awk -v l="$label" '$1 == l { print $2 }' "$WORK/runs" | sort -g \
        | awk -v l="$label" -v mib="$MIB" '{ v[NR] = $1 } END {
            m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "median %-6s %.3f s  %.0f MiB/s  (min %.3f max %.3f)\n", l, m, mib / m, v[1], v[NR] }'
done
