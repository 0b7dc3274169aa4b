//! TFRecord: the input is a whole file; `read_index` walks the framing
//! (length, length CRC, data, data CRC) and every record it accepts is then
//! checked by `verify_record`, as the verifying reader does.
//!
//! The body and seeds: `storprof_fuzz_targets::tfrecord`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof_fuzz::{targets::tfrecord, write_seeds};

fuzz_target!(init: write_seeds(tfrecord::seeds), |data: &[u8]| tfrecord::run(data));
