//! Who reads, who consumes: the data side of a recording and its
//! consumer(s), from the data that came in (bytes and I/O waits), the
//! process tree, what each thread waited in (its stacks) and both
//! directions of the data flow (deliveries into the consumer, and the
//! back-pressure of loaders waiting until it takes).
//!
//! ```text
//! readers:   threads that took data in (read/recv bytes, grouped by name
//!            so that a new worker each epoch counts with the others, and
//!            inside the span the data was read in: imports are not data;
//!            waits a block or network completion ended)
//! side:      readers, every thread of their worker processes, and the
//!            pipeline's stage threads of their processes
//! consumer:  1. threads whose blocked time is in "take the next batch"
//!               frames (a DataLoader's next, tf.data's GetNext, a pool's
//!               result iterator, a queue get) and that exchange with the
//!               side;
//!            2. else the trainer (readers' parent process) thread the
//!               side feeds or waits on;
//!            3. else threads fed by the side, or that the side waits on;
//!            never a status loop (nothing exchanged but a few wake-ups)
//!            nor a thread driving its own helper pool on a CPU
//! ```
use std::collections::{BTreeMap, BTreeSet};

use crate::session::{load::Session, model::ThreadStats};

use super::{
    Found, Role, RoleRow, ThreadId,
    classify::EdgeKind,
    graph::{Graph, StateTime, is_main_thread, whole_run_state},
    sites::{self, WaitSite},
};
use crate::analysis::Thresholds;

/// What [`data_side`] found.
pub struct DataSide {
    /// Readers, the threads of their worker processes and their
    /// processes' pipeline stage threads.
    pub side: BTreeSet<ThreadId>,
    pub readers: BTreeSet<ThreadId>,
    /// Parents of the readers' processes.
    pub trainers: BTreeSet<u32>,
    /// How the readers were chosen, in words.
    pub how: String,
}

/// Processes that descend from another traced process, by pid → parent.
pub fn parents(session: &Session) -> BTreeMap<u32, u32> {
    let traced: BTreeSet<u32> = session.info.processes.iter().map(|p| p.pid).collect();
    session
        .info
        .processes
        .iter()
        .filter(|p| p.ppid != 0 && traced.contains(&p.ppid))
        .map(|p| (p.pid, p.ppid))
        .collect()
}

/// Bytes a thread took in through syscalls: reads and socket receives.
pub fn input_bytes(t: &ThreadStats) -> u64 {
    let recv: u64 = t
        .syscalls
        .iter()
        .filter(|s| matches!(s.name.as_str(), "recvfrom" | "recvmsg"))
        .map(|s| s.bytes)
        .sum();
    t.read_bytes.saturating_add(recv)
}

/// Bytes all threads read in the buckets `id` lived in (None: no per-bucket
/// reads to tell).
fn bytes_during_life(session: &Session, id: ThreadId) -> Option<u64> {
    let ts = session.timeseries.as_ref()?;
    let me = ts.threads.iter().find(|s| (s.pid, s.tid) == id)?;
    let (b0, b1) = (me.first_bucket as usize, me.end_bucket());
    Some(ts.threads.iter().map(|s| s.read().sum(b0, b1)).sum())
}

/// Readers by the bytes they read or received: threads that took in at
/// least `reader_read_fraction` of the bytes all threads took in while
/// they lived (the whole recording for a thread that lived through it;
/// one epoch's for the read threads or worker processes a job starts anew
/// each epoch), less what their stacks show were imports (a Python main
/// thread loading TensorFlow reads more than its data reader).
fn readers_by_bytes(session: &Session, t: &Thresholds) -> BTreeSet<ThreadId> {
    let sample_ns = 1_000_000_000 / session.info.freq_hz.max(1);
    let origins = sites::read_origins(&session.offcpu_threads, &session.oncpu_threads, sample_ns);
    let total: u64 = session.threads.iter().map(input_bytes).sum();
    if total < t.reader_min_read_bytes {
        return BTreeSet::new();
    }
    let candidates: BTreeSet<ThreadId> = session
        .threads
        .iter()
        .filter(|th| {
            // What its stacks say were imports is no data (a spawned
            // DataLoader worker imports torch before it reads its files).
            let data_share = origins
                .get(&(th.pid, th.tid))
                .map_or(1.0, sites::ReadOrigins::data_share);
            let own = input_bytes(th) as f64 * data_share;
            let during = bytes_during_life(session, (th.pid, th.tid))
                .filter(|&b| b > 0)
                .unwrap_or(total)
                .min(total);
            own > 0.0 && own >= t.reader_read_fraction * during as f64
        })
        .map(|th| (th.pid, th.tid))
        .collect();
    without_start_up_readers(session, candidates)
}

