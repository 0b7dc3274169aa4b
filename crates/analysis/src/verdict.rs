//! Verdict rules: one pure function per verdict id ([`RULES`]) scores the
//! features; the primary verdict is what limits the pipeline, the others are
//! runners-up. The rules produce data only (ids, figures, scores); the
//! sentences of verdict.json, report.md and the terminal come from
//! `output::wording`.
//!
//! ```text
//! Features + HotFrames ──► RULES ──► Finding { fired, score, detail, figures }
//!                      ──► primary = compute-bound when it fires (the
//!                          pipeline keeps up), else the highest-scoring fired
//!                          finding ──► Decision { confidence, notes, ... }
//!                      ──► output::wording::verdict ──► Verdict (verdict.json)
//! ```
//!
//! A score is the share of reader time the finding explains (0..1), so
//! findings compare on one scale: user-space CPU (`cpu-bound-reader`) beats
//! kernel copies from the page cache (`page-cache-served`) exactly when more
//! reader time goes into it.
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{
    Thresholds,
    features::Features,
    frames::{FrameShare, HotFrames},
    stall::{Stall, StallKind},
    waitgraph::{ConsumerTime, PathShare, Phase, RoleRow, WaitAnalysis, Window},
};

/// Version of the verdict.json layout.
pub const VERDICT_FORMAT_VERSION: u32 = 1;

/// The verdict ids (issue 4). Each has one entry in [`RULES`], whose order
/// is the ids' order everywhere ([`VerdictId::ALL`], [`Ord`], ties).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictId {
    /// Readers on CPU in user space most of the time; storage little used.
    CpuBoundReader,
    /// Readers blocked in uninterruptible block-I/O waits; device or throttle is the limit.
    StorageBound,
    /// Reads served from memory; storage hardly touched; time in kernel copies.
    PageCacheServed,
    /// The consumer (simulated accelerator) is the limit; loaders wait for it.
    ComputeBound,
    /// Threads runnable but waiting for a CPU.
    CpuStarved,
    /// Workers sleeping on futexes/locks rather than I/O.
    LockContention,
    /// Major faults, reclaim or an OOM kill dominate.
    MemoryPressure,
    /// Workers waiting on socket receives (object storage).
    NetworkBound,
    /// No progress at all: nothing read, nothing handed on, for
    /// `stall_s`; threads blocked with nobody to wake them, or looping.
    Stalled,
    /// Writers throttled in `balance_dirty_pages` or waiting on writeback:
    /// the device (or a throttle) drains dirty pages slower than they come.
    WritebackBound,
    /// Writers' time mostly in fsync-family calls waiting for the device.
    FsyncBound,
    /// Writers on CPU making the data most of their life; device idle.
    WriteGeneratorBound,
    /// The consumer (trainer) spends its training window on its own
    /// writes (checkpoints saved in its own thread), not computing and not
    /// waiting for data.
    CheckpointBound,
}

/// A verdict rule: the id it decides, its name in verdict.json and the
/// report, and the pure function that scores the features for it.
pub struct Rule {
    pub id: VerdictId,
    /// Kebab-case name (as serialized).
    pub name: &'static str,
    pub score: fn(&Features, &HotFrames, &Thresholds) -> Finding,
}

/// Every rule, in the ids' order: adding a verdict is one entry here (plus
/// its [`VerdictId`] variant and its wording in `output::wording`).
pub const RULES: [Rule; 13] = [
    Rule {
        id: VerdictId::CpuBoundReader,
        name: "cpu-bound-reader",
        score: rule_cpu_bound_reader,
    },
    Rule {
        id: VerdictId::StorageBound,
        name: "storage-bound",
        score: |f, _, t| rule_storage_bound(f, t),
    },
    Rule {
        id: VerdictId::PageCacheServed,
        name: "page-cache-served",
        score: |f, _, t| rule_page_cache_served(f, t),
    },
    Rule {
        id: VerdictId::ComputeBound,
        name: "compute-bound",
        score: |f, _, t| rule_compute_bound(f, t),
    },
    Rule {
        id: VerdictId::CpuStarved,
        name: "cpu-starved",
        score: |f, _, t| rule_cpu_starved(f, t),
    },
    Rule {
        id: VerdictId::LockContention,
        name: "lock-contention",
        score: |f, _, t| rule_lock_contention(f, t),
    },
    Rule {
        id: VerdictId::MemoryPressure,
        name: "memory-pressure",
        score: |f, _, t| rule_memory_pressure(f, t),
    },
    Rule {
        id: VerdictId::NetworkBound,
        name: "network-bound",
        score: |f, _, t| rule_network_bound(f, t),
    },
    Rule {
        id: VerdictId::Stalled,
        name: "stalled",
        score: |f, _, _| rule_stalled(f),
    },
    Rule {
        id: VerdictId::WritebackBound,
        name: "writeback-bound",
        score: |f, _, t| rule_writeback_bound(f, t),
    },
    Rule {
        id: VerdictId::FsyncBound,
        name: "fsync-bound",
        score: |f, _, t| rule_fsync_bound(f, t),
    },
    Rule {
        id: VerdictId::WriteGeneratorBound,
        name: "write-generator-bound",
        score: |f, _, t| rule_write_generator_bound(f, t),
    },
    Rule {
        id: VerdictId::CheckpointBound,
        name: "checkpoint-bound",
        score: |f, _, t| rule_checkpoint_bound(f, t),
    },
];

impl VerdictId {
    /// A verdict about writes (decided over writer time).
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Self::WritebackBound | Self::FsyncBound | Self::WriteGeneratorBound
        )
    }
}

impl VerdictId {
    /// Every id, in [`RULES`] order.
    pub const ALL: [VerdictId; RULES.len()] = {
        let mut ids = [VerdictId::CpuBoundReader; RULES.len()];
        let mut i = 0;
        while i < RULES.len() {
            ids[i] = RULES[i].id;
            i += 1;
        }
        ids
    };

    /// This id's position in [`RULES`] (past the end only for an id
    /// missing from it, which a unit test rules out).
    fn rank(self) -> usize {
        RULES
            .iter()
            .position(|r| r.id == self)
            .unwrap_or(RULES.len())
    }

    /// The rule's name ("unknown" only for an id missing from [`RULES`],
    /// which a unit test rules out).
    pub fn as_str(self) -> &'static str {
        RULES
            .iter()
            .find(|r| r.id == self)
            .map_or("unknown", |r| r.name)
    }
}

impl PartialOrd for VerdictId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for VerdictId {
    /// By [`RULES`] order.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl fmt::Display for VerdictId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One figure a verdict rests on, as written to verdict.json (the
/// document form of a [`Figure`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Stable key, e.g. `reader_on_cpu_share`.
    pub key: String,
    pub value: f64,
    /// "fraction", "MiB/s", "%", "threads", "us", ...
    pub unit: String,
    /// The figure in words.
    pub text: String,
}

