//! Golden files: a test's rendered output compared with a checked-in file.
//!
//! Data flow: [`assert_golden`] reads the process environment once into a
//! [`GoldenEnv`], derives the re-bless command from the running test binary
//! ([`bless_command`]) and calls [`check_golden`], which reads the golden
//! file and either matches, writes it (bless, or a missing file outside CI)
//! or returns a [`GoldenError`] whose message holds a compact diff and the
//! bless command. `check_golden` takes the environment as a parameter so
//! its own tests need not mutate the process environment.
//!
//! Rules:
//! - `STORPROF_BLESS=1`: the golden file is (re)written and the check passes.
//! - `CI=true`: a missing golden file fails (CI must not invent expectations).
//! - Otherwise a missing golden file is created and the test says so on stderr.

use std::{
    fmt::Write as _,
    fs, io,
    path::{Path, PathBuf},
};

/// Lines shown before the first difference, and from each side after it.
const DIFF_CONTEXT_LINES: usize = 3;

/// The part of the environment that decides what a golden check may do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GoldenEnv {
    /// `STORPROF_BLESS=1`: rewrite golden files instead of comparing.
    pub bless: bool,
    /// `CI=true`: a missing golden file is an error, not created.
    pub ci: bool,
}

impl GoldenEnv {
    /// Reads `STORPROF_BLESS` and `CI` from the process environment.
    pub fn from_process() -> Self {
        let is = |name: &str, want: &str| std::env::var_os(name).is_some_and(|v| v == want);
        GoldenEnv {
            bless: is("STORPROF_BLESS", "1"),
            ci: is("CI", "true"),
        }
    }
}

/// What a successful check did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoldenOutcome {
    /// The golden file equals the output.
    Matched,
    /// `STORPROF_BLESS=1`: the golden file was written (only if it differed).
    Blessed,
    /// The golden file was missing and has been created (outside CI).
    Created,
}

/// Why a golden check failed.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    /// Missing under `CI=true`.
    #[error(
        "golden file {} is missing (CI=true: missing golden files are not created)\n\
         create it with `{bless_command}` and commit it",
        path.display()
    )]
    MissingInCi {
        path: PathBuf,
        bless_command: String,
    },
    /// The output differs from the golden file.
    #[error(
        "{} differs from the output at line {line}\n{diff}\
         re-bless if the change is intended: `{bless_command}`",
        path.display()
    )]
    Mismatch {
        path: PathBuf,
        /// First differing line, 1-based.
        line: usize,
        /// The compact diff around that line ([`compact_diff`]).
        diff: String,
        bless_command: String,
    },
    #[error("cannot read golden file {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write golden file {}: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
}

/// Compares `actual` with the golden file at `path` under `env`'s rules;
/// `bless_command` is quoted in error messages.
pub fn check_golden(
    path: &Path,
    actual: &str,
    env: GoldenEnv,
    bless_command: &str,
) -> Result<GoldenOutcome, GoldenError> {
    let expected = match fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(GoldenError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    match expected {
        Some(expected) if expected == actual => Ok(GoldenOutcome::Matched),
        Some(_) if env.bless => write(path, actual).map(|()| GoldenOutcome::Blessed),
        None if env.bless => write(path, actual).map(|()| GoldenOutcome::Blessed),
        None if env.ci => Err(GoldenError::MissingInCi {
            path: path.to_path_buf(),
            bless_command: bless_command.to_string(),
        }),
        None => write(path, actual).map(|()| GoldenOutcome::Created),
        Some(expected) => {
            let (line, diff) = compact_diff(&expected, actual);
            Err(GoldenError::Mismatch {
                path: path.to_path_buf(),
                line,
                diff,
                bless_command: bless_command.to_string(),
            })
        }
    }
}

fn write(path: &Path, actual: &str) -> Result<(), GoldenError> {
    let write_err = |source| GoldenError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(write_err)?;
    }
    fs::write(path, actual).map_err(write_err)
}

/// Compares `actual` with the golden file at `path` (see the module rules),
/// panicking with a compact diff and the bless command on a mismatch.
#[track_caller]
pub fn assert_golden(path: impl AsRef<Path>, actual: &str) {
    let path = path.as_ref();
    match check_golden(path, actual, GoldenEnv::from_process(), &bless_command()) {
        Ok(GoldenOutcome::Matched) => {}
        Ok(GoldenOutcome::Blessed) => eprintln!("blessed {}", path.display()),
        Ok(GoldenOutcome::Created) => eprintln!(
            "created the missing golden file {}: review it and commit it",
            path.display()
        ),
        Err(e) => panic!("{e}"),
    }
}

/// `STORPROF_BLESS=1 cargo test -p PKG --test TARGET` (or `--lib`) for the
/// running test binary: cargo sets `CARGO_PKG_NAME` when it runs tests, and
/// the binary is named `TARGET-HASH`.
pub fn bless_command() -> String {
    let mut command = String::from("STORPROF_BLESS=1 cargo test");
    let Ok(package) = std::env::var("CARGO_PKG_NAME") else {
        return command;
    };
    let _ = write!(command, " -p {package}");
    let target = std::env::current_exe().ok().and_then(|exe| {
        let stem = exe.file_stem()?.to_str()?.to_string();
        Some(
            stem.rsplit_once('-')
                .map_or(stem.clone(), |(t, _)| t.to_string()),
        )
    });
    match target {
        Some(t) if t == package.replace('-', "_") => command.push_str(" --lib"),
        Some(t) => {
            let _ = write!(command, " --test {t}");
        }
        None => {}
    }
    command
}

