//! The one kernel seam: loads the embedded eBPF object with aya, attaches
//! the probe families, writes the traced set and reads the maps back.
//!
//! Data flow: [`ProbeSet::load`] → [`ProbeSet::attach_all`] (each family
//! attaches or is disabled with a note) → user space marks pids to trace
//! ([`ProbeSet::trace_tgid`], [`ProbeSet::set_root_tgid`]) → periodic
//! [`ProbeSet::drain_proc_events`] / [`ProbeSet::drain_block_events`] and
//! map snapshots ([`ProbeSet::snapshot`]) → drop (detaches everything).
//! Nothing here interprets the data; `record::aggregate` does, purely.
pub mod btf;
pub mod tracefs;

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

/// Probe family names as they appear in `session.json` `probes`.
pub mod family {
    pub const CPU_SAMPLES: &str = "cpu_samples";
    pub const SCHED: &str = "sched";
    pub const PROCESS: &str = "process";
    pub const SYSCALLS: &str = "syscalls";
    pub const BLOCK: &str = "block";
    /// Request creator attribution (`block_io_start`); without it block
    /// requests are attributed to the issuing task.
    pub const BLOCK_SUBMITTER: &str = "block_submitter";
    pub const PAGE_CACHE: &str = "page_cache";
    /// Python frames of off-CPU intervals (DWARF mode only).
    pub const PYTHON_OFFCPU: &str = "python_offcpu";
    /// The wake-up graph (`sched_waking`, with the interrupt-context
    /// hooks that tell interrupt wakers from tasks).
    pub const WAKEUPS: &str = "wakeups";
    /// The words futex waits sleep on (`sys_enter_futex`), which tell lock
    /// hand-offs from other futex wake-ups; without them every futex
    /// wake-up counts as unshared.
    pub const FUTEX_WAITS: &str = "futex_waits";
}

/// Tracepoint fields the probes read at fixed offsets: (category, event,
/// field, offset). Checked against the kernel's `format` files before
/// attaching, so a kernel with another layout disables the probe instead of
/// recording garbage. The offsets are the ones the probes read
/// (`storprof_common::tracepoint_offsets`), so the two cannot drift.
#[rustfmt::skip] // a table: one field per row
pub const TRACEPOINT_FIELDS: &[(&str, &str, &str, usize)] = &[
    ("sched", "sched_switch", "prev_pid", offsets::SCHED_SWITCH_PREV_PID),
    ("sched", "sched_switch", "prev_state", offsets::SCHED_SWITCH_PREV_STATE),
    ("sched", "sched_switch", "next_pid", offsets::SCHED_SWITCH_NEXT_PID),
    ("sched", "sched_process_fork", "child_pid", offsets::SCHED_PROCESS_FORK_CHILD_PID),
    ("sched", "sched_process_exit", "group_dead", offsets::SCHED_PROCESS_EXIT_GROUP_DEAD),
    ("block", "block_io_start", "dev", offsets::BLOCK_IO_START_DEV),
    ("block", "block_io_start", "sector", offsets::BLOCK_IO_START_SECTOR),
    ("filemap", "mm_filemap_add_to_page_cache", "order", offsets::FILEMAP_ADD_TO_PAGE_CACHE_ORDER),
    ("syscalls", "sys_enter_futex", "uaddr", offsets::SYS_ENTER_FUTEX_UADDR),
    ("syscalls", "sys_enter_futex", "op", offsets::SYS_ENTER_FUTEX_OP),
    ("syscalls", "sys_enter_futex", "val", offsets::SYS_ENTER_FUTEX_VAL),
];

