//! CPython code objects read from a traced process. The process access
//! itself (`/proc/PID/mem`, needs a live process) is not fuzzed; the input
//! stands for its memory: byte 0 picks the CPython version, the rest is a
//! memory image at `BASE` holding a code object at its start. The target
//! follows the pointers as `python::process` does (code object → name,
//! qualname and filename string objects → line table bytes object) with
//! the pure decoders of `python::decode`, then looks up lines for the first
//! code units.
//!
//! The body and seeds: `storprof_fuzz_targets::python`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof_fuzz::{targets::python, write_seeds};

fuzz_target!(init: write_seeds(python::seeds), |data: &[u8]| python::run(data));
