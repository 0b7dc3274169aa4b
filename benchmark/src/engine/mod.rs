//! The training emulation: DLIO's `_train` loop over simulated accelerators.
//!
//! ```text
//!  rank r (one thread per simulated accelerator; an MPI mode reuses run_rank)
//!   ├─ worker 0..W (read_threads): batches w, w+W, …  ──SampleReader::read_samples──► storage
//!   │     each holds ≤ prefetch_factor batches (read or being read), like torch's DataLoader
//!   └─ consumer: for step in 0..steps:
//!          start_loading → recv batch (round-robin over workers) → batch_loaded
//!          → start_compute → sleep(computation_time) → batch_processed
//!          → collective.barrier_agree(stop) (simulated allreduce; stop = Ctrl-C seen)
//!  ⇒ per epoch: metrics::BlockTimings + summed ReadStats
//! ```
//!
//! The rank's samples are its contiguous shard `[r⌈T/P⌉, (r+1)⌈T/P⌉)`,
//! shuffled with `seed + epoch` when `sample_shuffle` is set; steps per epoch
//! are `floor(spf × files / batch / comm_size)`.
//!
//! A stop request (the `stop` flag, set by `run::interrupt` on SIGINT/SIGTERM)
//! ends every rank after the same step: the epoch in progress is kept with
//! the steps it completed, and [`TrainResult::interrupted`] is set.
//!
//! The engine sits on `reader` (and the plain data of `config` and
//! `metrics`) and knows nothing of output, signals or MPI: `run` wires those
//! in (an MPI rank set implements [`collective::Collective`] and calls
//! [`run_rank`]).
pub mod collective;
pub mod rng;
pub mod sampler;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::checkpoint::TrainingCheckpoints;
use crate::config::{DlioConfig, Shuffle, TimeSpec};
use crate::error::BenchError;
use crate::metrics::CheckpointSave;
pub use crate::metrics::RankEpoch;
use crate::metrics::{BlockTimings, ReadStats};
use crate::reader::SampleReader;
use crate::storage::checkpoint_write::BlockSource;
use collective::{Collective, ThreadCollective};
use rng::Rng;

/// What the engine runs: everything it needs, nothing about output.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainPlan {
    /// Training files (paths for `Storage::open`), sorted, `num_files_train` of them.
    pub files: Vec<String>,
    pub samples_per_file: u64,
    pub batch_size: u64,
    /// Simulated accelerators (DLIO's `comm_size`).
    pub comm_size: usize,
    /// Reader workers per rank; 0 reads in the consumer (no prefetch).
    pub read_threads: usize,
    /// Batches each worker may hold (read or being read): ceil(prefetch_size / read_threads).
    pub prefetch_factor: usize,
    pub epochs: u32,
    pub steps_per_epoch: u64,
    pub computation_time: TimeSpec,
    /// Shuffle the rank's shard each epoch.
    pub sample_shuffle: bool,
    pub seed: u64,
    pub seed_change_epoch: bool,
    /// Checkpoints saved during training (`workflow.checkpoint`).
    pub checkpoints: Option<TrainingCheckpoints>,
}

impl TrainPlan {
    /// Plan from a typed config, the training files found, and the number of ranks.
    /// Errors when the parameters give zero steps.
    pub fn new(cfg: &DlioConfig, files: Vec<String>, comm_size: usize) -> Result<Self, BenchError> {
        let comm_size = comm_size.max(1);
        let steps = cfg.steps_per_epoch(comm_size as u64);
        if steps == 0 {
            return Err(BenchError::BadParam {
                key: "reader.batch_size".into(),
                reason: format!(
                    "zero steps per epoch: {} samples per file × {} files / batch size {} / {} accelerator(s) < 1; \
                     lower reader.batch_size or raise dataset.num_files_train",
                    cfg.num_samples_per_file, cfg.num_files_train, cfg.batch_size, comm_size
                ),
            });
        }
        Ok(TrainPlan {
            files,
            samples_per_file: cfg.num_samples_per_file,
            batch_size: cfg.batch_size,
            comm_size,
            read_threads: usize::try_from(cfg.read_threads).unwrap_or(usize::MAX),
            prefetch_factor: usize::try_from(cfg.prefetch_factor()).unwrap_or(1),
            epochs: cfg.epochs,
            steps_per_epoch: steps,
            computation_time: cfg.computation_time,
            sample_shuffle: cfg.sample_shuffle != Shuffle::Off,
            seed: cfg.seed,
            seed_change_epoch: cfg.seed_change_epoch,
            checkpoints: cfg.checkpoints.clone(),
        })
    }