pub fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// A figure a finding rests on: its key, value and unit are fixed here, its
/// words come from `output::wording`. Values are unrounded (verdict.json
/// rounds them to 4 decimals).
#[derive(Clone, Debug, PartialEq)]
pub enum Figure {
    ReaderOnCpu {
        threads: usize,
        share: f64,
    },
    /// On CPU, plus runnable when the command does not oversubscribe the CPUs.
    ReaderCpuDemand {
        share: f64,
    },
    ReaderUser {
        share: f64,
    },
    /// Own work of reader CPU; `read_amplification` from the bench, when any.
    ReaderOwnWork {
        share: f64,
        read_amplification: Option<f64>,
    },
    /// A hot category of reader CPU samples.
    HotCategory {
        name: String,
        share: f64,
    },
    DeviceReadRate {
        device: String,
        mib_per_s: f64,
    },
    DeviceUtilization {
        device: String,
        utilization: f64,
    },
    DeviceLatencyP50 {
        device: String,
        us: f64,
    },
    /// Reads' median time from creation to dispatch (plug, I/O scheduler)
    /// beside their median time on the device.
    DeviceReadSplit {
        device: String,
        queue_us: f64,
        device_us: f64,
    },
    ReaderBlockedIo {
        share: f64,
    },
    ReaderReadSyscall {
        share: f64,
    },
    PageCacheHitRatio {
        hit: f64,
        read_mib: f64,
        storage_mib: f64,
    },
    ReaderCacheCopyCpu {
        share: f64,
    },
    BenchAu {
        percentage: f64,
        expected: f64,
    },
    ConsumerSleep {
        comm: String,
        share: f64,
    },
    ReaderSleeping {
        share: f64,
    },
    ReaderRunnable {
        share: f64,
    },
    BusyThreads(u32),
    NumCpus(u32),
    CpuDemandThreads(f64),
    CpusUsed(f64),
    ReaderFutex {
        share: f64,
    },
    ReaderReclaim {
        share: f64,
    },
    OomKilled,
    ReaderSocketRecv {
        share: f64,
    },
    /// Readers waiting for CPython's GIL.
    ReaderGil {
        share: f64,
    },
    /// A Python function running in the interpreter (holding the GIL): its
    /// share of reader CPU samples.
    GilHolder {
        function: String,
        share: f64,
    },
    /// Seconds without a read or a hand-off, up to the end of the data.
    NoProgress {
        seconds: f64,
        /// No hand-off between traced threads either (a blocked stall).
        handoffs_too: bool,
    },
    /// A thread a stall is stuck on.
    StalledThread {
        comm: String,
        tid: u32,
        state: String,
        seconds: f64,
    },
    WriterOnCpu {
        threads: usize,
        share: f64,
    },
    /// Of writer CPU, the share outside the kernel write path.
    WriterOwnWork {
        share: f64,
    },
    WriterSync {
        share: f64,
        calls: u64,
    },
    WriterWritebackWait {
        share: f64,
    },
    WriterDirtyThrottle {
        share: f64,
    },
    WriterBlockedIo {
        share: f64,
    },
    /// Device write bytes / write-syscall bytes.
    WrittenReachedDevice {
        ratio: f64,
        written_mib: f64,
        device_mib: f64,
    },
    DeviceWriteRate {
        device: String,
        mib_per_s: f64,
    },
    /// The consumer's own time in its window (neither compute nor data
    /// wait) and what it wrote.
    ConsumerOwnTime {
        comm: String,
        share: f64,
        written_mib: f64,
    },
    /// Of that own time, the share in uninterruptible (D) waits.
    ConsumerOwnIo {
        share: f64,
    },
    /// The consumer's data wait, as a share of its window.
    ConsumerDataWaitShare {
        share: f64,
    },
}

impl Figure {
    /// The stable key in verdict.json.
    pub fn key(&self) -> String {
        match self {
            Self::ReaderOnCpu { .. } => "reader_on_cpu_share",
            Self::ReaderCpuDemand { .. } => "reader_cpu_demand_share",
            Self::ReaderUser { .. } => "reader_user_share",
            Self::ReaderOwnWork { .. } => "reader_own_work_share",
            Self::HotCategory { name, .. } => return format!("hot:{name}"),
            Self::DeviceReadRate { .. } => "device_read_mib_per_s",
            Self::DeviceUtilization { .. } => "device_utilization",
            Self::DeviceLatencyP50 { .. } => "device_latency_p50_us",
            Self::DeviceReadSplit { .. } => "device_read_queue_p50_us",
            Self::ReaderBlockedIo { .. } => "reader_blocked_io_share",
            Self::ReaderReadSyscall { .. } => "reader_read_syscall_share",
            Self::PageCacheHitRatio { .. } => "page_cache_hit_ratio",
            Self::ReaderCacheCopyCpu { .. } => "reader_cache_copy_cpu_share",
            Self::BenchAu { .. } => "bench_au_percentage",
            Self::ConsumerSleep { .. } => "consumer_sleep_share",
            Self::ReaderSleeping { .. } => "reader_sleeping_share",
            Self::ReaderRunnable { .. } => "reader_runnable_share",
            Self::BusyThreads(_) => "busy_threads",
            Self::NumCpus(_) => "num_cpus",
            Self::CpuDemandThreads(_) => "cpu_demand_threads",
            Self::CpusUsed(_) => "cpus_used",
            Self::ReaderFutex { .. } => "reader_futex_share",
            Self::ReaderReclaim { .. } => "reader_reclaim_share",
            Self::OomKilled => "oom_killed",
            Self::ReaderSocketRecv { .. } => "reader_socket_recv_share",
            Self::ReaderGil { .. } => "reader_gil_share",
            Self::GilHolder { function, .. } => return format!("gil_holder:{function}"),
            Self::NoProgress { .. } => "no_progress_s",
            Self::StalledThread { tid, .. } => return format!("stalled_thread:{tid}"),
            Self::WriterOnCpu { .. } => "writer_on_cpu_share",
            Self::WriterOwnWork { .. } => "writer_own_work_share",
            Self::WriterSync { .. } => "writer_sync_share",
            Self::WriterWritebackWait { .. } => "writer_writeback_wait_share",
            Self::WriterDirtyThrottle { .. } => "writer_dirty_throttle_share",
            Self::WriterBlockedIo { .. } => "writer_blocked_io_share",
            Self::WrittenReachedDevice { .. } => "device_over_written",
            Self::DeviceWriteRate { .. } => "device_write_mib_per_s",
            Self::ConsumerOwnTime { .. } => "consumer_own_share",
            Self::ConsumerOwnIo { .. } => "consumer_own_io_share",
            Self::ConsumerDataWaitShare { .. } => "consumer_data_wait_share",
        }
        .to_string()
    }

    pub fn value(&self) -> f64 {
        match self {
            Self::ReaderOnCpu { share, .. }
            | Self::ReaderCpuDemand { share }
            | Self::ReaderUser { share }
            | Self::ReaderOwnWork { share, .. }
            | Self::HotCategory { share, .. }
            | Self::ReaderBlockedIo { share }
            | Self::ReaderReadSyscall { share }
            | Self::ReaderCacheCopyCpu { share }
            | Self::ConsumerSleep { share, .. }
            | Self::ReaderSleeping { share }
            | Self::ReaderRunnable { share }
            | Self::ReaderFutex { share }
            | Self::ReaderReclaim { share }
            | Self::ReaderSocketRecv { share }
            | Self::ReaderGil { share }
            | Self::GilHolder { share, .. }
            | Self::WriterOnCpu { share, .. }
            | Self::WriterOwnWork { share }
            | Self::WriterSync { share, .. }
            | Self::WriterWritebackWait { share }
            | Self::WriterDirtyThrottle { share }
            | Self::WriterBlockedIo { share }
            | Self::ConsumerOwnTime { share, .. }
            | Self::ConsumerOwnIo { share }
            | Self::ConsumerDataWaitShare { share } => *share,
            Self::WrittenReachedDevice { ratio, .. } => *ratio,
            Self::DeviceWriteRate { mib_per_s, .. } => *mib_per_s,
            Self::DeviceReadRate { mib_per_s, .. } => *mib_per_s,
            Self::DeviceUtilization { utilization, .. } => *utilization,
            Self::DeviceLatencyP50 { us, .. } => *us,
            Self::DeviceReadSplit { queue_us, .. } => *queue_us,
            Self::PageCacheHitRatio { hit, .. } => *hit,
            Self::BenchAu { percentage, .. } => *percentage,
            Self::BusyThreads(n) | Self::NumCpus(n) => f64::from(*n),
            Self::CpuDemandThreads(x) | Self::CpusUsed(x) => *x,
            Self::OomKilled => 1.0,
            Self::NoProgress { seconds, .. } | Self::StalledThread { seconds, .. } => *seconds,
        }
    }

