//! ELF files and their `.eh_frame`: the input is a binary a traced process
//! maps. It goes through everything `record` does with one: the
//! frame-pointer prologue scan, the DWARF unwinder (sections, segments,
//! `.eh_frame_hdr`/`.eh_frame`/`.debug_frame` via framehop) over a stack
//! built from the input, and the symbolizer (symbol tables and DWARF via
//! blazesym) over the unwound addresses. All in memory: the unwinder takes
//! the bytes (`DwarfUnwinder::add_file_bytes`); blazesym opens binaries by
//! path only, so it gets a memfd's `/proc/self/fd/N`, never a disk file.
//!
//! The body and seeds: `storprof_fuzz_targets::elf`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof_fuzz::{targets::elf, write_seeds};

fuzz_target!(init: write_seeds(elf::seeds), |data: &[u8]| elf::run(data));
