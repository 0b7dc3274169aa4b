//! ELF files and their `.eh_frame`: the input is a binary a traced process
//! maps. It is written to a scratch file (the unwinder and the symbolizer
//! open binaries by path) and goes through everything `record` does with
//! one: the frame-pointer prologue scan, the DWARF unwinder (sections,
//! segments, `.eh_frame_hdr`/`.eh_frame`/`.debug_frame` via framehop) over
//! a stack built from the input, and the symbolizer (symbol tables and
//! DWARF via blazesym) over the unwound addresses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storprof::{
    symbolize::{MapEntry, Symbolizer},
    unwind::{
        DwarfUnwinder, StackSample,
        frame_pointers::{choose, scan_elf},
    },
};
use storprof_fuzz::{scratch_dir, write_seeds};

/// Where the binary is mapped in the pretend process.
const START: u64 = 0x5555_0000_0000;
const SP: u64 = 0x7ffc_0000_0000;
/// Stack bytes taken from the input.
const STACK: usize = 256;

/// Small binaries of this machine (a few hundred KB at most).
fn seeds() {
    let mut out = Vec::new();
    for path in [
        "/bin/true",
        "/usr/bin/true",
        "/bin/sleep",
        "/usr/lib/x86_64-linux-gnu/libdl.so.2",
    ] {
        if let Ok(bytes) = std::fs::read(path)
            && bytes.len() <= 256 * 1024
        {
            out.push((format!("seed-{}", path.replace('/', "_")), bytes));
        }
    }
    write_seeds(out);
}

fuzz_target!(init: seeds(), |data: &[u8]| {
    let _ = choose(scan_elf(data));
    let path = scratch_dir().join("binary");
    if let Err(e) = std::fs::write(&path, data) {
        panic!("fuzz harness: cannot write {}: {e}", path.display());
    }
    let Some(path) = path.to_str().map(str::to_string) else {
        return;
    };
    let len = data.len() as u64;
    let layout = vec![MapEntry {
        start: START,
        end: START + len.max(1).next_multiple_of(4096),
        offset: 0,
        path: Some(path),
    }];
    // The stack holds words from the input: return addresses and saved
    // frame pointers the unwinder follows.
    let mut stack: Vec<u8> = data.iter().rev().take(STACK).copied().collect();
    stack.resize(STACK, 0);
    let mut unwinder = DwarfUnwinder::new();
    let mut symbolizer = Symbolizer::new();
    symbolizer.set_layout(1, layout.clone(), Vec::new());
    for i in 0..4 {
        let sample = StackSample {
            ip: START + len * i / 4,
            sp: SP,
            bp: SP + 64,
            stack: stack.clone(),
        };
        let unwound = unwinder.unwind(1, &layout, &sample);
        let _ = symbolizer.user_frames(1, &unwound.ips);
    }
});
