//! Helpers shared by the root integration tests (each test file includes
//! this module with `mod support;`).
#![allow(dead_code)]
use std::{
    ffi::OsStr,
    path::Path,
    process::{Command, Output},
};

/// The storprof binary cargo built for these tests.
pub const STORPROF: &str = env!("CARGO_BIN_EXE_storprof");

/// Root tests load eBPF programs; without root they skip with a reason.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `storprof record OPTIONS --output DIR -- COMMAND`, which must succeed.
pub fn record_with<C, S>(dir: &Path, options: &[&str], command: C) -> Output
where
    C: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::new(STORPROF)
        .arg("record")
        .args(options)
        .arg("--output")
        .arg(dir)
        .arg("--")
        .args(command)
        .output()
        .expect("run storprof record");
    assert!(
        out.status.success(),
        "storprof record failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Sum of the counts of the folded-stack lines (`stack COUNT`) that `keep` accepts.
pub fn folded_count(folded: &str, keep: impl Fn(&str) -> bool) -> u64 {
    folded
        .lines()
        .filter(|l| keep(l))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}