    pub fn unit(&self) -> &'static str {
        match self {
            Self::DeviceReadRate { .. } | Self::DeviceWriteRate { .. } => "MiB/s",
            Self::DeviceLatencyP50 { .. } | Self::DeviceReadSplit { .. } => "us",
            Self::BenchAu { .. } => "%",
            Self::BusyThreads(_) | Self::CpuDemandThreads(_) => "threads",
            Self::NumCpus(_) | Self::CpusUsed(_) => "cpus",
            Self::OomKilled => "bool",
            Self::NoProgress { .. } | Self::StalledThread { .. } => "s",
            _ => "fraction",
        }
    }
}

/// What a share is of: the reader threads' own time, or the consumer's data
/// wait (the critical path of the wake-up graph).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareBasis {
    ReaderTime,
    ConsumerDataWait,
}

impl ShareBasis {
    pub fn of(f: &Features) -> Self {
        if f.reader_selection == Some(super::features::ReaderSelection::CriticalPath) {
            Self::ConsumerDataWait
        } else {
            Self::ReaderTime
        }
    }
}

/// The busiest block device, as a finding names it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceFigures {
    pub name: String,
    pub read_mib_per_s: f64,
    pub utilization: f64,
}

/// The device that wrote the most, as a write finding names it.
#[derive(Clone, Debug, PartialEq)]
pub struct WriteDeviceFigures {
    pub name: String,
    pub write_mib_per_s: f64,
    pub utilization: f64,
}

/// What storage-bound (or writeback-bound) says limits the readers (writers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageLimit {
    /// The rule did not fire: only the device figures.
    NotFired,
    /// The device is at least `storage_busy_utilization` busy.
    Device,
    /// The device is not saturated: a throttle or queue limit in front of it.
    Throttle,
}

/// The AU figure compute-bound names.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AuSource {
    /// The bench's own AU (%).
    Bench(f64),
    /// The consumer's share of the window not waiting for data, from the
    /// wake-up graph.
    Kernel(f64),
    /// The consumer's nanosleep share.
    ConsumerAsleep(f64),
    NoConsumer,
}

/// The figures a finding's one-sentence summary is made from, per rule.
#[derive(Clone, Debug, PartialEq)]
pub enum Detail {
    CpuBoundReader {
        /// Hottest frames named in the headline (name, share).
        hot: Vec<(String, f64)>,
        /// Device utilization under `storage_idle_utilization`.
        storage_idle: bool,
        device: Option<DeviceFigures>,
        /// Readers' waits for CPython's GIL (a share of the basis).
        gil_share: f64,
        /// The Python functions running in the interpreter (so holding the
        /// GIL), hottest first, with their share of reader CPU samples.
        gil_holders: Vec<(String, f64)>,
    },
    StorageBound {
        blocked_share: f64,
        limit: StorageLimit,
        device: Option<DeviceFigures>,
        /// A cgroup's read limit on the device, when one is set.
        io_limit: Option<super::features::IoLimitFeature>,
    },
    PageCacheServed {
        hit: f64,
        read_mib: f64,
        /// More bytes came through file mappings than read syscalls.
        mostly_mapped: bool,
        read_syscall_mib_per_s: f64,
        device: Option<DeviceFigures>,
    },
    ComputeBound {
        au: AuSource,
    },
    CpuStarved {
        runnable_share: f64,
        busy_threads: u32,
        num_cpus: u32,
    },
    LockContention {
        futex_share: f64,
    },
    MemoryPressure {
        oom_killed: bool,
        reclaim_share: f64,
    },
    NetworkBound {
        socket_share: f64,
    },
    WritebackBound {
        wait_share: f64,
        throttle_share: f64,
        limit: StorageLimit,
        device: Option<WriteDeviceFigures>,
    },
    FsyncBound {
        sync_share: f64,
        calls: u64,
        device: Option<WriteDeviceFigures>,
    },
    WriteGeneratorBound {
        on_cpu_share: f64,
        own_work_share: f64,
        device: Option<WriteDeviceFigures>,
    },
    CheckpointBound {
        /// The consumer, as named in the wait-for graph (None: no consumer).
        comm: Option<String>,
        own_share: f64,
        compute_share: f64,
        data_wait_share: f64,
        /// Of the own time, in uninterruptible (D) waits.
        own_io_share: f64,
        written_mib: f64,
        device: Option<WriteDeviceFigures>,
    },
    Stalled {
        /// None: the rule did not fire.
        kind: Option<StallKind>,
        quiet_s: f64,
        /// (comm, tid) of the threads it is stuck on.
        threads: Vec<(String, u32)>,
    },
}

/// The outcome of one rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub verdict: VerdictId,
    /// All of the rule's conditions hold.
    pub fired: bool,
    /// Share of reader time (or AU) this finding explains (0..1).
    pub score: f64,
    /// What was seen, for the summary sentence.
    pub detail: Detail,
    pub figures: Vec<Figure>,
}

/// A finding that did not win.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunnerUp {
    pub verdict: VerdictId,
    pub fired: bool,
    pub score: f64,
    pub summary: String,
}

/// A secondary finding or caveat of a [`Decision`], in the order given.
#[derive(Clone, Debug, PartialEq)]
pub enum Note {
    /// A runner-up that fired too.
    AlsoFired(VerdictId),
    /// DLIO's derived I/O figure vs the bench's measured one (storage #330).
    IoMismatch {
        derived_mib_per_s: f64,
        measured_mib_per_s: f64,
        ratio: f64,
    },
    ReadAmplification(f64),
    /// Session files missing.
    PartialSession(Vec<String>),
    /// No thread was recorded (no threads.json, or an empty one): nothing
    /// to decide from; the verdict is inconclusive whatever scored first.
    NothingRecorded,
    LostEvents(u64),
    /// A format 1 session: no wake-up graph.
    Format1Session,
    /// A format 2 session without the wakeups probe's data.
    NoWakeupGraph,
    /// A note of the wait-for graph, already in words.
    WaitGraph(String),
    /// Write-dominated session whose data only reached the page cache: no
    /// fsync-family call, devices wrote little of it while recording.
    WritesOnlyInMemory {
        written_mib: f64,
        device_mib: f64,
    },
    /// The bench's AU counts only its steps, while the consumer's window
    /// includes its own writes (DLIO leaves checkpoint time out).
    BenchAuLeavesOutOwnTime {
        bench_au: f64,
        compute_share: f64,
        own_share: f64,
    },
    /// A consumer waited for the GIL a good part of its window: its own
    /// step timing counts that as compute.
    /// The workers were started anew for later epochs, and the consumer's
    /// wait for each epoch's first batch is in the kernel AU, which DLIO's
    /// leaves out.
    EpochStarts {
        epochs: u32,
        wait_s: f64,
        share: f64,
        /// The kernel AU without those waits (%).
        au_without: f64,
    },
    ConsumerGil {
        comm: String,
        share: f64,
    },
    /// Reader figures are shares of the consumers' data wait (and of their
    /// waits for a GIL the loaders held).
    ConsumerDataWait {
        wait_s: f64,
        gil_s: f64,
        /// (comm, tid) of each consumer.
        consumers: Vec<(String, u32)>,
    },
}

