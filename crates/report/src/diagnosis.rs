//! The analysis with its verdict in words: what reports, the live view,
//! merge and the commands show.
//!
//! ```text
//! Session ──► storprof_analysis::analyze ──► Analysis { decision, features, .. }
//!                                               │ wording::verdict(decision),
//!                                               │ actions::actions(decision, features)
//!                                               ▼
//!                                  Diagnosis { verdict (sentences), features, .. }
//! Session + Analysis ──► whatif::table(REPORT_LEVERS) ──► Diagnosis.what_would_help
//! ```
use serde::Serialize;
use serde_json::Value;
use storprof_analysis::{
    Analysis, Features, HotFrames, Thresholds, Verdict, WaitAnalysis,
    thresholds::ThresholdOverride,
    whatif::{self, REPORT_LEVERS, WhatIf},
};
use storprof_session::load::Session;

use super::{actions, wording};

/// An [`Analysis`] whose decision is worded as verdict.json.
#[derive(Clone, Debug, Serialize)]
pub struct Diagnosis {
    pub verdict: Verdict,
    pub features: Features,
    /// On-CPU hot frames of the reader threads.
    pub hot_oncpu_readers: HotFrames,
    /// On-CPU hot frames of every traced thread.
    pub hot_oncpu: HotFrames,
    /// Off-CPU hot frames (microseconds) of every traced thread.
    pub hot_offcpu: HotFrames,
    /// Who waits for whom (None: a format 1 session, or no wake-up probe).
    pub wait: Option<WaitAnalysis>,
    /// The AU projected per lever (a model), or why there is none.
    pub what_would_help: WhatIf,
}

impl From<Analysis> for Diagnosis {
    fn from(a: Analysis) -> Self {
        let mut verdict = wording::verdict(&a.decision);
        verdict.actions = actions::actions(&a.decision, &a.features);
        Diagnosis {
            verdict,
            features: a.features,
            hot_oncpu_readers: a.hot_oncpu_readers,
            hot_oncpu: a.hot_oncpu,
            hot_offcpu: a.hot_offcpu,
            wait: a.wait,
            what_would_help: WhatIf::default(),
        }
    }
}

/// Analyses `session`, words the verdict and projects what would help;
/// thresholds that differ from the defaults are recorded in it.
pub fn diagnose(session: &Session, thresholds: &Thresholds) -> Diagnosis {
    let analysis = storprof_analysis::analyze(session, thresholds);
    let what_would_help = whatif::table(session, &analysis, &REPORT_LEVERS);
    let mut d = Diagnosis::from(analysis);
    d.what_would_help = what_would_help;
    d.verdict.threshold_overrides = threshold_overrides(thresholds);
    d
}

/// `t` as its JSON object (key → value), in the struct's order.
pub fn threshold_values(t: &Thresholds) -> serde_json::Map<String, Value> {
    match serde_json::to_value(t) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// The thresholds of `t` that differ from the defaults, in the struct's order.
pub fn threshold_overrides(t: &Thresholds) -> Vec<ThresholdOverride> {
    let defaults = threshold_values(&Thresholds::default());
    threshold_values(t)
        .into_iter()
        .filter_map(|(key, value)| {
            let default = defaults.get(&key)?;
            (value != *default).then(|| ThresholdOverride {
                value: value.as_f64().unwrap_or(0.0),
                default: default.as_f64().unwrap_or(0.0),
                key,
            })
        })
        .collect()
}
