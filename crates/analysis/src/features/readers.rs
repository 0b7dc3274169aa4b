//! The reader figures (which threads, how their time splits by state),
//! taken once from one basis chosen up front: the consumer's critical path
//! in the wait-for graph, the consumer's own fetching, the readers' own
//! time in that graph, or per-thread statistics without a graph.
use super::*;

/// Where the reader figures come from, with what each basis needs.
#[derive(Clone, Copy, Debug)]
pub enum ReaderSource<'a> {
    /// Per-thread statistics: readers by read bytes, else by activity.
    Threads,
    /// The critical path of the consumer's data waits: shares of the time
    /// the consumer waited for data, spent in each state by the threads
    /// it waited on (directly or through their own waits).
    CriticalPath {
        wait: &'a WaitAnalysis,
        /// The path threads' on-CPU stacks, weighted by their path share.
        path_oncpu: &'a FoldedStacks,
    },
    /// A consumer that fetches for itself (see [`ReaderBasis::choose`]):
    /// it is the one reader and the shares are of its fetching time.
    ConsumerFetch {
        wait: &'a WaitAnalysis,
        path_oncpu: &'a FoldedStacks,
        /// The consumers' own on-CPU stacks.
        own_oncpu: &'a FoldedStacks,
    },
    /// No consumer: the readers' own time, their waits sorted by what
    /// ended them (an io_uring wait for a block completion is I/O, a
    /// poll for a socket is the network).
    ReaderTime {
        wait: &'a WaitAnalysis,
        path_oncpu: &'a FoldedStacks,
    },
}

/// Which basis a wait analysis supports, before any stack is weighed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReaderBasis {
    Threads,
    CriticalPath,
    ConsumerFetch,
    ReaderTime,
}

impl ReaderBasis {
    /// The basis of the reader figures: the critical path when the graph
    /// measured the consumer's AU; the consumer's own fetching when, on
    /// that path, it never waited for data (data and GIL waits under
    /// `min_decision_thread_s`) yet its AU is short of the compute-bound
    /// bar (a bench's own AU and bar when it has them) and its fetching
    /// was measured; the readers' own time when the graph found no
    /// consumer but a path; else per-thread statistics.
    pub fn choose(wait: Option<&WaitAnalysis>, session: &Session, t: &Thresholds) -> Self {
        let Some(w) = wait else {
            return Self::Threads;
        };
        if w.basis == crate::waitgraph::PathBasis::ReaderTime {
            let total_ns: u64 = w.critical_path.iter().map(|p| p.ns).sum();
            return if total_ns > 0 {
                Self::ReaderTime
            } else {
                Self::Threads
            };
        }
        let Some(kernel_au) = w.kernel_au_percentage else {
            return Self::Threads;
        };
        if fetches_for_itself(w, bench_feature(session).as_ref(), kernel_au, t) {
            Self::ConsumerFetch
        } else {
            Self::CriticalPath
        }
    }
}

/// Whether the consumer, never held up by a loader, was held up by its
/// own fetching (on a CPU taking and unpickling batches or decoding
/// samples, queued for a CPU that other work took, blocked on the device
/// or a socket reading them). A consumer whose AU passes is
/// compute-bound, and one that waited on its loaders is judged by them.
fn fetches_for_itself(
    w: &WaitAnalysis,
    bench: Option<&BenchFeature>,
    kernel_au: f64,
    t: &Thresholds,
) -> bool {
    let au = bench.and_then(|b| b.au_percentage).unwrap_or(kernel_au);
    let bar = bench
        .and_then(|b| b.au_expected_percentage)
        .unwrap_or(t.compute_bound_au_percentage);
    // A consumer that emulates compute with timed sleeps: all its CPU
    // is then fetching. A real trainer's is mostly its compute, but for
    // what its stacks put inside the loader's batch API.
    let measured = !w.consumers.is_empty()
        && w.consumers
            .iter()
            .all(|c| c.emulated_compute || c.fetch_cpu_ns + c.fetch_io_ns + c.fetch_net_ns > 0);
    let data_wait_s = consumer_data_wait_s(w);
    let fetch_ns: u64 = w.consumers.iter().map(|c| c.own_fetch_ns()).sum();
    measured
        && data_wait_s < t.min_decision_thread_s
        && au < bar
        && fetch_ns as f64 / 1e9 >= t.min_decision_thread_s
}

