//! The pipeline model fitted from one recording's training window: the
//! consumer's step (compute and data wait), the data side's cycle per step
//! and what it spends it on, the CPUs and the storage's headroom.
use storprof_session::load::Session;

use super::NoProjection;
use crate::{
    Analysis,
    waitgraph::{PathKind, Role},
};

/// Fewer consumer steps than this in the window fit nothing.
pub const MIN_STEPS: u64 = 20;

/// A data wait below this share of the consumer's step: the consumer is
/// the bottleneck and the data side's cycle is only known to be shorter.
pub const DATA_BOUND_WAIT_SHARE: f64 = 0.02;

/// Where the data side's time goes, as shares (summing to 1 when known).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Split {
    /// On a CPU (user and kernel).
    pub cpu: f64,
    /// Runnable: waiting for a CPU.
    pub runnable: f64,
    /// Uninterruptible waits: block I/O, page-cache misses.
    pub io: f64,
    /// Waiting for the network.
    pub network: f64,
    /// Locks and the GIL.
    pub lock: f64,
    /// Anything else (timed sleeps, waits the model cannot name).
    pub other: f64,
}

impl Split {
    /// The share of `lever`'s state.
    pub fn of(&self, state: State) -> f64 {
        match state {
            State::Cpu => self.cpu,
            State::Io => self.io,
            State::Network => self.network,
            State::Lock => self.lock,
        }
    }

    fn normalized(self) -> Option<Self> {
        let total = self.cpu + self.runnable + self.io + self.network + self.lock + self.other;
        (total > 0.0).then(|| Self {
            cpu: self.cpu / total,
            runnable: self.runnable / total,
            io: self.io / total,
            network: self.network / total,
            lock: self.lock / total,
            other: self.other / total,
        })
    }
}

/// A state of the data side a lever makes faster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Cpu,
    Io,
    Network,
    Lock,
}

/// The fitted model.
#[derive(Clone, Debug, PartialEq)]
pub struct Pipeline {
    /// The consumer's steps in the window and their mean length, s.
    pub steps: u64,
    pub step_s: f64,
    /// Of a step: the consumer's compute (what a computation lever
    /// scales), its own time that does not overlap the data side (taking
    /// batches when its compute is emulated and known apart; the
    /// hand-off's wait when it barely waits), and its wait for data, s.
    pub compute_s: f64,
    pub overhead_s: f64,
    pub wait_s: f64,
    /// The data side's cycle per step, s: the consumer's compute and data
    /// wait when it waits for data; when it does not, the data side's busy
    /// share of the step (`producer_known` false: only bounded by them).
    pub producer_s: f64,
    pub producer_known: bool,
    /// The data side's cycle at its capacity, s: the producers' busy share
    /// of today's cycle. Loaders that idle while the consumer waits (a
    /// worker whose batch is next but not yet asked for, a full output
    /// queue) lose that time to the hand-off; a slower consumer leaves the
    /// queue room to absorb it.
    pub producer_capacity_s: f64,
    /// The data side's busy time split by its threads' states over the
    /// window (None: no per-bucket states).
    pub loader_split: Option<Split>,
    /// The consumer's data wait split along the critical path.
    pub path_split: Option<Split>,
    /// Loader and helper threads, and the CPUs they kept busy.
    pub loaders: usize,
    pub loader_cpus: f64,
    /// CPUs the loaders could use: the machine's, less what the consumer,
    /// every other traced thread and the untraced load used over the
    /// window (at least what the loaders used).
    pub cpus_for_loaders: f64,
    /// The job's threads' runnable time over the window, in CPUs: CPU
    /// they asked for and waited for.
    pub queued_cpus: f64,
    /// The CPUs every other traced thread (the consumer, its helpers)
    /// kept busy over the window.
    pub others_cpus: f64,
    /// The machine's CPU the job did not use (None: no host CPU series).
    pub untraced: Option<Untraced>,
    /// How much faster the storage could serve reads than it did (× of
    /// today's rate) before its read limit or a busy device stops it;
    /// None: no limit seen.
    pub io_headroom: Option<f64>,
    /// Whether reads reached a block device.
    pub device_reads: bool,
    /// The share of the data side's cycle spent waiting for a lock that
    /// more loaders would wait for too: its locks, and the GIL when the
    /// loaders are threads of one process (processes each have their own).
    pub serial_share: f64,
}

