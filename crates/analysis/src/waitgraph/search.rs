//! Finding the consumer(s): by the stacks of threads waiting to take a
//! batch, else by how threads exchange with the data side in both
//! directions (deliveries into them, and the side's waits on them), else by
//! emulated compute (timed sleeps) with a data exchange; never a status
//! loop nor a thread that drives its own pool on a CPU.
use std::collections::{BTreeMap, BTreeSet};

use super::{
    Found, ThreadId,
    classify::EdgeKind,
    graph::{Graph, StateTime, is_main_thread},
    own_time::OwnTime,
    sites::WaitSite,
};
use crate::Thresholds;

/// How one thread exchanges with the data side over the whole recording.
#[derive(Clone, Copy, Debug, Default)]
pub struct Exchange {
    /// Hand-offs from the side into it (its data deliveries): count.
    pub fed: u64,
    /// Its blocked time those ended, ns.
    pub fed_ns: u64,
    /// ... through relay threads of its process (pin memory).
    pub via_relays: u64,
    /// Hand-offs from it (or from threads of its process it wakes that
    /// wake the side: queue feeders) into the side: count.
    pub sends: u64,
    /// The side's blocked time those hand-offs ended, ns: the side waited
    /// on it (back-pressure, or the next piece of work).
    pub side_waited_ns: u64,
}

impl Exchange {
    pub fn delivered(&self) -> u64 {
        self.fed + self.via_relays
    }
}

/// The exchanges of every thread outside `side` with it.
fn exchanges(g: &Graph, side: &BTreeSet<ThreadId>) -> BTreeMap<ThreadId, Exchange> {
    g.states
        .keys()
        .filter(|id| !side.contains(id))
        .map(|&id| (id, exchange_of(g, id, side)))
        .collect()
}

/// Hand-offs from the side into `to` (count).
fn fed_by(g: &Graph, to: ThreadId, side: &BTreeSet<ThreadId>) -> u64 {
    g.handoff_feeders(to)
        .iter()
        .filter(|(w, _)| side.contains(w))
        .map(|(_, n)| n)
        .sum()
}

/// How `id` (outside `side`) exchanges with `side`. Relays: threads of its
/// process fed by the side; what they pass on to it counts as fed through
/// them, up to what they were fed (a launcher's I/O thread woken twice by
/// its child is no pipeline). Senders: threads of its process that wake
/// the side (queue feeders); what it hands them counts as sent.
fn exchange_of(g: &Graph, id: ThreadId, side: &BTreeSet<ThreadId>) -> Exchange {
    let mut via_relays = 0;
    let mut sends = 0;
    let mut side_waited_ns = 0;
    for &s in side {
        let (ns, n) = g.handoffs(id, s);
        sends += n;
        side_waited_ns += ns;
    }
    for o in g.states.keys().copied() {
        if o == id || o.0 != id.0 || side.contains(&o) {
            continue;
        }
        let fed = fed_by(g, o, side);
        if fed > 0 {
            // A relay passes data on (pin memory); a thread busy on a CPU
            // that wakes `id` drives it (hands its pool work).
            let busy = g
                .states
                .get(&o)
                .is_some_and(|st| (st.on_cpu + st.runnable) as f64 >= 0.5 * st.total() as f64);
            if !busy {
                via_relays += g.handoffs(o, id).1.min(fed);
            }
            continue;
        }
        // A pure sender (not fed by the side): what it hands the side
        // counts in proportion to what `id` handed it.
        let (_, n) = g.handoffs(id, o);
        let (out_ns, out_n) = side
            .iter()
            .map(|&s| g.handoffs(o, s))
            .fold((0, 0), |(a, b), (ns, n)| (a + ns, b + n));
        if n > 0 && out_n > 0 {
            sends += n.min(out_n);
            side_waited_ns += (out_ns as f64 * (n as f64 / out_n as f64).min(1.0)) as u64;
        }
    }
    let fed_ns = g
        .edges_into(id)
        .filter(|e| e.kind == EdgeKind::Handoff && e.waker().is_some_and(|w| side.contains(&w)))
        .map(|e| e.ns)
        .sum();
    Exchange {
        fed: fed_by(g, id, side),
        fed_ns,
        via_relays,
        sends,
        side_waited_ns,
    }
}

