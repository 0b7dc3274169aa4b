//! Verdict rules: one pure function per verdict id scores the features; the
//! primary verdict is what limits the pipeline, the others are runners-up.
//!
//! ```text
//! Features + HotFrames ──► rule per id ──► Finding { fired, score, evidence }
//!                      ──► primary = compute-bound when it fires (the
//!                          pipeline keeps up), else the highest-scoring fired
//!                          finding ──► Verdict { headline, confidence, ... }
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
pub const RULES: [Rule; 8] = [
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
];

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

/// One figure a verdict rests on.
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

fn ev(key: &str, value: f64, unit: &str, text: String) -> Evidence {
    Evidence {
        key: key.to_string(),
        value: round4(value),
        unit: unit.to_string(),
        text,
    }
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The outcome of one rule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub verdict: VerdictId,
    /// All of the rule's conditions hold.
    pub fired: bool,
    /// Share of reader time (or AU) this finding explains (0..1).
    pub score: f64,
    /// One sentence: what was seen.
    pub summary: String,
    pub evidence: Vec<Evidence>,
}

/// A finding that did not win.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunnerUp {
    pub verdict: VerdictId,
    pub fired: bool,
    pub score: f64,
    pub summary: String,
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
}

impl Verdict {
    /// Adds the wait-for-graph figures and says which rules decided.
    pub fn attach_wait(&mut self, wait: Option<&WaitAnalysis>, session_format: u32) {
        let Some(w) = wait else {
            self.rules = if session_format < 2 {
                self.notes.push(
                    "Session of format 1 (no wake-up graph): verdict by the older rules over \
                     the readers' summed thread time; idle pool threads may weigh in."
                        .to_string(),
                );
                "format-1"
            } else {
                self.notes.push(
                    "No wake-up graph in this session (the wakeups probe did not run): \
                     verdict over the readers' summed thread time."
                        .to_string(),
                );
                "readers"
            }
            .to_string();
            return;
        };
        self.notes.extend(w.notes.iter().cloned());
        if w.kernel_au_percentage.is_none() {
            self.rules = "readers".to_string();
            return;
        }
        self.rules = "wait-graph".to_string();
        let wait_s: f64 = w
            .consumers
            .iter()
            .map(|c| c.data_wait_ns as f64 / 1e9)
            .sum();
        let names: Vec<String> = w
            .consumers
            .iter()
            .map(|c| format!("{} (tid {})", c.comm, c.tid))
            .collect();
        self.notes.push(format!(
            "Figures about \"reader\" time are shares of the consumer's data wait ({wait_s:.2} s \
             over the training window, consumer {}), spent by the threads it waited on, \
             directly or through their own waits.",
            names.join(", ")
        ));
        self.kernel_au_percentage = w.kernel_au_percentage.map(round4);
        self.data_wait_share = w.data_wait_share.map(round4);
        self.window = w.window.clone();
        self.phases = w.phases.clone();
        self.consumers = w.consumers.clone();
        self.roles = w.roles.clone();
        self.critical_path = w
            .critical_path
            .iter()
            .map(|p| PathShare {
                share: round4(p.share),
                threads: p
                    .threads
                    .iter()
                    .map(|(pid, tid, comm, share)| (*pid, *tid, comm.clone(), round4(*share)))
                    .collect(),
                ..p.clone()
            })
            .collect();
    }
}

fn storage_phrase(f: &Features) -> String {
    match &f.top_device {
        Some(d) => format!(
            "{:.1} MiB/s from {}, {} busy",
            d.read_mib_per_s,
            d.name,
            pct(d.utilization)
        ),
        None => "no block-device activity recorded".to_string(),
    }
}

fn top_util(f: &Features) -> f64 {
    f.top_device.as_ref().map_or(0.0, |d| d.utilization)
}

fn read_syscall_evidence(f: &Features) -> Evidence {
    ev(
        "reader_read_syscall_share",
        f.reader_read_syscall_share,
        "fraction",
        format!(
            "readers inside read syscalls {} of the readers' time",
            pct(f.reader_read_syscall_share)
        ),
    )
}

