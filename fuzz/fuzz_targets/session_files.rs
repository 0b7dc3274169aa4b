//! The per-file parsers of a session, in memory (much faster than
//! `session_dir`): the first byte picks the file, the rest is its content,
//! parsed as `session::load::load` parses that file into an otherwise empty
//! session, which is then analysed and rendered.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof::{
    analysis::{Thresholds, analyze},
    output::{report, timeline},
    session::load::{BenchSummary, FoldedStacks, Session},
};
use storprof_fuzz::{FILE_SEP, SESSION_FILES, session_fixture_inputs, write_seeds};

/// Each fixture's files as separate inputs (first byte: the file's index).
fn seeds() {
    let mut out = Vec::new();
    for (name, framed) in session_fixture_inputs() {
        for (i, piece) in framed.split(|&b| b == FILE_SEP).enumerate() {
            if piece.is_empty() {
                continue;
            }
            let mut input = vec![i as u8];
            input.extend_from_slice(piece);
            out.push((format!("{name}-{i}"), input));
        }
    }
    write_seeds(out);
}

fn json<T: serde::de::DeserializeOwned>(text: &str) -> Option<T> {
    serde_json::from_str(text).ok()
}

fuzz_target!(init: seeds(), |data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    // load() reads every file as UTF-8 text.
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let mut s = Session::default();
    let file = SESSION_FILES[usize::from(which) % SESSION_FILES.len()];
    use storprof::session::model::files;
    match file {
        files::SESSION => match json(text) {
            Some(info) => s.info = info,
            None => return,
        },
        files::THREADS => match json(text) {
            Some(threads) => s.threads = threads,
            None => return,
        },
        files::IO => match json(text) {
            Some(io) => s.io = io,
            None => return,
        },
        files::TIMESERIES => match json(text) {
            Some(ts) => s.timeseries = Some(ts),
            None => return,
        },
        files::WAITS => match json(text) {
            Some(w) => s.waits = Some(w),
            None => return,
        },
        files::BENCH_SUMMARY => match json::<serde_json::Value>(text) {
            Some(v) => s.bench = Some(BenchSummary::from_value(v)),
            None => return,
        },
        files::ONCPU_FOLDED => s.oncpu = FoldedStacks::parse(text, file).0,
        files::OFFCPU_FOLDED => s.offcpu = FoldedStacks::parse(text, file).0,
        files::ONCPU_THREADS_FOLDED => s.oncpu_threads = FoldedStacks::parse(text, file).0,
        files::OFFCPU_THREADS_FOLDED => s.offcpu_threads = FoldedStacks::parse(text, file).0,
        _ => return,
    }
    let _ = s.duration_s();
    let analysis = analyze(&s, &Thresholds::default());
    let _ = report::verdict_json(&analysis);
    let _ = report::render_markdown(&s, &analysis);
    let _ = report::render_terminal(&analysis);
    if let Some(ts) = &s.timeseries {
        let _ = timeline::render(ts);
    }
});
