//! What a checkpoint run reports: the summary (summary.json), the
//! per-checkpoint phases (per_checkpoint.json) and the [METRIC] block,
//! in DLIO's names.
use std::path::{Path, PathBuf};

use super::io::CacheDrop;
use super::io_err;
use super::layout::LlamaModel;
use super::summary::{PhaseMeans, PhaseStats};
use crate::error::BenchError;

/// The whole run's result, on the reporting process.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CheckpointSummary {
    pub benchmark: &'static str,
    pub model: LlamaModel,
    pub mode: &'static str,
    pub start: String,
    pub end: String,
    pub hostname: String,
    pub num_processes: usize,
    pub tensor_parallelism: usize,
    pub pipeline_parallelism: usize,
    pub data_parallelism: usize,
    pub zero_stage: u8,
    pub num_parameters: u64,
    pub checkpoint_folder: String,
    /// When a shard counts as saved: after its fsync, or (S3) after its upload completed.
    pub durability: String,
    pub scale: f64,
    pub block_size: usize,
    pub odirect: bool,
    pub fsync: bool,
    pub num_checkpoints_write: u32,
    pub num_checkpoints_read: u32,
    /// One checkpoint's bytes as written (after --scale), GiB.
    #[serde(rename = "checkpoint_size_GB")]
    pub checkpoint_size_gb: f64,
    /// One checkpoint's bytes at full size, GiB.
    #[serde(rename = "unscaled_checkpoint_size_GB")]
    pub unscaled_checkpoint_size_gb: f64,
    /// Bytes this host's ranks wrote over the run, GiB.
    #[serde(rename = "data_per_client_GB")]
    pub data_per_client_gb: f64,
    #[serde(rename = "client_memory_GB")]
    pub client_memory_gb: f64,
    pub cache_drop: CacheDrop,
    pub generator: GeneratorFigures,
    pub metric: Metrics,
    pub bytes: MeasuredBytes,
}

/// The data generator's speed beside the writers'.
#[derive(Clone, Copy, Debug, serde::Serialize)]
// DLIO's key names (`..._GB_per_second`) are kept as field names.
#[allow(non_snake_case)]
pub struct GeneratorFigures {
    /// One thread alone, GiB/s.
    pub one_thread_GB_per_second: f64,
    /// Threads the writers generate on (one per local rank, at most the cores).
    pub threads: usize,
    /// one_thread × threads, GiB/s.
    pub capacity_GB_per_second: f64,
    /// Mean aggregate save throughput, GiB/s.
    pub write_GB_per_second: f64,
    /// capacity / write (the goal is ≥ 2).
    pub ratio_to_write: f64,
}

impl GeneratorFigures {
    /// One thread's speed `one` (GiB/s) on `threads`, beside the mean
    /// aggregate save speed `write` (GiB/s).
    pub(super) fn new(one: f64, threads: usize, write: f64) -> Self {
        let capacity = one * threads as f64;
        GeneratorFigures {
            one_thread_GB_per_second: one,
            threads,
            capacity_GB_per_second: capacity,
            write_GB_per_second: write,
            ratio_to_write: if write > 0.0 { capacity / write } else { 0.0 },
        }
    }
}

/// DLIO-named means over checkpoints.
#[derive(Clone, Copy, Debug, serde::Serialize)]
#[allow(non_snake_case)]
pub struct Metrics {
    pub save_checkpoint_duration_mean_seconds: f64,
    pub save_checkpoint_duration_stdev_seconds: f64,
    pub save_checkpoint_io_mean_GB_per_second: f64,
    pub save_checkpoint_io_stdev_GB_per_second: f64,
    pub save_checkpoint_aggregate_io_mean_GB_per_second: f64,
    pub load_checkpoint_duration_mean_seconds: f64,
    pub load_checkpoint_duration_stdev_seconds: f64,
    pub load_checkpoint_io_mean_GB_per_second: f64,
    pub load_checkpoint_io_stdev_GB_per_second: f64,
    pub load_checkpoint_aggregate_io_mean_GB_per_second: f64,
}

impl Metrics {
    pub(super) fn from(save: &PhaseMeans, load: &PhaseMeans) -> Self {
        Metrics {
            save_checkpoint_duration_mean_seconds: save.duration_mean_seconds,
            save_checkpoint_duration_stdev_seconds: save.duration_stdev_seconds,
            save_checkpoint_io_mean_GB_per_second: save.io_mean_GB_per_second,
            save_checkpoint_io_stdev_GB_per_second: save.io_stdev_GB_per_second,
            save_checkpoint_aggregate_io_mean_GB_per_second: save.aggregate_io_mean_GB_per_second,
            load_checkpoint_duration_mean_seconds: load.duration_mean_seconds,
            load_checkpoint_duration_stdev_seconds: load.duration_stdev_seconds,
            load_checkpoint_io_mean_GB_per_second: load.io_mean_GB_per_second,
            load_checkpoint_io_stdev_GB_per_second: load.io_stdev_GB_per_second,
            load_checkpoint_aggregate_io_mean_GB_per_second: load.aggregate_io_mean_GB_per_second,
        }
    }
}

/// Bytes measured at the system calls.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct MeasuredBytes {
    pub written: u64,
    pub fsynced: u64,
    pub read: u64,
    pub files_written: u64,
    pub fsyncs: u64,
    pub files_read: u64,
}

