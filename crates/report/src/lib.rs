//! storprof's outputs (the `storprof-report` crate): the analysis' decision
//! in words and what to try, and every file a session's report is made of.
//! Depends on the session and analysis crates only (plus inferno, tar and
//! serde), never on the recorder or the kernel.
//!
//! ```text
//! storprof_analysis::Analysis ──► diagnosis::diagnose: wording::verdict (sentences)
//!                                  + actions::actions ─► Diagnosis
//! Session + Diagnosis ──► flamegraph::write   ─► flamegraph-{oncpu,offcpu}.svg
//!                    ──► timeline::render    ─► timeline.svg
//!                    ──► report::render_*    ─► report.md, verdict.json
//!                    ──► html::render        ─► report.html (self-contained)
//! Session ───────────► export::render      ─► pprof, speedscope, Chrome trace
//! system::collect ─────► system.json ──► bundle::write ─► DIR.tar.gz
//! bundle::load_bundle ◄── DIR.tar.gz (read in memory)
//! ```
//! [`write_report`] runs the whole `storprof report` step on a directory.
pub mod actions;
pub mod bundle;
pub mod diagnosis;
pub mod export;
pub mod flamegraph;
pub mod html;
pub mod redact;
pub mod report;
pub mod system;
pub mod timeline;
#[cfg(test)]
mod verdict_tests;
pub mod wording;

use diagnosis::Diagnosis;
use std::{
    io,
    path::{Path, PathBuf},
};

use storprof_analysis::Thresholds;
use storprof_session::load::{self, LoadError, Session};
use storprof_session::safe_path;

/// Files `storprof report` writes into the session directory.
pub mod files {
    pub const VERDICT: &str = "verdict.json";
    pub const REPORT: &str = "report.md";
    pub const HTML: &str = "report.html";
    pub const FLAMEGRAPH_ONCPU: &str = "flamegraph-oncpu.svg";
    pub const FLAMEGRAPH_OFFCPU: &str = "flamegraph-offcpu.svg";
    pub const TIMELINE: &str = "timeline.svg";
    pub const SYSTEM: &str = "system.json";
}

/// Errors of the output step.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Bundle(#[from] bundle::BundleError),
}

/// Options of `storprof report`. Defaults: default thresholds, every output,
/// non-deterministic (normal) SVGs, report.html with its default limits.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    pub thresholds: Thresholds,
    /// Stable SVG colours, pretty XML, no JavaScript (golden tests).
    pub deterministic: bool,
    pub flamegraphs: bool,
    pub timeline: bool,
    /// report.html, with these limits (None: not written).
    pub html: Option<html::HtmlOptions>,
}

impl Default for ReportOptions {
    fn default() -> Self {
        Self {
            thresholds: Thresholds::default(),
            deterministic: false,
            flamegraphs: true,
            timeline: true,
            html: Some(html::HtmlOptions::default()),
        }
    }
}

/// What `write_report` produced.
#[derive(Debug)]
pub struct ReportOutcome {
    pub session: Session,
    pub analysis: Diagnosis,
    pub written: Vec<PathBuf>,
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), OutputError> {
    safe_path::write_file(path, bytes).map_err(|source| OutputError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    storprof_session::safe_path::give_to_invoking_user(path);
    Ok(())
}

/// Loads the session in `dir`, analyses it and writes verdict.json,
/// report.md, report.html, the flamegraphs and the timeline into it.
pub fn write_report(dir: &Path, options: &ReportOptions) -> Result<ReportOutcome, OutputError> {
    let session = load::load(dir)?;
    report_session(session, Some(dir), options)
}

/// Analyses `session` and writes its report files into `dir` (None: no
/// files, the analysis only).
pub fn report_session(
    session: Session,
    dir: Option<&Path>,
    options: &ReportOptions,
) -> Result<ReportOutcome, OutputError> {
    let analysis = diagnosis::diagnose(&session, &options.thresholds);
    let Some(dir) = dir else {
        return Ok(ReportOutcome {
            session,
            analysis,
            written: Vec::new(),
        });
    };
    let mut written = Vec::new();
    let mut put = |name: &str, bytes: Vec<u8>| -> Result<(), OutputError> {
        let path = dir.join(name);
        write_file(&path, &bytes)?;
        written.push(path);
        Ok(())
    };
    let json = report::verdict_json(&analysis).map_err(|e| OutputError::Write {
        path: dir.join(files::VERDICT),
        source: io::Error::other(e),
    })?;
    put(files::VERDICT, json.into_bytes())?;
    put(
        files::REPORT,
        report::render_markdown(&session, &analysis).into_bytes(),
    )?;
    if let Some(html_options) = &options.html {
        put(
            files::HTML,
            html::render(&session, &analysis, html_options).into_bytes(),
        )?;
    }
    if options.flamegraphs {
        for (kind, name, stacks) in [
            (
                flamegraph::Kind::OnCpu,
                files::FLAMEGRAPH_ONCPU,
                &session.oncpu,
            ),
            (
                flamegraph::Kind::OffCpu,
                files::FLAMEGRAPH_OFFCPU,
                &session.offcpu,
            ),
        ] {
            let mut o = flamegraph::FlamegraphOptions::new(kind);
            o.deterministic = options.deterministic;
            o.subtitle = Some(analysis.verdict.headline.clone());
            let mut svg = Vec::new();
            flamegraph::write(stacks, &o, &mut svg).map_err(|source| OutputError::Write {
                path: dir.join(name),
                source,
            })?;
            put(name, svg)?;
        }
    }
    if options.timeline {
        let ts = session.timeseries.clone().unwrap_or_default();
        put(files::TIMELINE, timeline::render(&ts).into_bytes())?;
    }
    Ok(ReportOutcome {
        session,
        analysis,
        written,
    })
}

/// Options of `storprof bundle`. Defaults: `<DIR>.tar.gz`, default thresholds
/// for the report written first when the directory has none.
#[derive(Clone, Debug, Default)]
pub struct BundleSessionOptions {
    pub output: Option<PathBuf>,
    pub report: ReportOptions,
    /// Replace an existing file at `output` (`--force`).
    pub force: bool,
}

/// Writes the evidence bundle of the session in `dir`: runs the report first
/// when verdict.json or report.md is missing, collects system.json, and adds
/// the bench's results directory when the command was `storprof bench`.
pub fn bundle_session(
    dir: &Path,
    options: &BundleSessionOptions,
) -> Result<(PathBuf, Vec<String>), OutputError> {
    let session = if !dir.join(files::VERDICT).exists() || !dir.join(files::REPORT).exists() {
        write_report(dir, &options.report)?.session
    } else {
        load::load(dir)?
    };
    let command = &session.info.command;
    let cwd = session.info.cwd.as_deref();
    let system = system::collect(command, cwd);
    let bench_results_dir = storprof_analysis::features::is_storprof_bench(command)
        .then(|| storprof_analysis::features::arg_value(command, "--results-dir"))
        .flatten()
        .map(|p| match cwd {
            Some(c) if !Path::new(p).is_absolute() => Path::new(c).join(p),
            _ => PathBuf::from(p),
        });
    let mut b = bundle::BundleOptions::new(dir);
    b.output = options.output.clone();
    b.force = options.force;
    b.system_json = serde_json::to_value(&system).ok();
    b.bench_results_dir = bench_results_dir;
    let (path, names) = bundle::write(&b)?;
    storprof_session::safe_path::give_to_invoking_user(&path);
    Ok((path, names))
}
