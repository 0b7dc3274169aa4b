//! Loading a session directory back into memory for the analysis.
//!
//! ```text
//! DIR/*.json, *.folded ──► load() ──► Session { info, threads, io, timeseries,
//!                                               oncpu, offcpu, bench, missing, warnings }
//! ```
//!
//! A recording killed mid-way leaves some files behind: every file except
//! `session.json`'s presence of *something* is optional here, and what is
//! absent is listed in [`Session::missing`] so reports can say so. Errors are
//! kept for what makes a session unreadable: a missing directory, no session
//! file at all, malformed JSON, or a session written by a newer storprof.
use std::{
    fs, io,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::model::{
    FrameModules, IoStats, SESSION_FORMAT_VERSION, SessionInfo, ThreadStats, TimeSeries, WaitGraph,
    files,
};

/// Why a session directory could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("session directory {0} does not exist")]
    MissingDir(PathBuf),
    #[error("{0} is not a directory")]
    NotADir(PathBuf),
    #[error(
        "{dir} holds no storprof session (none of session.json, threads.json, io.json, \
         oncpu.folded, offcpu.folded)"
    )]
    NotASession { dir: PathBuf },
    #[error(
        "{path}: session format version {found} is newer than this storprof understands \
         ({supported}); upgrade storprof to read it"
    )]
    NewerFormat {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not valid JSON for this file: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// `[PID/TID]`, the second frame of the per-thread folded files
/// (`comm;[pid/tid];frames...`); None for any other frame.
pub fn thread_ids(frame: &str) -> Option<(u32, u32)> {
    let (pid, tid) = frame
        .strip_prefix('[')?
        .strip_suffix(']')?
        .split_once('/')?;
    Some((pid.parse().ok()?, tid.parse().ok()?))
}

/// Folded stacks of one file: `(stack, count)` in file order; frames are
/// separated by `;`, the first frame is the thread's comm.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldedStacks {
    pub stacks: Vec<(String, u64)>,
}

impl FoldedStacks {
    /// Sum of all counts, saturating: the counts come from a file, and a
    /// sum past u64 panicked (debug) or wrapped to a small total (release).
    pub fn total(&self) -> u64 {
        self.stacks
            .iter()
            .fold(0u64, |sum, (_, n)| sum.saturating_add(*n))
    }

    pub fn is_empty(&self) -> bool {
        self.stacks.iter().all(|(_, n)| *n == 0)
    }

    /// Lines in folded format (`stack count`), for inferno.
    pub fn lines(&self) -> Vec<String> {
        self.stacks
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect()
    }

    /// Parses folded text. Malformed lines are skipped and reported in the
    /// returned list of warnings (line numbers are 1-based), and so are
    /// lines whose count would take the file's total past u64: the analysis
    /// adds up counts of one file, and no recording reaches that.
    pub fn parse(text: &str, name: &str) -> (Self, Vec<String>) {
        let mut stacks = Vec::new();
        let mut bad = Vec::new();
        let mut too_large = Vec::new();
        let mut total = 0u64;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if line.is_empty() {
                continue;
            }
            let parsed = line
                .rsplit_once(' ')
                .and_then(|(stack, count)| Some((stack.trim_end(), count.parse::<u64>().ok()?)));
            match parsed {
                Some((stack, count)) if !stack.is_empty() => match total.checked_add(count) {
                    Some(sum) => {
                        total = sum;
                        stacks.push((stack.to_string(), count));
                    }
                    None => too_large.push(i + 1),
                },
                _ => bad.push(i + 1),
            }
        }
        let mut warnings = Vec::new();
        if !too_large.is_empty() {
            let shown: Vec<String> = too_large.iter().take(5).map(ToString::to_string).collect();
            warnings.push(format!(
                "{name}: skipped {} line(s) whose count takes the file's total past 2^64 (line {}{})",
                too_large.len(),
                shown.join(", "),
                if too_large.len() > 5 { ", ..." } else { "" }
            ));
        }
        if !bad.is_empty() {
            let shown: Vec<String> = bad.iter().take(5).map(ToString::to_string).collect();
            warnings.push(format!(
                "{name}: skipped {} malformed line(s) (line {}{})",
                bad.len(),
                shown.join(", "),
                if bad.len() > 5 { ", ..." } else { "" }
            ));
        }
        (Self { stacks }, warnings)
    }
}

/// The `measured` object storprof bench adds to its summary.json: what the
/// reader really read, next to DLIO's derived I/O figure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BenchMeasured {
    #[serde(default)]
    pub read_bytes: Option<u64>,
    #[serde(default, rename = "read_MiB_per_second")]
    pub read_mib_per_second: Option<f64>,
    #[serde(default)]
    pub requests: Option<u64>,
    #[serde(default)]
    pub read_amplification: Option<f64>,
    #[serde(default)]
    /// Written by the bench as a JSON float (2164832.0 for flux).
    pub record_size_bytes_real: Option<f64>,
}

