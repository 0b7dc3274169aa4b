//! Who waits for whom: roles, the training window, the consumer's data
//! wait and the critical path, from the wake-up graph (`waits.json`) and
//! what each thread waited in (its off-CPU stacks).
//!
//! ```text
//! Session (threads, waits, stacks, process tree, per-bucket states)
//!   ──► sites: each thread's off-CPU time by what it waited in (a batch,
//!       the GIL, a pool's loop, a sleep, a join)      [sites]
//!   ──► each wake-up edge by what ended it (a hand-off, a lock, a block or
//!       network completion, a timer)                  [classify]
//!   ──► readers (bytes in, I/O completions), the data side (their worker
//!       processes and stage threads), the consumer(s) (by their stacks,
//!       else by deliveries and back-pressure); loaders: who feeds them;
//!       helpers: who loaders wait on; idle: the rest  [roles]
//!   ──► window: first data delivery → last exchange of the consumer,
//!       across epochs                                 [window]
//!   ──► the consumer's time: data wait (deliveries, and waits for data
//!       that timed out), compute, the GIL, locks, a CPU queue; kernel AU
//!                                                     [consumer]
//!   ──► critical path: each data wait split over the state of the thread
//!       that ended it, followed recursively (wPerf's cascaded
//!       redistribution); without a consumer, the readers' own time split
//!       the same way                                  [path]
//! ```
//!
//! Pure: no I/O. Figures are over the training window when the time series
//! has per-bucket states (format 2), else over the whole recording.
mod classify;
mod consumer;
pub use consumer::ConsumerTime;
mod graph;
mod own_time;
mod path;
mod roles;
mod search;
mod sites;
#[cfg(test)]
mod tests;
mod window;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::Thresholds;
use storprof_session::load::Session;

pub use classify::{EdgeKind, classify, is_fuse_reply};
pub use sites::{WaitSite, per_thread as wait_sites};

/// A thread, by (pid, tid).
pub type ThreadId = (u32, u32);

/// A consumer found, and why it is one.
type Found = (ThreadId, String);

/// What a thread does in the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Takes the data; the job's progress depends on it.
    Consumer,
    /// Reads the data and wakes the consumer (directly or through relays).
    Loader,
    /// Loaders wait on it for part of their work (decode and I/O pools).
    Helper,
    /// Neither blocks anyone on the data path nor is waited on.
    Idle,
}

/// One thread's role and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoleRow {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub role: Role,
    pub reason: String,
    /// Share of its window time on a CPU.
    pub on_cpu_share: f64,
}

fn is_zero_u32(x: &u32) -> bool {
    *x == 0
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

/// One phase of the recording.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// "start-up", "training" or "tear-down".
    pub name: String,
    pub start_s: f64,
    pub end_s: f64,
    /// What the busiest threads did, in words.
    pub activity: String,
}

/// The steady-state training window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub start_s: f64,
    pub end_s: f64,
    /// How it was found.
    pub source: String,
    /// Whole time-series buckets inside it (first, end exclusive); None
    /// when the figures are over the whole recording.
    pub buckets: Option<(usize, usize)>,
}

/// Where the critical path's time went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathKind {
    /// On a CPU in user space (decode, formatting).
    CpuUser,
    /// On a CPU in the kernel (copies, faults, allocation).
    CpuKernel,
    /// Runnable, waiting for a CPU.
    Runnable,
    /// Uninterruptible sleep: block I/O, page-cache misses.
    BlockIo,
    /// Waiting for the network (socket receive, softirq wake-ups).
    Network,
    /// Blocked on a lock that a sibling on the path held.
    Lock,
    /// Waiting for CPython's GIL (runnable in all but name: another
    /// thread ran Python meanwhile).
    Gil,
    /// A timed sleep of a thread on the path.
    Timer,
    /// Woken by an untraced process (a server, a daemon).
    OtherProcess,
    /// Woken by an interrupt that is neither block nor network.
    Interrupt,
    /// Waiting for the consumer itself (the pipeline was not kept full).
    WaitsForConsumer,
    /// Blocked time no wake-up ended in the window.
    Unattributed,
}

