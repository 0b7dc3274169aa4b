//! `storprof record`: [`crate::cli::RecordArgs`] → [`RecordOptions`](storprof_record::RecordOptions),
//! then [`storprof_record::record`]; exits with the traced command's status.
use crate::cli::{RecordArgs, exit};
use storprof_analysis::Thresholds;
use storprof_record::{RecordError, record};

/// Runs `storprof record`; returns the process exit code.
pub fn run(args: &RecordArgs) -> anyhow::Result<i32> {
    let options = match args.to_options(&Thresholds::default()) {
        Ok(o) => o,
        Err(message) => {
            eprintln!("storprof: error: {message}");
            return Ok(exit::USAGE);
        }
    };
    match record(&options) {
        Ok(outcome) => {
            eprintln!("storprof: session written to {}", outcome.dir.display());
            Ok(outcome.exit_code)
        }
        Err(
            err @ (RecordError::NotRoot
            | RecordError::NothingToRecord
            | RecordError::UnknownCommand(_)
            | RecordError::NoSuchPid(_)
            | RecordError::CannotSignal { .. }
            | RecordError::Select(_)),
        ) => {
            eprintln!("storprof: error: {err}");
            Ok(exit::USAGE)
        }
        Err(err) => Err(err.into()),
    }
}
