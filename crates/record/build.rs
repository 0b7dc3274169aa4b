//! Builds the eBPF probes (`ebpf/probes`) for bpfel-unknown-none with nightly
//! and bpf-linker, so that `src/probes` can embed the object.
//!
//! `STORPROF_SKIP_EBPF=1` writes an empty object instead: the user-space code
//! still builds and its pure tests run, but loading probes fails with a clear
//! error. Used by contributors without bpf-linker; CI always builds the probes.
use std::{env, fs, path::PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=STORPROF_SKIP_EBPF");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest_dir =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let probes_dir = manifest_dir.join("../../ebpf/probes");
    if env::var("STORPROF_SKIP_EBPF").is_ok_and(|v| v == "1") {
        fs::write(out_dir.join("storprof-probes"), []).expect("write stub probe object");
        return;
    }
    // aya-build watches the probe crate only; the kernel/user types it
    // shares live in ebpf/common, and a stale object with an old layout of
    // them would load and then disagree with user space.
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("../../ebpf/common").display()
    );
    let package = aya_build::Package {
        name: "storprof-ebpf",
        root_dir: probes_dir.to_str().expect("probe crate path is UTF-8"),
        ..Default::default()
    };
    aya_build::build_ebpf([package], aya_build::Toolchain::default()).expect(
        "building the eBPF probes (needs nightly, rust-src and bpf-linker: run scripts/setup.sh)",
    );
}
