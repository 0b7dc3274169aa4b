#!/usr/bin/env bash
# Kills `storprof record` at random moments, ROUNDS times, with SIGINT,
# SIGTERM or SIGKILL in turn (while it starts, records or writes), and after
# each round checks what a root tool must not leave behind:
#   - no BPF program or link more than before the round (bpftool), 5 s
#     after storprof ended (the kernel frees them a moment after the close);
#   - the traced workload not left stopped (it runs on or has ended);
#   - after SIGINT/SIGTERM once the workload runs: a session that
#     `storprof report` reads (before: no session directory left);
#     after SIGKILL: no session, or one that `storprof report` reads or
#     refuses with a clear error (exit status 1 or 2, never a crash).
# Prints one line per round and a summary; exit status 1 on any failure.
#
#   sudo scripts/kill-test.sh [ROUNDS=50] [MAX_DELAY_S=3]
#
# STORPROF=path/to/storprof skips the build.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-50}
MAX_DELAY=${2:-3}
export PATH="$HOME/.cargo/bin:$PATH"
if [ "$(id -u)" != 0 ]; then echo "kill-test.sh: needs root (sudo)" >&2; exit 2; fi
command -v bpftool >/dev/null || { echo "kill-test.sh: bpftool not found (scripts/setup.sh installs it)" >&2; exit 2; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${STORPROF:-}" ]; then
    cargo build --release -p storprof -q
    STORPROF=$CARGO_TARGET_DIR/release/storprof
fi
WORK=$(mktemp -d "$CARGO_TARGET_DIR/kill-test.XXXXXX")
trap 'pkill -KILL -x churn 2>/dev/null || true; rm -rf "$WORK"' EXIT
gcc -O2 -pthread -fno-omit-frame-pointer -o "$WORK/churn" tests/helpers/churn.c
head -c $((8 << 20)) /dev/urandom > "$WORK/data"

count() { bpftool "$1" show -j 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin) or []))'; }
progs_before=$(count prog)
links_before=$(count link)
failures=0
signals=(INT TERM KILL)
for round in $(seq 1 "$ROUNDS"); do
    sig=${signals[$(( (round - 1) % 3 ))]}
    # A random moment: 0 to MAX_DELAY s after the start (start-up takes about 1 s).
    delay=$(awk -v seed="$RANDOM" -v max="$MAX_DELAY" 'BEGIN { srand(seed); printf "%.2f", rand() * max }')
    session="$WORK/s$round"
    "$STORPROF" record --output "$session" -- "$WORK/churn" 30 20 "$WORK/data" >"$WORK/log$round" 2>&1 &
    rec=$!
    sleep "$delay"
    # Whether the workload had started: then SIGINT/SIGTERM must leave a session.
    started=no
    pgrep -x -P "$rec" churn >/dev/null && started=yes
    kill -"$sig" "$rec" 2>/dev/null || true
    # SIGINT/SIGTERM: storprof stops the workload and writes the session.
    for _ in $(seq 1 600); do kill -0 "$rec" 2>/dev/null || break; sleep 0.1; done
    problems=()
    if kill -0 "$rec" 2>/dev/null; then
        problems+=("storprof still running 60 s after SIG$sig")
        kill -KILL "$rec" 2>/dev/null || true
    fi
    wait "$rec" 2>/dev/null || true
    # The workload: running (an orphan after SIGKILL), or ended; never stopped.
    for pid in $(pgrep -x churn || true); do
        state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo gone)
        if [ "$state" = T ] || [ "$state" = t ]; then problems+=("workload $pid left stopped"); fi
    done
    pkill -KILL -x churn 2>/dev/null || true
    # The kernel frees programs and links a moment after their last fd
    # closes (RCU, a work queue): wait up to 5 s for the counts to settle.
    for _ in $(seq 1 50); do
        progs=$(count prog); links=$(count link)
        [ "$progs" -le "$progs_before" ] && [ "$links" -le "$links_before" ] && break
        sleep 0.1
    done
    [ "$progs" -le "$progs_before" ] || problems+=("$((progs - progs_before)) BPF program(s) left attached")
    [ "$links" -le "$links_before" ] || problems+=("$((links - links_before)) BPF link(s) left")
    outcome="no session"
    if [ -d "$session" ]; then
        report_status=0
        "$STORPROF" report "$session" >"$WORK/report$round" 2>&1 || report_status=$?
        case "$sig:$report_status" in
            *:0) outcome="session reported" ;;
            KILL:1 | KILL:2) outcome="partial session refused: $(tail -n 1 "$WORK/report$round")" ;;
            *) problems+=("storprof report exited $report_status: $(tail -n 1 "$WORK/report$round")") ;;
        esac
    elif [ "$sig" != KILL ] && [ "$started" = yes ]; then
        problems+=("no session after SIG$sig while the workload ran")
    fi
    if [ ${#problems[@]} -eq 0 ]; then
        echo "round $round: SIG$sig after ${delay} s: ok ($outcome)"
    else
        failures=$((failures + 1))
        echo "round $round: SIG$sig after ${delay} s: FAILED: ${problems[*]}"
        sed 's/^/    /' "$WORK/log$round" | tail -n 5
    fi
    rm -rf "$session"
done
echo
echo "kill-test: $ROUNDS rounds, $failures failed (BPF programs $progs_before before, $(count prog) after; links $links_before before, $(count link) after)"
[ "$failures" -eq 0 ]
