#!/usr/bin/env bash
# Python frames, storprof vs py-spy, on the same workload (tests/python/loader.py:
# 2 forked workers decoding Parquet with pyarrow and formatting dicts):
#  1. top-5 Python functions by share of on-CPU samples (each sample counts for
#     its innermost Python frame) from `py-spy record --subprocesses` and from
#     `storprof record --unwind dwarf`, side by side;
#  2. the overhead of `storprof record --unwind dwarf` at 99 Hz: the workload's
#     throughput (items in a fixed time) with and without recording, runs
#     interleaved, medians.
# Needs root. Installs pyarrow and py-spy from PyPI into a venv on first use.
#   STORPROF=path/to/storprof (default: $CARGO_TARGET_DIR/release/storprof, built if missing)
#   SECONDS_PER_RUN (default 8), RUNS (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=${CARGO_TARGET_DIR:-target}
STORPROF=${STORPROF:-$TARGET/release/storprof}
[ -x "$STORPROF" ] || cargo build --release --bin storprof
[ "$(id -u)" = 0 ] || { echo "compare-pyspy.sh: needs root (storprof and py-spy attach to processes)" >&2; exit 2; }
VENV=${STORPROF_VENV:-$TARGET/venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import pyarrow' 2>/dev/null || [ ! -x "$VENV/bin/py-spy" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check 'pyarrow==26.0.1' numpy py-spy
fi
PY="$VENV/bin/python"
SECS=${SECONDS_PER_RUN:-8}
RUNS=${RUNS:-3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/storprof-pyspy.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
LOADER=tests/python/loader.py
"$PY" "$LOADER" "$WORK/data" 0.1 1 > /dev/null   # makes the Parquet file

echo "== workload: $LOADER, 2 forked workers, ${SECS} s; $("$PY" -V), $("$VENV/bin/py-spy" --version)"

# 1. Shares.
nice "$VENV/bin/py-spy" record --subprocesses --rate 99 --format raw -o "$WORK/pyspy.folded" \
    -- "$PY" "$LOADER" "$WORK/data" "$SECS" > /dev/null 2> "$WORK/pyspy.log"
"$STORPROF" record --unwind dwarf --freq 99 --output "$WORK/session" \
    -- "$PY" "$LOADER" "$WORK/data" "$SECS" > /dev/null 2> "$WORK/storprof.log"

python3 - "$WORK/pyspy.folded" "$WORK/session/oncpu.folded" <<'PYEOF'
import re, sys
FRAME = re.compile(r"^(.+) \(([^():]+\.py):(\d+)\)$")
def top(path):
    counts, total = {}, 0
    for line in open(path):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        if not n.isdigit():
            continue
        frames = [m for m in (FRAME.match(f.strip()) for f in stack.split(";")) if m]
        if not frames:
            continue
        name, path_ = frames[-1].group(1), frames[-1].group(2)
        key = f"{name} ({path_.rsplit('/', 1)[-1]})"
        counts[key] = counts.get(key, 0) + int(n)
        total += int(n)
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return {k: 100.0 * v / total for k, v in ranked}, total
pyspy, pn = top(sys.argv[1])
ours, sn = top(sys.argv[2])
print(f"top-5 Python functions by share of samples (innermost Python frame); py-spy {pn} samples, storprof {sn}")
print(f"{'function':44} {'py-spy %':>9} {'storprof %':>11} {'diff':>6}")
keys = list(dict.fromkeys(list(pyspy)[:5] + list(ours)[:5]))
worst = 0.0
for k in keys:
    a, b = pyspy.get(k, 0.0), ours.get(k, 0.0)
    worst = max(worst, abs(a - b))
    mark = ("*" if k in list(pyspy)[:5] else " ") + ("*" if k in list(ours)[:5] else " ")
    print(f"{k[:44]:44} {a:9.1f} {b:11.1f} {b - a:+6.1f} {mark}")
same = set(list(pyspy)[:5]) == set(list(ours)[:5])
print(f"same top-5 set: {'yes' if same else 'no'}; largest share difference: {worst:.1f} points")
PYEOF

# 2. Overhead: items processed in $SECS s, plain vs recorded, runs interleaved.
# Throughput is wall-clock work and suffers from any other load on the
# machine; CPU per item (workload + storprof, user + sys, from `time`) counts
# what recording costs in CPU; the recorder's own CPU (its `time` minus the
# CPU the workload reports for itself) is the steadiest on a shared machine.
run() {   # CMD... → "items cpu_seconds workload_cpu_seconds"
    local TIMEFORMAT='%U %S'
    { time "$@" > "$WORK/run.out" 2> /dev/null; } 2> "$WORK/run.time"
    awk -v items="$(sed -n 's/.*workers, \([0-9]*\) items.*/\1/p' "$WORK/run.out")" \
        -v own="$(sed -n 's/.*total cpu \([0-9.]*\) s.*/\1/p' "$WORK/run.out")" \
        '{ print items, $1 + $2, own }' "$WORK/run.time"
}
per_item() { awk -v n="$1" -v c="$2" 'BEGIN { printf "%.1f", 1e6 * c / n }'; }
plain=(); dwarf=(); plain_cpu=(); dwarf_cpu=(); recorder=()
for i in $(seq "$RUNS"); do
    read -r n c _ < <(run "$PY" "$LOADER" "$WORK/data" "$SECS")
    plain+=("$n"); plain_cpu+=("$(per_item "$n" "$c")")
    read -r n c own < <(run "$STORPROF" record --unwind dwarf --freq 99 --output "$WORK/o$i" \
        -- "$PY" "$LOADER" "$WORK/data" "$SECS")
    dwarf+=("$n"); dwarf_cpu+=("$(per_item "$n" "$c")")
    recorder+=("$(awk -v c="$c" -v o="$own" 'BEGIN { printf "%.1f", 100 * (c - o) / o }')")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mp=$(median "${plain[@]}"); md=$(median "${dwarf[@]}")
cp_=$(median "${plain_cpu[@]}"); cd_=$(median "${dwarf_cpu[@]}"); mr=$(median "${recorder[@]}")
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
echo "items in ${SECS} s:       plain ${plain[*]} (median $mp); storprof --unwind dwarf 99 Hz ${dwarf[*]} (median $md)"
echo "CPU us per item:        plain ${plain_cpu[*]} (median $cp_); storprof --unwind dwarf 99 Hz ${dwarf_cpu[*]} (median $cd_)"
echo "recorder CPU / workload CPU, %: ${recorder[*]} (median $mr; storprof's user space incl. start-up and symbolization)"
awk -v p="$mp" -v d="$md" -v cp="$cp_" -v cd="$cd_" -v r="$mr" 'BEGIN {
    printf "dwarf-mode overhead at 99 Hz: throughput %.1f%%, CPU per item %.1f%%, recorder CPU %.1f%% of the workload'"'"'s (goal < 5%%)\n",
        100 * (p - d) / p, 100 * (cd - cp) / cp, r }'

# 3. Probe cost per sample (kernel.bpf_stats_enabled for one recorded run).
stats_was=$(cat /proc/sys/kernel/bpf_stats_enabled)
echo 1 > /proc/sys/kernel/bpf_stats_enabled
"$STORPROF" record --unwind dwarf --freq 99 --output "$WORK/stats" \
    -- "$PY" "$LOADER" "$WORK/data" "$SECS" > /dev/null 2>&1 &
rec=$!
sleep $(( SECS / 2 + 1 ))
# Every probe program that ran (cpu_sample: dwarf mode with the Python walk).
for prog in cpu_sample sched_switch offcpu_python sys_enter sys_exit; do
    bpftool prog show name "$prog" 2> /dev/null \
        | sed -n 's/.*run_time_ns \([0-9]*\) run_cnt \([0-9]*\).*/\1 \2/p' \
        | awk -v p="$prog" '$2 > 0 { printf "%s: %d runs, %.2f us per run, %.3f s in all (all CPUs, traced or not)\n", p, $2, $1 / $2 / 1000, $1 / 1e9 }'
done
wait "$rec" || true
echo "$stats_was" > /proc/sys/kernel/bpf_stats_enabled
