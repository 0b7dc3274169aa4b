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
mod tests {
    use super::*;

    /// `load_from` with the files' texts in memory gives the session
    /// `load` reads from the directory, and the same errors.
    #[test]
    fn load_from_memory_matches_load_from_disk() {
        let dir = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/sessions/real-storage-bound"
        ));
        let from_disk = load(dir).unwrap();
        let from_memory =
            load_from(dir, |name| Ok(std::fs::read_to_string(dir.join(name)).ok())).unwrap();
        assert_eq!(from_memory.info, from_disk.info);
        assert_eq!(from_memory.threads, from_disk.threads);
        assert_eq!(from_memory.offcpu, from_disk.offcpu);
        assert_eq!(from_memory.offcpu_threads, from_disk.offcpu_threads);
        assert_eq!(from_memory.missing, from_disk.missing);
        assert_eq!(from_memory.warnings, from_disk.warnings);
        assert!(!from_memory.offcpu.stacks.is_empty());

        let nothing = load_from(Path::new("mem"), |_| Ok(None)).unwrap_err();
        assert!(
            matches!(nothing, LoadError::NotASession { .. }),
            "{nothing}"
        );
        let bad = load_from(Path::new("mem"), |name| {
            Ok((name == files::THREADS).then(|| "[1,".to_string()))
        })
        .unwrap_err();
        assert!(bad.to_string().starts_with("mem/threads.json"), "{bad}");
    }

    /// Found by the `session_dir` fuzz target: folded counts whose sum
    /// passes u64 (loading the session panicked in `is_empty`). The line that
    /// passes it is skipped with a warning; what remains loads.
    #[test]
    fn folded_counts_past_u64_are_skipped() {
        let text = format!("a;b {}\nc 2\nc;d 1\n", u64::MAX - 1);
        let (stacks, warnings) = FoldedStacks::parse(&text, "oncpu.folded");
        assert_eq!(stacks.total(), u64::MAX);
        assert_eq!(stacks.stacks.len(), 2, "{stacks:?}");
        assert_eq!(
            warnings,
            [
                "oncpu.folded: skipped 1 line(s) whose count takes the file's total past 2^64 (line 2)"
            ]
        );
        // Built directly (not parsed), the total saturates.
        let built = FoldedStacks {
            stacks: vec![("a".into(), u64::MAX), ("b".into(), 1)],
        };
        assert_eq!(built.total(), u64::MAX);
        assert!(!built.is_empty());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(files::ONCPU_FOLDED), &text).unwrap();
        std::fs::write(dir.path().join(files::OFFCPU_FOLDED), &text).unwrap();
        let session = load(dir.path()).unwrap();
        assert_eq!(session.oncpu.total(), u64::MAX);
    }

    /// frames.json gives the session its frame table; a session without
    /// one (recorded before it) loads with an empty table; a malformed one
    /// is an error naming it.
    #[test]
    fn frame_modules_are_loaded_from_frames_json() {
        let d = tempfile::tempdir().unwrap();
        let info = serde_json::to_string(&SessionInfo::default()).unwrap();
        std::fs::write(d.path().join(files::SESSION), info).unwrap();
        assert!(load(d.path()).unwrap().frame_modules.modules.is_empty());
        std::fs::write(
            d.path().join(files::FRAMES),
            r#"{"modules": {"list_dealloc": "python3.12"}}"#,
        )
        .unwrap();
        let s = load(d.path()).unwrap();
        assert_eq!(s.frame_modules.modules["list_dealloc"], "python3.12");
        std::fs::write(d.path().join(files::FRAMES), "{").unwrap();
        let e = load(d.path()).unwrap_err().to_string();
        assert!(e.contains(files::FRAMES), "{e}");
    }

    /// A session recorded before the vmstat series and the per-direction
    /// device latency (the real-storage-bound fixture) loads with none of
    /// them; a session with them reads them back.
    #[test]
    fn sessions_without_vmstat_or_split_latency_still_load() {
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/sessions/real-storage-bound"
        );
        let old = load(Path::new(fixture)).unwrap();
        let ts = old.timeseries.as_ref().unwrap();
        assert!(ts.vmstat.is_none());
        assert!(ts.bucket_count() > 0);
        let dev = &old.io.devices[0];
        assert!(!dev.latency_log2_ns.is_empty());
        assert!(dev.read_latency_log2_ns.is_empty() && dev.write_latency_log2_ns.is_empty());

        let d = tempfile::tempdir().unwrap();
        let info = serde_json::to_string(&SessionInfo::default()).unwrap();
        std::fs::write(d.path().join(files::SESSION), info).unwrap();
        std::fs::write(
            d.path().join(files::TIMESERIES),
            r#"{"bucket_ns": 1000000000, "start_unix_ns": 0, "threads": [], "devices": [],
                "vmstat": {"dirty_bytes": [4096, 8192], "writeback_bytes": [0, 4096],
                           "dirtied_bytes": [4096, 4096], "written_bytes": [0, 0]}}"#,
        )
        .unwrap();
        std::fs::write(
            d.path().join(files::IO),
            r#"{"devices": [{"name": "loop0", "dev": "7:0", "read_bytes": 0, "write_bytes": 8192,
                "read_requests": 0, "write_requests": 2, "latency_log2_ns": [0, 2],
                "write_latency_log2_ns": [0, 2], "busy_ns": 10}],
                "page_cache": {"misses_pages": 0, "page_size": 4096}}"#,
        )
        .unwrap();
        let new = load(d.path()).unwrap();
        let vm = new.timeseries.unwrap().vmstat.unwrap();
        assert_eq!(vm.dirty_bytes, vec![4096, 8192]);
        assert_eq!(new.io.devices[0].write_latency_log2_ns, vec![0, 2]);
        assert!(new.io.devices[0].read_latency_log2_ns.is_empty());
    }

    #[test]
    fn folded_parse_skips_malformed_lines() {
        let (f, w) = FoldedStacks::parse("a;b 3\n\nbad line\na;c x\na;b;c 2\n", "t.folded");
        assert_eq!(
            f.stacks,
            vec![("a;b".to_string(), 3), ("a;b;c".to_string(), 2)]
        );
        assert_eq!(f.total(), 5);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("2 malformed"), "{w:?}");
        assert!(w[0].contains("line 3, 4"), "{w:?}");
    }

    #[test]
    fn frames_with_spaces_keep_their_names() {
        let (f, w) = FoldedStacks::parse("python;Foo::bar(int, long) 7\n", "t");
        assert!(w.is_empty());
        assert_eq!(f.stacks[0], ("python;Foo::bar(int, long)".to_string(), 7));
    }

    #[test]
    fn bench_summary_fields() {
        let v = serde_json::json!({
            "metric": {"train_au_mean_percentage": 37.2, "train_io_mean_MB_per_second": 0.83,
                        "train_au_meet_expectation": "fail",
                        "train_throughput_mean_samples_per_second": 13.2},
            "computation_time": {"mean": 1.35},
            "measured": {"read_bytes": 1000, "read_MiB_per_second": 27.3, "read_amplification": 33.0}
        });
        let b = BenchSummary::from_value(v);
        assert_eq!(b.au_mean_percentage, Some(37.2));
        assert_eq!(b.computation_time_s, Some(1.35));
        assert_eq!(b.au_meet_expectation.as_deref(), Some("fail"));
        let m = b.measured.unwrap();
        assert_eq!(m.read_mib_per_second, Some(27.3));
        assert_eq!(m.read_bytes, Some(1000));
    }

    /// The bench's own golden summary.json parses whole: a type mismatch in
    /// any `measured` field would silently drop the measured figures.
    #[test]
    fn bench_golden_summary_measured_parses() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../benchmark/tests/data/summary.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let b = BenchSummary::from_value(serde_json::from_str(&text).unwrap());
        let m = b
            .measured
            .expect("measured{} of the bench's summary.json parses");
        assert!(m.read_mib_per_second.is_some());
        assert!(m.record_size_bytes_real.is_some_and(|r| r > 0.0));
        assert!(b.au_mean_percentage.is_some());
    }

    /// io.json as sessions recorded before devices' stacking and buffered
    /// writes' page-cache pages were recorded: it loads, with neither.
    #[test]
    fn an_io_json_without_stacking_or_write_pages_loads() {
        let old = r#"{"devices":[{"name":"vda","dev":"254:0","read_bytes":4096,
            "write_bytes":562270208,"read_requests":1,"write_requests":300,
            "latency_log2_ns":[0,1],"busy_ns":1000,"utilization":0.01,
            "traced_read_bytes":0,"by_pid":{"7":4096}}],
            "page_cache":{"misses_pages":137272,"page_size":4096}}"#;
        let session = load_from(Path::new("mem"), |name| {
            Ok((name == files::IO).then(|| old.to_string()))
        })
        .unwrap();
        let dev = &session.io.devices[0];
        assert_eq!((dev.name.as_str(), dev.write_bytes), ("vda", 562270208));
        assert!(dev.sits_on.is_empty());
        assert_eq!(session.io.page_cache.misses_pages, 137272);
        assert_eq!(session.io.page_cache.write_pages, 0);
        // And writes back without the new fields.
        let json = serde_json::to_string(&session.io).unwrap();
        assert!(
            !json.contains("sits_on") && !json.contains("write_pages"),
            "{json}"
        );
    }
}
