//! The per-file parsers of a session, in memory: the first byte picks the
//! file, the rest is its content, parsed by `session::load::load_from` (the
//! parser `storprof report DIR` runs on a directory) as the only file of a
//! session. The analysis and the renderers run in `session_dir`.
//!
//! The body and seeds: `storprof_fuzz_targets::session_files`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof_fuzz::{targets::session_files, write_seeds};

fuzz_target!(init: write_seeds(session_files::seeds), |data: &[u8]| session_files::run(data));
