//! `storprof bench` as a library call: config → dataset check → plan →
//! training → metrics → output files.
//!
//! ```text
//!  BenchOptions ─► config::load + flag overrides ─► DlioConfig
//!      DIR/<model>/train listed (Storage::list) ─► TrainPlan (errors before anything is written)
//!      memory guard (run::memory: refuse, or --fit-memory caps reader.prefetch_workers)
//!      make_reader(rank) × local ranks ─► RankSet::train (ConsoleObserver prints [OUTPUT])
//!          InProcess: all ranks as threads (engine::run_training_until)
//!          MpiWorld (feature "mpi"): this process's rank; rank 0 gathers every rank's timings
//!      (reporting process only) metrics::{block,epoch,run}_metrics + output::Measured
//!          ─► [METRIC] block, results dir files
//! ```
//! Both rank sets hand the reporter the same `TrainResult`, so one code path
//! computes DLIO's metrics (`outcome`). Beside this file: `dataset` (the
//! training files), `validity` (the run rules), `memory_guard`, `console`,
//! `records` (the results directory's files) and `reporting` (what follows
//! training: metrics, files, `[METRIC]` block). With `handle_signals`, Ctrl-C stops the run at a
//! step boundary and the metrics cover the steps that completed.
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Local};
use indicatif::{ProgressBar, ProgressStyle};

use super::datagen::subfolder_of;
use super::mlpstorage;
use super::{interrupt, memory};
use crate::config::checkpoint::CheckpointSchedule;
use crate::config::rules::{self, Division};
use crate::config::{self, Accelerator, DlioConfig, RawConfig, Workload};
use crate::engine::{RankResult, TrainObserver, TrainPlan, TrainResult, run_training_until};
use crate::error::BenchError;
use crate::format::{FormatKind, npz, parquet};
use crate::metrics::{
    BlockMetrics, ExcludeSteps, RankEpoch, ReadStats, RunMetrics, block_metrics, epoch_metrics,
    run_metrics,
};
use crate::metrics::{CheckpointSave, TrainingCheckpointMetrics, training_checkpoint_metrics};
use crate::output::{self, HostFacts, Interruption, Measured, SummaryFacts};
use crate::reader::{self, ReaderKind, ReaderOptions, SampleReader};
use crate::storage::{DEFAULT_POOL_BYTES, Storage};

mod console;
mod dataset;
mod memory_guard;
mod outcome;
mod records;
mod reporting;
mod validity;

pub use dataset::{list_training_files, train_dir};
pub use outcome::epochs_in_metrics;
use outcome::{checkpoint_metrics_of, dlio_metrics, interruption_at};
pub use validity::{run_validity, validity_messages};

use console::ConsoleObserver;
pub use memory_guard::reader_memory;
use memory_guard::{guard_memory, reserve_read_buffers};
use records::{add_checkpoint_summary, write_json, write_mlpstorage_files, write_rank_files};
use reporting::{
    RunOutcome, copy_summary_to_session, measure_outcome, print_metrics_and_log, write_result_files,
};

/// Options of one benchmark run. Defaults: no workload (must be set unless
/// `config_file` is), accelerator b200, 1 accelerator, `raw` reader, the
/// workload's own read_threads / computation_time / epochs, no O_DIRECT,
/// results under `results/training/<model>/run/<YYYYMMDD_HHMMSS>/`, no
/// progress bar, signals not handled.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub workload: Option<Workload>,
    pub accelerator: Accelerator,
    /// A DLIO workload YAML used instead of the embedded one.
    pub config_file: Option<PathBuf>,
    /// `KEY=VALUE` overrides with DLIO's dotted keys, applied in order.
    pub params: Vec<String>,
    /// `--data-dir`; the dataset is `DIR/<model>/train`.
    pub data_dir: PathBuf,
    /// Simulated accelerators (ranks).
    pub accelerators: usize,
    /// Overrides `reader.read_threads`.
    pub read_threads: Option<u64>,
    /// Overrides `train.computation_time` (seconds, fixed).
    pub computation_time: Option<f64>,
    /// Overrides `train.epochs`.
    pub epochs: Option<u32>,
    /// Sets `reader.odirect`.
    pub odirect: bool,
    pub reader: ReaderKind,
    pub results_dir: Option<PathBuf>,
    /// Show a progress bar per epoch (only meaningful on a terminal).
    pub progress: bool,
    /// Print `[OUTPUT]`/`[METRIC]` lines to stdout.
    pub print: bool,
    /// Install SIGINT/SIGTERM handlers that stop the run at the next step
    /// boundary (results are still written, marked interrupted).
    pub handle_signals: bool,
    /// When the reader memory estimate exceeds the budget, lower
    /// `reader.prefetch_workers` to fit instead of refusing. Default false.
    pub fit_memory: bool,
    /// Memory the guard plans against, bytes. Default `None`: MemAvailable.
    pub memory_available: Option<u64>,
    /// Check the overrides against an MLPerf Storage division's rules
    /// (refused before anything runs). Default `None`: no check.
    pub division: Option<Division>,
    /// Client host memory in GiB for the dataset-size rule. Default `None`:
    /// this host's MemTotal.
    pub client_memory_gb: Option<f64>,
    /// Client hosts for the dataset-size rule. Default 1.
    pub num_client_hosts: u64,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            workload: None,
            accelerator: Accelerator::B200,
            config_file: None,
            params: Vec::new(),
            data_dir: PathBuf::from("data"),
            accelerators: 1,
            read_threads: None,
            computation_time: None,
            epochs: None,
            odirect: false,
            reader: ReaderKind::Raw,
            results_dir: None,
            progress: false,
            print: true,
            handle_signals: false,
            fit_memory: false,
            memory_available: None,
            division: None,
            client_memory_gb: None,
            num_client_hosts: 1,
        }
    }
}

