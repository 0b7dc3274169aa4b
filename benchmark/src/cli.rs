//! `storprof datagen`, `storprof bench` and `storprof sweep` arguments,
//! mapped onto [`DatagenOptions`], [`BenchOptions`] and
//! [`crate::run::sweep::SweepOptions`]. Exit codes are the profiler's
//! (`storprof::cli::exit`): errors here become exit 1 at the binary edge,
//! clap usage errors exit 2; a bench stopped by Ctrl-C (SIGINT) or SIGTERM
//! writes its results and exits 128 + the signal number (130, 143); the
//! memory guard's refusal exits 2 ([`EXIT_USAGE`]).
//!
//! Under `mpirun` (built with the `mpi` feature) each process is one rank:
//! see [`crate::run::mpi`]. Everything past argument mapping is in
//! [`crate::run`].
// The doc comments are also `--help`, where `<model>` reads as a placeholder.
#![allow(rustdoc::invalid_html_tags)]
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::config::rules::Division;
use crate::config::{Accelerator, Workload};
use crate::reader::ReaderKind;
use crate::run::mlpstorage::RecordDir;
pub use crate::run::run_bench_ranks;
use crate::run::{
    bench::{self, BenchOptions},
    datagen::{self, DatagenOptions},
    interrupt, mpi,
};
use crate::storage::{S3Options, storage_for_data_dir, strip_file_scheme};

/// S3 connection flags (for `--data-dir s3://BUCKET/PREFIX`). Unset values
/// come from the AWS environment variables (AWS_ENDPOINT_URL, AWS_REGION,
/// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...). Path-style requests;
/// plain http is allowed for loopback endpoints.
#[derive(Args, Debug, Clone, Default)]
pub struct S3Args {
    /// S3 endpoint URL, e.g. http://127.0.0.1:9000.
    #[arg(long)]
    pub s3_endpoint: Option<String>,
    /// S3 region (default: AWS_REGION, else us-east-1).
    #[arg(long)]
    pub s3_region: Option<String>,
    /// Part GETs in flight per storage read [default: 4] (reads in flight
    /// per read thread: --param reader.prefetch_workers=N).
    #[arg(long)]
    pub s3_parallel_gets: Option<usize>,
    /// Reads larger than this many MiB are split into parallel parts [default: 64].
    #[arg(long)]
    pub s3_part_mib: Option<usize>,
    /// Transparent huge pages for the S3 read buffers [default: false].
    #[arg(long, value_name = "BOOL")]
    pub s3_huge_pages: Option<bool>,
}

impl S3Args {
    /// The library options these flags stand for.
    pub fn options(&self) -> S3Options {
        let d = S3Options::default();
        S3Options {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            parallel_gets: self.s3_parallel_gets.unwrap_or(d.parallel_gets),
            part_size: self.s3_part_mib.map_or(d.part_size, |m| m.max(1) << 20),
            huge_pages: self.s3_huge_pages.unwrap_or(d.huge_pages),
            ..d
        }
    }
}

/// The dataset flags `datagen`, `bench` and `sweep` share.
#[derive(Args, Debug, Clone)]
pub struct DatasetArgs {
    /// Workload (DLIO model): unet3d (NPZ), retinanet (JPEG), flux or dlrm
    /// (Parquet), resnet50 or cosmoflow (TFRecord).
    #[arg(long, value_enum, required_unless_present = "config")]
    pub workload: Option<Workload>,
    /// Accelerator type; selects DLIO's <model>_<accelerator>.yaml
    /// [default: b200; h100 for resnet50 and cosmoflow, which DLIO has for
    /// a100 and h100 only].
    #[arg(long, value_enum)]
    pub accelerator_type: Option<Accelerator>,
    /// Dataset root: files are DIR/<model>/train (and valid/). A path,
    /// file://PATH or s3://BUCKET/PREFIX.
    #[arg(long)]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub s3: S3Args,
    /// Override a DLIO workload key, e.g. dataset.num_files_train=64 or
    /// reader.batch_size=4 (repeatable).
    #[arg(long = "param", value_name = "KEY=VALUE", num_args = 1..)]
    pub params: Vec<String>,
    /// A DLIO workload YAML used instead of the embedded one.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Hold the run to an MLPerf Storage v3.0 division's rules: only
    /// unet3d and retinanet on b200 or mi355, and only the parameters the
    /// division allows may be overridden (others are refused, listing the
    /// allowed ones).
    #[arg(long, value_enum)]
    pub division: Option<Division>,
}