/// The first differing line (1-based) of `expected` and `actual`, and a few
/// lines around it: common context marked `  `, the golden file's lines `-`,
/// the output's `+`, each with its line number. The whole files are not
/// shown: goldens run to hundreds of lines.
pub fn compact_diff(expected: &str, actual: &str) -> (usize, String) {
    // split('\n') keeps a final empty piece, so a missing last newline differs too.
    let want: Vec<&str> = expected.split('\n').collect();
    let got: Vec<&str> = actual.split('\n').collect();
    let first = want
        .iter()
        .zip(&got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let mut out = format!(
        "  golden {} lines, output {} lines:\n",
        expected.lines().count(),
        actual.lines().count()
    );
    for (i, line) in want
        .iter()
        .enumerate()
        .take(first)
        .skip(first.saturating_sub(DIFF_CONTEXT_LINES))
    {
        let _ = writeln!(out, "    {:>5} | {line}", i + 1);
    }
    for (mark, side) in [('-', &want), ('+', &got)] {
        let shown = side.iter().enumerate().skip(first).take(DIFF_CONTEXT_LINES);
        let mut any = false;
        for (i, line) in shown {
            let _ = writeln!(out, "  {mark} {:>5} | {line}", i + 1);
            any = true;
        }
        if !any {
            let _ = writeln!(out, "  {mark}       | <end of file>");
        }
    }
    (first + 1, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HINT: &str = "STORPROF_BLESS=1 cargo test -p x --test y";
    const PLAIN: GoldenEnv = GoldenEnv {
        bless: false,
        ci: false,
    };
    const CI: GoldenEnv = GoldenEnv {
        bless: false,
        ci: true,
    };
    const BLESS: GoldenEnv = GoldenEnv {
        bless: true,
        ci: true,
    };

    #[test]
    fn equal_output_matches_and_leaves_the_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.txt");
        fs::write(&path, "a\nb\n").unwrap();
        let got = check_golden(&path, "a\nb\n", PLAIN, HINT).unwrap();
        assert_eq!(got, GoldenOutcome::Matched);
    }

    #[test]
    fn bless_rewrites_a_differing_file_and_passes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.txt");
        fs::write(&path, "old\n").unwrap();
        let got = check_golden(&path, "new\n", BLESS, HINT).unwrap();
        assert_eq!(got, GoldenOutcome::Blessed);
        assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
    }

    #[test]
    fn bless_creates_a_missing_file_even_in_ci() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/g.txt");
        let got = check_golden(&path, "new\n", BLESS, HINT).unwrap();
        assert_eq!(got, GoldenOutcome::Blessed);
        assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
    }

    #[test]
    fn missing_file_fails_in_ci_with_the_bless_hint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.txt");
        let err = check_golden(&path, "x\n", CI, HINT).unwrap_err();
        assert!(matches!(err, GoldenError::MissingInCi { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("is missing"), "{msg}");
        assert!(msg.contains(HINT), "{msg}");
        assert!(!path.exists(), "CI must not create golden files");
    }

    #[test]
    fn missing_file_is_created_outside_ci() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/g.txt");
        let got = check_golden(&path, "x\n", PLAIN, HINT).unwrap();
        assert_eq!(got, GoldenOutcome::Created);
        assert_eq!(fs::read_to_string(&path).unwrap(), "x\n");
    }

    #[test]
    fn mismatch_shows_the_first_differing_line_in_context_and_the_hint() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.txt");
        let golden: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        fs::write(&path, &golden).unwrap();
        let output = golden.replace("line 50\n", "line fifty\n");
        for env in [PLAIN, CI] {
            let err = check_golden(&path, &output, env, HINT).unwrap_err();
            let GoldenError::Mismatch { line, diff, .. } = &err else {
                panic!("{err}");
            };
            assert_eq!(*line, 50);
            assert!(diff.contains("       49 | line 49\n"), "{diff}");
            assert!(diff.contains("  -    50 | line 50\n"), "{diff}");
            assert!(diff.contains("  +    50 | line fifty\n"), "{diff}");
            // Compact: far-away lines are not repeated.
            assert!(!diff.contains("line 10\n"), "{diff}");
            assert!(!diff.contains("line 90\n"), "{diff}");
            let msg = err.to_string();
            assert!(msg.contains("differs from the output at line 50"), "{msg}");
            assert!(msg.contains(HINT), "{msg}");
        }
        // A failed check leaves the golden file as it was.
        assert_eq!(fs::read_to_string(&path).unwrap(), golden);
    }

    #[test]
    fn bless_command_names_the_running_test_target() {
        // cargo sets CARGO_PKG_NAME when it runs the tests; this binary is the lib's.
        if std::env::var_os("CARGO_PKG_NAME").is_some() {
            assert_eq!(
                bless_command(),
                "STORPROF_BLESS=1 cargo test -p testkit --lib"
            );
        }
    }

    #[test]
    fn a_missing_final_newline_or_extra_lines_are_differences() {
        let (line, diff) = compact_diff("a\nb\n", "a\nb");
        assert_eq!(line, 3);
        assert!(diff.contains("  +       | <end of file>"), "{diff}");
        let (line, diff) = compact_diff("a\n", "a\nb\n");
        assert_eq!(line, 2);
        assert!(diff.contains("  +     2 | b"), "{diff}");
    }
}
