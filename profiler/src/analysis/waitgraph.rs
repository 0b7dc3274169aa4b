//! Who waits for whom: roles, the training window, the consumer's data
//! wait and the critical path, from the wake-up graph (`waits.json`).
//!
//! ```text
//! Session (threads, waits, process tree, per-bucket states)
//!   ──► data side: reader threads (read bytes) and the threads of the
//!       worker processes they live in
//!   ──► consumer(s): threads fed by the data side (wake-ups), relays
//!       (pin-memory threads) passed through; loaders: who feeds them;
//!       helpers: who loaders wait on; idle: the rest
//!   ──► window: first → last data wake-up of the consumer (training)
//!   ──► data wait = consumer blocked time ended by the data side;
//!       kernel AU = 1 − data wait / window
//!   ──► critical path: each data wait is split over the state of the
//!       thread that ended it (on CPU, runnable, D, and its own waits,
//!       followed recursively, wPerf's cascaded redistribution), never
//!       back into a thread already on the path, so fork-join waits reach
//!       the helper doing the work and idle pool threads weigh nothing
//! ```
//!
//! Pure: no I/O. Figures are over the training window when the time series
//! has per-bucket states (format 2), else over the whole recording.
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::Thresholds;
use crate::session::{
    load::Session,
    model::{Buckets, ThreadStats, WakeEdge},
};

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

/// The consumer's time over the training window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConsumerTime {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// Blocked time ended by the data side (loaders, relays), ns.
    pub data_wait_ns: u64,
    /// Timed sleeps (nanosleep ended by a timer): emulated compute, ns.
    pub compute_ns: u64,
    /// The consumer emulates compute with timed sleeps (DLIO, the bench):
    /// AU = 1 − (data wait + its own CPU) / its time; else AU = 1 − data
    /// wait / its time.
    pub emulated_compute: bool,
    /// The consumer's own accounted time in the window (on CPU, runnable,
    /// blocked), ns: the AU's denominator.
    pub window_ns: u64,
    /// 1 − data_wait / window, in percent.
    pub au_percentage: f64,
    /// Bytes the consumer thread wrote with write-family syscalls over the
    /// recording (checkpoints, logs); 0 for a consumer that wrote nothing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub write_bytes: u64,
    /// The consumer's own time in the window, neither computing nor waiting
    /// for data, ns: what is left of the window after both for a consumer
    /// that emulates compute; only its uninterruptible (D) waits for one
    /// that computes on a CPU (its CPU time is its compute). A trainer that
    /// saves checkpoints in its own thread spends them here.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub own_ns: u64,
    /// Of `own_ns`, the time in uninterruptible (D) waits: I/O such as
    /// fsync or writeback throttling.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub own_io_ns: u64,
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
    pub notes: Vec<String>,
}

impl WaitAnalysis {
    /// Share of the data wait that went to `kinds`.
    pub fn share(&self, kinds: &[PathKind]) -> f64 {
        self.critical_path
            .iter()
            .filter(|p| kinds.contains(&p.kind))
            .map(|p| p.share)
            .sum()
    }

    pub fn role_of(&self, pid: u32, tid: u32) -> Option<Role> {
        self.roles
            .iter()
            .find(|r| r.pid == pid && r.tid == tid)
            .map(|r| r.role)
    }
}

/// A thread's time over the window, by state (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct StateTime {
    on_cpu: u64,
    runnable: u64,
    sleeping: u64,
    io: u64,
    other: u64,
    /// Share of CPU samples in user space (None: no samples).
    user_share: Option<f64>,
}

impl StateTime {
    fn total(&self) -> u64 {
        self.on_cpu + self.runnable + self.sleeping + self.io + self.other
    }
}

fn whole_run_state(t: &ThreadStats) -> StateTime {
    let samples = t.samples_user + t.samples_kernel;
    StateTime {
        on_cpu: t.on_cpu_ns,
        runnable: t.off_cpu_ns.runnable,
        sleeping: t.off_cpu_ns.sleeping,
        io: t.off_cpu_ns.uninterruptible,
        other: t.off_cpu_ns.other,
        user_share: (samples > 0).then(|| t.samples_user as f64 / samples as f64),
    }
}

/// Syscalls whose wait means "the network" when an interrupt ends it.
const SOCKET_SYSCALLS: &[&str] = &[
    "recvfrom",
    "recvmsg",
    "recvmmsg",
    "poll",
    "ppoll",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "select",
    "pselect6",
    "read",
    "readv",
];
/// Kernel frames of a waker stack that mean a network receive.
const NET_FRAMES: &[&str] = &[
    "net_rx_action",
    "tcp_",
    "napi_",
    "ip_rcv",
    "sock_def_readable",
];
/// Kernel frames of a waker stack that mean a block completion.
const BLOCK_FRAMES: &[&str] = &["blk_", "bio_endio", "virtblk", "nvme_", "scsi_"];

fn stack_has(edge: &WakeEdge, frames: &[&str]) -> bool {
    edge.waker_stack
        .iter()
        .any(|f| frames.iter().any(|p| f.contains(p)))
}

fn is_main_thread(id: ThreadId) -> bool {
    id.0 == id.1
}

/// The sleeping time of nanosleep-family waits that a timer ended: a
/// thread's emulated compute, or a poll interval.
fn is_timer_sleep(edge: &WakeEdge) -> bool {
    edge.waker_kind == "timer"
        && matches!(
            edge.syscall.as_deref(),
            Some("nanosleep" | "clock_nanosleep") | None
        )
}

/// The graph restricted to a window.
struct Graph<'a> {
    states: BTreeMap<ThreadId, StateTime>,
    comms: BTreeMap<ThreadId, String>,
    /// Edges into each wakee, with their blocked ns in the window.
    into: BTreeMap<ThreadId, Vec<(&'a WakeEdge, u64, u64)>>,
}

fn waker_id(e: &WakeEdge) -> Option<ThreadId> {
    (e.waker_kind == "task" && e.waker_traced).then_some((e.waker_pid, e.waker_tid))
}

impl<'a> Graph<'a> {
    fn new(session: &'a Session, buckets: Option<(usize, usize)>) -> Self {
        let mut states: BTreeMap<ThreadId, StateTime> = session
            .threads
            .iter()
            .map(|t| ((t.pid, t.tid), whole_run_state(t)))
            .collect();
        let comms = session
            .threads
            .iter()
            .map(|t| ((t.pid, t.tid), t.comm.clone()))
            .collect();
        if let (Some((b0, b1)), Some(ts)) = (buckets, &session.timeseries) {
            for series in &ts.threads {
                let sum = |b: Buckets<'_>| b.sum(b0, b1);
                let Some(st) = states.get_mut(&(series.pid, series.tid)) else {
                    continue;
                };
                let user_share = st.user_share;
                *st = StateTime {
                    on_cpu: sum(series.on_cpu()),
                    runnable: sum(series.runnable()),
                    sleeping: sum(series.sleeping()),
                    io: sum(series.blocked_io()),
                    other: 0,
                    user_share,
                };
            }
        }
        let mut into: BTreeMap<ThreadId, Vec<(&WakeEdge, u64, u64)>> = BTreeMap::new();
        for e in session.waits.iter().flat_map(|w| &w.edges) {
            let (ns, n) = match buckets {
                Some((b0, b1)) => e
                    .series
                    .iter()
                    .filter(|(b, _, _)| (b0..b1).contains(&(*b as usize)))
                    .fold((0, 0), |(ns, n), (_, bns, bn)| (ns + bns, n + bn)),
                None => (e.blocked_ns, e.count),
            };
            if n == 0 {
                continue;
            }
            into.entry((e.wakee_pid, e.wakee_tid))
                .or_default()
                .push((e, ns, n));
        }
        Graph {
            states,
            comms,
            into,
        }
    }

    fn comm(&self, id: ThreadId) -> String {
        self.comms.get(&id).cloned().unwrap_or_default()
    }

    /// Time `id` spent in timed sleeps a timer ended (emulated compute), ns.
    fn timer_sleep_ns(&self, id: ThreadId) -> u64 {
        self.into
            .get(&id)
            .into_iter()
            .flatten()
            .filter(|(e, _, _)| is_timer_sleep(e))
            .map(|(_, ns, _)| ns)
            .sum()
    }

    /// Wake-ups of `to` by `from` in the window.
    fn wakes(&self, from: ThreadId, to: ThreadId) -> (u64, u64) {
        self.into.get(&to).map_or((0, 0), |v| {
            v.iter()
                .filter(|(e, _, _)| waker_id(e) == Some(from))
                .fold((0, 0), |(ns, n), (_, ens, en)| (ns + ens, n + en))
        })
    }
}

