//! The live view's pure parts: its budget, the smoother and the hold.
use super::*;
use crate::screen::render_line;

/// Stand-ins for the analysis's verdicts: the live view knows them by name.
mod v {
    use super::LiveVerdict;
    const fn named(name: &'static str) -> LiveVerdict {
        LiveVerdict {
            name,
            stalled: false,
        }
    }
    pub const CPU_BOUND_READER: LiveVerdict = named("cpu-bound-reader");
    pub const STORAGE_BOUND: LiveVerdict = named("storage-bound");
    pub const COMPUTE_BOUND: LiveVerdict = named("compute-bound");
    pub const CHECKPOINT_BOUND: LiveVerdict = named("checkpoint-bound");
    pub const STALLED: LiveVerdict = LiveVerdict {
        name: "stalled",
        stalled: true,
    };
}

#[test]
fn a_folded_group_is_named_as_exited_threads_not_by_its_synthetic_tid() {
    let thread = |tid| LiveThread {
        comm: "churn".to_string(),
        tid,
        on_cpu: 0.034,
        state: "on-cpu",
    };
    assert_eq!(thread(4242).label(), "churn/4242 3% on-cpu");
    assert_eq!(
        thread(u32::MAX - 1).label(),
        "churn (exited threads) 3% on-cpu"
    );
    assert_eq!(
        storprof_session::model::thread_label("churn", 7, u32::MAX - 1),
        "churn (exited threads)"
    );
    assert_eq!(
        storprof_session::model::thread_label("churn", 7, 4_194_303),
        "churn 7/4194303"
    );
}

#[test]
fn an_update_that_cost_more_than_its_budget_waits_longer_for_the_next() {
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    let options = LiveOptions::default();
    // 1% of one CPU: the first analysis once 0.4 s is earned, at 40 s.
    assert!(close(options.first_analysis_s(), 40.0));
    // Analyses that cost 0.4 s in all are earned back at 40 s; cheap
    // ones come every interval.
    assert!(close(options.next_analysis_s(16.0, 0.4), 40.0));
    assert!(close(options.next_analysis_s(16.0, 0.01), 21.0));
    assert!(close(options.next_analysis_s(16.0, -1.0), 21.0));
    let fixed = LiveOptions {
        cpu_budget: None,
        ..LiveOptions::default()
    };
    assert!(close(fixed.first_analysis_s(), 5.0));
    assert!(close(fixed.next_analysis_s(16.0, 3.0), 21.0));
    // An early stop is watched at the interval whatever it costs.
    let watched = LiveOptions {
        until_verdict: Some(Duration::from_secs(10)),
        ..LiveOptions::default()
    };
    assert!(close(watched.first_analysis_s(), 5.0));
    assert!(close(watched.next_analysis_s(16.0, 3.0), 21.0));
}

fn at(elapsed_s: f64, verdict: LiveVerdict, label: &str, phase: &'static str) -> LiveStatus {
    LiveStatus {
        elapsed_s,
        phase,
        training_start_s: (phase != "start-up").then_some(10.0),
        training_end_s: (phase != "start-up").then_some(elapsed_s),
        au: Some(40.0),
        verdict,
        confidence: 0.8,
        confidence_label: label.to_string(),
        inconclusive: false,
        headline: String::new(),
        device_mib_per_s: 0.0,
        read_mib_per_s: 0.0,
        recent_s: 5.0,
        busiest: Vec::new(),
        too_early: None,
        shown: Some(verdict),
        consumer: Some(1),
        help: None,
    }
}

#[test]
fn the_shown_verdict_changes_only_once_the_new_one_held() {
    let mut sm = VerdictSmoother::default();
    let cpu = v::CPU_BOUND_READER;
    let storage = v::STORAGE_BOUND;
    // Too early: nothing shown, and nothing remembered.
    let mut s = at(3.0, storage, "low", "training");
    s.too_early = Some("too early: 5 of the consumer's steps so far (needs 20)".into());
    sm.settle(&mut s);
    assert_eq!(s.shown, None);
    assert!(
        render_line(&s).contains("verdict too early: 5"),
        "{}",
        render_line(&s)
    );
    // The first verdict, like a change, once it held two updates.
    let mut s = at(8.0, cpu, "high", "training");
    sm.settle(&mut s);
    assert_eq!(s.shown, None);
    assert!(
        render_line(&s).contains("verdict settling (cpu-bound-reader?)"),
        "{}",
        render_line(&s)
    );
    let mut s = at(10.0, cpu, "high", "training");
    sm.settle(&mut s);
    assert_eq!(s.shown, Some(cpu));
    // One update of another verdict: still the first, marked.
    let mut s = at(15.0, storage, "medium", "training");
    sm.settle(&mut s);
    assert_eq!(s.shown, Some(cpu));
    assert!(
        render_line(&s).contains("cpu-bound-reader (changing to storage-bound?)"),
        "{}",
        render_line(&s)
    );
    // Back to the first: the change is forgotten.
    let mut s = at(20.0, cpu, "high", "training");
    sm.settle(&mut s);
    let mut s = at(25.0, storage, "medium", "training");
    sm.settle(&mut s);
    assert_eq!(s.shown, Some(cpu));
    // Two in a row: shown.
    let mut s = at(30.0, storage, "medium", "training");
    sm.settle(&mut s);
    assert_eq!(s.shown, Some(storage));
    // A stall at once.
    let mut s = at(35.0, v::STALLED, "high", "training");
    sm.settle(&mut s);
    assert_eq!(s.shown, Some(v::STALLED));
}

