#!/usr/bin/env bash
# Soak: `storprof record` of a workload that churns processes and threads
# (tests/helpers/churn.c: FORKS_PER_S short-lived readers a second, 40
# threads a second, reads in between) for SECONDS. Every SAMPLE_S seconds it
# prints storprof's RSS (and its peak so far), the locked memory of its BPF maps and how many
# entries its per-thread map holds; at the end, the session's lost events by
# source, how many processes and threads it saw, and how it ended. Exit
# status 1 when any event was lost or the workload did not end with 0.
#
#   sudo scripts/soak.sh [SECONDS=600] [FORKS_PER_S=100] [SAMPLE_S=30]
#
# STORPROF=path/to/storprof skips the build.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_S=${1:-600}
FORKS=${2:-100}
EVERY=${3:-30}
export PATH="$HOME/.cargo/bin:$PATH"
if [ "$(id -u)" != 0 ]; then echo "soak.sh: needs root (sudo)" >&2; exit 2; fi
for tool in bpftool python3 gcc; do
    command -v "$tool" >/dev/null || { echo "soak.sh: $tool not found (scripts/setup.sh installs it)" >&2; exit 2; }
done
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${STORPROF:-}" ]; then
    cargo build --release -p storprof -q
    STORPROF=$CARGO_TARGET_DIR/release/storprof
fi
WORK=$(mktemp -d "$CARGO_TARGET_DIR/soak.XXXXXX")
REC=
cleanup() {
    if [ -n "$REC" ] && kill -0 "$REC" 2>/dev/null; then kill -INT "$REC" 2>/dev/null || true; wait "$REC" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
gcc -O2 -pthread -fno-omit-frame-pointer -o "$WORK/churn" tests/helpers/churn.c
head -c $((64 << 20)) /dev/urandom > "$WORK/data"

"$STORPROF" record --output "$WORK/session" -- "$WORK/churn" "$RUN_S" "$FORKS" "$WORK/data" \
    > "$WORK/record.log" 2>&1 &
REC=$!

# Locked bytes of the maps storprof holds, and the entries of its THREADS map.
maps_of_storprof() {
    bpftool map show -j 2>/dev/null | python3 -c '
import json, sys
pid = int(sys.argv[1])
every = json.load(sys.stdin)
maps = [m for m in every if any(p.get("pid") == pid for p in m.get("pids", []))]
if not any("pids" in m for m in every):
    # A bpftool without pid lookups: the maps by the names storprof gives them.
    ours = {"THREADS", "SAMPLES", "STACK_FRAMES", "STACK_OWNERS", "OFFCPU_STACKS", "WAKE_EDGES"}
    maps = [m for m in every if m.get("name") in ours]
locked = sum(m.get("bytes_memlock", 0) for m in maps)
threads = [m["id"] for m in maps if m.get("name") == "THREADS"]
print(f"{locked / 2**20:.1f} {threads[0] if threads else 0}")
' "$1"
}

echo "soak: ${RUN_S} s of churn (${FORKS} forks/s, 40 threads/s) under storprof record, a sample every ${EVERY} s"
echo
echo "| t (s) | storprof RSS (MiB) | peak RSS so far (MiB) | BPF maps locked (MiB) | THREADS map entries |"
echo "|---:|---:|---:|---:|---:|"
START=$(date +%s)
while kill -0 "$REC" 2>/dev/null; do
    sleep "$EVERY"
    kill -0 "$REC" 2>/dev/null || break
    rss_kb=$(ps -o rss= -p "$REC" | tr -d ' ')
    peak_kb=$(awk '/^VmHWM:/ { print $2 }' "/proc/$REC/status" 2>/dev/null || echo 0)
    read -r locked threads_id < <(maps_of_storprof "$REC")
    entries=0
    if [ "$threads_id" != 0 ]; then
        entries=$(bpftool map dump id "$threads_id" -j 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
    fi
    printf '| %d | %.1f | %.1f | %s | %s |\n' "$(( $(date +%s) - START ))" "$(awk -v kb="$rss_kb" 'BEGIN { print kb / 1024 }')" \
        "$(awk -v kb="${peak_kb:-0}" 'BEGIN { print kb / 1024 }')" "$locked" "$entries"
done
status=0
wait "$REC" || status=$?
echo
echo "storprof record exited with $status; its log:"
sed 's/^/  /' "$WORK/record.log" | tail -n 20
python3 - "$WORK/session" <<'PY'
import json, os, sys
session = sys.argv[1]
info = json.load(open(os.path.join(session, "session.json")))
threads = json.load(open(os.path.join(session, "threads.json")))
lost = {k: v for k, v in sorted(info.get("lost_events", {}).items()) if v}
print()
print(f"processes seen: {len(info.get('processes', []))}, threads in threads.json: {len(threads)}")
print(f"end reason: {info.get('end_reason')}, exit code of the workload: {info.get('exit_code')}")
print("lost events: " + (", ".join(f"{k} {v}" for k, v in lost.items()) if lost else "none"))
sys.exit(1 if lost or info.get("exit_code") != 0 else 0)
PY