/// Which rules decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RuleSet {
    /// Not known yet (before [`Decision::attach_wait`]).
    #[default]
    Unset,
    /// The critical path of the consumer's data waits.
    WaitGraph,
    /// Wake-up graph without a consumer, or none at all: the readers' time.
    Readers,
    /// A session recorded before the wake-up graph existed.
    Format1,
}

impl RuleSet {
    /// The name in verdict.json `rules`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unset => "",
            Self::WaitGraph => "wait-graph",
            Self::Readers => "readers",
            Self::Format1 => "format-1",
        }
    }
}

/// The verdict as data: what `output::wording::verdict` turns into
/// verdict.json's [`Verdict`].
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub primary: Finding,
    /// Other findings, fired first, by score.
    pub runners_up: Vec<Finding>,
    /// 0..1; see [`confidence`].
    pub confidence: f64,
    pub confidence_label: &'static str,
    /// No rule fired: the verdict is only the closest match.
    pub inconclusive: bool,
    pub notes: Vec<Note>,
    /// What the reader shares are of.
    pub basis: ShareBasis,
    pub rules: RuleSet,
    /// The wait-for graph's figures, rounded (empty without a consumer).
    pub kernel_au_percentage: Option<f64>,
    pub data_wait_share: Option<f64>,
    pub window: Option<Window>,
    pub phases: Vec<Phase>,
    pub consumers: Vec<ConsumerTime>,
    pub roles: Vec<RoleRow>,
    pub critical_path: Vec<PathShare>,
    /// The stall, when the verdict is `stalled`.
    pub stall: Option<Stall>,
}

/// `verdict.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub format_version: u32,
    pub verdict: VerdictId,
    pub headline: String,
    /// 0..1; see [`confidence`].
    pub confidence: f64,
    /// "high" (≥ `confidence_high`, 0.7), "medium" (≥ `confidence_medium`,
    /// 0.4) or "low".
    pub confidence_label: String,
    /// No rule fired: the verdict is only the closest match.
    pub inconclusive: bool,
    pub evidence: Vec<Evidence>,
    /// Other findings, fired first, by score.
    pub runners_up: Vec<RunnerUp>,
    /// Secondary findings and caveats (page cache, #330 mismatch, partial session).
    pub notes: Vec<String>,
    /// What to try, most specific first (made from the evidence by the
    /// profiler's `output::actions`; empty in sessions analysed before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<String>,
    /// Thresholds the run overrode (`--thresholds FILE`), with their defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threshold_overrides: Vec<super::thresholds::ThresholdOverride>,
    /// Which rules decided: "wait-graph" (the critical path of the
    /// consumer's data waits), "readers" (wake-up graph without a
    /// consumer: the readers' own time) or "format-1" (a session recorded
    /// before the wake-up graph existed: the readers' summed thread time).
    #[serde(default)]
    pub rules: String,
    /// The consumer's AU as the kernel saw it over the training window (%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_au_percentage: Option<f64>,
    /// 1 − kernel AU: the share of the window the consumer waited for data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_wait_share: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumers: Vec<ConsumerTime>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<RoleRow>,
    /// Where the consumer's data wait went, heaviest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub critical_path: Vec<PathShare>,
    /// The stall, with the stacks of the threads it is stuck on, when the
    /// verdict is `stalled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<Stall>,
}

impl Decision {
    /// Adds the wait-for-graph figures and says which rules decided.
    pub fn attach_wait(&mut self, wait: Option<&WaitAnalysis>, session_format: u32) {
        let Some(w) = wait else {
            if session_format < 2 {
                self.notes.push(Note::Format1Session);
                self.rules = RuleSet::Format1;
            } else {
                self.notes.push(Note::NoWakeupGraph);
                self.rules = RuleSet::Readers;
            }
            return;
        };
        self.notes
            .extend(w.notes.iter().cloned().map(Note::WaitGraph));
        if w.kernel_au_percentage.is_none() {
            self.rules = RuleSet::Readers;
            if !w.critical_path.is_empty() {
                // The readers' own time, split by what ended their waits.
                self.window = w.window.clone();
                self.phases = w.phases.clone();
                self.roles = w.roles.clone();
                self.critical_path = rounded_path(&w.critical_path);
            }
            return;
        }
        self.rules = RuleSet::WaitGraph;
        self.notes.push(Note::ConsumerDataWait {
            wait_s: w
                .consumers
                .iter()
                .map(|c| c.data_wait_ns as f64 / 1e9)
                .sum(),
            gil_s: w.consumers.iter().map(|c| c.gil_ns as f64 / 1e9).sum(),
            consumers: w
                .consumers
                .iter()
                .map(|c| (c.comm.clone(), c.tid))
                .collect(),
        });
        for c in &w.consumers {
            let window = c.window_ns.max(1) as f64;
            let starts = c.epoch_start_wait_ns as f64;
            if c.epoch_starts > 0 && starts >= EPOCH_STARTS_NOTE_SHARE * window && starts < window {
                let not_computing = (1.0 - c.au_percentage / 100.0) * window;
                self.notes.push(Note::EpochStarts {
                    epochs: c.epoch_starts,
                    wait_s: starts / 1e9,
                    share: starts / window,
                    au_without: ((1.0 - (not_computing - starts).max(0.0) / (window - starts))
                        * 100.0)
                        .clamp(0.0, 100.0),
                });
            }
            let share = c.gil_ns as f64 / c.window_ns.max(1) as f64;
            if share >= CONSUMER_GIL_NOTE_SHARE {
                self.notes.push(Note::ConsumerGil {
                    comm: c.comm.clone(),
                    share,
                });
            }
        }
        self.kernel_au_percentage = w.kernel_au_percentage.map(round4);
        self.data_wait_share = w.data_wait_share.map(round4);
        self.window = w.window.clone();
        self.phases = w.phases.clone();
        self.consumers = w.consumers.clone();
        self.roles = w.roles.clone();
        self.critical_path = rounded_path(&w.critical_path);
    }
}

/// The share of its window a consumer waited for later epochs' first
/// batches from which a note says so.
const EPOCH_STARTS_NOTE_SHARE: f64 = 0.02;

/// A consumer's share of its window waiting for the GIL from which a note
/// says that its own step timing counts it as compute.
const CONSUMER_GIL_NOTE_SHARE: f64 = 0.05;

/// A critical path with its shares rounded for verdict.json.
fn rounded_path(path: &[PathShare]) -> Vec<PathShare> {
    path.iter()
        .map(|p| PathShare {
            share: round4(p.share),
            threads: p
                .threads
                .iter()
                .map(|(pid, tid, comm, share)| (*pid, *tid, comm.clone(), round4(*share)))
                .collect(),
            ..p.clone()
        })
        .collect()
}

fn device_figures(f: &Features) -> Option<DeviceFigures> {
    f.top_device.as_ref().map(|d| DeviceFigures {
        name: d.name.clone(),
        read_mib_per_s: d.read_mib_per_s,
        utilization: d.utilization,
    })
}