/// One program: its name in the object, its family and where it attaches.
#[derive(Clone, Copy, Debug)]
pub enum Attach {
    PerfCpuClock,
    TracePoint(&'static str, &'static str),
    RawTracePoint(&'static str),
}

/// Every program of the object.
pub const PROGRAMS: &[(&str, &str, Attach)] = &[
    ("cpu_sample", family::CPU_SAMPLES, Attach::PerfCpuClock),
    (
        "sched_switch",
        family::SCHED,
        Attach::TracePoint("sched", "sched_switch"),
    ),
    (
        "offcpu_python",
        family::PYTHON_OFFCPU,
        Attach::TracePoint("sched", "sched_switch"),
    ),
    (
        "sched_process_fork",
        family::PROCESS,
        Attach::TracePoint("sched", "sched_process_fork"),
    ),
    (
        "sched_process_exec",
        family::PROCESS,
        Attach::TracePoint("sched", "sched_process_exec"),
    ),
    (
        "sched_process_exit",
        family::PROCESS,
        Attach::TracePoint("sched", "sched_process_exit"),
    ),
    (
        "sys_enter",
        family::SYSCALLS,
        Attach::RawTracePoint("sys_enter"),
    ),
    (
        "sys_exit",
        family::SYSCALLS,
        Attach::RawTracePoint("sys_exit"),
    ),
    (
        "sys_enter_futex",
        family::FUTEX_WAITS,
        Attach::TracePoint("syscalls", "sys_enter_futex"),
    ),
    (
        "block_io_start",
        family::BLOCK_SUBMITTER,
        Attach::TracePoint("block", "block_io_start"),
    ),
    (
        "block_rq_issue",
        family::BLOCK,
        Attach::RawTracePoint("block_rq_issue"),
    ),
    (
        "block_rq_complete",
        family::BLOCK,
        Attach::RawTracePoint("block_rq_complete"),
    ),
    (
        "filemap_add_to_page_cache",
        family::PAGE_CACHE,
        Attach::TracePoint("filemap", "mm_filemap_add_to_page_cache"),
    ),
    // The interrupt-context counters attach before the wake-up hook that
    // reads them, exits before entries: an exit seen without its entry
    // leaves a depth at 0, an entry without its exit would leave it raised.
    (
        "irq_handler_exit",
        family::WAKEUPS,
        Attach::RawTracePoint("irq_handler_exit"),
    ),
    (
        "softirq_exit",
        family::WAKEUPS,
        Attach::RawTracePoint("softirq_exit"),
    ),
    (
        "hrtimer_expire_exit",
        family::WAKEUPS,
        Attach::RawTracePoint("hrtimer_expire_exit"),
    ),
    (
        "irq_handler_entry",
        family::WAKEUPS,
        Attach::RawTracePoint("irq_handler_entry"),
    ),
    (
        "softirq_entry",
        family::WAKEUPS,
        Attach::RawTracePoint("softirq_entry"),
    ),
    (
        "hrtimer_expire_entry",
        family::WAKEUPS,
        Attach::RawTracePoint("hrtimer_expire_entry"),
    ),
    (
        "sched_waking",
        family::WAKEUPS,
        Attach::RawTracePoint("sched_waking"),
    ),
];

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
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

/// One user-stack sample of the DWARF mode: header, Python frames and
/// stack window.
#[derive(Clone, Debug)]
pub struct UserStackEvent {
    pub header: UserStackHeader,
    /// Python frames the probe read (innermost first; empty when the
    /// process has no registered interpreter).
    pub python: Vec<PyFrameRecord>,
    /// `stack[i]` is the byte at `header.sp + i`.
    pub stack: Vec<u8>,
}

/// Everything read back from the maps at one instant.
#[derive(Clone, Debug, Default)]
pub struct MapSnapshot {
    pub threads: Vec<ThreadAcc>,
    pub syscalls: Vec<(SyscallKey, SyscallAcc)>,
    pub samples: Vec<(StackKey, u64)>,
    pub offcpu: Vec<(StackKey, u64)>,
    /// tid → (switch-in time, off-CPU slot) for threads possibly on a CPU
    /// now, read so that the two agree ([`consistent_slots`]).
    pub oncpu_start: BTreeMap<u32, (u64, OffCpuStart)>,
    /// CLOCK_MONOTONIC just before `oncpu_start` was read (0: unknown). A
    /// thread it shows on a CPU was there from its switch-in until at
    /// least this instant, so its slice in progress is counted up to here.
    pub slots_read_ns: u64,
}

/// Tries at reading a thread's two slots between two of its switch-ins.
const SLOT_READ_TRIES: usize = 3;

/// A thread's switch-in time and off-CPU slot as one consistent pair.
/// They are two map reads, and a thread switched in between them (a
/// sleeper woken) would pair its switch-in time from before the sleep with
/// the cleared off-CPU slot of the new slice: "on a CPU since before the
/// sleep". The switch-in time is read again after the slot; when it moved,
/// the pair is read again, and a thread that keeps being switched in gets
/// no switch-in time (0): its slice is not counted as in progress, only
/// later at its switch-out, which never counts a sleep as time on a CPU.
pub fn consistent_slots(
    mut read_on: impl FnMut() -> Option<u64>,
    mut read_off: impl FnMut() -> Option<OffCpuStart>,
) -> Option<(u64, OffCpuStart)> {
    for _ in 0..SLOT_READ_TRIES {
        let on = read_on()?;
        let off = read_off()?;
        if read_on()? == on {
            return Some((on, off));
        }
    }
    Some((0, read_off()?))
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
        let ebpf = EbpfLoader::new()
            .map_max_entries("TRACED", pid_slots)
            .map_max_entries("ONCPU_START", pid_slots)
            .map_max_entries("OFFCPU_START", pid_slots)
            .map_max_entries("SWITCH_STACKS", pid_slots)
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
        };
        set.write_current_config()?;
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

