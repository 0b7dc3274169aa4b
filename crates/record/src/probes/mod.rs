//! The one kernel seam: loads the embedded eBPF object with aya, attaches
//! the probe families, writes the traced set and reads the maps back.
//!
//! Data flow: [`ProbeSet::load`] → [`ProbeSet::attach_all`] (each family
//! attaches or is disabled with a note) → user space marks pids to trace
//! ([`ProbeSet::trace_tgid`], [`ProbeSet::set_root_tgid`]) → periodic
//! [`ProbeSet::drain_proc_events`] / [`ProbeSet::drain_block_events`] and
//! map snapshots ([`ProbeSet::snapshot`]) → drop (detaches everything).
//! Nothing here interprets the data; `record::aggregate` does, purely.
mod allocators;
mod batch;
pub mod btf;
mod catalog;
mod drain;
mod ksyms;
mod snapshot;
pub mod tracefs;

pub use catalog::*;
pub use drain::*;
pub use snapshot::*;

use std::collections::{BTreeMap, BTreeSet};

use aya::{
    Ebpf, EbpfLoader,
    maps::{Array, HashMap, MapData, PerCpuArray, RingBuf},
    programs::{
        PerfEvent, RawTracePoint, TracePoint,
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
    },
};
use storprof_common::{
    BlockEvent, FLAG_OFFCPU_DWARF, FLAG_SYSCALL_BLOCKED_TIME, FLAG_SYSCALL_LATENCY,
    FLAG_UNWIND_PER_PROCESS, MAX_PY_FRAMES, MAX_STACK_BYTES, OffCpuStart, ProbeConfig, ProcEvent,
    PyFrameRecord, PyOffCpuSample, PyProcess, STACK_SCRATCH_SLOTS_PER_CPU, SYSCALL_NR_SLOTS,
    SYSCALL_SLOT_ENTRIES, SYSCALL_THREAD_SLOTS, StackFrames, StackKey, SyscallAcc, SyscallKey,
    ThreadAcc, USER_STACK_PREFIX, UserStackHeader, WakeAcc, WakeKey, lost, py_offcpu_lost,
    py_tstate, tracepoint_offsets as offsets,
};

use storprof_session::model::ProbeStatus;

/// The probe object built by build.rs from `ebpf/probes`.
static PROBE_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/storprof-probes"));

/// Errors of the kernel seam.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(
        "the eBPF probe object is empty (built with STORPROF_SKIP_EBPF=1); rebuild without it after scripts/setup.sh"
    )]
    NoProbeObject,
    #[error("loading the eBPF object failed: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("eBPF map {name} is missing or has the wrong type: {source}")]
    Map {
        name: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
    #[error("eBPF map {0} is missing from the probe object")]
    MissingMap(&'static str),
    #[error("tracefs: {0}")]
    Tracefs(String),
}

/// How each syscall's time (`total_ns` and the histogram) is measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SyscallTiming {
    /// The time the thread spent switched out inside the call (asleep or
    /// in D, then waiting for a CPU), added up by `sched_switch`: the wait
    /// that verdicts weigh, with one hook (`sys_exit`) on every syscall. A
    /// call that never left the CPU counts 0; its CPU time is in the
    /// samples. The default.
    #[default]
    Blocked,
    /// Entry to exit of every call, from a raw `sys_enter` hook besides
    /// `sys_exit`: exact latency, about twice the per-syscall cost.
    Exact,
    /// Counts, errors and bytes only (`sys_exit`), no time.
    Off,
}

impl SyscallTiming {
    /// The name session.json records.
    pub fn name(self) -> &'static str {
        match self {
            Self::Blocked => "blocked",
            Self::Exact => "exact",
            Self::Off => "off",
        }
    }
}

/// Options of the probe set. Defaults: 99 Hz sampling, blocked-time
/// syscall timing.
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    /// cpu-clock sampling frequency, Hz. Default 99.
    pub freq_hz: u64,
    /// How syscalls are timed. Default [`SyscallTiming::Blocked`].
    pub syscall_timing: SyscallTiming,
    /// Bytes of user stack (and the user registers) copied per CPU sample
    /// for DWARF unwinding in user space. Default 0: frame-pointer stacks
    /// only. Clamped to `MAX_STACK_BYTES`.
    pub stack_bytes: u32,
    /// Copy the stack window only for processes marked with
    /// [`ProbeSet::set_dwarf`] (`--unwind auto`). Default false: every
    /// traced process gets it when `stack_bytes` is set.
    pub unwind_per_process: bool,
    /// The sampling quantum of Python threads' off-CPU intervals and, with
    /// `stack_bytes` set and syscall latency on, of blocked syscalls whose
    /// user stack is copied at the syscall's exit
    /// (`ProbeConfig::offcpu_quantum_us`; 0 takes every one).
    /// Default 10101 µs, one 99 Hz period.
    pub offcpu_quantum_us: u32,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        Self {
            freq_hz: 99,
            syscall_timing: SyscallTiming::Blocked,
            stack_bytes: 0,
            unwind_per_process: false,
            offcpu_quantum_us: 10_101,
        }
    }
}