impl Pipeline {
    /// The CPUs more loaders could have: (the point, low, high). All of
    /// the machine's idle CPU at the high end; at the low end none of the
    /// idle time the job's threads were queued beside (a runnable thread
    /// beside an idle CPU: wake-up latency, the scheduler's balance,
    /// workers idle behind a full prefetch window, which more loaders may
    /// or may not fill); the point halfway, since one recording does not
    /// say which.
    pub fn loader_cpu_range(&self) -> (f64, f64, f64) {
        let high = self.cpus_for_loaders;
        let low = (high - self.queued_cpus).max(self.loader_cpus).min(high);
        (0.5 * (low + high), low, high)
    }
}

/// The machine's CPU over the window that no traced thread used, in CPUs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Untraced {
    /// Other processes, kernel threads and interrupts: here with or
    /// without storprof (storprof's own CPU taken out).
    pub others_cpus: f64,
    /// A hypervisor's steal: CPU the machine wanted and did not get.
    pub steal_cpus: f64,
}

impl Untraced {
    /// CPUs the job could not have had.
    pub fn total(&self) -> f64 {
        self.others_cpus + self.steal_cpus
    }
}

/// Untraced CPU below this (CPUs) is within what the host series and the
/// threads' own series disagree by (ticks against switches).
pub const UNTRACED_MIN_CPUS: f64 = 0.05;

/// The time-series buckets that [start_s, end_s] overlaps, when there is
/// a series.
fn overlapped_buckets(session: &Session, start_s: f64, end_s: f64) -> Option<(usize, usize)> {
    let ts = session.timeseries.as_ref()?;
    let bucket_s = ts.bucket_ns.max(1) as f64 / 1e9;
    let b0 = (start_s.max(0.0) / bucket_s).floor() as usize;
    let b1 = ((end_s / bucket_s).ceil() as usize).min(ts.bucket_count());
    (b1 > b0).then_some((b0, b1))
}

/// The job's traced threads over the window's whole buckets, in CPUs.
#[derive(Clone, Copy, Debug, Default)]
struct JobCpus {
    /// The loaders' and helpers' on-CPU time.
    loaders: f64,
    /// Every other traced thread's (the consumer, its helpers).
    others: f64,
    /// All of them runnable: waiting for a CPU.
    queued: f64,
}

impl JobCpus {
    /// One pass over the threads' series; None without per-bucket series
    /// or a window of whole buckets. The buckets' span, not the window's
    /// wall time, divides their sums: the window's partial buckets at
    /// either end are not in them.
    fn over_window(
        session: &Session,
        loader_tids: &[u32],
        buckets: Option<(usize, usize)>,
    ) -> Option<(Self, f64)> {
        let ts = session.timeseries.as_ref()?;
        let (b0, b1) = buckets?;
        let span_s = b1.saturating_sub(b0) as f64 * ts.bucket_ns as f64 / 1e9;
        if span_s <= 0.0 {
            return None;
        }
        let mut c = Self::default();
        for t in &ts.threads {
            let on_cpu = t.on_cpu().sum(b0, b1) as f64 / 1e9 / span_s;
            if loader_tids.contains(&t.tid) {
                c.loaders += on_cpu;
            } else {
                c.others += on_cpu;
            }
            c.queued += t.runnable().sum(b0, b1) as f64 / 1e9 / span_s;
        }
        Some((c, span_s))
    }

    fn traced(&self) -> f64 {
        self.loaders + self.others
    }
}