    /// Hands every pending process event to `f`.
    pub fn drain_proc_events(&mut self, mut f: impl FnMut(ProcEvent)) {
        if let Some(ring) = self.proc_events.as_mut() {
            while let Some(item) = ring.next() {
                if let Some(event) = read_pod::<ProcEvent>(&item) {
                    f(event);
                }
            }
        }
    }

    /// Hands every pending user-stack sample (DWARF mode) to `f`.
    pub fn drain_user_stacks(&mut self, mut f: impl FnMut(UserStackEvent)) {
        if let Some(ring) = self.stack_events.as_mut() {
            while let Some(item) = ring.next() {
                if let Some(event) = parse_user_stack_event(&item) {
                    f(event);
                }
            }
        }
    }

    /// Hands every pending off-CPU interval of a Python thread to `f`.
    pub fn drain_python_offcpu(&mut self, mut f: impl FnMut(PyOffCpuSample)) {
        if let Some(ring) = self.py_offcpu_events.as_mut() {
            while let Some(item) = ring.next() {
                if let Some(sample) = read_pod::<PyOffCpuSample>(&item) {
                    f(sample);
                }
            }
        }
    }

    /// Off-CPU Python intervals lost: (map full, ring buffer full).
    pub fn python_offcpu_lost(&self) -> (u64, u64) {
        let Some(map) = self.ebpf.map("PY_OFFCPU_LOST") else {
            return (0, 0);
        };
        let Ok(array) = PerCpuArray::<_, u64>::try_from(map) else {
            return (0, 0);
        };
        let sum = |i: u32| array.get(&i, 0).map_or(0, |v| v.iter().sum());
        (
            sum(py_offcpu_lost::MAP_FULL),
            sum(py_offcpu_lost::RINGBUF_FULL),
        )
    }

    /// Registers the CPython interpreter of `tgid` for the probe's Python
    /// frame walk (forked children inherit it in the kernel).
    pub fn register_python(&mut self, tgid: u32, py: &PyProcess) -> Result<(), ProbeError> {
        let mut entry = *py;
        if let Some((dev, ino)) = foreign_pid_namespace(tgid) {
            entry.pidns_dev = dev;
            entry.pidns_ino = ino;
        }
        if entry.tstate_mode == py_tstate::BY_PTHREAD && !self.task_fsbase_known()? {
            // Without the task layout only the GIL holder can be found.
            entry.tstate_mode = py_tstate::GIL_HOLDER;
        }
        let mut procs: HashMap<&mut MapData, u32, PyProcess> = self.hash_mut("PY_PROCS")?;
        procs
            .insert(tgid, entry, 0)
            .map_err(|source| ProbeError::Map {
                name: "PY_PROCS",
                source,
            })
    }

