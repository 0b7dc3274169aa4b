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

use storprof_session::{load::Session, model::ThreadStats};

use super::{
    Found, Role, RoleRow, ThreadId,
    classify::EdgeKind,
    graph::{Graph, StateTime, whole_run_state},
    sites::{self, WaitSite},
};
use crate::Thresholds;

/// What [`data_side`] found.
pub struct DataSide {
    /// Readers, the threads of their worker processes and their
    /// processes' pipeline stage threads.
    pub side: BTreeSet<ThreadId>,
    pub readers: BTreeSet<ThreadId>,
    /// The processes that started the readers' processes and hand them
    /// work: their parents, or a spawner's parent.
    pub trainers: BTreeSet<u32>,
    /// Parents of the readers' processes that only fork them for their
    /// own parent and hand them nothing (Python's forkserver).
    pub spawners: BTreeSet<u32>,
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
            let own = data_bytes(session, th, data_share);
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

/// How long after a thread's first read its imports are taken to run:
/// the import share of its stacks discounts only what it read then.
const IMPORT_SPAN_NS: u64 = 2_000_000_000;

/// The bytes `th` took in as data: its stacks' share of read time outside
/// imports (`data_share`) applied to what it read in its first
/// `IMPORT_SPAN_NS`, and all it read after. A spawned DataLoader worker
/// imports torch from disk, then reads its samples from the page cache so
/// fast that its stacks barely show them: by time its reads were nearly
/// all imports, by bytes nearly all data.
fn data_bytes(session: &Session, th: &ThreadStats, data_share: f64) -> f64 {
    let bytes = input_bytes(th) as f64;
    let later = if data_share < 1.0 {
        read_after_imports(session, (th.pid, th.tid)).map_or(0.0, |b| (b as f64).min(bytes))
    } else {
        0.0
    };
    (bytes - later) * data_share + later
}

/// What thread `id` read after the first `IMPORT_SPAN_NS` of its reads
/// (None: no time series, or no reads in it).
fn read_after_imports(session: &Session, id: ThreadId) -> Option<u64> {
    let ts = session.timeseries.as_ref()?;
    let read = ts.threads.iter().find(|s| (s.pid, s.tid) == id)?.read();
    let first = read.first_nonzero()?;
    let span = IMPORT_SPAN_NS.div_ceil(ts.bucket_ns.max(1)) as usize;
    Some(read.total().saturating_sub(read.sum(first, first + span)))
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
    let starters: BTreeSet<u32> = readers
        .iter()
        .filter_map(|r| workers.get(&r.0))
        .copied()
        .collect();
    let worker_pids: BTreeSet<u32> = readers
        .iter()
        .map(|r| r.0)
        .filter(|p| workers.contains_key(p) && !starters.contains(p))
        .collect();
    let mut side: BTreeSet<ThreadId> = readers
        .iter()
        .filter(|r| !starters.contains(&r.0))
        .copied()
        .collect();
    let (trainers, spawners) = resolve_spawners(session, &workers, &starters, &worker_pids);
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
        spawners,
        how,
    }
}

/// The trainers among `starters` (the workers' parents): a starter that
/// wakes none of its workers and has a traced parent forks them on that
/// parent's behalf (a forkserver answers with a pid, the parent sends the
/// work), so the parent is the trainer and the starter a spawner.
fn resolve_spawners(
    session: &Session,
    parent_of: &BTreeMap<u32, u32>,
    starters: &BTreeSet<u32>,
    worker_pids: &BTreeSet<u32>,
) -> (BTreeSet<u32>, BTreeSet<u32>) {
    let feeds_a_worker = |p: u32| {
        session.waits.iter().flat_map(|w| &w.edges).any(|e| {
            e.waker_pid == p
                && e.wakee_pid != p
                && worker_pids.contains(&e.wakee_pid)
                && parent_of.get(&e.wakee_pid) == Some(&p)
        })
    };
    let mut trainers = BTreeSet::new();
    let mut spawners = BTreeSet::new();
    for &p in starters {
        match parent_of.get(&p) {
            Some(&grand) if !worker_pids.contains(&p) && !feeds_a_worker(p) => {
                spawners.insert(p);
                trainers.insert(grand);
            }
            _ => {
                trainers.insert(p);
            }
        }
    }
    (trainers, spawners)
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

#[cfg(test)]
mod tests {
    use super::*;
    use storprof_session::model::{ThreadSeries, TimeSeries};

    /// A thread that read `per_bucket` bytes in each of its buckets from
    /// `first_bucket` on, in a session of 1 s buckets.
    fn reader(first_bucket: u32, per_bucket: &[u64]) -> (Session, ThreadStats) {
        let th = ThreadStats {
            pid: 200,
            tid: 200,
            read_bytes: per_bucket.iter().sum(),
            ..ThreadStats::default()
        };
        let session = Session {
            timeseries: Some(TimeSeries {
                bucket_ns: 1_000_000_000,
                threads: vec![ThreadSeries {
                    pid: 200,
                    tid: 200,
                    first_bucket,
                    read_bytes: per_bucket.to_vec(),
                    ..ThreadSeries::default()
                }],
                ..TimeSeries::default()
            }),
            ..Session::default()
        };
        (session, th)
    }

    #[test]
    fn imports_discount_only_a_threads_first_reads() {
        // A spawned worker: 6 MB of imports in its first second, then
        // 9 MB a second of samples its stacks barely show.
        let (s, th) = reader(9, &[6 << 20, 9 << 20, 9 << 20, 9 << 20]);
        let data = data_bytes(&s, &th, 0.0);
        assert_eq!(data, (18u64 << 20) as f64);
        // An importer reads only at its start: nothing left as data.
        let (s, th) = reader(0, &[30 << 20, 10 << 20]);
        assert_eq!(data_bytes(&s, &th, 0.0), 0.0);
        // Without a discount, everything.
        assert_eq!(data_bytes(&s, &th, 1.0), (40u64 << 20) as f64);
    }
}
