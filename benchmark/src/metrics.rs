//! DLIO's training metrics, as pure functions over recorded step timings.
//!
//! ```text
//!  BlockTimings (per rank, per epoch: proc/compute per step, block start/end)
//!     │ block_metrics      (statscounter.compute_metrics_train)
//!     ▼
//!  BlockMetrics ── epoch_metrics (step-weighted mean over blocks) ──► EpochMetrics
//!     │ run_metrics        (end_run: AU mean over ranks, throughput sum over ranks,
//!     ▼                     then mean / population stdev over epochs)
//!  RunMetrics  (train_au_mean_percentage, train_throughput_..., train_io_mean_MB_per_second, ...)
//! ```
//!
//! Formulas (shared/reference/dlio.md §4), with `s = exclude_start_steps`
//! (DLIO default 1) and `e = steps − 1 − exclude_end_steps` (default 0):
//! - `total_compute = Σ compute[s..=e]`
//! - `total_time = (end − start) − Σ proc[..s] − Σ proc[e+1..]`
//! - `AU% = 100 × total_compute / total_time`
//! - `throughput = (len(compute) − 2) / total_time × batch_size` (per rank, upstream DLIO)
//! - `train_io_mean_MB_per_second = mean(throughput) × record_size / 2²⁰` (MiB, derived)
//!
//! Plain data beside `config`: the records the engine fills ([`RankEpoch`],
//! [`ReadStats`], [`BlockTimings`]) live here so `output` renders them
//! without importing the engine. Imports nothing of the crate.

/// What one `read_samples` call did, for measured I/O figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Bytes read from storage (what a block/syscall tracer would see).
    pub bytes_read: u64,
    /// Number of read requests issued to storage.
    pub requests: u64,
    /// Samples delivered.
    pub samples: u64,
    /// Bytes of sample data delivered to the consumer (decoded or raw).
    pub sample_bytes: u64,
}

impl std::ops::AddAssign for ReadStats {
    fn add_assign(&mut self, o: Self) {
        self.bytes_read += o.bytes_read;
        self.requests += o.requests;
        self.samples += o.samples;
        self.sample_bytes += o.sample_bytes;
    }
}

/// One epoch of one rank: what the engine records and the output renders.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RankEpoch {
    /// 1-based, as DLIO numbers epochs.
    pub epoch: u32,
    /// Seconds since the run's start (the engine's `TrainResult::started`).
    pub start: f64,
    pub end: f64,
    /// One block per epoch; time spent saving checkpoints between its
    /// steps is left out of its metrics ([`BlockTimings::checkpoint_seconds`]).
    pub block: BlockTimings,
    #[serde(skip)]
    pub read: ReadStats,
    /// Checkpoints this rank saved in the epoch (`workflow.checkpoint`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<CheckpointSave>,
}

/// Step timings of one block (one epoch unless checkpoints split it) of one rank.
/// Times are seconds on any monotonic clock.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BlockTimings {
    /// Block start (`start_block`), before the first batch is requested.
    pub start: f64,
    /// Block end (`end_block`), after the last step's barrier.
    pub end: f64,
    /// Per step: time waiting for the batch (`batch_loaded − start_loading`).
    pub load: Vec<f64>,
    /// Per step: `batch_processed − start_loading` (load + compute).
    pub proc: Vec<f64>,
    /// Per step: `batch_processed − start_compute`.
    pub compute: Vec<f64>,
    /// Seconds between `start` and `end` spent saving checkpoints after a
    /// step (`checkpoint.steps_between_checkpoints`): DLIO ends the block
    /// before such a checkpoint and starts a new one after it, so that time
    /// is not training time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub checkpoint_seconds: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Which steps DLIO leaves out of the metrics (`output.metric.exclude_*_steps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExcludeSteps {
    /// Default 1 (the first step's I/O is warm-up).
    pub start: usize,
    /// Default 0.
    pub end: usize,
}

impl Default for ExcludeSteps {
    fn default() -> Self {
        ExcludeSteps { start: 1, end: 0 }
    }
}

/// Metrics of one block of one rank.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct BlockMetrics {
    pub steps: usize,
    /// `end − start`.
    pub duration: f64,
    pub au_percentage: f64,
    /// Per rank, samples/s.
    pub throughput_samples_per_second: f64,
    /// Mean and population stdev of the counted steps' compute times.
    pub compute_mean: f64,
    pub compute_stdev: f64,
    /// Fewer than 3 steps: DLIO's `(len − 2)` throughput is meaningless (clamped to 0).
    pub too_few_steps: bool,
}

