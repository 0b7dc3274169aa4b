//! The wake-up graph restricted to a window: each thread's time by state
//! and the edges into it, with what ended each (`classify`), and the
//! per-thread facts read from its stacks (`sites`).
use std::collections::{BTreeMap, BTreeSet};

use storprof_session::{
    load::Session,
    model::{Buckets, ThreadStats, WakeEdge},
};

use super::{
    ThreadId,
    classify::{self, EdgeKind, waker_id},
    sites::{ThreadSites, WaitSite},
};

/// A thread's time over the window, by state (ns).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StateTime {
    pub on_cpu: u64,
    pub runnable: u64,
    pub sleeping: u64,
    pub io: u64,
    pub other: u64,
    /// Share of CPU samples in user space (None: no samples).
    pub user_share: Option<f64>,
}

impl StateTime {
    pub fn total(&self) -> u64 {
        self.on_cpu + self.runnable + self.sleeping + self.io + self.other
    }
}

pub fn whole_run_state(t: &ThreadStats) -> StateTime {
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

/// One edge into a thread, over the window.
#[derive(Clone, Copy, Debug)]
pub struct InEdge<'a> {
    pub edge: &'a WakeEdge,
    pub kind: EdgeKind,
    /// Blocked time these wake-ups ended in the window, ns.
    pub ns: u64,
    pub count: u64,
}

impl InEdge<'_> {
    pub fn waker(&self) -> Option<ThreadId> {
        waker_id(self.edge)
    }
}

/// The graph restricted to a window.
pub struct Graph<'a> {
    pub states: BTreeMap<ThreadId, StateTime>,
    pub comms: BTreeMap<ThreadId, String>,
    /// Edges into each wakee, with their blocked ns in the window.
    pub into: BTreeMap<ThreadId, Vec<InEdge<'a>>>,
    /// Each thread's off-CPU time by wait site (whole recording).
    pub sites: &'a BTreeMap<ThreadId, ThreadSites>,
    /// The edges tell a lock's own wait from a shared futex word
    /// (`WakeEdge::lock_wait`; sessions before: every shared word is one).
    pub lock_wait_known: bool,
}