impl DatasetArgs {
    /// `--accelerator-type`, else the workload's default (b200, or h100
    /// for the workloads DLIO has only for a100 and h100).
    pub fn accelerator(&self) -> Accelerator {
        self.accelerator_type.unwrap_or_else(|| {
            self.workload
                .map_or_else(Accelerator::default, Workload::default_accelerator)
        })
    }

    /// `--data-dir` without a `file://` scheme.
    pub fn data_dir(&self) -> PathBuf {
        PathBuf::from(strip_file_scheme(&self.data_dir.to_string_lossy()))
    }
}

/// The training flags `bench` and `sweep` share.
#[derive(Args, Debug, Clone)]
pub struct TrainingArgs {
    /// Seconds of simulated compute per step (train.computation_time); 0 = pure read speed.
    #[arg(long)]
    pub computation_time: Option<f64>,
    /// Reader strategy.
    #[arg(long, value_enum, default_value_t = ReaderKind::Raw)]
    pub reader: ReaderKind,
    /// Read with O_DIRECT (reader.odirect=True).
    #[arg(long)]
    pub odirect: bool,
    /// Epochs (train.epochs; per cell for sweep).
    #[arg(long)]
    pub epochs: Option<u32>,
    /// When the reader memory estimate (accelerators × read threads ×
    /// prefetch_workers × bytes per fetch + caches) exceeds 90% of
    /// MemAvailable, lower reader.prefetch_workers to fit instead of refusing
    /// (the run, or the sweep's cell).
    #[arg(long)]
    pub fit_memory: bool,
}

/// Generate a DLIO-compatible dataset: `DIR/<model>/train/img_<i>_of_<N>.<ext>`.
#[derive(Args, Debug)]
pub struct DatagenArgs {
    #[command(flatten)]
    pub dataset: DatasetArgs,
    /// Overwrite existing data files.
    #[arg(long)]
    pub force: bool,
    /// Client host memory in GiB for mlpstorage's dataset-size rule (default: this host's).
    #[arg(long, visible_alias = "client-host-memory-in-gb")]
    pub client_memory_gb: Option<f64>,
    /// Number of client hosts for the dataset-size rule.
    #[arg(long, default_value_t = 1)]
    pub num_client_hosts: u64,
    /// Accelerators (num_processes) for the dataset-size rule.
    #[arg(long, default_value_t = 1, visible_alias = "num-accelerators")]
    pub accelerators: u64,
    /// Writer threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Where to record the run as mlpstorage does (hydra files, metadata,
    /// datagen.json; default results/training/<model>/datagen/<YYYYMMDD_HHMMSS>).
    #[arg(long)]
    pub results_dir: Option<PathBuf>,
}

/// Emulate DLIO training over a dataset and report DLIO's metrics plus measured I/O.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub dataset: DatasetArgs,
    #[command(flatten)]
    pub training: TrainingArgs,
    /// Simulated accelerators (ranks).
    #[arg(long, default_value_t = 1, visible_alias = "num-accelerators")]
    pub accelerators: usize,
    /// Reader workers per accelerator (reader.read_threads).
    #[arg(long)]
    pub read_threads: Option<u64>,
    /// Where to write summary.json etc. (default results/training/<model>/run/<YYYYMMDD_HHMMSS>).
    #[arg(long)]
    pub results_dir: Option<PathBuf>,
    /// Client host memory in GiB for mlpstorage's dataset-size rule (default: this host's).
    #[arg(long, visible_alias = "client-host-memory-in-gb")]
    pub client_memory_gb: Option<f64>,
    /// Number of client hosts for the dataset-size rule.
    #[arg(long, default_value_t = 1)]
    pub num_client_hosts: u64,
}

/// A whole number ≥ 1 (clap's ranged parsers cover u64 only).
fn at_least_one<T: std::str::FromStr + PartialOrd + From<u8>>(s: &str) -> Result<T, String> {
    let n: T = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number"))?;
    if n < T::from(1u8) {
        return Err("must be at least 1".to_string());
    }
    Ok(n)
}

