//! The one seam between the recorder and the kernel.
//!
//! Everything the recorder reads from or writes to the probes, and what it
//! reads of the machine's processes and devices while it drains and
//! builds the session, goes through [`Kernel`]: the loaded [`ProbeSet`]
//! implements it for real recordings,
//! [`super::replay::ReplayKernel`] for tests that drive the drain loop and
//! the session writer from recorded events, without root.
use std::{
    collections::{BTreeMap, BTreeSet},
    os::fd::RawFd,
    path::PathBuf,
};

use super::procfs;

use storprof_common::{BlockEvent, ProcEvent, PyOffCpuSample, PyProcess, WakeAcc, WakeKey};

use crate::probes::{MapSnapshot, ProbeError, ProbeSet, RetiredThreads, UserStackEvent};
use storprof_session::model::{IoLimit, LowerDevice, ProbeStatus};

/// What the recorder asks of the probes.
pub trait Kernel {
    /// Per probe family: attached or why not.
    fn status(&self) -> &[ProbeStatus];
    /// True when the family attached.
    fn attached(&self, family: &str) -> bool {
        self.status().iter().any(|s| s.name == family && s.attached)
    }
    /// True when blocked syscalls of DWARF processes get unwound stacks.
    fn offcpu_dwarf(&self) -> bool;
    /// The sampling quantum of DWARF off-CPU stacks (µs; 0: every one).
    fn offcpu_quantum_us(&self) -> u32;
    /// A descriptor that becomes readable when process events wait (None:
    /// the loop polls on a timer).
    fn wait_fd(&self) -> Option<RawFd>;

    /// The pid the recorded command will have: traced from its exec on.
    fn set_root_tgid(&mut self, tgid: u32) -> Result<(), ProbeError>;
    /// Traces a running process (and its future children).
    fn trace_tgid(&mut self, tgid: u32) -> Result<(), ProbeError>;
    /// Whether the probes trace `tgid` now (false when unknown).
    fn traces(&self, tgid: u32) -> bool;
    /// Gives the probes a process's CPython interpreter.
    fn register_python(&mut self, tgid: u32, py: &PyProcess) -> Result<(), ProbeError>;
    /// True when `tgid` has an interpreter registered.
    fn python_registered(&self, tgid: u32) -> bool;
    /// Marks `tgid` for stack windows (`--unwind auto`).
    fn set_dwarf(&mut self, tgid: u32) -> Result<(), ProbeError>;

    /// Process lifecycle events since the last call.
    fn drain_proc_events(&mut self, f: &mut dyn FnMut(ProcEvent));
    /// Completed block requests since the last call.
    fn drain_block_events(&mut self, f: &mut dyn FnMut(BlockEvent));
    /// User-stack samples (DWARF mode, Python frames) since the last call.
    fn drain_user_stacks(&mut self, f: &mut dyn FnMut(UserStackEvent));
    /// Off-CPU Python samples since the last call.
    fn drain_python_offcpu(&mut self, f: &mut dyn FnMut(PyOffCpuSample));
    /// Off-CPU Python samples lost: (map full, ring buffer full).
    fn python_offcpu_lost(&self) -> (u64, u64);

    /// The per-thread maps, plus the on-CPU slots of `more_tids`.
    fn thread_snapshot(&self, more_tids: &[u32]) -> Result<MapSnapshot, ProbeError>;
    /// Every map, with the on-CPU slots of `tids_of_interest`.
    fn snapshot(&self, tids_of_interest: &[u32]) -> Result<MapSnapshot, ProbeError>;
    /// The wake-up edges summed so far.
    fn wake_edges(&self) -> Result<Vec<(WakeKey, WakeAcc)>, ProbeError>;
    /// Moves the entries of threads that exited out of the maps.
    fn retire_threads(&mut self, tids: &BTreeSet<u32>) -> Result<RetiredThreads, ProbeError>;
    /// The instruction pointers of a stack id (leaf first; empty: none).
    fn stack(&self, id: i32) -> Vec<u64>;
    /// The running kernel's name of each of `addrs` (None: no symbol),
    /// asked of the kernel itself; None when it cannot be asked, and the
    /// symbolizer reads kallsyms instead (a replay's default).
    fn kernel_symbol_names(&self, _addrs: &[u64]) -> Option<Vec<Option<String>>> {
        None
    }
    /// Drop counters by name.
    fn lost_events(&self) -> BTreeMap<String, u64>;
    /// Switch-ins found without their `sched_switch` event, and repaired.
    fn missed_switch_ins(&self) -> u64 {
        0
    }
    /// The system's dirty and writeback page counters now (None: not
    /// available). Not a probe, but read through this seam so replayed
    /// recordings do not depend on the machine running the test.
    fn vmstat(&self) -> Option<super::aggregate::VmstatCounters>;
    /// The machine's CPU time counters now (None: not available);
    /// through this seam for the same reason.
    fn host_cpu(&self) -> Option<super::aggregate::HostCpuTicks>;
    /// The devices block device `dev` (kernel-internal dev_t) sits on,
    /// from sysfs; through this seam for the same reason.
    fn lower_devices(&self, dev: u32) -> Vec<LowerDevice>;
    /// The block-I/O limits of `pid`'s cgroup and its ancestors; through
    /// this seam for the same reason.
    fn io_limits(&self, pid: u32) -> Vec<IoLimit> {
        let _ = pid;
        Vec::new()
    }

