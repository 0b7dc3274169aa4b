//! `storprof report DIR`: analyse a session, write verdict.json, report.md,
//! flamegraphs and timeline into it, print the verdict.
use super::load_thresholds;
use crate::{
    cli::{ReportArgs, exit},
    output::{self, ReportOptions, report::render_terminal},
    session::load::LoadError,
};

/// Runs `storprof report`.
pub fn run(args: &ReportArgs) -> anyhow::Result<i32> {
    let options = ReportOptions {
        thresholds: load_thresholds(args.thresholds.thresholds.as_deref())?,
        ..ReportOptions::default()
    };
    match output::write_report(&args.dir, &options) {
        Ok(outcome) => {
            print!("{}", render_terminal(&outcome.analysis));
            if !outcome.session.is_complete() {
                eprintln!(
                    "storprof: partial session: missing {}",
                    outcome.session.missing.join(", ")
                );
            }
            eprintln!(
                "storprof: report written to {} and {}",
                args.dir.join(output::files::REPORT).display(),
                args.dir.join(output::files::HTML).display()
            );
            Ok(exit::OK)
        }
        Err(output::OutputError::Load(
            e @ (LoadError::MissingDir(_) | LoadError::NotADir(_) | LoadError::NotASession { .. }),
        )) => {
            eprintln!("storprof: error: {e}");
            Ok(exit::USAGE)
        }
        Err(e) => Err(e.into()),
    }
}
