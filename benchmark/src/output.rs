//! DLIO-compatible output: `[OUTPUT]`/`[METRIC]` lines and the results
//! directory (`summary.json`, `<rank>_per_epoch_stats.json`, `<rank>_output.json`).
//!
//! ```text
//!  engine events (rank 0, via run::bench) ──► ConsoleLog: "[OUTPUT] <ts> ..." lines (stdout + dlio.log)
//!  RunMetrics + Measured  ──► metric_block(): the [METRIC] block + our [STORPROF] lines
//!  TrainResult + facts    ──► summary_json() / per_epoch_stats_json() / rank_output_json()
//! ```
//! Rendering functions are pure (timestamps passed in) so golden tests are
//! deterministic. Output knows the plain records of `metrics` and
//! `storage::RequestCounts`, not the engine: `run::bench` hands it the
//! engine's results.
use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, Local};
use serde_json::{Value, json};

use crate::metrics::{BlockMetrics, RankEpoch, ReadStats, RunMetrics, TrainingCheckpointMetrics};
use crate::storage::RequestCounts;

/// DLIO's timestamp format (`%Y-%m-%dT%H:%M:%S.%f`).
pub fn ts(t: &DateTime<Local>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

/// `[OUTPUT] <ts> <msg>`.
pub fn output_line(t: &DateTime<Local>, msg: &str) -> String {
    format!("[OUTPUT] {} {msg}", ts(t))
}

/// The lines DLIO prints before training.
pub fn header_messages(
    comm_size: usize,
    steps: u64,
    spf: u64,
    files: u64,
    batch: u64,
) -> Vec<String> {
    vec![
        format!("Running DLIO [Training] with {comm_size} process(es)"),
        format!(
            "Max steps per epoch: {steps} = {spf} * {files} / {batch} / {comm_size} \
             (samples per file * num files / batch size / comm size)"
        ),
    ]
}

/// The lines DLIO prints at the end of an epoch (rank 0's block, throughput × comm_size).
pub fn epoch_end_messages(
    epoch: &RankEpoch,
    m: &BlockMetrics,
    comm_size: usize,
    time_spec: &str,
) -> Vec<String> {
    let e = epoch.epoch;
    vec![
        format!(
            "Ending block 1 - {} steps completed in {:.2} s",
            epoch.block.compute.len(),
            m.duration
        ),
        format!(
            "Epoch {e} - Block 1 [Training] Accelerator Utilization [AU] (%): {:.4}",
            m.au_percentage
        ),
        format!(
            "Epoch {e} - Block 1 [Training] Throughput (samples/second): {:.4}",
            m.throughput_samples_per_second * comm_size as f64
        ),
        format!(
            "Epoch {e} - Block 1 [Training] Computation time per step (second): {:.4}+/-{:.4} (set value: {time_spec})",
            m.compute_mean, m.compute_stdev
        ),
        format!(
            "Ending epoch {e} - {} steps completed in {:.2} s",
            epoch.block.compute.len(),
            epoch.end - epoch.start
        ),
    ]
}

/// What storprof measured beyond DLIO's derived figures (`summary.json` `measured{}`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Measured {
    /// Reader strategy (`raw`, `decode`, `dlio-legacy`).
    pub reader: String,
    pub odirect: bool,
    /// Bytes the readers read from storage, all ranks and epochs.
    pub read_bytes: u64,
    /// Read requests issued.
    pub requests: u64,
    /// Samples delivered.
    pub samples: u64,
    /// Sample payload delivered (the dataset bytes the training touched).
    pub sample_bytes: u64,
    /// Wall time of the training loop, all epochs.
    pub elapsed_seconds: f64,
    #[serde(rename = "read_MiB_per_second")]
    pub read_mib_per_second: f64,
    /// read_bytes ÷ dataset bytes touched (sample_bytes).
    pub read_amplification: f64,
    /// What DLIO uses for its I/O figure (`record_length_bytes`, default 65536).
    pub record_size_bytes_derived: f64,
    /// Real bytes per sample (flux: from the columns, 2,164,832 B).
    pub record_size_bytes_real: f64,
    /// mean(throughput) × real record size / 2²⁰.
    #[serde(rename = "train_io_mean_MiB_per_second_real_record")]
    pub train_io_mean_mib_per_second_real_record: f64,
    /// DLIO's derived I/O ÷ measured read throughput.
    pub derived_over_measured: f64,
    /// True when DLIO's derived I/O figure and the measured one differ by more than 10 %.
    pub derived_measured_disagree: bool,
    /// Requests the storage issued during training, per kind (S3 only: GETs
    /// of footers/headers, data reads and their part GETs, HEAD, LIST), by
    /// the reporting process (under mpirun: rank 0's process only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_by_kind: Option<RequestCounts>,
}