fn top_util(f: &Features) -> f64 {
    f.top_device.as_ref().map_or(0.0, |d| d.utilization)
}

fn device_evidence(f: &Features) -> Vec<Figure> {
    let mut out = Vec::new();
    if let Some(d) = &f.top_device {
        out.push(Figure::DeviceReadRate {
            device: d.name.clone(),
            mib_per_s: d.read_mib_per_s,
        });
        out.push(Figure::DeviceUtilization {
            device: d.name.clone(),
            utilization: d.utilization,
        });
        if let Some(p50) = d.latency_p50_us {
            out.push(Figure::DeviceLatencyP50 {
                device: d.name.clone(),
                us: p50,
            });
        }
        if let (Some(queue_us), Some(device_us)) = (d.read_queue_p50_us, d.read_latency_p50_us) {
            out.push(Figure::DeviceReadSplit {
                device: d.name.clone(),
                queue_us,
                device_us,
            });
        }
    }
    out
}

/// Share from which a hot category is named in the headline: smaller ones
/// explain too little of the CPU to be the cause.
pub const HEADLINE_CATEGORY_MIN_SHARE: f64 = 0.05;

/// The hottest frames a headline names: categories of at least
/// [`HEADLINE_CATEGORY_MIN_SHARE`] (not the "other" buckets), else the
/// hottest self functions; at most `max`.
pub fn headline_frames(hot: &HotFrames, max: usize) -> Vec<(String, f64)> {
    let named: Vec<&FrameShare> = hot
        .categories
        .iter()
        .filter(|c| c.share >= HEADLINE_CATEGORY_MIN_SHARE && !c.name.starts_with("other"))
        .take(max)
        .collect();
    let rows: Vec<&FrameShare> = if named.is_empty() {
        hot.self_functions.iter().take(max).collect()
    } else {
        named
    };
    rows.iter().map(|c| (c.name.clone(), c.share)).collect()
}

fn rule_cpu_bound_reader(f: &Features, hot: &HotFrames, t: &Thresholds) -> Finding {
    let user = f.reader_user_share.unwrap_or(0.0);
    let own = f.reader_own_work_share().unwrap_or(0.0);
    let util = top_util(f);
    // CPU demand: on CPU, plus waiting for one when the command itself does
    // not oversubscribe the CPUs (then the wait is other load on the machine
    // and the readers still need CPU, not I/O). When it does, the runnable
    // time is cpu-starved's evidence instead.
    let queued = if oversubscribed(f) {
        0.0
    } else {
        f.reader_runnable_share
    };
    // A wait for the GIL is a wait to run Python: CPU demand too.
    let demand = (f.reader_on_cpu_share + queued + f.reader_gil_share).min(1.0);
    let fired = demand >= t.cpu_bound_on_cpu_share
        && own >= t.cpu_bound_own_work_share
        && util < t.storage_busy_utilization;
    let mut figures = vec![
        Figure::ReaderOnCpu {
            threads: f.reader_threads,
            share: f.reader_on_cpu_share,
        },
        Figure::ReaderCpuDemand { share: demand },
        Figure::ReaderUser { share: user },
    ];
    // Who held the GIL the readers waited for: the Python functions
    // running in the interpreter (on CPU with the GIL, by definition).
    let mut gil_holders: Vec<(String, f64)> = Vec::new();
    if f.reader_gil_share > 0.0 {
        figures.push(Figure::ReaderGil {
            share: f.reader_gil_share,
        });
        for r in hot.python_functions.iter().take(3) {
            figures.push(Figure::GilHolder {
                function: r.name.clone(),
                share: r.share,
            });
            gil_holders.push((r.name.clone(), r.share));
        }
    }
    figures.push(Figure::ReaderOwnWork {
        share: own,
        read_amplification: f.bench.as_ref().and_then(|b| b.read_amplification),
    });
    for c in hot.categories.iter().take(3) {
        figures.push(Figure::HotCategory {
            name: c.name.clone(),
            share: c.share,
        });
    }
    figures.extend(device_evidence(f));
    Finding {
        verdict: VerdictId::CpuBoundReader,
        fired,
        score: demand * own,
        detail: Detail::CpuBoundReader {
            hot: headline_frames(hot, 2),
            storage_idle: util < t.storage_idle_utilization,
            device: device_figures(f),
            gil_share: f.reader_gil_share,
            gil_holders,
        },
        figures,
    }
}

fn rule_storage_bound(f: &Features, t: &Thresholds) -> Finding {
    let util = top_util(f);
    let fired = f.reader_blocked_io_share >= t.storage_bound_blocked_share;
    let limit = if !fired {
        StorageLimit::NotFired
    } else if util >= t.storage_busy_utilization {
        StorageLimit::Device
    } else {
        StorageLimit::Throttle
    };
    let mut figures = vec![
        Figure::ReaderBlockedIo {
            share: f.reader_blocked_io_share,
        },
        Figure::ReaderReadSyscall {
            share: f.reader_read_syscall_share,
        },
    ];
    figures.extend(device_evidence(f));
    Finding {
        verdict: VerdictId::StorageBound,
        fired,
        score: f.reader_blocked_io_share,
        detail: Detail::StorageBound {
            blocked_share: f.reader_blocked_io_share,
            limit,
            device: device_figures(f),
            io_limit: f.io_limit.clone(),
        },
        figures,
    }
}

fn rule_page_cache_served(f: &Features, t: &Thresholds) -> Finding {
    let hit = f.page_cache_hit_ratio.unwrap_or(0.0);
    let util = top_util(f);
    let read_bytes = f.read_syscall_bytes + f.mapped_read_bytes;
    let read_mib = read_bytes as f64 / (1 << 20) as f64;
    // Readers served from memory do not sleep in D state: when they do as
    // much as storage-bound asks, the hit ratio is wrong (block requests a
    // blkio throttle releases later are credited to other tasks).
    let fired = read_bytes >= t.page_cache_min_read_bytes
        && hit >= t.page_cache_hit_ratio
        && util < t.storage_idle_utilization
        && f.reader_blocked_io_share < t.storage_bound_blocked_share;
    let copy_cpu = f.reader_on_cpu_share * f.reader_cache_copy_share;
    let score = if fired {
        f.reader_read_syscall_share.max(copy_cpu)
    } else {
        0.0
    };
    let figures = [
        Figure::PageCacheHitRatio {
            hit,
            read_mib,
            storage_mib: f.device_read_bytes.max(f.page_cache_miss_bytes) as f64 / (1 << 20) as f64,
        },
        Figure::ReaderReadSyscall {
            share: f.reader_read_syscall_share,
        },
        Figure::ReaderCacheCopyCpu { share: copy_cpu },
    ]
    .into_iter()
    .chain(device_evidence(f))
    .collect();
    Finding {
        verdict: VerdictId::PageCacheServed,
        fired,
        score,
        detail: Detail::PageCacheServed {
            hit,
            read_mib,
            mostly_mapped: f.mapped_read_bytes > f.read_syscall_bytes,
            read_syscall_mib_per_s: f.read_syscall_mib_per_s,
            device: device_figures(f),
        },
        figures,
    }
}

