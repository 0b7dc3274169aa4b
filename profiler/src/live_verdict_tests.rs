//! The live verdicts over recorded sessions: the analysis's status, and
//! the screen that shows it.
use super::*;
use storprof_record::{
    live::refresh,
    screen::{BLOCK_ROWS, render_block, render_line},
};

fn fixture(name: &str) -> Session {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/sessions")
        .join(name);
    storprof_session::load::load(&dir).unwrap()
}

fn status(name: &str) -> LiveStatus {
    let session = fixture(name);
    let a = storprof_report::diagnosis::diagnose(&session, &Thresholds::default());
    let elapsed = session.info.duration_s;
    status_of(&session, &a, elapsed, 5.0)
}

#[test]
fn a_refresh_between_analyses_moves_the_clock_and_rates_but_not_the_verdict() {
    let session = fixture("real-pool-cpu-bound-reader");
    let a = storprof_report::diagnosis::diagnose(&session, &Thresholds::default());
    let ts = session.timeseries.as_ref().unwrap();
    // As the status stood two seconds in, refreshed at the end.
    let mut s = status_of(&session, &a, 2.0, 5.0);
    let phase = s.phase;
    let at_end = status_of(&session, &a, session.info.duration_s, 5.0);
    s.busiest.clear();
    s.read_mib_per_s = -1.0;
    refresh(&mut s, ts, session.info.duration_s, 5.0);
    assert_eq!(s.elapsed_s, session.info.duration_s);
    assert_eq!(s.busiest, at_end.busiest);
    assert_eq!(s.read_mib_per_s, at_end.read_mib_per_s);
    assert_eq!(s.device_mib_per_s, at_end.device_mib_per_s);
    assert_eq!(
        (s.verdict, s.phase),
        (live_verdict(a.verdict.verdict), phase)
    );
}

#[test]
fn the_status_of_a_real_cpu_bound_pool_names_its_verdict_phase_and_busy_workers() {
    let s = status("real-pool-cpu-bound-reader");
    assert_eq!(s.verdict, live_verdict(VerdictId::CpuBoundReader));
    assert!(s.au.is_some());
    assert!(s.training_start_s.is_some());
    assert!(!s.busiest.is_empty());
    // Two forked workers decode on the 2 CPUs (the last 5 s include the tear-down).
    assert!(s.busiest[0].on_cpu > 0.3, "{:?}", s.busiest);
    assert_eq!(s.busiest[0].state, "on-cpu");
    let block = render_block(&s);
    assert_eq!(block.len(), BLOCK_ROWS as usize);
    assert!(block[0].contains("phase") && block[0].contains("AU "));
    assert!(block[1].contains("cpu-bound-reader"));
    assert!(block[3].contains("device") && block[3].contains("read syscalls"));
    assert!(block[4].contains(&s.busiest[0].comm));
    // Faster reader code or more workers: both are projected to help.
    assert!(block[5].starts_with("would help  "), "{block:?}");
    let help = s.help.clone().unwrap_or_default();
    assert!(
        help.starts_with("reader-cpu ×2 → AU") || help.starts_with("read-threads ×2 → AU"),
        "{help}"
    );
    let line = render_line(&s);
    assert!(line.contains("verdict cpu-bound-reader"), "{line}");
    assert!(line.ends_with(&format!(" would help {help}")), "{line}");
}