impl Measured {
    /// Fill the derived fields from the raw counts and DLIO's metrics.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        reader: String,
        odirect: bool,
        read: ReadStats,
        elapsed_seconds: f64,
        record_derived: f64,
        record_real: f64,
        metrics: &RunMetrics,
    ) -> Self {
        let mib = 1024.0 * 1024.0;
        let read_mib_s = if elapsed_seconds > 0.0 {
            read.bytes_read as f64 / elapsed_seconds / mib
        } else {
            0.0
        };
        let touched = if read.sample_bytes > 0 {
            read.sample_bytes as f64
        } else {
            read.samples as f64 * record_real
        };
        let amp = if touched > 0.0 {
            read.bytes_read as f64 / touched
        } else {
            0.0
        };
        let derived = metrics.train_io_mean_mb_per_second;
        let ratio = if read_mib_s > 0.0 {
            derived / read_mib_s
        } else {
            0.0
        };
        Measured {
            reader,
            odirect,
            read_bytes: read.bytes_read,
            requests: read.requests,
            samples: read.samples,
            sample_bytes: read.sample_bytes,
            elapsed_seconds,
            read_mib_per_second: read_mib_s,
            read_amplification: amp,
            record_size_bytes_derived: record_derived,
            record_size_bytes_real: record_real,
            train_io_mean_mib_per_second_real_record: metrics
                .train_throughput_mean_samples_per_second
                * record_real
                / mib,
            derived_over_measured: ratio,
            derived_measured_disagree: (ratio - 1.0).abs() > 0.10,
            requests_by_kind: None,
        }
    }

    /// The same figures with the storage's per-kind request counts.
    pub fn with_requests(mut self, counts: Option<RequestCounts>) -> Self {
        self.requests_by_kind = counts;
        self
    }
}

/// The `[METRIC]` block exactly as DLIO prints it (upstream "MB/second"
/// label, trailing space after the accelerator count), followed by
/// storprof's `[STORPROF]` lines with the real and measured figures.
/// `saved_ts` is the timestamp of the last `[OUTPUT]` line.
pub fn metric_block(
    comm_size: usize,
    m: &RunMetrics,
    measured: Option<&Measured>,
    saved_ts: &str,
) -> String {
    metric_block_with_checkpoints(comm_size, m, None, measured, saved_ts)
}