/// The machine's busy CPU over `buckets` (spanning `span_s`) less the
/// traced threads' (`traced_cpus`) and storprof's own (spread evenly
/// over the recording), and its steal. None without a host CPU series.
fn untraced_cpus(
    session: &Session,
    buckets: (usize, usize),
    span_s: f64,
    traced_cpus: f64,
) -> Option<Untraced> {
    let ts = session.timeseries.as_ref()?;
    let host = ts.host_cpu.as_ref()?;
    let (b0, b1) = buckets;
    let sum = |v: &[u64]| v.iter().skip(b0).take(b1 - b0).sum::<u64>() as f64 / 1e9;
    let busy = sum(&host.busy_ns) / span_s;
    let steal = sum(&host.steal_ns) / span_s;
    let info = &session.info;
    let observer = info
        .recorder_cpu_recording_s
        .or(info.recorder_cpu_s)
        .filter(|_| info.duration_s > 0.0)
        .map_or(0.0, |s| s / info.duration_s);
    let others = busy - traced_cpus - observer;
    Some(Untraced {
        others_cpus: if others >= UNTRACED_MIN_CPUS {
            others
        } else {
            0.0
        },
        steal_cpus: if steal >= UNTRACED_MIN_CPUS {
            steal
        } else {
            0.0
        },
    })
}

/// Fits the model to `session` and its `analysis`.
pub fn fit(session: &Session, analysis: &Analysis) -> Result<Pipeline, NoProjection> {
    let wait = analysis.wait.as_ref().ok_or(NoProjection::NoWaitGraph)?;
    let window = wait.window.as_ref().ok_or(NoProjection::NoWindow)?;
    let consumer = wait.consumers.first().ok_or(NoProjection::NoConsumer)?;
    if consumer.steps < MIN_STEPS {
        return Err(NoProjection::TooFewSteps {
            steps: consumer.steps,
        });
    }
    let window_s = consumer.window_ns as f64 / 1e9;
    if window_s <= 0.0 {
        return Err(NoProjection::NoWindow);
    }
    let steps = consumer.steps as f64;
    let step_s = window_s / steps;
    // The data wait is what the data side makes the consumer wait; the
    // rest of a step is its compute and, for a consumer that emulates
    // its compute (DLIO, the bench: its timed sleeps), its own time
    // (taking and collating the batch, the GIL) that does not overlap the
    // data side and does not scale with the computation.
    let wait_s = (consumer.data_wait_ns as f64 / 1e9 / steps).min(step_s);
    let emulated_s = consumer.compute_ns as f64 / 1e9 / steps;
    let (compute_s, overhead_s) = if consumer.emulated_compute && emulated_s > 0.0 {
        let compute = emulated_s.min(step_s - wait_s);
        (compute, (step_s - wait_s - compute).max(0.0))
    } else {
        (step_s - wait_s, 0.0)
    };

    let loader_tids: Vec<u32> = wait
        .roles
        .iter()
        .filter(|r| matches!(r.role, Role::Loader | Role::Helper))
        .map(|r| r.tid)
        .collect();
    let states = LoaderStates::over_window(session, &loader_tids, window.buckets);
    let path_split = path_split(wait);
    let loader_split = states.as_ref().and_then(|s| loader_split(s, path_split));
    let data_bound = wait_s / step_s >= DATA_BOUND_WAIT_SHARE;
    // A consumer that barely waits waits for the hand-off, not for the
    // data side's capacity: a fixed cost of its step like its own time.
    let (wait_s, overhead_s) = if data_bound {
        (wait_s, overhead_s)
    } else {
        (0.0, overhead_s + wait_s)
    };
    let busy_share = states.as_ref().map(LoaderStates::busy_share);
    // The data side's cycle as the consumer sees it: its compute and its
    // wait when it waits; else bounded by them.
    let visible_s = compute_s + wait_s;
    let (producer_s, producer_known) = match (data_bound, busy_share) {
        (true, _) => (visible_s, true),
        (false, Some(b)) => (step_s * b.clamp(0.0, 1.0), true),
        (false, None) => (visible_s, false),
    };
    let producer_capacity_s = match (data_bound, busy_share) {
        (true, Some(b)) => producer_s * b.clamp(0.0, 1.0),
        _ => producer_s,
    };

    let f = &analysis.features;
    // CPUs are rates: a window shorter than two whole buckets takes them
    // over the buckets it overlaps.
    let cpu_buckets = window
        .buckets
        .or_else(|| overlapped_buckets(session, window.start_s, window.end_s));
    let job = JobCpus::over_window(session, &loader_tids, cpu_buckets);
    // Without per-bucket series: the whole recording's CPUs.
    let (loader_cpus, others_cpus, queued_cpus) = match job {
        Some((c, _)) => (c.loaders, c.others, c.queued),
        None => (0.0, f.cpus_used, 0.0),
    };
    let untraced = job
        .zip(cpu_buckets)
        .and_then(|((c, span_s), buckets)| untraced_cpus(session, buckets, span_s, c.traced()));
    let cpus_for_loaders =
        (f64::from(f.num_cpus) - others_cpus - untraced.map_or(0.0, |u| u.total()))
            .max(loader_cpus)
            .max(0.1);

    let device_reads = f.device_read_bytes > 0;
    let io_headroom = f
        .top_device
        .as_ref()
        .filter(|_| device_reads)
        .and_then(|d| {
            // Over the window when the time series has it: start-up reads
            // less, and would show headroom the training does not have.
            let (rate, busy) = device_over_window(session, &d.name, window.buckets)
                .unwrap_or((d.read_mib_per_s, d.utilization));
            let limit = f
                .io_limit
                .as_ref()
                .and_then(|l| l.read_mib_per_s)
                .filter(|_| rate > 0.0)
                .map(|limit| limit / rate);
            // A device busy u of the time has about 1/u of its rate left.
            let busy = (busy > 0.05).then(|| 0.95 / busy);
            match (limit, busy) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        })
        .map(|h| h.max(1.0));

    let loader_processes: std::collections::BTreeSet<u32> = wait
        .roles
        .iter()
        .filter(|r| matches!(r.role, Role::Loader | Role::Helper))
        .map(|r| r.pid)
        .collect();
    let serial_share = serial_share(
        wait,
        loader_split.or(path_split),
        loader_processes.len() <= 1,
    );

    Ok(Pipeline {
        steps: consumer.steps,
        step_s,
        compute_s,
        overhead_s,
        wait_s,
        producer_s,
        producer_known,
        producer_capacity_s,
        loader_split,
        path_split,
        loaders: loader_tids.len(),
        loader_cpus,
        cpus_for_loaders,
        queued_cpus,
        others_cpus,
        untraced,
        io_headroom,
        device_reads,
        serial_share,
    })
}

