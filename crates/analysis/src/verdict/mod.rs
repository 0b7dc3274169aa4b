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
mod attach;
mod decide;
mod figure;
mod rules;
#[cfg(test)]
mod tests;

pub use decide::{confidence, decide};
pub use figure::Figure;
use rules::*;
pub use rules::{HEADLINE_CATEGORY_MIN_SHARE, findings, headline_frames};

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
/// What a share is of: the reader threads' own time, or the consumer's data
/// wait (the critical path of the wake-up graph).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareBasis {
    ReaderTime,
    ConsumerDataWait,
    /// The consumer's own fetching: it never waited for data.
    ConsumerFetch,
}

impl ShareBasis {
    pub fn of(f: &Features) -> Self {
        use super::features::ReaderSelection as S;
        match f.reader_selection {
            Some(S::CriticalPath) => Self::ConsumerDataWait,
            Some(S::ConsumerFetch) => Self::ConsumerFetch,
            _ => Self::ReaderTime,
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
    /// A FUSE daemon answered the reads: the file system it serves (an
    /// object store behind s3fs, gcsfuse, Mountpoint) is the limit.
    FsDaemon,
}

/// The AU figure compute-bound names.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AuSource {
    /// The bench's own AU (%).
    Bench(f64),
    /// The consumer's share (0..1) of the window not waiting for data,
    /// from the wake-up graph.
    Kernel(f64),
    /// The consumer's nanosleep share (0..1).
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
        /// The FUSE daemon that answered the reads, when one did.
        fs_daemon: Option<super::features::FsDaemonFeature>,
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
        /// Where the readers waited for the lock most.
        site: Option<crate::locks::LockSite>,
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
    /// The threads the verdict rests on ran `thread_s` in all, under
    /// `min_decision_thread_s`: too short to decide from; inconclusive.
    TooLittleRecorded {
        thread_s: f64,
        min_s: f64,
    },
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
    /// Reader figures are shares of the consumers' own fetching: they
    /// never waited for data (`ShareBasis::ConsumerFetch`).
    ConsumerFetch {
        /// Their own fetching and, of it, queued for a CPU, s.
        fetch_s: f64,
        queued_s: f64,
        /// Their AU (%), the mean over the consumers.
        au: f64,
        /// (comm, tid) of each consumer.
        consumers: Vec<(String, u32)>,
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
