//! `storprof export`: a loaded session turned into profile formats other
//! tools open, one module per format, each a pure function from the
//! session to the file's bytes.
//!
//! ```text
//! Session ──► thread_roles (waitgraph: consumer / loader / helper / idle)
//!    │
//!    ├─ {on,off}cpu-threads.folded (else {on,off}cpu.folded) ──► stacks()
//!    │     ──► pprof::render      ─► gzip'd perftools.profiles.Profile
//!    ├─ {on,off}cpu.folded ──────► speedscope::render ─► speedscope JSON
//!    └─ timeseries.json + waits.json ──► trace::render ─► Chrome trace JSON
//! ```
//!
//! Frames are the recorder's folded frames (see [`storprof_analysis::frames`]):
//! a plain function name, `_[k]` for kernel frames, `[libc.so.6]` for an
//! address without a symbol, and `func (file.py:LINE)` for Python frames,
//! which [`parse_frame`] splits into a function, a file and a line. Off-CPU
//! folded counts are microseconds; every export gives them in nanoseconds.
pub mod pprof;
mod protobuf;
pub mod speedscope;
pub mod trace;

use std::collections::BTreeMap;

use storprof_analysis::{Thresholds, waitgraph};
use storprof_session::load::{FoldedStacks, Session, thread_ids};

/// The formats `storprof export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// gzip'd profile.proto: on-CPU samples and off-CPU ns per thread and
    /// stack (go tool pprof, Grafana Pyroscope, Parca).
    Pprof,
    /// speedscope's JSON file format: on-CPU and off-CPU profiles (speedscope.app).
    Speedscope,
    /// Chrome trace event JSON: per-second thread states, on-CPU counters,
    /// wake-ups (ui.perfetto.dev, chrome://tracing).
    Trace,
}

impl Format {
    /// What the file holds, for messages.
    pub fn label(self) -> &'static str {
        match self {
            Self::Pprof => "pprof profile",
            Self::Speedscope => "speedscope profile",
            Self::Trace => "trace",
        }
    }

    /// The default file name inside the session directory.
    pub fn default_file_name(self) -> &'static str {
        match self {
            Self::Pprof => "profile.pb.gz",
            Self::Speedscope => "profile.speedscope.json",
            Self::Trace => "trace.json",
        }
    }
}

