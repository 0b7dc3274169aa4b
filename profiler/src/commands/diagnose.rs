//! `storprof diagnose [record options] -- CMD ARGS...`: record, then report,
//! then bundle, in one run; prints the verdict at the end and exits with the
//! command's status.
use std::path::PathBuf;

use super::{ThresholdArgs, load_thresholds};
use crate::{
    cli::exit,
    output::{self, BundleSessionOptions, ReportOptions, report::render_terminal},
    record::{self, RecordError, args::RecordArgs},
};

#[derive(clap::Args, Debug, Clone)]
pub struct DiagnoseArgs {
    #[command(flatten)]
    pub record: RecordArgs,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// Bundle file (default: SESSION_DIR.tar.gz).
    #[arg(long, value_name = "FILE.tar.gz")]
    pub bundle: Option<PathBuf>,
}

/// Runs `storprof diagnose`.
pub fn run(args: &DiagnoseArgs) -> anyhow::Result<i32> {
    if args.record.command.is_empty() && args.record.pids.is_empty() {
        // The embedded default job (dlio-legacy vs raw bench) is not wired yet.
        eprintln!("storprof: error: give the command to diagnose after `--` (or --pid PID)");
        return Ok(exit::USAGE);
    }
    let thresholds = load_thresholds(args.thresholds.thresholds.as_deref())?;
    let outcome = match record::record(&args.record.to_options()) {
        Ok(o) => o,
        Err(
            err @ (RecordError::NotRoot
            | RecordError::NothingToRecord
            | RecordError::UnknownCommand(_)
            | RecordError::NoSuchPid(_)),
        ) => {
            eprintln!("storprof: error: {err}");
            return Ok(exit::USAGE);
        }
        Err(err) => return Err(err.into()),
    };
    let report = ReportOptions {
        thresholds,
        ..ReportOptions::default()
    };
    let reported = output::write_report(&outcome.dir, &report)?;
    let b = BundleSessionOptions {
        output: args.bundle.clone(),
        report,
    };
    let (bundle, _) = output::bundle_session(&outcome.dir, &b)?;
    eprintln!("storprof: session {}", outcome.dir.display());
    eprintln!(
        "storprof: report  {}",
        outcome.dir.join(output::files::REPORT).display()
    );
    eprintln!("storprof: bundle  {}", bundle.display());
    print!("{}", render_terminal(&reported.analysis));
    Ok(outcome.exit_code)
}
