//! User-space DWARF unwinding of sampled user stacks (no frame pointers
//! needed).
//!
//! Data flow: the perf_event probe copies the user registers (ip, sp, bp)
//! and a bounded window of the user stack above sp into a ring buffer;
//! `record` hands each such [`StackSample`] with the process's executable
//! mappings ([`crate::symbolize::MapEntry`]) to [`DwarfUnwinder::unwind`],
//! which walks the stack with `framehop` from the binaries' `.eh_frame`
//! (and `.debug_frame`) and returns the instruction pointers, leaf first,
//! ready for [`crate::symbolize::Symbolizer::user_frames`]. Unwind sections
//! are read once per file (keyed by GNU build-id, else path + size + mtime)
//! and shared by every process mapping that file, so cost stays bounded.
//! Code without unwind information is unwound through its frame pointer,
//! except CPython's perf trampolines (`-X perf`, 3.12+, named `py::` in the
//! perf map), which keep none: their one-slot frame is stepped over.
pub mod frame_pointers;

use std::{
    collections::HashMap,
    ops::{Deref, Range},
    sync::Arc,
};

use framehop::{
    ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder,
    x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64},
};
use object::{Object, ObjectSection, ObjectSegment};

use crate::symbolize::MapEntry;

/// Most frames one stack unwinds to (deeper stacks count as stopped early).
pub const MAX_FRAMES: usize = 128;

/// A binary's contents: mapped read-only (only the pages of the sections
/// used are ever read), or owned (a compressed section, or a file that
/// could not be mapped).
#[derive(Debug)]
pub(crate) enum FileBytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Self::Mapped(m) => m,
            Self::Owned(v) => v,
        }
    }
}

/// A section's bytes, shared between processes mapping the same file.
#[derive(Clone, Debug)]
pub struct SharedBytes {
    file: Arc<FileBytes>,
    range: Range<usize>,
}

impl Deref for SharedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.file[self.range.clone()]
    }
}

impl SharedBytes {
    /// `section` (borrowed from `file`'s bytes, or decompressed) as shared bytes.
    fn of(file: &Arc<FileBytes>, section: std::borrow::Cow<'_, [u8]>) -> Self {
        match section {
            std::borrow::Cow::Borrowed(b) => {
                let base = file.as_ptr() as usize;
                let start = (b.as_ptr() as usize).wrapping_sub(base);
                if start <= file.len() && b.len() <= file.len() - start {
                    return Self {
                        file: file.clone(),
                        range: start..start + b.len(),
                    };
                }
                Self::owned(b.to_vec())
            }
            std::borrow::Cow::Owned(v) => Self::owned(v),
        }
    }

    fn owned(v: Vec<u8>) -> Self {
        let len = v.len();
        Self {
            file: Arc::new(FileBytes::Owned(v)),
            range: 0..len,
        }
    }
}

/// The bytes of the file at `path`: mapped when possible, else read.
pub(crate) fn file_bytes(path: &str) -> std::io::Result<Arc<FileBytes>> {
    let file = std::fs::File::open(path)?;
    // SAFETY: a read-only private mapping of a binary that processes are
    // executing; executables and libraries in use are replaced by rename,
    // not rewritten in place, so the mapped bytes stay valid.
    match unsafe { memmap2::Mmap::map(&file) } {
        Ok(m) => Ok(Arc::new(FileBytes::Mapped(m))),
        Err(_) => Ok(Arc::new(FileBytes::Owned(std::fs::read(path)?))),
    }
}

/// One captured user stack: registers at the sample and the stack bytes
/// from `sp` upwards.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StackSample {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// `stack[i]` is the byte at address `sp + i`.
    pub stack: Vec<u8>,
}

/// Why an unwind ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnwindEnd {
    /// Reached the outermost frame (a zero return address / no caller).
    Complete,
    /// Stopped before the outermost frame: the stack window ended, an
    /// address had no unwind information, or `MAX_FRAMES` was reached.
    Early,
}

/// Instruction pointers of one stack (leaf first) and how the walk ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unwound {
    pub ips: Vec<u64>,
    pub end: UnwindEnd,
}

/// Unwind sections of one ELF file, as framehop wants them.
#[derive(Clone, Debug)]
struct FileUnwindInfo {
    /// File offset → SVMA of the executable segment: svma = offset + delta.
    exec_segments: Vec<(Range<u64>, u64)>,
    text_svma: Option<Range<u64>>,
    text: Option<SharedBytes>,
    eh_frame_svma: Option<Range<u64>>,
    eh_frame: Option<SharedBytes>,
    eh_frame_hdr_svma: Option<Range<u64>>,
    eh_frame_hdr: Option<SharedBytes>,
    got_svma: Option<Range<u64>>,
    debug_frame: Option<SharedBytes>,
}

/// Errors reading a file's unwind information.
#[derive(Debug, thiserror::Error)]
pub enum UnwindError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing ELF {path}: {source}")]
    Elf {
        path: String,
        #[source]
        source: object::Error,
    },
}