/// DLIO's per-block metrics.
pub fn block_metrics(b: &BlockTimings, batch_size: u64, exclude: ExcludeSteps) -> BlockMetrics {
    let n = b.compute.len();
    let s = exclude.start.min(n);
    // e is inclusive; `last` is the exclusive end of the counted range.
    let last = n.saturating_sub(exclude.end).max(s);
    let counted = &b.compute[s..last];
    let total_compute = sum(counted);
    let excluded_proc =
        sum(&b.proc[..s.min(b.proc.len())]) + sum(&b.proc[last.min(b.proc.len())..]);
    let duration = b.end - b.start - b.checkpoint_seconds;
    let total_time = duration - excluded_proc;
    let (au, throughput) = if total_time > 0.0 {
        let steps_counted = n.saturating_sub(2) as f64;
        (
            100.0 * total_compute / total_time,
            steps_counted / total_time * batch_size as f64,
        )
    } else {
        (0.0, 0.0)
    };
    let (compute_mean, compute_stdev) = mean_std(counted);
    BlockMetrics {
        steps: n,
        duration,
        au_percentage: au,
        throughput_samples_per_second: throughput,
        compute_mean,
        compute_stdev,
        too_few_steps: n < 3,
    }
}

/// Metrics of one epoch of one rank: blocks combined, weighted by steps.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct EpochMetrics {
    pub steps: usize,
    pub au_percentage: f64,
    pub throughput_samples_per_second: f64,
}

/// Step-weighted mean of the blocks' AU and throughput.
pub fn epoch_metrics(blocks: &[BlockMetrics]) -> EpochMetrics {
    let steps: usize = blocks.iter().map(|b| b.steps).sum();
    let weighted = |f: fn(&BlockMetrics) -> f64| -> f64 {
        if steps == 0 {
            0.0
        } else {
            blocks.iter().map(|b| f(b) * b.steps as f64).sum::<f64>() / steps as f64
        }
    };
    EpochMetrics {
        steps,
        au_percentage: weighted(|b| b.au_percentage),
        throughput_samples_per_second: weighted(|b| b.throughput_samples_per_second),
    }
}

/// The run's metrics, DLIO's `summary.json` `metric{}` object.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RunMetrics {
    /// Per epoch: mean AU over ranks.
    pub train_au_percentage: Vec<f64>,
    pub train_au_mean_percentage: f64,
    /// "success" or "fail".
    pub train_au_meet_expectation: String,
    pub train_au_stdev_percentage: f64,
    /// Per epoch: throughput summed over ranks.
    pub train_throughput_samples_per_second: Vec<f64>,
    pub train_throughput_mean_samples_per_second: f64,
    pub train_throughput_stdev_samples_per_second: f64,
    /// mean(throughput) × record_size / 2²⁰ (MiB/s, despite DLIO's name).
    #[serde(rename = "train_io_mean_MB_per_second")]
    pub train_io_mean_mb_per_second: f64,
    #[serde(rename = "train_io_stdev_MB_per_second")]
    pub train_io_stdev_mb_per_second: f64,
}

/// Aggregate `per_rank[rank][epoch]` as DLIO's `end_run` does.
/// `record_size` is the bytes per sample used for the I/O figure, `au_expected`
/// is `metric.au` (a fraction, e.g. 0.90).
pub fn run_metrics(
    per_rank: &[Vec<EpochMetrics>],
    record_size: f64,
    au_expected: f64,
) -> RunMetrics {
    let epochs = per_rank.iter().map(Vec::len).min().unwrap_or(0);
    let ranks = per_rank.len().max(1) as f64;
    let au: Vec<f64> = (0..epochs)
        .map(|e| per_rank.iter().map(|r| r[e].au_percentage).sum::<f64>() / ranks)
        .collect();
    let tp: Vec<f64> = (0..epochs)
        .map(|e| {
            per_rank
                .iter()
                .map(|r| r[e].throughput_samples_per_second)
                .sum::<f64>()
        })
        .collect();
    let (au_mean, au_std) = mean_std(&au);
    let (tp_mean, tp_std) = mean_std(&tp);
    let mib = 1024.0 * 1024.0;
    RunMetrics {
        train_au_meet_expectation: if au_mean >= au_expected * 100.0 {
            "success"
        } else {
            "fail"
        }
        .to_string(),
        train_au_percentage: au,
        train_au_mean_percentage: au_mean,
        train_au_stdev_percentage: au_std,
        train_throughput_samples_per_second: tp,
        train_throughput_mean_samples_per_second: tp_mean,
        train_throughput_stdev_samples_per_second: tp_std,
        train_io_mean_mb_per_second: tp_mean * record_size / mib,
        train_io_stdev_mb_per_second: tp_std * record_size / mib,
    }
}

/// Sum starting from +0.0 (std's float `sum` of nothing is −0.0, which prints as "-0.0000").
fn sum(xs: &[f64]) -> f64 {
    xs.iter().fold(0.0, |a, b| a + b)
}

