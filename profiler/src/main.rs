//! The `storprof` binary: parses the command line ([`storprof::cli`]) and
//! dispatches. Everything else lives in the `storprof` and `storprof_bench`
//! libraries.
use std::process::ExitCode;

use clap::Parser;
use storprof::cli::{Cli, Command, exit};

fn main() -> ExitCode {
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(cli.log_filter()))
        // "storprof: warning: ..." as the errors read, not a module path.
        .format(|buf, record| {
            use std::io::Write as _;
            let level = match record.level() {
                log::Level::Error => "error",
                log::Level::Warn => "warning",
                log::Level::Info => "info",
                log::Level::Debug | log::Level::Trace => "debug",
            };
            writeln!(buf, "storprof: {level}: {}", record.args())
        })
        .init();
    if matches!(
        cli.command,
        Command::Doctor(_)
            | Command::Report(_)
            | Command::Flamegraph(_)
            | Command::Bundle(_)
            | Command::Export(_)
            | Command::Merge(_)
            | Command::Thresholds(_)
            | Command::Whatif(_)
            | Command::Completions { .. }
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
        Command::Demo(args) => storprof::commands::diagnose::run_demo(&args),
        Command::Flamegraph(args) => storprof::commands::flamegraph::run(&args),
        Command::Bundle(args) => storprof::commands::bundle::run(&args),
        Command::Export(args) => storprof::commands::export::run(&args),
        Command::Merge(args) => storprof::merge::command::run(&args),
        Command::Thresholds(args) => storprof::commands::thresholds::run(&args),
        Command::Whatif(args) => storprof::commands::whatif::run(&args),
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cmd, "storprof", &mut std::io::stdout());
            Ok(exit::OK)
        }
        Command::Man { dir } => storprof::commands::man::write_pages(&dir).map(|n| {
            eprintln!("storprof: {n} man pages written to {}", dir.display());
            exit::OK
        }),
    };
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(err) => {
            eprintln!("storprof: error: {}", error_text(&err));
            let usage = err.chain().any(|c| {
                c.downcast_ref::<storprof::cli::UsageError>().is_some()
                    || c.downcast_ref::<storprof_bench::error::BenchError>()
                        .is_some_and(storprof_bench::error::BenchError::is_usage)
            });
            ExitCode::from(if usage { exit::USAGE } else { exit::ERROR } as u8)
        }
    }
}

/// The error and its causes, each said once: a cause whose text its
/// error's message already holds (thiserror's `"{path}: {source}"`) is
/// not repeated.
fn error_text(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}