/// The lock share of `split` that more loaders would not shorten: all of
/// it for locks; the GIL's part only when the loaders share one process.
fn serial_share(wait: &crate::WaitAnalysis, split: Option<Split>, one_process: bool) -> f64 {
    let Some(split) = split else {
        return 0.0;
    };
    let of = |kind: PathKind| -> f64 {
        wait.critical_path
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| p.share)
            .sum()
    };
    let (lock, gil) = (of(PathKind::Lock), of(PathKind::Gil));
    let shared = if lock + gil <= 0.0 || one_process {
        1.0
    } else {
        lock / (lock + gil)
    };
    split.lock * shared
}

/// Device `name`'s read rate (MiB/s) and busy share over the window's
/// buckets; None without them.
fn device_over_window(
    session: &Session,
    name: &str,
    buckets: Option<(usize, usize)>,
) -> Option<(f64, f64)> {
    let ts = session.timeseries.as_ref()?;
    let (b0, b1) = buckets?;
    let dev = ts.devices.iter().find(|d| d.name == name)?;
    let span_s = (b1.saturating_sub(b0)) as f64 * ts.bucket_ns as f64 / 1e9;
    if span_s <= 0.0 {
        return None;
    }
    let sum = |v: &[u64]| v.iter().skip(b0).take(b1.saturating_sub(b0)).sum::<u64>() as f64;
    let rate = sum(&dev.read_bytes) / (1 << 20) as f64 / span_s;
    let busy = (sum(&dev.busy_ns) / 1e9 / span_s).min(1.0);
    Some((rate, busy))
}