/// [`metric_block`] with DLIO's checkpoint lines when checkpoints were saved
/// during training (`workflow.checkpoint`).
pub fn metric_block_with_checkpoints(
    comm_size: usize,
    m: &RunMetrics,
    checkpoints: Option<&TrainingCheckpointMetrics>,
    measured: Option<&Measured>,
    saved_ts: &str,
) -> String {
    let mut s = String::new();
    let bar = "[METRIC] ==========================================================";
    let _ = writeln!(s, "[OUTPUT] Averaged metric over all steps/epochs");
    let _ = writeln!(s, "{bar}");
    let _ = writeln!(s, "[METRIC] Number of Simulated Accelerators: {comm_size} ");
    let _ = writeln!(
        s,
        "[METRIC] Training Accelerator Utilization [AU] (%): {:.4} ({:.4})",
        m.train_au_mean_percentage, m.train_au_stdev_percentage
    );
    let _ = writeln!(
        s,
        "[METRIC] Training Throughput (samples/second): {:.4} ({:.4})",
        m.train_throughput_mean_samples_per_second, m.train_throughput_stdev_samples_per_second
    );
    let _ = writeln!(
        s,
        "[METRIC] Training I/O Throughput (MB/second): {:.4} ({:.4})",
        m.train_io_mean_mb_per_second, m.train_io_stdev_mb_per_second
    );
    let _ = writeln!(
        s,
        "[METRIC] train_au_meet_expectation: {}",
        m.train_au_meet_expectation
    );
    if let Some(c) = checkpoints {
        let _ = writeln!(
            s,
            "[METRIC] Checkpoint save duration (seconds): {:.4} ({:.4})",
            c.save_checkpoint_duration_mean_seconds, c.save_checkpoint_duration_stdev_seconds
        );
        let _ = writeln!(
            s,
            "[METRIC] Checkpoint save I/O Throughput (GB/second): {:.4} ({:.4})",
            c.save_checkpoint_io_mean_GB_per_second, c.save_checkpoint_io_stdev_GB_per_second
        );
    }
    let _ = writeln!(s, "{bar}");
    let _ = writeln!(s, "[OUTPUT] {saved_ts} outputs saved in RANKID_output.json");
    if let Some(x) = measured {
        let _ = writeln!(
            s,
            "[STORPROF] Record size: DLIO derives {:.0} B per sample; real {:.0} B per sample",
            x.record_size_bytes_derived, x.record_size_bytes_real
        );
        let _ = writeln!(
            s,
            "[STORPROF] Training I/O Throughput, DLIO formula with the real record size (MiB/second): {:.4}",
            x.train_io_mean_mib_per_second_real_record
        );
        let _ = writeln!(
            s,
            "[STORPROF] Measured read ({} reader{}): {} bytes in {} requests over {:.2} s = {:.4} MiB/second, \
             read amplification {:.2}x",
            x.reader,
            if x.odirect { ", O_DIRECT" } else { "" },
            x.read_bytes,
            x.requests,
            x.elapsed_seconds,
            x.read_mib_per_second,
            x.read_amplification
        );
        if let Some(r) = &x.requests_by_kind {
            let mib = |b: u64| b as f64 / 1048576.0;
            let _ = writeln!(
                s,
                "[STORPROF] Requests: {} GETs ({:.1} MiB): {} data reads in {} part GETs ({:.1} MiB), \
                 {} footer/header GETs ({:.3} MiB); {} HEAD, {} LIST",
                r.get_requests,
                mib(r.get_bytes),
                r.data_reads,
                r.data_get_requests,
                mib(r.data_get_bytes),
                r.metadata_get_requests,
                mib(r.metadata_get_bytes),
                r.head_requests,
                r.list_requests
            );
        }
        if x.derived_measured_disagree {
            let _ = writeln!(
                s,
                "[STORPROF] WARNING: DLIO's derived I/O throughput ({:.4} MiB/s) disagrees with the measured read \
                 throughput ({:.4} MiB/s): derived/measured = {:.3}",
                m.train_io_mean_mb_per_second, x.read_mib_per_second, x.derived_over_measured
            );
        }
    }
    s
}

/// Environment variable that names this host in results and sessions instead
/// of the kernel's hostname: hosts made as network namespaces on one machine
/// share the hostname, so their launcher sets it (see README "Multi-host").
pub const HOST_LABEL_ENV: &str = "STORPROF_HOST";

/// This host's name: `$STORPROF_HOST` if set and non-empty, else the kernel's hostname.
pub fn host_label() -> String {
    match std::env::var(HOST_LABEL_ENV) {
        Ok(v) if !v.trim().is_empty() => v.trim().to_string(),
        _ => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
    }
}