    fn total_samples(&self) -> u64 {
        self.samples_per_file * self.files.len() as u64
    }

    /// The batches rank `rank` consumes in `epoch` (1-based), as global
    /// sample indices (materialized: for tests and small epochs).
    pub fn rank_batches(&self, rank: usize, epoch: u32) -> Vec<Vec<u64>> {
        let order = self.rank_epoch_order(rank, epoch);
        let mut scratch = Vec::new();
        (0..self.batches_in(&order))
            .map(|i| order.batch(i, self.batch_size, &mut scratch).to_vec())
            .collect()
    }

    /// Rank `rank`'s samples in the order `epoch` (1-based) reads them.
    pub fn rank_epoch_order(&self, rank: usize, epoch: u32) -> sampler::EpochOrder {
        let shuffle_seed = self.sample_shuffle.then(|| {
            if self.seed_change_epoch {
                self.seed.wrapping_add(u64::from(epoch))
            } else {
                self.seed
            }
        });
        sampler::epoch_order(self.total_samples(), rank, self.comm_size, shuffle_seed)
    }

    /// Batches read in an epoch of `order`: its full batches, at most the
    /// plan's steps per epoch.
    pub fn batches_in(&self, order: &sampler::EpochOrder) -> u64 {
        order
            .full_batches(self.batch_size)
            .min(self.steps_per_epoch)
    }
}

/// Everything one rank recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct RankResult {
    pub rank: usize,
    /// Completed epochs, then the interrupted one (with its completed steps) if stopped.
    pub epochs: Vec<RankEpoch>,
    /// The run was stopped before its last step.
    pub stopped: bool,
}

/// The whole run.
#[derive(Clone, Debug)]
pub struct TrainResult {
    /// Wall-clock start of the run (the zero of every relative time).
    pub started: chrono::DateTime<chrono::Local>,
    /// Seconds from start to the last rank's end.
    pub elapsed: f64,
    pub ranks: Vec<RankResult>,
    /// Stopped early by a stop request (Ctrl-C); the ranks agree on the step.
    pub interrupted: bool,
}

impl TrainResult {
    /// Read statistics summed over ranks and epochs.
    pub fn read_total(&self) -> ReadStats {
        let mut t = ReadStats::default();
        for r in &self.ranks {
            for e in &r.epochs {
                t += e.read;
            }
        }
        t
    }
}

/// Rank 0 reports progress through this (printing, progress bars).
/// Times are seconds since the run's start.
pub trait TrainObserver: Sync {
    fn epoch_started(&self, _epoch: u32, _steps: u64, _at: f64) {}
    fn step_done(&self, _epoch: u32, _step: u64) {}
    fn epoch_ended(&self, _epoch: RankEpoch) {}
    fn checkpoint_saved(&self, _save: &CheckpointSave) {}
}

/// An observer that does nothing.
pub struct Quiet;
impl TrainObserver for Quiet {}

/// Run all ranks as threads of this process. `readers[r]` is rank r's reader
/// (shared by its workers); there must be `plan.comm_size` of them.
pub fn run_training(
    plan: &TrainPlan,
    readers: &[Arc<dyn SampleReader>],
    observer: &dyn TrainObserver,
) -> Result<TrainResult, BenchError> {
    run_training_until(plan, readers, observer, &AtomicBool::new(false))
}

