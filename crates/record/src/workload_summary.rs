//! The traced workload's own DLIO-format `summary.json`, copied into the
//! session as `bench-summary.json`, so its AU stands beside the kernel's.
//!
//! ```text
//! command argv ──► candidate dirs: hydra.run.dir=DIR (DLIO's output),
//!                  mlpstorage --results-dir DIR, CWD/hydra_log (DLIO's default)
//!              ──► summary.json files under them, written during the
//!                  recording, with DLIO's metric.train_au_mean_percentage
//!              ──► the newest, copied (storprof bench writes its own copy)
//! ```
use std::{
    fs,
    path::{Path, PathBuf},
    time::SystemTime,
};

use storprof_session::{load::BenchSummary, model::files};

/// How deep and how wide the search under a candidate directory goes:
/// mlpstorage nests `training/<model>/run/<timestamp>/` under its results
/// directory; a huge tree is not walked whole.
const MAX_DEPTH: usize = 6;
const MAX_ENTRIES: usize = 20_000;

/// Directories where the workload `command` (run from `cwd`) writes its
/// DLIO summary.json: a `hydra.run.dir=` override (`+`/`++` prefixed or
/// not), mlpstorage's `--results-dir`/`-rd`, and DLIO's default `hydra_log`
/// when the command runs `dlio_benchmark`. A shell command line (`sh -c
/// "..."`) is read word by word too.
pub fn candidate_dirs(command: &[String], cwd: &Path) -> Vec<PathBuf> {
    let mut words: Vec<&str> = Vec::new();
    for arg in command {
        words.push(arg);
        if arg.contains(char::is_whitespace) {
            words.extend(arg.split_whitespace());
        }
    }
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    let runs = |name: &str| words.iter().any(|a| base(a).starts_with(name));
    let mut dirs = Vec::new();
    for (i, &arg) in words.iter().enumerate() {
        if let Some(dir) = arg.trim_start_matches('+').strip_prefix("hydra.run.dir=") {
            dirs.push(cwd.join(dir));
        }
        if runs("mlpstorage") {
            if let Some(dir) = arg.strip_prefix("--results-dir=") {
                dirs.push(cwd.join(dir));
            } else if (arg == "--results-dir" || arg == "-rd")
                && let Some(dir) = words.get(i + 1)
            {
                dirs.push(cwd.join(dir));
            }
        }
    }
    if runs("dlio_benchmark") {
        dirs.push(cwd.join("hydra_log"));
    }
    let mut seen = std::collections::BTreeSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// The newest `summary.json` under `dirs` modified at or after `since`
/// that carries DLIO's `metric.train_au_mean_percentage`.
pub fn find(dirs: &[PathBuf], since: SystemTime) -> Option<PathBuf> {
    let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
    let mut visited = 0usize;
    for dir in dirs {
        let mut stack = vec![(dir.clone(), 0usize)];
        while visited <= MAX_ENTRIES
            && let Some((d, depth)) = stack.pop()
        {
            let Ok(entries) = fs::read_dir(&d) else {
                continue;
            };
            for entry in entries.flatten() {
                visited += 1;
                if visited > MAX_ENTRIES {
                    break;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() && depth < MAX_DEPTH {
                    stack.push((path, depth + 1));
                } else if kind.is_file()
                    && entry.file_name() == "summary.json"
                    && let Ok(modified) = entry.metadata().and_then(|m| m.modified())
                    && modified >= since
                {
                    found.push((modified, path));
                }
            }
        }
    }
    found.sort();
    found
        .into_iter()
        .rev()
        .map(|(_, p)| p)
        .find(|p| has_dlio_au(p))
}

fn has_dlio_au(path: &Path) -> bool {
    fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| BenchSummary::from_value(v).au_mean_percentage.is_some())
}

/// Copies the workload's summary.json into session `dir` unless it already
/// holds one (storprof bench writes its own). Returns the file copied.
pub fn copy_into_session(
    dir: &Path,
    command: &[String],
    cwd: &Path,
    since: SystemTime,
) -> Option<PathBuf> {
    let dest = dir.join(files::BENCH_SUMMARY);
    if dest.exists() {
        return None;
    }
    let source = find(&candidate_dirs(command, cwd), since)?;
    match fs::copy(&source, &dest) {
        Ok(_) => Some(source),
        Err(err) => {
            log::warn!("cannot copy {}: {err}", source.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn dirs_come_from_hydra_overrides_mlpstorage_and_dlio_defaults() {
        let cwd = Path::new("/work");
        assert_eq!(
            candidate_dirs(
                &argv(&[
                    "/venv/bin/dlio_benchmark",
                    "workload=unet3d_a100",
                    "++hydra.run.dir=out/run1"
                ]),
                cwd
            ),
            vec![
                PathBuf::from("/work/out/run1"),
                PathBuf::from("/work/hydra_log")
            ]
        );
        assert_eq!(
            candidate_dirs(
                &argv(&["mlpstorage", "training", "run", "-rd", "/results"]),
                cwd
            ),
            vec![PathBuf::from("/results")]
        );
        assert_eq!(
            candidate_dirs(
                &argv(&["mlpstorage", "training", "run", "--results-dir=res"]),
                cwd
            ),
            vec![PathBuf::from("/work/res")]
        );
        // Inside a shell command line.
        assert_eq!(
            candidate_dirs(
                &argv(&[
                    "sh",
                    "-c",
                    "echo $$ > /cg/procs && exec /v/bin/dlio_benchmark ++hydra.run.dir=/r/x"
                ]),
                cwd
            ),
            vec![PathBuf::from("/r/x"), PathBuf::from("/work/hydra_log")]
        );
        // Another program's -rd is not a results directory.
        assert!(candidate_dirs(&argv(&["python3", "train.py", "-rd", "x"]), cwd).is_empty());
    }

    #[test]
    fn the_newest_summary_written_during_the_recording_is_copied() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let dlio = r#"{"metric": {"train_au_mean_percentage": 61.5}}"#;
        let old = root.join("results/training/unet3d/run/old");
        let new = root.join("results/training/unet3d/run/new");
        let other = root.join("results/other");
        for d in [&old, &new, &other] {
            fs::create_dir_all(d).unwrap();
        }
        fs::write(old.join("summary.json"), dlio).unwrap();
        let since = SystemTime::now();
        // mtimes have a coarse clock on some file systems.
        std::thread::sleep(Duration::from_millis(20));
        fs::write(new.join("summary.json"), dlio).unwrap();
        fs::write(other.join("summary.json"), r#"{"not": "dlio"}"#).unwrap();
        let old_time = since - Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(old.join("summary.json"))
            .unwrap()
            .set_modified(old_time)
            .unwrap();
        let dirs = [root.join("results")];
        assert_eq!(find(&dirs, since), Some(new.join("summary.json")));

        let session = root.join("session");
        fs::create_dir_all(&session).unwrap();
        let command = argv(&["mlpstorage", "training", "run", "--results-dir", "results"]);
        assert_eq!(
            copy_into_session(&session, &command, root, since),
            Some(new.join("summary.json"))
        );
        assert_eq!(
            fs::read_to_string(session.join(files::BENCH_SUMMARY)).unwrap(),
            dlio
        );
        // A session that already has one (storprof bench's) keeps it.
        assert_eq!(copy_into_session(&session, &command, root, since), None);
        // Nothing written during the recording: nothing copied.
        let later = SystemTime::now() + Duration::from_secs(3600);
        assert_eq!(find(&dirs, later), None);
    }
}
