#!/usr/bin/env bash
# storprof whatif against reality: each case is recorded once, its levers
# projected from that one recording (`storprof whatif --json`), then each
# lever is applied for real and the job re-run; the table gives the
# projected AU, its range, the AU the re-run measured (the workload's own:
# the bench's summary.json, DLIO's formula) and the error. Not a timed
# test: a check of the model, run by hand; CI runs its short form
# (tests/whatif.rs: one lever per kind of limit, one run per figure).
#
# Cases (`storprof bench` over a small flux dataset made by `storprof
# datagen`, 32 steps of 4 samples, 2 read threads unless a lever changes
# them), each with an AU in mid-range so that errors show:
#   storage   O_DIRECT reads through a blkio throttle of 16 MiB/s, 0.25 s
#             of compute: storage ×2 (32 MiB/s), read-threads ×2,
#             computation ×2 and ×0.5;
#   reader    the #330 reader (dlio-legacy) on cached data, one read
#             thread, 40 ms of compute: read-threads ×2, computation ×2 and
#             ×0.5 (reader-cpu has no faster reader to swap in: left out);
#   compute   the raw reader on cached data, 0.2 s of compute:
#             computation ×0.25, read-threads ×2.
# And the real DLIO benchmark (scripts/dlio-jobs.sh: a PyTorch DataLoader
# on DLIO's own data, cached; its AU from its summary.json):
#   dlio-reader  the #330 reader, 2 read threads, 200 steps of 4 ms (the
#                reader the limit): read-threads ×2 and ×0.5, computation
#                ×2 and ×4;
#   dlio-compute the same with steps of 20 ms (the computation the limit):
#                the same levers;
#   dlio-jpeg    JPEG decode by 2 spawned workers, retinanet's 47.55 ms:
#                read-threads ×2 and ×0.5, computation ×0.5 and ×2.
# And the seed study's question (../shared/seeds/002: NP × RT over S3 at
# 0.05 s of compute, AU projected to 1.35 s):
#   s3           `storprof bench` over a loopback S3 server (moto_server)
#                at NP=1 RT=1, 10 ms steps: read-threads ×2, accelerators
#                ×2, computation ×5 and ×135 (the seed's 0.05 s and 1.35 s).
# Goal (docs/src/whatif.md): |projected − measured| ≤ 5 AU points on 90%
# of the levers, and never a wrong sign (a gain projected where the re-run
# loses, or none where it gains ≥ 10 points). Exit 1 when missed.
#
#   sudo bash scripts/check-whatif.sh [CASES]
#   CASES default "storage reader compute dlio-reader dlio-compute dlio-jpeg s3"
#   STORPROF=path/to/storprof skips the build; REPEATS (default 3): plain
#   runs per measured figure, their median; KEEP=1 keeps the work dir.
# The base is recorded once under `storprof record`; every measured AU,
# the base's too, is the median of REPEATS plain runs.
set -euo pipefail
cd "$(dirname "$0")/.."
CASES=${1:-storage reader compute dlio-reader dlio-compute dlio-jpeg s3}
REPEATS=${REPEATS:-3}
[ "$(id -u)" = 0 ] || { echo "check-whatif.sh: needs root (recording, blkio throttles)" >&2; exit 2; }
export PATH="$HOME/.cargo/bin:$PATH"
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
if [ -z "${STORPROF:-}" ]; then
    cargo build --release -q --bin storprof
    STORPROF=$TARGET/release/storprof
