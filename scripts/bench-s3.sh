#!/usr/bin/env bash
# S3 read throughput, side by side in one run (issue 5): a loopback S3 server,
# a flux dataset generated into it with `storprof datagen --data-dir s3://...`,
# then per round:
#   peer:  the server's best GET throughput: every object fetched with N
#          parallel ranged curl GETs, for each N in CURL_PARALLEL; best N kept
#   s3dlio: the Rust object-storage library DLIO uses (PyPI, installed into
#          its own venv, $S3DLIO_VENV), `get_many` of all objects, with its
#          concurrent range splitting on (its default) and off, each mode in
#          its own process; only the get_many call is timed
#   ours:  `storprof bench --reader raw --accelerators 1 --computation-time 0`
#          for each S3 setting in OURS ("default" = storprof's defaults,
#          "PART_MIB:PARALLEL_GETS", "huge" or "nohuge" = defaults with
#          --s3-huge-pages true/false), measured MiB/s from summary.json:
#          one epoch, so the first epoch is what is measured
# The summary prints medians and each setting's share of curl's and
# s3dlio's best.
# Usage: scripts/bench-s3.sh [FILES] [ROWS_PER_FILE] [ROUNDS]
# Env: SERVER=moto (default, preinstalled) | s3rver (npm install s3rver@3.7.1 into
# /work/s3rver; ~2x faster for GETs, see shared/reference/parquet-s3.md §3),
# CURL_PARALLEL (default "1 2 4 8"), READ_THREADS (default 2),
# OURS (default "default"), S3DLIO (default "on off": range-splitting modes;
# "" skips it), S3DLIO_VENV (default /work/s3dlio-venv), EXTRA (more bench flags, e.g. "--param reader.prefetch_workers=2").
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${1:-2}
ROWS=${2:-96}
ROUNDS=${3:-3}
SERVER=${SERVER:-moto}
CURL_PARALLEL=${CURL_PARALLEL:-1 2 4 8}
RT=${READ_THREADS:-2}
OURS=${OURS:-default}
S3DLIO_MODES=${S3DLIO-on off}
S3DLIO_VENV=${S3DLIO_VENV:-/work/s3dlio-venv}
EXTRA=${EXTRA:-}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target-bench}
BIN=$CARGO_TARGET_DIR/release/storprof
STORPROF_SKIP_EBPF=1 cargo build -q --release -p storprof || { [ -x "$BIN" ] && echo "build failed: using the existing $BIN" >&2; }
if [ -n "$S3DLIO_MODES" ] && ! "$S3DLIO_VENV/bin/python" -c 'import s3dlio' 2>/dev/null; then
  python3 -m venv "$S3DLIO_VENV" && "$S3DLIO_VENV/bin/pip" install -q s3dlio==0.10.0
fi
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
curl_all() { # $1 = ranged GETs in flight per object
  local n=$1 total=0 s e size part a b k j pids
  s=$(date +%s.%N)
  for k in $KEYS; do
    size=$(curl -sI "$EP/bench/$k" | tr -d '\r' | awk 'tolower($1)=="content-length:"{print $2}')
    part=$(( (size + n - 1) / n ))
    pids=()
    for j in $(seq 0 $((n - 1))); do
      a=$((j * part)); b=$(( (j + 1) * part - 1 )); [ $b -ge $size ] && b=$((size - 1))
      curl -s -o /dev/null -r "$a-$b" "$EP/bench/$k" & pids+=($!)
    done
    wait "${pids[@]}"   # not a bare `wait`: the server is a background job too
    total=$((total + size))
  done
  e=$(date +%s.%N)
  python3 -c "print(f'{$total/($e-$s)/2**20:.1f}')"
}
cat > "$WORK/s3dlio_get.py" <<'PY'
import sys, time
import s3dlio
uris = sys.argv[1:]
s3dlio.stat_object(uris[0])  # client built and connected before the clock starts
start = time.perf_counter()
got = s3dlio.get_many(uris)
elapsed = time.perf_counter() - start
total = sum(len(body) for _, body in got)
print(f"{total / elapsed / 2**20:.1f}")
PY
URIS=()
for k in $KEYS; do URIS+=("s3://bench/$k"); done
for i in $(seq "$ROUNDS"); do
  echo "== round $i"
  for n in $CURL_PARALLEL; do
    v=$(curl_all "$n"); echo "  curl x$n ranged GETs per object: $v MiB/s"; echo "curl_x$n $v" >> "$LOG"
  done
  # Warm-up, not counted: the first bench after the curl loop ran slower
  # whatever its setting (server and page cache settling), which favoured
  # whichever setting came second. s3dlio and every storprof setting run
  # after it.
  nice "$BIN" bench --workload flux --data-dir s3://bench/ds --s3-endpoint "$EP" --accelerators 1 \
    --computation-time 0 --reader raw --results-dir "$WORK/warmup-$i" "${P[@]}" > /dev/null
  for mode in $S3DLIO_MODES; do
    [ "$mode" = on ] && split=1 || split=0
    v=$(AWS_ENDPOINT_URL=$EP S3DLIO_ENABLE_RANGE_OPTIMIZATION=$split nice "$S3DLIO_VENV/bin/python" "$WORK/s3dlio_get.py" "${URIS[@]}")
    echo "  s3dlio get_many, range splitting $mode: $v MiB/s"; echo "s3dlio_split_$mode $v" >> "$LOG"
  done
  for cfg in $OURS; do
    flags=()
    case $cfg in
      default) ;;
      huge) flags=(--s3-huge-pages true) ;;
      nohuge) flags=(--s3-huge-pages false) ;;
      *) flags=(--s3-part-mib "${cfg%%:*}" --s3-parallel-gets "${cfg##*:}") ;;
    esac
    R=$WORK/results-$i-${cfg/:/_}
    # shellcheck disable=SC2086
    nice "$BIN" bench --workload flux --data-dir s3://bench/ds --s3-endpoint "$EP" --accelerators 1 \
      --computation-time 0 --reader raw "${flags[@]}" --results-dir "$R" "${P[@]}" $EXTRA > "$WORK/bench-$i.log"
    ours=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['measured']; print(f\"{m['read_MiB_per_second']:.1f}\")" "$R/summary.json")
    echo "  storprof bench raw ($cfg), 1 accelerator, $RT read threads: $ours MiB/s (measured)"
    echo "raw_$cfg $ours" >> "$LOG"
  done
done
uptime
grep '\[STORPROF\] Requests' "$WORK"/bench-*.log | tail -n 1 || true
python3 - "$LOG" <<'PY'
import sys, statistics
runs = {}
for line in open(sys.argv[1]):
    k, v = line.split(); runs.setdefault(k, []).append(float(v))
med = {k: statistics.median(v) for k, v in runs.items()}
for k, v in runs.items():
    print(f"{k:14s} median {med[k]:8.1f} MiB/s [{min(v):.1f}..{max(v):.1f}]")
best = max((k for k in med if k.startswith("curl")), key=med.get)
print(f"best curl: {best} at {med[best]:.1f} MiB/s")
peer = [k for k in med if k.startswith("s3dlio")]
best_peer = max(peer, key=med.get) if peer else None
if best_peer:
    print(f"best s3dlio: {best_peer} at {med[best_peer]:.1f} MiB/s")
for k in med:
    if k.startswith("raw_"):
        line = f"{k} / best curl: {med[k]/med[best]*100:.0f}%"
        if best_peer:
            line += f", / best s3dlio: {med[k]/med[best_peer]*100:.0f}%"
        print(line)
PY