    /// Looks up `task_struct.thread.fsbase` once (BTF) and writes it to
    /// the probe config; false when the kernel's BTF does not tell.
    fn task_fsbase_known(&mut self) -> Result<bool, ProbeError> {
        if self.task_fsbase.is_none() {
            let found = btf::task_fsbase_offset();
            match &found {
                Ok(offset) => log::debug!("btf: task_struct.thread.fsbase at {offset}"),
                Err(err) => {
                    log::warn!("python 3.10: threads are matched by the GIL holder only ({err})")
                }
            }
            self.task_fsbase = Some(found);
            self.write_current_config()?;
        }
        Ok(matches!(self.task_fsbase, Some(Ok(_))))
    }

    /// Marks `tgid` for stack windows under
    /// [`ProbeOptions::unwind_per_process`]; forked children inherit the
    /// mark in the kernel, exec and exit clear it.
    pub fn set_dwarf(&mut self, tgid: u32) -> Result<(), ProbeError> {
        let mut procs: HashMap<&mut MapData, u32, u8> = self.hash_mut("DWARF_PROCS")?;
        procs
            .insert(tgid, 1u8, 0)
            .map_err(|source| ProbeError::Map {
                name: "DWARF_PROCS",
                source,
            })
    }

    /// True when the kernel holds an interpreter entry for `tgid` (set by
    /// [`Self::register_python`] or copied at fork).
    pub fn python_registered(&self, tgid: u32) -> bool {
        self.hash::<u32, PyProcess>("PY_PROCS")
            .is_ok_and(|procs| procs.get(&tgid, 0).is_ok())
    }

    /// Hands every pending completed block request to `f`.
    pub fn drain_block_events(&mut self, mut f: impl FnMut(BlockEvent)) {
        if let Some(ring) = self.block_events.as_mut() {
            while let Some(item) = ring.next() {
                if let Some(event) = read_pod::<BlockEvent>(&item) {
                    f(event);
                }
            }
        }
    }

    /// Reads the accumulating maps. `tids_of_interest` selects which per-tid
    /// on-CPU slots to read (threads that may be running right now).
    /// The per-thread maps only (threads, syscalls, and the on-CPU slots of
    /// their tids and of `more_tids`): what the time series needs each
    /// second, without walking the stack maps.
    pub fn thread_snapshot(&self, more_tids: &[u32]) -> Result<MapSnapshot, ProbeError> {
        let threads_map: HashMap<_, u32, ThreadAcc> = self.hash("THREADS")?;
        let threads: Vec<ThreadAcc> = threads_map
            .iter()
            .filter_map(Result::ok)
            .map(|(_, v)| v)
            .collect();
        let syscalls = self.syscall_stats()?;
        let tids: std::collections::BTreeSet<u32> = threads
            .iter()
            .map(|t| t.tid)
            .chain(syscalls.iter().map(|(k, _)| k.tid))
            .chain(more_tids.iter().copied())
            .collect();
        let oncpu: Array<_, u64> = self.array("ONCPU_START")?;
        let offstart: Array<_, OffCpuStart> = self.array("OFFCPU_START")?;
        let slots_read_ns = monotonic_ns();
        let oncpu_start = tids
            .into_iter()
            .filter_map(|tid| {
                let slots =
                    consistent_slots(|| oncpu.get(&tid, 0).ok(), || offstart.get(&tid, 0).ok())?;
                Some((tid, slots))
            })
            .collect();
        Ok(MapSnapshot {
            threads,
            syscalls,
            oncpu_start,
            slots_read_ns,
            ..MapSnapshot::default()
        })
    }

