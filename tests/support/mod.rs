//! Helpers shared by the root integration tests (each test file includes
//! this module with `mod support;`).
#![allow(dead_code)]
use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
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

/// A Python with pyarrow: $STORPROF_PYTHON, the crosscheck venvs, python3.
pub fn python_with_pyarrow() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("STORPROF_PYTHON") {
        candidates.push(p.into());
    }
    if let Some(v) = std::env::var_os("STORPROF_VENV") {
        candidates.push(Path::new(&v).join("bin/python"));
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(Path::new(&t).join("venv/bin/python"));
    }
    candidates.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("target/venv/bin/python"),
    );
    candidates.push("python3".into());
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import pyarrow.parquet"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}
