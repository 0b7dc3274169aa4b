//! The live view's verdict side, wired into the recorder's loop
//! ([`analysis`] gives `LiveOptions::analysis`): the session so far ─►
//! `diagnose` ─► [`status_of`] ─► a `LiveStatus` the recorder shows and
//! holds. Recording knows verdicts only by name; this is where they come
//! from. Pure over recorded sessions, and tested on them.
use std::sync::Arc;

use storprof_analysis::{Thresholds, VerdictId};
use storprof_record::live::{LiveAnalysis, LiveStatus, LiveVerdict, RUNNING_CPUS, Recent};
use storprof_report::diagnosis::Diagnosis;
use storprof_session::load::Session;

/// The consumer's steps (data deliveries or compute steps) in the window
/// before a live verdict means something.
pub const LIVE_MIN_STEPS: u64 = 20;
/// ... and the window's length, s.
pub const LIVE_MIN_WINDOW_S: f64 = 3.0;

/// Read-syscall bytes from which a job without a consumer reads data.
const DATA_MIN_BYTES: u64 = 1 << 20;

/// Seconds after the consumer's last exchange with the data side from
/// which a running job is in its tear-down (a step of a starved pipeline
/// can take several seconds).
const TEAR_DOWN_AFTER_S: f64 = 15.0;

/// The live analysis with `thresholds` (those of the final report).
pub fn analysis(thresholds: Thresholds) -> LiveAnalysis {
    LiveAnalysis(Arc::new(move |session, elapsed_s, recent_s| {
        let diagnosis = storprof_report::diagnosis::diagnose(session, &thresholds);
        status_of(session, &diagnosis, elapsed_s, recent_s)
    }))
}

/// A verdict id as the live view knows it.
pub fn live_verdict(id: VerdictId) -> LiveVerdict {
    LiveVerdict {
        name: id.as_str(),
        stalled: id == VerdictId::Stalled,
    }
}

/// The live status of `session` (built at `elapsed_s`) and its analysis;
/// rates and thread states over the last `recent_s` seconds.
pub fn status_of(
    session: &Session,
    analysis: &Diagnosis,
    elapsed_s: f64,
    recent_s: f64,
) -> LiveStatus {
    let v = &analysis.verdict;
    let ts = session.timeseries.as_ref();
    let recent = Recent::of(ts, recent_s);
    let bucket_s = ts.map_or(1.0, |t| t.bucket_ns.max(1) as f64 / 1e9);
    let read_bytes = recent.read_bytes;

    let window = analysis.wait.as_ref().and_then(|w| w.window.as_ref());
    // Start-up reads (a loader reading an ELF header) are not data.
    let total_read: u64 = ts.map_or(0, |t| t.threads.iter().map(|s| s.read().total()).sum());
    let first_read_s = ts.filter(|_| total_read >= DATA_MIN_BYTES).and_then(|t| {
        t.threads
            .iter()
            .filter_map(|s| s.read().first_nonzero())
            .min()
            .map(|b| b as f64 * bucket_s)
    });
    let training_end_s = window.map(|w| w.end_s);
    let (phase, training_start_s) = match window {
        // The window ends at the consumer's last exchange with the data
        // side; while the job runs, that is a wait still in progress.
        Some(w) => {
            let phase = if elapsed_s < w.start_s {
                "start-up"
            } else if elapsed_s - w.end_s <= TEAR_DOWN_AFTER_S {
                "training"
            } else {
                "tear-down"
            };
            (phase, Some(w.start_s))
        }
        // Without a consumer: reading while data flows.
        None => match first_read_s {
            Some(s)
                if read_bytes > 0
                    && analysis
                        .wait
                        .as_ref()
                        .is_none_or(|w| w.consumers.is_empty()) =>
            {
                ("reading", Some(s))
            }
            Some(s) => ("quiet", Some(s)),
            // Nothing read at all: a job busy on its CPUs is running; its
            // verdict is about its threads.
            None if recent.cpus_used >= RUNNING_CPUS => ("running", Some(0.0)),
            None => ("start-up", None),
        },
    };
    let too_early = too_early(analysis, window.map(|w| w.end_s - w.start_s));
    // A window too short to mean anything that then went quiet is a
    // start-up exchange (a framework's threads while it imports), not the
    // end of training.
    let phase = if too_early.is_some() && phase == "tear-down" {
        "start-up"
    } else {
        phase
    };
    let help = too_early.is_none().then(|| help_text(analysis)).flatten();
    LiveStatus {
        elapsed_s,
        phase,
        training_start_s,
        training_end_s,
        au: analysis.wait.as_ref().and_then(|w| w.kernel_au_percentage),
        verdict: live_verdict(v.verdict),
        confidence: v.confidence,
        confidence_label: v.confidence_label.clone(),
        inconclusive: v.inconclusive,
        headline: v.headline.clone(),
        device_mib_per_s: recent.device_mib_per_s,
        read_mib_per_s: recent.read_mib_per_s,
        recent_s: recent.window_s,
        busiest: recent.busiest,
        shown: too_early.is_none().then_some(live_verdict(v.verdict)),
        too_early,
        consumer: analysis
            .wait
            .as_ref()
            .and_then(|w| w.consumers.first())
            .map(|c| c.tid),
        help,
    }
}

/// The status's "would help": the best fix projected, or that none helps.
fn help_text(analysis: &Diagnosis) -> Option<String> {
    let w = &analysis.what_would_help;
    let today = w.today.as_ref()?;
    Some(match w.helps().first() {
        Some(p) => format!(
            "{} → AU {:.0}% (today {:.0}%)",
            p.label(),
            p.projected_au_percentage.unwrap_or(today.au_percentage),
            today.au_percentage
        ),
        None => "nothing on the data side".to_string(),
    })
}

/// Why a live verdict is too early to mean much: fewer than
/// [`LIVE_MIN_STEPS`] steps of the consumer, or a window shorter than
/// [`LIVE_MIN_WINDOW_S`] (without a consumer, of reading).
fn too_early(analysis: &Diagnosis, window_s: Option<f64>) -> Option<String> {
    let window_s = window_s.unwrap_or(0.0);
    let steps: Option<u64> = analysis
        .wait
        .as_ref()
        .filter(|w| !w.consumers.is_empty())
        .map(|w| w.consumers.iter().map(|c| c.steps).min().unwrap_or(0));
    match steps {
        Some(n) if n < LIVE_MIN_STEPS => Some(format!(
            "too early: {n} of the consumer's steps so far (needs {LIVE_MIN_STEPS})"
        )),
        _ if window_s < LIVE_MIN_WINDOW_S => Some(format!(
            "too early: {window_s:.1} s of training so far (needs {LIVE_MIN_WINDOW_S:.0})"
        )),
        _ => None,
    }
}

#[cfg(test)]
#[path = "live_verdict_tests.rs"]
mod tests;