/// CLOCK_MONOTONIC in ns: the probes' clock (`bpf_ktime_get_ns`).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The loaded (and after `attach_all`, attached) probes.
pub struct ProbeSet {
    ebpf: Ebpf,
    proc_events: Option<RingBuf<MapData>>,
    block_events: Option<RingBuf<MapData>>,
    stack_events: Option<RingBuf<MapData>>,
    py_offcpu_events: Option<RingBuf<MapData>>,
    /// Per family: did it attach, and if not why.
    pub status: Vec<ProbeStatus>,
    options: ProbeOptions,
    pid_slots: u32,
    /// `ProbeConfig::root_tgid` as last written.
    root_tgid: u32,
    /// `task_struct.thread.fsbase`'s offset, looked up from BTF when the
    /// first interpreter that needs it registers.
    task_fsbase: Option<Result<u32, btf::BtfError>>,
    /// `struct request`'s field offsets, looked up from BTF when the block
    /// family attaches.
    block_layout: Option<storprof_common::BlockLayout>,
    /// `task_struct.pid`'s offset, looked up when `sched_waking` attaches.
    task_pid: Option<u32>,
    /// Owned attachments, detached in parallel on drop: each detach waits
    /// for an RCU grace period (~50-90 ms here), one after the other they
    /// made up most of a short recording's wall time.
    links: Vec<Box<dyn Send>>,
    /// `STACK_FRAMES` slots read so far: a slot is written once, when a
    /// stack first claims it, and never again in a recording, so each is
    /// read from the kernel once however often the live view folds it.
    stack_cache: std::sync::Mutex<std::collections::HashMap<u32, std::sync::Arc<[u64]>>>,
    /// The kernel's own names of kernel addresses (None: kallsyms names
    /// them); behind a lock because naming writes a map from `&self`.
    kernel_symbols: std::sync::Mutex<Option<ksyms::KernelSymbols>>,
}

impl Drop for ProbeSet {
    fn drop(&mut self) {
        let links = std::mem::take(&mut self.links);
        if links.is_empty() {
            return;
        }
        // The grace periods are waited out by a forked copy of this process
        // that holds the same link fds: closing them here only drops a
        // reference, so `record` exits at once; the probes go away as soon
        // as the copy's closes return (a fraction of a second; the traced
        // set is dead by then, so they count nothing meanwhile).
        // SAFETY: fork in a process whose only thread is this one (the
        // recorder runs single-threaded); the child only closes descriptors
        // and exits without running destructors or atexit handlers.
        match unsafe { libc::fork() } {
            0 => {
                // SAFETY: the child: detach its standard streams (a parent
                // reading our stdout must see EOF now), then close the links.
                unsafe {
                    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                    for fd in 0..3 {
                        libc::dup2(null, fd);
                    }
                }
                drop(links);
                // SAFETY: ends the child without unwinding or destructors.
                unsafe { libc::_exit(0) };
            }
            pid if pid > 0 => drop(links),
            _ => std::thread::scope(|scope| {
                for link in links {
                    scope.spawn(move || drop(link));
                }
            }),
        }
    }
}

/// The pid namespace (device, inode) of `pid` when it differs from ours
/// (a container's), else None.
pub fn foreign_pid_namespace(pid: u32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let theirs = std::fs::metadata(format!("/proc/{pid}/ns/pid")).ok()?;
    let ours = std::fs::metadata("/proc/self/ns/pid").ok()?;
    (theirs.dev() != ours.dev() || theirs.ino() != ours.ino()).then(|| (theirs.dev(), theirs.ino()))
}

/// `kernel.pid_max`: the per-pid arrays are this large.
pub fn pid_max() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304)
}