/// A thread's accounted time in a bucket window: its time on a CPU and
/// runnable from the time series, and its blocked time from its wake-up
/// edges when those cover its blocked time over the whole run. The time
/// series and the edges are read from the kernel one after the other at
/// each tick, so a wake-up between the two reads lands in one bucket in
/// one and in the next in the other; the waits that the AU's numerator
/// counts (data waits, timed sleeps) come from the edges, and so must the
/// blocked time of its denominator, or a single 0.25-s sleep on the wrong
/// side of the window's edge moves a 5-s window's AU by 5 points.
fn window_accounted_ns(whole: &Graph<'_>, g: &Graph<'_>, id: ThreadId, own: StateTime) -> u64 {
    let edge_ns = |graph: &Graph<'_>| -> u64 {
        graph
            .into
            .get(&id)
            .into_iter()
            .flatten()
            .map(|(_, ns, _)| ns)
            .sum()
    };
    let whole_blocked = whole
        .states
        .get(&id)
        .map_or(0, |st| st.sleeping.saturating_add(st.io));
    // Edges lost to a full map (or a recording without them) leave the time
    // series as the only full account.
    if whole_blocked > 0 && (edge_ns(whole) as f64) < EDGES_COVER_BLOCKED * whole_blocked as f64 {
        return own.total();
    }
    own.on_cpu + own.runnable + own.other + edge_ns(g)
}

/// The share of a thread's blocked time that its wake-up edges must hold
/// for them to stand for it (they held 99.99% on the real DLIO runs).
const EDGES_COVER_BLOCKED: f64 = 0.95;

/// Threads whose wake-ups feed `to`: (waker, wake-ups).
fn feeders(g: &Graph, to: ThreadId) -> BTreeMap<ThreadId, u64> {
    feeders_by(g, to, |_| true)
}

/// Like [`feeders`], without the wake-ups of a lock both threads contend
/// for (`futex_shared`): the hand-offs that can carry data.
fn handoff_feeders(g: &Graph, to: ThreadId) -> BTreeMap<ThreadId, u64> {
    feeders_by(g, to, |e| !e.futex_shared)
}

/// Wakers of `to` over the edges `keep` accepts: (waker, wake-ups).
fn feeders_by(
    g: &Graph,
    to: ThreadId,
    keep: impl Fn(&WakeEdge) -> bool,
) -> BTreeMap<ThreadId, u64> {
    let mut out = BTreeMap::new();
    for (e, _, n) in g.into.get(&to).into_iter().flatten() {
        if let Some(w) = waker_id(e)
            && w != to
            && keep(e)
        {
            *out.entry(w).or_insert(0) += n;
        }
    }
    out
}

/// Processes that descend from another traced process, by pid → parent.
fn parents(session: &Session) -> BTreeMap<u32, u32> {
    let traced: BTreeSet<u32> = session.info.processes.iter().map(|p| p.pid).collect();
    session
        .info
        .processes
        .iter()
        .filter(|p| p.ppid != 0 && traced.contains(&p.ppid))
        .map(|p| (p.pid, p.ppid))
        .collect()
}

/// The data side: reader threads, and every thread of a worker process
/// (a traced process whose parent is traced) that holds a reader; and the
/// trainers, the parents of those processes.
fn data_side(session: &Session, t: &Thresholds) -> DataSide {
    let total_read: u64 = session.threads.iter().map(|t| t.read_bytes).sum();
    let mut readers: BTreeSet<ThreadId> = BTreeSet::new();
    let mut how = String::new();
    if total_read >= t.reader_min_read_bytes {
        let floor = ((total_read as f64 * t.reader_read_fraction) as u64).max(1);
        readers.extend(
            session
                .threads
                .iter()
                .filter(|th| th.read_bytes >= floor)
                .map(|th| (th.pid, th.tid)),
        );
        how = format!(
            "returned at least {:.0}% of the read bytes",
            t.reader_read_fraction * 100.0
        );
    }
    if readers.is_empty() {
        // No significant read syscalls (mapped files, memory): the busy threads.
        readers.extend(
            session
                .threads
                .iter()
                .filter(|th| {
                    let life = whole_run_state(th).total() as f64;
                    life > 0.0
                        && (th.on_cpu_ns + th.off_cpu_ns.uninterruptible) as f64 / life
                            >= t.busy_thread_share
                })
                .map(|th| (th.pid, th.tid)),
        );
        how = format!(
            "on CPU or in D state at least {:.0}% of their life (no significant read syscalls)",
            t.busy_thread_share * 100.0
        );
    }
    // Worker processes: readers' processes with a traced parent; their
    // parents are trainers, whose threads are never data side (a trainer
    // reads its modules and listings at start-up too).
    let workers = parents(session);
    let trainers: BTreeSet<u32> = readers
        .iter()
        .filter_map(|r| workers.get(&r.0))
        .copied()
        .collect();
    let worker_pids: BTreeSet<u32> = readers
        .iter()
        .map(|r| r.0)
        .filter(|p| workers.contains_key(p) && !trainers.contains(p))
        .collect();
    let mut side: BTreeSet<ThreadId> = readers
        .iter()
        .filter(|r| !trainers.contains(&r.0))
        .copied()
        .collect();
    side.extend(
        session
            .threads
            .iter()
            .filter(|th| worker_pids.contains(&th.pid))
            .map(|th| (th.pid, th.tid)),
    );
    DataSide {
        side,
        readers,
        trainers,
        how,
    }
}

/// What [`data_side`] found.
struct DataSide {
    /// Readers and the threads of their worker processes.
    side: BTreeSet<ThreadId>,
    readers: BTreeSet<ThreadId>,
    /// Parents of the readers' processes.
    trainers: BTreeSet<u32>,
    /// How the readers were chosen, in words.
    how: String,
}

/// Finds the consumers. With worker processes (a DataLoader's), the
/// consumer is the thread of their parent process (the trainer) that they
/// feed, directly or through a relay thread of the trainer (pin memory):
/// its main thread when that is fed. Without, threads outside the data
/// side that the data side feeds, scored by how much they exchange with it,
/// main threads and threads that sleep between batches (emulated compute)
/// first: a decode pool's thread is neither.
fn find_consumers(
    g: &Graph,
    side: &BTreeSet<ThreadId>,
    trainers: &BTreeSet<u32>,
    t: &Thresholds,
) -> Vec<Found> {
    let outside: Vec<ThreadId> = g
        .states
        .keys()
        .filter(|id| !side.contains(id))
        .copied()
        .collect();
    // A lock's release wakes its next waiter: no hand-off of data (threads
    // fighting over one mutex would otherwise feed each other).
    let fed_direct = |id: ThreadId| -> u64 {
        handoff_feeders(g, id)
            .iter()
            .filter(|(w, _)| side.contains(w))
            .map(|(_, n)| n)
            .sum()
    };
    // Relays: outside threads fed by the side; what they pass on to another
    // thread of their process counts as fed through them.
    let relays: Vec<ThreadId> = outside
        .iter()
        .copied()
        .filter(|&r| fed_direct(r) > 0)
        .collect();
    // A relay passes on at most what it was fed (a launcher's I/O thread
    // woken twice by its child is no pipeline).
    let through = |id: ThreadId| -> u64 {
        relays
            .iter()
            .filter(|&&r| r != id && r.0 == id.0)
            .map(|&r| g.wakes(r, id).1.min(fed_direct(r)))
            .sum()
    };
    // What a thread sends to the data side: its wake-ups of side threads
    // and of threads of its process that wake the side (queue feeders):
    // a consumer that never waits for data (compute-bound) still sends
    // the next indices.
    let sends = |id: ThreadId| -> u64 {
        outside
            .iter()
            .filter(|&&t| t != id && t.0 == id.0)
            .filter(|&&t| side.iter().any(|&s| g.wakes(t, s).1 > 0))
            .map(|&t| g.wakes(id, t).1)
            .chain(side.iter().map(|&s| g.wakes(id, s).1))
            .sum()
    };
    let min_wakes = t.consumer_min_wakes;
    let describe = |_: ThreadId, direct: u64, via: u64| {
        if via > direct {
            format!("fed {via} times through a relay thread of its process by the data side")
        } else {
            format!("woken {direct} times by the data side (its queue or pipe)")
        }
    };
    if !trainers.is_empty() {
        let mut out = Vec::new();
        for &trainer in trainers {
            let threads: Vec<(ThreadId, u64, u64, u64)> = outside
                .iter()
                .filter(|id| id.0 == trainer)
                .map(|&id| (id, fed_direct(id), through(id), sends(id)))
                // A trainer hands its workers work (the next indices); a
                // launcher (mpirun's orted, a shell) only reads their output.
                .filter(|(_, d, v, s)| *s >= min_wakes && d + v + s >= min_wakes)
                .collect();
            let main = threads.iter().find(|(id, ..)| is_main_thread(*id));
            let pick = main.or_else(|| threads.iter().max_by_key(|(_, d, v, s)| d + v + s));
            if let Some(&(id, d, v, s)) = pick {
                let how = if d + v >= min_wakes {
                    describe(id, d, v)
                } else {
                    format!("sends work to the data side {s} times and hardly waits for it")
                };
                out.push((
                    id,
                    format!(
                        "{} of the process that started the workers; {}",
                        if is_main_thread(id) {
                            "main thread"
                        } else {
                            "thread"
                        },
                        how
                    ),
                ));
            }
        }
        // A launcher (sh, mpirun's orted) as the only trainer feeds
        // nothing: none here. The caller then looks for the consumer among
        // the readers' own threads; scoring the threads outside the whole
        // worker processes here would make the launcher, which reads their
        // output, the consumer of an MPI rank whose main thread consumes.
        return out;
    }
    let timer_sleep = |id: ThreadId| -> f64 {
        g.timer_sleep_ns(id) as f64 / g.states.get(&id).map_or(0, StateTime::total).max(1) as f64
    };
    let scored: Vec<(ThreadId, u64, u64, f64)> = outside
        .iter()
        .map(|&id| (id, fed_direct(id), through(id)))
        .filter(|(_, d, v)| d + v >= min_wakes)
        .map(|(id, d, v)| {
            let to_side: u64 = side.iter().map(|&s| g.wakes(id, s).1).sum();
            let main = if is_main_thread(id) { 2.0 } else { 1.0 };
            let sleeps = if timer_sleep(id) >= 0.05 { 2.0 } else { 1.0 };
            (id, d, v, (d + v + to_side) as f64 * main * sleeps)
        })
        .collect();
    let best = scored.iter().map(|s| s.3).fold(0.0, f64::max);
    scored
        .into_iter()
        .filter(|s| s.3 >= 0.5 * best)
        .map(|(id, d, v, _)| (id, describe(id, d, v)))
        .collect()
}

