//! Pure decoding of what the probe recorded about Python frames: line
//! tables, string and code objects from raw memory, and the splicing of
//! Python frames into the native stack. No process access: unit-tested on
//! recorded bytes.
use super::offsets::{
    BYTES_DATA, BYTES_SIZE, CodeOffsets, EntryMarker, InstrField, LineTableFormat, UNICODE_LENGTH,
    UNICODE_STATE, VersionOffsets,
};

/// Name of the native function that runs Python frames.
pub const EVAL_FRAME: &str = "_PyEval_EvalFrameDefault";

/// True for the native frame of CPython's bytecode loop.
pub fn is_eval_frame(name: &str) -> bool {
    name.starts_with(EVAL_FRAME)
}

/// Line of the instruction at code-unit `index` (None: no line, e.g. an
/// artificial instruction, or past the table).
pub fn line_for_index(
    format: LineTableFormat,
    table: &[u8],
    firstlineno: i32,
    index: u32,
) -> Option<i32> {
    match format {
        LineTableFormat::Locations311 => line_311(table, firstlineno, index),
        LineTableFormat::Pairs310 => line_310(table, firstlineno, index as u64 * 2),
    }
}

/// PEP 657 location table: entries of (first byte: 1 CCCC LLL, code C,
/// length L+1 code units) and code-dependent varints.
fn line_311(table: &[u8], firstlineno: i32, index: u32) -> Option<i32> {
    let mut at = 0usize;
    let mut next = || -> Option<u8> {
        let b = *table.get(at)?;
        at += 1;
        Some(b)
    };
    let mut line = firstlineno;
    let mut start: u64 = 0;
    while let Some(first) = next() {
        let code = (first >> 3) & 15;
        let length = (first & 7) as u64 + 1;
        let has_line = match code {
            15 => false,
            // Line deltas come from a traced process's memory: a sum past
            // i32 is a corrupt table, so no line rather than a wrapped one.
            14 => {
                line = line.checked_add(svarint(&mut next)?)?;
                varint(&mut next)?;
                varint(&mut next)?;
                varint(&mut next)?;
                true
            }
            13 => {
                line = line.checked_add(svarint(&mut next)?)?;
                true
            }
            10..=12 => {
                line = line.checked_add(code as i32 - 10)?;
                next()?;
                next()?;
                true
            }
            _ => {
                next()?;
                true
            }
        };
        if (index as u64) < start + length {
            return has_line.then_some(line);
        }
        start += length;
    }
    None
}

fn varint(next: &mut impl FnMut() -> Option<u8>) -> Option<u32> {
    let mut b = next()?;
    let mut value = (b & 63) as u32;
    let mut shift = 6;
    while b & 64 != 0 && shift < 32 {
        b = next()?;
        value |= ((b & 63) as u32) << shift;
        shift += 6;
    }
    Some(value)
}

fn svarint(next: &mut impl FnMut() -> Option<u8>) -> Option<i32> {
    let v = varint(next)?;
    Some(if v & 1 != 0 {
        -((v >> 1) as i32)
    } else {
        (v >> 1) as i32
    })
}

/// 3.10 `co_linetable`: (unsigned byte-offset delta, signed line delta)
/// pairs; a line delta of -128 means "no line".
fn line_310(table: &[u8], firstlineno: i32, byte_offset: u64) -> Option<i32> {
    let mut end: u64 = 0;
    let mut line = firstlineno;
    for pair in table.chunks_exact(2) {
        let start = end;
        end += pair[0] as u64;
        let delta = pair[1] as i8;
        let this = if delta == -128 {
            None
        } else {
            // As in line_311: past i32 the table is corrupt.
            line = line.checked_add(delta as i32)?;
            Some(line)
        };
        if byte_offset >= start && byte_offset < end {
            return this;
        }
    }
    None
}

/// Reads a little-endian integer of `N` bytes at `at` in `bytes`.
fn le<const N: usize>(bytes: &[u8], at: u64) -> Option<[u8; N]> {
    let at = usize::try_from(at).ok()?;
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn u64_at(bytes: &[u8], at: u64) -> Option<u64> {
    le::<8>(bytes, at).map(u64::from_le_bytes)
}

fn i32_at(bytes: &[u8], at: u64) -> Option<i32> {
    le::<4>(bytes, at).map(i32::from_le_bytes)
}

/// Fields of a code object, from the bytes of its `PyCodeObject`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeFields {
    pub firstlineno: i32,
    pub filename: u64,
    pub name: u64,
    /// `co_qualname`, when the version has one.
    pub qualname: Option<u64>,
    pub linetable: u64,
}

