#!/usr/bin/env bash
# MLPerf Storage v3.0 workloads: the speed goals, each beside its peer in
# the same interleaved rounds.
#   1. datagen GB/s, as DLIO times it (the writers' own clock) and with the
#      final `sync`: retinanet JPEG (322,957 B files) and resnet50 TFRecord
#      (1251 records of 114,244 B per file), 2 writer threads; beside two
#      parallel `dd if=/dev/zero bs=1M` writers of the JPEG dataset's size.
#   2. retinanet reads, page cache warm, ONE reader, samples/s:
#      - storprof bench --reader raw, 1 accelerator, 1 read thread, no compute
#        (each sample: open, fstat, one read of the whole file, close);
#      - a C loop of open/read/close over the same files (the floor of any loader);
#      - a Python loop of `open(f, 'rb').read()` (the floor of any Python loader);
#      - a PyTorch map-style DataLoader, 1 worker, batch 24, whose
#        __getitem__ reads a whole file (the shape of DLIO's retinanet loader);
#      - the real DLIO 2.0.0 (PyPI) over the same files, 1 read thread, no
#        compute (its ImageReader also decodes each JPEG with Pillow).
#   3. dlrm column-subset reads, page cache warm, one reader, 3 epochs of
#      one file of DLIO's size (4,718,592 rows, 768 row groups, 4.2 GB; its
#      footer is 9 MB), DLIO's batch of 16,384: storprof bench --reader raw
#      (bytes read, GB/s over the whole run, and over epochs 2-3, after the
#      first epoch read and parsed the footer) beside a C loop that preads
#      exactly the same byte ranges 3 times (the selected columns' chunks,
#      taken from the footer by pyarrow) into one reused buffer, dd-style,
#      the same loop over storprof's own preads (chunks that touch as one),
#      and the first loop landing the bytes in distinct memory. The C loops
#      time their preads only; storprof runs with --read-threads 1 (a read
#      thread handing batches to the training loop), 0 (one thread) and the
#      workload's own reader.read_threads (4).
# Usage: scripts/bench-v3.sh [DIR] [FILES] [ROUNDS]   (default /work/bench-v3-data 4000 3)
#        PARTS="retinanet dlrm" (default both): parts 1-2 are "retinanet", part 3 "dlrm".
# Needs the DLIO venv (scripts/setup-dlio.sh). Figures: median [min..max] of ROUNDS.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/work/bench-v3-data}
FILES=${2:-4000}
ROUNDS=${3:-3}
PARTS=${PARTS:-retinanet dlrm}
want() { [[ " $PARTS " == *" $1 "* ]]; }
STORPROF=${STORPROF:-${CARGO_TARGET_DIR:-target}/release/storprof}
[ -x "$STORPROF" ] || cargo build -q --release --bin storprof
STORPROF_SETUP_QUIET=1 bash scripts/setup-dlio.sh
VENV=$(cd "${STORPROF_DLIO_VENV:-${CARGO_TARGET_DIR:-target}/dlio-venv}" && pwd)
PY="$VENV/bin/python"
STORPROF=$(cd "$(dirname "$STORPROF")" && pwd)/$(basename "$STORPROF")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/storprof-bench-v3.XXXXXX")
LOG="$WORK/figures"
trap 'rm -rf "$WORK"' EXIT
export TF_CPP_MIN_LOG_LEVEL=3 TF_ENABLE_ONEDNN_OPTS=0
rec() { echo "$1 $2" >> "$LOG"; echo "  $1: $2"; }
now() { date +%s.%N; }
rate() { python3 -c "import sys; print(f'{float(sys.argv[1])/(float(sys.argv[3])-float(sys.argv[2])):.{sys.argv[4]}f}')" "$@"; }
summary() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['metric']['train_throughput_mean_samples_per_second'])" "$1"; }
DATAGEN=(--param dataset.num_subfolders_train=4)

