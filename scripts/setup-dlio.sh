#!/usr/bin/env bash
# The real DLIO benchmark (PyPI dlio-benchmark 2.0.0, argonne-lcf) with a real
# PyTorch, in a venv of its own, for the root tests that diagnose it
# (tests/dlio.rs). Idempotent: does nothing when the venv already imports it.
#
#   bash scripts/setup-dlio.sh      → ${STORPROF_DLIO_VENV:-target/dlio-venv}
#
# Sizes: about 7 GiB on disk and about 1.5 minutes here. PyPI's Linux torch
# wheel depends on the CUDA runtime packages (it refuses to import without
# them, GPU or not), and DLIO imports TensorFlow unconditionally (its
# profiler factory), so tensorflow-cpu comes too. dlio-benchmark itself is
# installed without its declared dependencies: it declares nvidia-dali (CUDA
# 11 only) and torchvision/torchaudio, which its PyTorch NPZ/JPEG path does
# not import; the ones it does import are listed below, pinned. pyarrow is
# for scripts/crosscheck.py (the Parquet checks), which runs in this venv.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${STORPROF_DLIO_VENV:-${CARGO_TARGET_DIR:-target}/dlio-venv}
log() { [ "${STORPROF_SETUP_QUIET:-0}" = 1 ] || echo "[setup-dlio] $*" >&2; }

if [ -x "$VENV/bin/dlio_benchmark" ] &&
    "$VENV/bin/python" -c 'import torch.utils.data, dlio_benchmark.main, pyarrow' >/dev/null 2>&1; then
    log "$VENV ready"
    exit 0
fi
log "creating $VENV (torch, tensorflow-cpu, dlio-benchmark; about 7 GiB)"
python3 -m venv "$VENV"
pip=("$VENV/bin/pip" install -q --disable-pip-version-check)
"${pip[@]}" 'torch==2.15.0' 'tensorflow-cpu==2.21.0'
"${pip[@]}" 'numpy==2.4.6' 'PyYAML==6.0.4' 'h5py==3.14.0' 'mpi4py==4.1.2' 'omegaconf==2.3.1' \
    'hydra-core==1.3.8' 'pandas==3.1.1' 'psutil==7.2.2' 'pydftracer==1.0.2' 'Pillow==13.0.0' \
    'pyarrow==26.0.1'
"${pip[@]}" --no-deps 'dlio-benchmark==2.0.0'
"$VENV/bin/python" -c 'import torch.utils.data, dlio_benchmark.main' >/dev/null 2>&1
log "done: torch $("$VENV/bin/python" -c "import torch; print(torch.__version__)" 2>/dev/null)"
