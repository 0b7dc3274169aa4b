//! Session directory loading, as `storprof report DIR` does it: the input
//! holds the session's files separated by NUL bytes, in the order of
//! `SESSION_FILES` (an empty piece: the file is absent). They are written
//! into a scratch directory, loaded with `session::load::load`, analysed
//! with the default thresholds and rendered (verdict.json, report.md, the
//! terminal verdict, the timeline). Flamegraph rendering (inferno) is left
//! out: it is a third-party renderer of the already-parsed stacks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof::{
    analysis::{Thresholds, analyze},
    output::{report, timeline},
    session::load::load,
};
use storprof_fuzz::{FILE_SEP, SESSION_FILES, scratch_dir, session_fixture_inputs, write_seeds};

fuzz_target!(init: write_seeds(session_fixture_inputs()), |data: &[u8]| {
    let dir = scratch_dir().join("session");
    // A fresh directory each time: a file absent from this input must not
    // linger from the previous one.
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!("fuzz harness: cannot create {}: {e}", dir.display());
    }
    for (name, piece) in SESSION_FILES.iter().zip(data.split(|&b| b == FILE_SEP)) {
        if piece.is_empty() {
            continue;
        }
        if let Err(e) = std::fs::write(dir.join(name), piece) {
            panic!("fuzz harness: cannot write {name}: {e}");
        }
    }
    let Ok(session) = load(&dir) else {
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
