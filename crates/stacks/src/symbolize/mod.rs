//! Turns recorded instruction pointers into frame names with blazesym.
//!
//! Data flow: while the recording runs, `record` hands
//! [`Symbolizer::set_layout_text`] each traced process's address layout
//! (`/proc/PID/maps`) and perf map (`/tmp/perf-PID.map`) when it appears
//! (fork/exec events) and while it is young, read through its kernel seam,
//! so the layouts of short-lived workers are kept after they exit. At the end, user addresses are turned
//! into (file, file offset) with that layout and symbolized from the ELF
//! files (symbols and DWARF); anonymous memory is looked up in the perf map;
//! kernel addresses are named by the kernel when the recorder can ask it
//! ([`Symbolizer::name_kernel_addresses`]), else from kallsyms, and
//! suffixed `_[k]`.
use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use blazesym::symbolize::{
    Input, Symbolized, Symbolizer as Blaze,
    source::{Elf, Kernel, Source},
};

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MapEntry {
    pub start: u64,
    pub end: u64,
    pub offset: u64,
    /// Backing file, when the mapping is file-backed (not `[heap]`, anonymous...).
    pub path: Option<String>,
}

/// Parses `/proc/PID/maps` text (executable mappings only).
pub fn parse_maps(text: &str) -> Vec<MapEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(perms), Some(offset)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !perms.contains('x') {
            continue;
        }
        let _dev = fields.next();
        let _inode = fields.next();
        let rest: Vec<&str> = fields.collect();
        let path = rest.join(" ");
        let Some((start, end)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(start, 16),
            u64::from_str_radix(end, 16),
            u64::from_str_radix(offset, 16),
        ) else {
            continue;
        };
        let path = path.strip_suffix(" (deleted)").unwrap_or(&path).to_string();
        let path = (path.starts_with('/')).then_some(path);
        out.push(MapEntry {
            start,
            end,
            offset,
            path,
        });
    }
    out
}

/// One line of a perf map (`START SIZE name`, hex addresses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfMapEntry {
    pub start: u64,
    pub size: u64,
    pub name: String,
}

/// Parses `/tmp/perf-PID.map` (written by JITs: Python 3.12 -X perf, Java, node).
pub fn parse_perf_map(text: &str) -> Vec<PerfMapEntry> {
    let mut out: Vec<PerfMapEntry> = text
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ' ');
            let start = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
            let size = u64::from_str_radix(parts.next()?.trim_start_matches("0x"), 16).ok()?;
            let name = parts.next()?.trim().to_string();
            Some(PerfMapEntry { start, size, name })
        })
        .collect();
    out.sort_by_key(|e| e.start);
    out
}

/// The file name of `path` (the part after its last `/`).
fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Makes a symbol usable as a folded-stack frame (no `;`, no newline).
pub fn clean_frame(name: &str) -> String {
    name.replace([';', '\n'], ":")
}