/// The consumers' summed data and GIL waits, s.
fn consumer_data_wait_s(w: &WaitAnalysis) -> f64 {
    w.consumers
        .iter()
        .map(|c| (c.data_wait_ns + c.gil_ns) as f64 / 1e9)
        .sum()
}

/// The reader threads and the shares of their time by state.
#[derive(Clone, Debug, Default)]
pub(super) struct ReaderFigures {
    pub selection: Option<ReaderSelection>,
    pub threads: usize,
    pub comms: Vec<String>,
    pub thread_s: f64,
    pub on_cpu: f64,
    pub runnable: f64,
    pub sleeping: f64,
    pub blocked_io: f64,
    pub user: Option<f64>,
    pub cache_copy: f64,
    pub read_syscall: f64,
    pub futex: f64,
    pub socket_recv: f64,
    pub gil: f64,
    pub reclaim: f64,
}

impl ReaderFigures {
    /// The figures of `source`; `by_threads` are the per-thread ones,
    /// which the graph's bases keep for what the graph does not measure
    /// (time in read syscalls, reclaim).
    pub(super) fn of(source: &ReaderSource, by_threads: Self) -> Self {
        match *source {
            ReaderSource::Threads => by_threads,
            ReaderSource::CriticalPath { wait, path_oncpu } => {
                critical_path(wait, path_oncpu, by_threads)
            }
            ReaderSource::ConsumerFetch {
                wait,
                path_oncpu,
                own_oncpu,
            } => consumer_fetch(wait, own_oncpu, critical_path(wait, path_oncpu, by_threads)),
            ReaderSource::ReaderTime { wait, path_oncpu } => {
                reader_time(wait, path_oncpu, by_threads)
            }
        }
    }
}

/// The shares by state from a wait analysis's path (of the consumer's data
/// wait, or of the readers' own time); the rest from `base`.
fn path_shares(w: &WaitAnalysis, path_oncpu: &FoldedStacks, base: ReaderFigures) -> ReaderFigures {
    use crate::waitgraph::PathKind as K;
    let cpu = w.share(&[K::CpuUser, K::CpuKernel]);
    let user = w.share(&[K::CpuUser]);
    ReaderFigures {
        on_cpu: cpu,
        user: (cpu > 0.0).then(|| user / cpu),
        runnable: w.share(&[K::Runnable]),
        blocked_io: w.share(&[K::BlockIo]),
        futex: w.share(&[K::Lock]),
        gil: w.share(&[K::Gil]),
        socket_recv: w.share(&[K::Network]),
        sleeping: w.share(&[K::Timer, K::Unattributed, K::WaitsForConsumer]),
        cache_copy: if path_oncpu.is_empty() {
            base.cache_copy
        } else {
            frames::share_matching(path_oncpu, CACHE_COPY_FRAMES, true)
        },
        ..base
    }
}

/// The threads on the consumer's critical path; idle pool threads weigh
/// nothing.
fn critical_path(
    w: &WaitAnalysis,
    path_oncpu: &FoldedStacks,
    base: ReaderFigures,
) -> ReaderFigures {
    let threads: BTreeSet<(u32, u32)> = w
        .critical_path
        .iter()
        .flat_map(|p| p.threads.iter().map(|t| (t.0, t.1)))
        .collect();
    let comms: BTreeSet<String> = w
        .critical_path
        .iter()
        .flat_map(|p| p.threads.iter().map(|t| t.2.clone()))
        .collect();
    let shares = path_shares(w, path_oncpu, base);
    ReaderFigures {
        selection: Some(ReaderSelection::CriticalPath),
        threads: threads.len(),
        comms: if comms.is_empty() {
            shares.comms.clone()
        } else {
            comms.into_iter().collect()
        },
        thread_s: consumer_data_wait_s(w),
        ..shares
    }
}

