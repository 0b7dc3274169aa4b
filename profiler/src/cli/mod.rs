//! Command-line arguments of every `storprof` subcommand, in one place (as
//! ripgrep keeps its flags): the clap [`Cli`] and its [`Command`]s, each
//! subcommand's args struct, and the exit codes ([`exit`]). `main.rs` only
//! parses and dispatches; the `run` functions take the parsed args.
//!
//! How each args struct maps onto the library:
//!
//! ```text
//! RecordArgs      ──to_options──► record::RecordOptions      (commands::record)
//! DoctorArgs      (no options)  ► doctor::run                (commands::doctor)
//! ReportArgs      ──────────────► output::ReportOptions      (commands::report)
//! DiagnoseArgs    ──────────────► RecordOptions + ReportOptions + BundleSessionOptions,
//!                                 or commands::demo::DemoOptions without a command
//!                                                            (commands::diagnose)
//! FlamegraphArgs  ──────────────► output::flamegraph::FlamegraphOptions (commands::flamegraph)
//! BundleArgs      ──────────────► output::BundleSessionOptions (commands::bundle)
//! ExportArgs      ──────────────► output::export::Format     (commands::export)
//! MergeArgs       ──────────────► merge::command::merge_sessions (merge::command::run)
//! ThresholdArgs   ──load_thresholds──► analysis::Thresholds  (report, diagnose, merge)
//! ```
//! The benchmark's subcommands (`datagen`, `bench`, `sweep`, `checkpoint`) keep their args
//! in `storprof_bench::cli`, next to the library they map onto, so that crate
//! stands alone. Value enums that are library options themselves
//! (`record::UnwindMode`, `commands::demo::DemoScale`) derive clap where
//! they are defined.
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::commands::demo::DemoScale;

mod record_args;
pub use record_args::RecordArgs;

/// Exit codes of `storprof`.
pub mod exit {
    /// Success (for `record`/`diagnose`: the command's own status is passed through).
    pub const OK: i32 = 0;
    /// A runtime error (I/O, bad data, a probe that failed to load).
    pub const ERROR: i32 = 1;
    /// Usage error, or a command that needs root run without it.
    pub const USAGE: i32 = 2;
}

/// `storprof`: the whole command line.
#[derive(Parser, Debug)]
#[command(name = "storprof", version, about, long_about = None, after_help = TOP_EXAMPLES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// More log output (-v: info, -vv: debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Errors only: no warnings.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

impl Cli {
    /// The log filter the flags ask for.
    pub fn log_filter(&self) -> &'static str {
        match (self.quiet, self.verbose) {
            (true, _) => "error",
            (false, 0) => "warn",
            (false, 1) => "info",
            (false, _) => "debug",
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Record, report and bundle in one run: `sudo -E storprof diagnose -- CMD ARGS...`; prints the verdict.
    #[command(after_help = DIAGNOSE_EXAMPLES)]
    Diagnose(DiagnoseArgs),
    /// Check that this machine can run the probes (root, BTF, tracefs, tracepoints, perf_event).
    #[command(after_help = DOCTOR_EXAMPLES)]
    Doctor(DoctorArgs),
    /// The built-in example: diagnose `storprof bench` with DLIO's legacy reader and the raw one
    /// over a small cached flux dataset (mlcommons/storage#330, found and fixed).
    #[command(after_help = DEMO_EXAMPLES)]
    Demo(DiagnoseArgs),
    /// Record a session: run a command (or attach to pids) under the eBPF probes.
    #[command(after_help = RECORD_EXAMPLES)]
    Record(RecordArgs),
    /// Analyse a session: verdict.json, report.md, flamegraphs, timeline; prints the verdict.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportArgs),
    /// Write an on-CPU or off-CPU flamegraph, or a differential one (--diff).
    #[command(after_help = FLAMEGRAPH_EXAMPLES)]
    Flamegraph(FlamegraphArgs),
    /// Convert a session into pprof, speedscope or Chrome trace (Perfetto) files.
    #[command(after_help = EXPORT_EXAMPLES)]
    Export(ExportArgs),
    /// Pack the evidence bundle (tar.gz, secrets redacted).
    #[command(after_help = BUNDLE_EXAMPLES)]
    Bundle(BundleArgs),
    /// Merge several hosts' sessions into one diagnosis: per-host verdicts, cluster verdict, stragglers.
    #[command(after_help = MERGE_EXAMPLES)]
    Merge(MergeArgs),
    /// List the verdict thresholds: key, value, default, range and where each value came from.
    #[command(after_help = THRESHOLDS_EXAMPLES)]
    Thresholds(ThresholdsArgs),
    /// What would help: the AU projected with faster storage, more read threads, another
    /// computation time... from one recording (a model; docs/src/whatif.md).
    #[command(after_help = WHATIF_EXAMPLES)]
    Whatif(WhatifArgs),
    /// Print a shell completion script: `storprof completions bash > /etc/bash_completion.d/storprof`.
    #[command(after_help = COMPLETIONS_EXAMPLES)]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write a man page per command (storprof.1, storprof-diagnose.1, ...) into DIR.
    #[command(after_help = MAN_EXAMPLES)]
    Man {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Emulate DLIO training over a dataset and report DLIO's metrics.
    #[command(
        override_usage = "storprof bench --workload <WORKLOAD> --data-dir <DATA_DIR> [OPTIONS]\n       storprof bench --config <FILE.yaml> --data-dir <DATA_DIR> [OPTIONS]",
        after_help = BENCH_EXAMPLES
    )]
    Bench(storprof_bench::cli::BenchArgs),
    /// Generate a DLIO-compatible dataset for one of the six MLPerf Storage / DLIO training
    /// workloads (checkpoints: `storprof checkpoint`).
    #[command(
        override_usage = "storprof datagen --workload <WORKLOAD> --data-dir <DATA_DIR> [OPTIONS]\n       storprof datagen --config <FILE.yaml> --data-dir <DATA_DIR> [OPTIONS]",
        after_help = DATAGEN_EXAMPLES
    )]
    Datagen(storprof_bench::cli::DatagenArgs),
    /// Run the NP × RT grid of bench runs: table (markdown, CSV), AU projection, SVG plot.
    #[command(
        override_usage = "storprof sweep --workload <WORKLOAD> --data-dir <DATA_DIR> [OPTIONS]\n       storprof sweep --config <FILE.yaml> --data-dir <DATA_DIR> [OPTIONS]",
        after_help = SWEEP_EXAMPLES
    )]
    Sweep(storprof_bench::cli::SweepArgs),
    /// MLPerf Storage checkpointing: write llama3 checkpoint shards (fsync), read them back.
    #[command(after_help = CHECKPOINT_EXAMPLES)]
    Checkpoint(storprof_bench::cli::CheckpointArgs),
}

