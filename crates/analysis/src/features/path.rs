//! Reader figures replaced by the wait-for graph's: over the consumer's
//! critical path, or the readers' own time.
use super::*;

impl Features {
    /// Replaces the reader shares by the critical path of the consumer's
    /// data waits: each share is then of the time the consumer waited for
    /// data, spent in that state by the threads it waited on (directly or
    /// through their own waits). Idle pool threads weigh nothing.
    /// A consumer that fetches for itself takes the readers' place
    /// (see `apply_consumer_fetch`).
    pub fn apply_critical_path(
        &mut self,
        w: &WaitAnalysis,
        path_oncpu: &FoldedStacks,
        t: &Thresholds,
    ) {
        let Some(au) = w.kernel_au_percentage else {
            return;
        };
        self.reader_selection = Some(ReaderSelection::CriticalPath);
        let threads: BTreeSet<(u32, u32)> = w
            .critical_path
            .iter()
            .flat_map(|p| p.threads.iter().map(|t| (t.0, t.1)))
            .collect();
        self.reader_threads = threads.len();
        let comms: BTreeSet<String> = w
            .critical_path
            .iter()
            .flat_map(|p| p.threads.iter().map(|t| t.2.clone()))
            .collect();
        if !comms.is_empty() {
            self.reader_comms = comms.into_iter().collect();
        }
        self.reader_thread_s = w
            .consumers
            .iter()
            .map(|c| (c.data_wait_ns + c.gil_ns) as f64 / 1e9)
            .sum();
        self.apply_path_shares(w, path_oncpu);
        if let Some(c) = w.consumers.first() {
            self.consumer = Some(ConsumerFeature {
                comm: c.comm.clone(),
                tids: w.consumers.iter().map(|c| c.tid).collect(),
                sleep_share: au / 100.0,
                from_wait_graph: true,
                writes: consumer_writes(&w.consumers),
            });
        }
        self.apply_consumer_fetch(w, t);
    }

    /// The reader figures of a consumer that never waited for data (its
    /// data and GIL waits under `min_decision_thread_s`) and whose AU is
    /// still short of `compute_bound_au_percentage`: no loader held it
    /// up, its own fetching did (on a CPU taking and unpickling batches or
    /// decoding samples, queued for a CPU that other work took, blocked
    /// on the device or a socket reading them), so it is the one reader
    /// and the shares are of that time. A consumer whose AU passes is
    /// compute-bound, and one that waited on its loaders is judged by them.
    fn apply_consumer_fetch(&mut self, w: &WaitAnalysis, t: &Thresholds) {
        // The AU and bar compute-bound judges by: a bench's own when it
        // has them.
        let bench = self.bench.as_ref();
        let au = bench
            .and_then(|b| b.au_percentage)
            .or(w.kernel_au_percentage)
            .unwrap_or(100.0);
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
        if !measured || self.reader_thread_s >= t.min_decision_thread_s || au >= bar {
            return;
        }
        let fetch_ns: u64 = w.consumers.iter().map(|c| c.own_fetch_ns()).sum();
        let queued_ns: u64 = w.consumers.iter().map(|c| c.own_fetch_queued_ns()).sum();
        let fetch_s = fetch_ns as f64 / 1e9;
        if fetch_s < t.min_decision_thread_s {
            return;
        }
        self.reader_selection = Some(ReaderSelection::ConsumerFetch);
        self.reader_threads = w.consumers.len();
        let comms: BTreeSet<String> = w.consumers.iter().map(|c| c.comm.clone()).collect();
        self.reader_comms = comms.into_iter().collect();
        self.reader_thread_s = fetch_s;
        // Its own fetching on a CPU, queued for one, or blocked on the
        // device or a socket (a loader in its own thread).
        let share = |ns: u64| (ns as f64 / fetch_ns as f64).min(1.0);
        let io: u64 = w.consumers.iter().map(|c| c.fetch_io_ns).sum();
        let net: u64 = w.consumers.iter().map(|c| c.fetch_net_ns).sum();
        self.reader_runnable_share = share(queued_ns);
        self.reader_blocked_io_share = share(io);
        self.reader_socket_recv_share = share(net);
        self.reader_on_cpu_share = (1.0 - share(queued_ns) - share(io) - share(net)).max(0.0);
    }

    /// The user-space and page-cache-copy shares of a consumer that
    /// fetches for itself, from its on-CPU stacks (`oncpu`).
    pub fn apply_consumer_fetch_stacks(&mut self, oncpu: &FoldedStacks) {
        let Some(kernel) = frames::kernel_leaf_share(oncpu) else {
            return;
        };
        self.reader_user_share = Some(1.0 - kernel);
        self.reader_cache_copy_share = frames::share_matching(oncpu, CACHE_COPY_FRAMES, true);
    }

    /// The readers' shares by state from a wait analysis's path (of the
    /// consumer's data wait, or of the readers' own time).
    pub(crate) fn apply_path_shares(&mut self, w: &WaitAnalysis, path_oncpu: &FoldedStacks) {
        use crate::waitgraph::PathKind as K;
        let cpu = w.share(&[K::CpuUser, K::CpuKernel]);
        let user = w.share(&[K::CpuUser]);
        self.reader_on_cpu_share = cpu;
        self.reader_user_share = (cpu > 0.0).then(|| user / cpu);
        self.reader_runnable_share = w.share(&[K::Runnable]);
        self.reader_blocked_io_share = w.share(&[K::BlockIo]);
        self.reader_futex_share = w.share(&[K::Lock]);
        self.reader_gil_share = w.share(&[K::Gil]);
        self.reader_socket_recv_share = w.share(&[K::Network]);
        self.reader_sleeping_share = w.share(&[K::Timer, K::Unattributed, K::WaitsForConsumer]);
        if !path_oncpu.is_empty() {
            self.reader_cache_copy_share =
                frames::share_matching(path_oncpu, CACHE_COPY_FRAMES, true);
        }
    }

    /// Without a consumer: the reader shares from the readers' own time in
    /// the wake-up graph (their waits sorted by what ended them: an
    /// io_uring wait for a block completion is I/O, a poll for a socket
    /// is the network).
    pub fn apply_reader_time(&mut self, w: &WaitAnalysis, path_oncpu: &FoldedStacks) {
        let total_ns: u64 = w.critical_path.iter().map(|p| p.ns).sum();
        if total_ns == 0 {
            return;
        }
        self.reader_selection = Some(ReaderSelection::ReaderTime);
        let threads: BTreeSet<(u32, u32)> = w.roles.iter().map(|r| (r.pid, r.tid)).collect();
        self.reader_threads = threads.len();
        let comms: BTreeSet<String> = w.roles.iter().map(|r| r.comm.clone()).collect();
        if !comms.is_empty() {
            self.reader_comms = comms.into_iter().collect();
        }
        self.reader_thread_s = total_ns as f64 / 1e9;
        // The wait-for graph found no consumer: a thread that only sleeps
        // (fio's status loop) is none either.
        self.consumer = None;
        self.apply_path_shares(w, path_oncpu);
    }

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
