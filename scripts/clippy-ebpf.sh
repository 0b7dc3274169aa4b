#!/usr/bin/env bash
# clippy for the probe crate, which builds only for bpfel-unknown-none with nightly
# (the workspace lints apply: ebpf/probes/Cargo.toml opts in). Uses
# $CARGO_TARGET_DIR/ebpf-clippy when set, else target/ebpf-clippy.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in
    /*) ;;
    *) target_dir="$root/$target_dir" ;;
esac
cd "$root/ebpf/probes"
cargo +nightly clippy --release --target bpfel-unknown-none -Z build-std=core \
    --target-dir "$target_dir/ebpf-clippy" -- -D warnings