/// The parts of `bench-summary.json` (DLIO summary.json keys plus
/// `measured`) that the analysis uses; the whole file is kept in `raw`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BenchSummary {
    /// `metric.train_au_mean_percentage` (0..100).
    pub au_mean_percentage: Option<f64>,
    /// `metric.train_au_meet_expectation` ("success" / "fail").
    pub au_meet_expectation: Option<String>,
    /// `metric.train_throughput_mean_samples_per_second`.
    pub throughput_samples_per_second: Option<f64>,
    /// `metric.train_io_mean_MB_per_second`: DLIO's *derived* I/O (MiB/s).
    pub derived_io_mib_per_second: Option<f64>,
    /// Simulated computation time per step (s), when the summary carries it
    /// (`computation_time`, top level, in `metric` or in `config.reader`/`train`).
    pub computation_time_s: Option<f64>,
    /// Expected AU (`au` in the config, 0..1), when present.
    pub au_expected: Option<f64>,
    pub measured: Option<BenchMeasured>,
    /// The whole file.
    pub raw: serde_json::Value,
}

impl BenchSummary {
    /// Extracts the fields from a parsed summary.json; missing keys are `None`.
    pub fn from_value(raw: serde_json::Value) -> Self {
        let metric = raw.get("metric");
        let num = |v: Option<&serde_json::Value>| v.and_then(serde_json::Value::as_f64);
        let metric_num = |key: &str| num(metric.and_then(|m| m.get(key)));
        let computation_time_s = [
            raw.get("computation_time"),
            metric.and_then(|m| m.get("computation_time")),
            raw.pointer("/config/train/computation_time"),
            raw.pointer("/workload/train/computation_time"),
            raw.pointer("/train/computation_time"),
        ]
        .into_iter()
        .find_map(|v| {
            // DLIO accepts a float or {mean, stdev}.
            v.and_then(|v| {
                v.as_f64()
                    .or_else(|| v.get("mean").and_then(|m| m.as_f64()))
            })
        });
        let au_expected = [
            raw.get("au"),
            raw.pointer("/config/metric/au"),
            raw.pointer("/workload/metric/au"),
        ]
        .into_iter()
        .find_map(num);
        let measured = raw
            .get("measured")
            .and_then(|m| serde_json::from_value::<BenchMeasured>(m.clone()).ok());
        Self {
            au_mean_percentage: metric_num("train_au_mean_percentage"),
            au_meet_expectation: metric
                .and_then(|m| m.get("train_au_meet_expectation"))
                .and_then(|v| v.as_str())
                .map(str::to_string),
            throughput_samples_per_second: metric_num("train_throughput_mean_samples_per_second"),
            derived_io_mib_per_second: metric_num("train_io_mean_MB_per_second"),
            computation_time_s,
            au_expected,
            measured,
            raw,
        }
    }
}

/// A session directory loaded into memory. Absent files leave defaults and
/// are named in `missing`.
#[derive(Clone, Debug, Default)]
pub struct Session {
    pub dir: PathBuf,
    pub info: SessionInfo,
    pub threads: Vec<ThreadStats>,
    pub io: IoStats,
    pub timeseries: Option<TimeSeries>,
    pub oncpu: FoldedStacks,
    pub offcpu: FoldedStacks,
    pub bench: Option<BenchSummary>,
    /// The wake-up graph (format 2 on; None for older sessions or when the
    /// wake-up probe did not run).
    pub waits: Option<WaitGraph>,
    /// Per-thread folded stacks (`comm;[pid/tid];...`; format 2 on).
    pub oncpu_threads: FoldedStacks,
    pub offcpu_threads: FoldedStacks,
    /// The file each named user frame came from (frames.json; empty for
    /// sessions before it).
    pub frame_modules: FrameModules,
    /// Required files that were absent (a recording killed mid-way).
    pub missing: Vec<&'static str>,
    /// Non-fatal problems: empty folded files, skipped lines, derived values.
    pub warnings: Vec<String>,
}

impl Session {
    /// True when every required file was present.
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty()
    }

    /// Recording duration in seconds: from session.json, else from the
    /// time series length, else 0.
    pub fn duration_s(&self) -> f64 {
        if self.info.duration_s > 0.0 {
            return self.info.duration_s;
        }
        if self.info.end_unix_ns > self.info.start_unix_ns {
            return (self.info.end_unix_ns - self.info.start_unix_ns) as f64 / 1e9;
        }
        if let Some(ts) = &self.timeseries {
            let buckets = ts.bucket_count();
            return buckets as f64 * ts.bucket_ns as f64 / 1e9;
        }
        0.0
    }
}