fi
WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/storprof-whatif.XXXXXX")
CG=/sys/fs/cgroup/blkio/storprof-whatif-$$
S3_PID=
cleanup() {
    [ -n "$S3_PID" ] && kill "$S3_PID" 2> /dev/null
    rmdir "$CG" 2> /dev/null || true
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
DATA=$WORK/data
SMALL=(--param dataset.num_files_train=8 --param dataset.num_samples_per_file=16
    --param dataset.parquet_row_group_size=8)
"$STORPROF" -q datagen --workload flux --data-dir "$DATA" "${SMALL[@]}" --results-dir "$WORK/datagen" > /dev/null

# throttle BYTES_PER_S: the cgroup every run joins (0: no limit).
throttle() {
    [ -f /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device ] ||
        { echo "check-whatif.sh: needs cgroup v1 blkio throttling" >&2; exit 2; }
    mkdir -p "$CG"
    local dev
    dev=$(stat -c '%d' "$DATA")
    echo "$((dev >> 8)):$((dev & 255)) $1" > "$CG/blkio.throttle.read_bps_device"
}

# evict: the dataset out of the page cache (O_DIRECT reads skip it anyway).
evict() { find "$DATA" -type f -exec dd if=/dev/null of={} oflag=nocache conv=notrunc,fdatasync status=none \; ; }

# bench_cmd NAME RT COMP READER [extra...]: the bench's command line, in CMD.
bench_cmd() {
    local name=$1 rt=$2 comp=$3 reader=$4
    shift 4
    CMD=("$STORPROF" bench --workload flux --data-dir "$DATA" --reader "$reader"
        --read-threads "$rt" --computation-time "$comp" --results-dir "$WORK/$name-results"
        "${SMALL[@]}" --param reader.batch_size=4 --param train.epochs=1 "$@")
}

# in_cgroup CMD...: a shell line that joins the throttle's cgroup, then runs CMD.
in_cgroup() { echo "echo \$\$ > $CG/cgroup.procs && exec $(printf '%q ' "$@")"; }

# au RESULTS_DIR: the bench's own AU (DLIO's formula) from its summary.json.
au() {
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metric"]["train_au_mean_percentage"])' \
        "$(find "$1" -name summary.json | head -1)"
}

# record CASE RT COMP READER [extra...]: the case's base run under
# `storprof record` (the recording the projections come from).
record() {
    local case=$1
    shift
    bench_cmd "$case-recorded" "$@"
    "$STORPROF" record --live off -o "$WORK/$case-base" -- sh -c "$(in_cgroup "${CMD[@]}")" \
        > "$WORK/$case-base.log" 2>&1 ||
        { echo "recording $case failed:" >&2; tail -5 "$WORK/$case-base.log" >&2; exit 1; }
}

# measure NAME RT COMP READER [extra...]: the median AU of REPEATS plain
# runs (the page cache evicted before each when the data is read O_DIRECT).
measure() {
    local name=$1 aus=()
    shift
    for i in $(seq 1 "$REPEATS"); do
        bench_cmd "$name-$i" "$@"
        [[ " $* " == *" --odirect "* ]] && evict
        sh -c "$(in_cgroup "${CMD[@]}")" > "$WORK/$name-$i.log" 2>&1 ||
            { echo "run $name failed:" >&2; tail -5 "$WORK/$name-$i.log" >&2; exit 1; }
        aus+=("$(au "$WORK/$name-$i-results")")
    done
    printf '%s\n' "${aus[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}

# The real DLIO benchmark, when a case asks for it.
if [[ " $CASES " == *" dlio-"* ]]; then
    bash scripts/setup-dlio.sh
    VENV=${STORPROF_DLIO_VENV:-$TARGET/dlio-venv}
    DLIO_DATA=${STORPROF_DLIO_BENCH_DATA:-$TARGET/dlio-bench-data}
    # shellcheck source=scripts/dlio-jobs.sh
    . scripts/dlio-jobs.sh
    jobs=()
    [[ " $CASES " == *" dlio-reader "* || " $CASES " == *" dlio-compute "* ]] && jobs+=(reader330)
    [[ " $CASES " == *" dlio-jpeg "* ]] && jobs+=(jpeg)
    dlio_data "${jobs[@]}"
fi

# The loopback S3 server and a flux dataset in it, when the s3 case runs.
if [[ " $CASES " == *" s3 "* ]]; then
    command -v moto_server > /dev/null ||
        { echo "check-whatif.sh: the s3 case needs moto_server (pip install 'moto[server]')" >&2; exit 2; }
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    S3_EP=http://127.0.0.1:$PORT
    moto_server -H 127.0.0.1 -p "$PORT" > "$WORK/s3-server.log" 2>&1 &
    S3_PID=$!
    for _ in $(seq 100); do curl -s -o /dev/null "$S3_EP/" && break; sleep 0.2; done
    curl -sf -X PUT "$S3_EP/whatif" -o /dev/null
    export AWS_ACCESS_KEY_ID=whatif AWS_SECRET_ACCESS_KEY=whatif AWS_REGION=us-east-1
    "$STORPROF" -q datagen --workload flux --data-dir s3://whatif/ds --s3-endpoint "$S3_EP" \
        "${SMALL[@]}" --results-dir "$WORK/s3-datagen" > /dev/null
fi

# s3_cmd NAME NP RT COMP: the bench over S3, in CMD.
s3_cmd() {
    CMD=("$STORPROF" bench --workload flux --data-dir s3://whatif/ds --s3-endpoint "$S3_EP"
        --reader raw --accelerators "$2" --read-threads "$3" --computation-time "$4"
        --results-dir "$WORK/$1-results" "${SMALL[@]}" --param reader.batch_size=4
        --param train.epochs=1)
}

# s3_measure NAME NP RT COMP: the median AU of REPEATS plain runs.
s3_measure() {
    local name=$1 aus=()
    shift
    for i in $(seq 1 "$REPEATS"); do
        s3_cmd "$name-$i" "$@"
        "${CMD[@]}" > "$WORK/$name-$i.log" 2>&1 ||
            { echo "run $name failed:" >&2; tail -5 "$WORK/$name-$i.log" >&2; exit 1; }
        aus+=("$(au "$WORK/$name-$i-results")")
    done
    printf '%s\n' "${aus[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}

# dlio_au RUN_DIR: DLIO's own AU from its summary.json.
dlio_au() {
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metric"]["train_au_mean_percentage"])' \
        "$1/summary.json"
}

# dlio_record CASE JOB [OVERRIDES...]: the case's base run under `storprof record`.
dlio_record() {
    local case=$1 job=$2
    shift 2
    dlio "$job" "$WORK/$case-recorded" "$@"
    "$STORPROF" record --live off -o "$WORK/$case-base" -- "${CMD[@]}" > "$WORK/$case-base.log" 2>&1 ||
        { echo "recording $case failed:" >&2; tail -5 "$WORK/$case-base.log" >&2; exit 1; }
}

# dlio_measure NAME JOB [OVERRIDES...]: the median AU of REPEATS plain runs.
dlio_measure() {
    local name=$1 job=$2 aus=()
    shift 2
    for i in $(seq 1 "$REPEATS"); do
        dlio "$job" "$WORK/$name-$i" "$@"
        "${CMD[@]}" > "$WORK/$name-$i.log" 2>&1 ||
            { echo "run $name failed:" >&2; tail -5 "$WORK/$name-$i.log" >&2; exit 1; }
        aus+=("$(dlio_au "$WORK/$name-$i")")
        rm -rf "${WORK:?}/$name-$i"
    done
    printf '%s\n' "${aus[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}

ROWS=$WORK/rows.tsv
: > "$ROWS"
# check CASE LEVER=K BASE MEASURED: one row from the case's projections,
# with the AU the recorded run itself reported (the observer's cost shows
# as its distance from the plain base).
check() {
    local summary
    summary=$(find "$WORK/$1-recorded" "$WORK/$1-recorded-results" -name summary.json 2> /dev/null |
        head -1 || true)
    python3 - "$WORK/$1.whatif.json" "$1" "$2" "$3" "$4" "$summary" >> "$ROWS" <<'PY'
import json, sys
path, case, lever, base, measured, summary = sys.argv[1:]
recorded = json.load(open(summary))["metric"]["train_au_mean_percentage"] if summary else float("nan")
name, _, k = lever.partition("=")
for p in json.load(open(path)):
    if p["lever"] == name and (not k or abs(p["factor"] - float(k)) < 1e-9):
        proj = p["projected_au_percentage"]
        print(case, lever, base, f"{recorded:.1f}", f"{p['au_percentage']:.1f}",
              "-" if proj is None else f"{proj:.1f}",
              "-" if p["low"] is None else f"{p['low']:.1f}..{p['high']:.1f}", measured, sep="\t")
        break
PY
}

# project CASE LEVERS...: storprof whatif on the case's base recording.
project() {
    local case=$1
    shift
    local args=()
    for l in "$@"; do args+=(--lever "$l"); done
    "$STORPROF" whatif "$WORK/$case-base" --json "${args[@]}" > "$WORK/$case.whatif.json"
}

for case in $CASES; do
    echo "== case $case" >&2
    case $case in
    storage)
        throttle $((16 << 20)); evict
        record storage 2 0.25 raw --odirect
        project storage storage=2 read-threads=2 computation=2 computation=0.5
        base=$(measure storage-base 2 0.25 raw --odirect)
        throttle $((32 << 20))
        check storage storage=2 "$base" "$(measure storage-s2 2 0.25 raw --odirect)"
        throttle $((16 << 20))
        check storage read-threads=2 "$base" "$(measure storage-rt4 4 0.25 raw --odirect)"
        check storage computation=2 "$base" "$(measure storage-c2 2 0.5 raw --odirect)"
        check storage computation=0.5 "$base" "$(measure storage-c05 2 0.125 raw --odirect)"
        ;;
    reader)
        throttle 0
        record reader 1 0.04 dlio-legacy
        project reader read-threads=2 computation=2 computation=0.5
        base=$(measure reader-base 1 0.04 dlio-legacy)
        check reader read-threads=2 "$base" "$(measure reader-rt2 2 0.04 dlio-legacy)"
        check reader computation=2 "$base" "$(measure reader-c2 1 0.08 dlio-legacy)"
        check reader computation=0.5 "$base" "$(measure reader-c05 1 0.02 dlio-legacy)"
        ;;
    compute)
        throttle 0
        record compute 2 0.2 raw
        project compute computation=0.25 read-threads=2
        base=$(measure compute-base 2 0.2 raw)
        check compute computation=0.25 "$base" "$(measure compute-c025 2 0.05 raw)"
        check compute read-threads=2 "$base" "$(measure compute-rt4 4 0.2 raw)"
        ;;
    dlio-reader | dlio-compute)
        R=(++workload.train.total_training_steps=200)
        c=$([ "$case" = dlio-reader ] && echo 0.004 || echo 0.02)
        c2=$(python3 -c "print($c * 2)")
        c4=$(python3 -c "print($c * 4)")
        dlio_record "$case" reader330 "${R[@]}" "++workload.train.computation_time=$c"
        project "$case" read-threads=2 read-threads=0.5 computation=2 computation=4
        base=$(dlio_measure "$case-base" reader330 "${R[@]}" "++workload.train.computation_time=$c")
        check "$case" read-threads=2 "$base" "$(dlio_measure "$case-rt4" reader330 "${R[@]}" \
            "++workload.train.computation_time=$c" ++workload.reader.read_threads=4)"
        check "$case" read-threads=0.5 "$base" "$(dlio_measure "$case-rt1" reader330 "${R[@]}" \
            "++workload.train.computation_time=$c" ++workload.reader.read_threads=1)"
        check "$case" computation=2 "$base" "$(dlio_measure "$case-c2" reader330 "${R[@]}" \
            "++workload.train.computation_time=$c2")"
        check "$case" computation=4 "$base" "$(dlio_measure "$case-c4" reader330 "${R[@]}" \
            "++workload.train.computation_time=$c4")"
        ;;
    dlio-jpeg)
        dlio_record dlio-jpeg jpeg
        project dlio-jpeg read-threads=2 read-threads=0.5 computation=0.5 computation=2
        base=$(dlio_measure dj-base jpeg)
        check dlio-jpeg read-threads=2 "$base" "$(dlio_measure dj-rt4 jpeg ++workload.reader.read_threads=4)"
        check dlio-jpeg read-threads=0.5 "$base" "$(dlio_measure dj-rt1 jpeg ++workload.reader.read_threads=1)"
        check dlio-jpeg computation=0.5 "$base" "$(dlio_measure dj-c05 jpeg ++workload.train.computation_time=0.023775)"
        check dlio-jpeg computation=2 "$base" "$(dlio_measure dj-c2 jpeg ++workload.train.computation_time=0.0951)"
        ;;
    s3)
        # 10 ms of compute keeps this small loopback server the limit; the
        # seed's 0.05 s and 1.35 s are computation ×5 and ×135.
        s3_cmd s3-recorded 1 1 0.01
        "$STORPROF" record --live off -o "$WORK/s3-base" -- "${CMD[@]}" > "$WORK/s3-base.log" 2>&1 ||
            { echo "recording s3 failed:" >&2; tail -5 "$WORK/s3-base.log" >&2; exit 1; }
        project s3 read-threads=2 accelerators=2 computation=5 computation=135
        base=$(s3_measure s3-base 1 1 0.01)
        check s3 read-threads=2 "$base" "$(s3_measure s3-rt2 1 2 0.01)"
        check s3 accelerators=2 "$base" "$(s3_measure s3-np2 2 1 0.01)"
        check s3 computation=5 "$base" "$(s3_measure s3-c5 1 1 0.05)"
        check s3 computation=135 "$base" "$(s3_measure s3-c135 1 1 1.35)"
        ;;
    *) echo "unknown case $case (storage, reader, compute, dlio-reader, dlio-compute, dlio-jpeg, s3)" >&2; exit 2 ;;
    esac