impl PathKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CpuUser => "cpu-user",
            Self::CpuKernel => "cpu-kernel",
            Self::Runnable => "runnable",
            Self::BlockIo => "block-io",
            Self::Network => "network",
            Self::Lock => "lock",
            Self::Gil => "gil",
            Self::Timer => "timer",
            Self::OtherProcess => "other-process",
            Self::Interrupt => "interrupt",
            Self::WaitsForConsumer => "waits-for-consumer",
            Self::Unattributed => "unattributed",
        }
    }
}

/// A share of the consumer's data wait that ended in one kind of state,
/// with the threads it was spent in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathShare {
    pub kind: PathKind,
    /// Share of the data wait (0..1).
    pub share: f64,
    pub ns: u64,
    /// Threads, heaviest first: (pid, tid, comm, share of the data wait).
    pub threads: Vec<(u32, u32, String, f64)>,
}

/// The wait-for-graph analysis of a session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WaitAnalysis {
    pub consumers: Vec<ConsumerTime>,
    pub roles: Vec<RoleRow>,
    pub window: Option<Window>,
    pub phases: Vec<Phase>,
    /// Mean over consumers of the kernel-measured AU (%).
    pub kernel_au_percentage: Option<f64>,
    /// 1 − kernel AU.
    pub data_wait_share: Option<f64>,
    /// The data wait's split, heaviest first.
    pub critical_path: Vec<PathShare>,
    /// Threads on the critical path with their share of the data wait
    /// (on CPU), for naming their hottest frames.
    pub path_cpu_threads: Vec<(u32, u32, f64)>,
    /// What `critical_path` splits: the consumer's data wait, or without a
    /// consumer the readers' own time.
    #[serde(default, skip_serializing_if = "PathBasis::is_data_wait")]
    pub basis: PathBasis,
    pub notes: Vec<String>,
}

/// What a [`WaitAnalysis`]'s critical path splits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathBasis {
    /// The time the consumer waited for data.
    #[default]
    DataWait,
    /// No consumer: the readers' own time (what they did and waited on,
    /// less waiting on each other and for work).
    ReaderTime,
}

impl PathBasis {
    fn is_data_wait(&self) -> bool {
        *self == Self::DataWait
    }
}

impl WaitAnalysis {
    /// Share of the data wait that went to `kinds`.
    pub fn share(&self, kinds: &[PathKind]) -> f64 {
        // + 0.0: an empty float sum is -0.0, which prints as "-0.0%".
        self.critical_path
            .iter()
            .filter(|p| kinds.contains(&p.kind))
            .map(|p| p.share)
            .sum::<f64>()
            + 0.0
    }

    pub fn role_of(&self, pid: u32, tid: u32) -> Option<Role> {
        self.roles
            .iter()
            .find(|r| r.pid == pid && r.tid == tid)
            .map(|r| r.role)
    }
}

