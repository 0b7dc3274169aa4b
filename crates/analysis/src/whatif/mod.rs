//! What would help: the consumer's AU projected for one change to the
//! pipeline at a time (a lever), from one recording.
//!
//! ```text
//! Session + Analysis ──fit──► Pipeline (over the training window:
//!     the consumer's step = compute + data wait; the data side's cycle
//!     per step and its split by state, two ways: its threads' states
//!     and the critical path of the wait; CPUs; storage headroom)
//!   ──project(lever)──► Projection (AU, steps/s, low..high, reason)
//! ```
//!
//! The model (docs/src/whatif.md): a two-stage pipeline with a queue
//! between the data side and the consumer, so a step lasts
//! max(compute, the data side's cycle). A lever shortens (or lengthens)
//! one part: storage ×k divides the data side's block-I/O share of its
//! cycle by k (Amdahl), more read threads divide the cycle, a slower
//! computation multiplies the compute. The data side is then held to the
//! CPUs left for it (its CPU time per step over them) and to the
//! storage's headroom. The two splits of the cycle give the range.
//! Pure: no I/O.
mod fit;
mod table;
#[cfg(test)]
mod tests;

pub use fit::{MIN_STEPS, Pipeline, Split, State, UNTRACED_MIN_CPUS, Untraced, fit};
pub use table::{HELPS_MIN_GAIN, REPORT_LEVERS, Today, WhatIf, table};

use serde::Serialize;
use storprof_session::load::Session;

use crate::Analysis;

/// What a lever changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeverKind {
    /// Storage k× faster (bandwidth and latency).
    Storage,
    /// The dataset held in the page cache: no read reaches storage.
    Cache,
    /// k× the loader workers or read threads.
    ReadThreads,
    /// The loaders' code on a CPU k× faster (decode, formatting).
    ReaderCpu,
    /// The consumer's computation k× as long (k < 1: shorter).
    Computation,
    /// The network k× faster.
    Network,
    /// The locks and the GIL on the data side gone.
    Lock,
    /// k× the consumers (simulated accelerators, ranks) on this host,
    /// each with a data side like today's.
    Accelerators,
}

impl LeverKind {
    /// Every lever, in the order tables list them.
    pub const ALL: [Self; 8] = [
        Self::Storage,
        Self::Cache,
        Self::ReadThreads,
        Self::ReaderCpu,
        Self::Computation,
        Self::Network,
        Self::Lock,
        Self::Accelerators,
    ];

    /// The name on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Storage => "storage",
            Self::Cache => "cache",
            Self::ReadThreads => "read-threads",
            Self::ReaderCpu => "reader-cpu",
            Self::Computation => "computation",
            Self::Network => "network",
            Self::Lock => "lock",
            Self::Accelerators => "accelerators",
        }
    }

    /// The lever named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// One lever and how far it is pulled: × of today's value (a speed for
/// storage, threads, reader CPU and network; a time for computation).
/// Cache and lock take no factor (they remove a cost).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lever {
    pub kind: LeverKind,
    pub factor: f64,
}

/// One lever's projection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Projection {
    pub lever: LeverKind,
    pub factor: f64,
    /// None: the recording cannot inform this lever (`reason` says why).
    pub projected_au_percentage: Option<f64>,
    pub projected_steps_per_s: Option<f64>,
    /// The range of the AU under the model's two splits of the data side.
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// Today's AU and steps/s, for the table.
    pub au_percentage: f64,
    pub steps_per_s: f64,
    pub reason: String,
}

/// Why a recording gives no projection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoProjection {
    /// A format-1 session or no wake-up probe: no wait-for graph.
    NoWaitGraph,
    /// No consumer was found.
    NoConsumer,
    /// No training window.
    NoWindow,
    /// Too few of the consumer's steps to fit a step time.
    TooFewSteps { steps: u64 },
}

impl std::fmt::Display for NoProjection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoWaitGraph => write!(
                f,
                "no projection: the session has no wait-for graph (recorded without the wake-up probe, or an older format)"
            ),
            Self::NoConsumer => write!(
                f,
                "no projection: no consumer was found (nothing takes the data in steps: a reader alone, fio, dd)"
            ),
            Self::NoWindow => write!(f, "no projection: the recording has no training window"),
            Self::TooFewSteps { steps } => write!(
                f,
                "no projection: {steps} consumer steps in the training window, {MIN_STEPS} needed to fit a step time"
            ),
        }
    }
}

impl std::error::Error for NoProjection {}