impl ProbeSet {
    /// Loads the object (maps only; programs load in `attach_all`).
    pub fn load(options: &ProbeOptions) -> Result<Self, ProbeError> {
        if PROBE_OBJECT.is_empty() {
            return Err(ProbeError::NoProbeObject);
        }
        let pid_slots = pid_max();
        let mut ebpf = EbpfLoader::new()
            .map_max_entries("TRACED", pid_slots)
            .map_max_entries("ONCPU_START", pid_slots)
            .map_max_entries("OFFCPU_START", pid_slots)
            .map_max_entries("SYSCALL_START", pid_slots)
            .map_max_entries("SYSCALL_THREAD", pid_slots)
            .map_max_entries("PY_OFFCPU_PENDING", pid_slots)
            .map_max_entries("OFFCPU_PENDING_FLAG", pid_slots)
            // Two stack scratch slots per possible CPU, ~64 KiB each.
            .map_max_entries(
                "STACK_SCRATCH",
                STACK_SCRATCH_SLOTS_PER_CPU
                    * aya::util::nr_cpus().map_or(1024, |n| n as u32).max(1),
            )
            .load(PROBE_OBJECT)?;
        let kernel_symbols = ksyms::KernelSymbols::load(&mut ebpf);
        let mut set = Self {
            ebpf,
            proc_events: None,
            block_events: None,
            stack_events: None,
            py_offcpu_events: None,
            status: Vec::new(),
            options: options.clone(),
            pid_slots,
            root_tgid: 0,
            task_fsbase: None,
            block_layout: None,
            task_pid: None,
            links: Vec::new(),
            stack_cache: Default::default(),
            kernel_symbols: std::sync::Mutex::new(kernel_symbols),
        };
        set.write_current_config()?;
        set.prime_stack_allocators()?;
        set.proc_events = Some(set.take_ringbuf("PROC_EVENTS")?);
        set.block_events = Some(set.take_ringbuf("BLOCK_EVENTS")?);
        set.stack_events = Some(set.take_ringbuf("STACK_EVENTS")?);
        set.py_offcpu_events = Some(set.take_ringbuf("PY_OFFCPU_EVENTS")?);
        Ok(set)
    }

    /// The `FLAG_*` bits of the options.
    fn config_flags(&self) -> u32 {
        let mut flags = 0;
        match self.options.syscall_timing {
            SyscallTiming::Blocked => flags |= FLAG_SYSCALL_BLOCKED_TIME,
            SyscallTiming::Exact => flags |= FLAG_SYSCALL_LATENCY,
            SyscallTiming::Off => {}
        }
        if self.options.unwind_per_process {
            flags |= FLAG_UNWIND_PER_PROCESS;
        }
        if self.offcpu_dwarf() {
            flags |= FLAG_OFFCPU_DWARF;
        }
        flags
    }

    /// Whether blocked syscalls get DWARF-unwound off-CPU stacks: DWARF
    /// mode, with `sys_exit` attached (it copies their stack).
    pub fn offcpu_dwarf(&self) -> bool {
        self.stack_bytes() != 0
            && self
                .status
                .iter()
                .any(|s| s.name == family::SYSCALLS && s.attached)
    }

    /// The sampling quantum of DWARF off-CPU stacks (µs; 0: every one).
    pub fn offcpu_quantum_us(&self) -> u32 {
        self.options.offcpu_quantum_us
    }

    fn write_current_config(&mut self) -> Result<(), ProbeError> {
        let config = ProbeConfig {
            root_tgid: self.root_tgid,
            flags: self.config_flags(),
            stack_bytes: self.stack_bytes(),
            offcpu_quantum_us: self.options.offcpu_quantum_us,
            task_fsbase: match self.task_fsbase {
                Some(Ok(offset)) => offset,
                _ => 0,
            },
            task_pid: self.task_pid.unwrap_or(0),
            block: self.block_layout.unwrap_or_default(),
        };
        self.write_config(config)
    }

    /// The stack window the probe copies (0: none), at most `MAX_STACK_BYTES`.
    fn stack_bytes(&self) -> u32 {
        self.options.stack_bytes.min(MAX_STACK_BYTES)
    }

    /// The kernel's names of `addrs` (the `kernel_symbols` program); None
    /// when it did not load or a run failed (logged; kallsyms names them).
    pub fn kernel_symbol_names(&self, addrs: &[u64]) -> Option<Vec<Option<String>>> {
        let mut guard = self
            .kernel_symbols
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match guard.as_mut()?.names(addrs) {
            Ok(names) => Some(names),
            Err(err) => {
                log::debug!("naming kernel frames by kernel_symbols failed: {err}");
                *guard = None;
                None
            }
        }
    }