/// Run the NP × RT grid of bench runs (seed 002's study) and write the
/// table (markdown, CSV), the AU projection and an SVG plot.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Simulated accelerators per cell: `--np 1,2,4` or `--np 1 2 4`.
    #[arg(long, num_args = 1.., value_delimiter = ',', default_values_t = [1usize, 2, 4],
          value_parser = at_least_one::<usize>)]
    pub np: Vec<usize>,
    /// Read threads per accelerator per cell (reader.read_threads): `--rt 1,2,4` or `--rt 1 2 4`.
    #[arg(long, num_args = 1.., value_delimiter = ',', default_values_t = [1u64, 2, 4],
          value_parser = at_least_one::<u64>)]
    pub rt: Vec<u64>,
    /// Project each cell's AU and per-accelerator throughput to these
    /// computation times (seconds), comma-separated, e.g. 0.5,1.35.
    #[arg(long, value_delimiter = ',')]
    pub project: Vec<f64>,
    #[command(flatten)]
    pub dataset: DatasetArgs,
    #[command(flatten)]
    pub training: TrainingArgs,
    /// Where to write the table, plot and each cell's results
    /// (default results/sweep/<model>/<YYYYMMDD_HHMMSS>).
    #[arg(long)]
    pub results_dir: Option<PathBuf>,
}

impl SweepArgs {
    /// The library options these arguments stand for.
    pub fn options(&self) -> crate::run::sweep::SweepOptions {
        crate::run::sweep::SweepOptions {
            bench: BenchOptions {
                workload: self.dataset.workload,
                accelerator: self.dataset.accelerator(),
                config_file: self.dataset.config.clone(),
                params: self.dataset.params.clone(),
                data_dir: self.dataset.data_dir(),
                computation_time: self.training.computation_time,
                epochs: self.training.epochs,
                odirect: self.training.odirect,
                reader: self.training.reader,
                handle_signals: true,
                fit_memory: self.training.fit_memory,
                division: self.dataset.division,
                ..BenchOptions::default()
            },
            s3: self.dataset.s3.options(),
            nps: self.np.clone(),
            rts: self.rt.clone(),
            project: self.project.clone(),
            results_dir: self.results_dir.clone(),
            progress: std::io::stderr().is_terminal(),
            print: true,
        }
    }
}

/// `storprof sweep`; returns the exit code (0, 2 when the memory guard
/// refused every cell, 128 + signal when interrupted).
pub fn run_sweep(args: &SweepArgs) -> anyhow::Result<i32> {
    if args.project.iter().any(|c| !c.is_finite() || *c < 0.0) {
        eprintln!("storprof: error: --project takes non-negative seconds, e.g. 0.5,1.35");
        return Ok(EXIT_USAGE);
    }
    if mpi::launched_world_size().is_some_and(|n| n > 1) {
        eprintln!(
            "storprof: error: sweep runs each cell's accelerators as threads of one process; \
             start it without mpirun"
        );
        return Ok(EXIT_USAGE);
    }
    let report = crate::run::sweep::run_sweep(&args.options()).context("sweep")?;
    if let Some(sig) = report.interrupted_by {
        return Ok(interrupt::exit_code(sig));
    }
    if report.memory_refusals == report.rows.len() {
        eprintln!(
            "storprof: error: the memory guard refused every cell (see the notes in the table)"
        );
        return Ok(EXIT_USAGE);
    }
    Ok(0)
}

impl DatagenArgs {
    /// The library options these arguments stand for.
    pub fn options(&self) -> DatagenOptions {
        DatagenOptions {
            workload: self.dataset.workload,
            accelerator: self.dataset.accelerator(),
            config_file: self.dataset.config.clone(),
            params: self.dataset.params.clone(),
            data_dir: self.dataset.data_dir(),
            force: self.force,
            threads: self.threads,
            progress: std::io::stderr().is_terminal(),
            client_memory_gb: self.client_memory_gb,
            num_client_hosts: self.num_client_hosts,
            accelerators: self.accelerators,
            print: true,
            division: self.dataset.division,
            record: match &self.results_dir {
                Some(d) => RecordDir::At(d.clone()),
                None => RecordDir::DefaultLayout,
            },
        }
    }
}

impl BenchArgs {
    /// The library options these arguments stand for.
    pub fn options(&self) -> BenchOptions {
        BenchOptions {
            workload: self.dataset.workload,
            accelerator: self.dataset.accelerator(),
            config_file: self.dataset.config.clone(),
            params: self.dataset.params.clone(),
            data_dir: self.dataset.data_dir(),
            accelerators: self.accelerators,
            read_threads: self.read_threads,
            computation_time: self.training.computation_time,
            epochs: self.training.epochs,
            odirect: self.training.odirect,
            reader: self.training.reader,
            results_dir: self.results_dir.clone(),
            progress: std::io::stderr().is_terminal(),
            print: true,
            handle_signals: true,
            fit_memory: self.training.fit_memory,
            memory_available: None,
            division: self.dataset.division,
            client_memory_gb: self.client_memory_gb,
            num_client_hosts: self.num_client_hosts,
        }
    }
}