/// The recorded command is a benchmark that emulates compute with sleeps
/// (`storprof bench`, DLIO, mlpstorage), even at a computation time of 0:
/// by its arguments, the words of a shell command line among them
/// (`sh -c '... exec dlio_benchmark ...'`), or a traced process's name.
fn emulates_compute(session: &Session) -> bool {
    let argv = &session.info.command;
    let is_benchmark = |word: &str| {
        let name = word.rsplit('/').next().unwrap_or(word);
        name.starts_with("dlio_benchmark") || name == "mlpstorage"
    };
    let words: Vec<String> = argv
        .iter()
        .flat_map(|a| a.split_whitespace())
        .map(str::to_string)
        .collect();
    super::features::is_storprof_bench(argv)
        || super::features::is_storprof_bench(&words)
        || words.iter().any(|w| is_benchmark(w))
        || session.info.processes.iter().any(|p| is_benchmark(&p.comm))
}

/// Consumers found by their emulated compute when the data side is not
/// known from reads (mapped files, tiny runs): threads asleep in timed
/// sleeps at least `consumer_sleep_share` of their life that exchange
/// wake-ups with other threads; those threads are the data side.
fn sleeping_consumers(g: &Graph, t: &Thresholds) -> Option<(Vec<Found>, BTreeSet<ThreadId>)> {
    let mut consumers = Vec::new();
    let mut side = BTreeSet::new();
    for (&id, st) in &g.states {
        let share = g.timer_sleep_ns(id) as f64 / st.total().max(1) as f64;
        if share < t.consumer_sleep_share {
            continue;
        }
        let partners: Vec<ThreadId> = g
            .states
            .keys()
            .filter(|&&o| o != id && g.wakes(id, o).1 + g.wakes(o, id).1 >= 2)
            .copied()
            .collect();
        let exchanged: u64 = partners
            .iter()
            .map(|&o| g.wakes(id, o).1 + g.wakes(o, id).1)
            .sum();
        if exchanged < t.consumer_min_wakes {
            continue;
        }
        consumers.push((
            id,
            format!(
                "asleep in timed sleeps (emulated compute) {:.0}% of its life, and exchanges \
                 {exchanged} wake-ups with {} thread(s) that feed it (found by its compute: \
                 the readers' wake-ups alone did not single it out)",
                share * 100.0,
                partners.len()
            ),
        ));
        side.extend(partners);
    }
    let ids: BTreeSet<ThreadId> = consumers.iter().map(|(id, _)| *id).collect();
    side.retain(|id| !ids.contains(id));
    (!consumers.is_empty()).then_some((consumers, side))
}

/// Blocked time of `consumer` ended by a hand-off from the data side (or
/// relays).
fn data_waits<'a>(
    g: &Graph<'a>,
    consumer: ThreadId,
    side: &BTreeSet<ThreadId>,
    relays: &BTreeSet<ThreadId>,
) -> Vec<(&'a WakeEdge, u64)> {
    g.into
        .get(&consumer)
        .into_iter()
        .flatten()
        // A wait for a lock the consumer contends for with its loaders (the
        // GIL re-taken after a sleep) is not a wait for data.
        .filter(|(e, _, _)| {
            !e.futex_shared
                && waker_id(e)
                    .is_some_and(|w| w != consumer && (side.contains(&w) || relays.contains(&w)))
        })
        .map(|(e, ns, _)| (*e, *ns))
        .collect()
}

/// A wait of the consumer to receive something: a read, a receive, a poll
/// or a futex (a queue's condition variable). Not one to hand work over (a
/// full pipe to a worker), nor to start or reap one (vfork, wait4).
fn is_receive_wait(e: &WakeEdge) -> bool {
    matches!(
        e.syscall.as_deref(),
        Some(
            "read"
                | "readv"
                | "pread64"
                | "preadv"
                | "preadv2"
                | "recvfrom"
                | "recvmsg"
                | "recvmmsg"
                | "poll"
                | "ppoll"
                | "select"
                | "pselect6"
                | "epoll_wait"
                | "epoll_pwait"
                | "epoll_pwait2"
                | "futex"
                | "io_getevents"
                | "io_uring_enter"
        )
    )
}

/// Accumulates the critical path.
#[derive(Default)]
struct PathAcc {
    by_kind: BTreeMap<PathKind, (f64, BTreeMap<ThreadId, f64>)>,
    cpu_threads: BTreeMap<ThreadId, f64>,
}

impl PathAcc {
    fn add(&mut self, kind: PathKind, id: ThreadId, ns: f64) {
        let e = self.by_kind.entry(kind).or_default();
        e.0 += ns;
        *e.1.entry(id).or_insert(0.0) += ns;
        if matches!(kind, PathKind::CpuUser | PathKind::CpuKernel) {
            *self.cpu_threads.entry(id).or_insert(0.0) += ns;
        }
    }
}

/// Whether the waker of `e` holds a lock the wakee contends for: a futex
/// word (64-byte granule) the waker had waited on lately too (the kernel's
/// `futex_shared`), between two loaders.
fn is_contended_lock(e: &WakeEdge, roles: &BTreeMap<ThreadId, Role>) -> bool {
    let Some(waker) = waker_id(e) else {
        return false;
    };
    let loader = |id: ThreadId| roles.get(&id) == Some(&Role::Loader);
    e.futex_shared && loader(waker) && loader((e.wakee_pid, e.wakee_tid))
}

/// Threads of a process whose lock waits among themselves are not
/// contention: loaders of one process linked by contended-lock wake-ups
/// ([`is_contended_lock`]) into a group where one reader does most of the
/// group's CPU work and the others read nothing, passing its results on (a
/// DataLoader worker's main thread and its queue feeder taking turns at the
/// GIL). Such a group would gain little from losing the lock, since its
/// limit is the reader's CPU. Readers that starve each other at an unfair
/// lock stay contention however their CPU is split, and so do waits between
/// processes (a shared-memory lock of a queue).
fn one_reader_lock_groups(
    g: &Graph,
    roles: &BTreeMap<ThreadId, Role>,
    readers: &BTreeSet<ThreadId>,
    t: &Thresholds,
) -> BTreeSet<ThreadId> {
    fn root(parent: &mut BTreeMap<ThreadId, ThreadId>, id: ThreadId) -> ThreadId {
        let mut r = id;
        while let Some(&p) = parent.get(&r) {
            if p == r {
                break;
            }
            r = p;
        }
        parent.insert(id, r);
        r
    }
    let mut parent: BTreeMap<ThreadId, ThreadId> = BTreeMap::new();
    for (&wakee, edges) in &g.into {
        for (e, _, _) in edges {
            let Some(waker) = waker_id(e).filter(|w| w.0 == wakee.0 && is_contended_lock(e, roles))
            else {
                continue;
            };
            let (a, b) = (root(&mut parent, waker), root(&mut parent, wakee));
            parent.insert(a, b);
            parent.entry(b).or_insert(b);
        }
    }
    let members: Vec<ThreadId> = parent.keys().copied().collect();
    let mut groups: BTreeMap<ThreadId, Vec<ThreadId>> = BTreeMap::new();
    for id in members {
        let r = root(&mut parent, id);
        groups.entry(r).or_default().push(id);
    }
    let cpu = |id: &ThreadId| g.states.get(id).map_or(0, |s| s.on_cpu) as f64;
    groups
        .into_values()
        .filter(|group| {
            let total: f64 = group.iter().map(cpu).sum();
            let top = group
                .iter()
                .max_by(|a, b| cpu(a).total_cmp(&cpu(b)))
                .filter(|top| total > 0.0 && cpu(top) >= t.lock_dominant_holder_share * total);
            top.is_some_and(|top| group.iter().all(|id| id == top || !readers.contains(id)))
        })
        .flatten()
        .collect()
}

