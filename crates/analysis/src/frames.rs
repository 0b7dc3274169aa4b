//! Where the time goes in folded stacks: hottest leaf functions (self time),
//! functions on the stack (inclusive time), libraries, and friendly
//! categories ("libpython string formatting", "Parquet decode", "page-cache
//! copies (kernel)") for headlines.
//!
//! ```text
//! FoldedStacks ──► hot_frames() ──► HotFrames { categories, self_functions,
//!                                               inclusive_functions, libraries }
//! ```
//!
//! Frame names come from the recorder's symbolizer: `function` for user
//! frames, optionally with a module in brackets or parentheses
//! (`func [libfoo.so]`, `func (libfoo.so)`, `libfoo.so+0x1f`), and the `_[k]`
//! suffix for kernel frames (the perf/inferno convention). The first frame of
//! every stack is the thread's comm and is not a function.
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use storprof_session::{load::FoldedStacks, model::FrameModules};

/// One row of a "where the time goes" table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameShare {
    pub name: String,
    /// Samples (on-CPU) or microseconds (off-CPU).
    pub count: u64,
    /// `count` / total of the folded file (0..1).
    pub share: f64,
}

/// The hottest frames of one folded file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HotFrames {
    pub total: u64,
    /// Friendly categories, each stack counted once (see [`categorize`]).
    pub categories: Vec<FrameShare>,
    /// Leaf functions (self time).
    pub self_functions: Vec<FrameShare>,
    /// Functions anywhere on the stack (inclusive time, counted once per stack).
    pub inclusive_functions: Vec<FrameShare>,
    /// Libraries / modules of the leaf frame ("kernel" for `_[k]` frames).
    pub libraries: Vec<FrameShare>,
    /// Leaf frames without a name (`[file]`, `[unknown]`), each with its count.
    #[serde(default)]
    pub unnamed: Vec<FrameShare>,
    /// Everything that ends in a frame without a name (`unnamed` lists the
    /// largest only).
    #[serde(default)]
    pub unnamed_total: u64,
    /// Python functions (`function (file.py)`, innermost) of the stacks
    /// that end in the interpreter: running bytecode, so holding the GIL
    /// (a C extension that releases it is not counted). Shares are of
    /// `total`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub python_functions: Vec<FrameShare>,
    /// Counts are critical-path weights (each thread's stacks scaled to its
    /// share of the path, 10,000 for the whole path), not samples.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub path_weighted: bool,
}

/// `function (/a/b/dir/file.py:LINE)` → `function (dir/file.py)`: the
/// function, and its file by the last two parts of its path (enough to
/// tell a package's module from the script's); None for a frame that is
/// not Python code.
pub fn python_function(frame: &str) -> Option<String> {
    let body = frame.strip_suffix(')')?;
    let (function, place) = body.rsplit_once(" (")?;
    let path = place.rsplit_once(':').map_or(place, |(path, _)| path);
    if !path.ends_with(".py") || function.is_empty() {
        return None;
    }
    let short = match path.rmatch_indices('/').nth(1) {
        Some((i, _)) => &path[i + 1..],
        None => path,
    };
    Some(format!("{function} ({short})"))
}

/// True when a leaf in library `lib` is the interpreter itself.
fn is_interpreter(lib: &str) -> bool {
    lib == "Python code" || lib.starts_with("libpython") || lib.starts_with("python")
}

/// True for a frame the symbolizer could not name: `[file]` (no symbol for
/// the address in that file), `[unknown]` (no file mapped there), either
/// with `_[k]`.
pub fn is_unnamed(frame: &str) -> bool {
    let f = frame.strip_suffix("_[k]").unwrap_or(frame);
    f.starts_with('[') && f.ends_with(']') && f != "[no stack]"
}

/// Why a frame has no name, for the report.
pub fn why_unnamed(frame: &str) -> &'static str {
    if is_kernel_frame(frame) {
        "a kernel address kallsyms does not cover"
    } else if frame == "[unknown]" {
        "no file mapped at the address (JIT code without a perf map, or a process whose layout could not be read)"
    } else if frame.starts_with("[python") {
        "a Python frame whose code object was gone when storprof read it"
    } else if frame.contains(char::is_whitespace) {
        "a frame storprof could not name"
    } else {
        "no symbol for the address in that file (stripped, and no debug file found)"
    }
}

/// A friendly category and the frame-name fragments that identify it.
struct Category {
    name: &'static str,
    /// Substrings matched against the frame name (case-sensitive).
    patterns: &'static [&'static str],
    /// Only kernel (`_[k]`) frames match.
    kernel_only: bool,
}