/// Bytes of a `PyCodeObject` user space must read to decode it.
pub fn code_header_len(code: &CodeOffsets) -> u64 {
    [
        code.firstlineno + 4,
        code.filename + 8,
        code.name + 8,
        code.linetable + 8,
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
}

/// Parses the fields of a code object from its first bytes.
pub fn parse_code(code: &CodeOffsets, bytes: &[u8]) -> Option<CodeFields> {
    Some(CodeFields {
        firstlineno: i32_at(bytes, code.firstlineno)?,
        filename: u64_at(bytes, code.filename)?,
        name: u64_at(bytes, code.name)?,
        qualname: match code.qualname {
            Some(at) => Some(u64_at(bytes, at)?),
            None => None,
        },
        linetable: u64_at(bytes, code.linetable)?,
    })
}

/// Where a string object's characters are: (offset of the data from the
/// object, length in characters, bytes per character), from its header.
pub fn unicode_layout(code: &CodeOffsets, header: &[u8]) -> Option<(u64, u64, u8)> {
    let length = u64_at(header, UNICODE_LENGTH)?;
    let state = u32::from_le_bytes(le::<4>(header, UNICODE_STATE)?);
    let kind = ((state >> 2) & 7) as u8;
    let compact = (state >> 5) & 1 == 1;
    let ascii = (state >> 6) & 1 == 1;
    if !compact || !matches!(kind, 1 | 2 | 4) {
        return None;
    }
    let data = if ascii {
        code.ascii_size
    } else {
        code.compact_size
    };
    Some((data, length, kind))
}

/// Decodes `length` characters of `kind` bytes each (1: Latin-1, 2: UCS-2, 4: UCS-4).
pub fn decode_chars(kind: u8, data: &[u8]) -> String {
    match kind {
        1 => data.iter().map(|&b| b as char).collect(),
        2 => data
            .chunks_exact(2)
            .map(|c| char::from_u32(u16::from_le_bytes([c[0], c[1]]) as u32).unwrap_or('?'))
            .collect(),
        _ => data
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]])).unwrap_or('?'))
            .collect(),
    }
}

/// Length of a bytes object from its header.
pub fn bytes_len(header: &[u8]) -> Option<u64> {
    u64_at(header, BYTES_SIZE)
}

/// Offset of a bytes object's data.
pub const fn bytes_data_offset() -> u64 {
    BYTES_DATA
}

/// Code-unit index of a frame's instruction (None: before the first).
pub fn instr_index(offsets: &VersionOffsets, code_addr: u64, instr: u64) -> Option<u32> {
    match offsets.instr {
        InstrField::Pointer => {
            let start = code_addr.checked_add(offsets.code.code_units)?;
            let delta = instr.checked_sub(start)?;
            u32::try_from(delta / 2).ok()
        }
        InstrField::LastiUnits => {
            let lasti = instr as u32 as i32;
            u32::try_from(lasti).ok()
        }
    }
}

/// Kind of a recorded frame for the splicing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameRole {
    /// A Python frame of an eval call that ran others before it.
    Inner,
    /// The first frame an eval call ran: its outermost Python frame.
    Entry,
    /// A shim frame an eval call pushed below its first frame (3.12+): not
    /// shown; ends the call's group.
    Shim,
}

/// The role of a recorded frame from its flag byte.
pub fn frame_role(entry: EntryMarker, flag: u8) -> FrameRole {
    match entry {
        EntryMarker::EveryFrame => FrameRole::Entry,
        EntryMarker::IsEntryFlag if flag != 0 => FrameRole::Entry,
        EntryMarker::IsEntryFlag => FrameRole::Inner,
        EntryMarker::CStackOwner(owner) if flag == owner => FrameRole::Shim,
        EntryMarker::CStackOwner(_) => FrameRole::Inner,
    }
}