impl BenchOptions {
    /// The effective `KEY=VALUE` overrides: `--param`s, then the flags.
    pub fn effective_params(&self) -> Vec<String> {
        let mut params = self.params.clone();
        if let Some(n) = self.read_threads {
            params.push(format!("reader.read_threads={n}"));
        }
        if let Some(t) = self.computation_time {
            params.push(format!("train.computation_time={t}"));
        }
        if let Some(e) = self.epochs {
            params.push(format!("train.epochs={e}"));
        }
        if self.odirect {
            params.push("reader.odirect=True".to_string());
        }
        params
    }

    /// The effective configuration: workload YAML, `--param`s, then the flags.
    pub fn raw_config(&self) -> Result<RawConfig, BenchError> {
        let params = self.effective_params();
        if let Some(division) = self.division {
            rules::check_overrides(
                division,
                self.workload,
                self.accelerator,
                self.config_file.is_some(),
                &params,
            )?;
        }
        config::load(
            self.workload,
            self.accelerator,
            self.config_file.as_deref(),
            &params,
        )
    }
}

/// Creates the reader of one rank.
pub type ReaderFactory<'a> =
    dyn Fn(&DlioConfig, usize) -> Result<Arc<dyn SampleReader>, BenchError> + 'a;

/// What a run produced.
#[derive(Clone, Debug)]
pub struct BenchReport {
    pub results_dir: PathBuf,
    pub metrics: RunMetrics,
    pub measured: Measured,
    pub summary: serde_json::Value,
    /// The signal that stopped the run early, if one did.
    pub interrupted_by: Option<i32>,
    /// Every rank's step timings (what the metrics were computed from).
    pub result: TrainResult,
    /// The steps DLIO's metrics leave out (`output.metric.exclude_*_steps`).
    pub exclude: ExcludeSteps,
    /// Epochs (from the first) the metrics cover.
    pub epochs_in_metrics: usize,
}

/// Where the simulated accelerators run, and how rank 0 learns every rank's timings.
pub trait RankSet {
    /// Number of ranks (DLIO's `comm_size`).
    fn size(&self) -> usize;
    /// The ranks this process runs.
    fn local_ranks(&self) -> Vec<usize>;
    /// This process prints and writes the results (rank 0's process).
    fn is_reporter(&self) -> bool;
    /// Run the local ranks (`readers[i]` is `local_ranks()[i]`'s reader). The
    /// reporter gets every rank's result and every host's facts (its own first);
    /// the others get `None`.
    fn train(
        &self,
        plan: &TrainPlan,
        readers: &[Arc<dyn SampleReader>],
        observer: &dyn TrainObserver,
        stop: &AtomicBool,
    ) -> Result<Option<Trained>, BenchError>;
}

/// What the reporter gets from [`RankSet::train`].
#[derive(Clone, Debug)]
pub struct Trained {
    pub result: TrainResult,
    /// One entry per host, the reporter's first.
    pub hosts: Vec<HostFacts>,
    /// `rank_hosts[rank]` indexes `hosts`.
    pub rank_hosts: Vec<usize>,
}

/// All ranks as threads of this process (`--accelerators N`).
#[derive(Clone, Copy, Debug)]
pub struct InProcess(pub usize);

impl RankSet for InProcess {
    fn size(&self) -> usize {
        self.0.max(1)
    }
    fn local_ranks(&self) -> Vec<usize> {
        (0..self.size()).collect()
    }
    fn is_reporter(&self) -> bool {
        true
    }
    fn train(
        &self,
        plan: &TrainPlan,
        readers: &[Arc<dyn SampleReader>],
        observer: &dyn TrainObserver,
        stop: &AtomicBool,
    ) -> Result<Option<Trained>, BenchError> {
        let result = run_training_until(plan, readers, observer, stop)?;
        let rank_hosts = vec![0; result.ranks.len()];
        Ok(Some(Trained {
            result,
            hosts: vec![HostFacts::read()],
            rank_hosts,
        }))
    }
}

