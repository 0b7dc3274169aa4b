#!/usr/bin/env bash
# The benchmark issue's speed goals, measured through `storprof datagen` and
# `storprof bench` themselves, each beside its peer in the same run:
#   1. datagen (flux, 2 threads) GB/s   vs two parallel `dd if=/dev/zero bs=8M` writers,
#      each unsynced (datagen's own timing, as DLIO's) and including `sync`
#   2. raw reader, page cache warm, 1 accelerator, 1 read thread, no computation:
#      bench's measured read GB/s (mmap default, and `reader.dont_use_mmap=True`
#      i.e. pread into buffers)   vs single-core `cat FILES > /dev/null`
#   3. the same, caches dropped before each reader (root only): storage speed
#   4. AU at computation_time 0.05 s, 1 accelerator, 2 read threads, raw, warm
# Usage: scripts/bench-raw.sh [DIR] [FILES] [ROWS_PER_FILE] [ROWS_PER_ROW_GROUP] [ROUNDS]
# Every figure is taken ROUNDS times (default 3), reported as median [min..max];
# `uptime` is printed before and after (the machine may be shared).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/work/bench-raw-data}
FILES=${2:-3}
ROWS=${3:-144}
RG=${4:-48}
ROUNDS=${5:-3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-bench}
STORPROF_SKIP_EBPF=1 cargo build -q --release -p storprof
S=$CARGO_TARGET_DIR/release/storprof
LOG=$(mktemp)
RES=$(mktemp -d)
trap 'rm -rf "$LOG" "$RES"' EXIT
P=(--param "dataset.num_files_train=$FILES" --param "dataset.num_samples_per_file=$ROWS"
   --param "dataset.parquet_row_group_size=$RG")
rec() { echo "$1 $2" >> "$LOG"; echo "  $1: $2${3:+ $3}"; }
gbps() { python3 -c "import sys; print(f'{float(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2]))/1e9:.3f}')" "$@"; }
summary() { python3 -c "
import json, sys
d = json.load(open(sys.argv[1] + '/summary.json'))
m = d['measured']
print(f\"{m['read_bytes'] / m['elapsed_seconds'] / 1e9:.3f}\" if sys.argv[2] == 'gbps'
      else f\"{d['metric']['train_au_mean_percentage']:.2f}\")" "$@"; }
bench() { # bench NAME THREADS COMPUTATION [extra args...]
  local name=$1 rt=$2 ct=$3; shift 3
  rm -rf "$RES/$name"
  nice "$S" bench --workload flux --data-dir "$DIR" --reader raw --read-threads "$rt" \
    --computation-time "$ct" "${P[@]}" --param "reader.batch_size=$RG" "$@" \
    --results-dir "$RES/$name" > /dev/null
}
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
uptime
for i in $(seq "$ROUNDS"); do
  echo "== datagen round $i: $FILES flux files x $ROWS rows, $RG rows per row group"
  rm -rf "$DIR"; sync
  s=$(date +%s.%N)
  out=$(nice "$S" datagen --workload flux --data-dir "$DIR" "${P[@]}" 2>&1)
  m=$(date +%s.%N); sync; e=$(date +%s.%N)
  BYTES=$(cat "$DIR"/flux/train/*.parquet | wc -c)
  rec datagen "$(echo "$out" | sed -n 's/^Generated .*: \([0-9.]*\) GB\/s.*/\1/p')" "GB/s (its own timing: files written, not synced)"
  rec datagen+sync "$(gbps "$BYTES" "$s" "$e")" "GB/s (wall incl. sync)"
  mkdir -p "$DIR/dd"; sync
  n=$((BYTES / 2 / 8388608 + 1))
  s=$(date +%s.%N)
  for j in 1 2; do nice dd if=/dev/zero of="$DIR/dd/z$j" bs=8M count=$n 2>/dev/null & done
  wait; m=$(date +%s.%N); sync; e=$(date +%s.%N)
  rec dd-write-x2 "$(gbps "$((n * 2 * 8388608))" "$s" "$m")" "GB/s (not synced)"
  rec dd-write-x2+sync "$(gbps "$((n * 2 * 8388608))" "$s" "$e")" "GB/s (incl. sync)"
  rm -rf "$DIR/dd"
done
F=$(ls "$DIR"/flux/train/*.parquet)
BYTES=$(cat $F | wc -c)
cat $F > /dev/null
for i in $(seq "$ROUNDS"); do
  echo "== raw reader round $i, page cache warm ($BYTES bytes)"
  s=$(date +%s.%N); cat $F > /dev/null; e=$(date +%s.%N)
  rec cat-warm "$(gbps "$BYTES" "$s" "$e")" GB/s
  bench mmap 1 0 --param train.epochs=3; rec raw-mmap-warm "$(summary "$RES/mmap" gbps)" GB/s
  bench pread 1 0 --param train.epochs=3 --param reader.dont_use_mmap=True; rec raw-pread-warm "$(summary "$RES/pread" gbps)" GB/s
  bench au 2 0.05 --param train.epochs=2; rec au-0.05s-2rt "$(summary "$RES/au" au)" %
done
if [ "$(id -u)" = 0 ]; then
  for i in $(seq "$ROUNDS"); do
    echo "== raw reader round $i, caches dropped before each reader"
    drop; s=$(date +%s.%N); cat $F > /dev/null; e=$(date +%s.%N)
    rec cat-cold "$(gbps "$BYTES" "$s" "$e")" GB/s
    drop; bench mmap 1 0; rec raw-mmap-cold "$(summary "$RES/mmap" gbps)" GB/s
    drop; bench pread 1 0 --param reader.dont_use_mmap=True; rec raw-pread-cold "$(summary "$RES/pread" gbps)" GB/s
  done
else
  echo "== cold-cache rounds skipped: dropping caches needs root"
fi
uptime
echo "== summary: median [min..max] over $ROUNDS rounds"
python3 scripts/summarize-runs.py "$LOG" raw-mmap-warm/cat-warm raw-pread-warm/cat-warm \
  raw-mmap-cold/cat-cold raw-pread-cold/cat-cold datagen/dd-write-x2 datagen+sync/dd-write-x2+sync
rm -rf "$DIR"
