//! A whole session, as `storprof report DIR` loads and reports it, in
//! memory: the input holds the session's files separated by NUL bytes, in
//! the order of `SESSION_FILES` (an empty piece: the file is absent). They
//! are parsed by `session::load::load_from` (what `load` runs on a
//! directory), analysed with the default thresholds and rendered
//! (verdict.json, report.md, the terminal verdict, the timeline).
//! Flamegraph rendering (inferno) is left out: it is a third-party renderer
//! of the already-parsed stacks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof::{
    analysis::{Thresholds, analyze},
    output::{report, timeline},
};
use storprof_fuzz::{session_fixture_inputs, session_from_framed, write_seeds};

fuzz_target!(init: write_seeds(session_fixture_inputs()), |data: &[u8]| {
    let Ok(session) = session_from_framed(data) else {
        return;
    };
    let analysis = analyze(&session, &Thresholds::default());
    let _ = report::verdict_json(&analysis);
    let _ = report::render_markdown(&session, &analysis);
    let _ = report::render_terminal(&analysis);
    if let Some(ts) = &session.timeseries {
        let _ = timeline::render(ts);
    }
});