/// Mean and population standard deviation (numpy's `np.std` default); (0, 0) when empty.
pub fn mean_std(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = sum(xs) / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// One checkpoint one rank saved.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CheckpointSave {
    /// DLIO's block number within the epoch (`save_ckpt<n>`).
    pub number: u32,
    pub epoch: u32,
    /// The step in the directory name.
    pub step: u64,
    /// Seconds on the run's clock.
    pub start: f64,
    pub end: f64,
    /// Bytes this rank wrote (0 for a rank that does not write).
    pub bytes: u64,
    pub files: u64,
}

impl CheckpointSave {
    pub fn seconds(&self) -> f64 {
        (self.end - self.start).max(0.0)
    }
}

/// DLIO's checkpoint figures over the reporting rank's saves (rank 0's
/// per-epoch stats are what DLIO's summary reads): durations in seconds,
/// throughput = checkpoint bytes (GiB) / duration.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
#[allow(non_snake_case)]
pub struct TrainingCheckpointMetrics {
    pub count: usize,
    pub save_checkpoint_duration_mean_seconds: f64,
    pub save_checkpoint_duration_stdev_seconds: f64,
    pub save_checkpoint_io_mean_GB_per_second: f64,
    pub save_checkpoint_io_stdev_GB_per_second: f64,
    pub checkpoint_size_GB: f64,
}

