#!/usr/bin/env bash
# Idempotent set-up for a fresh machine of this kind (Debian bookworm, root,
# rustup with stable + nightly). Installs only from Debian's packages,
# crates.io and rustup, and mounts tracefs when it is missing.
#
#   scripts/setup.sh            everything the build and the tests need
#   STORPROF_SETUP_QUIET=1      less chatter
set -euo pipefail

log() { [ "${STORPROF_SETUP_QUIET:-0}" = 1 ] || echo "[setup] $*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "[setup] need root for: $*" >&2; return 1; fi
}

# --- Debian packages ---------------------------------------------------------
# llvm-22-dev/libpolly-22-dev: bpf-linker links against LLVM 22 (nightly's LLVM).
# bpftrace: the peer in the overhead comparison. gcc/libc: static test helpers.
# python3-venv: pyarrow/numpy cross-checks in a venv.
# openmpi-bin/libopenmpi-dev/libclang-dev: the `mpi` feature (rsmpi's bindgen) and the mpirun tests.
# iproute2: `ip netns`/bridge test hosts of tests/multihost.rs.
# tmux: the live view's terminal test (tests/live.rs).
# libc6-dbg: libc's symbols, in a separate debug file found by build-id (as
# perf and gdb find it); without it libc's internal functions have no name.
# golang-go: `go tool pprof`, the real reader of `storprof export --format
# pprof`, which tests/export.rs runs on the exported profiles.
# fio: the peer of `storprof checkpoint` in scripts/bench-checkpoint.sh.
# chromium: headless, opens report.html in tests/html.rs (clicks, screenshot).
APT_PACKAGES=(llvm-22-dev libpolly-22-dev libzstd-dev zlib1g-dev bpftrace bpftool
              build-essential libc6-dev libc6-dbg pkg-config python3-venv
              openmpi-bin libopenmpi-dev libclang-dev iproute2 tmux golang-go fio
              chromium)
missing=()
for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --- Rust toolchains -----------------------------------------------------------
if ! rustup toolchain list | grep -q '^nightly'; then
    log "rustup toolchain install nightly"
    rustup toolchain install nightly --profile minimal
fi
if ! rustup component list --toolchain nightly --installed | grep -q '^rust-src'; then
    log "rustup component add rust-src (nightly)"
    rustup component add rust-src --toolchain nightly
fi
for c in rustfmt clippy; do
    rustup component list --installed | grep -q "^$c" || rustup component add "$c"
done
if ! rustup component list --toolchain nightly --installed | grep -q '^clippy'; then
    rustup component add clippy --toolchain nightly
fi

# The probes are built and tested with this nightly (LLVM 22, as bpf-linker
# is). The machines here carry one preinstalled nightly and cannot fetch a
# dated one, so the pin is a check: another nightly is named, not refused.
PROBE_NIGHTLY=2026-05-19
have_nightly=$(rustc +nightly -V 2>/dev/null | grep -oE '20[0-9]{2}-[0-9]{2}-[0-9]{2}' || true)
if [ "$have_nightly" != "$PROBE_NIGHTLY" ]; then
    echo "[setup] warning: the probes are tested with nightly $PROBE_NIGHTLY; this machine's nightly is ${have_nightly:-unknown}" >&2
fi

# --- bpf-linker (pinned; its default feature wants LLVM 23) --------------------
BPF_LINKER_VERSION=0.13.0
if ! command -v bpf-linker >/dev/null || ! bpf-linker --version 2>/dev/null | grep -q "$BPF_LINKER_VERSION"; then
    log "cargo install bpf-linker $BPF_LINKER_VERSION (LLVM 22), about a minute"
    # LLVM_PREFIX: bpf-linker's build script otherwise follows whatever llvm-config is on PATH.
    LLVM_PREFIX=/usr/lib/llvm-22 LLVM_SYS_221_PREFIX=/usr/lib/llvm-22 cargo install bpf-linker --locked \
        --version "$BPF_LINKER_VERSION" --no-default-features --features llvm-22
fi

# --- tracefs -------------------------------------------------------------------
if [ "$(id -u)" = 0 ] && [ ! -e /sys/kernel/tracing/events ]; then
    log "mount -t tracefs nodev /sys/kernel/tracing"
    mount -t tracefs nodev /sys/kernel/tracing || log "could not mount tracefs (storprof doctor will say more)"
fi

log "done"