    pub fn snapshot(&self, tids_of_interest: &[u32]) -> Result<MapSnapshot, ProbeError> {
        let threads_map: HashMap<_, u32, ThreadAcc> = self.hash("THREADS")?;
        let threads = threads_map
            .iter()
            .filter_map(Result::ok)
            .map(|(_, v)| v)
            .collect();
        let syscalls = self.syscall_stats()?;
        let samples_map: HashMap<_, StackKey, u64> = self.hash("SAMPLES")?;
        let samples = samples_map.iter().filter_map(Result::ok).collect();
        let off_map: HashMap<_, StackKey, u64> = self.hash("OFFCPU_STACKS")?;
        let offcpu = off_map.iter().filter_map(Result::ok).collect();
        let oncpu: Array<_, u64> = self.array("ONCPU_START")?;
        let offstart: Array<_, OffCpuStart> = self.array("OFFCPU_START")?;
        let slots_read_ns = monotonic_ns();
        let mut oncpu_start = BTreeMap::new();
        for &tid in tids_of_interest {
            if let Some(slots) =
                consistent_slots(|| oncpu.get(&tid, 0).ok(), || offstart.get(&tid, 0).ok())
            {
                oncpu_start.insert(tid, slots);
            }
        }
        Ok(MapSnapshot {
            threads,
            syscalls,
            samples,
            offcpu,
            oncpu_start,
            slots_read_ns,
        })
    }

    /// Moves everything the maps hold for `tids` (threads that exited a
    /// while ago: nothing writes their entries any more) out of the maps:
    /// thread accumulators, syscall statistics (the thread slot is freed
    /// for a later thread), stack counts, and the wake-up edges they are
    /// either end of. Without this the maps fill up under process churn
    /// and later threads go uncounted.
    pub fn retire_threads(&mut self, tids: &BTreeSet<u32>) -> Result<RetiredThreads, ProbeError> {
        let mut out = RetiredThreads::default();
        if tids.is_empty() {
            return Ok(out);
        }
        let mut threads: HashMap<_, u32, ThreadAcc> = self.hash_mut("THREADS")?;
        for &tid in tids {
            if let Ok(acc) = threads.get(&tid, 0) {
                out.threads.push(acc);
                let _ = threads.remove(&tid);
            }
        }
        self.retire_syscall_slots(tids, &mut out.syscalls)?;
        let mut hashed: HashMap<_, SyscallKey, SyscallAcc> = self.hash_mut("SYSCALLS")?;
        take_matching(&mut hashed, |k| tids.contains(&k.tid), &mut out.syscalls);
        let mut samples: HashMap<_, StackKey, u64> = self.hash_mut("SAMPLES")?;
        take_matching(&mut samples, |k| tids.contains(&k.tid), &mut out.samples);
        let mut offcpu: HashMap<_, StackKey, u64> = self.hash_mut("OFFCPU_STACKS")?;
        take_matching(&mut offcpu, |k| tids.contains(&k.tid), &mut out.offcpu);
        if self.attached(family::WAKEUPS) {
            let mut edges: HashMap<_, WakeKey, WakeAcc> = self.hash_mut("WAKE_EDGES")?;
            take_matching(
                &mut edges,
                |k| tids.contains(&k.waker_tid) || tids.contains(&k.wakee_tid),
                &mut out.wake_edges,
            );
        }
        Ok(out)
    }