/// The consumer as its own reader: its fetching on a CPU, queued for one,
/// or blocked on the device or a socket (a loader in its own thread);
/// what its fetching does not split (locks, sleeps) stays the path's.
fn consumer_fetch(
    w: &WaitAnalysis,
    own_oncpu: &FoldedStacks,
    path: ReaderFigures,
) -> ReaderFigures {
    let fetch_ns: u64 = w.consumers.iter().map(|c| c.own_fetch_ns()).sum();
    let queued_ns: u64 = w.consumers.iter().map(|c| c.own_fetch_queued_ns()).sum();
    let io: u64 = w.consumers.iter().map(|c| c.fetch_io_ns).sum();
    let net: u64 = w.consumers.iter().map(|c| c.fetch_net_ns).sum();
    let share = |ns: u64| (ns as f64 / fetch_ns as f64).min(1.0);
    let comms: BTreeSet<String> = w.consumers.iter().map(|c| c.comm.clone()).collect();
    // The user-space and page-cache-copy shares from its own stacks, when
    // they have samples.
    let (user, cache_copy) = match frames::kernel_leaf_share(own_oncpu) {
        Some(kernel) => (
            Some(1.0 - kernel),
            frames::share_matching(own_oncpu, CACHE_COPY_FRAMES, true),
        ),
        None => (path.user, path.cache_copy),
    };
    ReaderFigures {
        selection: Some(ReaderSelection::ConsumerFetch),
        threads: w.consumers.len(),
        comms: comms.into_iter().collect(),
        thread_s: fetch_ns as f64 / 1e9,
        runnable: share(queued_ns),
        blocked_io: share(io),
        socket_recv: share(net),
        on_cpu: (1.0 - share(queued_ns) - share(io) - share(net)).max(0.0),
        user,
        cache_copy,
        ..path
    }
}

/// Without a consumer: the readers and their worker processes' threads.
fn reader_time(w: &WaitAnalysis, path_oncpu: &FoldedStacks, base: ReaderFigures) -> ReaderFigures {
    let total_ns: u64 = w.critical_path.iter().map(|p| p.ns).sum();
    let threads: BTreeSet<(u32, u32)> = w.roles.iter().map(|r| (r.pid, r.tid)).collect();
    let comms: BTreeSet<String> = w.roles.iter().map(|r| r.comm.clone()).collect();
    let shares = path_shares(w, path_oncpu, base);
    ReaderFigures {
        selection: Some(ReaderSelection::ReaderTime),
        threads: threads.len(),
        comms: if comms.is_empty() {
            shares.comms.clone()
        } else {
            comms.into_iter().collect()
        },
        thread_s: total_ns as f64 / 1e9,
        ..shares
    }
}

/// The consumer of `source`: the graph's when it found one (none for the
/// readers' own time: a thread that only sleeps, fio's status loop, is
/// none either), else the thread asleep in nanosleep most of its life.
pub(super) fn consumer_of(
    source: &ReaderSource,
    by_sleep: Option<ConsumerFeature>,
) -> Option<ConsumerFeature> {
    let w = match *source {
        ReaderSource::Threads => return by_sleep,
        ReaderSource::ReaderTime { .. } => return None,
        ReaderSource::CriticalPath { wait, .. } | ReaderSource::ConsumerFetch { wait, .. } => wait,
    };
    let Some(first) = w.consumers.first() else {
        return by_sleep;
    };
    Some(ConsumerFeature {
        comm: first.comm.clone(),
        tids: w.consumers.iter().map(|c| c.tid).collect(),
        sleep_share: w.kernel_au_percentage.unwrap_or(0.0) / 100.0,
        from_wait_graph: true,
        writes: consumer_writes(&w.consumers),
    })
}

impl Features {
    /// Of reader CPU, the share that is the reader's own work: user code,
    /// faulting in its own buffers, allocation — everything but copying from
    /// the page cache. A reader that reads `a`× the bytes it returns (bench
    /// read amplification) caused `1 − 1/a` of its copies itself, so only
    /// `copy/a` is discounted. None without CPU samples.
    pub fn reader_own_work_share(&self) -> Option<f64> {
        self.reader_user_share?;
        let amplification = self
            .bench
            .as_ref()
            .and_then(|b| b.read_amplification)
            .filter(|a| a.is_finite() && *a > 1.0)
            .unwrap_or(1.0);
        Some((1.0 - self.reader_cache_copy_share / amplification).clamp(0.0, 1.0))
    }
}
