#!/usr/bin/env bash
# `storprof sweep` at computation_time 0.05 s over page-cached local data
# (issue 5): for NP=1..2, samples/s per accelerator against
# batch / computation_time × AU (dlio.md §4's rule of thumb; goal: within 2 %),
# plus the sweep's own table and AU projection to 0.5 s and 1.35 s.
# Usage: scripts/bench-sweep.sh [FILES] [ROWS_PER_FILE]
# Env: NP (default 1,2), RT (default 1,2), BATCH (default 4), CT (default 0.05).
# Small rows (8,192 + 7 f32 ≈ 32 KiB) keep the dataset at a few tens of MB
# while giving 100+ steps per rank, so DLIO's (steps − 2) / total_time
# throughput and its AU over steps 1.. differ by well under 2 % by design.
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${1:-8}
ROWS=${2:-128}
NP=${NP:-1,2}
RT=${RT:-1,2}
BATCH=${BATCH:-4}
CT=${CT:-0.05}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-bench}
BIN=$CARGO_TARGET_DIR/release/storprof
STORPROF_SKIP_EBPF=1 cargo build -q --release -p storprof || { [ -x "$BIN" ] && echo "build failed: using the existing $BIN" >&2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
P=(--param dataset.num_files_train="$FILES" --param dataset.num_samples_per_file="$ROWS"
   --param dataset.num_files_eval=0 --param dataset.parquet.row_group_size=32
   --param "dataset.parquet.columns=[{name: t5_encodings, dtype: float32, size: 8192}, {name: timestamp, dtype: float32, size: 7}]"
   --param reader.batch_size="$BATCH" --param train.epochs=1)
uptime
nice "$BIN" datagen --workload flux --data-dir "$WORK/data" --client-memory-gb 1 "${P[@]}" | tail -n 1
cat "$WORK"/data/flux/train/* > /dev/null   # page-cached
nice "$BIN" sweep --workload flux --data-dir "$WORK/data" --np "$NP" --rt "$RT" --computation-time "$CT" \
  --project 0.5,1.35 --results-dir "$WORK/sweep" "${P[@]}" | sed -n '/^| NP/,$p'
uptime
python3 - "$WORK/sweep/sweep.csv" "$BATCH" "$CT" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
batch, ct = float(sys.argv[2]), float(sys.argv[3])
worst = 0.0
print(f"{'NP':>3} {'RT':>3} {'AU %':>8} {'samp/s/acc':>11} {'batch/ct x AU':>14} {'diff %':>7}")
for r in rows:
    if not r["au_percent"]:
        print(f"{r['np']:>3} {r['rt']:>3}  (no figures: {r['notes']})"); continue
    au = float(r["au_percent"]); per = float(r["samples_per_second_per_accelerator"])
    rule = batch / ct * au / 100
    d = (per / rule - 1) * 100
    worst = max(worst, abs(d))
    print(f"{r['np']:>3} {r['rt']:>3} {au:8.2f} {per:11.2f} {rule:14.2f} {d:7.2f}")
print(f"worst |diff| {worst:.2f} % -> {'within' if worst <= 2 else 'NOT within'} 2 %")
PY