/// Host facts for `summary.json`, read from /proc.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HostFacts {
    pub hostname: String,
    pub cpu_count: usize,
    pub processor_name: String,
    /// First processor's `/proc/cpuinfo` block.
    pub cpuinfo: BTreeMap<String, String>,
    /// `/proc/meminfo`, values as written (e.g. "24576000 kB").
    pub meminfo: BTreeMap<String, String>,
    /// MemTotal in GiB.
    pub memory_gb: f64,
}

impl HostFacts {
    /// Read this host's facts (missing files give empty values, never an error).
    /// The name is [`host_label`].
    pub fn read() -> Self {
        let hostname = host_label();
        let cpuinfo_text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpuinfo = parse_colon_block(cpuinfo_text.split("\n\n").next().unwrap_or(""));
        let cpu_count = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let processor_name = cpuinfo.get("model name").cloned().unwrap_or_default();
        let meminfo =
            parse_colon_block(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default());
        let memory_gb = meminfo
            .get("MemTotal")
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb / 1024.0 / 1024.0)
            .unwrap_or(0.0);
        HostFacts {
            hostname,
            cpu_count,
            processor_name,
            cpuinfo,
            meminfo,
            memory_gb,
        }
    }
}

fn parse_colon_block(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Inputs of `summary.json` besides the metrics.
#[derive(Clone, Debug)]
pub struct SummaryFacts {
    pub start: String,
    pub end: String,
    pub num_accelerators: usize,
    pub num_files_train: u64,
    pub num_files_eval: u64,
    pub num_samples_per_file: u64,
    pub epochs: u32,
    /// Bytes of the training files.
    pub dataset_bytes: u64,
    /// One entry per host, rank 0's host first (DLIO's `hostname`).
    pub hosts: Vec<HostFacts>,
    /// Set when the run was stopped early (Ctrl-C).
    pub interrupted: Option<Interruption>,
}

/// How a run stopped early; `summary.json` `interruption{}`.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Interruption {
    /// "SIGINT", "SIGTERM".
    pub signal: String,
    /// The epoch that was running (1-based) and its completed steps.
    pub epoch: u32,
    pub steps_completed_in_epoch: usize,
    pub steps_per_epoch: u64,
    /// Epochs the metrics were computed over (the interrupted one counts when
    /// it completed at least 3 steps, DLIO's minimum, or when it is the only one).
    pub epochs_in_metrics: usize,
}

/// `summary.json`: DLIO's keys plus our `measured{}` object.
/// Per-host lists (`host_cpu_count`, `host_memory_GB`, `potential_caching`,
/// `host_names`) follow `f.hosts`; `hostname`, `host_processor_name`,
/// `host_cpuinfo` and `host_meminfo` are rank 0's host's, as DLIO writes them.
/// `interrupted`/`interruption` appear only for a run stopped early.
pub fn summary_json(f: &SummaryFacts, m: &RunMetrics, measured: &Measured) -> Value {
    let num_hosts = f.hosts.len().max(1);
    let data_gb = f.dataset_bytes as f64 / 1024f64.powi(3);
    let per_host_gb = data_gb / num_hosts as f64;
    let first = f.hosts.first();
    let mut v = json!({
        "start": f.start,
        "num_accelerators": f.num_accelerators,
        "num_hosts": num_hosts,
        "hostname": first.map(|h| h.hostname.clone()).unwrap_or_default(),
        "host_names": f.hosts.iter().map(|h| h.hostname.clone()).collect::<Vec<_>>(),
        "metric": m,
        "num_files_train": f.num_files_train,
        "num_files_eval": f.num_files_eval,
        "num_samples_per_file": f.num_samples_per_file,
        "host_cpu_count": f.hosts.iter().map(|h| h.cpu_count).collect::<Vec<_>>(),
        "host_processor_name": first.map(|h| h.processor_name.clone()).unwrap_or_default(),
        "potential_caching": f.hosts.iter().map(|h| per_host_gb < h.memory_gb).collect::<Vec<_>>(),
        "host_cpuinfo": first.map(|h| h.cpuinfo.clone()).unwrap_or_default(),
        "host_meminfo": first.map(|h| h.meminfo.clone()).unwrap_or_default(),
        "host_memory_GB": f.hosts.iter().map(|h| h.memory_gb).collect::<Vec<_>>(),
        "data_size_per_host_GB": per_host_gb,
        "epochs": f.epochs,
        "end": f.end,
        "measured": measured,
    });
    if let (Some(i), Value::Object(o)) = (&f.interrupted, &mut v) {
        o.insert("interrupted".into(), Value::Bool(true));
        o.insert("interruption".into(), json!(i));
    }
    v
}

