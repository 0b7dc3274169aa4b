//! What each thread waited in: its off-CPU stacks (per thread, with
//! Python frames) sorted into wait sites, the answer to "what was this
//! wait for" that the wake-up graph (who ended it) does not give.
//!
//! ```text
//! offcpu-threads.folded  comm;[pid/tid];outer;...;inner µs
//!   ──► one site per stack: the GIL and timed sleeps by their innermost
//!       frames, else the outermost frame that names a role: a pipeline's
//!       own loop (DataLoader worker, queue feeder, tf.data stage), an idle
//!       pool thread, taking the next batch (DataLoader's next, tf.data's
//!       GetNext, a pool's result iterator), joining a child, a generic
//!       receive (queue, pipe, channel)
//!   ──► ns per site per thread
//! ```
//!
//! The patterns are the frames of the frameworks as they appear in real
//! recordings (CPython 3.10-3.13, PyTorch, TensorFlow, pyarrow, OpenMP,
//! glibc, Rust's std); a stack that matches none is `Other`, and a thread
//! without stacks has no sites: roles then rest on the wake-up graph alone.
use std::collections::BTreeMap;

use storprof_session::load::FoldedStacks;

use super::ThreadId;

/// What a blocked thread waited in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WaitSite {
    /// CPython's GIL: `take_gil` (waiting for it) or `drop_gil` (waiting
    /// for another thread to take it).
    Gil,
    /// A timed sleep (`time.sleep`, `nanosleep`).
    Sleep,
    /// Taking the next batch or item of a data pipeline: a DataLoader's
    /// next, tf.data's `GetNext`, a thread or process pool's result
    /// iterator or future.
    Fetch,
    /// The loop of one of a pipeline's own threads: a DataLoader worker,
    /// a multiprocessing queue's feeder, the pin-memory thread, a tf.data
    /// stage thread.
    PipelineStage,
    /// A pool thread waiting for work: concurrent.futures, multiprocessing
    /// pools, pyarrow's and Eigen's thread pools, OpenMP, OpenBLAS.
    PoolIdle,
    /// Waiting for a child process or thread to end, or for the whole
    /// result of a pool (`pool.map`).
    Join,
    /// Receiving from a queue, a pipe or a channel, outside the above.
    Receive,
    /// None of the above.
    Other,
}

impl WaitSite {
    pub const ALL: [WaitSite; 8] = [
        Self::Gil,
        Self::Sleep,
        Self::Fetch,
        Self::PipelineStage,
        Self::PoolIdle,
        Self::Join,
        Self::Receive,
        Self::Other,
    ];

    fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gil => "the GIL",
            Self::Sleep => "a timed sleep",
            Self::Fetch => "taking the next batch",
            Self::PipelineStage => "a pipeline stage's loop",
            Self::PoolIdle => "an idle pool thread",
            Self::Join => "joining a child",
            Self::Receive => "a queue or pipe receive",
            Self::Other => "other waits",
        }
    }
}

/// One thread's off-CPU time by wait site (ns, from the folded stacks'
/// microseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadSites {
    ns: [u64; 8],
}

impl ThreadSites {
    pub fn ns(&self, site: WaitSite) -> u64 {
        self.ns[site.index()]
    }

    pub fn total(&self) -> u64 {
        self.ns.iter().sum()
    }

    /// Share of the thread's off-CPU stack time in `site`.
    pub fn share(&self, site: WaitSite) -> f64 {
        let total = self.total();
        if total == 0 {
            0.0
        } else {
            self.ns(site) as f64 / total as f64
        }
    }

    /// Whether `site` leads what the stacks tell: at least half of the time
    /// in a named site (unwinding an idle thread's wait often stops in
    /// libc, leaving it `Other`), and a fiftieth of all.
    pub fn leads(&self, site: WaitSite) -> bool {
        let named = self.total() - self.ns(WaitSite::Other);
        let ns = self.ns(site);
        named > 0 && ns * 2 >= named && ns * 50 >= self.total()
    }

    fn add(&mut self, site: WaitSite, ns: u64) {
        let slot = &mut self.ns[site.index()];
        *slot = slot.saturating_add(ns);
    }
}

/// A frame pattern: a function name (a part of the name for native
/// frames, the whole qualified name for Python ones) and, for Python frames, a part of
/// the file's path.
struct Pattern {
    name: &'static str,
    file: Option<&'static str>,
    site: WaitSite,
}

const fn py(name: &'static str, file: &'static str, site: WaitSite) -> Pattern {
    Pattern {
        name,
        file: Some(file),
        site,
    }
}