impl FileUnwindInfo {
    fn parse(path: &str, bytes: &Arc<FileBytes>) -> Result<Self, UnwindError> {
        let data: &[u8] = bytes;
        let file = object::File::parse(data).map_err(|source| UnwindError::Elf {
            path: path.to_string(),
            source,
        })?;
        // Addresses and sizes are the file's word: a section or segment
        // whose end lies past u64 is corrupt and left out, not wrapped.
        let section = |name: &str| -> (Option<Range<u64>>, Option<SharedBytes>) {
            match file.section_by_name(name) {
                Some(s) => match s.address().checked_add(s.size()) {
                    Some(end) => (
                        Some(s.address()..end),
                        s.uncompressed_data()
                            .ok()
                            .map(|d| SharedBytes::of(bytes, d)),
                    ),
                    None => (None, None),
                },
                None => (None, None),
            }
        };
        let (text_svma, text) = section(".text");
        let (eh_frame_svma, eh_frame) = section(".eh_frame");
        let (eh_frame_hdr_svma, eh_frame_hdr) = section(".eh_frame_hdr");
        let (got_svma, _) = section(".got");
        let (_, debug_frame) = section(".debug_frame");
        let exec_segments = file
            .segments()
            .filter_map(|seg| {
                let (offset, size) = seg.file_range();
                Some((
                    offset..offset.checked_add(size)?,
                    seg.address().wrapping_sub(offset),
                ))
            })
            .collect();
        Ok(Self {
            exec_segments,
            text_svma,
            text,
            eh_frame_svma,
            eh_frame,
            eh_frame_hdr_svma,
            eh_frame_hdr,
            got_svma,
            debug_frame,
        })
    }

    /// SVMA delta (svma − file offset) of the segment holding `offset`.
    fn delta_at(&self, offset: u64) -> Option<u64> {
        self.exec_segments
            .iter()
            .find(|(range, _)| range.contains(&offset))
            .map(|(_, delta)| *delta)
    }

    fn section_info(&self) -> ExplicitModuleSectionInfo<SharedBytes> {
        ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: self.text_svma.clone(),
            text: self.text.clone(),
            got_svma: self.got_svma.clone(),
            eh_frame_svma: self.eh_frame_svma.clone(),
            eh_frame: self.eh_frame.clone(),
            eh_frame_hdr_svma: self.eh_frame_hdr_svma.clone(),
            eh_frame_hdr: self.eh_frame_hdr.clone(),
            debug_frame: self.debug_frame.clone(),
            stubs_svma: None,
            stub_helper_svma: None,
            unwind_info: None,
            text_segment_svma: None,
            text_segment: None,
        }
    }
}

/// Identity of a file's contents: its GNU build-id, else path, size and mtime.
fn file_key(path: &str, data: &[u8]) -> String {
    if let Ok(file) = object::File::parse(data)
        && let Ok(Some(id)) = file.build_id()
    {
        return id.iter().map(|b| format!("{b:02x}")).collect();
    }
    let meta = std::fs::metadata(path).ok();
    let mtime = meta
        .as_ref()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{path}:{}:{mtime}", data.len())
}

/// A process's unwinder, built from one layout of its mappings.
struct ProcessUnwinder {
    layout: Vec<MapEntry>,
    unwinder: UnwinderX86_64<SharedBytes>,
}

/// DWARF unwinder for many processes, with per-file unwind tables cached.
#[derive(Default)]
pub struct DwarfUnwinder {
    /// path → (content key, parsed unwind info); None when unreadable.
    files_by_path: HashMap<String, Option<Arc<FileUnwindInfo>>>,
    /// content key → parsed info, shared by paths with the same build-id.
    files_by_key: HashMap<String, Arc<FileUnwindInfo>>,
    processes: HashMap<u32, ProcessUnwinder>,
    cache: Option<CacheX86_64>,
}

impl DwarfUnwinder {
    pub fn new() -> Self {
        Self::default()
    }

    fn file_info(&mut self, path: &str) -> Option<Arc<FileUnwindInfo>> {
        if let Some(info) = self.files_by_path.get(path) {
            return info.clone();
        }
        let info = match file_bytes(path) {
            Ok(data) => {
                let key = file_key(path, &data);
                match self.files_by_key.get(&key) {
                    Some(info) => Some(info.clone()),
                    None => match FileUnwindInfo::parse(path, &data) {
                        Ok(parsed) => {
                            let parsed = Arc::new(parsed);
                            self.files_by_key.insert(key, parsed.clone());
                            Some(parsed)
                        }
                        Err(err) => {
                            log::debug!("unwind: {err}");
                            None
                        }
                    },
                }
            }
            Err(err) => {
                log::debug!("unwind: reading {path}: {err}");
                None
            }
        };
        self.files_by_path.insert(path.to_string(), info.clone());
        info
    }