impl MeasuredBytes {
    /// Summed over the save and load phases.
    pub(super) fn of(saves: &[PhaseStats], loads: &[PhaseStats]) -> Self {
        let mut bytes = MeasuredBytes::default();
        for p in saves {
            bytes.written += p.io.bytes;
            bytes.fsynced += p.io.fsynced;
            bytes.files_written += p.io.files;
            bytes.fsyncs += p.io.fsyncs;
        }
        for p in loads {
            bytes.read += p.io.bytes;
            bytes.files_read += p.io.files;
        }
        bytes
    }
}

/// Per-checkpoint details (per_checkpoint.json).
#[derive(Clone, Debug, serde::Serialize)]
pub struct CheckpointDetails {
    pub save: Vec<NumberedPhase>,
    pub load: Vec<NumberedPhase>,
}

/// One checkpoint's phase with its number.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NumberedPhase {
    pub checkpoint: u32,
    #[serde(flatten)]
    pub stats: PhaseStats,
}

/// What the reporting process returns.
#[derive(Clone, Debug)]
pub struct CheckpointReport {
    pub summary: CheckpointSummary,
    pub details: CheckpointDetails,
    pub results_dir: PathBuf,
}

pub(super) fn number(phases: Vec<PhaseStats>) -> Vec<NumberedPhase> {
    (1u32..)
        .zip(phases)
        .map(|(checkpoint, stats)| NumberedPhase { checkpoint, stats })
        .collect()
}

impl CheckpointReport {
    /// Writes summary.json and per_checkpoint.json into the results
    /// directory; with `print`, the [METRIC] block and where they went.
    pub(super) fn write(&self, print: bool) -> Result<(), BenchError> {
        write_results(&self.results_dir, &self.summary, &self.details)?;
        if print {
            print_metrics(&self.summary);
            println!(
                "[OUTPUT] {} Saved outputs in {}",
                super::timestamp(),
                self.results_dir.display()
            );
        }
        Ok(())
    }
}

fn write_results(
    dir: &Path,
    summary: &CheckpointSummary,
    details: &CheckpointDetails,
) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    for (name, value) in [
        ("summary.json", serde_json::to_value(summary)),
        ("per_checkpoint.json", serde_json::to_value(details)),
    ] {
        let path = dir.join(name);
        let value = value.map_err(|e| BenchError::Encoding(format!("{name}: {e}")))?;
        let text = serde_json::to_string_pretty(&value)
            .map_err(|e| BenchError::Encoding(format!("{name}: {e}")))?;
        std::fs::write(&path, text + "\n").map_err(io_err(&path))?;
    }
    Ok(())
}

/// The [METRIC] block (DLIO's layout; GB are 2^30 bytes, labelled GiB).
fn print_metrics(s: &CheckpointSummary) {
    let m = &s.metric;
    let bar = "[METRIC] ==========================================================";
    println!("[OUTPUT] Averaged metric over all checkpoints");
    println!("{bar}");
    println!("[METRIC] Number of Processes: {} ", s.num_processes);
    println!(
        "[METRIC] Checkpoint size (GiB): {:.4} (unscaled {:.4})",
        s.checkpoint_size_gb, s.unscaled_checkpoint_size_gb
    );
    println!(
        "[METRIC] Checkpoint save duration (seconds): {:.4} ({:.4})",
        m.save_checkpoint_duration_mean_seconds, m.save_checkpoint_duration_stdev_seconds
    );
    println!(
        "[METRIC] Checkpoint save I/O Throughput, slowest rank (GiB/second): {:.4} ({:.4})",
        m.save_checkpoint_io_mean_GB_per_second, m.save_checkpoint_io_stdev_GB_per_second
    );
    println!(
        "[METRIC] Checkpoint save I/O Throughput, aggregate (GiB/second): {:.4}",
        m.save_checkpoint_aggregate_io_mean_GB_per_second
    );
    if s.num_checkpoints_read > 0 {
        println!(
            "[METRIC] Checkpoint load duration (seconds): {:.4} ({:.4})",
            m.load_checkpoint_duration_mean_seconds, m.load_checkpoint_duration_stdev_seconds
        );
        println!(
            "[METRIC] Checkpoint load I/O Throughput, slowest rank (GiB/second): {:.4} ({:.4})",
            m.load_checkpoint_io_mean_GB_per_second, m.load_checkpoint_io_stdev_GB_per_second
        );
        println!(
            "[METRIC] Checkpoint load I/O Throughput, aggregate (GiB/second): {:.4}",
            m.load_checkpoint_aggregate_io_mean_GB_per_second
        );
    }
    let g = &s.generator;
    println!(
        "[METRIC] Data generator (GiB/second): {:.4} on {} thread(s) ({:.4} per thread); write: {:.4}",
        g.capacity_GB_per_second, g.threads, g.one_thread_GB_per_second, g.write_GB_per_second
    );
    println!(
        "[METRIC] Bytes written: {} fsynced: {} read: {}",
        s.bytes.written, s.bytes.fsynced, s.bytes.read
    );
    println!("{bar}");
    if g.write_GB_per_second > 0.0 && g.ratio_to_write < 2.0 {
        eprintln!(
            "storprof: warning: the data generator ({:.2} GiB/s) is less than 2× the write speed \
             ({:.2} GiB/s): it may limit the writers",
            g.capacity_GB_per_second, g.write_GB_per_second
        );
    }
}