/// storprof bench reader functions known to be slow by design: named
/// wherever they appear on the stack (their callees, e.g. `core::fmt`, are
/// how they spend it).
const NAMED: &[Category] = &[
    Category {
        name: "format_global_index_map (dlio-legacy reader)",
        patterns: &["format_global_index_map"],
        kernel_only: false,
    },
    Category {
        name: "decode_whole_row_group (dlio-legacy reader)",
        patterns: &["decode_whole_row_group"],
        kernel_only: false,
    },
];

/// Categories that name a cause; the leaf-most matching frame decides.
/// Order only matters between categories matching the same frame.
const SPECIFIC: &[Category] = &[
    Category {
        name: "libpython string formatting",
        patterns: &[
            "PyUnicode_FromFormat",
            "PyUnicode_Format",
            "unicode_format",
            "_PyUnicodeWriter",
            "PyObject_Repr",
            "PyObject_Str",
            "PyUnicode_Join",
            "long_to_decimal_string",
            "PyOS_snprintf",
        ],
        kernel_only: false,
    },
    Category {
        name: "Rust string formatting (core::fmt)",
        patterns: &[
            "core::fmt::",
            "alloc::fmt::format",
            "<alloc::string::String as core::fmt",
        ],
        kernel_only: false,
    },
    Category {
        name: "Parquet decode",
        patterns: &["parquet", "Parquet", "arrow", "Arrow", "snappy", "Snappy"],
        kernel_only: false,
    },
    Category {
        name: "image decode (libjpeg/libpng, PIL)",
        patterns: &[
            "libjpeg",
            "jpeg_read_scanlines",
            "jpeg_start_decompress",
            "decode_mcu",
            "jpeg_idct",
            "libturbojpeg",
            "libpng",
            "png_read_",
            "libwebp",
            "ImagingDecode",
        ],
        kernel_only: false,
    },
    Category {
        name: "PyTorch collate (tensor copies)",
        patterns: &["at::native::", "at::_ops::cat", "at::_ops::stack"],
        kernel_only: false,
    },
    Category {
        // A DataLoader worker puts each batch into fresh shared memory:
        // the first touch of every page faults and zeroes it.
        name: "shared-memory tensors (shmem page faults)",
        patterns: &[
            "shmem_fault",
            "shmem_get_folio",
            "shmem_add_to_page_cache",
            "shmem_alloc",
            "MapAllocator",
        ],
        kernel_only: false,
    },
    Category {
        name: "Python garbage collector",
        patterns: &[
            "gc_collect_main",
            "gc_collect_with_callback",
            "visit_reachable",
            "move_unreachable",
            "subtract_refs",
            "visit_decref",
        ],
        kernel_only: false,
    },
    Category {
        name: "NPZ/zip decompression (zlib)",
        patterns: &["inflate", "crc32", "zlib"],
        kernel_only: false,
    },
    Category {
        name: "page-cache copies (kernel)",
        patterns: &[
            "copy_user",
            "copy_to_user",
            "copy_page_to_iter",
            "_copy_to_iter",
            "rep_movs_alternative",
            "filemap_read",
            "filemap_get_pages",
        ],
        kernel_only: true,
    },
    Category {
        name: BLOCK_IO_WAIT,
        patterns: &[
            "io_schedule",
            "blk_mq_",
            "submit_bio",
            "iomap_dio",
            "blkdev_direct_IO",
            "folio_wait_bit",
            "wait_on_page_bit",
        ],
        kernel_only: true,
    },
    Category {
        name: "memory reclaim / page faults (kernel)",
        patterns: &[
            "try_to_free_pages",
            "shrink_node",
            "shrink_lruvec",
            "__alloc_pages_slowpath",
            "__alloc_pages_direct_reclaim",
            "mem_cgroup_handle_over_high",
            "out_of_memory",
            "oom_kill",
            "do_swap_page",
            "handle_mm_fault",
        ],
        kernel_only: true,
    },
    Category {
        name: SOCKET_RECEIVE,
        patterns: &[
            "tcp_recvmsg",
            "sk_wait_data",
            "inet_recvmsg",
            "sock_recvmsg",
            "unix_stream_read",
        ],
        kernel_only: true,
    },
    Category {
        name: "futex / lock wait (kernel)",
        patterns: &["futex_wait", "futex_q_lock", "do_futex", "__x64_sys_futex"],
        kernel_only: true,
    },
    Category {
        name: "sleep (nanosleep, kernel)",
        patterns: &["hrtimer_nanosleep", "do_nanosleep", "clock_nanosleep"],
        kernel_only: true,
    },
    Category {
        name: POLL_WAIT,
        patterns: &["do_sys_poll", "ep_poll", "do_select", "do_epoll_wait"],
        kernel_only: true,
    },
];

