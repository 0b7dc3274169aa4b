//! The critical path: each data wait of the consumer split over the state
//! of the thread that ended it, followed recursively through that
//! thread's own waits (wPerf's cascaded redistribution); and, without a
//! consumer, the readers' own time split the same way.
use std::collections::{BTreeMap, BTreeSet};

use super::{
    PathKind, ThreadId,
    classify::{self, EdgeKind},
    graph::{Graph, InEdge},
};
use crate::Thresholds;

/// Accumulates the critical path.
#[derive(Default)]
pub struct PathAcc {
    pub by_kind: BTreeMap<PathKind, (f64, BTreeMap<ThreadId, f64>)>,
    pub cpu_threads: BTreeMap<ThreadId, f64>,
}

impl PathAcc {
    pub fn add(&mut self, kind: PathKind, id: ThreadId, ns: f64) {
        if ns <= 0.0 {
            return;
        }
        let e = self.by_kind.entry(kind).or_default();
        e.0 += ns;
        *e.1.entry(id).or_insert(0.0) += ns;
        if matches!(kind, PathKind::CpuUser | PathKind::CpuKernel) {
            *self.cpu_threads.entry(id).or_insert(0.0) += ns;
        }
    }

    pub fn total(&self) -> f64 {
        self.by_kind.values().map(|(ns, _)| ns).sum()
    }
}

