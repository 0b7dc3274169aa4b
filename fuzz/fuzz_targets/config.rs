//! `--config` YAML and `--param KEY=VALUE`: the input is the YAML text,
//! then the params, separated by NUL bytes. An empty YAML part stands for
//! the embedded flux_b200 workload (what `--workload flux` loads), so the
//! params are fuzzed over a valid base too. The typed configuration is then
//! derived as `bench` and `datagen` use it.
//!
//! The body and seeds: `storprof_fuzz_targets::config`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof_fuzz::{targets::config, write_seeds};

fuzz_target!(init: write_seeds(config::seeds), |data: &[u8]| config::run(data));
