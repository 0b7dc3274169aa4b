//! The table of projections reports carry: today's step, one projection
//! per lever of [`REPORT_LEVERS`], or why the recording gives none; and
//! the fixes that help most, for the lines under a verdict.
use serde::Serialize;
use storprof_session::load::Session;

use super::{Lever, LeverKind, Pipeline, Projection, fit, project};
use crate::Analysis;

/// The levers reports project, in table order: every fix of the data side
/// at ×2 (storage, the dataset cached, read threads, reader code, the
/// network, the locks gone), then the workload's own: the consumer's
/// computation ×2 and ×4, and twice the accelerators on this host.
pub const REPORT_LEVERS: [Lever; 9] = [
    Lever {
        kind: LeverKind::Storage,
        factor: 2.0,
    },
    Lever {
        kind: LeverKind::Cache,
        factor: 1.0,
    },
    Lever {
        kind: LeverKind::ReadThreads,
        factor: 2.0,
    },
    Lever {
        kind: LeverKind::ReaderCpu,
        factor: 2.0,
    },
    Lever {
        kind: LeverKind::Network,
        factor: 2.0,
    },
    Lever {
        kind: LeverKind::Lock,
        factor: 1.0,
    },
    Lever {
        kind: LeverKind::Computation,
        factor: 2.0,
    },
    Lever {
        kind: LeverKind::Computation,
        factor: 4.0,
    },
    Lever {
        kind: LeverKind::Accelerators,
        factor: 2.0,
    },
];

/// A fix whose projected steps/s gain less than this share over today's
/// is not worth a line under the verdict.
pub const HELPS_MIN_GAIN: f64 = 0.05;

/// Today's step as the model sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Today {
    /// The consumer's steps in the training window.
    pub steps: u64,
    /// A step's mean length and its parts, s.
    pub step_s: f64,
    pub compute_s: f64,
    pub overhead_s: f64,
    pub wait_s: f64,
    /// The data side's cycle per step, s (an upper bound when
    /// `producer_known` is false: the consumer never waited).
    pub producer_s: f64,
    pub producer_known: bool,
    /// Compute over the step (%), and steps/s.
    pub au_percentage: f64,
    pub steps_per_s: f64,
    /// The CPUs the loaders could use: the machine's, less the rest of
    /// the job's, the untraced load's and the job's waits for a CPU.
    pub cpus_for_loaders: f64,
    /// The job's threads' runnable time (waiting for a CPU), CPUs.
    pub queued_cpus: f64,
    /// The machine's CPU no traced thread used (other processes, the
    /// kernel, a hypervisor's steal; storprof's own taken out), CPUs; None
    /// where the recording has no host CPU series.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untraced_cpus: Option<f64>,
}

impl From<&Pipeline> for Today {
    fn from(p: &Pipeline) -> Self {
        let step = p.step_s.max(1e-12);
        Self {
            steps: p.steps,
            step_s: p.step_s,
            compute_s: p.compute_s,
            overhead_s: p.overhead_s,
            wait_s: p.wait_s,
            producer_s: p.producer_s,
            producer_known: p.producer_known,
            au_percentage: 100.0 * p.compute_s / step,
            steps_per_s: 1.0 / step,
            cpus_for_loaders: p.cpus_for_loaders,
            queued_cpus: p.queued_cpus,
            untraced_cpus: p.untraced.map(|u| u.total()),
        }
    }
}

/// What would help, as verdict.json's `what_would_help` carries it: today
/// and the projections, or `none` saying why there are none.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WhatIf {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub today: Option<Today>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub projections: Vec<Projection>,
    /// Why the recording gives no projection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub none: Option<String>,
}

/// The table of `levers` for `session` and its `analysis`.
pub fn table(session: &Session, analysis: &Analysis, levers: &[Lever]) -> WhatIf {
    match fit(session, analysis) {
        Ok(p) => WhatIf {
            today: Some(Today::from(&p)),
            projections: levers.iter().map(|l| project(&p, *l)).collect(),
            none: None,
        },
        Err(why) => WhatIf {
            none: Some(why.to_string()),
            ..WhatIf::default()
        },
    }
}

impl WhatIf {
    /// The fixes of the data side (every lever but the computation and
    /// the accelerators, which are the workload's, not fixes) that gain at
    /// least [`HELPS_MIN_GAIN`] steps/s, most first.
    pub fn helps(&self) -> Vec<&Projection> {
        let mut fixes: Vec<(&Projection, f64)> = self
            .projections
            .iter()
            .filter(|p| !matches!(p.lever, LeverKind::Computation | LeverKind::Accelerators))
            .filter_map(|p| {
                let rate = p.projected_steps_per_s?;
                let gain = rate / p.steps_per_s.max(1e-12) - 1.0;
                (gain >= HELPS_MIN_GAIN).then_some((p, gain))
            })
            .collect();
        fixes.sort_by(|a, b| b.1.total_cmp(&a.1));
        fixes.into_iter().map(|(p, _)| p).collect()
    }
}

impl Projection {
    /// The lever as tables show it: `storage ×2`, `cache`.
    pub fn label(&self) -> String {
        match self.lever {
            LeverKind::Cache | LeverKind::Lock => self.lever.name().to_string(),
            _ => format!("{} ×{}", self.lever.name(), self.factor),
        }
    }

    /// The AU's range as text (`40.1..52.3`), or "—".
    pub fn range_text(&self) -> String {
        match (self.low, self.high) {
            (Some(l), Some(h)) => format!("{l:.1}..{h:.1}"),
            _ => "—".to_string(),
        }
    }

    /// One line: `read-threads ×2 → AU 62.0% (55.1..70.2), 1.80 steps/s
    /// (today 40.0%, 1.20)`; a lever without a projection gives its reason.
    pub fn summary(&self) -> String {
        match (self.projected_au_percentage, self.projected_steps_per_s) {
            (Some(au), Some(rate)) => format!(
                "{} → AU {au:.1}% ({}), {rate:.2} steps/s (today {:.1}%, {:.2})",
                self.label(),
                self.range_text(),
                self.au_percentage,
                self.steps_per_s
            ),
            _ => format!("{}: {}", self.label(), self.reason),
        }
    }
}