fn device_evidence(f: &Features) -> Vec<Evidence> {
    let mut out = Vec::new();
    if let Some(d) = &f.top_device {
        out.push(ev(
            "device_read_mib_per_s",
            d.read_mib_per_s,
            "MiB/s",
            format!("{} read {:.2} MiB/s", d.name, d.read_mib_per_s),
        ));
        out.push(ev(
            "device_utilization",
            d.utilization,
            "fraction",
            format!("{} busy {} of the recording", d.name, pct(d.utilization)),
        ));
        if let Some(p50) = d.latency_p50_us {
            out.push(ev(
                "device_latency_p50_us",
                p50,
                "us",
                format!("{} median request latency ≤ {p50:.0} µs", d.name),
            ));
        }
    }
    out
}

/// Friendly "name NN%" list of the hottest categories for headlines.
pub fn hot_phrase(hot: &HotFrames, max: usize) -> String {
    let named: Vec<&FrameShare> = hot
        .categories
        .iter()
        .filter(|c| c.share >= 0.05 && !c.name.starts_with("other"))
        .take(max)
        .collect();
    let rows: Vec<&FrameShare> = if named.is_empty() {
        hot.self_functions.iter().take(max).collect()
    } else {
        named
    };
    rows.iter()
        .map(|c| format!("{} {:.0}%", c.name, c.share * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

fn rule_cpu_bound_reader(f: &Features, hot: &HotFrames, t: &Thresholds) -> Finding {
    let basis = f.basis();
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
    let demand = (f.reader_on_cpu_share + queued).min(1.0);
    let fired = demand >= t.cpu_bound_on_cpu_share
        && own >= t.cpu_bound_own_work_share
        && util < t.storage_busy_utilization;
    let hot_text = hot_phrase(hot, 2);
    let storage = if util < t.storage_idle_utilization {
        format!("storage idle: {}", storage_phrase(f))
    } else {
        format!("storage: {}", storage_phrase(f))
    };
    let headline_hot = if hot_text.is_empty() {
        String::new()
    } else {
        format!(" ({hot_text})")
    };
    let mut evidence = vec![
        ev(
            "reader_on_cpu_share",
            f.reader_on_cpu_share,
            "fraction",
            format!(
                "{} reader thread(s) on CPU {} {basis}",
                f.reader_threads,
                pct(f.reader_on_cpu_share)
            ),
        ),
        ev(
            "reader_cpu_demand_share",
            demand,
            "fraction",
            format!(
                "readers on CPU or queued for one (other load) {} {basis}",
                pct(demand)
            ),
        ),
        ev(
            "reader_user_share",
            user,
            "fraction",
            format!("{} of reader CPU samples in user space", pct(user)),
        ),
        ev(
            "reader_own_work_share",
            own,
            "fraction",
            format!(
                "{} of reader CPU is the reader's own work (not copies out of the page cache{})",
                pct(own),
                match f.bench.as_ref().and_then(|b| b.read_amplification) {
                    Some(a) if a > 1.0 => format!(
                        ", of which it caused {:.0}% itself by reading {a:.1}× the bytes it returned",
                        (1.0 - 1.0 / a) * 100.0
                    ),
                    _ => String::new(),
                }
            ),
        ),
    ];
    for c in hot.categories.iter().take(3) {
        evidence.push(ev(
            &format!("hot:{}", c.name),
            c.share,
            "fraction",
            format!("{} of reader CPU samples in {}", pct(c.share), c.name),
        ));
    }
    evidence.extend(device_evidence(f));
    Finding {
        verdict: VerdictId::CpuBoundReader,
        fired,
        score: demand * own,
        summary: format!("CPU-bound in the reader{headline_hot}; {storage}"),
        evidence,
    }
}

fn rule_storage_bound(f: &Features, t: &Thresholds) -> Finding {
    let basis = f.basis();
    let util = top_util(f);
    let fired = f.reader_blocked_io_share >= t.storage_bound_blocked_share;
    let limit = if !fired {
        storage_phrase(f)
    } else if util >= t.storage_busy_utilization {
        format!("the device is the limit: {}", storage_phrase(f))
    } else {
        format!(
            "the device is not saturated ({}), so a throttle or queue limit in front of it is (cgroup io.max / blkio, network storage)",
            storage_phrase(f)
        )
    };
    let mut evidence = vec![ev(
        "reader_blocked_io_share",
        f.reader_blocked_io_share,
        "fraction",
        format!(
            "readers in uninterruptible (D) sleep {} {basis}",
            pct(f.reader_blocked_io_share)
        ),
    )];
    evidence.push(read_syscall_evidence(f));
    evidence.extend(device_evidence(f));
    Finding {
        verdict: VerdictId::StorageBound,
        fired,
        score: f.reader_blocked_io_share,
        summary: format!(
            "Storage-bound: readers wait on block I/O {} {basis}; {limit}",
            pct(f.reader_blocked_io_share)
        ),
        evidence,
    }
}

fn rule_page_cache_served(f: &Features, t: &Thresholds) -> Finding {
    let basis = f.basis();
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
    let evidence = [
        ev(
            "page_cache_hit_ratio",
            hit,
            "fraction",
            format!(
                "{} of {:.1} MiB read came from memory ({:.1} MiB from storage)",
                pct(hit),
                read_mib,
                f.device_read_bytes.max(f.page_cache_miss_bytes) as f64 / (1 << 20) as f64
            ),
        ),
        read_syscall_evidence(f),
        ev(
            "reader_cache_copy_cpu_share",
            copy_cpu,
            "fraction",
            format!(
                "readers on CPU copying out of the page cache {} {basis}",
                pct(copy_cpu)
            ),
        ),
    ]
    .into_iter()
    .chain(device_evidence(f))
    .collect();
    Finding {
        verdict: VerdictId::PageCacheServed,
        fired,
        score,
        summary: format!(
            "Served from the page cache: {} of {:.1} MiB read came from memory, {}; storage idle: {}",
            pct(hit),
            read_mib,
            if f.mapped_read_bytes > f.read_syscall_bytes {
                "most through file mappings".to_string()
            } else {
                format!(
                    "{:.1} MiB/s through read syscalls",
                    f.read_syscall_mib_per_s
                )
            },
            storage_phrase(f)
        ),
        evidence,
    }
}

fn rule_compute_bound(f: &Features, t: &Thresholds) -> Finding {
    let basis = f.basis();
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
    let mut evidence = Vec::new();
    if let Some(a) = au_bench {
        evidence.push(ev(
            "bench_au_percentage",
            a,
            "%",
            format!("bench AU {a:.2}% (expected ≥ {threshold:.0}%)"),
        ));
    }
    if let Some(c) = &f.consumer {
        evidence.push(ev(
            "consumer_sleep_share",
            c.sleep_share,
            "fraction",
            format!(
                "consumer thread {} asleep in simulated computation {} of its time",
                c.comm,
                pct(c.sleep_share)
            ),
        ));
    }
    evidence.push(ev(
        "reader_sleeping_share",
        f.reader_sleeping_share,
        "fraction",
        format!(
            "readers sleeping (waiting for work or queue space) {} {basis}",
            pct(f.reader_sleeping_share)
        ),
    ));
    let au_text = match au_bench {
        Some(a) => format!("AU {a:.1}%"),
        None => match consumer_share {
            Some(s) if f.consumer.as_ref().is_some_and(|c| c.from_wait_graph) => {
                format!("AU seen by the kernel {}", pct(s))
            }
            Some(s) => format!("consumer asleep {}", pct(s)),
            None => "no consumer thread found".to_string(),
        },
    };
    Finding {
        verdict: VerdictId::ComputeBound,
        fired,
        score: au.map_or(0.0, |a| (a / 100.0).clamp(0.0, 1.0)),
        summary: format!(
            "Compute-bound: the consumer (simulated accelerator) is the limit ({au_text}); loaders wait for it; nothing to fix in storage"
        ),
        evidence,
    }
}

/// The traced command wants more CPUs at once than there are: on average
/// more of its threads on CPU or runnable than CPUs online.
fn oversubscribed(f: &Features) -> bool {
    f.num_cpus > 0 && f.cpu_demand_threads > f64::from(f.num_cpus)
}

fn rule_cpu_starved(f: &Features, t: &Thresholds) -> Finding {
    let basis = f.basis();
    // Issue 4: runnable but waiting for a CPU *because* there are more busy
    // threads than cores. Waits caused by load outside the command count as
    // reader CPU demand (cpu-bound-reader) instead.
    let fired = f.reader_runnable_share >= t.cpu_starved_runnable_share && oversubscribed(f);
    Finding {
        verdict: VerdictId::CpuStarved,
        fired,
        score: f.reader_runnable_share,
        summary: format!(
            "CPU-starved: threads runnable but waiting for a CPU {} {basis}; {} busy thread(s) on {} CPU(s)",
            pct(f.reader_runnable_share),
            f.busy_threads,
            f.num_cpus
        ),
        evidence: vec![
            ev(
                "reader_runnable_share",
                f.reader_runnable_share,
                "fraction",
                format!(
                    "runnable, waiting for a CPU {} {basis}",
                    pct(f.reader_runnable_share)
                ),
            ),
            ev(
                "busy_threads",
                f64::from(f.busy_threads),
                "threads",
                format!("{} busy thread(s)", f.busy_threads),
            ),
            ev(
                "num_cpus",
                f64::from(f.num_cpus),
                "cpus",
                format!("{} CPU(s) online", f.num_cpus),
            ),
            ev(
                "cpu_demand_threads",
                f.cpu_demand_threads,
                "threads",
                format!(
                    "{:.2} thread(s) on CPU or runnable at once on average",
                    f.cpu_demand_threads
                ),
            ),
            ev(
                "cpus_used",
                f.cpus_used,
                "cpus",
                format!("traced threads kept {:.2} CPU(s) busy", f.cpus_used),
            ),
        ],
    }
}

fn rule_lock_contention(f: &Features, t: &Thresholds) -> Finding {
    let basis = f.basis();
    Finding {
        verdict: VerdictId::LockContention,
        fired: f.reader_futex_share >= t.lock_futex_share,
        score: f.reader_futex_share,
        summary: if f.reader_selection == Some(super::features::ReaderSelection::CriticalPath) {
            format!(
                "Lock contention: {} of the consumer's data wait went to loaders blocked on a \
                 lock that another loader held",
                pct(f.reader_futex_share)
            )
        } else {
            format!(
                "Lock contention: workers sleep on futexes {} {basis} rather than doing I/O",
                pct(f.reader_futex_share)
            )
        },
        evidence: vec![ev(
            "reader_futex_share",
            f.reader_futex_share,
            "fraction",
            format!(
                "workers in futex waits {} {basis}",
                pct(f.reader_futex_share)
            ),
        )],
    }
}

fn rule_memory_pressure(f: &Features, t: &Thresholds) -> Finding {
    let fired = f.oom_killed || f.reader_reclaim_share >= t.memory_reclaim_share;
    let mut evidence = vec![ev(
        "reader_reclaim_share",
        f.reader_reclaim_share,
        "fraction",
        format!(
            "reclaim, swap-in or OOM handling {} of reader time",
            pct(f.reader_reclaim_share)
        ),
    )];
    if f.oom_killed {
        evidence.push(ev(
            "oom_killed",
            1.0,
            "bool",
            "the OOM killer ended a traced process".to_string(),
        ));
    }
    Finding {
        verdict: VerdictId::MemoryPressure,
        fired,
        score: if f.oom_killed {
            1.0
        } else {
            f.reader_reclaim_share
        },
        summary: if f.oom_killed {
            "Memory pressure: the OOM killer ended a traced process".to_string()
        } else {
            format!(
                "Memory pressure: reclaim and major faults take {} of reader time",
                pct(f.reader_reclaim_share)
            )
        },
        evidence,
    }
}

fn rule_network_bound(f: &Features, t: &Thresholds) -> Finding {
    let basis = f.basis();
    Finding {
        verdict: VerdictId::NetworkBound,
        fired: f.reader_socket_recv_share >= t.network_socket_share,
        score: f.reader_socket_recv_share,
        summary: format!(
            "Network-bound: workers wait on socket receives {} {basis} (object storage)",
            pct(f.reader_socket_recv_share)
        ),
        evidence: vec![ev(
            "reader_socket_recv_share",
            f.reader_socket_recv_share,
            "fraction",
            format!(
                "workers in socket receives {} {basis}",
                pct(f.reader_socket_recv_share)
            ),
        )],
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
    if f.reader_thread_s < t.min_reader_thread_s {
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

fn bench_notes(f: &Features, t: &Thresholds) -> Vec<String> {
    let mut notes = Vec::new();
    let Some(b) = &f.bench else { return notes };
    if let (Some(derived), Some(measured), Some(r)) = (
        b.derived_io_mib_per_s,
        b.measured_read_mib_per_s,
        b.measured_over_derived,
    ) && (r > t.io_mismatch_factor || r < 1.0 / t.io_mismatch_factor)
    {
        notes.push(format!(
            "DLIO's I/O throughput is derived (samples/s × record size): {derived:.2} MiB/s, while the reader really read {measured:.2} MiB/s ({r:.1}× the derived figure): the storage #330 mismatch. Compare storage with the measured figure."
        ));
    }
    if let Some(a) = b.read_amplification
        && a > t.io_mismatch_factor
    {
        notes.push(format!(
            "The reader read {a:.1}× the bytes of the samples it returned (read amplification)."
        ));
    }
    notes
}

/// Decides the verdict from the features and the readers' hottest on-CPU frames.
pub fn decide(f: &Features, hot_oncpu: &HotFrames, t: &Thresholds) -> Verdict {
    let mut all = findings(f, hot_oncpu, t);
    // Fired first, then by score; ties by id order so output is deterministic.
    all.sort_by(|a, b| {
        b.fired
            .cmp(&a.fired)
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| a.verdict.cmp(&b.verdict))
    });
    // Compute-bound wins whenever it fires: the pipeline keeps the consumer
    // busy, so whatever else is slow does not limit it.
    if let Some(i) = all
        .iter()
        .position(|x| x.verdict == VerdictId::ComputeBound && x.fired)
    {
        let cb = all.remove(i);
        all.insert(0, cb);
    }
    let primary = all.remove(0);
    let runner_score = all.first().map_or(0.0, |r| r.score);
    let confidence = confidence(&primary, runner_score, f, t);
    let inconclusive = !primary.fired;

    let mut notes = Vec::new();
    for r in all.iter().filter(|r| r.fired) {
        notes.push(format!("Also: {}", r.summary));
    }
    notes.extend(bench_notes(f, t));
    if !f.missing_files.is_empty() {
        notes.push(format!(
            "Partial session (recording stopped early?): missing {}; figures from those files are absent.",
            f.missing_files.join(", ")
        ));
    }
    if f.lost_events > 0 {
        notes.push(format!(
            "{} events or samples were lost while recording; figures are lower bounds.",
            f.lost_events
        ));
    }

    let headline = if inconclusive {
        format!("No rule fired; closest match: {}", primary.summary)
    } else {
        primary.summary.clone()
    };
    Verdict {
        format_version: VERDICT_FORMAT_VERSION,
        verdict: primary.verdict,
        headline,
        confidence,
        confidence_label: label(confidence, t).to_string(),
        inconclusive,
        evidence: primary.evidence,
        runners_up: all
            .into_iter()
            .map(|r| RunnerUp {
                verdict: r.verdict,
                fired: r.fired,
                score: round4(r.score),
                summary: r.summary,
            })
            .collect(),
        notes,
        rules: String::new(),
        kernel_au_percentage: None,
        data_wait_share: None,
        window: None,
        phases: Vec::new(),
        consumers: Vec::new(),
        roles: Vec::new(),
        critical_path: Vec::new(),
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
            | VerdictId::NetworkBound => id,
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
}
