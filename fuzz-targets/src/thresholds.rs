//! `--thresholds FILE`: `commands::load_thresholds` reads the file and
//! parses it with serde_json into `Thresholds`; that parse is fuzzed here,
//! and every accepted set of thresholds then drives the whole analysis of
//! fixed recorded sessions (the thresholds are numbers the rules divide by,
//! compare with and use as depths), as `report --thresholds` would.

use std::sync::OnceLock;
use storprof_report::diagnosis::diagnose;

use crate::{Seeds, repo_root};
use storprof_analysis::Thresholds;
use storprof_report::report;
use storprof_session::load::{Session, load};

/// Small fixtures with a wake-up graph and without (format 2 and 1).
const SESSIONS: &[&str] = &["real-storage-bound", "cpu-starved", "real-lock-contention"];

fn sessions() -> &'static [Session] {
    static S: OnceLock<Vec<Session>> = OnceLock::new();
    S.get_or_init(|| {
        SESSIONS
            .iter()
            .filter_map(|name| load(&repo_root().join("tests/data/sessions").join(name)).ok())
            .collect()
    })
}

pub fn seeds() -> Seeds {
    let mut out = vec![("seed-empty".to_string(), b"{}".to_vec())];
    if let Ok(text) = serde_json::to_vec_pretty(&Thresholds::default()) {
        out.push(("seed-default".to_string(), text));
    }
    out.push((
        "seed-some".to_string(),
        br#"{"reader_read_fraction": 0.0, "critical_path_max_depth": 0, "busy_thread_share": 1e308}"#
            .to_vec(),
    ));
    if sessions().len() != SESSIONS.len() {
        eprintln!(
            "fuzz thresholds: only {} of the fixture sessions loaded",
            sessions().len()
        );
    }
    out
}

pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(thresholds) = serde_json::from_str::<Thresholds>(text) else {
        return;
    };
    for session in sessions() {
        let analysis = diagnose(session, &thresholds);
        let _ = report::verdict_json(&analysis);
        let _ = report::render_terminal(&analysis);
    }
}
