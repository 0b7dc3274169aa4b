//! Fixture coverage: tests that declare one `#[test]` per fixture directory
//! (so one mismatch does not hide the others) check with
//! [`assert_fixture_dirs_declared`] that the declared list and the fixture
//! directories on disk are the same set, so a new fixture cannot go untested.
//!
//! Data flow: the directory's subdirectory names are read, sorted, and
//! compared with the declared names plus those another test covers.

use std::{collections::BTreeSet, fs, path::Path};

/// The names of the subdirectories of `dir`, sorted.
pub fn fixture_dirs(dir: &Path) -> std::io::Result<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            names.insert(entry.file_name().to_string_lossy().into_owned());
        }
    }
    Ok(names)
}

/// Panics unless the subdirectories of `dir` are exactly `declared` plus
/// `covered_elsewhere` (directories another test target checks).
#[track_caller]
pub fn assert_fixture_dirs_declared(dir: &Path, declared: &[&str], covered_elsewhere: &[&str]) {
    let on_disk = fixture_dirs(dir)
        .unwrap_or_else(|e| panic!("cannot list fixture directory {}: {e}", dir.display()));
    if let Some(problem) = coverage_problem(&on_disk, declared, covered_elsewhere) {
        panic!("fixtures of {}: {problem}", dir.display());
    }
}

/// What is wrong with the coverage of `on_disk`, if anything.
fn coverage_problem(
    on_disk: &BTreeSet<String>,
    declared: &[&str],
    covered_elsewhere: &[&str],
) -> Option<String> {
    let listed: BTreeSet<&str> = declared.iter().chain(covered_elsewhere).copied().collect();
    let untested: Vec<&str> = on_disk
        .iter()
        .map(String::as_str)
        .filter(|n| !listed.contains(n))
        .collect();
    let absent: Vec<&str> = listed
        .iter()
        .copied()
        .filter(|n| !on_disk.contains(*n))
        .collect();
    let duplicated = declared.len() != declared.iter().collect::<BTreeSet<_>>().len();
    if untested.is_empty() && absent.is_empty() && !duplicated {
        return None;
    }
    let mut problems = Vec::new();
    if !untested.is_empty() {
        problems.push(format!(
            "no test declared for {untested:?} (add them to the test macro's list)"
        ));
    }
    if !absent.is_empty() {
        problems.push(format!("declared but not on disk: {absent:?}"));
    }
    if duplicated {
        problems.push("a fixture is declared twice".to_string());
    }
    Some(problems.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(names: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for n in names {
            fs::create_dir(dir.path().join(n)).unwrap();
        }
        // Plain files (scripts, READMEs) are not fixtures.
        fs::write(dir.path().join("make_fixtures.py"), "").unwrap();
        dir
    }

    #[test]
    fn exact_coverage_passes() {
        let dir = dir_with(&["a", "b", "shared"]);
        assert_fixture_dirs_declared(dir.path(), &["b", "a"], &["shared"]);
    }

    #[test]
    fn an_undeclared_or_absent_fixture_is_named() {
        let dir = dir_with(&["a", "new-one"]);
        let on_disk = fixture_dirs(dir.path()).unwrap();
        let problem = coverage_problem(&on_disk, &["a", "gone"], &[]).unwrap();
        assert!(
            problem.contains("no test declared for [\"new-one\"]"),
            "{problem}"
        );
        assert!(problem.contains("not on disk: [\"gone\"]"), "{problem}");
        let problem = coverage_problem(&on_disk, &["a", "a", "new-one"], &[]).unwrap();
        assert!(problem.contains("declared twice"), "{problem}");
    }
}