/// The wait-for-graph analysis; None when the session has no wake-up graph
/// (format 1, or the probe did not run).
pub fn analyze(session: &Session, t: &Thresholds) -> Option<WaitAnalysis> {
    session.waits.as_ref()?;
    let sites = sites::per_thread(&session.offcpu_threads);
    let whole = graph::Graph::new(session, &sites, None);
    let (readers, how) = roles::readers(session, &whole, t);
    // Consumers by what they waited in: a framework's batch API decides
    // even for a thread that read (its imports, its own files); a generic
    // receive only outside the readers.
    let by_stacks: Vec<Found> = search::consumers_by_stacks(&whole, t)
        .into_iter()
        .filter(|(id, _, site)| {
            *site == WaitSite::Fetch
                || !readers.contains(id)
                || search::fed_by_others(&whole, *id, &readers) >= t.consumer_min_wakes
        })
        .map(|(id, why, _)| (id, why))
        .collect();
    let stack_ids: BTreeSet<ThreadId> = by_stacks.iter().map(|(id, _)| *id).collect();
    let readers: BTreeSet<ThreadId> = readers
        .into_iter()
        .filter(|id| !stack_ids.contains(id))
        .collect();
    let roles::DataSide {
        mut side,
        readers,
        trainers,
        spawners,
        how,
    } = roles::data_side(session, &whole, readers, how);
    let mut consumers: Vec<Found> = by_stacks
        .into_iter()
        .filter(|(id, _)| !side.contains(id))
        .collect();
    let own_time = own_time::own_time(&session.oncpu_threads, &session.offcpu_threads);
    if consumers.is_empty() {
        // A consumer that loads for itself is its own reader: the data
        // side is what is left (other readers, if any).
        consumers = search::consumers_by_own_fetch(&own_time, session.info.freq_hz, t);
        for (id, _) in &consumers {
            side.remove(id);
        }
    }
    if consumers.is_empty() {
        consumers = search::consumers_by_graph(&whole, &side, &trainers, t);
    }
    if consumers.is_empty() && !trainers.is_empty() {
        // The readers' parents feed on nothing: launchers (mpirun's orted, a
        // shell, a parent that only collects results at the end); the
        // consumer is then in the readers' own processes, as in an MPI rank
        // whose read threads feed its main thread.
        consumers = search::consumers_by_graph(&whole, &readers, &BTreeSet::new(), t);
        if !consumers.is_empty() {
            side = readers.clone();
        }
    }
    if consumers.is_empty()
        && let Some((sleepers, rest)) = search::sleeping_consumers(&whole, &side, t)
    {
        consumers = sleepers;
        side = rest;
    }
    if consumers.is_empty() {
        return Some(without_consumer(session, &whole, &side, &readers, &how, t));
    }
    Some(with_consumers(
        session,
        &whole,
        &consumers,
        Sides {
            side: &side,
            readers: &readers,
            spawners: &spawners,
        },
        &own_time,
        t,
    ))
}

/// The threads around the consumers: the data side, the readers among
/// it, and the processes that only start workers.
struct Sides<'a> {
    side: &'a BTreeSet<ThreadId>,
    readers: &'a BTreeSet<ThreadId>,
    spawners: &'a BTreeSet<u32>,
}

/// The analysis around the consumers found.
fn with_consumers(
    session: &Session,
    whole: &graph::Graph,
    consumers: &[Found],
    sides: Sides,
    own_time: &BTreeMap<ThreadId, own_time::OwnTime>,
    t: &Thresholds,
) -> WaitAnalysis {
    let Sides {
        side,
        readers,
        spawners,
    } = sides;
    let mut out = WaitAnalysis::default();
    let consumer_ids: BTreeSet<ThreadId> = consumers.iter().map(|(id, _)| *id).collect();
    // Relays: non-side threads that feed a consumer and are fed by the side
    // (a spawner answers with pids and exit codes, not data).
    let relays: BTreeSet<ThreadId> = whole
        .states
        .keys()
        .filter(|id| !side.contains(id) && !consumer_ids.contains(id))
        .filter(|id| !spawners.contains(&id.0))
        .filter(|&&id| consumer_ids.iter().any(|&c| whole.wakes(id, c).1 > 0))
        .filter(|&&id| whole.feeders(id).keys().any(|w| side.contains(w)))
        .copied()
        .collect();
    let (start_s, end_s, source) = window::window(
        session,
        whole,
        &consumer_ids,
        side,
        &relays,
        t.consumer_min_wakes,
    );
    let buckets = window::buckets_of(session, start_s, end_s);
    if buckets.is_none() {
        out.notes.push(
            "the training window is shorter than two whole time-series buckets: thread states \
             are over the whole recording"
                .to_string(),
        );
    }
    out.window = Some(Window {
        start_s,
        end_s,
        source,
        buckets,
    });
    out.phases = window::phases(session, start_s, end_s, session.duration_s());
    let g = graph::Graph::new(session, whole.sites, buckets);
    let (rows, loaders) = roles::assign(whole, &g, consumers, side, &relays, readers, t);
    out.roles = rows;

    // Data wait and the critical path.
    let one_reader_groups = path::one_reader_lock_groups(&g, &loaders, readers, t);
    let walk = path::Walk {
        g: &g,
        whole,
        consumers: &consumer_ids,
        loaders: &loaders,
        one_reader_groups: &one_reader_groups,
        max_depth: t.critical_path_max_depth,
    };
    let ctx = consumer::ConsumerCtx {
        session,
        own_time,
        side,
        relays: &relays,
        span_s: (start_s, end_s),
        buckets,
    };
    let mut acc = path::PathAcc::default();
    for &c in &consumer_ids {
        out.consumers
            .push(consumer::consumer_time(&ctx, &walk, c, t, &mut acc));
    }
    if !out.consumers.is_empty() {
        let au =
            out.consumers.iter().map(|c| c.au_percentage).sum::<f64>() / out.consumers.len() as f64;
        out.kernel_au_percentage = Some(au);
        out.data_wait_share = Some(1.0 - au / 100.0);
    }
    let total_wait: f64 = out
        .consumers
        .iter()
        .map(|c| (c.data_wait_ns + c.gil_ns) as f64)
        .sum();
    if total_wait > 0.0 {
        (out.critical_path, out.path_cpu_threads) = shares(acc, total_wait, &g);
    }
    out
}