fn rule_compute_bound(f: &Features, t: &Thresholds) -> Finding {
    let au_bench = f.bench.as_ref().and_then(|b| b.au_percentage);
    let consumer_share = f.consumer.as_ref().map(|c| c.sleep_share);
    // The bench's own AU when present; else the consumer's nanosleep share,
    // which is the same ratio measured from the kernel side.
    let au = au_bench.or(consumer_share.map(|s| s * 100.0));
    let threshold = f
        .bench
        .as_ref()
        .and_then(|b| b.au_expected_percentage)
        .unwrap_or(t.compute_bound_au_percentage);
    let fired = au.is_some_and(|a| a >= threshold);
    let mut figures = Vec::new();
    if let Some(a) = au_bench {
        figures.push(Figure::BenchAu {
            percentage: a,
            expected: threshold,
        });
    }
    if let Some(c) = &f.consumer {
        figures.push(Figure::ConsumerSleep {
            comm: c.comm.clone(),
            share: c.sleep_share,
        });
    }
    figures.push(Figure::ReaderSleeping {
        share: f.reader_sleeping_share,
    });
    let au_source = match au_bench {
        Some(a) => AuSource::Bench(a),
        None => match consumer_share {
            Some(s) if f.consumer.as_ref().is_some_and(|c| c.from_wait_graph) => {
                AuSource::Kernel(s)
            }
            Some(s) => AuSource::ConsumerAsleep(s),
            None => AuSource::NoConsumer,
        },
    };
    Finding {
        verdict: VerdictId::ComputeBound,
        fired,
        score: au.map_or(0.0, |a| (a / 100.0).clamp(0.0, 1.0)),
        detail: Detail::ComputeBound { au: au_source },
        figures,
    }
}

/// The traced command wants more CPUs at once than there are: on average
/// more of its threads on CPU or runnable than CPUs online.
fn oversubscribed(f: &Features) -> bool {
    f.num_cpus > 0 && f.cpu_demand_threads > f64::from(f.num_cpus)
}

fn rule_cpu_starved(f: &Features, t: &Thresholds) -> Finding {
    // Issue 4: runnable but waiting for a CPU *because* there are more busy
    // threads than cores. Waits caused by load outside the command count as
    // reader CPU demand (cpu-bound-reader) instead.
    let fired = f.reader_runnable_share >= t.cpu_starved_runnable_share && oversubscribed(f);
    Finding {
        verdict: VerdictId::CpuStarved,
        fired,
        score: f.reader_runnable_share,
        detail: Detail::CpuStarved {
            runnable_share: f.reader_runnable_share,
            busy_threads: f.busy_threads,
            num_cpus: f.num_cpus,
        },
        figures: vec![
            Figure::ReaderRunnable {
                share: f.reader_runnable_share,
            },
            Figure::BusyThreads(f.busy_threads),
            Figure::NumCpus(f.num_cpus),
            Figure::CpuDemandThreads(f.cpu_demand_threads),
            Figure::CpusUsed(f.cpus_used),
        ],
    }
}

fn rule_lock_contention(f: &Features, t: &Thresholds) -> Finding {
    Finding {
        verdict: VerdictId::LockContention,
        fired: f.reader_futex_share >= t.lock_futex_share,
        score: f.reader_futex_share,
        detail: Detail::LockContention {
            futex_share: f.reader_futex_share,
        },
        figures: vec![Figure::ReaderFutex {
            share: f.reader_futex_share,
        }],
    }
}

fn rule_memory_pressure(f: &Features, t: &Thresholds) -> Finding {
    let fired = f.oom_killed || f.reader_reclaim_share >= t.memory_reclaim_share;
    let mut figures = vec![Figure::ReaderReclaim {
        share: f.reader_reclaim_share,
    }];
    if f.oom_killed {
        figures.push(Figure::OomKilled);
    }
    Finding {
        verdict: VerdictId::MemoryPressure,
        fired,
        score: if f.oom_killed {
            1.0
        } else {
            f.reader_reclaim_share
        },
        detail: Detail::MemoryPressure {
            oom_killed: f.oom_killed,
            reclaim_share: f.reader_reclaim_share,
        },
        figures,
    }
}

fn rule_network_bound(f: &Features, t: &Thresholds) -> Finding {
    Finding {
        verdict: VerdictId::NetworkBound,
        fired: f.reader_socket_recv_share >= t.network_socket_share,
        score: f.reader_socket_recv_share,
        detail: Detail::NetworkBound {
            socket_share: f.reader_socket_recv_share,
        },
        figures: vec![Figure::ReaderSocketRecv {
            share: f.reader_socket_recv_share,
        }],
    }
}

fn rule_stalled(f: &Features) -> Finding {
    let Some(stall) = &f.stall else {
        return Finding {
            verdict: VerdictId::Stalled,
            fired: false,
            score: 0.0,
            detail: Detail::Stalled {
                kind: None,
                quiet_s: 0.0,
                threads: Vec::new(),
            },
            figures: Vec::new(),
        };
    };
    let mut figures = vec![Figure::NoProgress {
        seconds: stall.quiet_s,
        handoffs_too: stall.kind == StallKind::Blocked,
    }];
    figures.extend(stall.threads.iter().map(|th| Figure::StalledThread {
        comm: th.comm.clone(),
        tid: th.tid,
        state: th.state.clone(),
        seconds: th.seconds,
    }));
    Finding {
        verdict: VerdictId::Stalled,
        fired: true,
        score: 1.0,
        detail: Detail::Stalled {
            kind: Some(stall.kind),
            quiet_s: stall.quiet_s,
            threads: stall
                .threads
                .iter()
                .map(|th| (th.comm.clone(), th.tid))
                .collect(),
        },
        figures,
    }
}

fn write_device_figures(f: &Features) -> Option<WriteDeviceFigures> {
    let d = f.writes.as_ref()?.top_write_device.as_ref()?;
    Some(WriteDeviceFigures {
        name: d.name.clone(),
        write_mib_per_s: d.write_mib_per_s,
        utilization: d.utilization,
    })
}

fn write_device_evidence(f: &Features) -> Vec<Figure> {
    let Some(w) = &f.writes else {
        return Vec::new();
    };
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let mut out = vec![Figure::WrittenReachedDevice {
        ratio: w.device_over_written.unwrap_or(0.0),
        written_mib: mib(w.write_syscall_bytes),
        device_mib: mib(w.device_write_bytes),
    }];
    if let Some(d) = &w.top_write_device {
        out.push(Figure::DeviceWriteRate {
            device: d.name.clone(),
            mib_per_s: d.write_mib_per_s,
        });
        out.push(Figure::DeviceUtilization {
            device: d.name.clone(),
            utilization: d.utilization,
        });
    }
    out
}

fn write_util(f: &Features) -> f64 {
    f.writes
        .as_ref()
        .and_then(|w| w.top_write_device.as_ref())
        .map_or(0.0, |d| d.utilization)
}

fn rule_writeback_bound(f: &Features, t: &Thresholds) -> Finding {
    let w = f.writes.clone().unwrap_or_default();
    let util = write_util(f);
    let fired = w.write_dominated
        && w.writer_writeback_wait_share >= t.writeback_bound_wait_share
        && w.device_write_bytes > 0;
    let limit = if !fired {
        StorageLimit::NotFired
    } else if util >= t.storage_busy_utilization {
        StorageLimit::Device
    } else {
        StorageLimit::Throttle
    };
    let mut figures = vec![
        Figure::WriterWritebackWait {
            share: w.writer_writeback_wait_share,
        },
        Figure::WriterDirtyThrottle {
            share: w.writer_dirty_throttle_share,
        },
        Figure::WriterBlockedIo {
            share: w.writer_blocked_io_share,
        },
    ];
    figures.extend(write_device_evidence(f));
    Finding {
        verdict: VerdictId::WritebackBound,
        fired,
        score: w.writer_writeback_wait_share,
        detail: Detail::WritebackBound {
            wait_share: w.writer_writeback_wait_share,
            throttle_share: w.writer_dirty_throttle_share,
            limit,
            device: write_device_figures(f),
        },
        figures,
    }
}

