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
# machine; CPU per item (workload + storprof, user + sys, from `time`)
# counts what recording costs in CPU and is steadier on a shared machine.
run() {   # CMD... → "items cpu_seconds"
    local TIMEFORMAT='%U %S'
    { time "$@" > "$WORK/run.out" 2> /dev/null; } 2> "$WORK/run.time"
    awk -v items="$(sed -n 's/.*workers, \([0-9]*\) items.*/\1/p' "$WORK/run.out")" \
        '{ print items, $1 + $2 }' "$WORK/run.time"
}
plain=(); dwarf=(); plain_cpu=(); dwarf_cpu=()
for i in $(seq "$RUNS"); do
    read -r n c < <(run "$PY" "$LOADER" "$WORK/data" "$SECS")
    plain+=("$n"); plain_cpu+=("$(awk -v n="$n" -v c="$c" 'BEGIN { printf "%.1f", 1e6 * c / n }')")
    read -r n c < <(run "$STORPROF" record --unwind dwarf --freq 99 --output "$WORK/o$i" \
        -- "$PY" "$LOADER" "$WORK/data" "$SECS")
    dwarf+=("$n"); dwarf_cpu+=("$(awk -v n="$n" -v c="$c" 'BEGIN { printf "%.1f", 1e6 * c / n }')")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mp=$(median "${plain[@]}"); md=$(median "${dwarf[@]}")
cp_=$(median "${plain_cpu[@]}"); cd_=$(median "${dwarf_cpu[@]}")
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
echo "items in ${SECS} s:       plain ${plain[*]} (median $mp); storprof --unwind dwarf 99 Hz ${dwarf[*]} (median $md)"
echo "CPU us per item:        plain ${plain_cpu[*]} (median $cp_); storprof --unwind dwarf 99 Hz ${dwarf_cpu[*]} (median $cd_)"
awk -v p="$mp" -v d="$md" -v cp="$cp_" -v cd="$cd_" 'BEGIN {
    printf "dwarf-mode overhead at 99 Hz: throughput %.1f%%, CPU per item %.1f%% (goal < 5%%)\n",
        100 * (p - d) / p, 100 * (cd - cp) / cp }'