/// No consumer: the verdict is about the readers, over the span they were
/// busy, from their own time ([`path::reader_time`]).
fn without_consumer(
    session: &Session,
    whole: &graph::Graph,
    side: &BTreeSet<ThreadId>,
    readers: &BTreeSet<ThreadId>,
    how: &str,
    t: &Thresholds,
) -> WaitAnalysis {
    let mut out = WaitAnalysis {
        basis: PathBasis::ReaderTime,
        ..WaitAnalysis::default()
    };
    out.notes.push(
        "no consumer found: no thread outside the readers takes their data or holds them back \
         (a plain reader such as cat, dd or fio, or a loader whose results are collected only \
         at the end); the verdict is about the readers"
            .to_string(),
    );
    let window = window::reader_window(session, readers);
    out.phases = window::phases(session, window.start_s, window.end_s, session.duration_s());
    let g = graph::Graph::new(session, whole.sites, window.buckets);
    out.window = Some(window);
    let side: BTreeSet<ThreadId> = if side.is_empty() {
        readers.clone()
    } else {
        side.clone()
    };
    out.roles = side
        .iter()
        .map(|&id| RoleRow {
            pid: id.0,
            tid: id.1,
            comm: g.comm(id),
            role: Role::Loader,
            reason: if readers.contains(&id) {
                format!("reader: {how}")
            } else {
                "a thread of a reader's worker process".to_string()
            },
            on_cpu_share: roles::share_of(g.states.get(&id), |s| s.on_cpu),
        })
        .collect();
    let none = BTreeSet::new();
    let walk = path::Walk {
        g: &g,
        whole,
        consumers: &none,
        loaders: &side,
        one_reader_groups: &none,
        max_depth: t.critical_path_max_depth,
    };
    let acc = path::reader_time(&walk, &side);
    let total = acc.total();
    if total > 0.0 {
        (out.critical_path, out.path_cpu_threads) = shares(acc, total, &g);
    }
    out
}

/// The accumulated path as shares of `total`, heaviest first, and the
/// threads on a CPU on it.
fn shares(
    acc: path::PathAcc,
    total: f64,
    g: &graph::Graph,
) -> (Vec<PathShare>, Vec<(u32, u32, f64)>) {
    let mut shares: Vec<PathShare> = acc
        .by_kind
        .into_iter()
        .map(|(kind, (ns, threads))| {
            let mut threads: Vec<(u32, u32, String, f64)> = threads
                .into_iter()
                .map(|(id, t_ns)| (id.0, id.1, g.comm(id), t_ns / total))
                .collect();
            threads.sort_by(|a, b| b.3.total_cmp(&a.3));
            threads.truncate(8);
            PathShare {
                kind,
                share: ns / total,
                ns: ns as u64,
                threads,
            }
        })
        .collect();
    shares.sort_by(|a, b| b.share.total_cmp(&a.share));
    let mut cpu: Vec<(u32, u32, f64)> = acc
        .cpu_threads
        .into_iter()
        .map(|(id, ns)| (id.0, id.1, ns / total))
        .collect();
    cpu.sort_by(|a, b| b.2.total_cmp(&a.2));
    (shares, cpu)
}