/// The side waited on a thread for at least this share of its life (or a
/// second) for the waits to be back-pressure rather than a status loop's
/// odd wake-up.
const BACKPRESSURE_SHARE: f64 = 0.02;

/// Whether `ex` is a pipeline's exchange: data delivered, or the side
/// held back by it for a while.
fn exchanges_data(ex: &Exchange, life: u64, t: &Thresholds) -> bool {
    let held_back = ex.sends >= t.consumer_min_wakes
        && (ex.side_waited_ns as f64 >= BACKPRESSURE_SHARE * life as f64
            || ex.side_waited_ns >= 1_000_000_000);
    ex.delivered() >= t.consumer_min_wakes || held_back
}

fn describe(ex: &Exchange, t: &Thresholds) -> String {
    if ex.delivered() >= t.consumer_min_wakes {
        if ex.via_relays > ex.fed {
            format!(
                "fed {} times through a relay thread of its process by the data side",
                ex.via_relays
            )
        } else {
            format!(
                "woken {} times by the data side (its queue or pipe)",
                ex.fed
            )
        }
    } else {
        format!(
            "sends work to the data side {} times, which waited on it {:.1} s, and hardly \
             waits for it",
            ex.sends,
            ex.side_waited_ns as f64 / 1e9
        )
    }
}

/// A thread that drives its own helper pool on a CPU: busy (on CPU or
/// queued for one) most of its life, fed only by threads of its process
/// that it wakes back (fork-join; most of its feeds), and never waiting to
/// take a batch. It
/// is a loader (pyarrow's pool decoding for a DataLoader worker's main
/// thread), not a consumer.
fn drives_own_pool(g: &Graph, id: ThreadId, st: &StateTime) -> bool {
    let busy = (st.on_cpu + st.runnable) as f64 >= 0.5 * st.total() as f64;
    let fetches = g
        .sites_of(id)
        .is_some_and(|s| s.share(WaitSite::Fetch) + s.share(WaitSite::Receive) >= 0.1);
    let feeders = g.handoff_feeders(id);
    let total: u64 = feeders.values().sum();
    let own: u64 = feeders
        .iter()
        .filter(|(w, n)| w.0 == id.0 && g.wakes(id, **w).1 as f64 >= 0.5 * **n as f64)
        .map(|(_, n)| n)
        .sum();
    let own_pool = total > 0 && own as f64 >= 0.7 * total as f64;
    busy && own_pool && !fetches
}

/// Consumers found by their stacks: threads outside `exclude` that spent
/// at least a quarter of their off-CPU time taking the next batch or
/// receiving (more than in a pipeline's or pool's own loop), and that
/// exchange with the threads that feed them. Scored by that time, taking
/// a framework's batch API at twice a generic receive.
pub fn consumers_by_stacks(g: &Graph, t: &Thresholds) -> Vec<(ThreadId, String, WaitSite)> {
    let mut scored: Vec<(ThreadId, f64, String, WaitSite)> = Vec::new();
    for (&id, sites) in g.sites.iter() {
        let total = sites.total();
        if total == 0 || !g.states.contains_key(&id) {
            continue;
        }
        let fetch = sites.ns(WaitSite::Fetch);
        let receive = sites.ns(WaitSite::Receive);
        let loops = sites.ns(WaitSite::PipelineStage) + sites.ns(WaitSite::PoolIdle);
        if ((fetch + receive) as f64) < 0.25 * total as f64 || fetch + receive <= loops {
            continue;
        }
        // It must be fed: a queue get that nobody answers is no pipeline.
        let fed: u64 = g.handoff_feeders(id).values().sum();
        if fed < t.consumer_min_wakes {
            continue;
        }
        let (site, ns) = if fetch >= receive {
            (WaitSite::Fetch, fetch)
        } else {
            (WaitSite::Receive, receive)
        };
        let score = (2 * fetch + receive) as f64;
        scored.push((
            id,
            score,
            format!(
                "blocked in {} {:.0}% of its off-CPU time ({:.1} s), woken {fed} times by the \
                 threads that feed it",
                site.as_str(),
                ns as f64 / total as f64 * 100.0,
                ns as f64 / 1e9
            ),
            site,
        ));
    }
    let best = scored.iter().map(|s| s.1).fold(0.0, f64::max);
    scored
        .into_iter()
        .filter(|s| s.1 >= 0.5 * best)
        .map(|(id, _, why, site)| (id, why, site))
        .collect()
}