    /// Empties the syscall thread slots that `tids` own, into `out`: the
    /// statistics are zeroed and the (slot, nr) index cleared before the
    /// owner entry goes, so the next thread to claim the slot starts clean.
    fn retire_syscall_slots(
        &mut self,
        tids: &BTreeSet<u32>,
        out: &mut Vec<(SyscallKey, SyscallAcc)>,
    ) -> Result<(), ProbeError> {
        let owned: Vec<(u32, u32)> = {
            let owners: HashMap<_, u32, u32> = self.hash("SYSCALL_SLOT_OWNER")?;
            tids.iter()
                .map(|&tid| (tid, tid % SYSCALL_THREAD_SLOTS))
                .filter(|&(tid, slot)| owners.get(&slot, 0).ok() == Some(tid))
                .map(|(_, slot)| slot)
                .filter_map(|slot| {
                    let used = self
                        .array::<u32>("SYSCALL_SLOT_USED")
                        .ok()?
                        .get(&slot, 0)
                        .ok()?;
                    Some((slot, used.min(SYSCALL_SLOT_ENTRIES)))
                })
                .collect()
        };
        for (slot, used) in owned {
            let base = slot * SYSCALL_SLOT_ENTRIES;
            let keys: Vec<(u32, SyscallKey)> = {
                let keys: Array<_, SyscallKey> = self.array("SYSCALL_POOL_KEY")?;
                (base..base + used)
                    .filter_map(|entry| Some((entry, keys.get(&entry, 0).ok()?)))
                    .collect()
            };
            let mut nrs = Vec::new();
            let mut pool: Array<_, SyscallAcc> = self.array_mut("SYSCALL_POOL")?;
            for (entry, key) in keys {
                let Ok(acc) = pool.get(&entry, 0) else {
                    continue;
                };
                out.push((key, acc));
                nrs.push(key.nr);
                pool.set(entry, SyscallAcc::ZERO, 0)
                    .map_err(|source| ProbeError::Map {
                        name: "SYSCALL_POOL",
                        source,
                    })?;
            }
            let mut index: Array<_, u32> = self.array_mut("SYSCALL_INDEX")?;
            for nr in nrs.into_iter().filter(|&nr| nr < SYSCALL_NR_SLOTS) {
                let _ = index.set(slot * SYSCALL_NR_SLOTS + nr, 0, 0);
            }
            let mut used_map: Array<_, u32> = self.array_mut("SYSCALL_SLOT_USED")?;
            let _ = used_map.set(slot, 0, 0);
            let mut owners: HashMap<_, u32, u32> = self.hash_mut("SYSCALL_SLOT_OWNER")?;
            let _ = owners.remove(&slot);
        }
        Ok(())
    }

    /// Per-thread per-syscall statistics: the array regions of the claimed
    /// thread slots merged with the hash-map fallback.
    fn syscall_stats(&self) -> Result<Vec<(SyscallKey, SyscallAcc)>, ProbeError> {
        let owners: HashMap<_, u32, u32> = self.hash("SYSCALL_SLOT_OWNER")?;
        let used: Array<_, u32> = self.array("SYSCALL_SLOT_USED")?;
        let keys: Array<_, SyscallKey> = self.array("SYSCALL_POOL_KEY")?;
        let pool: Array<_, SyscallAcc> = self.array("SYSCALL_POOL")?;
        let mut pooled = Vec::new();
        for slot in owners.keys().filter_map(Result::ok) {
            let in_use = used.get(&slot, 0).unwrap_or(0).min(SYSCALL_SLOT_ENTRIES);
            for i in slot * SYSCALL_SLOT_ENTRIES..slot * SYSCALL_SLOT_ENTRIES + in_use {
                if let (Ok(key), Ok(acc)) = (keys.get(&i, 0), pool.get(&i, 0)) {
                    pooled.push((key, acc));
                }
            }
        }
        let sys_map: HashMap<_, SyscallKey, SyscallAcc> = self.hash("SYSCALLS")?;
        let hashed = sys_map.iter().filter_map(Result::ok);
        Ok(merge_syscall_stats(pooled.into_iter().chain(hashed)))
    }

    /// The wake-up edges summed so far (empty when the family did not attach).
    pub fn wake_edges(&self) -> Result<Vec<(WakeKey, WakeAcc)>, ProbeError> {
        if !self.attached(family::WAKEUPS) {
            return Ok(Vec::new());
        }
        let edges: HashMap<_, WakeKey, WakeAcc> = self.hash("WAKE_EDGES")?;
        Ok(edges.iter().filter_map(Result::ok).collect())
    }

    /// Frames (instruction pointers, leaf first) of a stack id.
    pub fn stack(&self, id: i32) -> Vec<u64> {
        let Ok(id) = u32::try_from(id) else {
            return Vec::new();
        };
        // A poisoned lock only means a panic elsewhere; the cache holds
        // whole entries either way.
        let mut cache = self
            .stack_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(known) = cache.get(&id) {
            return known.to_vec();
        }
        let Some(map) = self.ebpf.map("STACK_FRAMES") else {
            return Vec::new();
        };
        let Ok(stacks) = Array::<_, StackFrames>::try_from(map) else {
            return Vec::new();
        };
        match stacks.get(&id, 0) {
            Ok(stack) => {
                let frames = stack.frames();
                if !frames.is_empty() {
                    cache.insert(id, std::sync::Arc::from(frames));
                }
                frames.to_vec()
            }
            Err(_) => Vec::new(),
        }
    }