/// Remembers process layouts and symbolizes stacks.
pub struct Symbolizer {
    blaze: Blaze,
    /// Layouts are shared: the children a process forks without exec
    /// have its layout, and a recording that sees thousands of them keeps
    /// one copy (see [`Self::intern`]).
    maps: HashMap<u32, Arc<Vec<MapEntry>>>,
    /// Every distinct layout, by content.
    layouts: HashSet<Arc<Vec<MapEntry>>>,
    perf_maps: HashMap<u32, Vec<PerfMapEntry>>,
    /// (file, file offset) → frame name.
    user_cache: HashMap<(String, u64), Option<String>>,
    kernel_cache: HashMap<u64, Option<String>>,
    /// (layout, address) → frame name, for addresses in a file mapping:
    /// saves the walk over the layout and the file's lookup when the same
    /// stacks are named again (every live update folds them all). Layouts
    /// are interned and kept, so their addresses name them.
    frame_cache: HashMap<(usize, u64), String>,
    /// Named user frame → the file it came from (basename): the report's
    /// libraries, which a frame's name alone does not tell.
    frame_modules: HashMap<String, String>,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Symbolizer {
    pub fn new() -> Self {
        Self {
            blaze: Blaze::new(),
            maps: HashMap::new(),
            layouts: HashSet::new(),
            perf_maps: HashMap::new(),
            user_cache: HashMap::new(),
            kernel_cache: HashMap::new(),
            frame_cache: HashMap::new(),
            frame_modules: HashMap::new(),
        }
    }

    /// The file each named user frame came from (basename), for the frames
    /// named so far. A name found in two files keeps the first.
    pub fn frame_modules(&self) -> &HashMap<String, String> {
        &self.frame_modules
    }

    /// Sets the layout of `tgid` from the text of its `/proc/PID/maps` and
    /// perf map, read by the caller (the recorder reads them through its
    /// kernel seam, so a replay names stacks with its own layouts). Keeps
    /// the old layout and returns false when `maps` has no mapping.
    pub fn set_layout_text(&mut self, tgid: u32, maps: &str, perf_map: Option<&str>) -> bool {
        let entries = parse_maps(maps);
        if entries.is_empty() {
            return false;
        }
        let shared = self.intern(entries);
        self.maps.insert(tgid, shared);
        if let Some(text) = perf_map {
            self.perf_maps.insert(tgid, parse_perf_map(text));
        }
        true
    }

    /// Sets the layout and perf map of `tgid` as [`Self::set_layout_text`]
    /// would have read them: for the fuzz targets (fuzz/), which feed
    /// layouts and ELF files without a live process.
    pub fn set_layout(&mut self, tgid: u32, maps: Vec<MapEntry>, perf_map: Vec<PerfMapEntry>) {
        let shared = self.intern(maps);
        self.maps.insert(tgid, shared);
        self.perf_maps.insert(tgid, perf_map);
    }

    /// The shared copy of `layout`.
    fn intern(&mut self, layout: Vec<MapEntry>) -> Arc<Vec<MapEntry>> {
        if let Some(shared) = self.layouts.get(&layout) {
            return Arc::clone(shared);
        }
        let shared = Arc::new(layout);
        self.layouts.insert(Arc::clone(&shared));
        shared
    }

    /// Forgets `tid`: it was taken for a process at its fork, and its
    /// exit showed a thread of another.
    pub fn forget_process(&mut self, tid: u32) {
        self.maps.remove(&tid);
        self.perf_maps.remove(&tid);
    }

    /// A forked child starts with its parent's layout.
    pub fn inherit(&mut self, child: u32, parent: u32) {
        if self.maps.contains_key(&child) {
            return;
        }
        if let Some(parent_maps) = self.maps.get(&parent).cloned() {
            self.maps.insert(child, parent_maps);
        }
        if let Some(parent_perf) = self.perf_maps.get(&parent).cloned() {
            self.perf_maps.insert(child, parent_perf);
        }
    }

    /// Which layout `tgid` has (equal ids: the same mappings), None when
    /// none was read.
    pub fn layout_id(&self, tgid: u32) -> Option<usize> {
        self.maps.get(&tgid).map(|l| Arc::as_ptr(l) as usize)
    }

    /// The last layout read of `tgid` (executable mappings).
    pub fn layout(&self, tgid: u32) -> Option<&[MapEntry]> {
        self.maps.get(&tgid).map(|layout| layout.as_slice())
    }

    /// True when `addr` lies in a CPython perf trampoline of `tgid`
    /// (a `py::` entry of its perf map, `-X perf`).
    pub fn is_python_trampoline(&self, tgid: u32, addr: u64) -> bool {
        let Some(entries) = self.perf_maps.get(&tgid) else {
            return false;
        };
        let i = entries.partition_point(|e| e.start <= addr);
        i > 0 && {
            let e = &entries[i - 1];
            addr < e.start.saturating_add(e.size) && e.name.starts_with("py::")
        }
    }

    /// Whether `addr` lies in an executable mapping of the last layout
    /// read of `tgid`.
    pub fn covers(&self, tgid: u32, addr: u64) -> bool {
        self.maps
            .get(&tgid)
            .is_some_and(|maps| maps.iter().any(|m| addr >= m.start && addr < m.end))
    }

    pub fn knows(&self, tgid: u32) -> bool {
        self.maps.contains_key(&tgid)
    }

    /// Frame names of a user stack, leaf first (as recorded).
    pub fn user_frames(&mut self, tgid: u32, ips: &[u64]) -> Vec<String> {
        ips.iter()
            .enumerate()
            .map(|(i, &ip)| {
                // Return addresses point after the call: look up the call itself.
                let addr = if i == 0 { ip } else { ip.saturating_sub(1) };
                self.user_frame(tgid, addr)
            })
            .collect()
    }

    fn user_frame(&mut self, tgid: u32, addr: u64) -> String {
        let layout = self.maps.get(&tgid).cloned();
        let cache_key = layout.as_ref().map(|l| (Arc::as_ptr(l) as usize, addr));
        if let Some(name) = cache_key.and_then(|k| self.frame_cache.get(&k)) {
            return name.clone();
        }
        let entry = layout
            .as_ref()
            .and_then(|maps| maps.iter().find(|m| addr >= m.start && addr < m.end))
            .cloned();
        match entry {
            Some(MapEntry {
                path: Some(path),
                start,
                offset,
                ..
            }) => {
                // addr ≥ start (the lookup); the offset is from a maps line.
                let Some(file_offset) = (addr - start).checked_add(offset) else {
                    return "[unknown]".to_string();
                };
                let key = (path.clone(), file_offset);
                if !self.user_cache.contains_key(&key) {
                    // The ELF symbol tables first: they name the function
                    // as DWARF would (no inline frames are asked for) at a
                    // fraction of the cost; DWARF (and debug links) only
                    // for addresses they do not cover.
                    let name = [false, true].into_iter().find_map(|debug_syms| {
                        let mut elf = Elf::new(&path);
                        elf.debug_syms = debug_syms;
                        match self
                            .blaze
                            .symbolize_single(&Source::Elf(elf), Input::FileOffset(file_offset))
                        {
                            Ok(Symbolized::Sym(sym)) => Some(clean_frame(&sym.name)),
                            _ => None,
                        }
                    });
                    // Recorded once per address named, not per frame looked up.
                    if let Some(name) = &name {
                        self.frame_modules
                            .entry(name.clone())
                            .or_insert_with(|| base_name(&path).to_string());
                    }
                    self.user_cache.insert(key.clone(), name);
                }
                let name = match self.user_cache.get(&key).cloned().flatten() {
                    Some(name) => name,
                    None => format!("[{}]", base_name(&path)),
                };
                if let Some(k) = cache_key {
                    self.frame_cache.insert(k, name.clone());
                }
                name
            }
            _ => self
                .perf_maps
                .get(&tgid)
                .and_then(|entries| {
                    entries
                        .iter()
                        .rev()
                        .find(|e| addr >= e.start && addr < e.start.saturating_add(e.size))
                })
                .map(|e| clean_frame(&e.name))
                .unwrap_or_else(|| "[unknown]".to_string()),
        }
    }

    /// The distinct addresses of `ips` that have no kernel name yet.
    pub fn unnamed_kernel_addresses(&self, ips: &[u64]) -> Vec<u64> {
        let mut unnamed: Vec<u64> = ips
            .iter()
            .copied()
            .filter(|ip| !self.kernel_cache.contains_key(ip))
            .collect();
        unnamed.sort_unstable();
        unnamed.dedup();
        unnamed
    }

    /// Names kernel addresses from another source than kallsyms (the
    /// kernel asked directly); None: no symbol.
    pub fn name_kernel_addresses(
        &mut self,
        named: impl IntoIterator<Item = (u64, Option<String>)>,
    ) {
        for (ip, name) in named {
            self.kernel_cache
                .insert(ip, name.map(|name| clean_frame(&name)));
        }
    }

    /// Frame names of a kernel stack, leaf first, each suffixed `_[k]`.
    pub fn kernel_frames(&mut self, ips: &[u64]) -> Vec<String> {
        let missing = self.unnamed_kernel_addresses(ips);
        if !missing.is_empty() {
            let src = Source::Kernel(Kernel {
                vmlinux: blazesym::MaybeDefault::None,
                debug_syms: false,
                ..Kernel::default()
            });
            let results = self.blaze.symbolize(&src, Input::AbsAddr(&missing));
            match results {
                Ok(syms) => {
                    for (ip, sym) in missing.iter().zip(syms) {
                        let name = match sym {
                            Symbolized::Sym(s) => Some(clean_frame(&s.name)),
                            Symbolized::Unknown(_) => None,
                        };
                        self.kernel_cache.insert(*ip, name);
                    }
                }
                Err(err) => {
                    log::debug!("kernel symbolization failed: {err}");
                    for ip in missing {
                        self.kernel_cache.insert(ip, None);
                    }
                }
            }
        }
        ips.iter()
            .map(|ip| match self.kernel_cache.get(ip).cloned().flatten() {
                Some(name) => format!("{name}_[k]"),
                None => "[unknown]_[k]".to_string(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by review while writing the `elf` fuzz target (the fuzzer had
    /// not reached it yet): a maps offset or a perf-map size whose sum with
    /// an address passes u64 is looked up without wrapping.
    #[test]
    fn offsets_and_sizes_past_u64_do_not_wrap() {
        let mut s = Symbolizer::new();
        let maps = vec![MapEntry {
            start: 0x1000,
            end: 0x2000,
            offset: u64::MAX,
            path: Some("/nonexistent/storprof-test".into()),
        }];
        let perf = vec![PerfMapEntry {
            start: u64::MAX - 5,
            size: 100,
            name: "py::f:x.py".into(),
        }];
        s.set_layout(1, maps, perf);
        // Wrapped, the offset would name the file ("[storprof-test]").
        assert_eq!(s.user_frames(1, &[0x1800]), ["[unknown]"]);
        // Wrapped, the entry's end would lie below its start.
        assert_eq!(s.user_frames(1, &[u64::MAX - 1]), ["py::f:x.py"]);
    }

    /// libc's internal functions (memcpy's AVX-512 variant, the hottest
    /// frame of a page-cache reader) are named from Debian's separate debug
    /// file, found by build-id, whose sections are zlib-compressed.
    #[test]
    fn libc_internal_functions_are_named_from_the_debug_file() {
        use object::{Object, ObjectSegment, ObjectSymbol};
        let libc = "/lib/x86_64-linux-gnu/libc.so.6";
        let data = std::fs::read(libc).expect("libc");
        let file = object::File::parse(&*data).expect("libc parses");
        let id: String = file
            .build_id()
            .expect("build id")
            .expect("libc has a build id")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let debug_path = format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
        let debug = std::fs::read(&debug_path).unwrap_or_else(|e| {
            panic!("{debug_path}: {e}: libc6-dbg is not installed (scripts/setup.sh installs it)")
        });
        let debug = object::File::parse(&*debug).expect("debug file parses");
        let want = "__memmove_avx512_unaligned_erms";
        let vaddr = debug
            .symbols()
            .find(|s| s.name() == Ok(want))
            .expect("the debug file has the symbol")
            .address();
        assert!(
            !file.dynamic_symbols().any(|s| s.address() == vaddr),
            "{want} is exported: the test would not need the debug file"
        );
        let offset = file
            .segments()
            .find_map(|seg| {
                let (file_start, _) = seg.file_range();
                (seg.address()..seg.address() + seg.size())
                    .contains(&vaddr)
                    .then(|| vaddr - seg.address() + file_start)
            })
            .expect("the symbol lies in a loaded segment");
        let base = 0x7f00_0000_0000;
        let mut s = Symbolizer::new();
        let maps = vec![MapEntry {
            start: base,
            end: base + data.len() as u64,
            offset: 0,
            path: Some(libc.into()),
        }];
        s.set_layout(1, maps, Vec::new());
        let got = s.user_frames(1, &[base + offset + 16]);
        // memmove and memcpy share the code: either name is right.
        assert!(
            got[0].starts_with("__mem") && got[0].ends_with("_avx512_unaligned_erms"),
            "{got:?}"
        );
        assert_eq!(
            s.frame_modules().get(&got[0]).map(String::as_str),
            Some("libc.so.6")
        );
    }

    #[test]
    fn parses_maps_lines() {
        let text = "\
00400000-00401000 r--p 00000000 fe:00 123 /usr/bin/helper
00401000-00495000 r-xp 00001000 fe:00 123 /usr/bin/helper
7f00-8f00 r-xp 00000000 00:00 0 
7ffd000-7ffe000 r-xp 00000000 00:00 0 [vdso]
9000-a000 r-xp 00002000 fe:00 77 /tmp/my lib.so (deleted)
";
        let maps = parse_maps(text);
        assert_eq!(maps.len(), 4);
        assert_eq!(
            maps[0],
            MapEntry {
                start: 0x401000,
                end: 0x495000,
                offset: 0x1000,
                path: Some("/usr/bin/helper".into())
            }
        );
        assert_eq!(maps[1].path, None);
        assert_eq!(maps[2].path, None);
        assert_eq!(maps[3].path.as_deref(), Some("/tmp/my lib.so"));
    }

    #[test]
    fn parses_perf_map() {
        let map = parse_perf_map("7f0000 40 py::read_batch:/x.py\n7e0000 10 jit;stub\nbad line\n");
        assert_eq!(map.len(), 2);
        assert_eq!(map[0].start, 0x7e0000);
        assert_eq!(map[1].name, "py::read_batch:/x.py");
        assert_eq!(clean_frame(&map[0].name), "jit:stub");
        let mut symbolizer = Symbolizer::new();
        symbolizer.perf_maps.insert(7, map);
        assert!(symbolizer.is_python_trampoline(7, 0x7f0010));
        assert!(!symbolizer.is_python_trampoline(7, 0x7f0040));
        assert!(!symbolizer.is_python_trampoline(7, 0x7e0004));
        assert!(!symbolizer.is_python_trampoline(8, 0x7f0010));
    }
}