/// The figures for `saves` of a checkpoint of `checkpoint_bytes`.
pub fn training_checkpoint_metrics(
    saves: &[CheckpointSave],
    checkpoint_bytes: u64,
) -> TrainingCheckpointMetrics {
    let gib = checkpoint_bytes as f64 / (1u64 << 30) as f64;
    let durations: Vec<f64> = saves.iter().map(CheckpointSave::seconds).collect();
    let rates: Vec<f64> = durations
        .iter()
        .map(|&d| if d > 0.0 { gib / d } else { 0.0 })
        .collect();
    let (dm, ds) = mean_std(&durations);
    let (rm, rs) = mean_std(&rates);
    TrainingCheckpointMetrics {
        count: saves.len(),
        save_checkpoint_duration_mean_seconds: dm,
        save_checkpoint_duration_stdev_seconds: ds,
        save_checkpoint_io_mean_GB_per_second: rm,
        save_checkpoint_io_stdev_GB_per_second: rs,
        checkpoint_size_GB: gib,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block of `steps` steps with fixed compute and per-step load times,
    /// barrier cost folded into the load of the following step.
    fn block(first_proc: f64, compute: f64, load: f64, steps: usize) -> BlockTimings {
        let mut b = BlockTimings::default();
        let mut t = 0.0;
        for i in 0..steps {
            let l = if i == 0 { first_proc - compute } else { load };
            b.load.push(l);
            b.compute.push(compute);
            b.proc.push(l + compute);
            t += l + compute;
        }
        b.end = t;
        b
    }

    #[test]
    fn simple_block() {
        // 5 steps, 1 s compute, 0.25 s load, first step 3 s total.
        let b = block(3.0, 1.0, 0.25, 5);
        let m = block_metrics(&b, 4, ExcludeSteps::default());
        // total_time = 3 + 4 × 1.25 − 3 = 5; compute counted = 4.
        assert!((m.au_percentage - 80.0).abs() < 1e-9, "{m:?}");
        // (5 − 2) / 5 × 4 = 2.4
        assert!(
            (m.throughput_samples_per_second - 2.4).abs() < 1e-9,
            "{m:?}"
        );
        assert_eq!((m.compute_mean, m.compute_stdev), (1.0, 0.0));
        assert!(!m.too_few_steps);
    }

    #[test]
    fn exclude_end_steps() {
        let b = block(3.0, 1.0, 0.25, 5);
        let m = block_metrics(&b, 4, ExcludeSteps { start: 1, end: 1 });
        // counted steps 1..=3: compute 3, time 8 − 3 − 1.25 = 3.75
        assert!((m.au_percentage - 80.0).abs() < 1e-9);
        assert!((m.throughput_samples_per_second - 3.0 / 3.75 * 4.0).abs() < 1e-9);
    }

    #[test]
    fn degenerate_blocks_do_not_panic() {
        let m = block_metrics(&BlockTimings::default(), 4, ExcludeSteps::default());
        assert_eq!(
            (m.au_percentage, m.throughput_samples_per_second),
            (0.0, 0.0)
        );
        assert!(m.too_few_steps);
        let m = block_metrics(&block(1.0, 0.5, 0.0, 1), 4, ExcludeSteps::default());
        assert_eq!(m.throughput_samples_per_second, 0.0);
        // nothing counted must print as 0.0000, not -0.0000
        assert_eq!(format!("{:.4}", m.au_percentage), "0.0000");
    }

    /// storage #330, flux b200, 1 accelerator: 12756 steps of 1.3501 s
    /// compute, throughput 13.2307 samples/s, AU 37.22 %, I/O 0.82692 "MB/s"
    /// at DLIO's record size 65536.
    #[test]
    fn reproduces_330_flux() {
        let steps = 12756;
        let batch = 48;
        let total_time = 12754.0 * 48.0 / 13.2307;
        let compute = 1.3501;
        // spread the non-compute time over steps 1.. evenly
        let load = (total_time - 12755.0 * compute) / 12755.0;
        let b = block(10.0, compute, load, steps);
        let m = block_metrics(&b, batch, ExcludeSteps::default());
        assert!(
            (m.throughput_samples_per_second - 13.2307).abs() < 1e-6,
            "{m:?}"
        );
        assert_eq!(format!("{:.2}", m.au_percentage), "37.22");
        let run = run_metrics(&[vec![epoch_metrics(&[m])]], 65536.0, 0.90);
        assert_eq!(format!("{:.5}", run.train_io_mean_mb_per_second), "0.82692");
        assert_eq!(run.train_au_meet_expectation, "fail");
        // with the real record size it would have been 27.3
        let real = run_metrics(&[vec![epoch_metrics(&[m])]], 2_164_832.0, 0.90);
        assert_eq!(format!("{:.1}", real.train_io_mean_mb_per_second), "27.3");
        // the rule of thumb: samples/s ≈ N × AU × batch / computation_time
        let thumb = 1.0 * m.au_percentage / 100.0 * 48.0 / 1.35;
        assert!((thumb - 13.23).abs() < 0.05, "{thumb}");
    }

    /// storage #330, unet3d a100: 10.8909 samples/s × 146,600,628 B / 2²⁰ = 1522.65.
    #[test]
    fn reproduces_330_unet3d_io() {
        let e = EpochMetrics {
            steps: 24,
            au_percentage: 99.02,
            throughput_samples_per_second: 10.8909,
        };
        let run = run_metrics(&[vec![e; 5]], 146_600_628.0, 0.90);
        assert_eq!(format!("{:.2}", run.train_io_mean_mb_per_second), "1522.65");
        assert_eq!(run.train_au_meet_expectation, "success");
        assert_eq!(run.train_throughput_stdev_samples_per_second, 0.0);
    }

    #[test]
    fn aggregation_over_ranks_and_epochs() {
        let em = |au, tp| EpochMetrics {
            steps: 10,
            au_percentage: au,
            throughput_samples_per_second: tp,
        };
        // two ranks, two epochs
        let per_rank = vec![
            vec![em(90.0, 10.0), em(80.0, 8.0)],
            vec![em(70.0, 6.0), em(100.0, 12.0)],
        ];
        let r = run_metrics(&per_rank, 1048576.0, 0.85);
        assert_eq!(r.train_au_percentage, vec![80.0, 90.0]);
        assert_eq!(r.train_throughput_samples_per_second, vec![16.0, 20.0]);
        assert_eq!(r.train_au_mean_percentage, 85.0);
        assert_eq!(r.train_au_stdev_percentage, 5.0); // population std
        assert_eq!(r.train_throughput_mean_samples_per_second, 18.0);
        assert_eq!(r.train_throughput_stdev_samples_per_second, 2.0);
        assert_eq!(r.train_io_mean_mb_per_second, 18.0);
        assert_eq!(r.train_io_stdev_mb_per_second, 2.0);
        assert_eq!(r.train_au_meet_expectation, "success"); // 85 ≥ 85
    }

    #[test]
    fn epoch_is_step_weighted() {
        let bm = |steps, au, tp| BlockMetrics {
            steps,
            duration: 1.0,
            au_percentage: au,
            throughput_samples_per_second: tp,
            compute_mean: 0.0,
            compute_stdev: 0.0,
            too_few_steps: false,
        };
        let e = epoch_metrics(&[bm(3, 90.0, 10.0), bm(1, 50.0, 2.0)]);
        assert_eq!(
            (e.steps, e.au_percentage, e.throughput_samples_per_second),
            (4, 80.0, 8.0)
        );
    }

    #[test]
    fn metrics_are_dlio_means() {
        let save = |start: f64, end: f64| CheckpointSave {
            number: 1,
            epoch: 1,
            step: 1,
            start,
            end,
            bytes: 1 << 30,
            files: 1,
        };
        let m = training_checkpoint_metrics(&[save(0.0, 1.0), save(5.0, 7.0)], 1 << 30);
        assert_eq!(m.count, 2);
        assert!((m.save_checkpoint_duration_mean_seconds - 1.5).abs() < 1e-12);
        assert!((m.save_checkpoint_duration_stdev_seconds - 0.5).abs() < 1e-12);
        assert!((m.save_checkpoint_io_mean_GB_per_second - 0.75).abs() < 1e-12);
        assert!((m.checkpoint_size_GB - 1.0).abs() < 1e-12);
    }
}