/// Projects each of `levers` for the recording `session` with its
/// `analysis`.
pub fn whatif(
    session: &Session,
    analysis: &Analysis,
    levers: &[Lever],
) -> Result<Vec<Projection>, NoProjection> {
    let pipeline = fit(session, analysis)?;
    Ok(levers.iter().map(|l| project(&pipeline, *l)).collect())
}

impl Pipeline {
    /// A step's length with `compute_s` of compute fed by a data side of
    /// cycle `producer_s`: the consumer's overhead, then the longer of the
    /// two (they overlap through the queue).
    fn step_with(&self, compute_s: f64, producer_s: f64) -> f64 {
        self.overhead_s + compute_s.max(producer_s)
    }

    /// The AU (%) of that step.
    fn au_with(&self, compute_s: f64, producer_s: f64) -> f64 {
        let step = self.step_with(compute_s, producer_s);
        if step > 0.0 {
            100.0 * compute_s / step
        } else {
            100.0
        }
    }
}

/// The data side's cycle once its CPU time per step has to fit the CPUs
/// left for it: `cpu_s_per_step` of CPU per step over `cpus` CPUs cannot
/// take less than `cpu_s_per_step / cpus`.
fn cpu_bound(producer_s: f64, cpu_s_per_step: f64, cpus: f64) -> f64 {
    producer_s.max(cpu_s_per_step / cpus.max(0.1))
}

/// The projection of `lever` on `p`.
pub fn project(p: &Pipeline, lever: Lever) -> Projection {
    let today_au = p.au_with(p.compute_s, p.compute_s + p.wait_s);
    let steps_per_s = 1.0 / p.step_s;
    let mut out = Projection {
        lever: lever.kind,
        factor: lever.factor,
        projected_au_percentage: None,
        projected_steps_per_s: None,
        low: None,
        high: None,
        au_percentage: today_au,
        steps_per_s,
        reason: String::new(),
    };
    // The loaders' CPU per step today: their CPUs over the data side's
    // cycle when the consumer waits for it (so that today's CPUs give
    // today's cycle back), over the step when it does not.
    let cycle_s = if p.wait_s > 0.0 {
        p.producer_s
    } else {
        p.step_s
    };
    let cpu_per_step = p.loader_cpus * cycle_s;
    let projected: Result<(Vec<(f64, f64)>, String), String> = match lever.kind {
        LeverKind::Computation => {
            let compute = p.compute_s * lever.factor;
            // A slower consumer lets the data side run at its capacity;
            // the range keeps today's cycle too.
            let producer = if lever.factor > 1.0 {
                p.producer_capacity_s
            } else {
                p.producer_s
            };
            let mut outcomes = vec![(compute, producer), (compute, p.producer_s)];
            if !p.producer_known {
                // Only bounded by today's step: from no slack to all of it.
                outcomes.push((compute, 0.0));
            }
            Ok((
                outcomes,
                format!(
                    "computation {:.3} s → {:.3} s a step; the data side makes a step's data in {:.3} s",
                    p.compute_s, compute, producer
                ),
            ))
        }
        LeverKind::ReadThreads => read_threads(p, lever.factor, cpu_per_step),
        LeverKind::Accelerators => Ok(accelerators(p, lever.factor, cpu_per_step)),
        kind => {
            let (state, k, what) = match kind {
                LeverKind::Storage => (
                    State::Io,
                    lever.factor,
                    format!("storage ×{}", lever.factor),
                ),
                LeverKind::Cache => (State::Io, f64::INFINITY, "the dataset cached".to_string()),
                LeverKind::ReaderCpu => (
                    State::Cpu,
                    lever.factor,
                    format!("the loaders' code ×{} faster", lever.factor),
                ),
                LeverKind::Network => (
                    State::Network,
                    lever.factor,
                    format!("the network ×{}", lever.factor),
                ),
                _ => (
                    State::Lock,
                    f64::INFINITY,
                    "the data side's locks and GIL gone".to_string(),
                ),
            };
            faster_state(p, state, k, &what, cpu_per_step)
        }
    };
    match projected {
        Ok((outcomes, reason)) => {
            let aus: Vec<f64> = outcomes
                .iter()
                .map(|&(c, prod)| p.au_with(c, prod))
                .collect();
            let (c, prod) = outcomes[0];
            out.projected_au_percentage = Some(aus[0]);
            out.projected_steps_per_s = Some(1.0 / p.step_with(c, prod).max(1e-9));
            out.low = aus.iter().copied().reduce(f64::min);
            out.high = aus.iter().copied().reduce(f64::max);
            out.reason = reason;
        }
        Err(why) => out.reason = why,
    }
    if matches!(lever.kind, LeverKind::ReadThreads | LeverKind::Accelerators) {
        unknown_server(p, &mut out);
    }
    out
}

