//! The live view and the early verdict: while a recording runs, its data so
//! far is analysed every few seconds, shown, and (with `--until-verdict`)
//! watched until the verdict has held long enough to stop.
//!
//! ```text
//! run_loop, every LiveOptions::interval:
//!   session_writer::build_session (the recorder's own drains, no file)
//!     ─► SessionParts::to_session ─► LiveOptions::analysis (the caller's:
//!        the analysis and its verdict, which this crate does not know)
//!     ─► LiveStatus ─► VerdictSmoother ─► Screen (block | lines)
//!                   └► VerdictHold::update ─► stop?
//! ```
//!
//! Everything from the analysis on is pure and unit-tested; the screen
//! writes ANSI to stderr: a status block pinned under a scroll region, so
//! the workload's own output scrolls above it.
use std::{fmt, sync::Arc, time::Duration};

use super::screen::clock;

pub use super::screen::Screen;

use storprof_session::{
    load::Session,
    model::{Buckets, TimeSeries},
};

/// How the live view is shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LiveView {
    /// A status block when stderr is a terminal, else one line per update.
    #[default]
    Auto,
    /// A status block under the workload's output (stderr must be a terminal).
    Block,
    /// One status line per update.
    Lines,
    /// Nothing (the early verdict still works).
    Off,
}

/// What happens to the workload once an early verdict stops the recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ThenAction {
    /// SIGTERM, and SIGKILL after 5 s.
    Stop,
    /// Leave it running.
    Continue,
}

/// Options of the live view and the early verdict. Defaults per field.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// Default `Auto`.
    pub view: LiveView,
    /// Time between two analyses, at the least. Default 5 s.
    pub interval: Duration,
    /// The share of one CPU the analyses may take on average since the
    /// recording began: the first comes once the budget has earned
    /// [`FIRST_ANALYSIS_CPU_S`], each next one once it has earned back
    /// what the analyses so far cost, so a long recording, whose analysis
    /// costs more, is analysed less often instead of taking CPU from the
    /// job. Between analyses the view's clock, rates and busiest threads
    /// are refreshed every `interval` from the time series (cheap). None:
    /// an analysis every `interval`. Not applied with `until_verdict` (an
    /// early stop needs the verdict watched at `interval`). Default 0.01.
    pub cpu_budget: Option<f64>,
    /// Stop once the verdict and its confidence label have held this long
    /// over the training window. Default None: record to the end.
    pub until_verdict: Option<Duration>,
    /// Default None: `Stop` for a launched command, `Continue` for `--pid`.
    pub then: Option<ThenAction>,
    /// What turns the recording so far into a status with a verdict.
    /// Default None: no analysis, so no live view and no early verdict.
    pub analysis: Option<LiveAnalysis>,
}

/// Turns the session so far into a live status with its verdict: called
/// with the session, the seconds since the recording began, and the
/// seconds the rates and thread states look back over. The binary wires
/// the analysis in, so recording knows nothing of verdicts but their names.
#[derive(Clone)]
pub struct LiveAnalysis(pub Arc<LiveAnalysisFn>);

/// The function a [`LiveAnalysis`] holds: (session, elapsed s, recent s).
pub type LiveAnalysisFn = dyn Fn(&Session, f64, f64) -> LiveStatus + Send + Sync;

impl fmt::Debug for LiveAnalysis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LiveAnalysis")
    }
}

/// A verdict as the live view handles it: its name, and whether it is a
/// stall (shown and reached at once, with no hold).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveVerdict {
    pub name: &'static str,
    pub stalled: bool,
}

impl LiveVerdict {
    /// Stands in before any analysis (never shown: `too_early` is).
    pub const NONE: Self = Self {
        name: "none",
        stalled: false,
    };
}

impl fmt::Display for LiveVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl Default for LiveOptions {
    fn default() -> Self {
        Self {
            view: LiveView::Auto,
            interval: Duration::from_secs(5),
            cpu_budget: Some(0.01),
            until_verdict: None,
            then: None,
            analysis: None,
        }
    }
}

impl LiveOptions {
    /// True when the recording loop has to analyse as it goes.
    pub fn active(&self) -> bool {
        self.analysis.is_some() && (self.view != LiveView::Off || self.until_verdict.is_some())
    }

    /// The budget the analyses keep to, when they keep to one.
    fn budget(&self) -> Option<f64> {
        self.cpu_budget
            .filter(|b| *b > 0.0 && self.until_verdict.is_none())
    }