    /// Takes `bytes` as the contents of the binary at `path`: a later
    /// unwind of a layout that maps `path` uses their unwind information
    /// (parsed here, as a file read from disk is) instead of reading the
    /// file. For the fuzz targets (fuzz/), which unwind over binaries in
    /// memory. Returns whether the bytes parsed as an object file.
    pub fn add_file_bytes(&mut self, path: &str, bytes: Vec<u8>) -> bool {
        let info = match FileUnwindInfo::parse(path, &Arc::new(FileBytes::Owned(bytes))) {
            Ok(parsed) => Some(Arc::new(parsed)),
            Err(err) => {
                log::debug!("unwind: {err}");
                None
            }
        };
        let parsed = info.is_some();
        self.files_by_path.insert(path.to_string(), info);
        // Processes built from an earlier file at this path are stale.
        self.processes
            .retain(|_, p| p.layout.iter().all(|e| e.path.as_deref() != Some(path)));
        parsed
    }

    fn process(&mut self, tgid: u32, layout: &[MapEntry]) -> &ProcessUnwinder {
        let stale = self
            .processes
            .get(&tgid)
            .is_none_or(|p| p.layout.as_slice() != layout);
        if stale {
            let mut unwinder = UnwinderX86_64::new();
            for entry in layout {
                let Some(path) = entry.path.as_deref() else {
                    continue;
                };
                let Some(info) = self.file_info(path) else {
                    continue;
                };
                let Some(delta) = info.delta_at(entry.offset) else {
                    continue;
                };
                // avma = base_avma + svma, svma = file offset + delta.
                let base_avma = entry.start.wrapping_sub(entry.offset).wrapping_sub(delta);
                unwinder.add_module(Module::new(
                    path.to_string(),
                    entry.start..entry.end,
                    base_avma,
                    info.section_info(),
                ));
            }
            self.processes.insert(
                tgid,
                ProcessUnwinder {
                    layout: layout.to_vec(),
                    unwinder,
                },
            );
        }
        &self.processes[&tgid]
    }

    /// Forgets a process's unwinder (its unwind tables stay cached per file).
    pub fn forget(&mut self, tgid: u32) {
        self.processes.remove(&tgid);
    }

    /// Unwinds one sample of process `tgid`, whose executable mappings are
    /// `layout`. Returns the instruction pointers, leaf first (the first is
    /// the sampled ip, the others return addresses).
    pub fn unwind(&mut self, tgid: u32, layout: &[MapEntry], sample: &StackSample) -> Unwound {
        self.unwind_with(tgid, layout, sample, &|_| false)
    }

    /// [`Self::unwind`], with `is_python_trampoline` telling which
    /// addresses are CPython perf trampolines (`sub $8,%rsp; call *%rcx`:
    /// the caller's return address is one slot above the stack pointer).
    pub fn unwind_with(
        &mut self,
        tgid: u32,
        layout: &[MapEntry],
        sample: &StackSample,
        is_python_trampoline: &dyn Fn(u64) -> bool,
    ) -> Unwound {
        let mut cache = self.cache.take().unwrap_or_default();
        let process = self.process(tgid, layout);
        let stack = &sample.stack;
        let sp = sample.sp;
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let offset = addr.checked_sub(sp).ok_or(())? as usize;
            let bytes = stack
                .get(offset..offset.checked_add(8).ok_or(())?)
                .ok_or(())?;
            let mut word = [0u8; 8];
            word.copy_from_slice(bytes);
            Ok(u64::from_le_bytes(word))
        };
        let mut regs = UnwindRegsX86_64::new(sample.ip, sample.sp, sample.bp);
        let mut address = FrameAddress::from_instruction_pointer(sample.ip);
        let mut ips = vec![sample.ip];
        let end = loop {
            if ips.len() >= MAX_FRAMES {
                break UnwindEnd::Early;
            }
            let lookup = address.address_for_lookup();
            let next = if address.is_return_address() && is_python_trampoline(lookup) {
                let sp = regs.sp();
                match read_stack(sp.wrapping_add(8)) {
                    Ok(return_address) => {
                        regs.set_sp(sp.wrapping_add(16));
                        Ok(Some(return_address))
                    }
                    Err(()) => break UnwindEnd::Early,
                }
            } else {
                process
                    .unwinder
                    .unwind_frame(address, &mut regs, &mut cache, &mut read_stack)
            };
            match next {
                Ok(Some(return_address)) => match FrameAddress::from_return_address(return_address)
                {
                    Some(next_address) => {
                        ips.push(return_address);
                        address = next_address;
                    }
                    None => break UnwindEnd::Early,
                },
                Ok(None) => break UnwindEnd::Complete,
                Err(_) => break UnwindEnd::Early,
            }
        };
        self.cache = Some(cache);
        Unwound { ips, end }
    }
}

#[cfg(test)]
mod tests;
