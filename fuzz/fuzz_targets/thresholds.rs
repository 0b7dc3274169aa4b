//! `--thresholds FILE`: `commands::load_thresholds` reads the file and
//! parses it with serde_json into `Thresholds`; that parse is fuzzed here,
//! and every accepted set of thresholds then drives the whole analysis of
//! fixed recorded sessions (the thresholds are numbers the rules divide by,
//! compare with and use as depths), as `report --thresholds` would.
//!
//! The body and seeds: `storprof_fuzz_targets::thresholds`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof_fuzz::{targets::thresholds, write_seeds};

fuzz_target!(init: write_seeds(thresholds::seeds), |data: &[u8]| thresholds::run(data));