/// A checked, ready-to-run benchmark: nothing has been written yet.
pub struct Prepared {
    pub raw: RawConfig,
    pub cfg: DlioConfig,
    pub plan: TrainPlan,
    pub train_dir: String,
    pub dataset_bytes: u64,
}

/// Validate options, configuration and dataset. Errors name the key or path.
pub fn prepare(opts: &BenchOptions, storage: &dyn Storage) -> Result<Prepared, BenchError> {
    prepare_for(opts, storage, opts.accelerators)
}

/// [`prepare`] for `comm_size` ranks (under MPI: the world size).
pub fn prepare_for(
    opts: &BenchOptions,
    storage: &dyn Storage,
    comm_size: usize,
) -> Result<Prepared, BenchError> {
    if comm_size == 0 {
        return Err(BenchError::usage(
            "--accelerators",
            "--accelerators must be at least 1".into(),
        ));
    }
    let raw = opts.raw_config()?;
    let cfg = raw.to_config()?;
    let data_dir = &opts.data_dir;
    // Object-store data dirs are checked by listing through `storage` below.
    missing_data_dir(opts, storage)?;
    let dir = train_dir(data_dir, &cfg.model);
    let dir_s = dir.to_string_lossy().to_string();
    let (files, dataset_bytes) = list_training_files(storage, &cfg, &dir)?;
    let plan = TrainPlan::new(&cfg, files, comm_size)?;
    Ok(Prepared {
        raw,
        cfg,
        plan,
        train_dir: dir_s,
        dataset_bytes,
    })
}

/// Run the benchmark with all ranks in this process: prepare, train, print and write results.
pub fn run_bench(
    opts: &BenchOptions,
    storage: &dyn Storage,
    make_reader: &ReaderFactory<'_>,
) -> Result<BenchReport, BenchError> {
    run_bench_on(opts, storage, make_reader, &InProcess(opts.accelerators))?
        .ok_or_else(|| BenchError::Internal("the in-process run produced no report".into()))
}

/// Run the benchmark over `ranks`; the reporting process gets the report, the others `None`.
pub fn run_bench_on(
    opts: &BenchOptions,
    storage: &dyn Storage,
    make_reader: &ReaderFactory<'_>,
    ranks: &dyn RankSet,
) -> Result<Option<BenchReport>, BenchError> {
    let mut p = prepare_for(opts, storage, ranks.size())?;
    let local_ranks = ranks.local_ranks().len() as u64;
    let memory = guard_memory(opts, storage, &mut p, local_ranks, ranks.is_reporter())?;
    reserve_read_buffers(storage, &memory, ranks.is_reporter())?;
    let readers = ranks
        .local_ranks()
        .into_iter()
        .map(|r| make_reader(&p.cfg, r))
        .collect::<Result<Vec<_>, _>>()?;
    let reporter = ranks.is_reporter();
    let results_dir = match &opts.results_dir {
        Some(d) => d.clone(),
        None => mlpstorage::default_dir(&p.cfg.model, "run", &Local::now()),
    };
    if reporter {
        log_plan(&p);
    }
    let exclude = ExcludeSteps {
        start: p.cfg.exclude_start_steps,
        end: p.cfg.exclude_end_steps,
    };
    let console = ConsoleObserver::new(opts, &p, exclude, reporter);
    let validity = announce_run(opts, &p, &console);
    let never = AtomicBool::new(false);
    let stop = stop_flag(opts, &never)?;
    let requests_before = storage.request_counts();
    let Some(trained) = ranks.train(&p.plan, &readers, &console, stop)? else {
        return Ok(None);
    };
    let end = Local::now();

    let outcome = measure_outcome(opts, storage, &p, &trained.result, exclude, requests_before);
    let (summary, checkpoint_metrics) =
        write_result_files(opts, &p, &results_dir, &trained, &outcome, &validity, &end)?;
    print_metrics_and_log(
        &console,
        &p,
        &results_dir,
        &outcome,
        checkpoint_metrics.as_ref(),
    )?;
    copy_summary_to_session(&summary)?;
    let RunOutcome {
        counted,
        metrics,
        interrupted_by,
        measured,
        ..
    } = outcome;
    Ok(Some(BenchReport {
        results_dir,
        metrics,
        measured,
        summary,
        interrupted_by,
        result: trained.result,
        exclude,
        epochs_in_metrics: counted,
    }))
}