/// Consumers that take their batches on their own CPU (a DataLoader with
/// no workers, PyTorch's default): threads that spent at least
/// `min_decision_thread_s` and a tenth of their samples outside imports
/// inside a loader's batch API, which they never block in (else
/// [`consumers_by_stacks`] finds them). The one with the most such time,
/// and any with at least half of it.
pub fn consumers_by_own_fetch(
    own_time: &BTreeMap<ThreadId, OwnTime>,
    freq_hz: u64,
    t: &Thresholds,
) -> Vec<Found> {
    let hz = freq_hz.max(1) as f64;
    let found: Vec<(ThreadId, u64, f64)> = own_time
        .iter()
        .filter_map(|(&id, cpu)| {
            let outside_imports = cpu.all.saturating_sub(cpu.startup);
            let share = cpu.fetch as f64 / outside_imports.max(1) as f64;
            (cpu.fetch as f64 / hz >= t.min_decision_thread_s && share >= 0.1)
                .then_some((id, cpu.fetch, share))
        })
        .collect();
    let best = found.iter().map(|f| f.1).max().unwrap_or(0);
    found
        .into_iter()
        .filter(|f| 2 * f.1 >= best)
        .map(|(id, fetch, share)| {
            (
                id,
                format!(
                    "takes its batches on its own CPU: {:.1} s inside the loader's batch API, \
                     {:.0}% of its time on a CPU after start-up",
                    fetch as f64 / hz,
                    share * 100.0
                ),
            )
        })
        .collect()
}

/// Finds the consumers from the graph. With worker processes (a
/// DataLoader's), the consumer is the thread of their parent process (the
/// trainer) that they feed or that holds them back: its main thread when
/// that exchanges with them. Without, threads outside the data side that
/// it feeds or waits on, scored by how much they exchange with it, main
/// threads and threads that sleep between batches (emulated compute)
/// first: a decode pool's thread is neither.
pub fn consumers_by_graph(
    g: &Graph,
    side: &BTreeSet<ThreadId>,
    trainers: &BTreeSet<u32>,
    t: &Thresholds,
) -> Vec<Found> {
    let ex = exchanges(g, side);
    let life = |id: ThreadId| g.total(id);
    let candidates: Vec<(ThreadId, Exchange)> = ex
        .iter()
        .filter(|(id, e)| exchanges_data(e, life(**id), t))
        .filter(|(id, _)| {
            g.states
                .get(id)
                .is_none_or(|st| !drives_own_pool(g, **id, st))
        })
        .map(|(id, e)| (*id, *e))
        .collect();
    if !trainers.is_empty() {
        let mut out = Vec::new();
        for &trainer in trainers {
            let threads: Vec<&(ThreadId, Exchange)> = candidates
                .iter()
                .filter(|(id, _)| id.0 == trainer)
                // A trainer hands its workers work (the next indices); a
                // launcher (mpirun's orted, a shell) only reads their output.
                .filter(|(_, e)| e.sends >= t.consumer_min_wakes)
                .collect();
            let main = threads.iter().find(|(id, _)| is_main_thread(*id));
            let pick = main.or_else(|| threads.iter().max_by_key(|(_, e)| e.delivered() + e.sends));
            if let Some(&&(id, e)) = pick {
                out.push((
                    id,
                    format!(
                        "{} of the process that started the workers; {}",
                        if is_main_thread(id) {
                            "main thread"
                        } else {
                            "thread"
                        },
                        describe(&e, t)
                    ),
                ));
            }
        }
        // A launcher (sh, mpirun's orted) as the only trainer feeds
        // nothing: none here. The caller then looks for the consumer among
        // the readers' own threads.
        return out;
    }
    let timer_sleep =
        |id: ThreadId| -> f64 { g.timer_sleep_ns(id) as f64 / life(id).max(1) as f64 };
    // Scored by the time it and the side waited on each other: a pool
    // thread the side hands work to now and then exchanges wake-ups, the
    // consumer exchanges waiting.
    let scored: Vec<(ThreadId, Exchange, f64)> = candidates
        .iter()
        .map(|&(id, e)| {
            let main = if is_main_thread(id) { 2.0 } else { 1.0 };
            let sleeps = if timer_sleep(id) >= 0.05 { 2.0 } else { 1.0 };
            (id, e, (e.fed_ns + e.side_waited_ns) as f64 * main * sleeps)
        })
        .collect();
    let best = scored.iter().map(|s| s.2).fold(0.0, f64::max);
    scored
        .into_iter()
        .filter(|s| s.2 > 0.0 && s.2 >= 0.5 * best)
        .map(|(id, e, _)| (id, describe(&e, t)))
        .collect()
}