/// Readers less those that read (nearly) only before any other began (or
/// in the second it began): a
/// Python main thread importing TensorFlow or PyTorch before its
/// pipeline's readers start, whose stacks had too few samples to show it.
fn without_start_up_readers(session: &Session, readers: BTreeSet<ThreadId>) -> BTreeSet<ThreadId> {
    let Some(ts) = session.timeseries.as_ref() else {
        return readers;
    };
    let series = |id: &ThreadId| ts.threads.iter().find(|s| (s.pid, s.tid) == *id);
    let first_read = |id: &ThreadId| series(id).and_then(|s| s.read().first_nonzero());
    readers
        .iter()
        .copied()
        .filter(|id| {
            let Some(others_start) = readers
                .iter()
                .filter(|o| *o != id)
                .filter_map(first_read)
                .min()
            else {
                return true;
            };
            let Some(s) = series(id) else { return true };
            let total = s.read().total();
            // The bucket the others start in is shared: counted as before.
            let before = s.read().sum(0, others_start + 1);
            total == 0 || (before as f64) < START_UP_READ_SHARE * total as f64
        })
        .collect()
}

/// The share of a reader's bytes read before every other reader began
/// from which they were its start-up, not data.
const START_UP_READ_SHARE: f64 = 0.8;

/// Readers by their waits: threads that waited for a block or network
/// completion (io_uring, AIO, mapped files, sockets) at least a tenth of
/// their life, and 100 ms in all; network waits only for a thread that
/// received data too (an MPI daemon's control messages are not data).
fn readers_by_input_waits(session: &Session, whole: &Graph, t: &Thresholds) -> BTreeSet<ThreadId> {
    session
        .threads
        .iter()
        .filter(|th| {
            let id = (th.pid, th.tid);
            let received = input_bytes(th) >= t.reader_min_read_bytes;
            let (ns, _) = whole.blocked_by(id, |e| {
                e.kind == EdgeKind::Storage || e.kind == EdgeKind::Network && received
            });
            ns >= 100_000_000 && ns as f64 >= 0.1 * whole.total(id) as f64
        })
        .map(|th| (th.pid, th.tid))
        .collect()
}

/// The readers: threads that took data in, by bytes (read or received)
/// or by their waits for storage or network completions; without either,
/// the busy threads. With how they were chosen, in words.
pub fn readers(session: &Session, whole: &Graph, t: &Thresholds) -> (BTreeSet<ThreadId>, String) {
    let mut readers = readers_by_bytes(session, t);
    let mut how = format!(
        "read or received at least {:.0}% of the bytes read while they lived",
        t.reader_read_fraction * 100.0
    );
    let by_waits = readers_by_input_waits(session, whole, t);
    if !by_waits.is_empty() {
        if readers.is_empty() {
            how = "waited for storage or the network (completions ended their waits)".into();
        }
        readers.extend(by_waits);
    }
    if readers.is_empty() {
        // No significant input (mapped files, memory): the busy threads,
        // and those that contend for a lock with them.
        readers.extend(
            session
                .threads
                .iter()
                .filter(|th| {
                    let id = (th.pid, th.tid);
                    let life = whole_run_state(th).total() as f64;
                    let (locks, _) = whole.blocked_by(id, |e| e.kind == EdgeKind::Lock);
                    life > 0.0
                        && ((th.on_cpu_ns + th.off_cpu_ns.uninterruptible) as f64 / life
                            >= t.busy_thread_share
                            || (th.on_cpu_ns + th.off_cpu_ns.runnable + locks) as f64 / life
                                >= t.busy_thread_share
                                && locks > th.on_cpu_ns)
                })
                .map(|th| (th.pid, th.tid)),
        );
        how = format!(
            "on CPU, in D state or contending for a lock at least {:.0}% of their life (no \
             significant input)",
            t.busy_thread_share * 100.0
        );
    }
    (readers, how)
}

/// The data side of `readers`: they, every thread of a worker process (a
/// traced process whose parent is traced) that holds a reader, and the
/// pipeline stage threads of the readers' processes; and the trainers, the
/// parents of those worker processes.
pub fn data_side(
    session: &Session,
    whole: &Graph,
    readers: BTreeSet<ThreadId>,
    how: String,
) -> DataSide {
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
    // A pipeline's own stage threads (tf.data's prefetch and map runners)
    // in a process that reads: they carry the data to the consumer.
    let reader_pids: BTreeSet<u32> = side.iter().map(|id| id.0).collect();
    side.extend(
        whole
            .sites
            .iter()
            .filter(|(id, s)| reader_pids.contains(&id.0) && s.leads(WaitSite::PipelineStage))
            .map(|(id, _)| *id),
    );
    DataSide {
        side,
        readers,
        trainers,
        how,
    }
}

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