/// Shown under `storprof --help`.
const TOP_EXAMPLES: &str = "\
Examples:
  sudo storprof doctor                                   can this machine run the probes?
  sudo -E storprof diagnose -- python train.py           why is my training job slow?
  sudo -E storprof diagnose --pid 4242 --duration 120    the same, on a running job
  storprof report storprof-20261205-101500               the verdict of a recorded session
  storprof datagen --workload unet3d --data-dir /mnt/data --param dataset.num_files_train=64
  storprof bench --workload unet3d --data-dir /mnt/data --accelerators 2";

/// Shown under `storprof diagnose --help`.
const DIAGNOSE_EXAMPLES: &str = "\
Examples:
  sudo -E storprof diagnose -- python train.py --epochs 1
  sudo -E storprof diagnose --until-verdict -- torchrun --nproc-per-node 8 train.py
  sudo -E storprof diagnose --pid 4242 --duration 120
  sudo -E storprof diagnose --thresholds my-thresholds.json -- ./run.sh";

const DOCTOR_EXAMPLES: &str = "\
Examples:
  sudo storprof doctor          one line per check; exit 0 when recording can work
  sudo storprof doctor --json | jq '.checks[] | select(.ok | not)'";

const DEMO_EXAMPLES: &str = "\
Examples:
  sudo -E storprof demo                         the #330 reader and the raw one, side by side
  sudo -E storprof demo --data-dir /var/tmp/d   keep the demo's dataset there";

const RECORD_EXAMPLES: &str = "\
Examples:
  sudo -E storprof record -o run1 -- python train.py     record only; `storprof report run1` later
  sudo storprof record -p 4242 -d 60 -F 199              a running job for 60 s at 199 Hz
  sudo -E storprof record --live off -- ./train.sh       no live view";

const REPORT_EXAMPLES: &str = "\
Examples:
  storprof report storprof-20261205-101500            verdict, report.md, report.html, SVGs
  storprof report run.tar.gz -o /tmp/report           a bundle, or a read-only copy
  storprof report run1 --json | jq .verdict           verdict.json on stdout";

const FLAMEGRAPH_EXAMPLES: &str = "\
Examples:
  storprof flamegraph run1                            run1/flamegraph-oncpu.svg
  storprof flamegraph run1 --kind offcpu -o off.svg   where the threads waited
  storprof flamegraph fixed --diff slow -o diff.svg   red: more in `fixed` than in `slow`";

