//! Stack resolution, in one place and without the kernel: the recorder
//! hands in what the probes captured, this turns it into frames.
//!
//! ```text
//!  user stack bytes + registers ─► unwind:: (frame pointers, or DWARF
//!        │                          CFI through framehop; which one per
//!        │                          ELF file: unwind::frame_pointers)
//!        ▼
//!  addresses ─► symbolize:: (blazesym: kallsyms, ELF symbols, DWARF)
//!
//!  a Python thread's frame records ─► python:: (the interpreter's
//!        offsets per version, frames decoded from process memory)
//! ```
//!
//! Everything reads files and process memory only: the fuzz targets and
//! the unit tests link it without aya.
pub mod python;
pub mod symbolize;
pub mod unwind;