/// The loaders' time split by state. Their thread states cannot tell a
/// sleep on the network or a lock from an idle one (a worker whose queue
/// is full), so their sleep counts as network and lock waits only as far
/// as the critical path saw those beside the busy states: in the path's
/// proportion to them, and never more than they slept. A path of nothing
/// but waits (a reader on the network) gives the sleep as the path
/// splits it.
fn loader_split(s: &LoaderStates, path: Option<Split>) -> Option<Split> {
    let busy_s = s.cpu_s + s.runnable_s + s.io_s;
    let (network_s, lock_s) = match path {
        Some(p) if p.cpu + p.runnable + p.io >= 0.05 => {
            let per_busy = busy_s / (p.cpu + p.runnable + p.io);
            let net = p.network * per_busy;
            let lock = p.lock * per_busy;
            let scale = if net + lock > s.sleep_s {
                s.sleep_s / (net + lock)
            } else {
                1.0
            };
            (net * scale, lock * scale)
        }
        Some(p) if p.network + p.lock + p.other > 0.0 => {
            let rest = p.network + p.lock + p.other;
            (s.sleep_s * p.network / rest, s.sleep_s * p.lock / rest)
        }
        _ => (0.0, 0.0),
    };
    Split {
        cpu: s.cpu_s,
        runnable: s.runnable_s,
        io: s.io_s,
        network: network_s,
        lock: lock_s,
        other: 0.0,
    }
    .normalized()
}

/// The consumer's data wait split along the critical path (None: no path).
fn path_split(wait: &crate::WaitAnalysis) -> Option<Split> {
    let mut s = Split::default();
    for p in &wait.critical_path {
        match p.kind {
            PathKind::CpuUser | PathKind::CpuKernel => s.cpu += p.share,
            PathKind::Runnable => s.runnable += p.share,
            PathKind::BlockIo => s.io += p.share,
            PathKind::Network => s.network += p.share,
            PathKind::Lock | PathKind::Gil => s.lock += p.share,
            _ => s.other += p.share,
        }
    }
    s.normalized()
}

/// The loader threads' time over the window, by state, s.
#[derive(Clone, Debug, Default)]
struct LoaderStates {
    cpu_s: f64,
    runnable_s: f64,
    io_s: f64,
    sleep_s: f64,
    /// Each thread's busy share (on a CPU, runnable or in block I/O).
    busy_shares: Vec<f64>,
}

/// A loader busy less than this share of the busiest one's is a helper
/// (a feeder thread, a pool's idle spare), not a producer in parallel.
const PRODUCER_MIN_OF_BUSIEST: f64 = 0.25;

impl LoaderStates {
    /// Summed over the window's buckets of `tids`' series; None without
    /// per-bucket states or loaders.
    fn over_window(
        session: &Session,
        tids: &[u32],
        buckets: Option<(usize, usize)>,
    ) -> Option<Self> {
        let ts = session.timeseries.as_ref()?;
        let (b0, b1) = buckets?;
        let mut s = Self::default();
        for t in ts.threads.iter().filter(|t| tids.contains(&t.tid)) {
            if t.runnable_ns.is_empty() && t.sleeping_ns.is_empty() && t.blocked_io_ns.is_empty() {
                continue;
            }
            let cpu = t.on_cpu().sum(b0, b1) as f64 / 1e9;
            let runnable = t.runnable().sum(b0, b1) as f64 / 1e9;
            let io = t.blocked_io().sum(b0, b1) as f64 / 1e9;
            let sleep = t.sleeping().sum(b0, b1) as f64 / 1e9;
            s.cpu_s += cpu;
            s.runnable_s += runnable;
            s.io_s += io;
            s.sleep_s += sleep;
            let total = cpu + runnable + io + sleep;
            if total > 0.0 {
                s.busy_shares.push((cpu + runnable + io) / total);
            }
        }
        (s.cpu_s + s.runnable_s + s.io_s + s.sleep_s > 0.0).then_some(s)
    }

    /// The share of their time the loaders that produce in parallel were
    /// busy (not asleep): the mean over those busy at least
    /// [`PRODUCER_MIN_OF_BUSIEST`] of the busiest, so that feeder threads
    /// and idle spares do not dilute it.
    fn busy_share(&self) -> f64 {
        let busiest = self.busy_shares.iter().copied().fold(0.0, f64::max);
        let producers: Vec<f64> = self
            .busy_shares
            .iter()
            .copied()
            .filter(|b| *b >= PRODUCER_MIN_OF_BUSIEST * busiest)
            .collect();
        if producers.is_empty() {
            1.0
        } else {
            producers.iter().sum::<f64>() / producers.len() as f64
        }
    }
}
