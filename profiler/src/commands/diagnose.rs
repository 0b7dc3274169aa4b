//! `storprof diagnose [record options] -- CMD ARGS...`: record, then report,
//! then bundle, in one run; prints the verdict at the end and exits with the
//! command's status. `storprof demo` ([`run_demo`], [`super::demo`]) runs
//! the embedded example: dlio-legacy vs raw reader over a cached flux dataset.
use super::{
    demo::{self, DemoOptions},
    load_thresholds,
};
use crate::cli::{DiagnoseArgs, exit};
use storprof_record::RecordError;
use storprof_report::{
    BundleSessionOptions, ReportOptions,
    report::{render_terminal, verdict_json},
};
use storprof_session::safe_path;

/// Runs `storprof diagnose`.
pub fn run(args: &DiagnoseArgs) -> anyhow::Result<i32> {
    let thresholds = args
        .record
        .thresholds(load_thresholds(args.thresholds.thresholds.as_deref())?);
    let mut options = match args.record.to_options(&thresholds) {
        Ok(o) => o,
        Err(message) => {
            eprintln!("storprof: error: {message}");
            return Ok(exit::USAGE);
        }
    };
    options.command_stdout_to_stderr = args.json;
    if args.record.command.is_empty() && args.record.pids.is_empty() && args.record.netns.is_none()
    {
        eprintln!(
            "storprof: error: nothing to diagnose: give the training command after `--` \
             (storprof diagnose -- python train.py) or --pid PID; `storprof demo` runs the \
             built-in example"
        );
        return Ok(exit::USAGE);
    }
    // Refused before recording, not after a long run.
    if let Some(bundle) = &args.bundle
        && let Err(err) =
            safe_path::check_output_file(bundle, args.record.force, safe_path::invoking_uid())
    {
        eprintln!("storprof: error: --bundle: {err}");
        return Ok(exit::USAGE);
    }
    let outcome = match storprof_record::record(&options) {
        Ok(o) => o,
        Err(
            err @ (RecordError::NotRoot
            | RecordError::NothingToRecord
            | RecordError::UnknownCommand(_)
            | RecordError::NoSuchPid(_)
            | RecordError::CannotSignal { .. }),
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
    let reported = storprof_report::write_report(&outcome.dir, &report)?;
    let b = BundleSessionOptions {
        output: args.bundle.clone(),
        report,
        force: args.record.force,
    };
    let (bundle, _) = storprof_report::bundle_session(&outcome.dir, &b)?;
    // -q (errors only) leaves the verdict alone on the terminal.
    if log::log_enabled!(log::Level::Warn) {
        eprintln!("storprof: session {}", outcome.dir.display());
        eprintln!(
            "storprof: report  {}",
            outcome.dir.join(storprof_report::files::REPORT).display()
        );
        eprintln!(
            "storprof: page    {}",
            outcome.dir.join(storprof_report::files::HTML).display()
        );
        eprintln!("storprof: bundle  {}", bundle.display());
    }
    if args.json {
        print!("{}", verdict_json(&reported.analysis)?);
    } else {
        print!("{}", render_terminal(&reported.analysis));
    }
    Ok(outcome.exit_code)
}

/// `storprof demo`: the embedded demo.
pub fn run_demo(args: &DiagnoseArgs) -> anyhow::Result<i32> {
    let thresholds = args
        .record
        .thresholds(load_thresholds(args.thresholds.thresholds.as_deref())?);
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("storprof: error: {}", RecordError::NotRoot);
        return Ok(exit::USAGE);
    }
    let options = DemoOptions {
        data_dir: args.data_dir.clone(),
        results_dir: args
            .record
            .output
            .clone()
            .unwrap_or_else(demo::default_results_dir),
        scale: args.demo_scale,
        freq_hz: args.record.freq.max(1),
        thresholds,
        as_root: args.record.as_root,
        command_stdout_to_stderr: args.json,
    };
    let outcome = demo::run_demo(&options)?;
    if args.json {
        return demo_json(&outcome);
    }
    println!();
    println!(
        "storprof bench, dlio-legacy reader (storage #330) vs raw reader, same data, same simulated accelerator:"
    );
    println!();
    print!("{}", outcome.comparison);
    println!();
    for r in &outcome.runs {
        println!("{:<12} session {}", r.reader, r.session_dir.display());
    }
    println!(
        "differential on-CPU flamegraph (red = more in dlio-legacy): {}",
        outcome.diff_svg.display()
    );
    println!("results: {}", outcome.results_dir.display());
    Ok(exit::OK)
}

/// `storprof demo --json`: one object per run, its reader, session
/// directory and verdict.json.
fn demo_json(outcome: &demo::DemoOutcome) -> anyhow::Result<i32> {
    let mut runs = Vec::new();
    for r in &outcome.runs {
        let path = r.session_dir.join(storprof_report::files::VERDICT);
        let text = std::fs::read_to_string(&path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let verdict: serde_json::Value = serde_json::from_str(&text)?;
        runs.push(serde_json::json!({
            "reader": r.reader,
            "session": r.session_dir,
            "verdict": verdict,
        }));
    }
    println!("{}", serde_json::to_string_pretty(&runs)?);
    Ok(exit::OK)
}
