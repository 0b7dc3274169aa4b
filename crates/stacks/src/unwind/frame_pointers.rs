//! Does an executable keep frame pointers? The `--unwind auto` decision.
//!
//! Data flow: the recorder hands the path of a process's main executable
//! (`/proc/PID/exe` after exec) to [`decide`]; the ELF is read once, the
//! function symbols of its `.text` are looked at, and the share of them
//! that open with the frame-pointer prologue `push %rbp; mov %rsp,%rbp`
//! (`55 48 89 e5`, possibly after `endbr64`) says whether the kernel's
//! frame-pointer walk can follow the process's own code (the `mov` may come
//! a few instructions after the `push`). Below
//! [`FP_SHARE_THRESHOLD`] (or with no function symbols to judge by) the
//! process gets DWARF stack windows. A heuristic, cheap and documented:
//! functions that never call anything may skip the prologue even in a
//! frame-pointer build, so the threshold is well below 1; an
//! `-fomit-frame-pointer` build has close to none.
//!
//! Libraries are not judged: Debian's libc has no frame pointers, so a
//! "any mapping lacks them" rule would put every process in DWARF mode;
//! a process's own code is where its time goes. Interpreters (CPython,
//! whose eval loop runs without frame pointers) are switched to DWARF by
//! the recorder when it finds them.
use std::path::Path;

use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// Frame-pointer share at or above which an executable is unwound by frame
/// pointers (a frame-pointer build of storprof measures ~0.9, CPython and
/// `-fomit-frame-pointer` C programs ~0).
pub const FP_SHARE_THRESHOLD: f64 = 0.5;

/// Functions looked at, at most (evenly spread over the symbol table), so
/// the check stays cheap on huge binaries.
const MAX_FUNCTIONS: usize = 4000;

/// The unwinding mode chosen for one process and why.
#[derive(Clone, Debug, PartialEq)]
pub struct UnwindChoice {
    /// True: stack windows, unwound in user space; false: frame pointers.
    pub dwarf: bool,
    /// Why, for session.json (e.g. "3% of 812 functions keep frame pointers").
    pub reason: String,
}

/// What the prologue scan of one ELF found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrologueScan {
    /// Function symbols in `.text` looked at.
    pub functions: usize,
    /// Those opening with the frame-pointer prologue.
    pub with_frame_pointer: usize,
}

impl PrologueScan {
    /// `with_frame_pointer / functions` (0 with no functions).
    pub fn share(&self) -> f64 {
        if self.functions == 0 {
            0.0
        } else {
            self.with_frame_pointer as f64 / self.functions as f64
        }
    }
}

/// True when `code` opens with `push %rbp` (optionally after `endbr64`)
/// and sets `mov %rsp,%rbp` within the next few instructions (compilers
/// schedule other instructions in between). Without frame pointers `%rbp`
/// is an ordinary callee-saved register: pushed, but never set from `%rsp`.
pub fn has_frame_pointer_prologue(code: &[u8]) -> bool {
    const PUSH_RBP: u8 = 0x55;
    const MOV_RSP_RBP: [u8; 3] = [0x48, 0x89, 0xe5];
    const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
    /// Bytes after the push searched for the `mov`.
    const WINDOW: usize = 16;
    let code = code.strip_prefix(&ENDBR64).unwrap_or(code);
    let Some(rest) = code.strip_prefix(&[PUSH_RBP]) else {
        return false;
    };
    rest[..rest.len().min(WINDOW)]
        .windows(MOV_RSP_RBP.len())
        .any(|w| w == MOV_RSP_RBP)
}

/// Scans the function symbols of an ELF image's `.text` (the static symbol
/// table, else the dynamic one). `None` when it is not a readable ELF.
pub fn scan_elf(data: &[u8]) -> Option<PrologueScan> {
    let file = object::File::parse(data).ok()?;
    let text = file.section_by_name(".text")?;
    let text_start = text.address();
    let text_data = text.data().ok()?;
    // A .text whose end lies past u64 is corrupt (the addresses are the file's).
    let text_end = text_start.checked_add(text_data.len() as u64)?;
    let mut starts: Vec<u64> = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0 && s.is_definition())
        .map(|s| s.address())
        .filter(|&a| a >= text_start && a < text_end)
        .collect();
    starts.sort_unstable();
    starts.dedup();
    let step = starts.len().div_ceil(MAX_FUNCTIONS).max(1);
    let mut scan = PrologueScan {
        functions: 0,
        with_frame_pointer: 0,
    };
    for &addr in starts.iter().step_by(step) {
        let offset = (addr - text_start) as usize;
        scan.functions += 1;
        if has_frame_pointer_prologue(&text_data[offset..]) {
            scan.with_frame_pointer += 1;
        }
    }
    Some(scan)
}