fn rule_fsync_bound(f: &Features, t: &Thresholds) -> Finding {
    let w = f.writes.clone().unwrap_or_default();
    // Waiting for the device: something reached it.
    let fired = w.write_dominated
        && w.writer_sync_share >= t.fsync_bound_sync_share
        && w.device_write_bytes > 0;
    let mut figures = vec![
        Figure::WriterSync {
            share: w.writer_sync_share,
            calls: w.writer_sync_calls,
        },
        Figure::WriterBlockedIo {
            share: w.writer_blocked_io_share,
        },
    ];
    figures.extend(write_device_evidence(f));
    Finding {
        verdict: VerdictId::FsyncBound,
        fired,
        score: w.writer_sync_share,
        detail: Detail::FsyncBound {
            sync_share: w.writer_sync_share,
            calls: w.writer_sync_calls,
            device: write_device_figures(f),
        },
        figures,
    }
}

fn rule_write_generator_bound(f: &Features, t: &Thresholds) -> Finding {
    let w = f.writes.clone().unwrap_or_default();
    let own = w.own_work_share();
    let fired = w.write_dominated
        && w.writer_on_cpu_share >= t.write_generator_on_cpu_share
        && own >= t.write_generator_own_work_share
        && write_util(f) < t.storage_busy_utilization
        && w.writer_sync_share < t.fsync_bound_sync_share
        && w.writer_writeback_wait_share < t.writeback_bound_wait_share;
    let mut figures = vec![
        Figure::WriterOnCpu {
            threads: w.writer_threads,
            share: w.writer_on_cpu_share,
        },
        Figure::WriterOwnWork { share: own },
    ];
    figures.extend(write_device_evidence(f));
    Finding {
        verdict: VerdictId::WriteGeneratorBound,
        fired,
        score: w.writer_on_cpu_share * own,
        detail: Detail::WriteGeneratorBound {
            on_cpu_share: w.writer_on_cpu_share,
            own_work_share: own,
            device: write_device_figures(f),
        },
        figures,
    }
}

fn rule_checkpoint_bound(f: &Features, t: &Thresholds) -> Finding {
    let consumer = f.consumer.as_ref();
    let w = consumer.and_then(|c| c.writes.clone()).unwrap_or_default();
    let written_mib = w.write_bytes as f64 / (1 << 20) as f64;
    // Own time is saving when it waits on I/O, or writes fast enough for
    // its CPU to be the copying and serializing of a checkpoint.
    let own_s = w.own_share * w.window_s;
    let writing = w.own_io_share * 2.0 >= w.own_share
        || (own_s > 0.0 && written_mib / own_s >= t.checkpoint_min_write_mib_per_s);
    let fired = w.write_bytes >= t.writer_min_write_bytes
        && w.own_share >= t.checkpoint_bound_own_share
        && w.own_share > w.data_wait_share
        && writing;
    let comm = consumer.map(|c| c.comm.clone());
    let mut figures = vec![
        Figure::ConsumerOwnTime {
            comm: comm.clone().unwrap_or_default(),
            share: w.own_share,
            written_mib,
        },
        Figure::ConsumerOwnIo {
            share: w.own_io_share,
        },
        Figure::ConsumerSleep {
            comm: comm.clone().unwrap_or_default(),
            share: w.compute_share,
        },
        Figure::ConsumerDataWaitShare {
            share: w.data_wait_share,
        },
    ];
    figures.extend(write_device_evidence(f));
    Finding {
        verdict: VerdictId::CheckpointBound,
        fired,
        score: w.own_share,
        detail: Detail::CheckpointBound {
            comm,
            own_share: w.own_share,
            compute_share: w.compute_share,
            data_wait_share: w.data_wait_share,
            own_io_share: w.own_io_share,
            written_mib,
            device: write_device_figures(f),
        },
        figures,
    }
}

/// Every rule's finding, in [`RULES`] order.
pub fn findings(f: &Features, hot_oncpu: &HotFrames, t: &Thresholds) -> Vec<Finding> {
    RULES.iter().map(|r| (r.score)(f, hot_oncpu, t)).collect()
}

/// Confidence in the primary finding (0..1): its score, scaled down when the
/// margin over the runner-up is below `confident_margin` (to
/// `confidence_no_margin_factor` at no margin), and by the other
/// `confidence_*_factor` weights of [`Thresholds`] when no rule fired, the
/// session is partial, events were lost or readers ran less than
/// `min_reader_thread_s`.
pub fn confidence(primary: &Finding, runner_up_score: f64, f: &Features, t: &Thresholds) -> f64 {
    let margin = (primary.score - runner_up_score).max(0.0);
    let floor = t.confidence_no_margin_factor;
    let mut c = primary.score.clamp(0.0, 1.0)
        * (floor + (1.0 - floor) * (margin / t.confident_margin).min(1.0));
    if !primary.fired {
        c *= t.confidence_inconclusive_factor;
    }
    if !f.missing_files.is_empty() {
        c *= t.confidence_partial_session_factor;
    }
    if f.lost_events > 0 {
        c *= t.confidence_lost_events_factor;
    }
    let basis_s = match (&f.writes, &f.consumer) {
        (Some(w), _) if primary.verdict.is_write() => w.writer_thread_s,
        (_, Some(c)) if primary.verdict == VerdictId::CheckpointBound => {
            c.writes.as_ref().map_or(0.0, |w| w.window_s)
        }
        _ => f.reader_thread_s,
    };
    if basis_s < t.min_reader_thread_s {
        c *= t.confidence_short_reader_time_factor;
    }
    round4(c)
}

/// "high", "medium" or "low", by the `confidence_high` / `confidence_medium` bars.
fn label(c: f64, t: &Thresholds) -> &'static str {
    if c >= t.confidence_high {
        "high"
    } else if c >= t.confidence_medium {
        "medium"
    } else {
        "low"
    }
}

fn bench_notes(f: &Features, t: &Thresholds) -> Vec<Note> {
    let mut notes = Vec::new();
    let Some(b) = &f.bench else { return notes };
    if let (Some(derived), Some(measured), Some(r)) = (
        b.derived_io_mib_per_s,
        b.measured_read_mib_per_s,
        b.measured_over_derived,
    ) && (r > t.io_mismatch_factor || r < 1.0 / t.io_mismatch_factor)
    {
        notes.push(Note::IoMismatch {
            derived_mib_per_s: derived,
            measured_mib_per_s: measured,
            ratio: r,
        });
    }
    if let Some(a) = b.read_amplification
        && a > t.io_mismatch_factor
    {
        notes.push(Note::ReadAmplification(a));
    }
    notes
}