/// A data side waiting on the network this share of its cycle or more
/// scales with more readers only as far as the server and the network
/// have headroom, which one recording does not show.
pub const NETWORK_UNKNOWN_SHARE: f64 = 0.2;

/// More readers on a data side that waits on the network: a round trip's
/// latency shrinks per byte with more requests in flight, a saturated
/// server's does not, and the recording cannot tell them apart (a
/// loopback S3 server on this host re-ran with twice the threads and
/// gained nothing). The projection becomes a range from no gain to what
/// the rest of the model allows.
fn unknown_server(p: &Pipeline, out: &mut Projection) {
    let network = [p.loader_split, p.path_split]
        .into_iter()
        .flatten()
        .map(|s| s.network)
        .fold(0.0, f64::max);
    let Some(high) = out.high.filter(|_| network >= NETWORK_UNKNOWN_SHARE) else {
        return;
    };
    out.low = Some(out.au_percentage.min(high));
    out.high = Some(high.max(out.au_percentage));
    out.projected_au_percentage = None;
    out.projected_steps_per_s = None;
    out.reason = format!(
        "not measurable from this recording: {:.0}% of the data side's cycle waits on the network, and the server's headroom is not in it (from no gain to {:.1}%: {})",
        100.0 * network,
        high,
        out.reason
    );
}

/// A lever that makes the data side's `state` `k`× faster: Amdahl over its
/// cycle, under each split, then held to the CPUs left for it.
fn faster_state(
    p: &Pipeline,
    state: State,
    k: f64,
    what: &str,
    cpu_per_step: f64,
) -> Result<(Vec<(f64, f64)>, String), String> {
    if state == State::Io && !p.device_reads {
        return Err(format!(
            "{what}: not measurable from this recording: no read reached a block device"
        ));
    }
    let splits: Vec<Split> = [p.loader_split, p.path_split]
        .into_iter()
        .flatten()
        .collect();
    if splits.is_empty() {
        return Err(format!(
            "{what}: not measurable from this recording: the data side's time is not split by state"
        ));
    }
    let shrink = if k.is_infinite() { 1.0 } else { 1.0 - 1.0 / k };
    let (cpus, cpus_low, cpus_high) = p.loader_cpu_range();
    let mut outcomes = Vec::new();
    for split in &splits {
        let share = split.of(state);
        let producer = p.producer_s * (1.0 - share * shrink);
        // Faster reader code needs less CPU a step; anything else makes the
        // same CPU work come faster.
        let cpu = if state == State::Cpu {
            cpu_per_step * (1.0 - shrink)
        } else {
            cpu_per_step
        };
        // The CPUs hold back a gain; they cannot make today's cycle
        // slower (a side paced by its consumer used less than it could).
        let held = |cpus: f64| cpu_bound(producer, cpu, cpus).min(producer.max(p.producer_s));
        outcomes.push((p.compute_s, held(cpus)));
        outcomes.push((p.compute_s, held(cpus_low)));
        outcomes.push((p.compute_s, held(cpus_high)));
    }
    let share = splits[0].of(state);
    let reason = format!(
        "{what}: {:.0}% of the data side's cycle is in that state; a step's data then takes {:.3} s (today {:.3} s)",
        100.0 * share,
        outcomes[0].1,
        p.producer_s
    );
    Ok((outcomes, reason))
}

/// k× the pipelines on this host: each consumer computes as today, its
/// data side makes a step's data in today's cycle unless the CPUs or the
/// storage run short. The consumers and their helpers take k× today's
/// CPUs; the loaders' k× CPU per step has to fit the rest, and their k×
/// reads the storage's headroom.
fn accelerators(p: &Pipeline, k: f64, cpu_per_step: f64) -> (Vec<(f64, f64)>, String) {
    let k = k.max(1e-9);
    let cpus = (p.loader_cpu_range().0 + p.others_cpus - k * p.others_cpus).max(0.1);
    let mut producer = p.producer_s;
    let mut limits = Vec::new();
    let cpu_floor = k * cpu_per_step / cpus;
    if cpu_floor > producer {
        producer = cpu_floor;
        limits.push(format!(
            "the {cpus:.1} CPUs left for {k} data sides (each needs {cpu_per_step:.3} s of CPU a step)"
        ));
    }
    let io_share = p.loader_split.or(p.path_split).map_or(0.0, |s| s.io);
    if let Some(h) = p.io_headroom.filter(|_| io_share >= 0.2) {
        let io_floor = p.producer_s * k / h;
        if io_floor > producer {
            producer = io_floor;
            limits.push(format!("the storage's headroom (×{h:.1} of today's rate)"));
        }
    }
    let reason = if limits.is_empty() {
        format!(
            "{k} consumers, each with today's data side: a step's data in {producer:.3} s (today {:.3} s)",
            p.producer_s
        )
    } else {
        format!(
            "{k} consumers, each with today's data side: held to {}; a step's data in {producer:.3} s (today {:.3} s)",
            limits.join(" and "),
            p.producer_s
        )
    };
    // The range: from those limits to none (a server or device whose
    // limit this recording did not see is not in either).
    (
        vec![(p.compute_s, producer), (p.compute_s, p.producer_s)],
        reason,
    )
}

