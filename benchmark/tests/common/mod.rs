//! Helpers shared by the benchmark's integration tests.
#![allow(clippy::unwrap_used, dead_code)]
use std::path::PathBuf;

/// Compare `actual` with the golden file `tests/data/<name>`; with
/// `STORPROF_BLESS=1`, or when the file is missing, write it instead.
/// `test` names the test target for the re-bless hint.
pub fn golden(test: &str, name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let bless = std::env::var_os("STORPROF_BLESS").is_some_and(|v| v == "1");
    if bless || !path.exists() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        eprintln!("blessed {}", path.display());
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap();
    assert!(
        expected == actual,
        "{} differs from the output.\n--- expected\n{expected}\n--- actual\n{actual}\n\
         If the change is intended, re-bless with STORPROF_BLESS=1 cargo test -p storprof-bench --test {test}",
        path.display()
    );
}
