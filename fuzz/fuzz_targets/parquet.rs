//! Parquet: the input is a whole file. The footer (Thrift compact
//! FileMetaData) is located and parsed as `read_layout` does for every file
//! the readers open; each row group the footer places inside the file is
//! then decoded by the fast path (page headers, levels, values). The input
//! is also handed to `parse_footer` directly as a footer, so mutations reach
//! the Thrift reader without keeping a valid trailer.
//!
//! The body and seeds: `storprof_fuzz_targets::parquet`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof_fuzz::{targets::parquet, write_seeds};

fuzz_target!(init: write_seeds(parquet::seeds), |data: &[u8]| parquet::run(data));
