//! The live side of Python frames: finds the CPython interpreter of a
//! traced process (from its mappings, the ELF symbols `_PyRuntime`,
//! `Py_Version`, `PyCode_Type` and, for 3.13, `_Py_DebugOffsets`) and
//! resolves the code objects the probe recorded by reading the process's
//! memory (`/proc/PID/mem`), cached per (process, code object). Forked
//! workers share their parent's interpreter and code objects: a child
//! inherits the parent's interpreter, and a code object the child can no
//! longer be read for (it exited) is read from the parent.
use std::{
    collections::{BTreeMap, HashMap},
    fs::File,
    os::unix::fs::FileExt,
    sync::Arc,
};

use object::{Object, ObjectSegment, ObjectSymbol};
use rustc_hash::FxHashMap;
use storprof_common::{PyFrameRecord, PyProcess};

use super::{
    decode::{self, FrameRole},
    offsets::{self, OB_TYPE, VersionOffsets},
};
use crate::symbolize::MapEntry;

/// Symbols of one ELF file that holds an interpreter.
#[derive(Clone, Debug, Default)]
struct InterpreterSymbols {
    runtime: Option<u64>,
    py_version: Option<u64>,
    code_type: Option<u64>,
    /// File range → svma delta (svma − file offset) of each segment.
    segments: Vec<(std::ops::Range<u64>, u64)>,
}

impl InterpreterSymbols {
    fn read(path: &str) -> Option<Self> {
        // Mapped: only the symbol tables' pages are read.
        let data = crate::unwind::file_bytes(path).ok()?;
        let file = object::File::parse(&**data).ok()?;
        let mut out = Self::default();
        for sym in file.symbols().chain(file.dynamic_symbols()) {
            let slot = match sym.name() {
                Ok("_PyRuntime") => &mut out.runtime,
                Ok("Py_Version") => &mut out.py_version,
                Ok("PyCode_Type") => &mut out.code_type,
                _ => continue,
            };
            if sym.address() != 0 {
                *slot = Some(sym.address());
            }
        }
        out.segments = file
            .segments()
            .map(|seg| {
                let (offset, size) = seg.file_range();
                (offset..offset + size, seg.address().wrapping_sub(offset))
            })
            .collect();
        Some(out)
    }

    /// Load bias of the file in a process, from one of its mappings.
    fn bias(&self, entry: &MapEntry) -> Option<u64> {
        let delta = self
            .segments
            .iter()
            .find(|(range, _)| range.contains(&entry.offset))
            .map(|(_, delta)| *delta)?;
        Some(entry.start.wrapping_sub(entry.offset).wrapping_sub(delta))
    }
}

/// An interpreter found in a process.
#[derive(Clone, Debug)]
pub struct Interpreter {
    pub offsets: &'static VersionOffsets,
    /// The probe's entry (runtime address and offsets).
    pub probe: PyProcess,
    /// Address of `PyCode_Type` (checks that a recorded pointer is a code object).
    pub code_type: Option<u64>,
    /// The file holding the interpreter (python binary or libpython).
    pub path: String,
}

impl Interpreter {
    pub fn version(&self) -> String {
        format!("{}.{}", self.offsets.major, self.offsets.minor)
    }
}

/// What [`PythonResolver::detect`] found in a process.
#[derive(Clone, Debug)]
pub enum Detection {
    Found(Interpreter),
    /// An interpreter of a version without offsets here.
    Unsupported {
        version: String,
        path: String,
    },
    /// No interpreter mapped (yet).
    NotPython,
}

/// A decoded code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeInfo {
    pub name: String,
    pub filename: String,
    pub firstlineno: i32,
    pub linetable: Vec<u8>,
}

/// Longest string or line table read from a process.
const MAX_OBJECT_BYTES: u64 = 1 << 16;

/// `major.minor` from a file name like `libpython3.11.so.1.0` or `python3.9`.
pub fn version_from_path(path: &str) -> Option<(u8, u8)> {
    let base = path.rsplit('/').next()?;
    let rest = &base[base.find("python")? + "python".len()..];
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Reads a process's memory.
struct ProcessMemory(File);

impl ProcessMemory {
    fn open(pid: u32) -> Option<Self> {
        File::open(format!("/proc/{pid}/mem")).ok().map(Self)
    }

    fn read(&self, addr: u64, len: u64) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; usize::try_from(len).ok()?];
        self.0.read_exact_at(&mut buf, addr).ok()?;
        Some(buf)
    }

    fn u64(&self, addr: u64) -> Option<u64> {
        let bytes = self.read(addr, 8)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }
}

