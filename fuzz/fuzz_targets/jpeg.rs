//! JPEG: the input is a whole file; `read_info` (the RetinaNet reader's
//! entry) checks its size and walks the marker segments with `parse_jpeg`.
//!
//! The body and seeds: `storprof_fuzz_targets::jpeg`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof_fuzz::{targets::jpeg, write_seeds};

fuzz_target!(init: write_seeds(jpeg::seeds), |data: &[u8]| jpeg::run(data));