    fn take_ringbuf(&mut self, name: &'static str) -> Result<RingBuf<MapData>, ProbeError> {
        let map = self
            .ebpf
            .take_map(name)
            .ok_or(ProbeError::MissingMap(name))?;
        RingBuf::try_from(map).map_err(|source| ProbeError::Map { name, source })
    }

    fn write_config(&mut self, config: ProbeConfig) -> Result<(), ProbeError> {
        let mut array: Array<&mut MapData, ProbeConfig> = self.array_mut("CONFIG")?;
        array.set(0, config, 0).map_err(|source| ProbeError::Map {
            name: "CONFIG",
            source,
        })
    }

    fn array_mut<V: aya::Pod>(
        &mut self,
        name: &'static str,
    ) -> Result<Array<&mut MapData, V>, ProbeError> {
        let map = self
            .ebpf
            .map_mut(name)
            .ok_or(ProbeError::MissingMap(name))?;
        Array::try_from(map).map_err(|source| ProbeError::Map { name, source })
    }

    fn array<V: aya::Pod>(&self, name: &'static str) -> Result<Array<&MapData, V>, ProbeError> {
        let map = self.ebpf.map(name).ok_or(ProbeError::MissingMap(name))?;
        Array::try_from(map).map_err(|source| ProbeError::Map { name, source })
    }

    fn hash_mut<K: aya::Pod, V: aya::Pod>(
        &mut self,
        name: &'static str,
    ) -> Result<HashMap<&mut MapData, K, V>, ProbeError> {
        let map = self
            .ebpf
            .map_mut(name)
            .ok_or(ProbeError::MissingMap(name))?;
        HashMap::try_from(map).map_err(|source| ProbeError::Map { name, source })
    }

    fn hash<K: aya::Pod, V: aya::Pod>(
        &self,
        name: &'static str,
    ) -> Result<HashMap<&MapData, K, V>, ProbeError> {
        let map = self.ebpf.map(name).ok_or(ProbeError::MissingMap(name))?;
        HashMap::try_from(map).map_err(|source| ProbeError::Map { name, source })
    }

    /// The pid the recorded command will have: traced from its exec on.
    pub fn set_root_tgid(&mut self, tgid: u32) -> Result<(), ProbeError> {
        self.root_tgid = tgid;
        self.write_current_config()
    }

    /// Traces a running process (and, through fork, its future children).
    pub fn trace_tgid(&mut self, tgid: u32) -> Result<(), ProbeError> {
        if tgid >= self.pid_slots {
            return Ok(());
        }
        let mut traced: Array<&mut MapData, u32> = self.array_mut("TRACED")?;
        traced.set(tgid, 1u32, 0).map_err(|source| ProbeError::Map {
            name: "TRACED",
            source,
        })
    }

    /// Whether the probes trace `tgid` now (its `TRACED` slot is set).
    pub fn traces(&self, tgid: u32) -> bool {
        if tgid >= self.pid_slots {
            return false;
        }
        self.array::<u32>("TRACED")
            .is_ok_and(|traced| traced.get(&tgid, 0).is_ok_and(|v| v == 1))
    }

    /// Loads and attaches every probe family; a family that fails is
    /// disabled with a note, the others run.
    pub fn attach_all(&mut self) {
        let missing_fields = tracefs::check_fields(TRACEPOINT_FIELDS);
        let mut families: Vec<(&str, Result<Vec<String>, String>)> = Vec::new();
        for &(prog_name, fam, attach) in PROGRAMS {
            // Exact timing hooks every syscall's entry, which remembers
            // futex waits too; otherwise only futex entries are hooked.
            let exact = self.options.syscall_timing == SyscallTiming::Exact;
            if (prog_name == "sys_enter" && !exact) || (prog_name == "sys_enter_futex" && exact) {
                continue;
            }
            // Python frames of off-CPU intervals go with the DWARF mode.
            if prog_name == "offcpu_python" && self.stack_bytes() == 0 {
                continue;
            }
            let result = match families.iter().position(|(f, _)| *f == fam) {
                Some(i) if families[i].1.is_err() => continue,
                _ => self.attach_one(prog_name, attach, &missing_fields),
            };
            match families.iter_mut().find(|(f, _)| *f == fam) {
                Some((_, acc)) => match (acc.as_mut(), result) {
                    (Ok(targets), Ok(t)) => targets.push(t),
                    (Ok(_), Err(e)) => *acc = Err(e),
                    (Err(_), _) => {}
                },
                None => families.push((fam, result.map(|t| vec![t]))),
            }
        }
        self.status = families
            .into_iter()
            .map(|(name, result)| match result {
                Ok(targets) => ProbeStatus {
                    name: name.to_string(),
                    attached: true,
                    note: targets.join(", "),
                },
                Err(why) => ProbeStatus {
                    name: name.to_string(),
                    attached: false,
                    note: why,
                },
            })
            .collect();
        // The off-CPU DWARF flag depends on what attached.
        if let Err(err) = self.write_current_config() {
            log::warn!("probe config: {err}");
        }
    }