/// Python frame statistics of one recording.
#[derive(Clone, Debug, Default)]
pub struct PythonStats {
    /// Samples of processes with a registered interpreter, by `py_status`.
    pub samples_by_status: BTreeMap<u16, u64>,
    /// Frames whose code object could not be read.
    pub unreadable_frames: u64,
}

/// Finds interpreters and resolves recorded Python frames.
#[derive(Default)]
pub struct PythonResolver {
    symbols: HashMap<String, Option<Arc<InterpreterSymbols>>>,
    interpreters: FxHashMap<u32, Interpreter>,
    parents: FxHashMap<u32, u32>,
    memories: FxHashMap<u32, Option<Arc<ProcessMemory>>>,
    code_cache: FxHashMap<(u32, u64), Option<Arc<CodeInfo>>>,
    /// (code object read, instruction) → frame name: a sample's frames are
    /// mostly the ones the last samples had, and decoding the line table
    /// and formatting the name was most of the work of resolving them.
    /// Keyed by the `CodeInfo`'s address, so emptied with `code_cache`.
    name_cache: FxHashMap<(usize, u64), String>,
    /// Interpreters seen, for the session notes: (version, path) → processes.
    seen: BTreeMap<(String, String), u64>,
    /// Unsupported interpreters: (version, path) → processes.
    unsupported: BTreeMap<(String, String), u64>,
    pub stats: PythonStats,
}

impl PythonResolver {
    pub fn new() -> Self {
        Self::default()
    }

    /// The interpreter of `tgid` (its own, or inherited through forks).
    pub fn interpreter(&self, tgid: u32) -> Option<&Interpreter> {
        let mut pid = tgid;
        for _ in 0..64 {
            if let Some(interp) = self.interpreters.get(&pid) {
                return Some(interp);
            }
            pid = *self.parents.get(&pid)?;
        }
        None
    }

    pub fn has_interpreter(&self, tgid: u32) -> bool {
        self.interpreters.contains_key(&tgid)
    }

    /// A forked child runs its parent's interpreter.
    pub fn inherit(&mut self, child: u32, parent: u32) {
        self.parents.insert(child, parent);
        if let Some(interp) = self.interpreter(parent).cloned() {
            self.interpreters.insert(child, interp);
        }
    }

    /// Forked children recorded with [`Self::inherit`] that have no
    /// interpreter yet (they were forked before the parent's was found).
    pub fn children_without_interpreter(&self, parent: u32) -> Vec<u32> {
        self.parents
            .iter()
            .filter(|&(child, p)| *p == parent && !self.interpreters.contains_key(child))
            .map(|(&child, _)| child)
            .collect()
    }

    /// A process exec'ed: its old interpreter and code objects are gone.
    pub fn forget(&mut self, tgid: u32) {
        self.interpreters.remove(&tgid);
        self.parents.remove(&tgid);
        self.memories.remove(&tgid);
        self.code_cache.retain(|(pid, _), _| *pid != tgid);
        self.name_cache.clear();
    }

    fn symbols_of(&mut self, path: &str) -> Option<Arc<InterpreterSymbols>> {
        if let Some(known) = self.symbols.get(path) {
            return known.clone();
        }
        let read = InterpreterSymbols::read(path)
            .filter(|s| s.runtime.is_some())
            .map(Arc::new);
        self.symbols.insert(path.to_string(), read.clone());
        read
    }

    fn memory(&mut self, pid: u32) -> Option<Arc<ProcessMemory>> {
        self.memories
            .entry(pid)
            .or_insert_with(|| ProcessMemory::open(pid).map(Arc::new))
            .clone()
    }

    /// Looks for an interpreter in `tgid`'s executable mappings; records it
    /// when found (call [`Self::interpreter`] for the probe entry).
    pub fn detect(&mut self, tgid: u32, layout: &[MapEntry]) -> Detection {
        for entry in layout {
            let Some(path) = entry.path.as_deref() else {
                continue;
            };
            let base = path.rsplit('/').next().unwrap_or(path);
            if !base.contains("python") {
                continue;
            }
            let Some(symbols) = self.symbols_of(path) else {
                continue;
            };
            let (Some(runtime_svma), Some(bias)) = (symbols.runtime, symbols.bias(entry)) else {
                continue;
            };
            let memory = self.memory(tgid);
            let version = symbols
                .py_version
                .and_then(|svma| memory.as_ref()?.u64(bias.wrapping_add(svma)))
                .map(|hex| (((hex >> 24) & 0xff) as u8, ((hex >> 16) & 0xff) as u8))
                .filter(|&(major, _)| major == 3)
                .or_else(|| version_from_path(path));
            let Some((major, minor)) = version else {
                continue;
            };
            let runtime = bias.wrapping_add(runtime_svma);
            let Some(table) = offsets::for_version(major, minor) else {
                let key = (format!("{major}.{minor}"), path.to_string());
                *self.unsupported.entry(key).or_insert(0) += 1;
                return Detection::Unsupported {
                    version: format!("{major}.{minor}"),
                    path: path.to_string(),
                };
            };
            let mut probe = offsets::probe_entry(table, runtime);
            if (major, minor) == (3, 13) {
                match memory
                    .as_ref()
                    .and_then(|m| m.read(runtime, DEBUG_OFFSETS_WORDS * 8))
                    .and_then(|bytes| debug_offsets_313(&bytes, &probe))
                {
                    Some(checked) => probe = checked,
                    None => log::debug!("python: no valid _Py_DebugOffsets in pid {tgid}"),
                }
            }
            let interp = Interpreter {
                offsets: table,
                probe,
                code_type: symbols.code_type.map(|svma| bias.wrapping_add(svma)),
                path: path.to_string(),
            };
            *self
                .seen
                .entry((interp.version(), path.to_string()))
                .or_insert(0) += 1;
            self.interpreters.insert(tgid, interp.clone());
            return Detection::Found(interp);
        }
        Detection::NotPython
    }

