#!/usr/bin/env bash
# clippy for the probe crate, which builds only for bpfel-unknown-none with nightly.
set -euo pipefail
cd "$(dirname "$0")/../ebpf/probes"
cargo +nightly clippy --release --target bpfel-unknown-none -Z build-std=core \
    --target-dir ../../target/ebpf-clippy -- -D warnings