/// [`run_training`] that stops every rank after the step during which `stop` was set.
pub fn run_training_until(
    plan: &TrainPlan,
    readers: &[Arc<dyn SampleReader>],
    observer: &dyn TrainObserver,
    stop: &AtomicBool,
) -> Result<TrainResult, BenchError> {
    if readers.len() != plan.comm_size {
        return Err(BenchError::Internal(format!(
            "{} readers for {} accelerators",
            readers.len(),
            plan.comm_size
        )));
    }
    let collective = ThreadCollective::new(plan.comm_size);
    let clock = Clock::new();
    let started = chrono::Local::now();
    let results: Vec<Result<RankResult, BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = readers
            .iter()
            .enumerate()
            .map(|(rank, reader)| {
                let collective = &collective;
                let clock = &clock;
                let reader = Arc::clone(reader);
                s.spawn(move || {
                    let obs: Option<&dyn TrainObserver> = (rank == 0).then_some(observer);
                    let r = run_rank(plan, rank, reader.as_ref(), collective, clock, obs, stop);
                    if r.is_err() {
                        collective.abort();
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(rank, h)| h.join().unwrap_or(Err(BenchError::RankPanicked { rank })))
            .collect()
    });
    let elapsed = clock.now();
    let mut ranks = Vec::with_capacity(results.len());
    let mut first_err = None;
    for r in results {
        match r {
            Ok(rr) => ranks.push(rr),
            // Prefer the error that caused the abort over the "aborted" ones.
            Err(e) => {
                let is_abort = matches!(e, BenchError::Aborted { .. });
                if first_err.is_none()
                    || (!is_abort && matches!(first_err, Some(BenchError::Aborted { .. })))
                {
                    first_err = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    let interrupted = ranks.iter().any(|r| r.stopped);
    Ok(TrainResult {
        started,
        elapsed,
        ranks,
        interrupted,
    })
}

/// Seconds since a fixed origin, shared by all ranks.
#[derive(Debug)]
pub struct Clock(Instant);

impl Clock {
    pub fn new() -> Self {
        Clock(Instant::now())
    }
    pub fn now(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

type BatchResult = Result<ReadStats, BenchError>;

/// Read one batch: one `read_samples` call per file it touches.
fn read_batch(
    plan: &TrainPlan,
    reader: &dyn SampleReader,
    batch: &sampler::FileBatch,
) -> BatchResult {
    let mut stats = ReadStats::default();
    for fr in batch.files() {
        let path = plan.files.get(fr.file).ok_or_else(|| {
            BenchError::Internal(format!(
                "sample index beyond the {} training files",
                plan.files.len()
            ))
        })?;
        stats += reader.read_samples(path, &fr.rows)?;
    }
    Ok(stats)
}

/// One rank's whole run (all epochs). `observer` is given to rank 0 only.
/// `stop` is this rank's stop request; the ranks agree on it at each barrier.
pub fn run_rank(
    plan: &TrainPlan,
    rank: usize,
    reader: &dyn SampleReader,
    collective: &dyn Collective,
    clock: &Clock,
    observer: Option<&dyn TrainObserver>,
    stop: &AtomicBool,
) -> Result<RankResult, BenchError> {
    let aborted = || BenchError::Aborted { rank };
    let mut rng = Rng::new(plan.seed ^ (rank as u64).wrapping_mul(0x1000_0000_01B3));
    let mut epochs = Vec::with_capacity(plan.epochs as usize);
    let mut stopped = false;
    let mut ckpt = RankCheckpoints {
        source: match &plan.checkpoints {
            Some(c) => c.source(rank)?,
            None => None,
        },
        saves: Vec::new(),
    };
    for epoch in 1..=plan.epochs {
        reader.start_epoch(epoch);
        let order = plan.rank_epoch_order(rank, epoch);
        let batches = Batches {
            order: &order,
            count: plan.batches_in(&order),
            size: plan.batch_size,
            samples_per_file: plan.samples_per_file,
        };
        if collective
            .barrier_agree(stop.load(Ordering::SeqCst))
            .map_err(|_| aborted())?
        {
            stopped = true;
            break;
        }
        let start = clock.now();
        if let Some(o) = observer {
            o.epoch_started(epoch, batches.count, start);
        }
        let (block, read, stopped_in_epoch) = run_epoch(
            plan, rank, reader, collective, clock, batches, &mut rng, epoch, observer, stop,
            &mut ckpt,
        )?;
        // DLIO saves a by-epoch checkpoint inside the epoch, after its last
        // step's barrier and one more; the directory is named with the step
        // count + 1 (its `overall_step` after the loop).
        if let Some(c) = &plan.checkpoints
            && !stopped_in_epoch
            && c.schedule.after_epoch(epoch)
        {
            collective.barrier().map_err(|_| aborted())?;
            let steps = block.compute.len() as u64;
            ckpt.save(c, rank, epoch, steps + 1, clock, observer)?;
        }
        let e = RankEpoch {
            epoch,
            start,
            end: clock.now(),
            block,
            read,
            checkpoints: std::mem::take(&mut ckpt.saves),
        };
        if let Some(o) = observer {
            o.epoch_ended(e.clone());
        }
        epochs.push(e);
        if stopped_in_epoch {
            stopped = true;
            break;
        }
    }
    Ok(RankResult {
        rank,
        epochs,
        stopped,
    })
}

/// An epoch's batches: the first `count` batches of `size` samples of `order`.
#[derive(Clone, Copy)]
struct Batches<'a> {
    order: &'a sampler::EpochOrder,
    count: u64,
    size: u64,
    samples_per_file: u64,
}

impl Batches<'_> {
    /// Batch `i`, per file, into `out` (kept by the caller between batches).
    fn get<'s>(&self, i: u64, out: &'s mut sampler::FileBatch) -> &'s sampler::FileBatch {
        self.order
            .batch_by_file(i, self.size, self.samples_per_file, out);
        out
    }
}

#[allow(clippy::too_many_arguments)]
fn run_epoch(
    plan: &TrainPlan,
    rank: usize,
    reader: &dyn SampleReader,
    collective: &dyn Collective,
    clock: &Clock,
    batches: Batches<'_>,
    rng: &mut Rng,
    epoch: u32,
    observer: Option<&dyn TrainObserver>,
    stop_request: &AtomicBool,
    ckpt: &mut RankCheckpoints,
) -> Result<(BlockTimings, ReadStats, bool), BenchError> {
    let workers = plan.read_threads;
    let stop = AtomicBool::new(false);
    let read_total = Mutex::new(ReadStats::default());
    std::thread::scope(|s| {
        // Channel per worker; capacity prefetch_factor − 1 plus the batch the
        // worker is reading = prefetch_factor batches per worker in flight.
        let mut receivers = Vec::with_capacity(workers);
        for w in 0..workers {
            let (tx, rx) =
                mpsc::sync_channel::<BatchResult>(plan.prefetch_factor.saturating_sub(1));
            receivers.push(rx);
            let stop = &stop;
            s.spawn(move || {
                let mut scratch = sampler::FileBatch::default();
                for i in (w as u64..batches.count).step_by(workers) {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let r = read_batch(plan, reader, batches.get(i, &mut scratch));
                    let failed = r.is_err();
                    if tx.send(r).is_err() || failed {
                        return; // consumer gone, or nothing more worth reading
                    }
                }
            });
        }
        let result = consume(
            plan,
            rank,
            reader,
            collective,
            clock,
            batches,
            &receivers,
            rng,
            epoch,
            observer,
            &read_total,
            stop_request,
            ckpt,
        );
        stop.store(true, Ordering::Relaxed);
        drop(receivers); // unblock workers waiting to send
        result
    })
    .map(|(block, stopped)| {
        let read = read_total.lock().map(|g| *g).unwrap_or_default();
        (block, read, stopped)
    })
}

#[allow(clippy::too_many_arguments)]
fn consume(
    plan: &TrainPlan,
    rank: usize,
    reader: &dyn SampleReader,
    collective: &dyn Collective,
    clock: &Clock,
    batches: Batches<'_>,
    receivers: &[mpsc::Receiver<BatchResult>],
    rng: &mut Rng,
    epoch: u32,
    observer: Option<&dyn TrainObserver>,
    read_total: &Mutex<ReadStats>,
    stop_request: &AtomicBool,
    ckpt: &mut RankCheckpoints,
) -> Result<(BlockTimings, bool), BenchError> {
    let mut b = BlockTimings {
        start: clock.now(),
        ..BlockTimings::default()
    };
    let mut t_load = clock.now();
    let mut scratch = sampler::FileBatch::default();
    for step in 0..batches.count {
        let stats = if receivers.is_empty() {
            read_batch(plan, reader, batches.get(step, &mut scratch))?
        } else {
            receivers[step as usize % receivers.len()]
                .recv()
                .map_err(|_| BenchError::Internal("a reader worker stopped early".into()))??
        };
        if let Ok(mut t) = read_total.lock() {
            *t += stats;
        }
        let t_loaded = clock.now();
        let t_compute = clock.now();
        let secs = draw(plan.computation_time, rng);
        if secs > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(secs));
        }
        let t_done = clock.now();
        b.load.push(t_loaded - t_load);
        b.proc.push(t_done - t_load);
        b.compute.push(t_done - t_compute);
        let stop = collective
            .barrier_agree(stop_request.load(Ordering::SeqCst))
            .map_err(|_| BenchError::Aborted { rank })?;
        if let Some(o) = observer {
            o.step_done(epoch, step + 1);
        }
        if stop {
            b.end = clock.now();
            return Ok((b, true));
        }
        if let Some(c) = &plan.checkpoints
            && c.schedule.after_step(step + 1)
        {
            let t0 = clock.now();
            ckpt.save(c, rank, epoch, step + 1, clock, observer)?;
            b.checkpoint_seconds += clock.now() - t0;
        }
        t_load = clock.now();
    }
    b.end = clock.now();
    Ok((b, false))
}

/// A rank's checkpoint writer state: its content source (made before
/// training) and the saves of the current epoch.
struct RankCheckpoints {
    source: Option<BlockSource>,
    saves: Vec<CheckpointSave>,
}

impl RankCheckpoints {
    /// Save this rank's part of the checkpoint after `step` of `epoch`, timed
    /// from before the first write to after the last fsync (DLIO's
    /// `start_save_ckpt` / `end_save_ckpt` around `save_checkpoint`).
    fn save(
        &mut self,
        c: &TrainingCheckpoints,
        rank: usize,
        epoch: u32,
        step: u64,
        clock: &Clock,
        observer: Option<&dyn TrainObserver>,
    ) -> Result<(), BenchError> {
        let start = clock.now();
        let io = c.save(rank, epoch, step, self.source.as_mut())?;
        let save = CheckpointSave {
            number: u32::try_from(self.saves.len() + 1).unwrap_or(u32::MAX),
            epoch,
            step,
            start,
            end: clock.now(),
            bytes: io.bytes,
            files: io.files,
        };
        if let Some(o) = observer {
            o.checkpoint_saved(&save);
        }
        self.saves.push(save);
        Ok(())
    }
}

/// DLIO's `sleep`: fixed, or Normal(mean, stdev) with `abs()`.
fn draw(t: TimeSpec, rng: &mut Rng) -> f64 {
    if t.stdev > 0.0 {
        rng.normal(t.mean, t.stdev).abs()
    } else {
        t.mean
    }
}
