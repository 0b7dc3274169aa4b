//! `storprof export DIR --format pprof|speedscope|trace [-o FILE [--force]]`:
//! loads the session, renders it with [`storprof_report::export`] and writes
//! the file (by default into the session directory, replaced when present,
//! as `storprof flamegraph` does; a named file needs --force to replace).
use anyhow::Context;

use crate::cli::{ExportArgs, exit};
use storprof_analysis::Thresholds;
use storprof_report::export;
use storprof_session::{safe_path, safe_path::give_to_invoking_user};

/// Runs `storprof export`.
pub fn run(args: &ExportArgs) -> anyhow::Result<i32> {
    let session = match super::load_session_dir(&args.dir) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    if !session.is_complete() {
        eprintln!(
            "storprof: warning: partial session: missing {}",
            session.missing.join(", ")
        );
    }
    let out = match super::session_output_file(
        &args.dir,
        args.output.as_deref(),
        args.format.default_file_name(),
        args.force,
    ) {
        Ok(out) => out,
        Err(err) => {
            eprintln!("storprof: error: {err}");
            return Ok(exit::USAGE);
        }
    };
    let roles = export::thread_roles(&session, &Thresholds::default());
    // Rendered before the file is made: a failure leaves nothing behind.
    let bytes = export::render(&session, args.format, &roles)
        .with_context(|| format!("cannot export {}", args.dir.display()))?;
    safe_path::write_file(&out, &bytes)
        .with_context(|| format!("cannot write {}", out.display()))?;
    give_to_invoking_user(&out);
    eprintln!(
        "storprof: {} written to {}",
        args.format.label(),
        out.display()
    );
    Ok(exit::OK)
}