/// Consumers found by their emulated compute: threads asleep in timed
/// sleeps at least `consumer_sleep_share` of their life that exchange data
/// with the side (the side waits on them, or they are fed by it), readers
/// among them (a Python main thread reads its imports, then computes); a
/// status loop that wakes now and then exchanges nothing. When the data
/// side is not known from input (mapped files, tiny runs), the threads
/// they exchange wake-ups with are the side. Returns the consumers and the
/// side without them.
pub fn sleeping_consumers(
    g: &Graph,
    side: &BTreeSet<ThreadId>,
    t: &Thresholds,
) -> Option<(Vec<Found>, BTreeSet<ThreadId>)> {
    let mut consumers = Vec::new();
    let mut new_side = side.clone();
    for (&id, st) in &g.states {
        let share = g.timer_sleep_ns(id) as f64 / st.total().max(1) as f64;
        if share < t.consumer_sleep_share {
            continue;
        }
        if !side.is_empty() {
            let others: BTreeSet<ThreadId> = side.iter().copied().filter(|s| *s != id).collect();
            let ex = exchange_of(g, id, &others);
            if !exchanges_data(&ex, st.total(), t) || drives_own_pool(g, id, st) {
                continue;
            }
            consumers.push((
                id,
                format!(
                    "asleep in timed sleeps (emulated compute) {:.0}% of its life; {}",
                    share * 100.0,
                    describe(&ex, t)
                ),
            ));
            continue;
        }
        let exchanged_with = |o: ThreadId| g.wakes(id, o).1 + g.wakes(o, id).1;
        let partners: Vec<ThreadId> = g
            .states
            .keys()
            .filter(|&&o| o != id && exchanged_with(o) >= 2)
            .copied()
            .collect();
        let exchanged: u64 = partners.iter().map(|&o| exchanged_with(o)).sum();
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
        new_side.extend(partners);
    }
    let ids: BTreeSet<ThreadId> = consumers.iter().map(|(id, _)| *id).collect();
    new_side.retain(|id| !ids.contains(id));
    (!consumers.is_empty()).then_some((consumers, new_side))
}

/// Hand-offs into `id` from threads of `set` other than itself (count).
pub fn fed_by_others(g: &Graph, id: ThreadId, set: &BTreeSet<ThreadId>) -> u64 {
    let others: BTreeSet<ThreadId> = set.iter().copied().filter(|s| *s != id).collect();
    fed_by(g, id, &others)
}