    /// Reads and decodes a code object of `pid` (or of its parents).
    fn code_info(&mut self, pid: u32, kind: CodeKind, addr: u64) -> Option<Arc<CodeInfo>> {
        let mut owner = pid;
        for _ in 0..8 {
            if let Some(known) = self.code_cache.get(&(owner, addr)) {
                if known.is_some() {
                    return known.clone();
                }
            } else {
                let info = self
                    .memory(owner)
                    .and_then(|m| read_code(&m, kind, addr))
                    .map(Arc::new);
                self.code_cache.insert((owner, addr), info.clone());
                if info.is_some() {
                    return info;
                }
            }
            owner = *self.parents.get(&owner)?;
        }
        None
    }

    /// Names and roles of one CPU sample's Python frames (innermost
    /// first); counts the sample's walk status.
    pub fn resolve(
        &mut self,
        tgid: u32,
        status: u16,
        records: &[PyFrameRecord],
    ) -> Vec<(String, FrameRole)> {
        if self.interpreter(tgid).is_none() {
            return Vec::new();
        }
        *self.stats.samples_by_status.entry(status).or_insert(0) += 1;
        self.resolve_frames(tgid, records)
    }

    /// Names and roles of recorded Python frames (innermost first).
    pub fn resolve_frames(
        &mut self,
        tgid: u32,
        records: &[PyFrameRecord],
    ) -> Vec<(String, FrameRole)> {
        // What reading a code object needs, not a clone of the whole
        // interpreter (its path) per sample.
        let Some(kind) = self.interpreter(tgid).map(CodeKind::of) else {
            return Vec::new();
        };
        let offsets = kind.offsets;
        let mut out = Vec::with_capacity(records.len());
        for record in records {
            let role = decode::frame_role(offsets.entry, record.flag());
            if role == FrameRole::Shim {
                out.push((String::new(), role));
                continue;
            }
            let code = record.code();
            let name = match self.code_info(tgid, kind, code) {
                Some(info) => {
                    let key = (Arc::as_ptr(&info) as usize, record.instr);
                    if let Some(name) = self.name_cache.get(&key) {
                        out.push((name.clone(), role));
                        continue;
                    }
                    let line = decode::instr_index(offsets, code, record.instr)
                        .and_then(|index| {
                            decode::line_for_index(
                                offsets.linetable,
                                &info.linetable,
                                info.firstlineno,
                                index,
                            )
                        })
                        .or(Some(info.firstlineno));
                    let name = decode::frame_name(&info.name, &info.filename, line);
                    self.name_cache.insert(key, name.clone());
                    name
                }
                None => {
                    self.stats.unreadable_frames += 1;
                    "[python: code object gone]".to_string()
                }
            };
            out.push((name, role));
        }
        out
    }

    /// Lines for `session.json` notes: interpreters found, unsupported
    /// versions, and how the frame walks went.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for ((version, path), n) in &self.seen {
            notes.push(format!(
                "python: CPython {version} ({path}) in {n} process(es): Python frames interleaved with native frames"
            ));
        }
        for ((version, path), n) in &self.unsupported {
            notes.push(format!(
                "python: CPython {version} ({path}) in {n} process(es) is not a supported interpreter version (3.10-3.13): native frames only"
            ));
        }
        let total: u64 = self.stats.samples_by_status.values().sum();
        if total > 0 {
            let by = |s: u16| self.stats.samples_by_status.get(&s).copied().unwrap_or(0);
            use storprof_common::py_status;
            notes.push(format!(
                "python: {total} samples of interpreter processes: {} with Python frames, {} on threads without a Python thread state, {} truncated at {} frames, {} failed reads; {} frames with unreadable code objects",
                by(py_status::OK) + by(py_status::TRUNCATED),
                by(py_status::NO_THREAD),
                by(py_status::TRUNCATED),
                storprof_common::MAX_PY_FRAMES,
                by(py_status::READ_FAILED),
                self.stats.unreadable_frames
            ));
        }
        notes
    }
}