/// Splits Python frames (innermost first, with their roles) into one group
/// per eval call, innermost call first, each group innermost first.
pub fn group_by_eval_call<T: Clone>(frames: &[(T, FrameRole)]) -> Vec<Vec<T>> {
    let mut groups = Vec::new();
    let mut current = Vec::new();
    for (frame, role) in frames {
        match role {
            FrameRole::Inner => current.push(frame.clone()),
            FrameRole::Entry => {
                current.push(frame.clone());
                groups.push(std::mem::take(&mut current));
            }
            FrameRole::Shim => {
                if !current.is_empty() {
                    groups.push(std::mem::take(&mut current));
                }
            }
        }
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

/// Replaces each eval-loop native frame (leaf first) with the Python
/// frames of the call it was running, innermost first, like
/// `py-spy --native`. Groups left over (the native walk stopped before
/// reaching their eval frames) go to the outer end; eval frames left over
/// stay as they are.
pub fn splice(native: &[String], groups: &[Vec<String>]) -> Vec<String> {
    let mut out = Vec::with_capacity(native.len() + groups.iter().map(Vec::len).sum::<usize>());
    let mut next_group = groups.iter();
    for frame in native {
        if is_eval_frame(frame)
            && let Some(group) = next_group.next()
        {
            out.extend(group.iter().cloned());
        } else {
            out.push(frame.clone());
        }
    }
    for group in next_group {
        out.extend(group.iter().cloned());
    }
    out
}

/// A Python frame as shown in stacks: `function (file:LINE)`.
pub fn frame_name(function: &str, filename: &str, line: Option<i32>) -> String {
    let text = match line {
        Some(line) => format!("{function} ({filename}:{line})"),
        None => format!("{function} ({filename})"),
    };
    crate::symbolize::clean_frame(&text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::offsets::for_version;

    /// Found by the `python` fuzz target (a line table read from process
    /// memory): a line delta past i32 gives no line, not a panic (debug)
    /// or a wrapped negative line (release).
    #[test]
    fn line_past_i32_is_no_line() {
        // 3.11+: one entry, code 13 (a signed varint line delta of +1), 1 unit.
        let table = [0x80 | (13 << 3), 0x02];
        let f = LineTableFormat::Locations311;
        assert_eq!(line_for_index(f, &table, 10, 0), Some(11));
        assert_eq!(line_for_index(f, &table, i32::MAX, 0), None);
        // Codes 10..=12: the delta is in the code itself (code 12: +2).
        let table = [0x80 | (12 << 3), 0, 0];
        assert_eq!(line_for_index(f, &table, i32::MAX - 1, 0), None);
        // 3.10: (byte delta 2, line delta +1) pairs.
        let f = LineTableFormat::Pairs310;
        assert_eq!(line_for_index(f, &[2, 1], 10, 0), Some(11));
        assert_eq!(line_for_index(f, &[2, 1], i32::MAX, 0), None);
    }

    #[test]
    fn splits_311_frames_at_entry_frames_and_splices_them() {
        let frames = [
            ("leaf".to_string(), FrameRole::Inner),
            ("mid".to_string(), FrameRole::Entry),
            ("outer".to_string(), FrameRole::Inner),
            ("main".to_string(), FrameRole::Entry),
        ];
        let groups = group_by_eval_call(&frames);
        assert_eq!(groups, vec![vec!["leaf", "mid"], vec!["outer", "main"]]);
        let native: Vec<String> = [
            "memcpy",
            "_PyEval_EvalFrameDefault",
            "PyObject_Call",
            "_PyEval_EvalFrameDefault",
            "Py_RunMain",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            splice(&native, &groups),
            [
                "memcpy",
                "leaf",
                "mid",
                "PyObject_Call",
                "outer",
                "main",
                "Py_RunMain"
            ]
        );
        // The native walk stopped early: outer groups go to the outer end.
        assert_eq!(
            splice(&native[..2], &groups),
            ["memcpy", "leaf", "mid", "outer", "main"]
        );
    }

    #[test]
    fn shim_frames_end_a_group_and_are_dropped() {
        let entry = for_version(3, 12).unwrap().entry;
        let frames = [
            ("f", frame_role(entry, 0)),
            ("g", frame_role(entry, 1)),
            ("shim", frame_role(entry, 3)),
            ("main", frame_role(entry, 0)),
            ("shim", frame_role(entry, 3)),
        ];
        assert_eq!(
            group_by_eval_call(&frames),
            vec![vec!["f", "g"], vec!["main"]]
        );
    }

    #[test]
    fn decodes_the_310_pair_table() {
        // def f():       line 1
        //     x = 1      line 2: 4 bytes
        //     y = 2      line 3: 4 bytes
        //     return x   line 4: 4 bytes
        let table = [0u8, 1, 4, 0, 4, 1, 4, 1];
        assert_eq!(line_310(&table, 1, 0), Some(2));
        assert_eq!(line_310(&table, 1, 6), Some(3));
        assert_eq!(line_310(&table, 1, 10), Some(4));
        assert_eq!(line_310(&table, 1, 12), None);
        assert_eq!(line_310(&[4, 0x80], 7, 2), None);
    }

    #[test]
    fn decodes_string_layouts() {
        let code = for_version(3, 11).unwrap().code;
        let mut header = vec![0u8; 48];
        header[16..24].copy_from_slice(&5u64.to_le_bytes());
        // kind 1, compact, ascii.
        header[32..36].copy_from_slice(&((1u32 << 2) | (1 << 5) | (1 << 6)).to_le_bytes());
        assert_eq!(unicode_layout(&code, &header), Some((48, 5, 1)));
        header[32..36].copy_from_slice(&((2u32 << 2) | (1 << 5)).to_le_bytes());
        assert_eq!(unicode_layout(&code, &header), Some((72, 5, 2)));
        assert_eq!(
            decode_chars(2, &[0x3b1u16.to_le_bytes(), [b'x', 0]].concat()),
            "αx"
        );
    }
}