/// Every thread's role: the consumers; loaders (the side threads that feed
/// a consumer, directly or through relays, those upstream of them in their
/// process, the side threads a consumer holds back, and readers that
/// exchange with loaders); helpers (what loaders wait on); idle (the
/// rest). Returns the roles and the loaders.
pub fn assign(
    g: &Graph,
    window_g: &Graph,
    consumers: &[Found],
    side: &BTreeSet<ThreadId>,
    relays: &BTreeSet<ThreadId>,
    readers: &BTreeSet<ThreadId>,
    t: &Thresholds,
) -> (Vec<RoleRow>, BTreeSet<ThreadId>) {
    let consumer_ids: BTreeSet<ThreadId> = consumers.iter().map(|(id, _)| *id).collect();
    let mut roles: BTreeMap<ThreadId, (Role, String)> = BTreeMap::new();
    for (id, why) in consumers {
        roles.insert(*id, (Role::Consumer, why.clone()));
    }
    let mut loaders: BTreeSet<ThreadId> = BTreeSet::new();
    for &c in &consumer_ids {
        for w in g.feeders(c).keys() {
            if side.contains(w) || relays.contains(w) {
                loaders.insert(*w);
            }
        }
    }
    // Upstream of the direct feeders, on the data side: a worker's main
    // thread waking its queue feeder thread.
    let direct: Vec<ThreadId> = loaders.iter().copied().collect();
    for d in direct {
        for w in g.feeders(d).keys() {
            if side.contains(w) && !consumer_ids.contains(w) && w.0 == d.0 {
                loaders.insert(*w);
            }
        }
    }
    // The side threads that wait for a consumer to take (back-pressure).
    for &c in &consumer_ids {
        loaders.extend(
            g.handoff_targets(c)
                .into_iter()
                .filter(|s| side.contains(s)),
        );
    }
    // Readers are loaders too when they are on the data side.
    for &id in side.iter().filter(|id| readers.contains(id)) {
        if g.feeders(id).keys().any(|w| loaders.contains(w))
            || loaders.iter().any(|&l| g.wakes(id, l).1 > 0)
        {
            loaders.insert(id);
        }
    }
    for &l in &loaders {
        roles.entry(l).or_insert((
            Role::Loader,
            if consumer_ids.iter().any(|&c| g.wakes(l, c).1 > 0) {
                "wakes the consumer (delivers data)".to_string()
            } else if consumer_ids.iter().any(|&c| g.wakes(c, l).1 > 0) {
                "waits for the consumer to take (back-pressure)".to_string()
            } else {
                "wakes a thread that delivers data".to_string()
            },
        ));
    }
    for &l in &loaders {
        for (w, _) in g.feeders(l) {
            if roles.contains_key(&w) {
                continue;
            }
            let (ns, _) = g.wakes(w, l);
            let life = g.total(l).max(1);
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
    let mut rows: Vec<RoleRow> = window_g
        .states
        .iter()
        .map(|(&id, st)| {
            let (role, reason) = roles.get(&id).cloned().unwrap_or_else(|| {
                (
                    Role::Idle,
                    match g.sites_of(id) {
                        Some(s) if s.share(WaitSite::PoolIdle) >= 0.5 => {
                            "an idle pool thread (waits for work)".to_string()
                        }
                        _ => "neither wakes the data path nor is waited on".to_string(),
                    },
                )
            });
            RoleRow {
                pid: id.0,
                tid: id.1,
                comm: window_g.comm(id),
                role,
                reason,
                on_cpu_share: share_of(Some(st), |s| s.on_cpu),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.role, std::cmp::Reverse(ordered(a.on_cpu_share)), a.tid).cmp(&(
            b.role,
            std::cmp::Reverse(ordered(b.on_cpu_share)),
            b.tid,
        ))
    });
    (rows, loaders)
}

fn ordered(x: f64) -> u64 {
    (x.clamp(0.0, 1.0) * 1e6) as u64
}

pub fn share_of(st: Option<&StateTime>, f: impl Fn(&StateTime) -> u64) -> f64 {
    st.map_or(0.0, |s| {
        let total = s.total();
        if total > 0 {
            f(s) as f64 / total as f64
        } else {
            0.0
        }
    })
}

/// Hand-offs into `id` from threads of `set` other than itself (count).
pub fn fed_by_others(g: &Graph, id: ThreadId, set: &BTreeSet<ThreadId>) -> u64 {
    let others: BTreeSet<ThreadId> = set.iter().copied().filter(|s| *s != id).collect();
    fed_by(g, id, &others)
}