/// The `[STORPROF]` line printed after the `[METRIC]` block of an interrupted run.
pub fn interruption_line(i: &Interruption) -> String {
    format!(
        "[STORPROF] Interrupted by {} in epoch {} after {} of {} steps; metrics are over {} epoch(s)",
        i.signal, i.epoch, i.steps_completed_in_epoch, i.steps_per_epoch, i.epochs_in_metrics
    )
}

/// `<rank>_per_epoch_stats.json`. `wall(t)` turns run-relative seconds into a timestamp.
pub fn per_epoch_stats_json(epochs: &[RankEpoch], wall: &dyn Fn(f64) -> String) -> Value {
    per_epoch_stats_json_with(epochs, 0, wall)
}

/// [`per_epoch_stats_json`] with DLIO's `save_ckpt<n>` entries (start, end,
/// duration, throughput = `checkpoint_bytes` GiB / duration) for the
/// checkpoints saved in each epoch.
pub fn per_epoch_stats_json_with(
    epochs: &[RankEpoch],
    checkpoint_bytes: u64,
    wall: &dyn Fn(f64) -> String,
) -> Value {
    let mut o = serde_json::Map::new();
    for e in epochs {
        let mut v = json!({
            "start": wall(e.start),
            "block1": {
                "start": wall(e.block.start),
                "end": wall(e.block.end),
                "duration": format!("{:.2}", e.block.end - e.block.start),
            },
            "end": wall(e.end),
            "duration": format!("{:.2}", e.end - e.start),
        });
        if let Value::Object(m) = &mut v {
            for c in &e.checkpoints {
                let secs = c.seconds();
                let gib = checkpoint_bytes as f64 / (1u64 << 30) as f64;
                m.insert(
                    format!("save_ckpt{}", c.number),
                    json!({
                        "start": wall(c.start),
                        "end": wall(c.end),
                        "duration": secs,
                        "throughput": if secs > 0.0 { gib / secs } else { 0.0 },
                        "step": c.step,
                        "bytes_written": c.bytes,
                    }),
                );
            }
        }
        o.insert(e.epoch.to_string(), v);
    }
    Value::Object(o)
}

/// `<rank>_output.json`: per epoch, the per-step `load`/`proc`/`compute` lists and block metrics.
pub fn rank_output_json(epochs: &[RankEpoch], metrics: &[BlockMetrics]) -> Value {
    let mut o = serde_json::Map::new();
    for (e, m) in epochs.iter().zip(metrics) {
        o.insert(
            e.epoch.to_string(),
            json!({
                "load": {"block1": e.block.load},
                "proc": {"block1": e.block.proc},
                "compute": {"block1": e.block.compute},
                "au": {"block1": m.au_percentage},
                "throughput": {"block1": m.throughput_samples_per_second},
            }),
        );
    }
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_matches_dlio() {
        let h = header_messages(1, 12756, 288, 2126, 48);
        assert_eq!(h[0], "Running DLIO [Training] with 1 process(es)");
        assert_eq!(
            h[1],
            "Max steps per epoch: 12756 = 288 * 2126 / 48 / 1 (samples per file * num files / batch size / comm size)"
        );
    }

    #[test]
    fn timestamp_format() {
        let t = chrono::TimeZone::with_ymd_and_hms(&Local, 2026, 4, 9, 12, 3, 4)
            .single()
            .unwrap();
        assert_eq!(ts(&t), "2026-04-09T12:03:04.000000");
    }
}