    /// `MISSED_SWITCH_INS` summed over CPUs.
    pub fn missed_switch_ins(&self) -> u64 {
        self.ebpf
            .map("MISSED_SWITCH_INS")
            .and_then(|map| PerCpuArray::<_, u64>::try_from(map).ok())
            .and_then(|array| array.get(&0, 0).ok())
            .map_or(0, |values| values.iter().sum())
    }

    /// Drop counters summed over CPUs, by name.
    pub fn lost_events(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        let Some(map) = self.ebpf.map("LOST") else {
            return out;
        };
        let Ok(array) = PerCpuArray::<_, u64>::try_from(map) else {
            return out;
        };
        for (i, name) in lost::NAMES.iter().enumerate() {
            let total = array
                .get(&(i as u32), 0)
                .map(|values| values.iter().sum())
                .unwrap_or(0);
            out.insert((*name).to_string(), total);
        }
        for (name, program) in self.ebpf.programs() {
            let Ok(fd) = program.fd() else { continue };
            let fd = std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(fd));
            let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"));
            if let Some(missed) = info.ok().as_deref().and_then(recursion_misses)
                && missed > 0
            {
                out.insert(format!("skipped:{name}"), missed);
            }
        }
        out
    }
}

/// `recursion_misses` of a BPF program's `/proc/self/fdinfo` text: the
/// runs the kernel skipped because the program fired while another ran on
/// the same CPU (for classic tracepoints and perf events: any other such
/// program; for raw tracepoints: itself).
fn recursion_misses(fdinfo: &str) -> Option<u64> {
    fdinfo.lines().find_map(|line| {
        line.strip_prefix("recursion_misses:")
            .and_then(|v| v.trim().parse().ok())
    })
}

/// What [`ProbeSet::retire_threads`] moved out of the maps.
#[derive(Clone, Debug, Default)]
pub struct RetiredThreads {
    pub threads: Vec<ThreadAcc>,
    pub syscalls: Vec<(SyscallKey, SyscallAcc)>,
    pub samples: Vec<(StackKey, u64)>,
    pub offcpu: Vec<(StackKey, u64)>,
    pub wake_edges: Vec<(WakeKey, WakeAcc)>,
}

/// Moves the entries of `map` whose key matches into `out`. Keys are
/// listed first: deleting while walking would restart the walk.
fn take_matching<K: aya::Pod + Ord, V: aya::Pod>(
    map: &mut HashMap<&mut MapData, K, V>,
    matches: impl Fn(&K) -> bool,
    out: &mut Vec<(K, V)>,
) {
    let keys: Vec<K> = map
        .keys()
        .filter_map(Result::ok)
        .filter(|k| matches(k))
        .collect();
    for key in keys {
        if let Ok(value) = map.get(&key, 0) {
            out.push((key, value));
        }
        let _ = map.remove(&key);
    }
}

/// Sums entries with the same key (a tid reused during the recording, or a
/// thread whose calls went partly to the fallback map), ordered by key.
pub fn merge_syscall_stats(
    entries: impl IntoIterator<Item = (SyscallKey, SyscallAcc)>,
) -> Vec<(SyscallKey, SyscallAcc)> {
    let mut merged: BTreeMap<SyscallKey, SyscallAcc> = BTreeMap::new();
    for (key, acc) in entries {
        let slot = merged.entry(key).or_insert(SyscallAcc::ZERO);
        slot.count += acc.count;
        slot.errors += acc.errors;
        slot.total_ns += acc.total_ns;
        slot.bytes += acc.bytes;
        for (sum, add) in slot.latency_log2_ns.iter_mut().zip(acc.latency_log2_ns) {
            *sum += add;
        }
    }
    merged.into_iter().collect()
}