/// "the 1.8 CPUs left for the loaders (they need 0.003 s of CPU a step;
/// 1.7 to 1.9 CPUs: ...)": the CPUs more loaders could have, what took
/// the rest, and their range when the job's threads queued for a CPU.
fn cpus_phrase(p: &Pipeline, cpu_per_step: f64) -> String {
    let (cpus, low, high) = p.loader_cpu_range();
    let mut out = format!("the {cpus:.1} CPUs left for the loaders");
    if let Some(u) = p.untraced.map(|u| u.total()).filter(|u| *u > 0.0) {
        out.push_str(&format!(", after {u:.1} CPUs of untraced load"));
    }
    out.push_str(&format!(" (they need {cpu_per_step:.3} s of CPU a step"));
    if high - low >= 0.05 {
        out.push_str(&format!(
            "; {low:.1} to {high:.1} CPUs: the job's threads waited {:.1} CPUs for a CPU, beside idle time more loaders may not take",
            p.queued_cpus
        ));
    }
    out.push(')');
    out
}

/// A lock share of the data side's cycle below this does not hold more
/// loaders back in the model.
pub const SERIAL_MIN_SHARE: f64 = 0.1;

/// k× the loaders: their cycle divided by k, held to the CPUs left for
/// them, to the storage's headroom and to the lock they wait for.
fn read_threads(
    p: &Pipeline,
    k: f64,
    cpu_per_step: f64,
) -> Result<(Vec<(f64, f64)>, String), String> {
    if p.loaders == 0 {
        return Err(
            "read threads: not measurable from this recording: no loader thread was found".into(),
        );
    }
    let scaled = p.producer_s / k.max(1e-9);
    let mut producer = scaled;
    let mut limits = Vec::new();
    let (cpus, cpus_low, cpus_high) = p.loader_cpu_range();
    // The CPUs hold back a gain; they cannot make today's cycle slower.
    let cpu_floor = |cpus: f64| (cpu_per_step / cpus.max(0.1)).min(p.producer_s);
    if cpu_floor(cpus) > producer {
        producer = cpu_floor(cpus);
        limits.push(cpus_phrase(p, cpu_per_step));
    }
    let io_share = p.loader_split.or(p.path_split).map_or(0.0, |s| s.io);
    if let Some(h) = p.io_headroom.filter(|_| io_share >= 0.2) {
        let io_floor = p.producer_s / h;
        if io_floor > producer {
            producer = io_floor;
            limits.push(format!("the storage's headroom (×{h:.1} of today's rate)"));
        }
    }
    // A lock the loaders wait for is held by one of them at a time: more
    // loaders only wait longer for it (Amdahl with that share serial).
    let serial = p.serial_share.clamp(0.0, 1.0);
    if serial >= SERIAL_MIN_SHARE {
        let lock_floor = p.producer_s * (serial + (1.0 - serial) / k.max(1e-9));
        if lock_floor > producer {
            producer = lock_floor;
            limits.push(format!(
                "the lock they wait for ({:.0}% of their cycle, held by one at a time)",
                100.0 * serial
            ));
        }
    }
    let reason = if limits.is_empty() {
        format!(
            "{} loader threads ×{k}: a step's data in {:.3} s (today {:.3} s)",
            p.loaders, producer, p.producer_s
        )
    } else {
        format!(
            "{} loader threads ×{k}: held to {}; a step's data in {:.3} s (today {:.3} s)",
            p.loaders,
            limits.join(" and "),
            producer,
            p.producer_s
        )
    };
    // The range: perfect scaling against the limits found, and, behind a
    // lock, no gain at all (the lock already held all the time).
    let mut outcomes = vec![
        (p.compute_s, producer),
        (p.compute_s, scaled),
        (p.compute_s, producer.max(cpu_floor(cpus_low))),
        (p.compute_s, producer.min(scaled.max(cpu_floor(cpus_high)))),
    ];
    if serial >= SERIAL_MIN_SHARE {
        outcomes.push((p.compute_s, p.producer_s));
    }
    Ok((outcomes, reason))
}