/// `storprof datagen`.
pub fn run_datagen(args: &DatagenArgs) -> anyhow::Result<()> {
    let opts = args.options();
    let storage = storage_for_data_dir(
        &opts.data_dir.to_string_lossy(),
        false,
        &args.dataset.s3.options(),
    )?;
    match mpi::launched_world_size() {
        Some(n) if n > 1 => mpi::run_datagen(&opts, &*storage)?,
        _ => {
            datagen::run_datagen(&opts, &*storage).context("datagen")?;
        }
    }
    Ok(())
}

/// Exit code of a usage error (`storprof::cli::exit::USAGE`): the memory
/// guard's refusal is one (the settings are too large for this host).
pub const EXIT_USAGE: i32 = 2;

/// `storprof bench`; returns the exit code (0, 2 when the memory guard
/// refuses the settings, or 128 + signal when interrupted).
pub fn run_bench(args: &BenchArgs) -> anyhow::Result<i32> {
    let opts = args.options();
    let report = match mpi::launched_world_size() {
        Some(n) if n > 1 => mpi::run_bench(&opts, &args.dataset.s3.options()),
        _ => run_bench_on(&opts, &args.dataset.s3.options()).map(Some),
    };
    let report = match report {
        Err(e) if is_memory_refusal(&e) => {
            eprintln!("storprof: error: {e:#}");
            return Ok(EXIT_USAGE);
        }
        r => r?,
    };
    Ok(report
        .and_then(|r| r.interrupted_by)
        .map_or(0, interrupt::exit_code))
}

/// Whether `e` is the memory guard's refusal.
pub fn is_memory_refusal(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<crate::error::BenchError>(),
            Some(crate::error::BenchError::MemoryGuard { .. })
        )
    })
}

/// Run the benchmark over local files (or an s3:// data dir configured from
/// the AWS environment) with the chosen reader.
pub fn run_bench_local(opts: &BenchOptions) -> anyhow::Result<bench::BenchReport> {
    run_bench_on(opts, &S3Options::default())
}

/// Run the benchmark over the storage `opts.data_dir` names (local path or
/// s3://BUCKET/PREFIX, the latter with `s3`).
pub fn run_bench_on(opts: &BenchOptions, s3: &S3Options) -> anyhow::Result<bench::BenchReport> {
    run_bench_ranks(opts, s3, &bench::InProcess(opts.accelerators))?
        .context("bench: the in-process run produced no report")
}

/// MLPerf Storage's checkpointing benchmark: each rank writes its shards of
/// a llama3 checkpoint (fsynced), then reads them back after the page cache
/// was emptied. Exit codes: 0 done; 1 a runtime error (I/O, not enough free
/// space, a folder holding foreign files or an earlier run without --force);
/// 2 a usage error (unknown model, a rank count the layout cannot take, bad
/// --scale / --block-size-kib).
#[derive(Args, Debug)]
pub struct CheckpointArgs {
    /// Model (DLIO's llama3_<size>.yaml): TP×PP×DP 1×1×8, 8×1×8, 8×32×2, 8×64×2.
    #[arg(long, value_enum)]
    pub model: crate::run::checkpoint::layout::LlamaModel,
    /// Subset mode: 8 processes of the full layout on one host (not llama3-8b).
    #[arg(long)]
    pub subset: bool,
    /// Checkpoints written.
    #[arg(long, default_value_t = 10)]
    pub num_checkpoints_write: u32,
    /// Checkpoints read back (the first ones written).
    #[arg(long, default_value_t = 10)]
    pub num_checkpoints_read: u32,
    /// Folder the checkpoints are written to: a local path, or
    /// s3://BUCKET/PREFIX (each shard one object, uploaded in multipart
    /// parts of --s3-part-mib and read back with ranged GETs; S3 has no
    /// fsync: a shard counts as saved when its upload completed).
    #[arg(long)]
    pub checkpoint_folder: PathBuf,
    #[command(flatten)]
    pub s3: S3Args,
    /// Divide every shard's size by this (≥ 1) to fit a small machine.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Write and read with O_DIRECT (aligned buffers).
    #[arg(long)]
    pub odirect: bool,
    /// Do not fsync files and directories: leave dirty pages to the kernel's writeback.
    #[arg(long)]
    pub no_fsync: bool,
    /// Processes (default: the layout's TP×PP×DP, or 8 with --subset); a
    /// multiple of TP×PP (subset: of TP). Under mpirun: the MPI world.
    #[arg(long)]
    pub ranks: Option<usize>,
    /// Remove an earlier storprof checkpoint run's files (listed in its
    /// manifest) from the folder first; other files are never removed.
    #[arg(long)]
    pub force: bool,
    /// KiB per write and read call (DLIO writes 32 MiB chunks).
    #[arg(long, default_value_t = 32 * 1024)]
    pub block_size_kib: usize,
    /// Where summary.json and per_checkpoint.json go (default results/checkpointing/<model>/<YYYYMMDD_HHMMSS>).
    #[arg(long)]
    pub results_dir: Option<PathBuf>,
    /// Client host memory in GiB for the "read back after dropping caches
    /// when the data per client is under 3× memory" rule (default: MemTotal).
    #[arg(long)]
    pub client_memory_gb: Option<f64>,
}