/// The fixed context of one critical-path walk.
struct Walk<'g, 'a> {
    g: &'g Graph<'a>,
    consumers: &'g BTreeSet<ThreadId>,
    roles: &'g BTreeMap<ThreadId, Role>,
    /// From [`one_reader_lock_groups`].
    one_reader_groups: &'g BTreeSet<ThreadId>,
    max_depth: usize,
}

fn attribute(walk: &Walk, id: ThreadId, amount: f64, path: &mut Vec<ThreadId>, acc: &mut PathAcc) {
    let Walk {
        g,
        consumers,
        roles,
        one_reader_groups,
        max_depth,
    } = *walk;
    let Some(st) = g.states.get(&id).copied() else {
        acc.add(PathKind::Unattributed, id, amount);
        return;
    };
    if path.len() >= max_depth || amount < 1.0 {
        acc.add(PathKind::Unattributed, id, amount);
        return;
    }
    // Parts of `id`'s time: its states, and its sleeping split by who woke it.
    let user = st.user_share.unwrap_or(1.0);
    let mut parts: Vec<(f64, Part)> = vec![
        (st.on_cpu as f64 * user, Part::Leaf(PathKind::CpuUser)),
        (
            st.on_cpu as f64 * (1.0 - user),
            Part::Leaf(PathKind::CpuKernel),
        ),
        (st.runnable as f64, Part::Leaf(PathKind::Runnable)),
        (st.io as f64, Part::Leaf(PathKind::BlockIo)),
    ];
    let mut woken_sleep = 0.0;
    let mut to_consumer = 0.0;
    for (e, ns, _) in g.into.get(&id).into_iter().flatten() {
        if e.wakee_state != "sleeping" {
            continue;
        }
        let ns = *ns as f64;
        woken_sleep += ns;
        let part = match waker_id(e) {
            Some(w) if consumers.contains(&w) => {
                // Waiting for the consumer (backpressure, the next index):
                // not on the path while the consumer waits for data.
                to_consumer += ns;
                continue;
            }
            Some(w) if path.contains(&w) || w == id => continue,
            Some(w)
                if is_contended_lock(e, roles)
                    && !(w.0 == id.0 && one_reader_groups.contains(&w)) =>
            {
                Part::Leaf(PathKind::Lock)
            }
            Some(w) => Part::Thread(w),
            None => Part::Leaf(classify_untraced(e)),
        };
        parts.push((ns, part));
    }
    let unattributed = (st.sleeping as f64 - woken_sleep).max(0.0);
    parts.push((unattributed, Part::Leaf(PathKind::Unattributed)));
    let total: f64 = parts.iter().map(|(w, _)| w).sum();
    if total <= 0.0 {
        let kind = if to_consumer > 0.0 {
            PathKind::WaitsForConsumer
        } else {
            PathKind::Unattributed
        };
        acc.add(kind, id, amount);
        return;
    }
    path.push(id);
    for (w, part) in parts {
        if w <= 0.0 {
            continue;
        }
        let share = amount * w / total;
        match part {
            Part::Leaf(kind) => acc.add(kind, id, share),
            Part::Thread(next) => attribute(walk, next, share, path, acc),
        }
    }
    path.pop();
}

enum Part {
    Leaf(PathKind),
    Thread(ThreadId),
}

/// What an interrupt or untraced waker means.
fn classify_untraced(e: &WakeEdge) -> PathKind {
    match e.waker_kind.as_str() {
        "timer" => PathKind::Timer,
        "task" => PathKind::OtherProcess,
        _ if stack_has(e, NET_FRAMES) => PathKind::Network,
        _ if stack_has(e, BLOCK_FRAMES) => PathKind::BlockIo,
        _ if e
            .syscall
            .as_deref()
            .is_some_and(|s| SOCKET_SYSCALLS.contains(&s) && s.starts_with("recv")) =>
        {
            PathKind::Network
        }
        _ => PathKind::Interrupt,
    }
}