    // The machine's processes, from /proc: through this seam so that a
    // replayed recording never reads the test machine's own processes
    // (a replayed tid can be a real one there).

    /// Thread `tid` of process `tgid`'s name (None: gone). A thread id
    /// as its own `tgid` finds any thread by its id.
    fn thread_comm(&self, tgid: u32, tid: u32) -> Option<String>;
    /// Whether thread `tid` of process `tgid` exists (`tgid == tid`: any
    /// thread with that id).
    fn thread_alive(&self, tgid: u32, tid: u32) -> bool;
    /// Process `pid`'s thread ids (empty: gone).
    fn task_ids(&self, pid: u32) -> Vec<u32>;
    /// The process a thread belongs to (None: gone).
    fn tgid_of(&self, tid: u32) -> Option<u32>;
    /// A live process's parent (None: gone).
    fn parent_of(&self, pid: u32) -> Option<u32>;
    /// Process `tgid`'s executable (None: gone).
    fn exe(&self, tgid: u32) -> Option<PathBuf>;
    /// Process `tgid`'s layout now (None: gone), for its stacks' names.
    fn process_layout(&self, tgid: u32) -> Option<ProcessLayout>;
    /// What of process `tgid`'s layout a change of its code would move,
    /// read far more cheaply than the layout (None: gone or unknown, and
    /// then the layout is read).
    fn code_footprint(&self, _tgid: u32) -> Option<CodeFootprint> {
        None
    }
    /// The processes descended from `pid` now (an attached process's).
    fn descendants(&self, pid: u32) -> Vec<u32>;
    /// A block device's kernel name from its dev_t ("MAJOR:MINOR" when
    /// sysfs has none).
    fn device_name(&self, dev: u32) -> String;
    /// The running kernel's release and BTF.
    fn kernel_facts(&self) -> KernelFacts;
}

/// The running kernel's facts as the seam reads them, for checks made
/// before any probe loads (`storprof doctor`).
pub fn running_kernel_facts() -> KernelFacts {
    procfs::kernel_facts()
}

/// What the session says of the running kernel and its machine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelFacts {
    /// `/proc/sys/kernel/osrelease` (empty: unreadable).
    pub release: String,
    /// Whether `/sys/kernel/btf/vmlinux` exists.
    pub btf: bool,
    /// `/proc/sys/kernel/hostname` (empty: unreadable).
    pub host_name: String,
    /// The CPUs the recorder may run on (at least 1).
    pub num_cpus: u32,
}

/// A process's memory layout as the kernel shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessLayout {
    /// The text of `/proc/PID/maps`.
    pub maps: String,
    /// The text of its perf map (`/tmp/perf-PID.map`, written by JITs and
    /// CPython's `-X perf`), when it has one.
    pub perf_map: Option<String>,
}

/// The size of a process's code: equal footprints, read at two times,
/// mean that no executable mapping came or went in between, bar one
/// replaced by another of the same size (a sample in it still has the
/// layout read again, as in code never seen).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodeFootprint {
    /// Its executable, not writable mappings in KiB: `VmExe` + `VmLib` of
    /// `/proc/PID/status`, the kernel's count of them.
    pub exec_kib: u64,
    /// The length of its perf map (JITs and CPython's `-X perf` append to it).
    pub perf_map_bytes: Option<u64>,
}

