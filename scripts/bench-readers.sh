#!/usr/bin/env bash
# Side-by-side reader and datagen throughput on real-size flux rows (one run):
#   datagen (2 threads) GB/s, `cat FILES > /dev/null` vs our raw reader (1 thread,
#   page cache warm), our decode vs pyarrow ParquetFile.read_row_group (1 thread),
#   arrow-rs generic reader, and our decode on a pyarrow-written file.
# Usage: scripts/bench-readers.sh [DIR] [FILES] [ROWS_PER_FILE] [ROWS_PER_ROW_GROUP] [ROUNDS]
# Needs /work/venv with pyarrow+numpy (python3 -m venv /work/venv && /work/venv/bin/pip install pyarrow numpy).
# The machine may be shared: every figure is taken ROUNDS times (default 3) and
# reported as median [min..max]; `uptime` is printed before and after.
# Peers in the same run: datagen vs two parallel `dd if=/dev/zero bs=8M` writers
# of the same size; raw vs `cat FILES` (single core, 128 KiB reads into an
# L2-resident buffer) and vs `dd bs=<row group>` (one pread per row group into
# one reused buffer: the copy cost any pread-into-memory loader pays).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/work/bench-readers-data}
FILES=${2:-3}
ROWS=${3:-144}
RG=${4:-48}
ROUNDS=${5:-3}
PY=${PY:-/work/venv/bin/python}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-bench}
STORPROF_SKIP_EBPF=1 cargo build -q --release -p storprof-bench --examples
BIN=$CARGO_TARGET_DIR/release/examples
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
rec() { echo "$1 $2" >> "$LOG"; echo "  $1: $2 GB/s${3:+ $3}"; }
gbps() { python3 -c "import sys; print(f'{float(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2]))/1e9:.3f}')" "$@"; }
uptime
rm -rf "$DIR" && mkdir -p "$DIR"
for i in $(seq "$ROUNDS"); do
  echo "== datagen round $i: $FILES flux files x $ROWS rows, $RG rows per row group, 2 threads"
  rm -rf "$DIR"/*; sync
  out=$( { /usr/bin/time -f "cpu %U user %S sys" nice "$BIN/gen_files" parquet "$DIR" "$FILES" "$ROWS" "$RG" flux; } 2>&1 )
  echo "$out" | sed 's/^/  /'
  rec datagen "$(echo "$out" | sed -n 's/.* = \([0-9.]*\) GB\/s/\1/p')"
  BYTES=$(cat "$DIR"/*.parquet | wc -c)
  mkdir -p "$DIR/dd"; sync
  s=$(date +%s.%N)
  for j in 1 2; do nice dd if=/dev/zero of="$DIR/dd/z$j" bs=8M count=$((BYTES / 2 / 8388608 + 1)) 2>/dev/null & done
  wait; e=$(date +%s.%N)
  rec dd-write-x2 "$(gbps "$(( (BYTES / 2 / 8388608 + 1) * 2 * 8388608 ))" "$s" "$e")"
  rm -rf "$DIR/dd"
done
sync
"$PY" scripts/crosscheck.py "$DIR" | tail -n 1
F=$(ls "$DIR"/*.parquet)
BYTES=$(cat $F | wc -c)
RGB=$(( $(stat -c %s $(echo $F | cut -d' ' -f1)) * RG / ROWS ))
cat $F > /dev/null   # warm the page cache
for i in $(seq "$ROUNDS"); do
  echo "== read round $i (page cache warm)"
  s=$(date +%s.%N); cat $F > /dev/null; e=$(date +%s.%N)
  rec cat "$(gbps "$BYTES" "$s" "$e")"
  s=$(date +%s.%N); for f in $F; do dd if="$f" of=/dev/null bs=$RGB 2>/dev/null; done; e=$(date +%s.%N)
  rec "dd-bs=rowgroup" "$(gbps "$BYTES" "$s" "$e")"
  rec raw "$(nice "$BIN/bench_readers" parquet raw 48 $F | sed -n 's/.* \([0-9.]*\) GB\/s/\1/p')"
  rec raw-mmap "$(BENCH_MMAP=1 nice "$BIN/bench_readers" parquet raw 48 $F | sed -n 's/.* \([0-9.]*\) GB\/s/\1/p')"
  rec decode "$(nice "$BIN/bench_readers" parquet decode 48 $F | sed -n 's/.* \([0-9.]*\) GB\/s/\1/p')"
  rec pyarrow-read_row_group "$("$PY" - $F <<'PY'
import sys, time, os
import pyarrow as pa, pyarrow.parquet as pq
pa.set_cpu_count(1); pa.set_io_thread_count(1)
files = sys.argv[1:]
t = time.perf_counter()
for f in files:
    pf = pq.ParquetFile(f)
    for rg in range(pf.num_row_groups):
        pf.read_row_group(rg, use_threads=False)
s = time.perf_counter() - t
b = sum(os.path.getsize(f) for f in files)
print(f"{b/s/1e9:.3f}")
PY
)" "(1 thread)"
done
uptime
echo "== summary: median [min..max] GB/s over $ROUNDS rounds"
python3 scripts/summarize-runs.py "$LOG" raw/cat raw/dd-bs=rowgroup raw-mmap/cat \
  decode/pyarrow-read_row_group datagen/dd-write-x2
nice "$BIN/bench_readers" parquet arrow-generic 48 $(echo $F | cut -d' ' -f1)
echo "== our decode on a pyarrow-written file (fast path must accept pyarrow's levels)"
"$PY" - "$DIR/pyarrow.parquet" <<'PY'
import sys, numpy as np, pyarrow as pa, pyarrow.parquet as pq
n, rows = [524328, 409, 8232, 8232, 7], 48
names = ["t5_encodings", "clip_encodings", "mean", "logvar", "timestamp"]
cols = [pa.FixedSizeListArray.from_arrays(pa.array(np.random.rand(rows*k).astype(np.float32)), k) for k in n]
pq.write_table(pa.table(dict(zip(names, cols))), sys.argv[1], compression=None, use_dictionary=False, row_group_size=rows)
PY
nice "$BIN/bench_readers" parquet decode 48 "$DIR/pyarrow.parquet"
nice "$BIN/bench_readers" parquet raw 48 "$DIR/pyarrow.parquet"
echo "== dlio-legacy, 4 samples of one file (each rereads + decodes the whole row group)"
BENCH_MAX_ROWS=4 nice "$BIN/bench_readers" parquet dlio-legacy 4 $(echo $F | cut -d" " -f1)
rm -rf "$DIR"
