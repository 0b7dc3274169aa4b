//! Helpers shared by the benchmark's integration tests: golden files live in
//! tests/data/ and are checked by the workspace's one golden helper
//! (`testkit::golden`: `STORPROF_BLESS=1` re-blesses, `CI=true` fails on a
//! missing file).
#![allow(dead_code)]
use std::path::PathBuf;

/// The benchmark's golden files directory.
pub fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// Compares `actual` with the golden file `tests/data/<name>`.
#[track_caller]
pub fn golden(name: &str, actual: &str) {
    testkit::assert_golden(data_dir().join(name), actual);
}