done

python3 - "$ROWS" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
# AU plain: the median of plain runs; recorded: what the run under storprof
# reported itself; model: the AU the model fitted to that recording. The
# error is projected − measured; Δ error compares the changes (projected −
# model against measured − plain), apart from the observer's cost.
print(f"{'case':<12} {'lever':<16} {'plain':>6} {'recorded':>8} {'model':>6} {'projected':>9} "
      f"{'range':>12} {'measured':>8} {'error':>6} {'Δ error':>7}  sign")
within = tried = wrong = 0
for case, lever, base, recorded, model, proj, rng, meas in rows:
    base, meas, model = float(base), float(meas), float(model)
    if proj == "-":
        print(f"{case:<12} {lever:<16} {base:>6.1f} {recorded:>8} {model:>6.1f} {'—':>9} {'—':>12} "
              f"{meas:>8.1f} {'—':>6} {'—':>7}  not projected")
        continue
    proj = float(proj)
    err = proj - meas
    tried += 1
    within += abs(err) <= 5.0
    gain_p, gain_m = proj - model, meas - base
    # A wrong sign: a gain projected where the re-run loses (or the other
    # way), or a change of 10 points on one side and none on the other.
    bad = ((gain_p > 5 and gain_m < -5) or (gain_p < -5 and gain_m > 5)
           or (abs(gain_p) < 2 and abs(gain_m) >= 10) or (abs(gain_m) < 2 and abs(gain_p) >= 10))
    wrong += bad
    print(f"{case:<12} {lever:<16} {base:>6.1f} {recorded:>8} {model:>6.1f} {proj:>9.1f} {rng:>12} "
          f"{meas:>8.1f} {err:>+6.1f} {gain_p - gain_m:>+7.1f}  {'WRONG' if bad else 'ok'}")
share = within / tried if tried else 0.0
print(f"within 5 points: {within}/{tried} ({100 * share:.0f}%, goal 90%); wrong signs: {wrong} (goal 0)")
sys.exit(0 if tried and share >= 0.9 and wrong == 0 else 1)
PY