impl<'a> Graph<'a> {
    pub fn new(
        session: &'a Session,
        sites: &'a BTreeMap<ThreadId, ThreadSites>,
        buckets: Option<(usize, usize)>,
    ) -> Self {
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
        let mut into: BTreeMap<ThreadId, Vec<InEdge>> = BTreeMap::new();
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
                .push(InEdge {
                    edge: e,
                    kind: classify::classify(e),
                    ns,
                    count: n,
                });
        }
        let lock_wait_known = session
            .info
            .features
            .get(storprof_session::model::FEATURE_WAKE_EDGES)
            .is_some_and(|v| v.as_str() >= storprof_session::model::WAKE_EDGES_VERSION);
        Graph {
            states,
            comms,
            into,
            sites,
            lock_wait_known,
        }
    }

    pub fn comm(&self, id: ThreadId) -> String {
        self.comms.get(&id).cloned().unwrap_or_default()
    }

    pub fn total(&self, id: ThreadId) -> u64 {
        self.states.get(&id).map_or(0, StateTime::total)
    }

    pub fn edges_into(&self, id: ThreadId) -> impl Iterator<Item = &InEdge<'a>> {
        self.into.get(&id).into_iter().flatten()
    }

    /// Blocked ns of `id` (count too) over the edges `keep` accepts.
    pub fn blocked_by(&self, id: ThreadId, keep: impl Fn(&InEdge) -> bool) -> (u64, u64) {
        self.edges_into(id)
            .filter(|e| keep(e))
            .fold((0, 0), |(ns, n), e| (ns + e.ns, n + e.count))
    }

    /// Time `id` spent in timed sleeps a timer ended (emulated compute), ns.
    pub fn timer_sleep_ns(&self, id: ThreadId) -> u64 {
        self.blocked_by(id, |e| classify::is_timer_sleep(e.edge)).0
    }

    /// Wake-ups of `to` by `from` in the window: (blocked ns, count).
    pub fn wakes(&self, from: ThreadId, to: ThreadId) -> (u64, u64) {
        self.blocked_by(to, |e| e.waker() == Some(from))
    }

    /// Hand-off wake-ups of `to` by `from` (no lock releases).
    pub fn handoffs(&self, from: ThreadId, to: ThreadId) -> (u64, u64) {
        self.blocked_by(to, |e| {
            e.waker() == Some(from) && e.kind == EdgeKind::Handoff
        })
    }

    /// Threads whose wake-ups of `to` pass `keep`: (waker, wake-ups).
    pub fn feeders_by(
        &self,
        to: ThreadId,
        keep: impl Fn(&InEdge) -> bool,
    ) -> BTreeMap<ThreadId, u64> {
        let mut out = BTreeMap::new();
        for e in self.edges_into(to) {
            if let Some(w) = e.waker()
                && w != to
                && keep(e)
            {
                *out.entry(w).or_insert(0) += e.count;
            }
        }
        out
    }

    /// Threads whose wake-ups feed `to`: (waker, wake-ups).
    pub fn feeders(&self, to: ThreadId) -> BTreeMap<ThreadId, u64> {
        self.feeders_by(to, |_| true)
    }

    /// Like [`Self::feeders`], without lock releases: the hand-offs that
    /// can carry data.
    pub fn handoff_feeders(&self, to: ThreadId) -> BTreeMap<ThreadId, u64> {
        self.feeders_by(to, |e| e.kind == EdgeKind::Handoff)
    }

    /// Whether the lock release `e` (`waker` → `wakee`) is contention: the
    /// wakee waited for a lock (a glibc or PI lock's own wait), or the two
    /// wake each other at shared words (both contend). A word shared only
    /// one way is a condition variable next to a mutex the waker took (an
    /// idle pool woken by its submitter), not contention.
    pub fn is_contention(&self, e: &InEdge, waker: ThreadId, wakee: ThreadId) -> bool {
        // A glibc or PI lock's own wait is one, however starved the waiter.
        // A word shared with the waker is one only between threads that
        // wake each other at it and work once they have it: a pool thread
        // that hardly works waited for work, at a condition variable that
        // shares the granule of the mutex its submitter holds.
        let works = self.states.get(&wakee).is_some_and(|st| {
            (st.on_cpu + st.runnable + st.io) as f64 >= CONTENDER_ACTIVE_SHARE * st.total() as f64
        });
        // A thread whose stacks wait almost only in a pool's idle loop (a
        // pyarrow or Eigen worker at its condition variable) waits for
        // work, however much a crowded CPU queues it when it gets some.
        let idle_pool = self
            .sites_of(wakee)
            .is_some_and(|s| s.share(WaitSite::PoolIdle) >= IDLE_POOL_SITE_SHARE);
        let works = works && !idle_pool;
        e.kind == EdgeKind::Lock
            && (e.edge.lock_wait
                || works
                    && (!self.lock_wait_known
                        || self
                            .edges_into(waker)
                            .any(|b| b.kind == EdgeKind::Lock && b.waker() == Some(wakee))))
    }

    /// The wait sites of `id` (from the whole recording's stacks).
    pub fn sites_of(&self, id: ThreadId) -> Option<&ThreadSites> {
        self.sites.get(&id)
    }

    /// Of `id`'s lock waits and timeouts (futex waits a lock release or a
    /// timer ended), the share that was the GIL: its stacks' time in
    /// `take_gil` over that time, over the whole recording. 0 without
    /// stacks, so sessions without Python frames keep their locks.
    pub fn gil_share(&self, whole: &Graph<'_>, id: ThreadId) -> f64 {
        let Some(gil) = self.sites_of(id).map(|s| s.ns(WaitSite::Gil)) else {
            return 0.0;
        };
        if gil == 0 {
            return 0.0;
        }
        let (locks, _) = whole.blocked_by(id, |e| {
            e.kind == EdgeKind::Lock
                || e.edge.syscall.as_deref() == Some("futex") && classify::is_timeout(e.edge)
        });
        if locks == 0 {
            return 0.0;
        }
        (gil as f64 / locks as f64).min(1.0)
    }

    /// Every thread that `from` woke with a hand-off, and those it woke.
    pub fn handoff_targets(&self, from: ThreadId) -> BTreeSet<ThreadId> {
        self.into
            .iter()
            .filter(|(to, edges)| {
                **to != from
                    && edges
                        .iter()
                        .any(|e| e.waker() == Some(from) && e.kind == EdgeKind::Handoff)
            })
            .map(|(to, _)| *to)
            .collect()
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
pub fn window_accounted_ns(whole: &Graph<'_>, g: &Graph<'_>, id: ThreadId, own: StateTime) -> u64 {
    let edge_ns = |graph: &Graph<'_>| -> u64 { graph.edges_into(id).map(|e| e.ns).sum() };
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

/// The share of its time a thread waiting at a lock must spend working
/// (on a CPU, queued for one, or in D-state I/O) for the lock to be
/// contention: the contenders of a mutex held 1 ms at a time by 8 threads
/// work an eighth of their time; an idle pool thread, around 1%.
const CONTENDER_ACTIVE_SHARE: f64 = 0.03;

/// The share of a thread's off-CPU stack time in a pool's idle wait from
/// which its futex waits are waits for work, not for a lock: the idle
/// pyarrow workers of a recorded decode pool waited there 100% of it.
const IDLE_POOL_SITE_SHARE: f64 = 0.8;

pub fn is_main_thread(id: ThreadId) -> bool {
    id.0 == id.1
}