impl Kernel for ProbeSet {
    fn status(&self) -> &[ProbeStatus] {
        &self.status
    }
    fn offcpu_dwarf(&self) -> bool {
        ProbeSet::offcpu_dwarf(self)
    }
    fn offcpu_quantum_us(&self) -> u32 {
        ProbeSet::offcpu_quantum_us(self)
    }
    fn wait_fd(&self) -> Option<RawFd> {
        use std::os::fd::{AsFd, AsRawFd};
        self.proc_events_fd().map(|fd| fd.as_fd().as_raw_fd())
    }
    fn set_root_tgid(&mut self, tgid: u32) -> Result<(), ProbeError> {
        ProbeSet::set_root_tgid(self, tgid)
    }
    fn trace_tgid(&mut self, tgid: u32) -> Result<(), ProbeError> {
        ProbeSet::trace_tgid(self, tgid)
    }
    fn traces(&self, tgid: u32) -> bool {
        ProbeSet::traces(self, tgid)
    }
    fn register_python(&mut self, tgid: u32, py: &PyProcess) -> Result<(), ProbeError> {
        ProbeSet::register_python(self, tgid, py)
    }
    fn python_registered(&self, tgid: u32) -> bool {
        ProbeSet::python_registered(self, tgid)
    }
    fn set_dwarf(&mut self, tgid: u32) -> Result<(), ProbeError> {
        ProbeSet::set_dwarf(self, tgid)
    }
    fn drain_proc_events(&mut self, f: &mut dyn FnMut(ProcEvent)) {
        ProbeSet::drain_proc_events(self, f)
    }
    fn drain_block_events(&mut self, f: &mut dyn FnMut(BlockEvent)) {
        ProbeSet::drain_block_events(self, f)
    }
    fn drain_user_stacks(&mut self, f: &mut dyn FnMut(UserStackEvent)) {
        ProbeSet::drain_user_stacks(self, f)
    }
    fn drain_python_offcpu(&mut self, f: &mut dyn FnMut(PyOffCpuSample)) {
        ProbeSet::drain_python_offcpu(self, f)
    }
    fn python_offcpu_lost(&self) -> (u64, u64) {
        ProbeSet::python_offcpu_lost(self)
    }
    fn thread_snapshot(&self, more_tids: &[u32]) -> Result<MapSnapshot, ProbeError> {
        ProbeSet::thread_snapshot(self, more_tids)
    }
    fn snapshot(&self, tids_of_interest: &[u32]) -> Result<MapSnapshot, ProbeError> {
        ProbeSet::snapshot(self, tids_of_interest)
    }
    fn wake_edges(&self) -> Result<Vec<(WakeKey, WakeAcc)>, ProbeError> {
        ProbeSet::wake_edges(self)
    }
    fn retire_threads(&mut self, tids: &BTreeSet<u32>) -> Result<RetiredThreads, ProbeError> {
        ProbeSet::retire_threads(self, tids)
    }
    fn stack(&self, id: i32) -> Vec<u64> {
        ProbeSet::stack(self, id)
    }
    fn kernel_symbol_names(&self, addrs: &[u64]) -> Option<Vec<Option<String>>> {
        ProbeSet::kernel_symbol_names(self, addrs)
    }
    fn lost_events(&self) -> BTreeMap<String, u64> {
        ProbeSet::lost_events(self)
    }
    fn missed_switch_ins(&self) -> u64 {
        ProbeSet::missed_switch_ins(self)
    }
    fn vmstat(&self) -> Option<super::aggregate::VmstatCounters> {
        super::procfs::vmstat()
    }
    fn host_cpu(&self) -> Option<super::aggregate::HostCpuTicks> {
        super::procfs::host_cpu()
    }
    fn lower_devices(&self, dev: u32) -> Vec<LowerDevice> {
        super::procfs::lower_devices(dev)
    }
    fn io_limits(&self, pid: u32) -> Vec<IoLimit> {
        super::cgroup_io::limits_of(pid)
    }
    fn thread_comm(&self, tgid: u32, tid: u32) -> Option<String> {
        procfs::thread_comm(tgid, tid)
    }
    fn thread_alive(&self, tgid: u32, tid: u32) -> bool {
        procfs::thread_alive(tgid, tid)
    }
    fn task_ids(&self, pid: u32) -> Vec<u32> {
        procfs::task_ids(pid)
    }
    fn tgid_of(&self, tid: u32) -> Option<u32> {
        procfs::tgid_of(tid)
    }
    fn parent_of(&self, pid: u32) -> Option<u32> {
        procfs::parent_of(pid)
    }
    fn exe(&self, tgid: u32) -> Option<PathBuf> {
        procfs::exe(tgid)
    }
    fn process_layout(&self, tgid: u32) -> Option<ProcessLayout> {
        procfs::process_layout(tgid)
    }
    fn code_footprint(&self, tgid: u32) -> Option<CodeFootprint> {
        procfs::code_footprint(tgid)
    }
    fn descendants(&self, pid: u32) -> Vec<u32> {
        procfs::descendants(pid)
    }
    fn device_name(&self, dev: u32) -> String {
        procfs::device_name(dev)
    }
    fn kernel_facts(&self) -> KernelFacts {
        procfs::kernel_facts()
    }
}
