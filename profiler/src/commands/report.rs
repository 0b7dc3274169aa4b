//! `storprof report DIR|BUNDLE [-o DIR] [--json]`: analyse a session (a
//! directory, or a bundle read in memory), write verdict.json, report.md,
//! report.html, the flamegraphs and the timeline into the session directory
//! or `-o DIR`, and print the verdict (or verdict.json with `--json`).
use std::path::{Path, PathBuf};

use super::load_thresholds;
use crate::cli::{ReportArgs, exit};
use storprof_report::{
    self, ReportOptions,
    report::{render_terminal, verdict_json},
};
use storprof_session::safe_path;

/// Whether `path` names a bundle rather than a session directory.
fn is_bundle(path: &Path) -> bool {
    path.is_file()
}

/// Runs `storprof report`.
pub fn run(args: &ReportArgs) -> anyhow::Result<i32> {
    let options = ReportOptions {
        thresholds: load_thresholds(args.thresholds.thresholds.as_deref())?,
        ..ReportOptions::default()
    };
    let bundle = is_bundle(&args.dir);
    let session = match super::load_session_arg(&args.dir)? {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    // Where the files go: -o, else the session directory; a bundle or
    // --json alone writes none.
    let out: Option<PathBuf> = match &args.output {
        Some(o) => {
            if let Err(e) = safe_path::check_output_dir(o, true, safe_path::invoking_uid()) {
                eprintln!("storprof: error: -o: {e}");
                return Ok(exit::USAGE);
            }
            std::fs::create_dir_all(o)?;
            Some(o.clone())
        }
        None if bundle || args.json => None,
        None => Some(args.dir.clone()),
    };
    let outcome = storprof_report::report_session(session, out.as_deref(), &options)?;
    if args.json {
        let json = verdict_json(&outcome.analysis)?;
        print!("{json}");
        if !json.ends_with('\n') {
            println!();
        }
    } else {
        print!("{}", render_terminal(&outcome.analysis));
    }
    if !outcome.session.is_complete() {
        eprintln!(
            "storprof: partial session: missing {}",
            outcome.session.missing.join(", ")
        );
    }
    match &out {
        Some(dir) => eprintln!(
            "storprof: report written to {} and {}",
            dir.join(storprof_report::files::REPORT).display(),
            dir.join(storprof_report::files::HTML).display()
        ),
        None if bundle && !args.json => {
            eprintln!(
                "storprof: no files written (a bundle is read in place); -o DIR writes the report"
            )
        }
        None => {}
    }
    Ok(exit::OK)
}
