//! Kernel symbol names asked of the kernel: the probe object's
//! `kernel_symbols` program is loaded, never attached, and run
//! (`BPF_PROG_TEST_RUN`) over batches of addresses written to
//! `KSYM_REQUEST`; it leaves the kernel's `%ps` of each in `KSYM_NAMES`.
//! A recording's few hundred kernel frames so cost a symbol lookup each,
//! where reading `/proc/kallsyms` has the kernel print every one of its
//! ~120,000 symbols (about 0.05 s of CPU at each start here).
use std::os::fd::{AsFd, AsRawFd};

use aya::{
    Ebpf,
    maps::{Array, MapData},
    programs::{ProgramFd, RawTracePoint},
};
use storprof_common::{KSYM_BATCH, KSYM_NAME_BYTES, KsymNames, KsymRequest};

/// The program's name in the probe object.
const PROGRAM: &str = "kernel_symbols";

/// Why the program is not used.
#[derive(Debug, thiserror::Error)]
enum LoadError {
    #[error("the probe object has no {PROGRAM} program")]
    NoProgram,
    #[error("{PROGRAM}: {0}")]
    Program(#[from] aya::programs::ProgramError),
    #[error("{PROGRAM}'s descriptor: {0}")]
    Fd(#[from] std::io::Error),
    #[error("eBPF map {0} is missing from the probe object")]
    MissingMap(&'static str),
    #[error("eBPF map {name} has the wrong type: {source}")]
    Map {
        name: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
}

/// The loaded `kernel_symbols` program and its two maps.
pub(super) struct KernelSymbols {
    program: ProgramFd,
    request: Array<MapData, KsymRequest>,
    names: Array<MapData, KsymNames>,
}

impl KernelSymbols {
    /// Loads the program and takes its maps out of `ebpf`; None (logged)
    /// when the kernel refuses it, and names then come from kallsyms.
    pub(super) fn load(ebpf: &mut Ebpf) -> Option<Self> {
        match Self::try_load(ebpf) {
            Ok(symbols) => Some(symbols),
            Err(err) => {
                log::debug!("kernel_symbols not loaded, kernel frames named from kallsyms: {err}");
                None
            }
        }
    }

    fn try_load(ebpf: &mut Ebpf) -> Result<Self, LoadError> {
        let program: &mut RawTracePoint = ebpf
            .program_mut(PROGRAM)
            .ok_or(LoadError::NoProgram)?
            .try_into()?;
        program.load()?;
        let program = program.fd()?.try_clone()?;
        Ok(Self {
            request: take_array(ebpf, "KSYM_REQUEST")?,
            names: take_array(ebpf, "KSYM_NAMES")?,
            program,
        })
    }

    /// The kernel's name of each of `addrs` (None: an address it has no
    /// symbol for), or the error of the first batch that failed.
    pub(super) fn names(&mut self, addrs: &[u64]) -> std::io::Result<Vec<Option<String>>> {
        let mut out = Vec::with_capacity(addrs.len());
        for batch in addrs.chunks(KSYM_BATCH) {
            let mut request = KsymRequest {
                count: batch.len() as u32,
                _pad: 0,
                addrs: [0; KSYM_BATCH],
            };
            request.addrs[..batch.len()].copy_from_slice(batch);
            self.request
                .set(0, request, 0)
                .map_err(std::io::Error::other)?;
            self.run()?;
            let names = self.names.get(&0, 0).map_err(std::io::Error::other)?;
            out.extend(names.names[..batch.len()].iter().map(symbol_name));
        }
        Ok(out)
    }

    /// One run of the program (`BPF_PROG_TEST_RUN`, no context).
    fn run(&self) -> std::io::Result<()> {
        let attr = TestRunAttr {
            prog_fd: self.program.as_fd().as_raw_fd() as u32,
            ..TestRunAttr::default()
        };
        // SAFETY: `attr` is a valid, initialised bpf_attr prefix for
        // BPF_PROG_TEST_RUN of the size passed; the kernel reads it only
        // during the call, and writes back only within it (retval).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_PROG_TEST_RUN,
                &raw const attr,
                std::mem::size_of::<TestRunAttr>(),
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Takes array map `name` out of `ebpf`.
fn take_array<V: aya::Pod>(
    ebpf: &mut Ebpf,
    name: &'static str,
) -> Result<Array<MapData, V>, LoadError> {
    let map = ebpf.take_map(name).ok_or(LoadError::MissingMap(name))?;
    Array::try_from(map).map_err(|source| LoadError::Map { name, source })
}

/// `enum bpf_cmd`'s BPF_PROG_TEST_RUN.
const BPF_PROG_TEST_RUN: libc::c_long = 10;

/// The `test` member of `union bpf_attr` (kernel 5.10+ layout), for a
/// raw tracepoint: no data, no context.
#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _pad: u32,
}

/// A `%ps` result as a frame name: the symbol without the `[module]` the
/// kernel appends to a module's; None for the `0x…` of an address the
/// kernel has no symbol for.
fn symbol_name(raw: &[u8; KSYM_NAME_BYTES]) -> Option<String> {
    let len = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    let text = String::from_utf8_lossy(&raw[..len]);
    let name = text.split(" [").next().unwrap_or("").trim();
    if name.is_empty() || name.starts_with("0x") {
        return None;
    }
    Some(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> [u8; KSYM_NAME_BYTES] {
        let mut out = [0; KSYM_NAME_BYTES];
        out[..text.len()].copy_from_slice(text.as_bytes());
        out
    }

    #[test]
    fn names_drop_the_module_and_unknown_addresses() {
        assert_eq!(symbol_name(&raw("vfs_read")).as_deref(), Some("vfs_read"));
        assert_eq!(
            symbol_name(&raw("xfs_file_read_iter [xfs]")).as_deref(),
            Some("xfs_file_read_iter")
        );
        assert_eq!(symbol_name(&raw("0xffffffffc0201000")), None);
        assert_eq!(symbol_name(&raw("")), None);
    }

    #[test]
    fn test_run_attr_has_the_kernel_layout() {
        // prog_fd .. batch_size end at byte 76 (union bpf_attr's `test`).
        assert_eq!(std::mem::size_of::<TestRunAttr>(), 80);
        assert_eq!(std::mem::offset_of!(TestRunAttr, ctx_in), 48);
        assert_eq!(std::mem::offset_of!(TestRunAttr, flags), 64);
    }

    /// The kernel's names against kallsyms for a few of its text symbols
    /// (at the symbol and inside it), and none for a user address.
    #[test]
    #[ignore = "needs root"]
    fn kernel_names_match_kallsyms() {
        let kallsyms = std::fs::read_to_string("/proc/kallsyms").expect("read kallsyms");
        let wanted = ["vfs_read", "schedule", "do_sys_openat2"];
        let mut addrs = Vec::new();
        for line in kallsyms.lines() {
            let mut fields = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if matches!(kind, "T" | "t") && wanted.contains(&name) {
                let addr = u64::from_str_radix(addr, 16).expect("hex address");
                assert_ne!(addr, 0, "kallsyms hides addresses: not root?");
                addrs.push((addr, name));
            }
        }
        assert_eq!(
            addrs.len(),
            wanted.len(),
            "kallsyms lacks one of {wanted:?}"
        );
        let set = super::super::ProbeSet::load(&super::super::ProbeOptions::default())
            .expect("load the probes");
        let mut asked: Vec<u64> = addrs.iter().flat_map(|(a, _)| [*a, a + 4]).collect();
        asked.push(0x1000);
        let names = set
            .kernel_symbol_names(&asked)
            .expect("kernel_symbols runs");
        for (i, (_, name)) in addrs.iter().enumerate() {
            assert_eq!(names[2 * i].as_deref(), Some(*name));
            assert_eq!(names[2 * i + 1].as_deref(), Some(*name));
        }
        assert_eq!(names[asked.len() - 1], None);
    }
}