/// Why a session could not be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A count or time from the session does not fit the format's integers.
    #[error("{what} is too large for the {format} format ({value})")]
    TooLarge {
        format: &'static str,
        what: String,
        value: u64,
    },
    #[error("cannot encode the {format} file: {source}")]
    Encode {
        format: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// The session in `format`.
pub fn render(
    session: &Session,
    format: Format,
    roles: &ThreadRoles,
) -> Result<Vec<u8>, ExportError> {
    match format {
        Format::Pprof => pprof::render(session, roles),
        Format::Speedscope => speedscope::render(session),
        Format::Trace => trace::render(session, roles),
    }
}

/// Role of each thread by (pid, tid), in words ("consumer", "loader", ...).
pub type ThreadRoles = BTreeMap<(u32, u32), String>;

/// The threads' roles from the wake-up graph analysis (empty for sessions
/// without `waits.json`).
pub fn thread_roles(session: &Session, thresholds: &Thresholds) -> ThreadRoles {
    waitgraph::analyze(session, thresholds)
        .map(|w| {
            w.roles
                .iter()
                .filter_map(|r| {
                    let role = serde_json::to_value(r.role).ok()?;
                    Some(((r.pid, r.tid), role.as_str()?.to_string()))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One folded frame split into what profile formats keep apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Frame<'a> {
    pub function: &'a str,
    pub file: Option<&'a str>,
    pub line: Option<u64>,
}

/// Splits `func (file:LINE)` (Python frames) into its parts; any other
/// frame is a function name alone. C++ names keep their parentheses: only
/// a trailing ` (…:DIGITS)` is a file and line.
pub fn parse_frame(raw: &str) -> Frame<'_> {
    let whole = Frame {
        function: raw,
        file: None,
        line: None,
    };
    let Some(inner_and_close) = raw.strip_suffix(')') else {
        return whole;
    };
    let Some(open) = inner_and_close.rfind(" (") else {
        return whole;
    };
    let function = &raw[..open];
    let inner = &inner_and_close[open + 2..];
    let Some((file, line)) = inner.rsplit_once(':') else {
        return whole;
    };
    match line.parse::<u64>() {
        Ok(line) if !file.is_empty() && !function.is_empty() => Frame {
            function,
            file: Some(file),
            line: Some(line),
        },
        _ => whole,
    }
}

/// The thread a stack was recorded in: its comm always, pid and tid when
/// the per-thread folded files carry them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StackThread<'a> {
    pub comm: &'a str,
    pub ids: Option<(u32, u32)>,
}

/// One folded line: the thread, its frames outermost first (the comm is
/// not a frame), and its count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack<'a> {
    pub thread: StackThread<'a>,
    pub frames: Vec<&'a str>,
    pub count: u64,
}

/// The stacks of `per_thread` when it has any, else of `whole`: the
/// per-thread file holds the same stacks and counts with the thread's ids.
pub fn stacks<'a>(per_thread: &'a FoldedStacks, whole: &'a FoldedStacks) -> Vec<Stack<'a>> {
    let source = if per_thread.is_empty() {
        whole
    } else {
        per_thread
    };
    source
        .stacks
        .iter()
        .filter(|(_, count)| *count > 0)
        .map(|(line, count)| {
            let mut parts = line.split(';');
            let comm = parts.next().unwrap_or_default();
            let mut frames: Vec<&str> = parts.collect();
            let ids = frames.first().and_then(|f| thread_ids(f));
            if ids.is_some() {
                frames.remove(0);
            }
            Stack {
                thread: StackThread { comm, ids },
                frames,
                count: *count,
            }
        })
        .collect()
}

/// Microseconds of an off-CPU folded count in nanoseconds.
fn micros_to_nanos(micros: u64, format: &'static str) -> Result<u64, ExportError> {
    micros
        .checked_mul(1000)
        .ok_or_else(|| ExportError::TooLarge {
            format,
            what: "an off-CPU time in nanoseconds".to_string(),
            value: micros,
        })
}

/// The exporter's name and version, as the formats record it.
fn exporter() -> String {
    format!("storprof {}", env!("CARGO_PKG_VERSION"))
}

/// The session directory's last component ("" for `/`).
fn session_name(session: &Session) -> String {
    session
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_frames_split_into_function_file_and_line() {
        assert_eq!(
            parse_frame("load_batch.<locals>.<genexpr> (/w/pipeline.py:187)"),
            Frame {
                function: "load_batch.<locals>.<genexpr>",
                file: Some("/w/pipeline.py"),
                line: Some(187)
            }
        );
        assert_eq!(
            parse_frame("_find_and_load (<frozen importlib._bootstrap>:1176)").file,
            Some("<frozen importlib._bootstrap>")
        );
    }

    #[test]
    fn native_kernel_and_cpp_frames_stay_whole() {
        for raw in [
            "burn_cpu",
            "schedule_[k]",
            "[libc.so.6]",
            "[unknown]",
            "parquet::arrow::(anonymous namespace)::LeafReader::LoadBatch(long) [clone .lto_priv.0]",
            "parquet::arrow::ColumnReaderImpl::NextBatch(long, std::shared_ptr<arrow::ChunkedArray>*)",
            "func (libfoo.so)",
            "f (a.py:x)",
            " (a.py:3)",
        ] {
            assert_eq!(
                parse_frame(raw),
                Frame {
                    function: raw,
                    file: None,
                    line: None
                },
                "{raw}"
            );
        }
    }

    #[test]
    fn per_thread_stacks_carry_ids_and_whole_ones_only_the_comm() {
        let per_thread = FoldedStacks {
            stacks: vec![
                ("w;[10/11];main;f".into(), 3),
                ("w;[10/12];g".into(), 0),
                ("w;[x/12];g".into(), 1),
            ],
        };
        let whole = FoldedStacks {
            stacks: vec![("w;main;f".into(), 3)],
        };
        let s = stacks(&per_thread, &whole);
        assert_eq!(s.len(), 2, "zero counts are left out: {s:?}");
        assert_eq!(s[0].thread.ids, Some((10, 11)));
        assert_eq!(s[0].frames, ["main", "f"]);
        // Not ids: an ordinary frame.
        assert_eq!(
            (s[1].thread.ids, s[1].frames.clone()),
            (None, vec!["[x/12]", "g"])
        );
        let none = FoldedStacks::default();
        let s = stacks(&none, &whole);
        assert_eq!((s[0].thread.comm, s[0].thread.ids), ("w", None));
        assert_eq!(s[0].frames, ["main", "f"]);
    }
}
