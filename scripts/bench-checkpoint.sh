#!/usr/bin/env bash
# storprof checkpoint beside fio, in the same interleaved rounds, on the same
# file system: llama3-8b (8 ranks, ZeRO 3: per rank one model and one
# optimizer shard) scaled down by SCALE, CKPTS checkpoints written and read
# back per run.
#   storprof: `storprof checkpoint` (fsync per file and per directory; and
#             with --odirect), its aggregate save/load GiB/s (every rank's
#             bytes / the slowest rank's time, mean over checkpoints), read
#             back after `echo 3 > drop_caches`.
#   fio:      8 jobs (one per rank), each writing one file of the rank's
#             bytes, bs = the same block, ioengine=psync (one request in
#             flight per job, as each storprof rank), end_fsync=1 (the file
#             fsynced before the job's time stops; fsync_on_close's fsync
#             falls outside fio's timing and inflates its figure), direct=1
#             for O_DIRECT, invalidate=0 (fio otherwise drops the pages it
#             wrote: see fio_run), fallocate=none (neither storprof nor torch.save
#             preallocates; fio's default fallocate changes the figures);
#             CKPTS such writes back to back in one fio process, one
#             stonewalled group of new files per checkpoint (as storprof
#             writes its checkpoints: new files, no gap), then the page cache
#             dropped and the files read back; group bandwidth (bytes / the
#             slowest job's time), mean over the CKPTS writes and reads. fio
#             writes whole blocks only: a rank's bytes rounded down to the
#             block (256 of 268 MiB per rank at the defaults).
#   generator: storprof's data generator alone (one thread × threads used),
#             from the same runs' summary.json, beside fio's buffered write speed.
# Each run starts after `sync` and SETTLE seconds (default 10): on this VM a
# run right after a large write was slower whichever tool it was (the host
# still writing back the previous run's data); rounds alternate which tool
# goes first, so use an even ROUNDS.
# PREWARM=1 (PREWARM_GIB, default 6) touches and frees that much memory
# right before each tool starts (see prewarm below); default 0.
# FIO_WRITE_ARGS adds fio write options, e.g. "--refill_buffers=1" (new
# random data for every write: storprof's pages are all distinct, fio's
# default buffer is reused with light scrambling).
# Usage: scripts/bench-checkpoint.sh [DIR] [SCALE] [ROUNDS] [CKPTS]
#        (default /work/bench-checkpoint 50 4 2). Needs root (drop_caches).
# Holds /tmp/storprof-cargo.lock while measuring. Figures: median [min..max].
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-/work/bench-checkpoint}
SCALE=${2:-50}
ROUNDS=${3:-4}
CKPTS=${4:-2}
BS_KIB=${BS_KIB:-32768}
SETTLE=${SETTLE:-10}
PREWARM=${PREWARM:-0}
PREWARM_GIB=${PREWARM_GIB:-6}
read -r -a FIO_WRITE_ARGS <<< "${FIO_WRITE_ARGS:-}"
RANKS=8
STORPROF=${STORPROF:-${CARGO_TARGET_DIR:-target}/release/storprof}
[ -x "$STORPROF" ] || flock /tmp/storprof-cargo.lock cargo build -q --release --bin storprof
command -v fio >/dev/null || { echo "fio missing: run scripts/setup.sh" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (drop_caches)" >&2; exit 1; }
STORPROF=$(cd "$(dirname "$STORPROF")" && pwd)/$(basename "$STORPROF")
mkdir -p "$DIR"
WORK=$(mktemp -d "$DIR/run.XXXXXX")
LOG="$WORK/figures"
trap 'rm -rf "$WORK"' EXIT
exec 9>/tmp/storprof-cargo.lock
flock 9

rec() { echo "$1 $2" >> "$LOG"; echo "  $1: $2"; }
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {'d': d}))" "$@"; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
settle() { sync; sleep "$SETTLE"; }
# PREWARM=1: write to (and free) PREWARM_GIB of anonymous memory just before
# each tool starts, so both take their page cache from memory the host still
# backs. Free memory left alone for a few seconds is handed back to the host
# (virtio-balloon free page reporting, order >= 9), and the first write to
# each such page costs a host fault: the page-cache copy then runs at about a
# third of its speed, for whichever tool gets those pages.
prewarm() {
    [ "$PREWARM" = 1 ] || return 0
    python3 - "$PREWARM_GIB" <<'PY'
import mmap, sys
size = int(float(sys.argv[1]) * 2**30)
chunk = b"\1" * (64 << 20)
m = mmap.mmap(-1, size)
for off in range(0, size - len(chunk) + 1, len(chunk)):
    m[off:off + len(chunk)] = chunk
m.close()
PY
}

