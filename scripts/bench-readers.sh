#!/usr/bin/env bash
# Side-by-side reader and datagen throughput on real-size flux rows (one run):
#   datagen (2 threads) GB/s, `cat FILES > /dev/null` vs our raw reader (1 thread,
#   page cache warm), our decode vs pyarrow ParquetFile.read_row_group (1 thread),
#   arrow-rs generic reader, and our decode on a pyarrow-written file.
# Usage: scripts/bench-readers.sh [DIR] [FILES] [ROWS_PER_FILE]
# Needs /work/venv with pyarrow+numpy (python3 -m venv /work/venv && /work/venv/bin/pip install pyarrow numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/work/bench-readers-data}
FILES=${2:-3}
ROWS=${3:-144}
PY=${PY:-/work/venv/bin/python}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-bench}
STORPROF_SKIP_EBPF=1 cargo build -q --release -p storprof-bench --examples
BIN=$CARGO_TARGET_DIR/release/examples
rm -rf "$DIR" && mkdir -p "$DIR"
echo "== datagen: $FILES flux files x $ROWS rows (1 row group each), 2 threads"
nice "$BIN/gen_files" parquet "$DIR" "$FILES" "$ROWS" "$ROWS" flux
sync
"$PY" scripts/crosscheck.py "$DIR" | tail -n 1
F=$(ls "$DIR"/*.parquet)
cat $F > /dev/null   # warm the page cache
for i in 1 2 3; do
  echo "== round $i"
  s=$(date +%s.%N); cat $F > /dev/null; e=$(date +%s.%N)
  python3 -c "import os,sys; b=sum(os.path.getsize(f) for f in sys.argv[3:]); print(f'cat: {b/(float(sys.argv[2])-float(sys.argv[1]))/1e9:.3f} GB/s')" "$s" "$e" $F
  nice "$BIN/bench_readers" parquet raw 48 $F
  nice "$BIN/bench_readers" parquet decode 48 $F
  "$PY" - $F <<'PY'
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
print(f"pyarrow read_row_group (1 thread): {b/s/1e9:.3f} GB/s")
PY
done
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