const fn native(name: &'static str, site: WaitSite) -> Pattern {
    Pattern {
        name,
        file: None,
        site,
    }
}

use WaitSite as W;

/// Frames that decide a stack's site, outermost match first (a worker's
/// `Queue.get` is under its `_worker_loop`; a consumer's under the
/// DataLoader's `__next__`).
const ROLE_PATTERNS: &[Pattern] = &[
    // PyTorch.
    py("_BaseDataLoaderIter.__next__", "torch/utils/data", W::Fetch),
    py(
        "_MultiProcessingDataLoaderIter._next_data",
        "torch/utils/data",
        W::Fetch,
    ),
    py(
        "_SingleProcessDataLoaderIter._next_data",
        "torch/utils/data",
        W::Fetch,
    ),
    py("_worker_loop", "torch/utils/data", W::PipelineStage),
    py("_pin_memory_loop", "torch/utils/data", W::PipelineStage),
    // TensorFlow: the consumer's side of the pipeline, then its stages.
    py("OwnedIterator.__next__", "tensorflow", W::Fetch),
    py("OwnedIterator._next_internal", "tensorflow", W::Fetch),
    native("tensorflow::data::RootDataset", W::Fetch),
    native("tensorflow::IteratorGetNextOp", W::Fetch),
    native("tensorflow::data::IteratorGetNextOp", W::Fetch),
    native("tensorflow::data::", W::PipelineStage),
    native("Eigen::ThreadPoolTempl", W::PoolIdle),
    // NVIDIA DALI.
    py("DALIGenericIterator.__next__", "nvidia/dali", W::Fetch),
    // The standard library: pools, queues, processes, threads.
    py("_result_or_cancel", "concurrent/futures", W::Fetch),
    py(
        "Executor.map.<locals>.result_iterator",
        "concurrent/futures",
        W::Fetch,
    ),
    py("as_completed", "concurrent/futures", W::Fetch),
    py("_worker", "concurrent/futures", W::PoolIdle),
    py("IMapIterator.next", "multiprocessing/pool", W::Fetch),
    py("worker", "multiprocessing/pool", W::PoolIdle),
    py("Pool._handle_workers", "multiprocessing/pool", W::PoolIdle),
    py("Pool._handle_tasks", "multiprocessing/pool", W::PoolIdle),
    py("Pool._handle_results", "multiprocessing/pool", W::PoolIdle),
    py(
        "Pool._wait_for_updates",
        "multiprocessing/pool",
        W::PoolIdle,
    ),
    py("ApplyResult.wait", "multiprocessing/pool", W::Join),
    py("ApplyResult.get", "multiprocessing/pool", W::Join),
    py("Queue._feed", "multiprocessing/queues", W::PipelineStage),
    py("BaseProcess.join", "multiprocessing/process", W::Join),
    py("Thread.join", "threading", W::Join),
    py("Popen.wait", "subprocess", W::Join),
    py("Popen.wait", "multiprocessing/popen", W::Join),
    py("Queue.get", "queue", W::Receive),
    py("Queue.get", "multiprocessing/queues", W::Receive),
    py("SimpleQueue.get", "multiprocessing/queues", W::Receive),
    py(
        "_ConnectionBase.recv",
        "multiprocessing/connection",
        W::Receive,
    ),
    py(
        "_ConnectionBase.poll",
        "multiprocessing/connection",
        W::Receive,
    ),
    // Native pools and channels.
    native("arrow::internal::ThreadPool", W::PoolIdle),
    native("gomp_thread_start", W::PoolIdle),
    native("blas_thread_server", W::PoolIdle),
    py("Queue.put", "queue", W::PipelineStage),
    py("Queue.put", "multiprocessing/queues", W::PipelineStage),
];

/// Channels whose receive is a consumer's wait and whose send, a
/// producer's wait for room (back-pressure: a stage of the pipeline).
const CHANNEL_PREFIXES: &[&str] = &["std::sync::mpmc::", "crossbeam_channel::"];

/// Innermost frames that decide a stack's site whatever is above them.
const GIL_FRAMES: &[&str] = &["take_gil", "drop_gil"];
const SLEEP_FRAMES: &[&str] = &[
    "do_nanosleep_[k]",
    "hrtimer_nanosleep_[k]",
    "__x64_sys_clock_nanosleep_[k]",
    "__x64_sys_nanosleep_[k]",
];
/// Waits for a child in the kernel (wait4, waitid), whatever called them.
const JOIN_FRAMES: &[&str] = &["do_wait_[k]", "kernel_wait4_[k]", "kernel_waitid_[k]"];