/// A start-up thread taken for the consumer, then the real one: the
/// first thread's verdict is not confirmed by the second's updates;
/// an inconclusive guess is never shown as a verdict.
#[test]
fn a_verdict_holds_only_over_updates_about_one_consumer() {
    let mut sm = VerdictSmoother::default();
    let compute = v::COMPUTE_BOUND;
    let storage = v::STORAGE_BOUND;
    let mut s = at(15.0, v::CHECKPOINT_BOUND, "low", "training");
    s.inconclusive = true;
    sm.settle(&mut s);
    assert_eq!(s.shown, None);
    assert!(
        render_line(&s).contains("verdict no clear verdict yet ("),
        "{}",
        render_line(&s)
    );
    let mut s = at(17.0, compute, "medium", "training");
    s.consumer = Some(7);
    sm.settle(&mut s);
    let mut s = at(22.0, compute, "medium", "training");
    s.consumer = Some(8);
    sm.settle(&mut s);
    assert_eq!(
        s.shown, None,
        "two updates about two threads confirmed nothing"
    );
    let mut s = at(27.0, storage, "high", "training");
    s.consumer = Some(8);
    sm.settle(&mut s);
    let mut s = at(32.0, storage, "high", "training");
    s.consumer = Some(8);
    sm.settle(&mut s);
    assert_eq!(s.shown, Some(storage));
}

#[test]
fn a_verdict_is_reached_once_it_held_over_training_and_restarts_on_a_change() {
    let hold = Duration::from_secs(10);
    let mut h = VerdictHold::default();
    let cpu = v::CPU_BOUND_READER;
    assert_eq!(h.update(&at(5.0, cpu, "high", "start-up"), hold), None);
    assert_eq!(h.update(&at(12.0, cpu, "high", "training"), hold), None);
    assert_eq!(h.update(&at(17.0, cpu, "high", "training"), hold), None);
    // The label changed: the hold starts again.
    assert_eq!(h.update(&at(20.0, cpu, "medium", "training"), hold), None);
    assert_eq!(h.update(&at(25.0, cpu, "medium", "training"), hold), None);
    let r = h
        .update(&at(30.0, cpu, "medium", "training"), hold)
        .unwrap();
    assert_eq!((r.from_s, r.to_s), (20.0, 30.0));
    // Inconclusive verdicts never stop a recording.
    let mut h = VerdictHold::default();
    let mut s = at(12.0, cpu, "low", "training");
    s.inconclusive = true;
    assert_eq!(h.update(&s, hold), None);
    s.elapsed_s = 100.0;
    s.training_end_s = Some(100.0);
    assert_eq!(h.update(&s, hold), None);
    // A stall stops at once.
    let mut h = VerdictHold::default();
    assert!(
        h.update(&at(70.0, v::STALLED, "high", "start-up"), hold)
            .is_some()
    );
}

#[test]
fn a_hold_begins_no_earlier_than_the_training_window() {
    let hold = Duration::from_secs(10);
    let mut h = VerdictHold::default();
    let mut s = at(15.0, v::STORAGE_BOUND, "high", "training");
    s.training_start_s = Some(14.0);
    assert_eq!(h.update(&s, hold), None);
    // Data keeps flowing: the window's end follows the clock.
    s.elapsed_s = 24.0;
    s.training_end_s = Some(24.0);
    assert_eq!(h.update(&s, hold), None);
    s.elapsed_s = 25.0;
    s.training_end_s = Some(25.0);
    assert_eq!(h.update(&s, hold).unwrap().from_s, 15.0);
}

#[test]
fn a_window_that_stopped_growing_holds_nothing() {
    // An exchange during start-up (an importing main thread waking a
    // helper) makes a window of 1.1-1.4 s that never grows.
    let hold = Duration::from_secs(10);
    let cpu = v::CPU_BOUND_READER;
    let mut h = VerdictHold::default();
    let mut s = at(5.0, cpu, "medium", "training");
    s.training_start_s = Some(1.1);
    s.training_end_s = Some(1.4);
    for t in [5.0, 10.0, 16.0] {
        s.elapsed_s = t;
        assert_eq!(h.update(&s, hold), None, "at {t} s");
    }
    // The real consumer's window begins at 20 s: the hold counts from
    // there, not from 5 s when the verdict was first seen.
    s.training_start_s = Some(20.0);
    for t in [21.0, 26.0] {
        s.elapsed_s = t;
        s.training_end_s = Some(t - 0.5);
        assert_eq!(h.update(&s, hold), None, "at {t} s");
    }
    s.elapsed_s = 31.0;
    s.training_end_s = Some(30.5);
    let r = h.update(&s, hold).unwrap();
    assert_eq!((r.from_s, r.to_s), (20.0, 31.0));
}
