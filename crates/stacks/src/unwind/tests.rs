use super::*;

/// An ELF64 x86-64 header and one PT_LOAD program header at `offset`
/// of `size` bytes (no sections).
fn elf_with_segment(offset: u64, size: u64) -> Vec<u8> {
    let mut b = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0];
    b.resize(16, 0);
    b.extend(2u16.to_le_bytes()); // ET_EXEC
    b.extend(0x3eu16.to_le_bytes()); // x86-64
    b.extend(1u32.to_le_bytes());
    b.extend(0u64.to_le_bytes()); // entry
    b.extend(64u64.to_le_bytes()); // phoff
    b.extend(0u64.to_le_bytes()); // shoff
    b.extend(0u32.to_le_bytes());
    for v in [64u16, 56, 1, 64, 0, 0] {
        b.extend(v.to_le_bytes()); // ehsize, phentsize, phnum, shentsize, shnum, shstrndx
    }
    b.extend(1u32.to_le_bytes()); // PT_LOAD
    b.extend(5u32.to_le_bytes()); // R+X
    for v in [offset, 0x400000, 0x400000, size, size, 0x1000] {
        b.extend(v.to_le_bytes());
    }
    b
}

/// Found by the `elf` fuzz target: a segment whose file range ends
/// past u64 is left out (it panicked in debug builds and wrapped to
/// a bogus range in release builds).
#[test]
fn a_segment_past_u64_is_left_out() {
    let parse = |elf: Vec<u8>| {
        FileUnwindInfo::parse("test", &Arc::new(FileBytes::Owned(elf))).map_err(|e| e.to_string())
    };
    let good = parse(elf_with_segment(0, 0x100)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(good.exec_segments, vec![(0..0x100, 0x400000)]);
    let bad = parse(elf_with_segment(u64::MAX - 0x10, 0x100)).unwrap_or_else(|e| panic!("{e}"));
    assert!(bad.exec_segments.is_empty(), "{:?}", bad.exec_segments);
}
use crate::symbolize::{Symbolizer, parse_maps};

/// A binary given as bytes unwinds as the same binary read from its
/// file: the stack of this test, with this test binary's bytes under
/// another name, reaches the same frames.
#[test]
fn file_bytes_unwind_as_the_file_does() {
    let sample = capture_own_stack(16 * 1024);
    let maps = parse_maps(&std::fs::read_to_string("/proc/self/maps").unwrap_or_default());
    let exe = std::env::current_exe().unwrap_or_default();
    let exe = exe.to_string_lossy().into_owned();
    let from_file = DwarfUnwinder::new().unwind(1, &maps, &sample);
    assert!(from_file.ips.len() > 3, "{from_file:?}");
    let renamed = "in-memory-test-binary";
    let layout: Vec<MapEntry> = maps
        .iter()
        .map(|m| MapEntry {
            path: if m.path.as_deref() == Some(exe.as_str()) {
                Some(renamed.to_string())
            } else {
                m.path.clone()
            },
            ..m.clone()
        })
        .collect();
    let mut unwinder = DwarfUnwinder::new();
    assert!(unwinder.add_file_bytes(renamed, std::fs::read(&exe).unwrap_or_default()));
    assert_eq!(unwinder.unwind(1, &layout, &sample), from_file);
    assert!(!unwinder.add_file_bytes("not-an-elf", b"plain text".to_vec()));
}

/// Captures this thread's registers and `len` bytes of its stack, as the
/// probe does for a sampled thread.
#[inline(never)]
fn capture_own_stack(len: usize) -> StackSample {
    let (ip, sp, bp): (u64, u64, u64);
    // SAFETY: reads three registers into locals; no memory is touched.
    unsafe {
        std::arch::asm!(
            "lea {ip}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            ip = out(reg) ip,
            sp = out(reg) sp,
            bp = out(reg) bp,
        );
    }
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    let stack_top = maps
        .lines()
        .find(|l| l.ends_with("[stack]") || l.contains(" [stack]"))
        .and_then(|l| l.split(['-', ' ']).nth(1))
        .and_then(|end| u64::from_str_radix(end, 16).ok())
        .unwrap_or(u64::MAX);
    // Test threads run on their own (mmap'ed) stacks: read at most up to
    // the end of the mapping holding sp, and of the writable mappings
    // that continue it (the kernel may split one stack in several).
    let ranges: Vec<(u64, u64, bool)> = maps
        .lines()
        .filter_map(|l| {
            let mut fields = l.split(' ');
            let range = fields.next()?;
            let writable = fields.next()?.starts_with("rw");
            let (s, e) = range.split_once('-')?;
            Some((
                u64::from_str_radix(s, 16).ok()?,
                u64::from_str_radix(e, 16).ok()?,
                writable,
            ))
        })
        .collect();
    let mapping_end = match ranges.iter().position(|(s, e, _)| sp >= *s && sp < *e) {
        Some(i) => {
            let mut end = ranges[i].1;
            for &(s, e, writable) in &ranges[i + 1..] {
                if s != end || !writable {
                    break;
                }
                end = e;
            }
            end
        }
        None => stack_top,
    };
    let len = len.min((mapping_end - sp) as usize);
    // SAFETY: [sp, sp + len) lies inside this thread's mapped stack.
    let stack = unsafe { std::slice::from_raw_parts(sp as *const u8, len) }.to_vec();
    StackSample { ip, sp, bp, stack }
}

#[inline(never)]
fn nested_capture_level_two(len: usize) -> StackSample {
    std::hint::black_box(capture_own_stack(len))
}

#[inline(never)]
fn nested_capture_level_one(len: usize) -> StackSample {
    std::hint::black_box(nested_capture_level_two(len))
}

fn symbolized(sample: &StackSample) -> (Vec<String>, UnwindEnd) {
    let pid = std::process::id();
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    let layout = parse_maps(&maps);
    let mut unwinder = DwarfUnwinder::new();
    let unwound = unwinder.unwind(pid, &layout, sample);
    let mut symbolizer = Symbolizer::new();
    assert!(symbolizer.set_layout_text(pid, &maps, None));
    (symbolizer.user_frames(pid, &unwound.ips), unwound.end)
}

#[test]
// Its own frame is looked for: the harness's closure must not inline it.
#[inline(never)]
fn unwinds_a_captured_sample_of_this_process() {
    let sample = nested_capture_level_one(1 << 20);
    let (frames, end) = symbolized(&sample);
    let pos = |needle: &str| {
        frames
            .iter()
            .position(|f| f.contains(needle))
            .unwrap_or_else(|| panic!("{needle} not in {frames:#?}"))
    };
    let leaf = pos("capture_own_stack");
    let two = pos("nested_capture_level_two");
    let one = pos("nested_capture_level_one");
    let test = pos("unwinds_a_captured_sample_of_this_process");
    assert!(leaf < two && two < one && one < test, "{frames:#?}");
    // Through the test harness (std, built without frame pointers) to
    // the thread's start.
    assert!(
        frames.len() > test + 3,
        "{end:?} {} stack bytes: {frames:#?}",
        sample.stack.len()
    );
}

#[test]
fn a_short_window_stops_early_but_keeps_the_leaf() {
    let sample = nested_capture_level_one(64 * 1024);
    let mut short = sample.clone();
    short.stack.truncate(64);
    let (frames, end) = symbolized(&short);
    assert_eq!(end, UnwindEnd::Early);
    assert!(frames[0].contains("capture_own_stack"), "{frames:#?}");
    let (full, _) = symbolized(&sample);
    assert!(full.len() > frames.len());
}