/// A Python frame `name (file:line)` as (name, file).
pub(super) fn python_frame(frame: &str) -> Option<(&str, &str)> {
    let (name, rest) = frame.split_once(" (")?;
    let file = rest.strip_suffix(')')?;
    (file.contains(".py") || file.starts_with('<')).then_some((name, file))
}

fn role_of(frame: &str) -> Option<WaitSite> {
    if frame.ends_with("_[k]") {
        return None;
    }
    match python_frame(frame) {
        Some((name, file)) => ROLE_PATTERNS
            .iter()
            .find(|p| p.file.is_some_and(|f| file.contains(f)) && p.name == name)
            .map(|p| p.site),
        None if CHANNEL_PREFIXES.iter().any(|p| frame.starts_with(p)) => {
            if frame.contains("::recv") {
                Some(W::Receive)
            } else if frame.contains("::send") {
                Some(W::PipelineStage)
            } else {
                None
            }
        }
        // Native names inside a C++ wrapper count too (a tf.data runner is
        // `std::_Function_handler<..., std::_Bind<tensorflow::data::...`).
        None => ROLE_PATTERNS
            .iter()
            .find(|p| p.file.is_none() && frame.contains(p.name))
            .map(|p| p.site),
    }
}

/// The site of one stack, frames outermost first.
pub fn site_of<'a>(frames: impl DoubleEndedIterator<Item = &'a str> + Clone) -> WaitSite {
    let innermost = |list: &[&str]| {
        frames.clone().rev().any(|f| {
            list.iter()
                .any(|p| f == *p || f.strip_suffix("_[k]").is_none() && f.starts_with(p))
        })
    };
    if innermost(GIL_FRAMES) {
        return W::Gil;
    }
    if innermost(SLEEP_FRAMES) {
        return W::Sleep;
    }
    if let Some(site) = frames.clone().find_map(role_of) {
        return site;
    }
    if innermost(JOIN_FRAMES) {
        return W::Join;
    }
    W::Other
}

/// A folded line's thread and its frames (after `comm;[pid/tid]`).
pub(super) fn thread_and_frames(stack: &str) -> Option<(ThreadId, std::str::Split<'_, char>)> {
    let mut parts = stack.split(';');
    let (_comm, ids) = (parts.next()?, parts.next()?);
    Some((storprof_session::load::thread_ids(ids)?, parts))
}

/// Frames of a consumer's own work for its loader: starting an epoch's
/// iterator (and its workers) besides taking batches.
const ITERATOR_SETUP: &[Pattern] = &[
    py("DataLoader.__iter__", "torch/utils/data", W::Fetch),
    py(
        "_MultiProcessingDataLoaderIter.__init__",
        "torch/utils/data",
        W::Fetch,
    ),
    py("_BaseDataLoaderIter.__init__", "torch/utils/data", W::Fetch),
    py("DatasetV2.__iter__", "tensorflow", W::Fetch),
];

/// Whether a stack (frames outermost first) runs a pipeline's consumer
/// side: taking a batch, or setting up the iterator that yields them.
/// A loader's own loop (a DataLoader worker's) is never the consumer side,
/// though a forked worker's stacks keep the frames its parent forked it
/// from (`DataLoader.__iter__`).
pub(super) fn in_fetch<'a>(frames: impl Iterator<Item = &'a str>) -> bool {
    let mut fetch = false;
    for f in frames {
        if role_of(f) == Some(W::PipelineStage) {
            return false;
        }
        fetch |= is_fetch_frame(f);
    }
    fetch
}

pub(super) fn is_fetch_frame(f: &str) -> bool {
    role_of(f) == Some(W::Fetch)
        || python_frame(f).is_some_and(|(name, file)| {
            ITERATOR_SETUP
                .iter()
                .any(|p| p.name == name && p.file.is_some_and(|pf| file.contains(pf)))
        })
}

/// Kernel frames of a read syscall.
const READ_FRAMES: &[&str] = &[
    "ksys_read_[k]",
    "ksys_pread64_[k]",
    "vfs_read_[k]",
    "__x64_sys_read_[k]",
    "__x64_sys_pread64_[k]",
];
/// Python's import machinery: reads under it load code, not data.
pub(super) fn is_import_frame(frame: &str) -> bool {
    python_frame(frame).is_some_and(|(name, file)| {
        file.starts_with("<frozen importlib") || name == "_find_and_load"
    })
}