/// Prints the run's header lines and the run rules' verdict through the
/// console; the verdict.
fn announce_run(
    opts: &BenchOptions,
    p: &Prepared,
    console: &ConsoleObserver,
) -> rules::RunValidity {
    for m in output::header_messages(
        p.plan.comm_size,
        p.plan.steps_per_epoch,
        p.plan.samples_per_file,
        p.plan.files.len() as u64,
        p.plan.batch_size,
    ) {
        console.say(&Local::now(), &m);
    }
    let validity = run_validity(opts, p);
    for m in validity_messages(&validity) {
        console.say(&Local::now(), &m);
    }
    validity
}

/// The flag that stops training: the signal handlers' (installed here)
/// with `handle_signals`, else `never`, which nothing sets.
fn stop_flag<'a>(opts: &BenchOptions, never: &'a AtomicBool) -> Result<&'a AtomicBool, BenchError> {
    if opts.handle_signals {
        interrupt::install()?;
        Ok(&interrupt::STOP)
    } else {
        Ok(never)
    }
}

/// Logs what the plan ignores and its checkpoints (the reporting
/// process only).
fn log_plan(p: &Prepared) {
    let ignored = p.raw.ignored_keys();
    if !ignored.is_empty() {
        log::info!(
            "keys accepted for DLIO compatibility but without effect here: {}",
            ignored.join(", ")
        );
    }
    if let Some(c) = &p.plan.checkpoints {
        let when = match c.schedule {
            CheckpointSchedule::Epochs {
                after_epoch,
                between,
            } => format!("after epoch {after_epoch} and every {between} epoch(s) after it"),
            CheckpointSchedule::Steps { every } => format!("every {every} steps of each epoch"),
        };
        log::info!(
            "checkpoints: {} B of model state per writing rank ({:?}), {when}, into {}{}",
            c.model_bytes,
            c.writers,
            c.folder.display(),
            if c.fsync { ", fsynced" } else { "" }
        );
        if let CheckpointSchedule::Epochs { after_epoch, .. } = c.schedule
            && after_epoch > p.plan.epochs
        {
            log::warn!(
                "checkpoint.checkpoint_after_epoch {after_epoch} > train.epochs {}: no checkpoint will be saved",
                p.plan.epochs
            );
        }
    }
}

/// An I/O error about `path`.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError {
    let path = path.to_path_buf();
    move |source| BenchError::Io { path, source }
}

/// The reader of one rank for a config: `reader::make_reader` over the
/// format and storage. `rank_samples` is the rank's shard size (dlio-legacy
/// formats an index map of that many entries per sample, as DLIO does).
pub fn make_local_reader(
    cfg: &DlioConfig,
    kind: ReaderKind,
    storage: Arc<dyn Storage>,
    rank_samples: u64,
) -> Result<Arc<dyn SampleReader>, BenchError> {
    let options = ReaderOptions {
        odirect: cfg.odirect,
        total_rank_samples: rank_samples,
        coalesce_rgs: usize::try_from(cfg.coalesce_rgs).unwrap_or(1),
        prefetch_workers: usize::try_from(cfg.prefetch_workers).unwrap_or(1),
        read_columns: cfg.parquet_read_columns(),
        ..ReaderOptions::default()
    };
    reader::make_reader(cfg.format, kind, storage, options)
}

/// The `storprof datagen` command that writes the dataset `opts` reads:
/// the same workload (or config file), accelerator and parameters.
/// A local data dir that does not exist, as an error that says how to
/// make it (object-store data dirs are checked by listing them).
pub(crate) fn missing_data_dir(
    opts: &BenchOptions,
    storage: &dyn Storage,
) -> Result<(), BenchError> {
    if storage.is_remote() || opts.data_dir.is_dir() {
        return Ok(());
    }
    Err(BenchError::Dataset(format!(
        "data dir {} does not exist (generate it with `{}`)",
        opts.data_dir.display(),
        datagen_command(opts)
    )))
}

pub(crate) fn datagen_command(opts: &BenchOptions) -> String {
    use clap::ValueEnum;
    let quote = |s: &str| {
        if s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+".contains(c))
        {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', "'\\''"))
        }
    };
    let mut cmd = vec!["storprof datagen".to_string()];
    if let Some(w) = opts.workload.and_then(|w| w.to_possible_value()) {
        cmd.push(format!("--workload {}", w.get_name()));
    }
    if let Some(c) = &opts.config_file {
        cmd.push(format!("--config {}", quote(&c.to_string_lossy())));
    }
    let default = opts.workload.map_or_else(
        Default::default,
        crate::config::Workload::default_accelerator,
    );
    if opts.accelerator != default {
        cmd.push(format!("--accelerator-type {}", opts.accelerator.name()));
    }
    for p in &opts.params {
        cmd.push(format!("--param {}", quote(p)));
    }
    cmd.push(format!(
        "--data-dir {}",
        quote(&opts.data_dir.to_string_lossy())
    ));
    cmd.join(" ")
}
