//! The `storprof` binary: parses the command line and dispatches. Everything
//! else lives in the `storprof` and `storprof_bench` libraries.
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use storprof::cli::exit;

#[derive(Parser, Debug)]
#[command(name = "storprof", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate a DLIO-compatible dataset (flux Parquet, unet3d NPZ).
    Datagen(storprof_bench::cli::DatagenArgs),
    /// Emulate DLIO training over a dataset and report DLIO's metrics.
    Bench(storprof_bench::cli::BenchArgs),
    /// Run the NP × RT grid of bench runs: table (markdown, CSV), AU projection, SVG plot.
    Sweep(storprof_bench::cli::SweepArgs),
    /// Record a session: run a command (or attach to pids) under the eBPF probes.
    Record(storprof::record::args::RecordArgs),
    /// Check that this machine can run the probes (root, BTF, tracefs, tracepoints, perf_event).
    Doctor(storprof::record::args::DoctorArgs),
    /// Analyse a session: verdict.json, report.md, flamegraphs, timeline; prints the verdict.
    Report(storprof::commands::report::ReportArgs),
    /// Record, report and bundle in one run; prints the verdict at the end.
    Diagnose(storprof::commands::diagnose::DiagnoseArgs),
    /// Write an on-CPU or off-CPU flamegraph, or a differential one (--diff).
    Flamegraph(storprof::commands::flamegraph::FlamegraphArgs),
    /// Pack the evidence bundle (tar.gz, secrets redacted).
    Bundle(storprof::commands::bundle::BundleArgs),
    /// Merge several hosts' sessions into one diagnosis: per-host verdicts, cluster verdict, stragglers.
    Merge(storprof::merge::command::MergeArgs),
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Doctor(_)
            | Command::Report(_)
            | Command::Flamegraph(_)
            | Command::Bundle(_)
            | Command::Merge(_)
    ) {
        // Output-only commands end quietly when their reader goes away
        // (`storprof doctor | head`), as Unix tools do, instead of panicking
        // on EPIPE. Commands that run a workload keep Rust's default: they
        // must still write their session or results.
        // SAFETY: setting a signal's disposition; no handler is involved.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let result = match cli.command {
        Command::Datagen(args) => storprof_bench::cli::run_datagen(&args).map(|()| exit::OK),
        Command::Bench(args) => storprof_bench::cli::run_bench(&args),
        Command::Sweep(args) => storprof_bench::cli::run_sweep(&args),
        Command::Record(args) => storprof::record::args::run_record(&args),
        Command::Doctor(args) => storprof::record::args::run_doctor(&args),
        Command::Report(args) => storprof::commands::report::run(&args),
        Command::Diagnose(args) => storprof::commands::diagnose::run(&args),
        Command::Flamegraph(args) => storprof::commands::flamegraph::run(&args),
        Command::Bundle(args) => storprof::commands::bundle::run(&args),
        Command::Merge(args) => storprof::merge::command::run(&args),
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(err) => {
            eprintln!("storprof: error: {err:#}");
            ExitCode::from(exit::ERROR as u8)
        }
    }
}