    fn attach_one(
        &mut self,
        prog_name: &str,
        attach: Attach,
        missing_fields: &[String],
    ) -> Result<String, String> {
        if let Attach::TracePoint(cat, event) = attach {
            if !tracefs::tracepoint_exists(cat, event) {
                return Err(format!(
                    "tracepoint {cat}:{event} not found; probe disabled"
                ));
            }
            let prefix = format!("{cat}:{event}.");
            if let Some(bad) = missing_fields.iter().find(|m| m.starts_with(&prefix)) {
                return Err(format!("tracepoint layout differs ({bad}); probe disabled"));
            }
        }
        if prog_name == "block_rq_issue" {
            let layout = btf::block_layout()
                .map_err(|e| format!("struct request's layout from BTF: {e}; probe disabled"))?;
            self.block_layout = Some(layout);
            self.write_current_config()
                .map_err(|e| format!("probe config: {e}"))?;
        }
        if prog_name == "sched_waking" {
            let offset = btf::task_pid_offset()
                .map_err(|e| format!("task_struct.pid from BTF: {e}; probe disabled"))?;
            self.task_pid = Some(offset);
            self.write_current_config()
                .map_err(|e| format!("probe config: {e}"))?;
        }
        let freq = self.options.freq_hz;
        let program = self
            .ebpf
            .program_mut(prog_name)
            .ok_or_else(|| format!("program {prog_name} missing from the probe object"))?;
        let fail = |what: &str, e: &dyn std::fmt::Display| format!("{prog_name}: {what}: {e}");
        match attach {
            Attach::PerfCpuClock => {
                let prog: &mut PerfEvent = program.try_into().map_err(|e| fail("type", &e))?;
                prog.load().map_err(|e| fail("load", &e))?;
                let cpus = aya::util::online_cpus()
                    .map_err(|(what, e)| format!("online cpus ({what}): {e}"))?;
                for &cpu in &cpus {
                    let id = prog
                        .attach(
                            PerfEventConfig::Software(SoftwareEvent::CpuClock),
                            PerfEventScope::AllProcessesOneCpu { cpu },
                            SamplePolicy::Frequency(freq),
                            false,
                        )
                        .map_err(|e| fail(&format!("perf_event on cpu {cpu}"), &e))?;
                    let link = prog.take_link(id).map_err(|e| fail("take link", &e))?;
                    self.links.push(Box::new(link));
                }
                Ok(format!(
                    "perf_event cpu-clock {freq} Hz on {} cpus",
                    cpus.len()
                ))
            }
            Attach::TracePoint(cat, event) => {
                let prog: &mut TracePoint = program.try_into().map_err(|e| fail("type", &e))?;
                prog.load().map_err(|e| fail("load", &e))?;
                let id = prog.attach(cat, event).map_err(|e| fail("attach", &e))?;
                let link = prog.take_link(id).map_err(|e| fail("take link", &e))?;
                self.links.push(Box::new(link));
                Ok(format!("tracepoint {cat}:{event}"))
            }
            Attach::RawTracePoint(tp) => {
                let prog: &mut RawTracePoint = program.try_into().map_err(|e| fail("type", &e))?;
                prog.load().map_err(|e| fail("load", &e))?;
                let id = prog.attach(tp).map_err(|e| fail("attach", &e))?;
                let link = prog.take_link(id).map_err(|e| fail("take link", &e))?;
                self.links.push(Box::new(link));
                Ok(format!("raw_tracepoint {tp}"))
            }
        }
    }

    /// True when the family attached.
    pub fn attached(&self, family: &str) -> bool {
        self.status.iter().any(|s| s.name == family && s.attached)
    }

    /// File descriptor of the process-event ring buffer (readable when events wait).
    pub fn proc_events_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.proc_events.as_ref().map(|r| r.as_fd())
    }
}
