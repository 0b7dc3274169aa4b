//! NPZ (ZIP of .npy members): the input is a whole file; `read_layout`
//! finds the end-of-central-directory record (and zip64 records), walks the
//! central directory and parses `x.npy`'s header, as the readers do.
//!
//! The body and seeds: `storprof_fuzz_targets::npz`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof_fuzz::{targets::npz, write_seeds};

fuzz_target!(init: write_seeds(npz::seeds), |data: &[u8]| npz::run(data));
