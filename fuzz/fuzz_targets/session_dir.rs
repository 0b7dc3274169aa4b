//! A whole session, as `storprof report DIR` loads and reports it, in
//! memory: the input holds the session's files separated by NUL bytes, in
//! the order of `SESSION_FILES` (an empty piece: the file is absent). They
//! are parsed by `session::load::load_from` (what `load` runs on a
//! directory), analysed with the default thresholds and rendered
//! (verdict.json, report.md, the terminal verdict, the timeline).
//! Flamegraph rendering (inferno) is left out: it is a third-party renderer
//! of the already-parsed stacks.
//!
//! The body and seeds: `storprof_fuzz_targets::session_dir`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof_fuzz::{targets::session_dir, write_seeds};

fuzz_target!(init: write_seeds(session_dir::seeds), |data: &[u8]| session_dir::run(data));