/// Decides the verdict from the features and the readers' hottest on-CPU
/// frames; [`Decision::attach_wait`] adds the wait-for graph's figures.
pub fn decide(f: &Features, hot_oncpu: &HotFrames, t: &Thresholds) -> Decision {
    let mut all = findings(f, hot_oncpu, t);
    // A stall is reported only when there is one: it is not a share of
    // anything to rank among the others.
    all.retain(|x| x.verdict != VerdictId::Stalled || x.fired);
    // The write rules speak only about write-dominated sessions; elsewhere
    // they are left out like a stall that did not fire. There, fired write
    // findings come before fired read ones: the "readers" picked by
    // activity are the writers, seen through rules made for reads.
    let write_dominated = f.writes.as_ref().is_some_and(|w| w.write_dominated);
    all.retain(|x| write_dominated || !x.verdict.is_write());
    // Fired first, then by score; ties by id order so output is deterministic.
    let write_first = |x: &Finding| write_dominated && x.fired && x.verdict.is_write();
    all.sort_by(|a, b| {
        b.fired
            .cmp(&a.fired)
            .then_with(|| write_first(b).cmp(&write_first(a)))
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| a.verdict.cmp(&b.verdict))
    });
    // Compute-bound wins whenever it fires: the pipeline keeps the consumer
    // busy, so whatever else is slow does not limit it. Unless the consumer
    // spends its window saving checkpoints in its own thread: it is not
    // computing then, whatever the bench's AU (DLIO's leaves that time out),
    // and that rule fires only when the saving outweighs its data wait.
    for leader in [VerdictId::ComputeBound, VerdictId::CheckpointBound] {
        if let Some(i) = all.iter().position(|x| x.verdict == leader && x.fired) {
            let first = all.remove(i);
            all.insert(0, first);
        }
    }
    // A job that makes no progress is limited by nothing else.
    if let Some(i) = all.iter().position(|x| x.verdict == VerdictId::Stalled) {
        let stalled = all.remove(i);
        all.insert(0, stalled);
    }
    let primary = all.remove(0);
    let stall = (primary.verdict == VerdictId::Stalled)
        .then(|| f.stall.clone())
        .flatten();
    // The stall's certainty does not depend on how the other shares rank;
    // a bench AU that left the checkpoints out is no rival to them.
    let runner_score = if stall.is_some() {
        0.0
    } else {
        all.iter()
            .find(|r| {
                !(primary.verdict == VerdictId::CheckpointBound
                    && r.verdict == VerdictId::ComputeBound)
            })
            .map_or(0.0, |r| r.score)
    };
    let nothing_recorded = f.threads_total == 0;
    let confidence = if nothing_recorded {
        0.0
    } else {
        confidence(&primary, runner_score, f, t)
    };
    let inconclusive = !primary.fired || nothing_recorded;

    let mut notes: Vec<Note> = all
        .iter()
        .filter(|r| r.fired)
        .map(|r| Note::AlsoFired(r.verdict))
        .collect();
    notes.extend(bench_notes(f, t));
    if primary.verdict == VerdictId::CheckpointBound
        && let (Some(bench_au), Some(w)) = (
            f.bench.as_ref().and_then(|b| b.au_percentage),
            f.consumer.as_ref().and_then(|c| c.writes.as_ref()),
        )
    {
        notes.push(Note::BenchAuLeavesOutOwnTime {
            bench_au,
            compute_share: w.compute_share,
            own_share: w.own_share,
        });
    }
    if let Some(w) = f.writes.as_ref().filter(|w| w.only_in_memory) {
        notes.push(Note::WritesOnlyInMemory {
            written_mib: w.write_syscall_bytes as f64 / (1 << 20) as f64,
            device_mib: w.device_write_bytes as f64 / (1 << 20) as f64,
        });
    }
    if nothing_recorded {
        notes.push(Note::NothingRecorded);
    }
    if !f.missing_files.is_empty() {
        notes.push(Note::PartialSession(f.missing_files.clone()));
    }
    if f.lost_events > 0 {
        notes.push(Note::LostEvents(f.lost_events));
    }
    Decision {
        primary,
        runners_up: all,
        confidence,
        confidence_label: label(confidence, t),
        inconclusive,
        notes,
        basis: ShareBasis::of(f),
        rules: RuleSet::Unset,
        kernel_au_percentage: None,
        data_wait_share: None,
        window: None,
        phases: Vec::new(),
        consumers: Vec::new(),
        roles: Vec::new(),
        critical_path: Vec::new(),
        stall,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant has exactly one rule, whose name is its serialized name
    /// and whose finding carries its id. The match makes a new variant a
    /// compile error here until it is listed.
    #[test]
    fn every_id_has_one_rule_named_as_serialized() {
        let variants = |id: VerdictId| match id {
            VerdictId::CpuBoundReader
            | VerdictId::StorageBound
            | VerdictId::PageCacheServed
            | VerdictId::ComputeBound
            | VerdictId::CpuStarved
            | VerdictId::LockContention
            | VerdictId::MemoryPressure
            | VerdictId::NetworkBound
            | VerdictId::Stalled
            | VerdictId::WritebackBound
            | VerdictId::FsyncBound
            | VerdictId::WriteGeneratorBound
            | VerdictId::CheckpointBound => id,
        };
        let f = Features::default();
        let t = Thresholds::default();
        for (i, rule) in RULES.iter().enumerate() {
            assert_eq!(variants(rule.id), VerdictId::ALL[i]);
            assert_eq!(RULES.iter().filter(|r| r.id == rule.id).count(), 1);
            assert_eq!(
                serde_json::to_string(&rule.id).ok(),
                Some(format!("\"{}\"", rule.name))
            );
            assert_eq!((rule.score)(&f, &HotFrames::default(), &t).verdict, rule.id);
        }
    }

    /// Own time that writes a few MiB (a real trainer's pipes and logs,
    /// 1 MiB/s) is not a checkpoint; the same time writing 1.5 GB, or
    /// waiting in fsync, is.
    #[test]
    fn checkpoint_bound_needs_the_own_time_to_be_writing() {
        use crate::features::{ConsumerFeature, ConsumerWrites};
        let with = |mib: u64, own_io_share: f64| Features {
            consumer: Some(ConsumerFeature {
                comm: "dlio_benchmark".into(),
                writes: Some(ConsumerWrites {
                    write_bytes: mib << 20,
                    window_s: 15.0,
                    compute_share: 0.32,
                    data_wait_share: 0.337,
                    own_share: 0.343,
                    own_io_share,
                }),
                ..ConsumerFeature::default()
            }),
            ..Features::default()
        };
        let fired = |f: &Features| rule_checkpoint_bound(f, &Thresholds::default()).fired;
        assert!(!fired(&with(5, 0.0)), "5 MiB over 5 s of own CPU");
        assert!(fired(&with(1500, 0.0)), "1.5 GB over 5 s of own CPU");
        assert!(fired(&with(5, 0.3)), "5 MiB with the own time in fsync");
    }

    /// A device whose reads' queue time was recorded shows it beside their
    /// device time; one recorded before that shows neither.
    #[test]
    fn storage_evidence_splits_a_reads_queue_time_from_its_device_time() {
        use crate::features::DeviceFeature;
        let mut f = Features {
            reader_blocked_io_share: 0.95,
            top_device: Some(DeviceFeature {
                name: "vda".into(),
                utilization: 0.02,
                read_latency_p50_us: Some(1048.576),
                read_queue_p50_us: Some(4.096),
                ..DeviceFeature::default()
            }),
            ..Features::default()
        };
        let split = |f: &Features| {
            rule_storage_bound(f, &Thresholds::default())
                .figures
                .into_iter()
                .find(|fig| matches!(fig, Figure::DeviceReadSplit { .. }))
        };
        let Some(fig) = split(&f) else {
            panic!("no split in the storage-bound evidence");
        };
        assert_eq!(fig.key(), "device_read_queue_p50_us");
        assert!((fig.value() - 4.096).abs() < 1e-9);
        if let Some(d) = f.top_device.as_mut() {
            d.read_queue_p50_us = None;
        }
        assert_eq!(split(&f), None);
    }
}
