//! The per-file parsers of a session, in memory: the first byte picks the
//! file, the rest is its content, parsed by `session::load::load_from` (the
//! parser `storprof report DIR` runs on a directory) as the only file of a
//! session. The analysis and the renderers run in `session_dir`.

use std::path::Path;

use crate::{FILE_SEP, SESSION_FILES, Seeds, session_fixture_inputs};
use storprof_session::load::load_from;

/// Each fixture's files as separate inputs (first byte: the file's index).
pub fn seeds() -> Seeds {
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
    out
}

pub fn run(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    // load() reads every file as UTF-8 text (anything else is its I/O error).
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let file = SESSION_FILES[usize::from(which) % SESSION_FILES.len()];
    let loaded = load_from(Path::new("fuzz"), |name| {
        Ok((name == file).then(|| text.to_string()))
    });
    if let Ok(session) = loaded {
        let _ = session.duration_s();
        let _ = session.oncpu.total();
        let _ = session.offcpu.lines();
    }
}