fn read_optional(path: &Path) -> Result<Option<String>, LoadError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(LoadError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn parse_json<T: serde::de::DeserializeOwned>(path: &Path, text: &str) -> Result<T, LoadError> {
    serde_json::from_str(text).map_err(|source| LoadError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Loads the session in `dir`.
///
/// Errors: the directory is missing, holds none of the session files, a JSON
/// file is malformed, or `format_version` is newer than
/// [`SESSION_FORMAT_VERSION`]. Absent files make a partial session instead.
pub fn load(dir: &Path) -> Result<Session, LoadError> {
    // `exists()` is false for a path it cannot stat too: say why.
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(LoadError::MissingDir(dir.to_path_buf()));
        }
        Err(source) => {
            return Err(LoadError::Io {
                path: dir.to_path_buf(),
                source,
            });
        }
        Ok(m) if !m.is_dir() => return Err(LoadError::NotADir(dir.to_path_buf())),
        Ok(_) => {}
    }
    load_from(dir, |name| read_optional(&dir.join(name)))
}

/// Parses a session from its files' texts as [`load`] does from a
/// directory: `read(name)` gives the text of the session file `name` (one
/// of [`files`]), `None` when it is absent. `dir` is recorded in the
/// session and names the files in errors; nothing is read from it. The
/// fuzz targets (fuzz/) feed sessions from memory through it.
pub fn load_from(
    dir: &Path,
    mut read: impl FnMut(&'static str) -> Result<Option<String>, LoadError>,
) -> Result<Session, LoadError> {
    let mut session = Session {
        dir: dir.to_path_buf(),
        ..Session::default()
    };
    let mut found_any = false;

    let path = dir.join(files::SESSION);
    if let Some(text) = read(files::SESSION)? {
        found_any = true;
        // Check the version before the full parse, so a newer layout gives
        // the version error rather than a confusing field error.
        let value: serde_json::Value = parse_json(&path, &text)?;
        let found = value
            .get("format_version")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        if found > u64::from(SESSION_FORMAT_VERSION) {
            return Err(LoadError::NewerFormat {
                path,
                found: u32::try_from(found).unwrap_or(u32::MAX),
                supported: SESSION_FORMAT_VERSION,
            });
        }
        session.info = parse_json(&path, &text)?;
    } else {
        session.missing.push(files::SESSION);
    }

    let path = dir.join(files::THREADS);
    match read(files::THREADS)? {
        Some(text) => {
            found_any = true;
            session.threads = parse_json(&path, &text)?;
        }
        None => session.missing.push(files::THREADS),
    }

    let path = dir.join(files::IO);
    match read(files::IO)? {
        Some(text) => {
            found_any = true;
            session.io = parse_json(&path, &text)?;
        }
        None => session.missing.push(files::IO),
    }

    let path = dir.join(files::TIMESERIES);
    match read(files::TIMESERIES)? {
        Some(text) => {
            found_any = true;
            session.timeseries = Some(parse_json(&path, &text)?);
        }
        None => session.missing.push(files::TIMESERIES),
    }

    for (name, slot) in [
        (files::ONCPU_FOLDED, &mut session.oncpu),
        (files::OFFCPU_FOLDED, &mut session.offcpu),
    ] {
        match read(name)? {
            Some(text) => {
                found_any = true;
                let (stacks, warnings) = FoldedStacks::parse(&text, name);
                session.warnings.extend(warnings);
                if stacks.is_empty() {
                    session
                        .warnings
                        .push(format!("{name} is empty: no stacks were recorded"));
                }
                *slot = stacks;
            }
            None => session.missing.push(name),
        }
    }

    // Format 2 files: optional, a session of format 1 has none of them.
    let path = dir.join(files::WAITS);
    if let Some(text) = read(files::WAITS)? {
        session.waits = Some(parse_json(&path, &text)?);
    }
    let path = dir.join(files::FRAMES);
    if let Some(text) = read(files::FRAMES)? {
        session.frame_modules = parse_json(&path, &text)?;
    }
    for (name, slot) in [
        (files::ONCPU_THREADS_FOLDED, &mut session.oncpu_threads),
        (files::OFFCPU_THREADS_FOLDED, &mut session.offcpu_threads),
    ] {
        if let Some(text) = read(name)? {
            let (stacks, warnings) = FoldedStacks::parse(&text, name);
            session.warnings.extend(warnings);
            *slot = stacks;
        }
    }

    if let Some(text) = read(files::BENCH_SUMMARY)? {
        // Optional file: a broken copy should not hide the rest of the analysis.
        match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(value) => session.bench = Some(BenchSummary::from_value(value)),
            Err(e) => session.warnings.push(format!(
                "{} ignored: not valid JSON ({e})",
                files::BENCH_SUMMARY
            )),
        }
    }

    if !found_any {
        return Err(LoadError::NotASession {
            dir: dir.to_path_buf(),
        });
    }
    if session.info.duration_s <= 0.0 {
        let derived = session.duration_s();
        if derived > 0.0 {
            session.warnings.push(format!(
                "recording duration unknown from session.json; {derived:.1} s derived from the time series"
            ));
        }
    }
    Ok(session)
}

#[cfg(test)]
mod tests;
