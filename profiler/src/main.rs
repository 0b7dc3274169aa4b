//! The `storprof` binary: parses the command line ([`storprof::cli`]) and
//! dispatches. Everything else lives in the `storprof` and `storprof_bench`
//! libraries.
use std::process::ExitCode;

use clap::Parser;
use storprof::cli::{Cli, Command, exit};

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Doctor(_)
            | Command::Report(_)
            | Command::Flamegraph(_)
            | Command::Bundle(_)
            | Command::Export(_)
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
        Command::Checkpoint(args) => storprof_bench::cli::run_checkpoint(&args),
        Command::Record(args) => storprof::commands::record::run(&args),
        Command::Doctor(args) => storprof::commands::doctor::run(&args),
        Command::Report(args) => storprof::commands::report::run(&args),
        Command::Diagnose(args) => storprof::commands::diagnose::run(&args),
        Command::Flamegraph(args) => storprof::commands::flamegraph::run(&args),
        Command::Bundle(args) => storprof::commands::bundle::run(&args),
        Command::Export(args) => storprof::commands::export::run(&args),
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