const EXPORT_EXAMPLES: &str = "\
Examples:
  storprof export run1 --format pprof -o run1.pb.gz && go tool pprof -http : run1.pb.gz
  storprof export run1 --format speedscope -o run1.speedscope.json
  storprof export run1 --format trace -o run1.trace.json   # open in ui.perfetto.dev";

const BUNDLE_EXAMPLES: &str = "\
Examples:
  storprof bundle run1                     run1.tar.gz, secrets redacted
  storprof bundle run1 -o ticket-123.tar.gz";

const MERGE_EXAMPLES: &str = "\
Examples:
  storprof merge -o cluster host1/run1 host2/run1 host3/run1
  storprof merge -o cluster --json host*/run1 | jq .stragglers";

const THRESHOLDS_EXAMPLES: &str = "\
Examples:
  storprof thresholds                                 every key, its default and range
  storprof thresholds --thresholds mine.json --json   what a file changes";

const COMPLETIONS_EXAMPLES: &str = "\
Examples:
  storprof completions bash > /etc/bash_completion.d/storprof
  storprof completions zsh > \"${fpath[1]}/_storprof\"";

const MAN_EXAMPLES: &str = "\
Examples:
  storprof man /usr/local/share/man/man1 && man storprof-diagnose";

const BENCH_EXAMPLES: &str = "\
Examples:
  storprof bench --workload unet3d --data-dir /mnt/data --accelerators 2
  storprof bench --workload flux --data-dir /mnt/data --param reader.read_threads=8
  storprof bench --workload retinanet --data-dir s3://bucket/prefix --s3-endpoint http://minio:9000";

const DATAGEN_EXAMPLES: &str = "\
Examples:
  storprof datagen --workload unet3d --data-dir /mnt/data
  storprof datagen --workload flux --data-dir /mnt/data --param dataset.num_files_train=64
  storprof datagen --workload resnet50 --accelerator-type a100 --data-dir /mnt/data";

const SWEEP_EXAMPLES: &str = "\
Examples:
  storprof sweep --workload flux --data-dir s3://bucket/p --np 1 2 4 --rt 1 2 4 8
  storprof sweep --workload unet3d --data-dir /mnt/data --computation-time 1.35";

const CHECKPOINT_EXAMPLES: &str = "\
Examples:
  storprof checkpoint --model llama3-8b --checkpoint-folder /mnt/ckpt
  storprof checkpoint --model llama3-70b --checkpoint-folder /mnt/ckpt --results-dir results";

/// `storprof doctor` (no options).
#[derive(clap::Args, Debug, Clone)]
pub struct DoctorArgs {
    /// Print a JSON object instead of the lines: `ok`, and `checks`, one
    /// object per check with `name`, `ok` and `detail`.
    #[arg(long)]
    pub json: bool,
}

/// `--thresholds FILE`, shared by report, diagnose and merge.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ThresholdArgs {
    /// JSON file overriding verdict thresholds (see THRESHOLDS.md), e.g. {"compute_bound_au_percentage": 70}.
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
}

/// `storprof thresholds [--thresholds FILE] [--json]`
#[derive(clap::Args, Debug, Clone)]
pub struct ThresholdsArgs {
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// Print a JSON list, one object per threshold.
    #[arg(long)]
    pub json: bool,
}

/// `storprof whatif DIR|BUNDLE [--lever NAME[=K]]... [--json]`
#[derive(clap::Args, Debug, Clone)]
pub struct WhatifArgs {
    /// Session directory written by `storprof record`, or a bundle.
    #[arg(value_name = "DIR|BUNDLE")]
    pub dir: PathBuf,
    /// A lever, NAME or NAME=K (K× today's value: a speed, a count, or
    /// for computation a time): storage, cache, read-threads, reader-cpu,
    /// computation, network, lock, accelerators. Repeatable. Default: the
    /// reports' table: every fix ×2 (storage, cache, read-threads,
    /// reader-cpu, network, lock), computation=2 and =4, accelerators=2.
    #[arg(long = "lever", value_name = "NAME[=K]")]
    pub levers: Vec<String>,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// Print a JSON list, one object per lever.
    #[arg(long)]
    pub json: bool,
}

const WHATIF_EXAMPLES: &str = "Examples:
  storprof whatif storprof-20261205-101500
  storprof whatif run.tar.gz --lever storage=4 --lever cache --json
  storprof whatif SESSION --lever computation=27   # 0.05 s -> 1.35 s a step";