/// Words of `_Py_DebugOffsets` (3.13) read to check the offsets.
const DEBUG_OFFSETS_WORDS: u64 = 44;

/// The 3.13 probe entry from the interpreter's own `_Py_DebugOffsets`
/// (at the start of `_PyRuntime`); None when the cookie or version is wrong.
pub fn debug_offsets_313(bytes: &[u8], table: &PyProcess) -> Option<PyProcess> {
    if bytes.get(..8)? != b"xdebugpy" {
        return None;
    }
    let word = |i: usize| -> Option<u32> {
        let b = bytes.get(i * 8..i * 8 + 8)?;
        u32::try_from(u64::from_le_bytes(b.try_into().ok()?)).ok()
    };
    let version = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
    if (version >> 16) & 0xffff != 0x030d {
        return None;
    }
    Some(PyProcess {
        runtime_interp_head: word(5)?,
        interp_tstate_head: word(9)?,
        tstate_next: word(21)?,
        tstate_frame: word(23)?,
        tstate_native_tid: word(25)?,
        frame_previous: word(29)?,
        frame_code: word(30)?,
        frame_instr: word(31)?,
        frame_flag: word(33)?,
        ..*table
    })
}

/// Reads a code object's name, file name, first line and line table.
/// What reading an interpreter's code objects needs.
#[derive(Clone, Copy)]
struct CodeKind {
    offsets: &'static VersionOffsets,
    /// Address of `PyCode_Type`, when known.
    code_type: Option<u64>,
}

impl CodeKind {
    fn of(interp: &Interpreter) -> Self {
        Self {
            offsets: interp.offsets,
            code_type: interp.code_type,
        }
    }
}

fn read_code(memory: &ProcessMemory, kind: CodeKind, addr: u64) -> Option<CodeInfo> {
    let code = &kind.offsets.code;
    if let Some(code_type) = kind.code_type
        && memory.u64(addr.checked_add(OB_TYPE)?)? != code_type
    {
        return None;
    }
    let header = memory.read(addr, decode::code_header_len(code))?;
    let fields = decode::parse_code(code, &header)?;
    let name = match fields.qualname {
        Some(qualname) => read_string(memory, code, qualname)
            .or_else(|| read_string(memory, code, fields.name))?,
        None => read_string(memory, code, fields.name)?,
    };
    let filename = read_string(memory, code, fields.filename)?;
    let table_header = memory.read(fields.linetable, decode::bytes_data_offset())?;
    let table_len = decode::bytes_len(&table_header)?.min(MAX_OBJECT_BYTES);
    // Pointers read from the process: an address past u64 is no object.
    let linetable = memory.read(
        fields.linetable.checked_add(decode::bytes_data_offset())?,
        table_len,
    )?;
    Some(CodeInfo {
        name,
        filename,
        firstlineno: fields.firstlineno,
        linetable,
    })
}

fn read_string(memory: &ProcessMemory, code: &offsets::CodeOffsets, addr: u64) -> Option<String> {
    let header = memory.read(addr, code.compact_size)?;
    let (data, length, kind) = decode::unicode_layout(code, &header)?;
    let bytes = memory.read(
        addr.checked_add(data)?,
        length.min(MAX_OBJECT_BYTES) * kind as u64,
    )?;
    Some(decode::decode_chars(kind, &bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_file_names() {
        assert_eq!(
            version_from_path("/x/lib/libpython3.11.so.1.0"),
            Some((3, 11))
        );
        assert_eq!(version_from_path("/usr/bin/python3.9"), Some((3, 9)));
        assert_eq!(version_from_path("/usr/bin/python3"), None);
    }

    #[test]
    fn reads_313_debug_offsets() {
        let table = offsets::for_version(3, 13).unwrap().probe;
        let mut words = [0u64; DEBUG_OFFSETS_WORDS as usize];
        words[1] = 0x030d00f0;
        for (i, v) in [
            (5, 632),
            (9, 7344),
            (21, 8),
            (23, 72),
            (25, 160),
            (29, 8),
            (30, 0),
            (31, 56),
            (33, 70),
        ] {
            words[i] = v;
        }
        let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        bytes[..8].copy_from_slice(b"xdebugpy");
        assert_eq!(debug_offsets_313(&bytes, &table), Some(table));
        bytes[..8].copy_from_slice(b"xdebugpz");
        assert_eq!(debug_offsets_313(&bytes, &table), None);
    }
}
