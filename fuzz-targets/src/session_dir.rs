//! A whole session, as `storprof report DIR` loads and reports it, in
//! memory: the input holds the session's files separated by NUL bytes, in
//! the order of `SESSION_FILES` (an empty piece: the file is absent). They
//! are parsed by `session::load::load_from` (what `load` runs on a
//! directory), analysed with the default thresholds and rendered
//! (verdict.json, report.md, the terminal verdict, the timeline).
//! Flamegraph rendering (inferno) is left out: it is a third-party renderer
//! of the already-parsed stacks.

use crate::{Seeds, session_fixture_inputs, session_from_framed};
use storprof_analysis::Thresholds;
use storprof_report::diagnosis::diagnose;
use storprof_report::{report, timeline};

/// The session fixtures, framed.
pub fn seeds() -> Seeds {
    session_fixture_inputs()
}

pub fn run(data: &[u8]) {
    let Ok(session) = session_from_framed(data) else {
        return;
    };
    let analysis = diagnose(&session, &Thresholds::default());
    let _ = report::verdict_json(&analysis);
    let _ = report::render_markdown(&session, &analysis);
    let _ = report::render_terminal(&analysis);
    if let Some(ts) = &session.timeseries {
        let _ = timeline::render(ts);
    }
}