cat > "$WORK/loop.c" <<'EOF'
/* open/read/close of every file named on stdin, one at a time. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    static char buf[1 << 20];
    char path[4096];
    long files = 0, bytes = 0;
    while (fgets(path, sizeof path, stdin)) {
        path[strcspn(path, "\n")] = 0;
        int fd = open(path, O_RDONLY);
        if (fd < 0) { perror(path); return 1; }
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0) bytes += n;
        close(fd);
        files++;
    }
    printf("%ld %ld\n", files, bytes);
    return 0;
}
EOF
cc -O2 -o "$WORK/loop" "$WORK/loop.c"
cat > "$WORK/pyloop.py" <<'EOF'
import sys, time
files = [l.strip() for l in open(sys.argv[1])]
t = time.perf_counter()
n = 0
for f in files:
    with open(f, "rb") as h:
        n += len(h.read())
print(len(files) / (time.perf_counter() - t))
EOF
cat > "$WORK/torchloop.py" <<'EOF'
import sys, time
import torch.utils.data as tud
class Files(tud.Dataset):
    def __init__(self, files): self.files = files
    def __len__(self): return len(self.files)
    def __getitem__(self, i):
        with open(self.files[i], "rb") as h:
            return len(h.read())
if __name__ == "__main__":
    files = [l.strip() for l in open(sys.argv[1])]
    dl = tud.DataLoader(Files(files), batch_size=24, num_workers=1, shuffle=False,
                        drop_last=True, persistent_workers=False, prefetch_factor=2)
    it = iter(dl)
    next(it)  # the worker's start-up is not the loader's rate
    t = time.perf_counter()
    n = 24
    for b in it:
        n += len(b)
    print((n - 24) / (time.perf_counter() - t))
EOF

uptime
if want retinanet; then
    for i in $(seq "$ROUNDS"); do
        echo "== round $i: datagen"
        rm -rf "$DIR"; sync
        s=$(now)
        out=$("$STORPROF" datagen --workload retinanet --data-dir "$DIR" --threads 2 \
            --param "dataset.num_files_train=$FILES" "${DATAGEN[@]}")
        sync; e=$(now)
        rec jpeg_datagen_gbps "$(echo "$out" | sed -n 's/.*: \([0-9.]*\) GB\/s.*/\1/p')"
        rec jpeg_datagen_sync_gbps "$(rate "$(du -sb "$DIR" | cut -f1)" "$s" "$e" 3 | awk '{printf "%.3f", $1/1e9}')"
        rm -rf "$DIR/resnet50"; sync
        s=$(now)
        out=$("$STORPROF" datagen --workload resnet50 --accelerator-type h100 --data-dir "$DIR" --threads 2 \
            --param dataset.num_files_train=8)
        sync; e=$(now)
        rec tfrecord_datagen_gbps "$(echo "$out" | sed -n 's/.*: \([0-9.]*\) GB\/s.*/\1/p')"
        rec tfrecord_datagen_sync_gbps "$(rate "$(du -sb "$DIR/resnet50" | cut -f1)" "$s" "$e" 3 | awk '{printf "%.3f", $1/1e9}')"
        rm -rf "$DIR/resnet50"
        # Peer: two parallel dd writers of the same bytes (1 MiB blocks), the
        # kernel's buffered-write speed here without any generator.
        half=$(( $(du -sb "$DIR/retinanet" | cut -f1) / 2 / 1048576 ))
        sync; s=$(now)
        dd if=/dev/zero of="$DIR/dd0" bs=1M count="$half" status=none &
        dd if=/dev/zero of="$DIR/dd1" bs=1M count="$half" status=none
        wait; e=$(now); sync; e2=$(now)
        rec dd_2writers_gbps "$(rate $((2 * half * 1048576)) "$s" "$e" 3 | awk '{printf "%.3f", $1/1e9}')"
        rec dd_2writers_sync_gbps "$(rate $((2 * half * 1048576)) "$s" "$e2" 3 | awk '{printf "%.3f", $1/1e9}')"
        rm -f "$DIR/dd0" "$DIR/dd1"
    done
    find "$DIR/retinanet/train" -name '*.jpeg' | sort > "$WORK/files"
    cat "$DIR"/retinanet/train/*/*.jpeg > /dev/null   # warm the page cache
    for i in $(seq "$ROUNDS"); do
        echo "== round $i: reads of $FILES page-cached files, one reader"
        s=$(now); "$WORK/loop" < "$WORK/files" > /dev/null; e=$(now)
        rec c_loop_samples_per_s "$(rate "$FILES" "$s" "$e" 0)"
        rm -rf "$WORK/res"
        "$STORPROF" bench --workload retinanet --data-dir "$DIR" --reader raw --read-threads 1 \
            --computation-time 0 --epochs 1 --param "dataset.num_files_train=$FILES" "${DATAGEN[@]}" \
            --results-dir "$WORK/res" > /dev/null
        rec storprof_raw_samples_per_s "$(summary "$WORK/res/summary.json" | awk '{printf "%.0f", $1}')"
        rec python_loop_samples_per_s "$("$PY" "$WORK/pyloop.py" "$WORK/files" | awk '{printf "%.0f", $1}')"
        rec torch_dataloader_samples_per_s "$("$PY" "$WORK/torchloop.py" "$WORK/files" | awk '{printf "%.0f", $1}')"
        rm -rf "$WORK/dlio-run"
        mkdir -p "$WORK/cfg/workload"
        cp benchmark/src/config/workloads/retinanet_b200.yaml "$WORK/cfg/workload/"
        (cd "$WORK" && "$VENV/bin/dlio_benchmark" --config-dir="$WORK/cfg" workload=retinanet_b200 \
            ++workload.workflow.generate_data=False ++workload.workflow.checkpoint=False \
            "++workload.dataset.data_folder=$DIR/retinanet" "++workload.dataset.num_files_train=$FILES" \
            ++workload.dataset.num_subfolders_train=4 ++workload.train.epochs=1 \
            ++workload.train.computation_time=0 ++workload.reader.read_threads=1 \
            "++hydra.run.dir=$WORK/dlio-run" > "$WORK/dlio.log" 2>&1) || { tail -20 "$WORK/dlio.log"; exit 1; }
        rec dlio_samples_per_s "$(summary "$WORK/dlio-run/summary.json" | awk '{printf "%.0f", $1}')"
    done
fi
# (not indented: the heredocs below are verbatim)
if want dlrm; then
# dlrm: 1 file of DLIO's 4,718,592 rows (768 row groups of 6144), dlrm_b200's 40-column subset.
DLRM_ROWS=4718592
# An earlier run's file of this shape is reused (one file, DLRM_ROWS rows in
# 768 groups of 200 columns); anything else is generated afresh.
shape=$("$PY" -c 'import glob, sys, pyarrow.parquet as pq
f = glob.glob(sys.argv[1] + "/train/*.parquet")
m = pq.ParquetFile(f[0]).metadata if len(f) == 1 else None
print(m and (m.num_rows, m.num_row_groups, m.num_columns))' "$DIR/dlrm" 2>/dev/null || true)
if [ "$shape" != "($DLRM_ROWS, 768, 200)" ]; then
    rm -rf "$DIR/dlrm"
    "$STORPROF" datagen --workload dlrm --data-dir "$DIR" --threads 2 --param dataset.num_files_train=1 \
        --param "dataset.num_samples_per_file=$DLRM_ROWS" > /dev/null
fi
cat > "$WORK/ranges.py" <<'EOF'
import glob, sys, yaml
import pyarrow.parquet as pq
cols = yaml.safe_load(open(sys.argv[2]))["dataset"]["parquet"]["columns"]
want = {c["name"] for c in cols if c.get("read", True)}
for f in sorted(glob.glob(sys.argv[1] + "/*.parquet")):
    md = pq.ParquetFile(f).metadata
    names = [md.schema.column(i).path for i in range(md.num_columns)]
    for g in range(md.num_row_groups):
        runs = []
        for i, n in enumerate(names):
            if n in want:
                c = md.row_group(g).column(i)
                s = c.dictionary_page_offset if c.dictionary_page_offset else c.data_page_offset
                runs.append([s, c.total_compressed_size])
        if sys.argv[3] == "runs":  # chunks that touch as one range, as storprof reads them
            runs.sort()
            merged = []
            for s, n in runs:
                if merged and merged[-1][0] + merged[-1][1] == s:
                    merged[-1][1] += n
                else:
                    merged.append([s, n])
            runs = merged
        for s, n in runs:
            print(f, s, n)
EOF
"$PY" "$WORK/ranges.py" "$DIR/dlrm/train" benchmark/src/config/workloads/dlrm_b200.yaml chunks > "$WORK/ranges1.txt"
"$PY" "$WORK/ranges.py" "$DIR/dlrm/train" benchmark/src/config/workloads/dlrm_b200.yaml runs > "$WORK/runs1.txt"
# Three epochs on both sides.
cat "$WORK/ranges1.txt" "$WORK/ranges1.txt" "$WORK/ranges1.txt" > "$WORK/ranges.txt"
cat "$WORK/runs1.txt" "$WORK/runs1.txt" "$WORK/runs1.txt" > "$WORK/runs.txt"
cat > "$WORK/ranges.c" <<'EOF'
/* pread each "path offset length" line of stdin (one file) into one reused
   buffer. The list is parsed first; only the pread loop is timed: prints
   bytes and seconds. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "list.h"
int main(void) {
    static char buf[16 << 20];
    struct list l = read_list();
    long bytes = 0;
    int fd = open(l.path, O_RDONLY);
    double t = now();
    for (size_t i = 0; i < l.n; i++) {
        if (fd < 0 || l.len[i] > (long)sizeof buf || pread(fd, buf, l.len[i], l.off[i]) != l.len[i]) { perror(l.path); return 1; }
        bytes += l.len[i];
    }
    printf("%ld %.6f\n", bytes, now() - t);
    return 0;
}
EOF
cat > "$WORK/list.h" <<'EOF'
/* The "path offset length" lines of stdin, all of one file, as arrays. */
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
struct list { char path[4096]; long *off, *len; size_t n; };
static struct list read_list(void) {
    struct list l = { "", 0, 0, 0 };
    size_t cap = 1 << 16;
    char path[4096];
    long off, len;
    l.off = malloc(cap * sizeof *l.off);
    l.len = malloc(cap * sizeof *l.len);
    while (scanf("%4095s %ld %ld", path, &off, &len) == 3) {
        if (!*l.path) strcpy(l.path, path);
        if (strcmp(path, l.path)) { fprintf(stderr, "one file only\n"); exit(1); }
        if (l.n == cap) {
            cap *= 2;
            l.off = realloc(l.off, cap * sizeof *l.off);
            l.len = realloc(l.len, cap * sizeof *l.len);
        }
        if (!l.off || !l.len) { perror("realloc"); exit(1); }
        l.off[l.n] = off; l.len[l.n] = len; l.n++;
    }
    return l;
}
EOF
cc -O2 -o "$WORK/ranges" "$WORK/ranges.c"
# The same preads landing side by side in a 64 MiB arena (touched once up
# front): the bytes go to distinct memory, as a loader's (and storprof's) do,
# instead of one cache-resident buffer.
cat > "$WORK/arena.c" <<'EOF'
/* pread each "path offset length" line of stdin into the next free part of
   an arena; times the pread loop only, as ranges.c. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "list.h"
int main(void) {
    static char arena[64 << 20];
    struct list l = read_list();
    long bytes = 0;
    size_t at = 0;
    int fd = open(l.path, O_RDONLY);
    memset(arena, 1, sizeof arena);
    double t = now();
    for (size_t i = 0; i < l.n; i++) {
        if (l.len[i] > (long)sizeof arena) { fprintf(stderr, "range too large\n"); return 1; }
        if (at + l.len[i] > sizeof arena) at = 0;
        if (fd < 0 || pread(fd, arena + at, l.len[i], l.off[i]) != l.len[i]) { perror(l.path); return 1; }
        at += l.len[i];
        bytes += l.len[i];
    }
    printf("%ld %.6f\n", bytes, now() - t);
    return 0;
}
EOF
cc -O2 -o "$WORK/arena" "$WORK/arena.c"
# Whole run: bytes and GB/s from summary.json; epochs 2-3: the selected
# bytes of two epochs over their wall time, from per_epoch_stats.json.
cat > "$WORK/measured.py" <<'EOF'
import datetime, json, sys
m = json.load(open(sys.argv[1] + "/summary.json"))["measured"]
e = json.load(open(sys.argv[1] + "/0_per_epoch_stats.json"))
t = lambda s: datetime.datetime.fromisoformat(s).timestamp()
steady = 2 * int(sys.argv[2]) / 3 / (t(e["3"]["end"]) - t(e["2"]["start"]))
print(m["read_bytes"], f"{m['read_bytes'] / m['elapsed_seconds'] / 1e9:.3f}", f"{steady / 1e9:.3f}")
EOF
gbps() { awk '{printf "%.3f", $1 / $2 / 1e9}'; }
for i in $(seq "$ROUNDS"); do
    echo "== round $i: dlrm column subset, one reader"
    # Every side starts from the whole file in page cache (this VM's memory
    # reclaim may have taken some of it since the last round).
    cat "$DIR"/dlrm/train/*.parquet > /dev/null
    # The C loops time their preads only (their lists are parsed first);
    # storprof's figure is its training loop, footer read and parse included.
    read -r want secs < <("$WORK/ranges" < "$WORK/ranges.txt")
    rec pread_ranges_gbps "$(echo "$want $secs" | gbps)"
    read -r got secs < <("$WORK/ranges" < "$WORK/runs.txt")
    [ "$got" = "$want" ] || { echo "runs cover $got B, chunks $want B" >&2; exit 1; }
    rec pread_runs_gbps "$(echo "$got $secs" | gbps)"
    read -r got secs < <("$WORK/arena" < "$WORK/ranges.txt")
    rec pread_ranges_arena_gbps "$(echo "$got $secs" | gbps)"
    # 1 and 0 read threads, then the workload's own reader.read_threads (4).
    for rt in 1 0 config; do
        rm -rf "$WORK/dres"
        threads=(--read-threads "$rt")
        [ "$rt" = config ] && threads=()
        "$STORPROF" bench --workload dlrm --data-dir "$DIR" --reader raw "${threads[@]}" \
            --computation-time 0 --epochs 3 --param dataset.num_files_train=1 \
            --param "dataset.num_samples_per_file=$DLRM_ROWS" --results-dir "$WORK/dres" > /dev/null
        read -r got_bytes got_gbps got_steady < <("$PY" "$WORK/measured.py" "$WORK/dres" "$want")
        case $rt in 1) sfx= ;; 0) sfx=_rt0 ;; *) sfx=_config ;; esac
        rec "storprof_dlrm_read_bytes$sfx" "$got_bytes"
        rec "storprof_dlrm_gbps$sfx" "$got_gbps"
        rec "storprof_dlrm_epochs23_gbps$sfx" "$got_steady"
    done
    rec selected_chunk_bytes "$want"
done
fi
uptime
echo "== medians over $ROUNDS rounds"
python3 - "$LOG" <<'EOF'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    vals.setdefault(k, []).append(float(v))
for k, v in vals.items():
    print(f"{k}: {statistics.median(v):g} [{min(v):g}..{max(v):g}]")
m = {k: statistics.median(v) for k, v in vals.items()}
if "storprof_raw_samples_per_s" in m:
    r = m["storprof_raw_samples_per_s"]
    print(f"storprof raw / C loop: {r / m['c_loop_samples_per_s']:.2f}")
    print(f"storprof raw / torch DataLoader: {r / m['torch_dataloader_samples_per_s']:.1f}x")
    print(f"storprof raw / DLIO 2.0.0: {r / m['dlio_samples_per_s']:.1f}x")
    print(f"storprof raw / Python loop: {r / m['python_loop_samples_per_s']:.1f}x")
if "storprof_dlrm_gbps" in m:
    print(f"dlrm: storprof read {m['storprof_dlrm_read_bytes']:.0f} B (footers included) for "
          f"{m['selected_chunk_bytes']:.0f} B of selected chunks, "
          f"{m['storprof_dlrm_gbps'] / m['pread_ranges_gbps']:.2f}x the pread loop's GB/s, "
          f"{m['storprof_dlrm_gbps'] / m['pread_ranges_arena_gbps']:.2f}x the arena loop's; "
          f"epochs 2-3: {m['storprof_dlrm_epochs23_gbps'] / m['pread_ranges_gbps']:.2f}x the pread loop's")
    print(f"dlrm against the loop over storprof's own preads (touching chunks as one): "
          f"{m['storprof_dlrm_gbps'] / m['pread_runs_gbps']:.2f}x, epochs 2-3 "
          f"{m['storprof_dlrm_epochs23_gbps'] / m['pread_runs_gbps']:.2f}x")
    print(f"dlrm with --read-threads 0 (reads in the training loop's thread, no hand-off): "
          f"{m['storprof_dlrm_gbps_rt0'] / m['pread_ranges_gbps']:.2f}x, epochs 2-3 "
          f"{m['storprof_dlrm_epochs23_gbps_rt0'] / m['pread_ranges_gbps']:.2f}x the pread loop's")
    print(f"dlrm with the workload's reader.read_threads (4): "
          f"{m['storprof_dlrm_gbps_config'] / m['pread_ranges_gbps']:.2f}x, epochs 2-3 "
          f"{m['storprof_dlrm_epochs23_gbps_config'] / m['pread_ranges_gbps']:.2f}x the pread loop's")
EOF