impl CheckpointArgs {
    /// The library options these arguments stand for.
    pub fn options(&self) -> crate::run::checkpoint::CheckpointOptions {
        crate::run::checkpoint::CheckpointOptions {
            model: self.model,
            subset: self.subset,
            num_checkpoints_write: self.num_checkpoints_write,
            num_checkpoints_read: self.num_checkpoints_read,
            folder: PathBuf::from(strip_file_scheme(&self.checkpoint_folder.to_string_lossy())),
            s3: self.s3.options(),
            scale: self.scale,
            odirect: self.odirect,
            fsync: !self.no_fsync,
            ranks: self.ranks,
            force: self.force,
            block_size: self.block_size_kib.saturating_mul(1024),
            results_dir: self.results_dir.clone(),
            client_memory_bytes: self
                .client_memory_gb
                .filter(|g| g.is_finite() && *g > 0.0)
                .map(|g| (g * 1073741824.0) as u64),
            ..Default::default()
        }
    }
}

/// `storprof checkpoint`; returns the exit code (0, or 2 for a usage error).
pub fn run_checkpoint(args: &CheckpointArgs) -> anyhow::Result<i32> {
    use crate::error::BenchError;
    use crate::run::checkpoint::{self, Threads, layout::Layout};
    let opts = args.options();
    let usage = |e: &BenchError| {
        matches!(
            e,
            BenchError::BadLayout { .. } | BenchError::BadParam { .. } | BenchError::Usage { .. }
        )
    };
    let result = match mpi::launched_world_size() {
        Some(n) if n > 1 => run_checkpoint_mpi(&opts),
        _ => Layout::new(opts.model, opts.subset, opts.ranks)
            .and_then(|layout| checkpoint::run_checkpoint(&opts, &Threads(layout.ranks))),
    };
    match result {
        Ok(_) => Ok(0),
        Err(e) if usage(&e) => {
            eprintln!("storprof: error: {e}");
            Ok(EXIT_USAGE)
        }
        Err(e) => Err(anyhow::Error::new(e).context("checkpoint")),
    }
}

#[cfg(feature = "mpi")]
fn run_checkpoint_mpi(
    opts: &crate::run::checkpoint::CheckpointOptions,
) -> Result<Option<crate::run::checkpoint::CheckpointReport>, crate::error::BenchError> {
    let world = crate::run::mpi::MpiWorld::init(mpi::timeout_from_env()?)?;
    match crate::run::checkpoint::run_checkpoint(opts, &world) {
        Ok(r) => Ok(r),
        // One rank failing must not leave the others waiting in a barrier.
        Err(e) => world.fail(&format!("{e}")),
    }
}

#[cfg(not(feature = "mpi"))]
fn run_checkpoint_mpi(
    _: &crate::run::checkpoint::CheckpointOptions,
) -> Result<Option<crate::run::checkpoint::CheckpointReport>, crate::error::BenchError> {
    Err(crate::error::BenchError::Mpi(
        "started by mpirun with several ranks, but this storprof was built without MPI support; \
         rebuild with `cargo build --release --features storprof/mpi`"
            .into(),
    ))
}
