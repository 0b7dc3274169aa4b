//! The named thresholds of the verdict rules, with their reasons. Exposed for
//! tuning; documented for users in `profiler/THRESHOLDS.md` (keep in sync).
use serde::{Deserialize, Serialize};

/// Every number the verdict rules compare against. Shares are fractions
/// (0..1) of reader thread time unless said otherwise. `Default` holds the
/// documented values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Thresholds {
    // ---- selecting threads ----
    /// A thread is a reader when it returned at least this share of all
    /// read-syscall bytes. Default 0.05: drops interpreter start-up reads
    /// (module imports) next to data reads, keeps every DataLoader worker.
    pub reader_read_fraction: f64,
    /// Below this many read-syscall bytes in total, readers are picked by
    /// activity instead. Default 1 MiB.
    pub reader_min_read_bytes: u64,
    /// A thread is busy when on CPU or runnable at least this share of its
    /// life. Default 0.5 (USE method: a saturated CPU wants more than it gets).
    pub busy_thread_share: f64,
    /// A non-reader thread is the consumer (simulated accelerator) when it
    /// sleeps in nanosleep at least this share of its life. Default 0.1: the
    /// consumer of a starved pipeline sleeps only its AU share (37% in
    /// storage #330), so the bar is low; it decides nothing by itself
    /// (compute-bound needs the sleep share ≥ the AU threshold).
    pub consumer_sleep_share: f64,
    /// Wake-ups a thread must exchange with the data side (fed by it, or
    /// sending it work) to be a consumer. Default 4: fewer is start-up or
    /// tear-down (a join, an exit), not a pipeline.
    pub consumer_min_wakes: u64,
    /// A thread a loader waits on at least this share of the loader's time
    /// is a helper (decode or I/O pool). Default 0.01.
    pub helper_wait_share: f64,
    /// Hops the critical path follows from the consumer (consumer → feeder
    /// → worker → pool thread is 3). Default 6; deeper time stays
    /// "unattributed".
    pub critical_path_max_depth: usize,

    // ---- cpu-bound-reader ----
    /// Readers on CPU at least this share of their time. Default 0.5: more
    /// time computing than waiting for anything.
    pub cpu_bound_on_cpu_share: f64,
    /// ... and at least this share of their CPU samples their own work (user
    /// code, faulting in their own buffers), not copies out of the page
    /// cache (those are page-cache-served's evidence). Default 0.5.
    #[serde(alias = "cpu_bound_user_share")]
    pub cpu_bound_own_work_share: f64,

    // ---- storage ----
    /// Device utilization below which storage counts as idle / little used.
    /// Default 0.2 (iostat %util; 60% is "poor", ~100% saturated).
    pub storage_idle_utilization: f64,
    /// Device utilization from which the device itself is the limit.
    /// Default 0.6 (Netflix "60 s" checklist: %util > 60% is typically poor).
    pub storage_busy_utilization: f64,
    /// Readers in uninterruptible (D) sleep at least this share of their
    /// time. Default 0.3 (Darshan io_ratio buckets: > 0.2–0.4 is I/O heavy).
    pub storage_bound_blocked_share: f64,

    // ---- page-cache-served ----
    /// Share of read-syscall bytes served without touching storage.
    /// Default 0.9.
    pub page_cache_hit_ratio: f64,
    /// Below this many read-syscall bytes, no page-cache finding. Default 1 MiB.
    pub page_cache_min_read_bytes: u64,

    // ---- compute-bound ----
    /// AU (%) from which the consumer, not the loaders, is the limit.
    /// Default 90.0: DLIO's `metric.au` default, MLPerf Storage's minimum
    /// for unet3d/resnet50 and the flux_b200 configs.
    pub compute_bound_au_percentage: f64,

    // ---- cpu-starved ----
    /// Readers runnable (waiting for a CPU) at least this share of their
    /// time. Default 0.2 (USE: run-queue length above the CPU count).
    pub cpu_starved_runnable_share: f64,

    // ---- lock-contention ----
    /// Readers asleep in futex at least this share of their time. Default 0.3.
    pub lock_futex_share: f64,
    /// Loaders that wait on each other's lock are not contention when one
    /// reader among them does at least this share of their CPU time
    /// together and the others read nothing (they pass its results on).
    /// Default 0.8: without the lock such a group could run at most 1.25×
    /// faster (Amdahl), its limit is the reader's CPU; a DataLoader
    /// worker's main thread and its queue feeder sharing the GIL are one.
    pub lock_dominant_holder_share: f64,

    // ---- memory-pressure ----
    /// Reclaim / swap-in / OOM stacks at least this share of reader time.
    /// Default 0.2.
    pub memory_reclaim_share: f64,

    // ---- network-bound ----
    /// Readers waiting in socket receives at least this share of their time.
    /// Default 0.3.
    pub network_socket_share: f64,

    // ---- writes (checkpoints) ----
    /// A thread is a writer when it returned at least this share of all
    /// write-syscall bytes. Default 0.05, as for readers: keeps every rank
    /// of a checkpoint, drops log and manifest writes.
    pub writer_write_fraction: f64,
    /// Below this many write-syscall bytes in total, the write rules do not
    /// apply. Default 1 MiB.
    pub writer_min_write_bytes: u64,
    /// A session is write-dominated when its write-syscall bytes are at
    /// least this many times its read bytes (syscalls plus a bench's mapped
    /// reads). Default 4.0: a checkpoint that reads its shards back reads
    /// as much as it wrote and is judged as a read session too.
    pub write_dominated_factor: f64,
    /// Writers inside fsync/fdatasync/sync_file_range/msync at least this
    /// share of their time. Default 0.3 (as `storage_bound_blocked_share`).
    pub fsync_bound_sync_share: f64,
    /// Writers off CPU in dirty-page throttling or writeback waits outside
    /// fsync-family calls at least this share of their time. Default 0.2:
    /// a healthy buffered writer is throttled only briefly.
    pub writeback_bound_wait_share: f64,
    /// Writers on CPU at least this share of their time. Default 0.5, as
    /// `cpu_bound_on_cpu_share`.
    pub write_generator_on_cpu_share: f64,
    /// ... and at least this share of their CPU samples outside the
    /// kernel's write path (making the data, not copying it into the page
    /// cache). Default 0.5.
    pub write_generator_own_work_share: f64,
    /// Written data "only reached memory" when no fsync-family call was
    /// made and the devices wrote less than this share of the write-syscall
    /// bytes during the recording. Default 0.1.
    pub write_memory_only_device_ratio: f64,
    /// A consumer (trainer) that wrote at least `writer_min_write_bytes` and
    /// spent at least this share of its training window on its own work,
    /// neither computing nor waiting for data (and more than it waited for
    /// data), is held back by its own writes: checkpoint-bound. Default
    /// 0.25: a quarter of the training time lost to saving.
    pub checkpoint_bound_own_share: f64,
    /// ... and whose own time is writing: mostly uninterruptible waits
    /// (fsync, writeback), or on a CPU while writing at least this fast
    /// (bytes written over the own time, MiB/s). A trainer's own CPU that
    /// wrote a few MiB of pipe traffic and logs is unpickling batches, not
    /// saving. Default 8.
    pub checkpoint_min_write_mib_per_s: f64,

    // ---- evidence and confidence ----
    /// Derived (DLIO) vs measured (bench) I/O differing by more than this
    /// factor is called out (storage #330). Default 2.0.
    pub io_mismatch_factor: f64,
    /// Score margin over the runner-up that earns full confidence. Default 0.3.
    pub confident_margin: f64,
    /// Less reader thread time than this (s) lowers the confidence.
    /// Default 1.0 s (about 100 samples at 99 Hz).
    pub min_reader_thread_s: f64,
    /// A recording shorter than this (s), or less time than this of the
    /// threads a verdict on readers or writers rests on, is too short to
    /// decide from: inconclusive. Default 0.1 s (about 10 samples at
    /// 99 Hz; a `diagnose -- /bin/true` records a few ms).
    pub min_decision_thread_s: f64,

    // ---- stalled ----
    /// Seconds without progress (no read-syscall bytes, no wake-up handed
    /// between traced threads) before a job is stalled. Default 60 s: the
    /// longest quiet stretch of a healthy DataLoader run is a few seconds
    /// (worker start-up, an epoch boundary); 0 disables the rule.
    pub stall_s: f64,
    /// A thread on a CPU at least this share of the quiet time is a busy
    /// loop. Default 0.9.
    pub stall_busy_share: f64,

    // ---- confidence weights (our own judgment, not from a source) ----
    /// Share of the score kept as confidence when the primary finding has
    /// no margin over the runner-up; the rest is earned linearly up to
    /// `confident_margin`. Default 0.6: a tie still names the verdict, but
    /// no tie reaches "high".
    pub confidence_no_margin_factor: f64,
    /// Confidence factor when no rule fired (the verdict is only the
    /// closest match). Default 0.5.
    pub confidence_inconclusive_factor: f64,
    /// Confidence factor for a partial session (files missing). Default 0.8.
    pub confidence_partial_session_factor: f64,
    /// Confidence factor when events or samples were lost. Default 0.9:
    /// figures are lower bounds, usually close ones.
    pub confidence_lost_events_factor: f64,
    /// Confidence factor for less than `min_reader_thread_s` of reader
    /// time. Default 0.7: few samples.
    pub confidence_short_reader_time_factor: f64,
    /// Confidence from which the label is "high". Default 0.7.
    pub confidence_high: f64,
    /// Confidence from which the label is "medium" (else "low"). Default 0.4.
    pub confidence_medium: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            reader_read_fraction: 0.05,
            reader_min_read_bytes: 1 << 20,
            busy_thread_share: 0.5,
            consumer_sleep_share: 0.1,
            consumer_min_wakes: 4,
            helper_wait_share: 0.01,
            critical_path_max_depth: 6,
            cpu_bound_on_cpu_share: 0.5,
            cpu_bound_own_work_share: 0.5,
            storage_idle_utilization: 0.2,
            storage_busy_utilization: 0.6,
            storage_bound_blocked_share: 0.3,
            page_cache_hit_ratio: 0.9,
            page_cache_min_read_bytes: 1 << 20,
            compute_bound_au_percentage: 90.0,
            cpu_starved_runnable_share: 0.2,
            lock_futex_share: 0.3,
            lock_dominant_holder_share: 0.8,
            memory_reclaim_share: 0.2,
            network_socket_share: 0.3,
            writer_write_fraction: 0.05,
            writer_min_write_bytes: 1 << 20,
            write_dominated_factor: 4.0,
            fsync_bound_sync_share: 0.3,
            writeback_bound_wait_share: 0.2,
            write_generator_on_cpu_share: 0.5,
            write_generator_own_work_share: 0.5,
            write_memory_only_device_ratio: 0.1,
            checkpoint_bound_own_share: 0.25,
            checkpoint_min_write_mib_per_s: 8.0,
            io_mismatch_factor: 2.0,
            stall_s: 60.0,
            stall_busy_share: 0.9,
            confident_margin: 0.3,
            min_reader_thread_s: 1.0,
            min_decision_thread_s: 0.1,
            confidence_no_margin_factor: 0.6,
            confidence_inconclusive_factor: 0.5,
            confidence_partial_session_factor: 0.8,
            confidence_lost_events_factor: 0.9,
            confidence_short_reader_time_factor: 0.7,
            confidence_high: 0.7,
            confidence_medium: 0.4,
        }
    }
}

/// A threshold given a value other than its default (`--thresholds FILE`),
/// recorded in verdict.json and shown by the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThresholdOverride {
    pub key: String,
    pub value: f64,
    pub default: f64,
}

/// The values a threshold may take, by what its name says it is: shares,
/// ratios, fractions, utilizations and the confidence figures are 0..=1,
/// the AU percentage 0..=100, everything else (bytes, seconds, counts,
/// factors) ≥ 0.
pub fn valid_range(key: &str) -> std::ops::RangeInclusive<f64> {
    const FRACTIONS: &[&str] = &["_share", "_utilization", "_ratio", "_fraction"];
    if key == "compute_bound_au_percentage" {
        0.0..=100.0
    } else if FRACTIONS.iter().any(|s| key.ends_with(s))
        || key.starts_with("confidence_")
        || key == "confident_margin"
    {
        0.0..=1.0
    } else {
        0.0..=f64::MAX
    }
}