    /// Seconds since the recording's start of the first analysis.
    pub fn first_analysis_s(&self) -> f64 {
        let interval = self.interval.as_secs_f64();
        self.budget()
            .map_or(interval, |b| (FIRST_ANALYSIS_CPU_S / b).max(interval))
    }

    /// Seconds since the recording's start of the next analysis, after
    /// analyses that cost `spent_s` seconds of CPU in all, the last ending
    /// at `elapsed_s` (see `cpu_budget`).
    pub fn next_analysis_s(&self, elapsed_s: f64, spent_s: f64) -> f64 {
        let interval = self.interval.as_secs_f64();
        self.budget().map_or(elapsed_s + interval, |b| {
            super::budgeted_next_s(elapsed_s, interval, spent_s, b)
        })
    }
}

/// One busy thread as the live view shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveThread {
    pub comm: String,
    pub tid: u32,
    /// Share of the last `recent_s` on a CPU.
    pub on_cpu: f64,
    /// "on-cpu", "runnable", "sleeping" or "blocked-io": where it spent most
    /// of that time; "off-cpu" when it was off CPU all of it (not accounted
    /// before it comes back).
    pub state: &'static str,
}

impl LiveThread {
    /// `comm/tid NN% state`, as both views show it (`comm (exited
    /// threads)` for a folded group).
    pub fn label(&self) -> String {
        use storprof_session::model::{folded_group_label, is_folded_group};
        let name = if is_folded_group(self.tid) {
            folded_group_label(&self.comm)
        } else {
            format!("{}/{}", self.comm, self.tid)
        };
        format!("{name} {:.0}% {}", self.on_cpu * 100.0, self.state)
    }
}

/// What one live update shows.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveStatus {
    pub elapsed_s: f64,
    /// "start-up", "training" or "tear-down" (from the wait-for graph), or
    /// without a consumer "reading" while data flows, "quiet" when it
    /// stopped, "running" for a busy job that never read.
    pub phase: &'static str,
    /// When the training window (or, without a consumer, the reading)
    /// began, seconds since the start.
    pub training_start_s: Option<f64>,
    /// The consumer's last exchange with the data side so far (the
    /// window's end); None without a consumer.
    pub training_end_s: Option<f64>,
    /// The consumer's AU as the kernel sees it so far (%).
    pub au: Option<f64>,
    pub verdict: LiveVerdict,
    pub confidence: f64,
    pub confidence_label: String,
    pub inconclusive: bool,
    pub headline: String,
    /// Over the last `recent_s`: block-device reads and read-syscall bytes.
    pub device_mib_per_s: f64,
    pub read_mib_per_s: f64,
    pub recent_s: f64,
    pub busiest: Vec<LiveThread>,
    /// Why the verdict cannot mean much yet (too few of the consumer's
    /// steps, too short a training window); None once it can.
    pub too_early: Option<String>,
    /// The verdict being shown, which changes only once a new one held
    /// for [`VerdictSmoother`]'s updates (the analysis's own is `verdict`);
    /// None while it is too early.
    pub shown: Option<LiveVerdict>,
    /// The consumer the analysis found (tid), if any: a verdict about
    /// another thread than the last update's is a new reading.
    pub consumer: Option<u32>,
    /// The fix projected to help most (`read-threads ×2 → AU 62%`),
    /// "nothing on the data side" when none would, None while it is too
    /// early or the recording gives no projection.
    pub help: Option<String>,
}

/// What the first analysis is taken to cost (s of CPU) before any was
/// measured: what a PyTorch job's first analysis costs here (0.34-0.42 s
/// on the real DLIO benchmark: its stacks symbolized for the first time,
/// the session built, the analysis), so that the first keeps to the
/// budget too. With the default budget it comes 40 s in.
pub const FIRST_ANALYSIS_CPU_S: f64 = 0.4;

/// Busiest threads shown.
const BUSIEST: usize = 3;

/// Without reads or a consumer, a job whose threads together kept this
/// many CPUs busy of late is running (not starting up).
pub const RUNNING_CPUS: f64 = 0.5;

