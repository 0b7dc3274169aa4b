#!/usr/bin/env bash
# S3 read throughput, side by side in one run (issue 5): a loopback S3 server,
# a flux dataset generated into it with `storprof datagen --data-dir s3://...`,
# then per round:
#   peer:  the server's best GET throughput, N parallel ranged GETs by curl
#          over every object (N = PARALLEL)
#   ours:  `storprof bench --reader raw --accelerators 1 --computation-time 0`
#          measured MiB/s from summary.json
# Usage: scripts/bench-s3.sh [FILES] [ROWS_PER_FILE] [ROUNDS]
# Env: SERVER=moto (default, preinstalled) | s3rver (npm install s3rver@3.7.1 into
# /work/s3rver; ~2x faster for GETs, see shared/reference/parquet-s3.md §3),
# PARALLEL (default 4), READ_THREADS (default 2), S3_PART_MIB (our part size,
# default 16; moto copies the whole object for every ranged GET, so fewer,
# larger parts favour it).
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${1:-2}
ROWS=${2:-96}
ROUNDS=${3:-3}
SERVER=${SERVER:-moto}
PARALLEL=${PARALLEL:-4}
RT=${READ_THREADS:-2}
PART=${S3_PART_MIB:-16}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-bench}
BIN=$CARGO_TARGET_DIR/release/storprof
STORPROF_SKIP_EBPF=1 cargo build -q --release -p storprof || { [ -x "$BIN" ] && echo "build failed: using the existing $BIN" >&2; }
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
EP=http://127.0.0.1:$PORT
WORK=$(mktemp -d)
SPID=
cleanup() { [ -n "$SPID" ] && kill "$SPID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
case $SERVER in
  moto) moto_server -H 127.0.0.1 -p "$PORT" >"$WORK/server.log" 2>&1 & SPID=$! ;;
  s3rver)
    [ -x /work/s3rver/node_modules/.bin/s3rver ] || (mkdir -p /work/s3rver && cd /work/s3rver && npm install -s s3rver@3.7.1 >/dev/null)
    mkdir -p "$WORK/s3"
    /work/s3rver/node_modules/.bin/s3rver -d "$WORK/s3" -a 127.0.0.1 -p "$PORT" -s --no-vhost-buckets >"$WORK/server.log" 2>&1 & SPID=$! ;;
  *) echo "SERVER must be moto or s3rver" >&2; exit 2 ;;
esac
for _ in $(seq 100); do curl -s -o /dev/null "$EP/" && break; sleep 0.2; done
curl -sf -X PUT "$EP/bench" -o /dev/null
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
P=(--param dataset.num_files_train="$FILES" --param dataset.num_samples_per_file="$ROWS"
   --param dataset.num_files_eval=0 --param reader.read_threads="$RT" --param train.epochs=1)
uptime
echo "== $SERVER on $EP; datagen $FILES flux files x $ROWS rows into s3://bench/ds"
nice "$BIN" datagen --workload flux --data-dir s3://bench/ds --s3-endpoint "$EP" --client-memory-gb 1 "${P[@]}" | tail -n 2
KEYS=$(curl -s "$EP/bench?list-type=2&prefix=ds/flux/train/" | grep -o '<Key>[^<]*</Key>' | sed 's/<[^>]*>//g')
LOG=$WORK/figures
for i in $(seq "$ROUNDS"); do
  echo "== round $i"
  # Peer: every object in PARALLEL ranged GETs at once (one object at a time).
  total=0; s=$(date +%s.%N)
  for k in $KEYS; do
    size=$(curl -sI "$EP/bench/$k" | tr -d '\r' | awk 'tolower($1)=="content-length:"{print $2}')
    part=$(( (size + PARALLEL - 1) / PARALLEL ))
    pids=()
    for j in $(seq 0 $((PARALLEL - 1))); do
      a=$((j * part)); b=$(( (j + 1) * part - 1 )); [ $b -ge $size ] && b=$((size - 1))
      curl -s -o /dev/null -r "$a-$b" "$EP/bench/$k" & pids+=($!)
    done
    wait "${pids[@]}"   # not a bare `wait`: the server is a background job too
    total=$((total + size))
  done
  e=$(date +%s.%N)
  curl_mibs=$(python3 -c "print(f'{$total/($e-$s)/2**20:.1f}')")
  echo "  curl x$PARALLEL ranged GETs: $curl_mibs MiB/s"
  echo "curl $curl_mibs" >> "$LOG"
  R=$WORK/results-$i
  nice "$BIN" bench --workload flux --data-dir s3://bench/ds --s3-endpoint "$EP" --accelerators 1 \
    --computation-time 0 --reader raw --s3-part-mib "$PART" --results-dir "$R" "${P[@]}" > "$WORK/bench-$i.log"
  ours=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['measured']; print(f\"{m['read_MiB_per_second']:.1f}\")" "$R/summary.json")
  echo "  storprof bench raw, 1 accelerator, $RT read threads: $ours MiB/s (measured)"
  echo "raw $ours" >> "$LOG"
done
uptime
python3 - "$LOG" <<'PY'
import sys, statistics
runs = {}
for line in open(sys.argv[1]):
    k, v = line.split(); runs.setdefault(k, []).append(float(v))
for k, v in runs.items():
    print(f"{k:5s} median {statistics.median(v):.1f} MiB/s [{min(v):.1f}..{max(v):.1f}]")
print(f"raw / curl: {statistics.median(runs['raw'])/statistics.median(runs['curl'])*100:.0f}%")
PY
