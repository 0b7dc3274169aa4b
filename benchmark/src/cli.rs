//! `storprof datagen` and `storprof bench` arguments, mapped onto
//! [`DatagenOptions`] and [`BenchOptions`]. Exit codes are the profiler's
//! (`storprof::cli::exit`): errors here become exit 1 at the binary edge,
//! clap usage errors exit 2.
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use crate::config::{Accelerator, Workload};
use crate::datagen::{self, DatagenOptions};
use crate::engine::bench::{self, BenchOptions};
use crate::reader::ReaderKind;
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
    /// Ranged GETs in flight per read (s3dlio's prefetch_workers) [default: 8].
    #[arg(long)]
    pub s3_parallel_gets: Option<usize>,
    /// Reads larger than this many MiB are split into parallel parts [default: 16].
    #[arg(long)]
    pub s3_part_mib: Option<usize>,
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
            ..d
        }
    }
}

/// Generate a DLIO-compatible dataset: `DIR/<model>/train/img_<i>_of_<N>.<ext>`.
#[derive(Args, Debug)]
pub struct DatagenArgs {
    /// Workload (DLIO model): flux (Parquet) or unet3d (NPZ).
    #[arg(long, value_enum, required_unless_present = "config")]
    pub workload: Option<Workload>,
    /// Accelerator type; selects DLIO's <model>_<accelerator>.yaml.
    #[arg(long, value_enum, default_value_t = Accelerator::B200)]
    pub accelerator_type: Accelerator,
    /// Dataset root; files go to DIR/<model>/train (and valid/). A path,
    /// file://PATH or s3://BUCKET/PREFIX.
    #[arg(long)]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub s3: S3Args,
    /// Override a DLIO workload key, e.g. dataset.num_files_train=64 (repeatable).
    #[arg(long = "param", value_name = "KEY=VALUE", num_args = 1..)]
    pub params: Vec<String>,
    /// A DLIO workload YAML used instead of the embedded one.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Overwrite existing data files.
    #[arg(long)]
    pub force: bool,
    /// Client host memory in GiB for mlpstorage's dataset-size rule (default: this host's).
    #[arg(long)]
    pub client_memory_gb: Option<f64>,
    /// Number of client hosts for the dataset-size rule.
    #[arg(long, default_value_t = 1)]
    pub num_client_hosts: u64,
    /// Accelerators (num_processes) for the dataset-size rule.
    #[arg(long, default_value_t = 1)]
    pub accelerators: u64,
    /// Writer threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
}

/// Emulate DLIO training over a dataset and report DLIO's metrics plus measured I/O.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Workload (DLIO model): flux or unet3d.
    #[arg(long, value_enum, required_unless_present = "config")]
    pub workload: Option<Workload>,
    /// Accelerator type; selects DLIO's <model>_<accelerator>.yaml.
    #[arg(long, value_enum, default_value_t = Accelerator::B200)]
    pub accelerator_type: Accelerator,
    /// Dataset root (as given to datagen); reads DIR/<model>/train. A path,
    /// file://PATH or s3://BUCKET/PREFIX.
    #[arg(long)]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub s3: S3Args,
    /// Simulated accelerators (ranks).
    #[arg(long, default_value_t = 1)]
    pub accelerators: usize,
    /// Reader workers per accelerator (reader.read_threads).
    #[arg(long)]
    pub read_threads: Option<u64>,
    /// Seconds of simulated compute per step (train.computation_time); 0 = pure read speed.
    #[arg(long)]
    pub computation_time: Option<f64>,
    /// Reader strategy.
    #[arg(long, value_enum, default_value_t = ReaderKind::Raw)]
    pub reader: ReaderKind,
    /// Read with O_DIRECT (reader.odirect=True).
    #[arg(long)]
    pub odirect: bool,
    /// Override a DLIO workload key, e.g. reader.batch_size=4 (repeatable).
    #[arg(long = "param", value_name = "KEY=VALUE", num_args = 1..)]
    pub params: Vec<String>,
    /// A DLIO workload YAML used instead of the embedded one.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where to write summary.json etc. (default results/training/<model>/run/<YYYYMMDD_HHMMSS>).
    #[arg(long)]
    pub results_dir: Option<PathBuf>,
    /// Epochs (train.epochs).
    #[arg(long)]
    pub epochs: Option<u32>,
}

impl DatagenArgs {
    /// The library options these arguments stand for.
    pub fn options(&self) -> DatagenOptions {
        DatagenOptions {
            workload: self.workload,
            accelerator: self.accelerator_type,
            config_file: self.config.clone(),
            params: self.params.clone(),
            data_dir: PathBuf::from(strip_file_scheme(&self.data_dir.to_string_lossy())),
            force: self.force,
            threads: self.threads,
            progress: std::io::stderr().is_terminal(),
            client_memory_gb: self.client_memory_gb,
            num_client_hosts: self.num_client_hosts,
            accelerators: self.accelerators,
            print: true,
        }
    }
}

impl BenchArgs {
    /// The library options these arguments stand for.
    pub fn options(&self) -> BenchOptions {
        BenchOptions {
            workload: self.workload,
            accelerator: self.accelerator_type,
            config_file: self.config.clone(),
            params: self.params.clone(),
            data_dir: PathBuf::from(strip_file_scheme(&self.data_dir.to_string_lossy())),
            accelerators: self.accelerators,
            read_threads: self.read_threads,
            computation_time: self.computation_time,
            epochs: self.epochs,
            odirect: self.odirect,
            reader: self.reader,
            results_dir: self.results_dir.clone(),
            progress: std::io::stderr().is_terminal(),
            print: true,
        }
    }
}

/// `storprof datagen`.
pub fn run_datagen(args: &DatagenArgs) -> anyhow::Result<()> {
    let opts = args.options();
    let storage =
        storage_for_data_dir(&opts.data_dir.to_string_lossy(), false, &args.s3.options())?;
    datagen::run_datagen(&opts, &*storage).context("datagen")?;
    Ok(())
}

/// `storprof bench`.
pub fn run_bench(args: &BenchArgs) -> anyhow::Result<()> {
    let opts = args.options();
    run_bench_on(&opts, &args.s3.options())?;
    Ok(())
}

/// Run the benchmark over local files (or an s3:// data dir configured from
/// the AWS environment) with the chosen reader.
pub fn run_bench_local(opts: &BenchOptions) -> anyhow::Result<bench::BenchReport> {
    run_bench_on(opts, &S3Options::default())
}

/// Run the benchmark over the storage `opts.data_dir` names (local path or
/// s3://BUCKET/PREFIX, the latter with `s3`).
pub fn run_bench_on(opts: &BenchOptions, s3: &S3Options) -> anyhow::Result<bench::BenchReport> {
    let cfg = opts.raw_config()?.to_config()?;
    let storage = storage_for_data_dir(&opts.data_dir.to_string_lossy(), cfg.odirect, s3)?;
    let kind = opts.reader;
    let ranks = opts.accelerators.max(1) as u64;
    let rank_samples = (cfg.num_files_train * cfg.num_samples_per_file).div_ceil(ranks);
    let factory = |cfg: &crate::config::DlioConfig, _rank: usize| {
        bench::make_local_reader(cfg, kind, Arc::clone(&storage), rank_samples)
    };
    let report = bench::run_bench(opts, storage.as_ref(), &factory).context("bench")?;
    Ok(report)
}