/// A thread's read-syscall time in its stacks (on CPU and off), ns: under
/// Python's import machinery, and the rest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOrigins {
    pub import_ns: u64,
    pub other_ns: u64,
}

impl ReadOrigins {
    /// The share of the thread's reads that were not imports (1 with less
    /// than 100 ms of read stacks: a few samples tell nothing).
    pub fn data_share(&self) -> f64 {
        let total = self.import_ns + self.other_ns;
        if total < 100_000_000 {
            1.0
        } else {
            self.other_ns as f64 / total as f64
        }
    }
}

/// The read origins of every thread with read syscalls in its stacks:
/// off-CPU stacks in µs, on-CPU ones in samples of `sample_ns` each.
pub fn read_origins(
    offcpu_threads: &FoldedStacks,
    oncpu_threads: &FoldedStacks,
    sample_ns: u64,
) -> BTreeMap<ThreadId, ReadOrigins> {
    let mut out: BTreeMap<ThreadId, ReadOrigins> = BTreeMap::new();
    for (stacks, unit_ns) in [(offcpu_threads, 1_000), (oncpu_threads, sample_ns)] {
        for (stack, n) in &stacks.stacks {
            let Some((id, frames)) = thread_and_frames(stack) else {
                continue;
            };
            let mut import = false;
            let mut read = false;
            for f in frames {
                import |= is_import_frame(f);
                read |= READ_FRAMES.contains(&f);
            }
            if !read {
                continue;
            }
            let o = out.entry(id).or_default();
            let ns = n.saturating_mul(unit_ns);
            if import {
                o.import_ns = o.import_ns.saturating_add(ns);
            } else {
                o.other_ns = o.other_ns.saturating_add(ns);
            }
        }
    }
    out
}