/// Generic categories used only when no specific one matches the stack.
const GENERIC: &[Category] = &[
    Category {
        name: "memcpy (user)",
        patterns: &["memcpy", "memmove", "__memmove"],
        kernel_only: false,
    },
    Category {
        name: "memory allocation (user)",
        patterns: &[
            "malloc",
            "free",
            "realloc",
            "_int_malloc",
            "__rust_alloc",
            "__rust_dealloc",
        ],
        kernel_only: false,
    },
    Category {
        name: "Python interpreter",
        patterns: &[
            "_PyEval_EvalFrame",
            "PyObject_Call",
            "_PyObject_",
            "PyEval_",
        ],
        kernel_only: false,
    },
];

const OTHER_KERNEL: &str = "other kernel";
const OTHER_USER: &str = "other user code";

/// The category of a stack blocked on a device (`categorize`).
pub const BLOCK_IO_WAIT: &str = "block I/O wait (kernel)";
/// The category of a stack blocked receiving from a socket.
pub const SOCKET_RECEIVE: &str = "socket receive (kernel)";

/// The category of a thread waiting in poll, select or epoll.
pub const POLL_WAIT: &str = "poll / epoll wait (kernel)";

/// True for kernel frames (`_[k]` suffix).
pub fn is_kernel_frame(frame: &str) -> bool {
    frame.ends_with("_[k]")
}

fn matches(category: &Category, frame: &str) -> bool {
    (!category.kernel_only || is_kernel_frame(frame))
        && category.patterns.iter().any(|p| frame.contains(p))
}

/// The friendly category of one stack (frames root → leaf, comm excluded):
/// a named bench reader function anywhere on the stack; else the leaf-most
/// frame matching a specific category; else the leaf-most generic match;
/// else "other kernel"/"other user code" by the leaf.
pub fn categorize(frames: &[&str]) -> &'static str {
    if let Some(c) = NAMED.iter().find(|c| frames.iter().any(|f| matches(c, f))) {
        return c.name;
    }
    for list in [SPECIFIC, GENERIC] {
        for frame in frames.iter().rev() {
            if let Some(c) = list.iter().find(|c| matches(c, frame)) {
                return c.name;
            }
        }
    }
    match frames.last() {
        Some(leaf) if is_kernel_frame(leaf) => OTHER_KERNEL,
        _ => OTHER_USER,
    }
}

/// The function name of a frame without module decorations or `_[k]`.
pub fn function_name(frame: &str) -> &str {
    let f = frame.strip_suffix("_[k]").unwrap_or(frame);
    let f = match f.rfind(" [") {
        Some(i) if f.ends_with(']') => &f[..i],
        _ => f,
    };
    match f.rfind(" (") {
        Some(i) if f.ends_with(')') && f[i..].contains(".so") => &f[..i],
        _ => f,
    }
}

/// The library of a frame: "kernel" for `_[k]`, the file the symbolizer
/// took it from (`modules`, a session's frames.json), the `*.so*` module
/// or unnamed file in the frame, "Python code" for a Python function, a
/// guess from well-known symbol prefixes otherwise.
pub fn library_in(frame: &str, modules: &FrameModules) -> Option<String> {
    if is_kernel_frame(frame) {
        return Some("kernel".to_string());
    }
    if let Some(module) = modules.modules.get(frame) {
        return Some(module.clone());
    }
    // An address the symbolizer could not name: `[file]` (not the markers
    // `[unknown]`, `[no stack]` or a thread's `[pid/tid]`).
    if let Some(file) = frame.strip_prefix('[').and_then(|f| f.strip_suffix(']'))
        && !file.is_empty()
        && file != "unknown"
        && !file.contains(|c: char| c.is_whitespace() || matches!(c, '/' | '[' | ']'))
    {
        return Some(file.to_string());
    }
    // `function (file.py:LINE)`.
    if frame.ends_with(')')
        && let Some(i) = frame.rfind(" (")
        && frame[i..].contains(".py:")
    {
        return Some("Python code".to_string());
    }
    library_of(frame)
}