/// The wait-for-graph analysis; None when the session has no wake-up graph
/// (format 1, or the probe did not run).
pub fn analyze(session: &Session, t: &Thresholds) -> Option<WaitAnalysis> {
    let waits = session.waits.as_ref()?;
    let mut out = WaitAnalysis::default();
    let DataSide {
        mut side,
        readers,
        trainers,
        how: side_how,
    } = data_side(session, t);
    let reader_ids = readers.clone();
    let whole = Graph::new(session, None);
    let mut consumers = find_consumers(&whole, &side, &trainers, t);
    if consumers.is_empty() && !trainers.is_empty() {
        // The readers' parents feed on nothing: launchers (mpirun's orted, a
        // shell); the consumer is then in the readers' own processes, as in
        // an MPI rank whose read threads feed its main thread.
        consumers = find_consumers(&whole, &readers, &BTreeSet::new(), t);
        if !consumers.is_empty() {
            side = readers;
        }
    }
    if consumers.is_empty()
        && let Some((sleepers, partners)) = sleeping_consumers(&whole, t)
    {
        consumers = sleepers;
        side = partners;
    }
    let duration = session.duration_s();
    if consumers.is_empty() {
        out.notes.push(
            "no consumer found: no thread outside the readers is fed by them (a plain reader \
             such as cat or dd); the verdict is about the readers"
                .to_string(),
        );
        out.roles = side
            .iter()
            .map(|&id| RoleRow {
                pid: id.0,
                tid: id.1,
                comm: whole.comm(id),
                role: Role::Loader,
                reason: format!("reader: {side_how}"),
                on_cpu_share: share_of(whole.states.get(&id), |s| s.on_cpu),
            })
            .collect();
        return Some(out);
    }
    let consumer_ids: BTreeSet<ThreadId> = consumers.iter().map(|(id, _)| *id).collect();
    // Relays: non-side threads that feed a consumer and are fed by the side.
    let relays: BTreeSet<ThreadId> = whole
        .states
        .keys()
        .filter(|id| !side.contains(id) && !consumer_ids.contains(id))
        .filter(|&&id| consumer_ids.iter().any(|&c| whole.wakes(id, c).1 > 0))
        .filter(|&&id| feeders(&whole, id).keys().any(|w| side.contains(w)))
        .copied()
        .collect();

    // The window: first to last exchange of the consumers with the data
    // side: data wake-ups, and the work they send (to the side, or to a
    // thread of theirs that wakes the side: a queue feeder). When data was
    // delivered (the consumer woken from a receive), the window starts at
    // the first delivery: the wait for the first batch is start-up (DLIO
    // leaves the first step out too), and so are starting workers and
    // handing them work while they start (a spawned worker's pipe stays
    // full while its interpreter imports).
    let mut first_delivery: Option<f64> = None;
    let mut first = f64::MAX;
    let mut last = 0.0f64;
    let senders: BTreeSet<ThreadId> = whole
        .states
        .keys()
        .filter(|t| !side.contains(*t))
        .filter(|&&t| side.iter().any(|&sd| whole.wakes(t, sd).1 > 0))
        .copied()
        .collect();
    for &c in &consumer_ids {
        for (e, _) in data_waits(&whole, c, &side, &relays) {
            first = first.min(e.first_s);
            last = last.max(e.last_s);
            if is_receive_wait(e) {
                first_delivery = Some(first_delivery.map_or(e.first_s, |d| d.min(e.first_s)));
            }
        }
        for e in waits.edges.iter().filter(|e| waker_id(e) == Some(c)) {
            let wakee = (e.wakee_pid, e.wakee_tid);
            if side.contains(&wakee) || (senders.contains(&wakee) && wakee.0 == c.0) {
                first = first.min(e.first_s);
                last = last.max(e.last_s);
            }
        }
    }
    let (start_s, end_s, source) = if let Some(delivery) = first_delivery.filter(|&d| last > d) {
        (
            delivery,
            last,
            "the consumer's first data delivery to its last exchange with the data side"
                .to_string(),
        )
    } else if last > first {
        (
            first,
            last,
            "the consumer's first and last exchanges with the data side".to_string(),
        )
    } else {
        (0.0, duration, "the whole recording".to_string())
    };
    let bucket_s = waits.bucket_ns.max(1) as f64 / 1e9;
    let has_states = session
        .timeseries
        .as_ref()
        .is_some_and(|ts| ts.threads.iter().any(|s| !s.sleeping_ns.is_empty()));
    let b0 = (start_s / bucket_s).ceil() as usize;
    let b1 = (end_s / bucket_s).floor() as usize;
    let buckets = (has_states && b1 >= b0 + 2).then_some((b0, b1));
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
    out.phases = phases(session, start_s, end_s, duration);
    let g = Graph::new(session, buckets);

    // Roles.
    let mut roles: BTreeMap<ThreadId, (Role, String)> = BTreeMap::new();
    for (id, why) in &consumers {
        roles.insert(*id, (Role::Consumer, why.clone()));
    }
    let mut loaders: BTreeSet<ThreadId> = BTreeSet::new();
    for &c in &consumer_ids {
        for w in feeders(&whole, c).keys() {
            if side.contains(w) || relays.contains(w) {
                loaders.insert(*w);
            }
        }
    }
    // Upstream of the direct feeders, on the data side: a worker's main
    // thread waking its queue feeder thread.
    let direct: Vec<ThreadId> = loaders.iter().copied().collect();
    for d in direct {
        for w in feeders(&whole, d).keys() {
            if side.contains(w) && !consumer_ids.contains(w) && w.0 == d.0 {
                loaders.insert(*w);
            }
        }
    }
    // Readers are loaders too when they are on the data side.
    for &id in &side {
        let reads = session
            .threads
            .iter()
            .find(|th| (th.pid, th.tid) == id)
            .is_some_and(|th| th.read_bytes > 0);
        if reads
            && (feeders(&whole, id).keys().any(|w| loaders.contains(w))
                || loaders.iter().any(|&l| whole.wakes(id, l).1 > 0))
        {
            loaders.insert(id);
        }
    }
    for &l in &loaders {
        roles.entry(l).or_insert((
            Role::Loader,
            if consumer_ids.iter().any(|&c| whole.wakes(l, c).1 > 0) {
                "wakes the consumer (delivers data)".to_string()
            } else {
                "wakes a thread that delivers data".to_string()
            },
        ));
    }
    for &l in &loaders {
        for (w, _) in feeders(&whole, l) {
            if roles.contains_key(&w) {
                continue;
            }
            let (ns, _) = whole.wakes(w, l);
            let life = whole.states.get(&l).map_or(0, StateTime::total).max(1);
            if ns as f64 / life as f64 >= t.helper_wait_share {
                roles.insert(
                    w,
                    (
                        Role::Helper,
                        format!(
                            "a loader waits on it {:.1}% of its time",
                            ns as f64 / life as f64 * 100.0
                        ),
                    ),
                );
            }
        }
    }
    let role_map: BTreeMap<ThreadId, Role> = roles.iter().map(|(k, (r, _))| (*k, *r)).collect();
    out.roles = g
        .states
        .iter()
        .map(|(&id, st)| {
            let (role, reason) = roles.get(&id).cloned().unwrap_or((
                Role::Idle,
                "neither wakes the data path nor is waited on".to_string(),
            ));
            RoleRow {
                pid: id.0,
                tid: id.1,
                comm: g.comm(id),
                role,
                reason,
                on_cpu_share: share_of(Some(st), |s| s.on_cpu),
            }
        })
        .collect();
    out.roles.sort_by(|a, b| {
        (a.role, std::cmp::Reverse(ordered(a.on_cpu_share)), a.tid).cmp(&(
            b.role,
            std::cmp::Reverse(ordered(b.on_cpu_share)),
            b.tid,
        ))
    });

    // Data wait and the critical path.
    let one_reader_groups = one_reader_lock_groups(&g, &role_map, &reader_ids, t);
    let walk = Walk {
        g: &g,
        consumers: &consumer_ids,
        roles: &role_map,
        one_reader_groups: &one_reader_groups,
        max_depth: t.critical_path_max_depth,
    };
    let mut acc = PathAcc::default();
    let mut total_wait = 0.0;
    for &c in &consumer_ids {
        let waits = data_waits(&whole, c, &side, &relays);
        // The wait for the first batch is start-up, not training (DLIO
        // excludes the first step too).
        let first_edge = waits
            .iter()
            .min_by(|a, b| a.0.first_s.total_cmp(&b.0.first_s))
            .map(|(e, _)| *e);
        let mut wait_ns = 0u64;
        for (e, _) in &waits {
            let in_window = match buckets {
                Some((b0, b1)) => e
                    .series
                    .iter()
                    .filter(|(b, _, _)| (b0..b1).contains(&(*b as usize)))
                    .map(|(_, ns, _)| ns)
                    .sum::<u64>(),
                None => {
                    let mut ns = e.blocked_ns;
                    if first_edge.is_some_and(|f| std::ptr::eq(f, *e)) {
                        ns = ns.saturating_sub(e.first_blocked_ns);
                    }
                    ns
                }
            };
            wait_ns += in_window;
            let Some(w) = waker_id(e) else { continue };
            let mut path = vec![c];
            attribute(&walk, w, in_window as f64, &mut path, &mut acc);
        }
        // Off-CPU time is accounted when a thread comes back on a CPU, so a
        // wait that spans a bucket boundary lands in one bucket: the
        // consumer's own accounted time in the window is the denominator
        // that matches its data waits, not the window's length.
        let own = g.states.get(&c).copied().unwrap_or_default();
        let window_ns = match buckets {
            Some(_) => window_accounted_ns(&whole, &g, c, own),
            None => ((end_s - start_s).max(0.0) * 1e9) as u64,
        };
        let compute_ns = g.timer_sleep_ns(c);
        // A consumer that emulates compute with timed sleeps (DLIO, the
        // bench) computes only inside its sleep call: its own time on CPU
        // (unpickling a batch, queue bookkeeping) is fetching, as DLIO
        // counts it, and so is its data wait. A consumer that does not (a
        // real trainer computes on CPU or waits on a device) is computing
        // whenever it is not waiting for data.
        let emulated = window_ns > 0
            && (emulates_compute(session)
                || compute_ns as f64 >= t.consumer_sleep_share * window_ns as f64);
        let not_computing = if emulated {
            wait_ns + own.on_cpu + own.runnable
        } else {
            wait_ns
        };
        let au = if window_ns == 0 {
            100.0
        } else {
            (1.0 - not_computing as f64 / window_ns as f64).clamp(0.0, 1.0) * 100.0
        };
        let own_ns = if emulated {
            window_ns.saturating_sub(compute_ns.saturating_add(wait_ns))
        } else {
            own.io
        };
        let write_bytes = session
            .threads
            .iter()
            .find(|t| (t.pid, t.tid) == c)
            .map_or(0, |t| t.write_bytes);
        total_wait += wait_ns as f64;
        out.consumers.push(ConsumerTime {
            pid: c.0,
            tid: c.1,
            comm: g.comm(c),
            data_wait_ns: wait_ns,
            compute_ns,
            emulated_compute: emulated,
            window_ns,
            au_percentage: au,
            write_bytes,
            own_ns,
            own_io_ns: own.io.min(own_ns),
        });
    }
    if !out.consumers.is_empty() {
        let au =
            out.consumers.iter().map(|c| c.au_percentage).sum::<f64>() / out.consumers.len() as f64;
        out.kernel_au_percentage = Some(au);
        out.data_wait_share = Some(1.0 - au / 100.0);
    }
    if total_wait > 0.0 {
        let mut shares: Vec<PathShare> = acc
            .by_kind
            .into_iter()
            .map(|(kind, (ns, threads))| {
                let mut threads: Vec<(u32, u32, String, f64)> = threads
                    .into_iter()
                    .map(|(id, t_ns)| (id.0, id.1, g.comm(id), t_ns / total_wait))
                    .collect();
                threads.sort_by(|a, b| b.3.total_cmp(&a.3));
                threads.truncate(8);
                PathShare {
                    kind,
                    share: ns / total_wait,
                    ns: ns as u64,
                    threads,
                }
            })
            .collect();
        shares.sort_by(|a, b| b.share.total_cmp(&a.share));
        out.critical_path = shares;
        let mut cpu: Vec<(u32, u32, f64)> = acc
            .cpu_threads
            .into_iter()
            .map(|(id, ns)| (id.0, id.1, ns / total_wait))
            .collect();
        cpu.sort_by(|a, b| b.2.total_cmp(&a.2));
        out.path_cpu_threads = cpu;
    }
    Some(out)
}

fn ordered(x: f64) -> u64 {
    (x.clamp(0.0, 1.0) * 1e6) as u64
}

fn share_of(st: Option<&StateTime>, f: impl Fn(&StateTime) -> u64) -> f64 {
    st.map_or(0.0, |s| {
        let total = s.total();
        if total > 0 {
            f(s) as f64 / total as f64
        } else {
            0.0
        }
    })
}