/// Threads of a process whose lock waits among themselves are not
/// contention: loaders of one process linked by contended-lock wake-ups
/// into a group where one reader does most of the group's CPU work and the
/// others read nothing, passing its results on (a DataLoader worker's main
/// thread and its queue feeder taking turns at the GIL). Such a group
/// would gain little from losing the lock, since its limit is the reader's
/// CPU. Readers that starve each other at an unfair lock stay contention
/// however their CPU is split, and so do waits between processes (a
/// shared-memory lock of a queue).
pub fn one_reader_lock_groups(
    g: &Graph,
    loaders: &BTreeSet<ThreadId>,
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
        for e in edges {
            let Some(waker) = e.waker().filter(|w| {
                w.0 == wakee.0
                    && loaders.contains(w)
                    && loaders.contains(&wakee)
                    && g.is_contention(e, *w, wakee)
            }) else {
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
pub struct Walk<'g, 'a> {
    pub g: &'g Graph<'a>,
    /// The whole recording's graph (for the GIL shares).
    pub whole: &'g Graph<'a>,
    pub consumers: &'g BTreeSet<ThreadId>,
    pub loaders: &'g BTreeSet<ThreadId>,
    /// From [`one_reader_lock_groups`].
    pub one_reader_groups: &'g BTreeSet<ThreadId>,
    pub max_depth: usize,
}

enum Part {
    Leaf(PathKind),
    Thread(ThreadId),
}

/// The leaf an edge that no traced thread's work stands behind ends in.
fn leaf_of(kind: EdgeKind) -> PathKind {
    match kind {
        EdgeKind::Storage => PathKind::BlockIo,
        EdgeKind::Network => PathKind::Network,
        EdgeKind::Timer => PathKind::Timer,
        EdgeKind::OtherProcess => PathKind::OtherProcess,
        EdgeKind::Interrupt => PathKind::Interrupt,
        EdgeKind::Lock => PathKind::Lock,
        EdgeKind::Handoff => PathKind::Unattributed,
    }
}

impl Walk<'_, '_> {
    /// A thread's sleeping edges as parts; the GIL's share of its lock
    /// waits and timeouts is the GIL. Returns the parts, the sleeping time
    /// they cover and the time spent waiting for the consumer.
    fn sleep_parts(&self, id: ThreadId, path: &[ThreadId]) -> (Vec<(f64, Part)>, f64, f64) {
        let gil = self.g.gil_share(self.whole, id);
        let mut parts = Vec::new();
        let mut covered = 0.0;
        let mut to_consumer = 0.0;
        for e in self.g.edges_into(id) {
            if e.edge.wakee_state != "sleeping" {
                continue;
            }
            let ns = e.ns as f64;
            covered += ns;
            let gil_ns = if gil > 0.0 && is_gil_candidate(e) {
                ns * gil
            } else {
                0.0
            };
            if gil_ns > 0.0 {
                parts.push((gil_ns, Part::Leaf(PathKind::Gil)));
            }
            let rest = ns - gil_ns;
            let part = match e.waker() {
                Some(w) if self.consumers.contains(&w) => {
                    // Waiting for the consumer (back-pressure, the next
                    // index): not on the path while the consumer waits.
                    to_consumer += rest;
                    continue;
                }
                Some(w) if path.contains(&w) || w == id => continue,
                Some(w)
                    if self.loaders.contains(&w)
                        && self.loaders.contains(&id)
                        && self.g.is_contention(e, w, id)
                        && !(w.0 == id.0 && self.one_reader_groups.contains(&w)) =>
                {
                    Part::Leaf(PathKind::Lock)
                }
                Some(w) => Part::Thread(w),
                None => Part::Leaf(leaf_of(e.kind)),
            };
            parts.push((rest, part));
        }
        (parts, covered, to_consumer)
    }
}

/// Lock releases and timeouts of futex waits: where the GIL's waits end
/// (the holder's signal, or the switch interval's timed wait).
fn is_gil_candidate(e: &InEdge) -> bool {
    e.kind == EdgeKind::Lock
        || e.edge.syscall.as_deref() == Some("futex") && classify::is_timeout(e.edge)
}

/// Splits `amount` of time that the path waited on `id` over `id`'s states
/// and, for its waits, over whoever ended them, recursively.
pub fn attribute(
    walk: &Walk,
    id: ThreadId,
    amount: f64,
    path: &mut Vec<ThreadId>,
    acc: &mut PathAcc,
) {
    let Some(st) = walk.g.states.get(&id).copied() else {
        acc.add(PathKind::Unattributed, id, amount);
        return;
    };
    if path.len() >= walk.max_depth || amount < 1.0 {
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
    let (sleeps, covered, to_consumer) = walk.sleep_parts(id, path);
    parts.extend(sleeps);
    let unattributed = (st.sleeping as f64 - covered).max(0.0);
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

/// Without a consumer: the readers' own time in the window, split as the
/// critical path splits a wait, with what they waited on each other for
/// left out (a pool thread idle until its reader hands it work, a reader
/// waiting for its pool's result: the work is counted where it was done),
/// and so is waiting for work from outside (a parent handing out tasks).
/// What is left is what they did and what they waited on: CPU, a CPU,
/// storage, the network, locks, the GIL, timers, other processes.
pub fn reader_time(walk: &Walk, side: &BTreeSet<ThreadId>) -> PathAcc {
    let mut acc = PathAcc::default();
    for &id in side {
        let Some(st) = walk.g.states.get(&id).copied() else {
            continue;
        };
        let user = st.user_share.unwrap_or(1.0);
        acc.add(PathKind::CpuUser, id, st.on_cpu as f64 * user);
        acc.add(PathKind::CpuKernel, id, st.on_cpu as f64 * (1.0 - user));
        acc.add(PathKind::Runnable, id, st.runnable as f64);
        acc.add(PathKind::BlockIo, id, st.io as f64);
        let gil = walk.g.gil_share(walk.whole, id);
        for e in walk.g.edges_into(id) {
            if e.edge.wakee_state != "sleeping" {
                continue;
            }
            let ns = e.ns as f64;
            let gil_ns = if gil > 0.0 && is_gil_candidate(e) {
                ns * gil
            } else {
                0.0
            };
            acc.add(PathKind::Gil, id, gil_ns);
            let rest = ns - gil_ns;
            match (e.kind, e.waker()) {
                (EdgeKind::Handoff, _) => {}
                (EdgeKind::Lock, Some(w))
                    if !side.contains(&w) || !walk.g.is_contention(e, w, id) => {}
                (kind, _) => acc.add(leaf_of(kind), id, rest),
            }
        }
    }
    acc
}