/// The mode a scan implies.
pub fn choose(scan: Option<PrologueScan>) -> UnwindChoice {
    match scan {
        None => UnwindChoice {
            dwarf: true,
            reason: "executable not readable as ELF".to_string(),
        },
        Some(scan) if scan.functions == 0 => UnwindChoice {
            dwarf: true,
            reason: "executable has no function symbols to check".to_string(),
        },
        Some(scan) => {
            let share = scan.share();
            UnwindChoice {
                dwarf: share < FP_SHARE_THRESHOLD,
                reason: format!(
                    "{:.0}% of {} functions of the executable keep frame pointers",
                    share * 100.0,
                    scan.functions
                ),
            }
        }
    }
}

/// Reads and judges the executable at `path`.
pub fn decide(path: &Path) -> UnwindChoice {
    match std::fs::read(path) {
        Ok(data) => choose(scan_elf(&data)),
        Err(err) => UnwindChoice {
            dwarf: true,
            reason: format!("cannot read {}: {err}", path.display()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn recognizes_prologues() {
        assert!(has_frame_pointer_prologue(&[0x55, 0x48, 0x89, 0xe5, 0x90]));
        assert!(has_frame_pointer_prologue(&[
            0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5
        ]));
        assert!(!has_frame_pointer_prologue(&[0x48, 0x83, 0xec, 0x08]));
        assert!(!has_frame_pointer_prologue(&[0xf3, 0x0f, 0x1e, 0xfa]));
        // gcc -O2 schedules an instruction between push and mov.
        assert!(has_frame_pointer_prologue(&[
            0x55, 0x8d, 0x44, 0x7f, 0x01, 0x48, 0x89, 0xe5
        ]));
        // %rbp saved as a callee-saved register only.
        assert!(!has_frame_pointer_prologue(&[0x55, 0x53, 0x48, 0x83, 0xec]));
        assert!(!has_frame_pointer_prologue(&[]));
    }

    #[test]
    fn no_symbols_or_no_elf_means_dwarf() {
        assert!(choose(None).dwarf);
        let none = PrologueScan {
            functions: 0,
            with_frame_pointer: 0,
        };
        assert!(choose(Some(none)).dwarf);
        assert!(decide(Path::new("/nonexistent/storprof-test")).dwarf);
        assert_eq!(scan_elf(b"not an elf"), None);
    }

    /// Our own test binary is built with `force-frame-pointers=yes`
    /// (.cargo/config.toml).
    #[test]
    fn frame_pointer_build_is_fp() {
        let exe = std::env::current_exe().expect("path of the test binary");
        let choice = decide(&exe);
        eprintln!("{}: {}", exe.display(), choice.reason);
        assert!(!choice.dwarf, "{}: {}", exe.display(), choice.reason);
    }

    fn compile(dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
        let src = dir.join(format!("{name}.c"));
        std::fs::write(
            &src,
            "static int leaf(int x) { return x * 3 + 1; }\n\
             __attribute__((noinline)) int mid(int x) { volatile int y = leaf(x); return y + leaf(y); }\n\
             __attribute__((noinline)) int top(int x) { return mid(x) + mid(x + 1); }\n\
             int main(int argc, char **argv) { (void)argv; return top(argc) & 1; }\n",
        )
        .ok()?;
        let out = dir.join(name);
        let status = std::process::Command::new("cc")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .status()
            .ok()?;
        status.success().then_some(out)
    }

    #[test]
    fn c_programs_with_and_without_frame_pointers() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (Some(fp), Some(nofp)) = (
            compile(dir.path(), "fp", &["-O2", "-fno-omit-frame-pointer"]),
            compile(dir.path(), "nofp", &["-O2", "-fomit-frame-pointer"]),
        ) else {
            eprintln!("skipped: no C compiler");
            return;
        };
        let with = decide(&fp);
        let without = decide(&nofp);
        eprintln!("fp: {}; nofp: {}", with.reason, without.reason);
        assert!(!with.dwarf, "{}", with.reason);
        assert!(without.dwarf, "{}", without.reason);
    }

    #[test]
    fn cpython_is_dwarf() {
        let candidates = [
            "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0",
            "/root/.pyenv/versions/3.11.7/bin/python3.11",
        ];
        let Some(path) = candidates.iter().map(Path::new).find(|p| p.exists()) else {
            eprintln!("skipped: no pyenv CPython 3.11.7 here");
            return;
        };
        let choice = decide(path);
        eprintln!("{}: {}", path.display(), choice.reason);
        assert!(choice.dwarf, "{}: {}", path.display(), choice.reason);
    }
}