/// Start-up, training and tear-down with what their busiest threads did.
fn phases(session: &Session, start_s: f64, end_s: f64, duration: f64) -> Vec<Phase> {
    let mut out = Vec::new();
    let ts = session.timeseries.as_ref();
    let bucket_s = ts.map_or(1.0, |t| t.bucket_ns.max(1) as f64 / 1e9);
    let activity = |a: f64, b: f64| -> String {
        let Some(ts) = ts else {
            return String::new();
        };
        let (b0, b1) = (
            (a / bucket_s).floor() as usize,
            (b / bucket_s).ceil() as usize,
        );
        let len_s = ((b1.saturating_sub(b0)) as f64 * bucket_s).max(1e-9);
        let mut busy: Vec<(f64, String, u32)> = ts
            .threads
            .iter()
            .map(|s| {
                let on = s.on_cpu().sum(b0, b1);
                let read = s.read().sum(b0, b1);
                (on as f64 / 1e9 / len_s, s.comm.clone(), u32::from(read > 0))
            })
            .filter(|(cpu, _, _)| *cpu >= 0.05)
            .collect();
        busy.sort_by(|x, y| y.0.total_cmp(&x.0));
        let cpus: f64 = busy.iter().map(|b| b.0).sum();
        let top: Vec<String> = busy
            .iter()
            .take(3)
            .map(|(cpu, comm, read)| {
                format!(
                    "{comm} {:.0}% CPU{}",
                    cpu * 100.0,
                    if *read > 0 { " (reading)" } else { "" }
                )
            })
            .collect();
        if top.is_empty() {
            "threads mostly off CPU".to_string()
        } else {
            format!("{:.1} CPUs busy: {}", cpus, top.join(", "))
        }
    };
    if start_s > 0.05 {
        out.push(Phase {
            name: "start-up".into(),
            start_s: 0.0,
            end_s: start_s,
            activity: activity(0.0, start_s),
        });
    }
    out.push(Phase {
        name: "training".into(),
        start_s,
        end_s,
        activity: activity(start_s, end_s),
    });
    if duration > end_s + 0.05 {
        out.push(Phase {
            name: "tear-down".into(),
            start_s: end_s,
            end_s: duration,
            activity: activity(end_s, duration),
        });
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    //! Synthetic sessions shaped like real loaders: a trainer with forked
    //! workers, pool threads that are idle or fork-joined, a lock among
    //! loader threads, a plain reader. Figures are per 1-second bucket
    //! over 10 buckets; the window is buckets 1..9.
    use super::*;
    use crate::{
        analysis::{self, VerdictId},
        session::model::{OffCpuNs, ProcessInfo, SessionInfo, ThreadSeries, TimeSeries, WaitGraph},
    };

    const S: u64 = 1_000_000_000;
    const BUCKETS: usize = 10;

    /// A thread whose every bucket has the given ns on CPU, runnable,
    /// sleeping and in D.
    struct T {
        pid: u32,
        tid: u32,
        comm: &'static str,
        per_bucket: [u64; 4],
        read_bytes: u64,
    }

    fn edge(
        waker: (u32, u32),
        wakee: (u32, u32),
        syscall: &str,
        ns_per_bucket: u64,
        n_per_bucket: u64,
    ) -> WakeEdge {
        WakeEdge {
            waker_kind: "task".into(),
            waker_pid: waker.0,
            waker_tid: waker.1,
            waker_comm: "w".into(),
            waker_traced: true,
            wakee_pid: wakee.0,
            wakee_tid: wakee.1,
            wakee_state: "sleeping".into(),
            syscall: Some(syscall.into()),
            futex_shared: false,
            blocked_ns: ns_per_bucket * BUCKETS as u64,
            count: n_per_bucket * BUCKETS as u64,
            first_s: 0.5,
            last_s: BUCKETS as f64 - 0.5,
            first_blocked_ns: 0,
            waker_stack: Vec::new(),
            series: (0..BUCKETS as u32)
                .map(|b| (b, ns_per_bucket, n_per_bucket))
                .collect(),
        }
    }

    fn timer(wakee: (u32, u32), ns_per_bucket: u64) -> WakeEdge {
        WakeEdge {
            waker_kind: "timer".into(),
            waker_pid: 0,
            waker_tid: 0,
            waker_traced: false,
            syscall: Some("clock_nanosleep".into()),
            ..edge((0, 0), wakee, "clock_nanosleep", ns_per_bucket, 50)
        }
    }

    /// A futex wait; `shared`: the waker waited on the same word lately.
    fn futex(waker: (u32, u32), wakee: (u32, u32), shared: bool, ns: u64) -> WakeEdge {
        WakeEdge {
            futex_shared: shared,
            ..edge(waker, wakee, "futex", ns, 100)
        }
    }

    fn session(threads: &[T], procs: &[(u32, u32)], edges: Vec<WakeEdge>) -> Session {
        let b = BUCKETS as u64;
        let stats = threads
            .iter()
            .map(|t| ThreadStats {
                pid: t.pid,
                tid: t.tid,
                comm: t.comm.into(),
                on_cpu_ns: t.per_bucket[0] * b,
                off_cpu_ns: OffCpuNs {
                    runnable: t.per_bucket[1] * b,
                    sleeping: t.per_bucket[2] * b,
                    uninterruptible: t.per_bucket[3] * b,
                    other: 0,
                },
                samples_user: t.per_bucket[0] / 10_000_000 * b,
                samples_kernel: 0,
                read_bytes: t.read_bytes,
                ..ThreadStats::default()
            })
            .collect();
        let series = threads
            .iter()
            .map(|t| ThreadSeries {
                pid: t.pid,
                tid: t.tid,
                comm: t.comm.into(),
                first_bucket: 0,
                on_cpu_ns: vec![t.per_bucket[0]; BUCKETS],
                read_bytes: vec![t.read_bytes / b; BUCKETS],
                runnable_ns: vec![t.per_bucket[1]; BUCKETS],
                sleeping_ns: vec![t.per_bucket[2]; BUCKETS],
                blocked_io_ns: vec![t.per_bucket[3]; BUCKETS],
            })
            .collect();
        Session {
            info: SessionInfo {
                format_version: 2,
                num_cpus: 8,
                duration_s: BUCKETS as f64,
                freq_hz: 99,
                processes: procs
                    .iter()
                    .map(|&(pid, ppid)| ProcessInfo {
                        pid,
                        ppid,
                        comm: "python".into(),
                    })
                    .collect(),
                ..SessionInfo::default()
            },
            threads: stats,
            timeseries: Some(TimeSeries {
                bucket_ns: S,
                threads: series,
                ..TimeSeries::default()
            }),
            waits: Some(WaitGraph {
                bucket_ns: S,
                edges,
                pending: Vec::new(),
            }),
            ..Session::default()
        }
    }

    fn assert_verdict(a: &analysis::Analysis, want: VerdictId) {
        assert_eq!(a.verdict.verdict, want, "{}", a.verdict.headline);
    }

    const MS: u64 = 1_000_000;
    const TRAINER: (u32, u32) = (100, 100);
    const WORKER: (u32, u32) = (200, 200);
    const FEEDER: (u32, u32) = (200, 201);

    /// The #330 shape: a trainer whose main thread waits for a forked
    /// worker; the worker decodes on CPU and fork-joins one pyarrow pool
    /// thread; three more pool threads (and the trainer's OpenMP-like pool)
    /// sit on futexes all the time.
    fn dataloader(consumer_wait_ms: u64, worker_cpu_ms: u64) -> Session {
        let consumer_sleep = 1000 - consumer_wait_ms - 20;
        let mut threads = vec![
            T {
                pid: 100,
                tid: 100,
                comm: "python",
                per_bucket: [20 * MS, 0, (consumer_wait_ms + consumer_sleep) * MS, 0],
                read_bytes: 1 << 20,
            },
            T {
                pid: 200,
                tid: 200,
                comm: "pt_data_worker",
                per_bucket: [worker_cpu_ms * MS, 0, (1000 - worker_cpu_ms) * MS, 0],
                read_bytes: 100 << 20,
            },
            T {
                pid: 200,
                tid: 201,
                comm: "QueueFeederThr",
                per_bucket: [5 * MS, 0, 995 * MS, 0],
                read_bytes: 0,
            },
        ];
        for tid in 202..=205 {
            threads.push(T {
                pid: 200,
                tid,
                comm: "arrow-cpu",
                per_bucket: if tid == 202 {
                    [200 * MS, 0, 800 * MS, 0]
                } else {
                    [0, 0, 1000 * MS, 0]
                },
                read_bytes: 0,
            });
        }
        for tid in 101..=104 {
            threads.push(T {
                pid: 100,
                tid,
                comm: "omp",
                per_bucket: [0, 0, 1000 * MS, 0],
                read_bytes: 0,
            });
        }
        let idle_ms = 1000 - worker_cpu_ms - 150;
        let edges = vec![
            // Data: the feeder writes the result pipe.
            edge(FEEDER, TRAINER, "poll", consumer_wait_ms * MS, 10),
            timer(TRAINER, consumer_sleep * MS),
            // The worker hands results to its feeder thread.
            futex(WORKER, FEEDER, false, 995 * MS),
            // The next index comes from the trainer (backpressure).
            edge(TRAINER, WORKER, "read", idle_ms * MS, 10),
            // Fork-join: the worker waits on pool thread 202.
            futex((200, 202), WORKER, false, 150 * MS),
            futex(WORKER, (200, 202), false, 800 * MS),
        ];
        session(&threads, &[(100, 0), (200, 100)], edges)
    }

    #[test]
    fn dataloader_roles_consumer_window_and_fork_join_path() {
        let s = dataloader(600, 700);
        let w = analyze(&s, &Thresholds::default()).unwrap();
        assert_eq!(w.consumers.len(), 1);
        assert_eq!((w.consumers[0].pid, w.consumers[0].tid), TRAINER);
        let role = |id: ThreadId| w.role_of(id.0, id.1).unwrap();
        assert_eq!(role(WORKER), Role::Loader);
        assert_eq!(role(FEEDER), Role::Loader);
        assert_eq!(role((200, 202)), Role::Helper);
        for idle in [(200, 203), (200, 204), (200, 205), (100, 101)] {
            assert_eq!(role(idle), Role::Idle, "{idle:?}");
        }
        // 600 of 1000 ms waited for data per bucket; its 20 ms of CPU is
        // fetching (it emulates compute with sleeps): AU 38%.
        let au = w.kernel_au_percentage.unwrap();
        assert!((au - 38.0).abs() < 0.5, "{au}");
        let window = w.window.as_ref().unwrap();
        assert_eq!(window.buckets, Some((1, 9)));
        // The wait goes through the feeder to the worker (on CPU 700 of its
        // 850 non-idle ms) and through the fork-join to the pool thread.
        let cpu = w.share(&[PathKind::CpuUser, PathKind::CpuKernel]);
        assert!(cpu > 0.95, "{:?}", w.critical_path);
        let pool: f64 = w
            .critical_path
            .iter()
            .flat_map(|p| &p.threads)
            .filter(|t| t.1 == 202)
            .map(|t| t.3)
            .sum();
        assert!(pool > 0.1 && pool < 0.3, "{:?}", w.critical_path);
        assert!(w.share(&[PathKind::Lock]) == 0.0, "{:?}", w.critical_path);
    }

    #[test]
    fn idle_pool_threads_no_longer_make_lock_contention() {
        let mut s = dataloader(600, 700);
        // pyarrow's pool threads read column chunks too, and every sleep of
        // the worker's threads is a futex wait.
        for t in &mut s.threads {
            if t.pid == 200 {
                t.syscalls.push(crate::session::model::SyscallStats {
                    nr: 202,
                    name: "futex".into(),
                    count: 1000,
                    total_ns: t.off_cpu_ns.sleeping,
                    ..Default::default()
                });
                if t.comm == "arrow-cpu" {
                    t.read_bytes = 20 << 20;
                }
            }
        }
        let a = analysis::analyze(&s, &Thresholds::default());
        assert_verdict(&a, VerdictId::CpuBoundReader);
        assert_eq!(a.verdict.rules, "wait-graph");
        // The same session read by summed thread time: the workers' threads
        // sleep on futexes most of the time.
        let mut old = s.clone();
        old.waits = None;
        old.info.format_version = 1;
        let a = analysis::analyze(&old, &Thresholds::default());
        assert_eq!(a.verdict.rules, "format-1");
        assert_verdict(&a, VerdictId::LockContention);
    }

    #[test]
    fn a_consumer_that_hardly_waits_is_compute_bound() {
        let s = dataloader(10, 300);
        let a = analysis::analyze(&s, &Thresholds::default());
        assert_verdict(&a, VerdictId::ComputeBound);
        let au = a.verdict.kernel_au_percentage.unwrap();
        assert!(au > 95.0, "{au}");
    }

    #[test]
    fn a_sleep_the_time_series_and_the_edges_put_in_different_buckets_does_not_move_the_au() {
        let s = dataloader(10, 300);
        let before = analyze(&s, &Thresholds::default()).unwrap();
        let window = before.window.as_ref().unwrap().buckets.unwrap();
        // The time series was read just before a 500-ms sleep ended at the
        // tick that closed the bucket before the window, the edges just
        // after: the series has the sleep inside the window, the edges
        // outside.
        let mut shifted = s.clone();
        let series = shifted.timeseries.as_mut().unwrap();
        let trainer = series
            .threads
            .iter_mut()
            .find(|t| (t.pid, t.tid) == TRAINER)
            .unwrap();
        trainer.sleeping_ns[window.0 - 1] -= 500 * MS;
        trainer.sleeping_ns[window.0] += 500 * MS;
        let after = analyze(&shifted, &Thresholds::default()).unwrap();
        let (au0, au1) = (
            before.kernel_au_percentage.unwrap(),
            after.kernel_au_percentage.unwrap(),
        );
        assert!((au0 - au1).abs() < 0.01, "{au0} -> {au1}");
        // Without edges for most of its blocked time the series is the
        // account, shift and all.
        let mut no_timer = shifted.clone();
        for e in &mut no_timer.waits.as_mut().unwrap().edges {
            if e.waker_kind == "timer" {
                e.blocked_ns = 0;
            }
        }
        let lost = analyze(&no_timer, &Thresholds::default()).unwrap();
        let consumer = &lost.consumers[0];
        assert_eq!(consumer.window_ns, {
            let t = &shifted.timeseries.as_ref().unwrap().threads;
            let t = t.iter().find(|t| (t.pid, t.tid) == TRAINER).unwrap();
            (window.0..window.1)
                .map(|b| t.on_cpu_ns[b] + t.runnable_ns[b] + t.sleeping_ns[b] + t.blocked_io_ns[b])
                .sum::<u64>()
        });
    }

    /// DLIO's shape with checkpoints on: the trainer (which emulates compute
    /// with timed sleeps) hardly waits for data but spends `own_ms` of
    /// every second of its window saving a checkpoint in its own thread,
    /// on CPU or, with `in_d`, in uninterruptible waits (fsync).
    fn checkpointing_trainer(own_ms: u64, in_d: bool) -> Session {
        let wait_ms = 20;
        let compute_ms = 1000 - wait_ms - own_ms;
        let mut s = dataloader(wait_ms, 300);
        s.info.command = vec!["dlio_benchmark".into(), "workload=unet3d_a100".into()];
        let (cpu, d) = if in_d { (0, own_ms) } else { (own_ms, 0) };
        let per_bucket = [cpu * MS, 0, (wait_ms + compute_ms) * MS, d * MS];
        let b = BUCKETS as u64;
        for t in s.threads.iter_mut().filter(|t| (t.pid, t.tid) == TRAINER) {
            t.on_cpu_ns = per_bucket[0] * b;
            t.off_cpu_ns.sleeping = per_bucket[2] * b;
            t.off_cpu_ns.uninterruptible = per_bucket[3] * b;
            t.write_bytes = 2 << 30;
        }
        let series = s.timeseries.as_mut().unwrap();
        for t in series
            .threads
            .iter_mut()
            .filter(|t| (t.pid, t.tid) == TRAINER)
        {
            t.on_cpu_ns = vec![per_bucket[0]; BUCKETS];
            t.sleeping_ns = vec![per_bucket[2]; BUCKETS];
            t.blocked_io_ns = vec![per_bucket[3]; BUCKETS];
        }
        for e in &mut s.waits.as_mut().unwrap().edges {
            if e.waker_kind == "timer" {
                *e = timer(TRAINER, compute_ms * MS);
            }
        }
        s
    }

    #[test]
    fn a_trainer_saving_checkpoints_in_its_own_thread_is_checkpoint_bound() {
        let s = checkpointing_trainer(600, false);
        let w = analyze(&s, &Thresholds::default()).unwrap();
        let c = &w.consumers[0];
        assert_eq!(c.write_bytes, 2 << 30);
        let own = c.own_ns as f64 / c.window_ns as f64;
        assert!((own - 0.6).abs() < 0.02, "{own}");
        assert_eq!(c.own_io_ns, 0);
        let a = analysis::analyze(&s, &Thresholds::default());
        assert_verdict(&a, VerdictId::CheckpointBound);
        assert!(
            a.verdict.headline.contains("the saving itself"),
            "{}",
            a.verdict.headline
        );
        // The same time in fsync: storage is the limit.
        let a = analysis::analyze(&checkpointing_trainer(600, true), &Thresholds::default());
        assert_verdict(&a, VerdictId::CheckpointBound);
        assert!(
            a.verdict.headline.contains("storage is the limit"),
            "{}",
            a.verdict.headline
        );
        let checkpoint_fired = |s: &Session| {
            let a = analysis::analyze(s, &Thresholds::default());
            a.verdict.verdict == VerdictId::CheckpointBound
                || a.verdict
                    .runners_up
                    .iter()
                    .any(|r| r.verdict == VerdictId::CheckpointBound && r.fired)
        };
        // A short save (10% of the window) is not the limit.
        assert!(!checkpoint_fired(&checkpointing_trainer(100, false)));
        // Nor is the own time of a trainer that wrote nothing.
        let mut quiet = checkpointing_trainer(600, false);
        for t in &mut quiet.threads {
            t.write_bytes = 0;
        }
        assert!(!checkpoint_fired(&quiet));
    }

    #[test]
    fn benchmarks_are_known_through_a_shell_or_by_their_process_name() {
        let mut s = dataloader(10, 300);
        s.info.command = vec!["python".into(), "train.py".into()];
        assert!(!emulates_compute(&s));
        s.info.command = vec![
            "sh".into(),
            "-c".into(),
            "echo $$ > cgroup.procs && exec /venv/bin/dlio_benchmark workload=unet3d_a100".into(),
        ];
        assert!(emulates_compute(&s));
        s.info.command = vec![
            "sh".into(),
            "-c".into(),
            "storprof bench --workload flux".into(),
        ];
        assert!(emulates_compute(&s));
        s.info.command = vec!["./run.sh".into()];
        s.info.processes[0].comm = "dlio_benchmark".into();
        assert!(emulates_compute(&s));
    }

    const LOCK_MAIN: (u32, u32) = (300, 300);

    /// A main thread fed by four loader threads of its process, each reading
    /// and on CPU `cpu_ms[i]` of each second, with the lock waits
    /// `lock_edges(i, loaders)` gives for loader `i`.
    fn four_loaders(
        cpu_ms: [u64; 4],
        lock_edges: impl Fn(usize, &[(u32, u32)]) -> Vec<WakeEdge>,
    ) -> Session {
        let loaders: Vec<(u32, u32)> = (301..=304).map(|t| (300, t)).collect();
        let mut threads = vec![T {
            pid: 300,
            tid: 300,
            comm: "python",
            per_bucket: [10 * MS, 0, 990 * MS, 0],
            read_bytes: 0,
        }];
        let mut edges = vec![timer(LOCK_MAIN, 200 * MS)];
        for (i, &l) in loaders.iter().enumerate() {
            threads.push(T {
                pid: 300,
                tid: l.1,
                comm: "loader",
                per_bucket: [cpu_ms[i] * MS, 0, (1000 - cpu_ms[i]) * MS, 0],
                read_bytes: 50 << 20,
            });
            edges.push(edge(l, LOCK_MAIN, "futex", 195 * MS, 5));
            edges.extend(lock_edges(i, &loaders));
        }
        session(&threads, &[(300, 0)], edges)
    }

    #[test]
    fn loader_threads_serialized_by_one_lock_are_lock_contention() {
        // Each waits on the one lock, released by the next, which waited on
        // it too.
        let s = four_loaders([250; 4], |i, loaders| {
            vec![futex(
                loaders[(i + 1) % loaders.len()],
                loaders[i],
                true,
                700 * MS,
            )]
        });
        let a = analysis::analyze(&s, &Thresholds::default());
        let w = a.wait.as_ref().unwrap();
        assert_eq!((w.consumers[0].pid, w.consumers[0].tid), LOCK_MAIN);
        assert!(w.share(&[PathKind::Lock]) > 0.6, "{:?}", w.critical_path);
        assert_verdict(&a, VerdictId::LockContention);
    }

    #[test]
    fn a_worker_and_its_feeder_taking_turns_at_the_gil_are_not_lock_contention() {
        // DLIO #330: the worker formats on CPU holding the GIL; its feeder
        // waits for the GIL to send the last batch, and the worker waited on
        // the same word when the feeder had it. Both are loaders.
        let mut s = dataloader(600, 900);
        for e in &mut s.waits.as_mut().unwrap().edges {
            if (e.waker_pid, e.waker_tid) == WORKER && (e.wakee_pid, e.wakee_tid) == FEEDER {
                e.futex_shared = true;
            }
        }
        s.waits
            .as_mut()
            .unwrap()
            .edges
            .push(futex(FEEDER, WORKER, true, 20 * MS));
        let a = analysis::analyze(&s, &Thresholds::default());
        let w = a.wait.as_ref().unwrap();
        assert_eq!(w.role_of(FEEDER.0, FEEDER.1), Some(Role::Loader));
        assert_eq!(w.share(&[PathKind::Lock]), 0.0, "{:?}", w.critical_path);
        assert_verdict(&a, VerdictId::CpuBoundReader);
        // A feeder that does a third of the pair's work under the same lock
        // is contention: without the lock the pair could go 1.5x faster.
        let mut shared = s.clone();
        for series in &mut shared.timeseries.as_mut().unwrap().threads {
            if (series.pid, series.tid) == FEEDER {
                series.on_cpu_ns = vec![450 * MS; BUCKETS];
            }
        }
        let w = analyze(&shared, &Thresholds::default()).unwrap();
        assert!(w.share(&[PathKind::Lock]) > 0.3, "{:?}", w.critical_path);
    }

    #[test]
    fn readers_starved_at_an_unfair_lock_are_lock_contention() {
        // One of four readers wins the lock nearly every time: it does most
        // of the CPU work, the others wait to do theirs.
        let s = four_loaders([900, 30, 30, 30], |i, loaders| {
            if i == 0 {
                return Vec::new();
            }
            vec![
                futex(loaders[0], loaders[i], true, 900 * MS),
                futex(loaders[i], loaders[0], true, 50 * MS),
            ]
        });
        let a = analysis::analyze(&s, &Thresholds::default());
        let w = a.wait.as_ref().unwrap();
        assert!(w.share(&[PathKind::Lock]) > 0.3, "{:?}", w.critical_path);
    }

    #[test]
    fn fork_join_on_a_pool_is_not_lock_contention() {
        // The pool thread never waits on the word the worker waits on: a
        // hand-off. A shared word between a loader and a helper is not
        // contention among loaders either.
        let mut s = dataloader(600, 300);
        let w = analyze(&s, &Thresholds::default()).unwrap();
        assert_eq!(w.share(&[PathKind::Lock]), 0.0);
        for e in &mut s.waits.as_mut().unwrap().edges {
            if (e.waker_pid, e.waker_tid) == (200, 202) {
                e.futex_shared = true;
            }
        }
        let w = analyze(&s, &Thresholds::default()).unwrap();
        assert_eq!(w.share(&[PathKind::Lock]), 0.0, "{:?}", w.critical_path);
    }

    #[test]
    fn a_plain_reader_has_no_consumer() {
        let threads = [T {
            pid: 400,
            tid: 400,
            comm: "cat",
            per_bucket: [900 * MS, 0, 0, 100 * MS],
            read_bytes: 500 << 20,
        }];
        let s = session(&threads, &[(400, 0)], Vec::new());
        let a = analysis::analyze(&s, &Thresholds::default());
        let w = a.wait.as_ref().unwrap();
        assert!(w.consumers.is_empty());
        assert!(w.notes.iter().any(|n| n.contains("no consumer")));
        assert_eq!(a.verdict.rules, "readers");
        assert!(a.verdict.notes.iter().any(|n| n.contains("no consumer")));
    }

    #[test]
    fn the_window_starts_at_the_first_delivery_not_at_a_spawned_workers_start() {
        // A spawned worker imports for 3 s while the trainer sits in a
        // write to its full pipe (and a vfork before): data arrives from
        // 3.5 s on.
        let mut s = dataloader(600, 700);
        let edges = &mut s.waits.as_mut().unwrap().edges;
        for e in edges.iter_mut() {
            if (e.wakee_pid, e.wakee_tid) == TRAINER && e.syscall.as_deref() == Some("poll") {
                e.first_s = 3.5;
            }
        }
        let mut spawn = edge(WORKER, TRAINER, "write", 0, 0);
        spawn.blocked_ns = 3 * S;
        spawn.count = 3;
        spawn.first_s = 0.2;
        spawn.last_s = 3.2;
        spawn.series = vec![(0, S, 1), (1, S, 1), (2, S, 1)];
        let mut vfork = edge(WORKER, TRAINER, "vfork", 0, 0);
        vfork.first_s = 0.1;
        vfork.last_s = 0.1;
        vfork.series = vec![(0, MS, 1)];
        edges.extend([spawn, vfork]);
        let w = analyze(&s, &Thresholds::default()).unwrap();
        let window = w.window.as_ref().unwrap();
        assert_eq!(window.start_s, 3.5);
        assert!(
            window.source.contains("first data delivery"),
            "{}",
            window.source
        );
        assert_eq!(window.buckets, Some((4, 9)));
        // Only the steady state counts: 600 ms of every 1000 waited.
        let au = w.kernel_au_percentage.unwrap();
        assert!((au - 38.0).abs() < 0.5, "{au}");
    }

    #[test]
    fn the_first_batch_wait_is_start_up() {
        // No per-bucket states: the whole-run figures, less the first wait.
        let mut s = dataloader(600, 700);
        s.timeseries = None;
        for e in &mut s.waits.as_mut().unwrap().edges {
            e.series.clear();
            if (e.wakee_pid, e.wakee_tid) == TRAINER && e.syscall.as_deref() == Some("poll") {
                e.first_blocked_ns = 3 * S;
                e.blocked_ns += 3 * S;
            }
        }
        let w = analyze(&s, &Thresholds::default()).unwrap();
        assert_eq!(w.window.as_ref().unwrap().buckets, None);
        assert_eq!(w.consumers[0].data_wait_ns, 6 * S);
    }
}