/// Splits one `STACK_EVENTS` record: header, Python frame area, stack window.
pub fn parse_user_stack_event(item: &[u8]) -> Option<UserStackEvent> {
    let header = read_pod::<UserStackHeader>(item)?;
    let header_len = std::mem::size_of::<UserStackHeader>();
    let frame_len = std::mem::size_of::<PyFrameRecord>();
    let frames = (header.py_frames as usize).min(MAX_PY_FRAMES);
    let python = (0..frames)
        .filter_map(|i| {
            let at = header_len + i * frame_len;
            read_pod::<PyFrameRecord>(item.get(at..at + frame_len)?)
        })
        .collect();
    let end = USER_STACK_PREFIX
        .saturating_add(header.len as usize)
        .min(item.len());
    let stack = item
        .get(USER_STACK_PREFIX.min(end)..end)
        .unwrap_or_default()
        .to_vec();
    Some(UserStackEvent {
        header,
        python,
        stack,
    })
}

fn read_pod<T: Copy>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < std::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: the length is checked above; T is one of the repr(C) integer-only
    // event types from storprof-common, valid for every bit pattern.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

#[cfg(test)]
mod tests {

    #[test]
    fn recursion_misses_from_fdinfo() {
        let text = "pos:\t0\nflags:\t02000002\nprog_type:\t5\nrun_cnt:\t0\nrecursion_misses:\t17\nverified_insns:\t99\n";
        assert_eq!(recursion_misses(text), Some(17));
        assert_eq!(recursion_misses("prog_type:\t5\n"), None);
    }

    use super::*;

    /// A reader that returns `values` one call after another (the last one
    /// again when they run out).
    fn reads<T: Copy>(values: &[T]) -> impl FnMut() -> Option<T> + '_ {
        let mut next = 0;
        move || {
            let v = values.get(next).or(values.last()).copied();
            next += 1;
            v
        }
    }

    fn off(ts: u64) -> OffCpuStart {
        OffCpuStart {
            ts,
            ..OffCpuStart::default()
        }
    }

    #[test]
    fn a_sleeper_woken_between_its_two_slot_reads_is_not_paired_with_its_old_switch_in() {
        // Switched in at 100, asleep since 200: the first switch-in read
        // sees 100; it is woken at 900 before the slot read, which sees the
        // new slice (ts 0); the second switch-in read sees 900. Taken as
        // read first, it would be on a CPU since 100, its sleep included.
        let got = consistent_slots(reads(&[100, 900, 900, 900]), reads(&[off(0), off(0)]));
        assert_eq!(got, Some((900, off(0))));
        // Asleep through both reads: its open off-CPU slot is kept.
        let got = consistent_slots(reads(&[100, 100]), reads(&[off(200)]));
        assert_eq!(got, Some((100, off(200))));
    }

    #[test]
    fn a_thread_switched_in_at_every_try_has_no_slice_in_progress() {
        let got = consistent_slots(reads(&[1, 2, 3, 4, 5, 6, 7]), reads(&[off(0)]));
        assert_eq!(got, Some((0, off(0))));
        // An unreadable slot is no pair at all.
        assert_eq!(consistent_slots(reads(&[1, 1]), || None), None);
    }

    fn acc(count: u64, bytes: u64, bucket: usize) -> SyscallAcc {
        let mut a = SyscallAcc {
            count,
            bytes,
            total_ns: count * 10,
            ..SyscallAcc::ZERO
        };
        a.latency_log2_ns[bucket] = count;
        a
    }

    #[test]
    fn merges_pool_and_fallback_entries_of_one_key() {
        let key = |tid, nr| SyscallKey {
            tgid: 7,
            tid,
            nr,
            _pad: 0,
        };
        let merged = merge_syscall_stats([
            (key(8, 17), acc(3, 1536, 9)),
            (key(7, 0), acc(1, 10, 4)),
            (key(8, 17), acc(2, 1024, 10)),
        ]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].0, key(7, 0));
        let (k, a) = merged[1];
        assert_eq!(k, key(8, 17));
        assert_eq!((a.count, a.bytes, a.total_ns), (5, 2560, 50));
        assert_eq!(a.latency_log2_ns[9], 3);
        assert_eq!(a.latency_log2_ns[10], 2);
    }
}