/// What the time series says of the last `recent_s` seconds: the rates
/// and the busiest threads a status shows. Cheap next to an analysis: a
/// live view refreshes it between analyses ([`refresh`]).
pub struct Recent {
    pub device_mib_per_s: f64,
    pub read_mib_per_s: f64,
    pub read_bytes: u64,
    /// The seconds looked back over (the time series may be shorter).
    pub window_s: f64,
    /// CPUs the threads kept busy together.
    pub cpus_used: f64,
    pub busiest: Vec<LiveThread>,
}

impl Recent {
    pub fn of(ts: Option<&TimeSeries>, recent_s: f64) -> Self {
        let bucket_s = ts.map_or(1.0, |t| t.bucket_ns.max(1) as f64 / 1e9);
        let buckets = ts.map_or(0, TimeSeries::bucket_count);
        let recent = ((recent_s / bucket_s).round() as usize).clamp(1, buckets.max(1));
        let first = buckets.saturating_sub(recent);
        let window_s = (buckets - first) as f64 * bucket_s;
        let sum_from = |v: &[u64]| v.iter().skip(first).sum::<u64>();
        let sum_recent = |b: Buckets<'_>| b.sum(first, buckets);
        let mib_s = |bytes: u64| {
            if window_s > 0.0 {
                bytes as f64 / (1 << 20) as f64 / window_s
            } else {
                0.0
            }
        };
        let (device_bytes, read_bytes) = ts.map_or((0, 0), |t| {
            (
                t.devices.iter().map(|d| sum_from(&d.read_bytes)).sum(),
                t.threads.iter().map(|s| sum_recent(s.read())).sum(),
            )
        });
        let mut busiest: Vec<LiveThread> = ts
            .map(|t| {
                t.threads
                    .iter()
                    .map(|s| {
                        let ns = |b: Buckets<'_>| sum_recent(b) as f64;
                        let states = [
                            ("on-cpu", ns(s.on_cpu())),
                            ("runnable", ns(s.runnable())),
                            ("sleeping", ns(s.sleeping())),
                            ("blocked-io", ns(s.blocked_io())),
                        ];
                        // Off-CPU time is accounted when a thread comes back:
                        // nothing at all means off CPU the whole time.
                        let state = states
                            .iter()
                            .filter(|s| s.1 > 0.0)
                            .max_by(|a, b| a.1.total_cmp(&b.1))
                            .map_or("off-cpu", |s| s.0);
                        LiveThread {
                            comm: s.comm.clone(),
                            tid: s.tid,
                            on_cpu: if window_s > 0.0 {
                                (states[0].1 / 1e9 / window_s).min(1.0)
                            } else {
                                0.0
                            },
                            state,
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let cpus_used: f64 = busiest.iter().map(|t| t.on_cpu).sum();
        busiest.sort_by(|a, b| b.on_cpu.total_cmp(&a.on_cpu).then(a.tid.cmp(&b.tid)));
        busiest.truncate(BUSIEST);
        Self {
            device_mib_per_s: mib_s(device_bytes),
            read_mib_per_s: mib_s(read_bytes),
            read_bytes,
            window_s,
            cpus_used,
            busiest,
        }
    }
}

/// A status before the first analysis: the rates and busiest threads of
/// the time series `ts` at `elapsed_s`, the phase from them alone, and
/// when the first verdict comes.
pub fn before_analysis(
    ts: &TimeSeries,
    elapsed_s: f64,
    recent_s: f64,
    first_analysis_s: f64,
) -> LiveStatus {
    let recent = Recent::of(Some(ts), recent_s);
    let phase = if recent.read_bytes > 0 {
        "reading"
    } else if recent.cpus_used >= RUNNING_CPUS {
        "running"
    } else {
        "start-up"
    };
    LiveStatus {
        elapsed_s,
        phase,
        training_start_s: None,
        training_end_s: None,
        au: None,
        // Not shown: `too_early` stands in for it.
        verdict: LiveVerdict::NONE,
        confidence: 0.0,
        confidence_label: String::new(),
        inconclusive: true,
        headline: String::new(),
        device_mib_per_s: recent.device_mib_per_s,
        read_mib_per_s: recent.read_mib_per_s,
        recent_s: recent.window_s,
        busiest: recent.busiest,
        too_early: Some(format!(
            "first analysis at {} (--live-budget)",
            clock(first_analysis_s)
        )),
        shown: None,
        consumer: None,
        help: None,
    }
}

/// `status` with its clock, rates and busiest threads brought up to
/// `elapsed_s` from the time series `ts`; the verdict stays the last
/// analysis's.
pub fn refresh(status: &mut LiveStatus, ts: &TimeSeries, elapsed_s: f64, recent_s: f64) {
    let recent = Recent::of(Some(ts), recent_s);
    status.elapsed_s = elapsed_s;
    status.device_mib_per_s = recent.device_mib_per_s;
    status.read_mib_per_s = recent.read_mib_per_s;
    status.recent_s = recent.window_s;
    status.busiest = recent.busiest;
}

/// Keeps the live view's verdict steady: a new verdict is shown once the
/// analysis gave it [`Self::CONFIRMATIONS`] updates in a row (a stall at
/// once); until then the last one stays, marked as changing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VerdictSmoother {
    shown: Option<LiveVerdict>,
    /// A different verdict the analysis gave, and how many updates in a row.
    pending: Option<(LiveVerdict, u32)>,
    /// The consumer of the last update.
    consumer: Option<u32>,
}

impl VerdictSmoother {
    pub const CONFIRMATIONS: u32 = 2;

    /// Sets `s.shown` from this update and the ones before. The first
    /// verdict, like a change, must hold [`Self::CONFIRMATIONS`] updates
    /// about the same consumer: early in a job a start-up thread can pass
    /// for one (DLIO's main process importing its frameworks) until the
    /// real training loop starts.
    pub fn settle(&mut self, s: &mut LiveStatus) {
        if s.consumer != self.consumer {
            self.consumer = s.consumer;
            self.pending = None;
        }
        if s.too_early.is_some() || s.inconclusive {
            s.shown = self.shown;
            return;
        }
        let now = s.verdict;
        match self.shown {
            Some(shown) if shown == now => self.pending = None,
            _ if now.stalled => {
                self.shown = Some(now);
                self.pending = None;
            }
            _ => {
                let count = match self.pending {
                    Some((v, n)) if v == now => n + 1,
                    _ => 1,
                };
                if count >= Self::CONFIRMATIONS {
                    self.shown = Some(now);
                    self.pending = None;
                } else {
                    self.pending = Some((now, count));
                }
            }
        }
        s.shown = self.shown;
    }
}

/// Tracks how long the verdict has held over the training window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VerdictHold {
    /// The verdict, label and consumer being held, and since when (s from
    /// the start).
    held: Option<(LiveVerdict, String, Option<u32>, f64)>,
}

/// An early verdict: what held, and over which window.
#[derive(Clone, Debug, PartialEq)]
pub struct Reached {
    pub verdict: LiveVerdict,
    pub confidence_label: String,
    pub from_s: f64,
    pub to_s: f64,
}

impl VerdictHold {
    /// Feeds one update; Some once the verdict (not inconclusive) and its
    /// confidence label have held for `hold` of training: from when it was
    /// first seen (not before the window began) to the consumer's last
    /// exchange with the data side, so a window that stopped growing (an
    /// exchange during start-up, before the real consumer appears) holds
    /// nothing. A stall needs no hold and no training window: it already
    /// stands for `stall_s` of nothing happening.
    pub fn update(&mut self, s: &LiveStatus, hold: Duration) -> Option<Reached> {
        if s.verdict.stalled {
            return Some(Reached {
                verdict: s.verdict,
                confidence_label: s.confidence_label.clone(),
                from_s: s.elapsed_s,
                to_s: s.elapsed_s,
            });
        }
        let training =
            matches!(s.phase, "training" | "reading" | "running") && s.training_start_s.is_some();
        if !training || s.inconclusive || s.too_early.is_some() {
            self.held = None;
            return None;
        }
        let start = s.training_start_s.unwrap_or(0.0);
        let since = match &self.held {
            Some((v, label, consumer, since))
                if *v == s.verdict && *label == s.confidence_label && *consumer == s.consumer =>
            {
                *since
            }
            _ => {
                // Held from when this verdict was first seen (about this
                // consumer).
                self.held = Some((
                    s.verdict,
                    s.confidence_label.clone(),
                    s.consumer,
                    s.elapsed_s,
                ));
                s.elapsed_s
            }
        }
        // Not before the (current) training window began.
        .max(start);
        let until = s
            .training_end_s
            .map_or(s.elapsed_s, |end| end.min(s.elapsed_s));
        (until - since >= hold.as_secs_f64()).then(|| Reached {
            verdict: s.verdict,
            confidence_label: s.confidence_label.clone(),
            from_s: since,
            to_s: s.elapsed_s,
        })
    }
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
