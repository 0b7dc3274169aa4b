//! CPython code objects read from a traced process. The process access
//! itself (`/proc/PID/mem`, needs a live process) is not fuzzed; the input
//! stands for its memory: byte 0 picks the CPython version, the rest is a
//! memory image at `BASE` holding a code object at its start. The target
//! follows the pointers as `python::process` does (code object → name,
//! qualname and filename string objects → line table bytes object) with
//! the pure decoders of `python::decode`, then looks up lines for the first
//! code units.

use crate::{Seeds, repo_root};
use storprof_stacks::python::{
    decode::{
        bytes_data_offset, bytes_len, code_header_len, decode_chars, frame_name, instr_index,
        line_for_index, parse_code, unicode_layout,
    },
    offsets::{CodeOffsets, VERSIONS},
};

/// Address of the image's first byte (pointers in the seeds point inside).
const BASE: u64 = 0x7f00_0000_0000;
/// Cap on a string's or line table's length, as `python::process` reads.
const MAX_OBJECT_BYTES: u64 = 1 << 16;
/// Code units whose lines are looked up per input.
const LINE_LOOKUPS: u32 = 64;

/// The memory image as the process reader sees it.
struct Image<'a>(&'a [u8]);

impl Image<'_> {
    fn read(&self, addr: u64, len: u64) -> Option<&[u8]> {
        let at = usize::try_from(addr.checked_sub(BASE)?).ok()?;
        let len = usize::try_from(len).ok()?;
        self.0.get(at..at.checked_add(len)?)
    }
}

fn read_string(mem: &Image, code: &CodeOffsets, addr: u64) -> Option<String> {
    let header = mem.read(addr, code.compact_size)?;
    let (data, length, kind) = unicode_layout(code, header)?;
    let bytes = mem.read(
        addr.checked_add(data)?,
        length.min(MAX_OBJECT_BYTES).checked_mul(u64::from(kind))?,
    )?;
    Some(decode_chars(kind, bytes))
}

fn hex(s: &str) -> Option<Vec<u8>> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Images built from the code objects dumped from real interpreters
/// (crates/stacks/src/python/testdata): the code object, then its name string,
/// then its line table, with the code object's pointers moved to them.
pub fn seeds() -> Seeds {
    let dir = repo_root().join("crates/stacks/src/python/testdata");
    let mut out = Vec::new();
    for (vi, v) in VERSIONS.iter().enumerate() {
        let path = dir.join(format!("py{}{}.json", v.major, v.minor));
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(fx) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let functions = fx["functions"].as_array().cloned().unwrap_or_default();
        for (fi, f) in functions.iter().enumerate() {
            let field = |k: &str| f[k].as_str().and_then(hex);
            let (Some(mut code), Some(name), Some(table)) = (
                field("code_bytes"),
                field("name_bytes"),
                field("linetable_bytes"),
            ) else {
                continue;
            };
            let name_at = BASE + code.len() as u64;
            let table_at = name_at + name.len() as u64;
            let mut put = |at: u64, value: u64| {
                if let Some(slot) = code.get_mut(at as usize..at as usize + 8) {
                    slot.copy_from_slice(&value.to_le_bytes());
                }
            };
            put(v.code.name, name_at);
            put(v.code.filename, name_at);
            if let Some(q) = v.code.qualname {
                put(q, name_at);
            }
            put(v.code.linetable, table_at);
            let mut image = vec![vi as u8];
            image.extend(code);
            image.extend(name);
            image.extend(table);
            out.push((format!("seed-py{}{}-{fi}", v.major, v.minor), image));
        }
    }
    out
}

pub fn run(data: &[u8]) {
    let Some((&which, image)) = data.split_first() else {
        return;
    };
    // Every kind byte, as a corrupt string header could give.
    let _ = decode_chars(which, image);
    let v = &VERSIONS[usize::from(which) % VERSIONS.len()];
    let code = &v.code;
    let mem = Image(image);
    let Some(header) = mem.read(BASE, code_header_len(code)) else {
        return;
    };
    let Some(fields) = parse_code(code, header) else {
        return;
    };
    let name = fields
        .qualname
        .and_then(|q| read_string(&mem, code, q))
        .or_else(|| read_string(&mem, code, fields.name));
    let filename = read_string(&mem, code, fields.filename);
    let table = mem
        .read(fields.linetable, bytes_data_offset())
        .and_then(bytes_len)
        .and_then(|len| {
            let start = fields.linetable.checked_add(bytes_data_offset())?;
            mem.read(start, len.min(MAX_OBJECT_BYTES))
        })
        .unwrap_or(&[]);
    for index in 0..LINE_LOOKUPS {
        let line = line_for_index(v.linetable, table, fields.firstlineno, index);
        let _ = frame_name(
            name.as_deref().unwrap_or(""),
            filename.as_deref().unwrap_or(""),
            line,
        );
    }
    // The frame's instruction pointer is recorded by the probe: any value.
    for instr in [0, BASE, u64::MAX, fields.linetable] {
        if let Some(index) = instr_index(v, BASE, instr) {
            let _ = line_for_index(v.linetable, table, fields.firstlineno, index);
        }
    }
}
