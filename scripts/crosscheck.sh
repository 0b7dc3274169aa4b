#!/usr/bin/env bash
# Cross-check datagen output with the peers users read it with: pyarrow reads
# our flux Parquet with the flux schema, numpy loads our unet3d NPZ
# (scripts/crosscheck.py does the checks). Installs pyarrow and numpy from PyPI
# into a venv under target/ on first use.
#   STORPROF=path/to/storprof  (default: target/release/storprof, built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
STORPROF=${STORPROF:-${CARGO_TARGET_DIR:-target}/release/storprof}
[ -x "$STORPROF" ] || cargo build --release --bin storprof
VENV=${STORPROF_VENV:-target/venv}
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import pyarrow, numpy' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check 'pyarrow==26.0.1' numpy
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/storprof-crosscheck.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# flux: the real five-column schema, 2 files x 8 rows in 2 row groups.
"$STORPROF" datagen --workload flux --data-dir "$WORK/flux" \
    --param dataset.num_files_train=2 --param dataset.num_samples_per_file=8 \
    --param dataset.parquet.row_group_size=4 > "$WORK/flux.log"
# unet3d: DLIO's NPZ layout with a small record length.
"$STORPROF" datagen --workload unet3d --accelerator-type h100 --data-dir "$WORK/unet3d" \
    --param dataset.num_files_train=3 --param dataset.record_length_bytes=1048576 \
    --param dataset.record_length_bytes_stdev=262144 > "$WORK/unet3d.log"
for d in "$WORK"/flux/*/train "$WORK"/unet3d/*/train; do
    "$VENV/bin/python" scripts/crosscheck.py "$d"
done
