#!/usr/bin/env bash
# Cross-check datagen output with the readers users have, and run the real
# DLIO benchmark over storprof's datasets:
#   - pyarrow reads our flux and dlrm Parquet (and the mlcommons fork's raw
#     row-group ranges fall inside it; dlrm's dtypes are the YAML's and its
#     `read: true` columns read alone), numpy loads our unet3d NPZ, Pillow decodes our
#     retinanet JPEGs, TensorFlow reads our resnet50/cosmoflow TFRecords with
#     its CRC checks (scripts/crosscheck.py);
#   - DLIO (PyPI dlio-benchmark 2.0.0, scripts/setup-dlio.sh) trains one
#     epoch over our unet3d NPZ (PyTorch), retinanet JPEG in subfolders
#     (PyTorch, Pillow decode) and resnet50 TFRecord (TensorFlow) datasets
#     with generate_data=False: it lists, shards and reads them unchanged.
# DLIO 2.0.0 has no Parquet reader; the fork's raw Parquet range logic is
# replayed by crosscheck.py instead.
#   STORPROF=path/to/storprof  (default: target/release/storprof, built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
STORPROF=${STORPROF:-${CARGO_TARGET_DIR:-target}/release/storprof}
[ -x "$STORPROF" ] || cargo build --release --bin storprof
# target/venv (pyarrow, numpy) is also the Python the scenario tests use.
PLAIN_VENV=${STORPROF_VENV:-${CARGO_TARGET_DIR:-target}/venv}
if [ ! -x "$PLAIN_VENV/bin/python" ] || ! "$PLAIN_VENV/bin/python" -c 'import pyarrow, numpy' 2>/dev/null; then
    python3 -m venv "$PLAIN_VENV"
    "$PLAIN_VENV/bin/pip" install -q --disable-pip-version-check 'pyarrow==26.0.1' numpy
fi
STORPROF_SETUP_QUIET=${STORPROF_SETUP_QUIET:-1} bash scripts/setup-dlio.sh
VENV=${STORPROF_DLIO_VENV:-${CARGO_TARGET_DIR:-target}/dlio-venv}
VENV=$(cd "$VENV" && pwd)
PY="$VENV/bin/python"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/storprof-crosscheck.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export TF_CPP_MIN_LOG_LEVEL=3 TF_ENABLE_ONEDNN_OPTS=0

gen() { # gen NAME ARGS...: storprof datagen into $WORK/NAME, its record in $RECORD (or $WORK)
    local name=$1
    shift
    "$STORPROF" datagen --data-dir "$WORK/$name" "$@" \
        --results-dir "${RECORD:-$WORK/datagen-records/$name}" > "$WORK/$name.log"
}
# flux: the real five-column schema, 2 files x 8 rows in 2 row groups.
gen flux --workload flux --param dataset.num_files_train=2 --param dataset.num_samples_per_file=8 \
    --param dataset.parquet.row_group_size=4
# unet3d: DLIO's NPZ layout with a small record length.
gen unet3d --workload unet3d --accelerator-type h100 \
    --param dataset.num_files_train=4 --param dataset.record_length_bytes=1048576 \
    --param dataset.record_length_bytes_stdev=262144
# retinanet: the real 322,957-byte JPEGs, 48 files in 4 subfolders.
RECORD="$WORK/results/training/retinanet/datagen/$(date +%Y%m%d_%H%M%S)" \
    gen retinanet --workload retinanet --param dataset.num_files_train=48 \
    --param dataset.num_subfolders_train=4
# resnet50: 2 files of 16 Examples; cosmoflow: 3 single-record files.
gen resnet50 --workload resnet50 --accelerator-type h100 \
    --param dataset.num_files_train=2 --param dataset.num_samples_per_file=16
gen cosmoflow --workload cosmoflow --accelerator-type h100 --param dataset.num_files_train=3
# dlrm: the 200 mixed-type columns, 2 files of 2 row groups.
gen dlrm --workload dlrm --param dataset.num_files_train=2 --param dataset.num_samples_per_file=12288

for m in flux/flux unet3d/unet3d retinanet/retinanet resnet50/resnet50 cosmoflow/cosmoflow dlrm/dlrm; do
    "$PY" scripts/crosscheck.py --layout "$WORK/$m"
done
"$PY" scripts/crosscheck.py --columns "$WORK/dlrm/dlrm/train/img_0_of_2.parquet" \
    benchmark/src/config/workloads/dlrm_b200.yaml
for d in "$WORK"/flux/*/train "$WORK"/dlrm/*/train "$WORK"/unet3d/*/train "$WORK"/resnet50/*/train "$WORK"/cosmoflow/*/train; do
    "$PY" scripts/crosscheck.py "$d"
done
"$PY" scripts/crosscheck.py "$WORK/retinanet/retinanet/train" 322957

# storprof's own results read as mlpstorage's report generator reads DLIO's.
"$STORPROF" bench --workload retinanet --data-dir "$WORK/retinanet" --read-threads 2 --epochs 1 \
    --computation-time 0.001 --param dataset.num_files_train=48 --param dataset.num_subfolders_train=4 \
    --param reader.batch_size=4 --results-dir "$WORK/results/training/retinanet/run/$(date +%Y%m%d_%H%M%S)" \
    > "$WORK/bench-retinanet.log"
"$PY" scripts/mlpstorage_results_check.py "$WORK/results" retinanet b200

# The real DLIO over storprof's datasets: one epoch each, no emulated compute.
mkdir -p "$WORK/dlio-configs/workload"
cp benchmark/src/config/workloads/*.yaml "$WORK/dlio-configs/workload/"
dlio() { # dlio NAME WORKLOAD FILES OVERRIDES...
    local name=$1 workload=$2 files=$3
    shift 3
    local run="$WORK/dlio-$name"
    if ! (cd "$WORK" && "$VENV/bin/dlio_benchmark" --config-dir="$WORK/dlio-configs" \
        "workload=$workload" ++workload.workflow.generate_data=False ++workload.workflow.train=True \
        ++workload.workflow.checkpoint=False "++workload.dataset.data_folder=$WORK/$name/$name" \
        "++workload.dataset.num_files_train=$files" ++workload.train.epochs=1 \
        ++workload.train.computation_time=0 ++workload.reader.read_threads=2 \
        "++hydra.run.dir=$run" "$@") > "$WORK/dlio-$name.log" 2>&1; then
        tail -40 "$WORK/dlio-$name.log" >&2
        echo "crosscheck: DLIO failed on storprof's $name dataset" >&2
        exit 1
    fi
    "$PY" - "$run/summary.json" "$name" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
m = s.get("metric", {})
rate = m.get("train_throughput_mean_samples_per_second", 0)
assert rate > 0, f"{sys.argv[2]}: DLIO trained on no samples: {s}"
print(f"ok dlio {sys.argv[2]}: {s['num_files_train']} files, {rate:.1f} samples/s, AU {m.get('train_au_mean_percentage', 0):.1f}%")
EOF
}
dlio unet3d unet3d_h100 4 ++workload.reader.batch_size=1
dlio retinanet retinanet_b200 48 ++workload.reader.batch_size=4 ++workload.dataset.num_subfolders_train=4
dlio resnet50 resnet50_h100 2 ++workload.reader.batch_size=8 ++workload.reader.computation_threads=1