/// [`library_in`] without a session's frame table: from the name alone.
pub fn library_of(frame: &str) -> Option<String> {
    if is_kernel_frame(frame) {
        return Some("kernel".to_string());
    }
    // Module in brackets/parentheses or `lib.so+0x..`.
    let token = frame
        .split([' ', '[', ']', '(', ')', '+'])
        .find(|t| t.contains(".so") || t.ends_with(".exe"));
    if let Some(t) = token {
        let base = t.rsplit('/').next().unwrap_or(t);
        return Some(base.to_string());
    }
    let f = function_name(frame);
    let guess = if f.starts_with("Py") || f.starts_with("_Py") || f.starts_with("_PyEval") {
        "libpython"
    } else if f.contains("parquet") {
        "parquet"
    } else if f.contains("arrow") {
        "arrow"
    } else if f.starts_with("std::") || f.starts_with("core::") || f.starts_with("alloc::") {
        "Rust std"
    } else if f.starts_with("__memmove") || f.starts_with("memcpy") || f.starts_with("malloc") {
        "libc"
    } else {
        return None;
    };
    Some(guess.to_string())
}

fn top(map: BTreeMap<String, u64>, total: u64, limit: usize) -> Vec<FrameShare> {
    let mut rows: Vec<FrameShare> = map
        .into_iter()
        .map(|(name, count)| FrameShare {
            name,
            count,
            share: if total > 0 {
                count as f64 / total as f64
            } else {
                0.0
            },
        })
        .collect();
    // Ties broken by name so output is deterministic.
    rows.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
    rows.truncate(limit);
    rows
}

/// Hottest frames of `stacks`, keeping only stacks whose comm passes
/// `include_comm` (e.g. reader threads only); `limit` rows per list.
pub fn hot_frames(
    stacks: &FoldedStacks,
    include_comm: &dyn Fn(&str) -> bool,
    limit: usize,
    modules: &FrameModules,
) -> HotFrames {
    let mut categories = BTreeMap::new();
    let mut selfs = BTreeMap::new();
    let mut inclusive = BTreeMap::new();
    let mut libraries = BTreeMap::new();
    let mut unnamed = BTreeMap::new();
    let mut python = BTreeMap::new();
    let mut total = 0;
    for (stack, count) in &stacks.stacks {
        let mut parts = stack.split(';');
        let comm = parts.next().unwrap_or("");
        if !include_comm(comm) {
            continue;
        }
        let frames: Vec<&str> = parts.collect();
        total += count;
        *categories
            .entry(categorize(&frames).to_string())
            .or_insert(0) += count;
        let leaf = frames.last().copied().unwrap_or(comm);
        *selfs.entry(leaf.to_string()).or_insert(0) += count;
        if is_unnamed(leaf) {
            *unnamed.entry(leaf.to_string()).or_insert(0) += count;
        }
        let lib = library_in(leaf, modules).unwrap_or_else(|| "unknown".to_string());
        if is_interpreter(&lib)
            && let Some(function) = frames.iter().rev().find_map(|f| python_function(f))
        {
            *python.entry(function).or_insert(0) += count;
        }
        *libraries.entry(lib).or_insert(0) += count;
        let unique: BTreeSet<&str> = frames.iter().copied().collect();
        for f in unique {
            *inclusive.entry(f.to_string()).or_insert(0) += count;
        }
    }
    HotFrames {
        total,
        categories: top(categories, total, limit),
        self_functions: top(selfs, total, limit),
        inclusive_functions: top(inclusive, total, limit),
        libraries: top(libraries, total, limit),
        unnamed_total: unnamed.values().sum(),
        unnamed: top(unnamed, total, limit),
        python_functions: top(python, total, limit),
        path_weighted: false,
    }
}

/// Share (0..1) of `stacks`' total whose frames contain any of `patterns`
/// (kernel frames only when `kernel_only`).
pub fn share_matching(stacks: &FoldedStacks, patterns: &[&str], kernel_only: bool) -> f64 {
    let total = stacks.total();
    if total == 0 {
        return 0.0;
    }
    let hit: u64 = stacks
        .stacks
        .iter()
        .filter(|(s, _)| {
            s.split(';').skip(1).any(|f| {
                (!kernel_only || is_kernel_frame(f)) && patterns.iter().any(|p| f.contains(p))
            })
        })
        .map(|(_, n)| n)
        .sum();
    hit as f64 / total as f64
}

/// Share of samples whose leaf frame is a kernel frame.
pub fn kernel_leaf_share(stacks: &FoldedStacks) -> Option<f64> {
    let total = stacks.total();
    if total == 0 {
        return None;
    }
    let k: u64 = stacks
        .stacks
        .iter()
        .filter(|(s, _)| s.rsplit(';').next().is_some_and(is_kernel_frame))
        .map(|(_, n)| n)
        .sum();
    Some(k as f64 / total as f64)
}

#[cfg(test)]
mod tests;
