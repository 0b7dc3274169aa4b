//! ELF files and their `.eh_frame`: the input is a binary a traced process
//! maps. It goes through everything `record` does with one: the
//! frame-pointer prologue scan, the DWARF unwinder (sections, segments,
//! `.eh_frame_hdr`/`.eh_frame`/`.debug_frame` via framehop) over a stack
//! built from the input, and the symbolizer (symbol tables and DWARF via
//! blazesym) over the unwound addresses. All in memory: the unwinder takes
//! the bytes (`DwarfUnwinder::add_file_bytes`); blazesym opens binaries by
//! path only, so it gets a memfd's `/proc/self/fd/N`, never a disk file.

use std::{fs::File, io::Write, os::fd::FromRawFd};

use crate::Seeds;
use storprof_stacks::{
    symbolize::{MapEntry, Symbolizer},
    unwind::{
        DwarfUnwinder, StackSample,
        frame_pointers::{choose, scan_elf},
    },
};

/// Where the binary is mapped in the pretend process.
const START: u64 = 0x5555_0000_0000;
const SP: u64 = 0x7ffc_0000_0000;
/// Stack bytes taken from the input.
const STACK: usize = 256;

/// Small binaries of this machine (a few hundred KB at most).
pub fn seeds() -> Seeds {
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
    out
}

/// An anonymous in-memory file holding `data`.
fn memfd_with(data: &[u8]) -> File {
    // SAFETY: a NUL-terminated name and no flags; the result is checked.
    let fd = unsafe { libc::memfd_create(c"storprof-fuzz-elf".as_ptr(), 0) };
    if fd < 0 {
        panic!(
            "fuzz harness: memfd_create: {}",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    let mut file = unsafe { File::from_raw_fd(fd) };
    if let Err(e) = file.write_all(data) {
        panic!("fuzz harness: writing the memfd: {e}");
    }
    file
}

pub fn run(data: &[u8]) {
    let _ = choose(scan_elf(data));
    // A fresh memfd per input: blazesym maps the file it opens, and
    // truncating one it still maps would fault.
    let file = memfd_with(data);
    let path = {
        use std::os::fd::AsRawFd;
        format!("/proc/self/fd/{}", file.as_raw_fd())
    };
    let len = data.len() as u64;
    let layout = vec![MapEntry {
        start: START,
        end: START + len.max(1).next_multiple_of(4096),
        offset: 0,
        path: Some(path.clone()),
    }];
    // The stack holds words from the input: return addresses and saved
    // frame pointers the unwinder follows.
    let mut stack: Vec<u8> = data.iter().rev().take(STACK).copied().collect();
    stack.resize(STACK, 0);
    let mut unwinder = DwarfUnwinder::new();
    unwinder.add_file_bytes(&path, data.to_vec());
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
    // The symbolizer (and its mappings of the memfd) goes before the file.
    drop(symbolizer);
    drop(file);
}