/// The wait sites of every thread with off-CPU stacks.
pub fn per_thread(offcpu_threads: &FoldedStacks) -> BTreeMap<ThreadId, ThreadSites> {
    let mut out: BTreeMap<ThreadId, ThreadSites> = BTreeMap::new();
    for (stack, us) in &offcpu_threads.stacks {
        let Some((id, parts)) = thread_and_frames(stack) else {
            continue;
        };
        let site = site_of(parts);
        out.entry(id)
            .or_default()
            .add(site, us.saturating_mul(1_000));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(stack: &str) -> WaitSite {
        site_of(stack.split(';'))
    }

    #[test]
    fn recorded_stacks_get_their_sites() {
        // tf.data's consumer, from a real recording: the Python thread in
        // the root iterator's GetNext, above the prefetch stage's frames.
        assert_eq!(
            site(
                "<module> (/t/tfdata_train.py:346);run (/t/tfdata_train.py:276);\
                  OwnedIterator.__next__ (/v/site-packages/tensorflow/python/data/ops/iterator_ops.py:826);\
                  tensorflow::data::RootDataset::Iterator::GetNextInternal(tensorflow::d;\
                  tensorflow::data::PrefetchDatasetOp::Dataset::Iterator::GetNextInterna;\
                  __x64_sys_futex_[k];futex_wait_[k]"
            ),
            WaitSite::Fetch
        );
        // Its prefetch thread.
        assert_eq!(
            site(
                "tensorflow::data::PrefetchDatasetOp::Dataset::Iterator::PrefetchThread;\
                  tensorflow::data::DatasetBaseIterator::GetNext(tensorflow::data::Itera;\
                  futex_wait_[k]"
            ),
            WaitSite::PipelineStage
        );
        // A DataLoader worker waiting for its next index.
        assert_eq!(
            site(
                "_worker_loop (/v/site-packages/torch/utils/data/_utils/worker.py:337);\
                  Queue.get (/usr/lib/python3.11/multiprocessing/queues.py:113);\
                  _ConnectionBase.poll (/usr/lib/python3.11/multiprocessing/connection.py:257);\
                  do_sys_poll_[k]"
            ),
            WaitSite::PipelineStage
        );
        // A ThreadPoolExecutor's consumer and its idle workers.
        assert_eq!(
            site(
                "<module> (/t/pool.py:9);_result_or_cancel (/p/concurrent/futures/_base.py:317);\
                  Future.result (/p/concurrent/futures/_base.py:451);\
                  Condition.wait (/p/threading.py:320);__new_sem_wait_slow64;futex_wait_[k]"
            ),
            WaitSite::Fetch
        );
        assert_eq!(
            site(
                "Thread._bootstrap_inner (/p/threading.py:1045);Thread.run (/p/threading.py:982);\
                  _worker (/p/concurrent/futures/thread.py:81);[libc.so.6];futex_wait_[k]"
            ),
            WaitSite::PoolIdle
        );
        // A pool thread parsing, waiting for the GIL.
        assert_eq!(
            site(
                "_worker (/p/concurrent/futures/thread.py:83);parse_csv (/t/pool.py:40);\
                  PyEval_RestoreThread;take_gil;pthread_cond_timedwait;futex_wait_[k]"
            ),
            WaitSite::Gil
        );
        assert_eq!(
            site(
                "<module> (/t/x.py:3);main (/t/x.py:2);time_sleep;clock_nanosleep;\
                  __x64_sys_clock_nanosleep_[k];hrtimer_nanosleep_[k];do_nanosleep_[k]"
            ),
            WaitSite::Sleep
        );
        assert_eq!(
            site(
                "run_client (/t/http.py:286);Thread.join (/p/threading.py:1112);\
                  Thread._wait_for_tstate_lock (/p/threading.py:1132);futex_wait_[k]"
            ),
            WaitSite::Join
        );
        assert_eq!(
            site(
                "next_item (/t/http.py:241);Queue.get (/p/queue.py:180);\
                  Condition.wait (/p/threading.py:324);futex_wait_[k]"
            ),
            WaitSite::Receive
        );
        // storprof bench's consumer in a channel receive, and a stack of
        // unnamed frames.
        assert_eq!(
            site("std::sync::mpmc::zero::Channel<T>::recv::{{closure}};syscall;futex_wait_[k]"),
            WaitSite::Receive
        );
        assert_eq!(
            site(
                "storprof_bench::read;std::sync::mpmc::zero::Channel<T>::send::{{closure}};\
                  syscall;futex_wait_[k]"
            ),
            WaitSite::PipelineStage
        );
        assert_eq!(site("[libc.so.6];futex_wait_[k]"), WaitSite::Other);
        // A function merely named like a pattern elsewhere is not one.
        assert_eq!(
            site("worker (/t/mine.py:3);futex_wait_[k]"),
            WaitSite::Other
        );
    }

    #[test]
    fn reads_under_the_import_machinery_are_not_data() {
        let off = FoldedStacks {
            stacks: vec![
                (
                    "python;[1/1];<module> (/t/a.py:1);_find_and_load (<frozen importlib._bootstrap>:1176);\
                     FileLoader.get_data (<frozen importlib._bootstrap_external>:1131);\
                     ksys_read_[k];filemap_read_[k]"
                        .into(),
                    900_000,
                ),
                ("python;[1/1];<module> (/t/a.py:2);ksys_read_[k]".into(), 50_000),
                ("python;[1/2];load (/t/ds.py:9);ksys_read_[k]".into(), 700),
                ("python;[1/2];load (/t/ds.py:9);futex_wait_[k]".into(), 700),
            ],
        };
        let on = FoldedStacks {
            stacks: vec![("python;[1/2];load (/t/ds.py:9);vfs_read_[k]".into(), 3)],
        };
        let o = read_origins(&off, &on, 100_000_000);
        // Thread 1: 950 ms of read stacks, 900 of them imports.
        let o1 = o[&(1, 1)];
        assert!((o1.data_share() - 50.0 / 950.0).abs() < 1e-9, "{o1:?}");
        assert_eq!(o[&(1, 2)].other_ns, 700_000 + 300_000_000);
        assert_eq!(o[&(1, 2)].data_share(), 1.0);
        // A few samples tell nothing.
        let few = ReadOrigins {
            import_ns: 10_000_000,
            other_ns: 0,
        };
        assert_eq!(few.data_share(), 1.0);
    }

    #[test]
    fn sites_sum_per_thread_in_ns() {
        let stacks = FoldedStacks {
            stacks: vec![
                ("python;[1/2];take_gil;futex_wait_[k]".into(), 300),
                ("python;[1/2];x (/t/a.py:1);do_nanosleep_[k]".into(), 700),
                ("python;[1/3];[libc.so.6]".into(), 5),
                ("bad line".into(), 9),
            ],
        };
        let sites = per_thread(&stacks);
        let t = sites[&(1, 2)];
        assert_eq!(t.ns(WaitSite::Gil), 300_000);
        assert_eq!(t.ns(WaitSite::Sleep), 700_000);
        assert!((t.share(WaitSite::Gil) - 0.3).abs() < 1e-9);
        assert_eq!(sites[&(1, 3)].ns(WaitSite::Other), 5_000);
        assert_eq!(sites.len(), 2);
    }
}