/// A usage error found after parsing (a bad `--thresholds` file, a value
/// clap cannot check): the binary exits with [`exit::USAGE`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// `storprof report DIR|BUNDLE [-o DIR] [--json] [--thresholds FILE]`
#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// Session directory written by `storprof record`, or a bundle
    /// (`.tar.gz` from `diagnose` or `bundle`), read without extracting it.
    #[arg(value_name = "DIR|BUNDLE")]
    pub dir: PathBuf,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// Write the report files here instead of into the session directory
    /// (created if absent; for read-only sessions and bundles).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print verdict.json on stdout instead of the summary; without -o no
    /// file is written.
    #[arg(long)]
    pub json: bool,
}

/// `storprof diagnose [record options] [--thresholds FILE] [--bundle FILE] [-- CMD ARGS...]`
#[derive(clap::Args, Debug, Clone)]
pub struct DiagnoseArgs {
    #[command(flatten)]
    pub record: RecordArgs,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// Bundle file (default: SESSION_DIR.tar.gz). An existing file is
    /// replaced only with --force; a path through another user's symbolic
    /// link is refused.
    #[arg(long, value_name = "FILE.tar.gz")]
    pub bundle: Option<PathBuf>,
    /// `storprof demo`: dataset directory of the embedded demo
    /// (default: $XDG_CACHE_HOME/storprof/demo-data or ~/.cache/storprof/demo-data).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// `storprof demo`: size of the demo (tests use `small`).
    #[arg(long, value_enum, default_value_t, hide = true)]
    pub demo_scale: DemoScale,
    /// Print verdict.json on stdout instead of the verdict's summary (the
    /// demo: a list, one object per run); the command's own standard
    /// output goes to standard error, so stdout is the JSON alone.
    #[arg(long)]
    pub json: bool,
}

/// `--kind` of `storprof flamegraph`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KindArg {
    #[default]
    Oncpu,
    Offcpu,
}

/// `storprof flamegraph DIR [--kind oncpu|offcpu] [--diff OTHER_DIR] [-o FILE [--force]]`
#[derive(clap::Args, Debug, Clone)]
pub struct FlamegraphArgs {
    /// Session directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// On-CPU samples or off-CPU blocked time (µs).
    #[arg(long, value_enum, default_value_t = KindArg::Oncpu)]
    pub kind: KindArg,
    /// Differential against another session: frames sized by DIR, red where
    /// DIR spends more than OTHER_DIR, blue where less (counts normalized).
    #[arg(long, value_name = "OTHER_DIR")]
    pub diff: Option<PathBuf>,
    /// Output SVG (default: DIR/flamegraph-KIND.svg, or
    /// DIR/flamegraph-KIND-diff.svg, replaced when present). Through sudo
    /// it is the invoking user's; a path through another user's symbolic
    /// link is refused.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace an existing file at --output (without it, refused).
    #[arg(long)]
    pub force: bool,
    /// Stable colours and pretty XML (for diffs and tests).
    #[arg(long)]
    pub deterministic: bool,
}

/// `storprof bundle DIR [-o FILE.tar.gz] [--force]`
#[derive(clap::Args, Debug, Clone)]
pub struct BundleArgs {
    /// Session directory.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Output file (default: DIR.tar.gz, replaced when present). Through
    /// sudo it is the invoking user's; a path through another user's
    /// symbolic link is refused.
    #[arg(short, long, value_name = "FILE.tar.gz")]
    pub output: Option<PathBuf>,
    /// Replace an existing file at --output (without it, refused).
    #[arg(long)]
    pub force: bool,
}

/// `storprof export DIR --format pprof|speedscope|trace [-o FILE] [--force]`
#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    /// Session directory.
    #[arg(value_name = "SESSION_DIR")]
    pub dir: PathBuf,
    /// The file format to write.
    #[arg(long, value_enum)]
    pub format: storprof_report::export::Format,
    /// Output file (default: SESSION_DIR/profile.pb.gz,
    /// profile.speedscope.json or trace.json, replaced when present).
    /// Through sudo it is the invoking user's; a path through another
    /// user's symbolic link is refused.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace an existing file at --output (without it, refused).
    #[arg(long)]
    pub force: bool,
}

/// `storprof merge SESSION... -o DIR [--force] [--thresholds FILE]`
#[derive(clap::Args, Debug, Clone)]
pub struct MergeArgs {
    /// Session directories, one per host (`storprof record --output DIR/<host>` on each host).
    #[arg(value_name = "SESSION", required = true, num_args = 1..)]
    pub sessions: Vec<PathBuf>,
    /// Output directory for merged.json, report.md and merged.tar.gz
    /// (through sudo, the invoking user's). A path through another user's
    /// symbolic link is refused, an existing directory that is not empty
    /// needs --force.
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: PathBuf,
    /// Write into an existing output directory that is not empty (files of
    /// the same names are replaced).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// Print merged.json on stdout instead of the per-host table.
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// clap's own consistency checks of every subcommand's arguments.
    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