storprof_run() { # name extra-flags...
    local name=$1; shift
    rm -rf "$WORK/sp"
    settle
    prewarm
    "$STORPROF" checkpoint --model llama3-8b --scale "$SCALE" \
        --num-checkpoints-write "$CKPTS" --num-checkpoints-read "$CKPTS" \
        --block-size-kib "$BS_KIB" --checkpoint-folder "$WORK/sp/ck" \
        --results-dir "$WORK/sp/res" "$@" > "$WORK/sp.out"
    local s="$WORK/sp/res/summary.json"
    rec "storprof_${name}_write" "$(jget "$s" "d['metric']['save_checkpoint_aggregate_io_mean_GB_per_second']")"
    rec "storprof_${name}_read" "$(jget "$s" "d['metric']['load_checkpoint_aggregate_io_mean_GB_per_second']")"
    rec "storprof_${name}_write_each" "$(sed -n 's/.*Finished saving checkpoint .*Throughput: \([0-9.]*\) GiB\/s.*/\1/p' "$WORK/sp.out" | paste -sd,)"
    rec "generator_${name}" "$(jget "$s" "d['generator']['capacity_GB_per_second']")"
    RANK_BYTES=$(jget "$s" "d['bytes']['written'] // ($CKPTS * $RANKS)")
    rm -rf "$WORK/sp"
}

fio_run() { # name direct(0|1): as storprof, every checkpoint written back to back, then read back
    local name=$1 direct=$2 w=0 r=0 k
    rm -rf "$WORK/fio"
    settle
    # One fio process writes the checkpoints back to back (one stonewalled
    # group each), as storprof does. invalidate=0: fio's default drops the
    # written files' pages (POSIX_FADV_DONTNEED) once they are clean, which
    # storprof and torch.save do not; the next checkpoint then wrote into
    # that just-freed memory the host still backed, at up to 3x the speed of
    # memory the guest had handed back (README, "Checkpointing against fio").
    local groups=()
    for k in $(seq "$CKPTS"); do
        mkdir -p "$WORK/fio/$k"
        groups+=(--name="ckpt$k" --directory="$WORK/fio/$k" --stonewall)
    done
    prewarm
    fio --numjobs=$RANKS --size="$RANK_BYTES" \
        --bs="${BS_KIB}k" --rw=write --ioengine=psync --direct="$direct" \
        --end_fsync=1 --fallocate=none --invalidate=0 ${FIO_WRITE_ARGS[@]+"${FIO_WRITE_ARGS[@]}"} \
        --group_reporting --output-format=json --output="$WORK/fio-w.json" "${groups[@]}" >/dev/null
    w=$(jget "$WORK/fio-w.json" "sum(j['write']['bw_bytes'] for j in d['jobs']) / 2**30")
    rec "fio_${name}_write_each" "$(jget "$WORK/fio-w.json" "','.join(f\"{j['write']['bw_bytes'] / 2**30:.3f}\" for j in d['jobs'])")"
    drop
    for k in $(seq "$CKPTS"); do
        fio --name="ckpt$k" --directory="$WORK/fio/$k" --numjobs=$RANKS --size="$RANK_BYTES" \
            --bs="${BS_KIB}k" --rw=read --ioengine=psync --direct="$direct" \
            --group_reporting --output-format=json --output="$WORK/fio-r.json" >/dev/null
        r=$(python3 -c "print($r + $(jget "$WORK/fio-r.json" "d['jobs'][0]['read']['bw_bytes']") / 2**30)")
    done
    rm -rf "$WORK/fio"
    rec "fio_${name}_write" "$(python3 -c "print($w / $CKPTS)")"
    rec "fio_${name}_read" "$(python3 -c "print($r / $CKPTS)")"
}

echo "llama3-8b ÷ $SCALE, $CKPTS checkpoints per run, $RANKS ranks, block ${BS_KIB} KiB, $ROUNDS rounds, settle ${SETTLE} s, prewarm ${PREWARM} (${PREWARM_GIB} GiB), fio write args '${FIO_WRITE_ARGS[*]:-}', load $(cut -d' ' -f1-3 /proc/loadavg), in $DIR ($(df -h --output=source,fstype "$DIR" | tail -1))"
for round in $(seq "$ROUNDS"); do
    echo "round $round"
    if [ $((round % 2)) = 1 ]; then
        storprof_run fsync; fio_run fsync 0
        storprof_run odirect --odirect; fio_run odirect 1
    else
        fio_run fsync 0; storprof_run fsync
        fio_run odirect 1; storprof_run odirect --odirect
    fi
done

python3 - "$LOG" "$SCALE" "$CKPTS" "$BS_KIB" <<'EOF'
import sys, statistics
vals = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    if k.endswith("_each"):
        continue
    vals.setdefault(k, []).append(float(v))
def fmt(k):
    v = vals[k]
    return f"{statistics.median(v):.3f} [{min(v):.3f}..{max(v):.3f}]"
print(f"\n| GiB/s, median [min..max] of {len(vals['fio_fsync_write'])} rounds | storprof checkpoint | fio | ratio |")
print("|---|---|---|---|")
for mode, label in [("fsync", "buffered + fsync"), ("odirect", "O_DIRECT + fsync")]:
    for op in ["write", "read"]:
        s = statistics.median(vals[f"storprof_{mode}_{op}"])
        f = statistics.median(vals[f"fio_{mode}_{op}"])
        print(f"| {op} ({label}) | {fmt(f'storprof_{mode}_{op}')} | {fmt(f'fio_{mode}_{op}')} | {s / f:.2f}x |")
g = statistics.median(vals["generator_fsync"])
w = max(statistics.median(vals["fio_fsync_write"]), statistics.median(vals["fio_odirect_write"]))
print(f"| data generator alone (storprof's threads) | {fmt('generator_fsync')} | device write (fio, best mode) {w:.3f} | {g / w:.0f}x |")
EOF
