//! A kernel side made of recorded events, for tests of the recorder that
//! run without root.
//!
//! Data flow: a test lists [`ReplayStep`]s (the events one drain of the
//! ring buffers would return, and the maps as they stand after them);
//! each `drain_proc_events` call, the first thing a recorder drain does,
//! moves to the next step, the other drains hand out that step's events,
//! and snapshots read that step's maps. What the recorder asks of the
//! kernel (traced pids, interpreters, DWARF marks) is kept for the test to
//! check.
use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, BTreeSet, VecDeque},
    os::fd::RawFd,
    path::PathBuf,
    rc::Rc,
};

use storprof_common::{BlockEvent, ProcEvent, PyOffCpuSample, PyProcess, WakeAcc, WakeKey};

use super::kernel::{CodeFootprint, Kernel, KernelFacts, ProcessLayout};
use crate::probes::{MapSnapshot, ProbeError, RetiredThreads, UserStackEvent};
use storprof_session::model::{LowerDevice, ProbeStatus};

/// One drain's worth of kernel output.
#[derive(Clone, Default)]
pub struct ReplayStep {
    pub proc_events: Vec<ProcEvent>,
    pub block_events: Vec<BlockEvent>,
    pub user_stacks: Vec<UserStackEvent>,
    pub python_offcpu: Vec<PyOffCpuSample>,
    /// The maps after this step (cumulative, as the kernel's are).
    pub maps: MapSnapshot,
    /// The wake-up edges after this step (cumulative).
    pub wake_edges: Vec<(WakeKey, WakeAcc)>,
    /// `/proc/vmstat` as a series tick after this step reads it (None:
    /// unreadable).
    pub vmstat: Option<super::aggregate::VmstatCounters>,
    /// `/proc/stat` as a series tick after this step reads it (None:
    /// unreadable).
    pub host_cpu: Option<super::aggregate::HostCpuTicks>,
}

impl ReplayStep {
    /// A step whose only output is `proc_events`.
    pub fn with_proc_events(proc_events: Vec<ProcEvent>) -> Self {
        Self {
            proc_events,
            ..Self::default()
        }
    }
}

/// The event of `parent` forking the process `child` at `ts`.
pub fn fork_event(parent: u32, child: u32, ts: u64) -> ProcEvent {
    ProcEvent {
        kind: storprof_common::proc_event::FORK,
        tgid: parent,
        tid: child,
        group_dead: 0,
        ts,
    }
}

/// A [`Kernel`] that replays [`ReplayStep`]s.
#[derive(Default)]
pub struct ReplayKernel {
    pub status: Vec<ProbeStatus>,
    /// Steps not yet reached.
    pub steps: VecDeque<ReplayStep>,
    /// The step the last drain reached (its maps answer snapshots).
    pub current: ReplayStep,
    /// Stack ids → instruction pointers (leaf first).
    pub stacks: BTreeMap<i32, Vec<u64>>,
    pub lost: BTreeMap<String, u64>,
    pub offcpu_dwarf: bool,
    pub offcpu_quantum_us: u32,
    pub python_offcpu_lost: (u64, u64),
    /// What the recorder asked for.
    pub root_tgid: u32,
    pub traced: BTreeSet<u32>,
    pub python: BTreeMap<u32, PyProcess>,
    pub dwarf: BTreeSet<u32>,
    /// How many drains reached a step.
    pub drains: usize,
    /// Threads the recorder retired.
    pub retired: BTreeSet<u32>,
    /// dev_t → the devices it sits on (absent: none).
    pub lower_devices: BTreeMap<u32, Vec<LowerDevice>>,
    /// The replayed machine's processes: none, unless a test gives them.
    pub host: ReplayHost,
    /// Code footprints a test gives (absent: unknown, so every look at a
    /// layout reads it), shared so that the test can change them while
    /// the recorder holds the kernel.
    pub footprints: Rc<RefCell<BTreeMap<u32, CodeFootprint>>>,
    /// How many times the recorder read a layout (shared, as above).
    pub layout_reads: Rc<Cell<usize>>,
}

/// The processes and devices a replay's machine has (by default none: a
/// replay never reads the test machine's /proc).
#[derive(Clone, Debug, Default)]
pub struct ReplayHost {
    /// tid → (tgid, name) of the threads alive.
    pub threads: BTreeMap<u32, (u32, String)>,
    /// pid → parent.
    pub parents: BTreeMap<u32, u32>,
    /// pid → executable.
    pub exes: BTreeMap<u32, PathBuf>,
    /// dev_t → kernel name.
    pub device_names: BTreeMap<u32, String>,
    /// pid → its memory layout (absent: none, its stacks unnamed).
    pub layouts: BTreeMap<u32, ProcessLayout>,
    pub kernel: KernelFacts,
}

impl ReplayKernel {
    /// A replay with every family attached and `steps` to hand out.
    pub fn new(families: &[&str], steps: impl IntoIterator<Item = ReplayStep>) -> Self {
        Self {
            status: families
                .iter()
                .map(|name| ProbeStatus {
                    name: (*name).to_string(),
                    attached: true,
                    note: "replay".to_string(),
                })
                .collect(),
            steps: steps.into_iter().collect(),
            ..Self::default()
        }
    }

    /// True when every step was handed out.
    pub fn finished(&self) -> bool {
        self.steps.is_empty()
    }
}

impl Kernel for ReplayKernel {
    fn status(&self) -> &[ProbeStatus] {
        &self.status
    }
    fn offcpu_dwarf(&self) -> bool {
        self.offcpu_dwarf
    }
    fn offcpu_quantum_us(&self) -> u32 {
        self.offcpu_quantum_us
    }
    fn wait_fd(&self) -> Option<RawFd> {
        None
    }
    fn set_root_tgid(&mut self, tgid: u32) -> Result<(), ProbeError> {
        self.root_tgid = tgid;
        Ok(())
    }
    fn trace_tgid(&mut self, tgid: u32) -> Result<(), ProbeError> {
        self.traced.insert(tgid);
        Ok(())
    }
    fn traces(&self, tgid: u32) -> bool {
        self.traced.contains(&tgid)
    }
    fn register_python(&mut self, tgid: u32, py: &PyProcess) -> Result<(), ProbeError> {
        self.python.insert(tgid, *py);
        Ok(())
    }
    fn python_registered(&self, tgid: u32) -> bool {
        self.python.contains_key(&tgid)
    }
    fn set_dwarf(&mut self, tgid: u32) -> Result<(), ProbeError> {
        self.dwarf.insert(tgid);
        Ok(())
    }
    fn drain_proc_events(&mut self, f: &mut dyn FnMut(ProcEvent)) {
        let Some(step) = self.steps.pop_front() else {
            return;
        };
        self.drains += 1;
        self.current = step;
        for event in std::mem::take(&mut self.current.proc_events) {
            f(event);
        }
    }
    fn drain_block_events(&mut self, f: &mut dyn FnMut(BlockEvent)) {
        for event in std::mem::take(&mut self.current.block_events) {
            f(event);
        }
    }
    fn drain_user_stacks(&mut self, f: &mut dyn FnMut(UserStackEvent)) {
        for event in std::mem::take(&mut self.current.user_stacks) {
            f(event);
        }
    }
    fn drain_python_offcpu(&mut self, f: &mut dyn FnMut(PyOffCpuSample)) {
        for sample in std::mem::take(&mut self.current.python_offcpu) {
            f(sample);
        }
    }
    fn python_offcpu_lost(&self) -> (u64, u64) {
        self.python_offcpu_lost
    }
    fn thread_snapshot(&self, _more_tids: &[u32]) -> Result<MapSnapshot, ProbeError> {
        Ok(MapSnapshot {
            threads: self.current.maps.threads.clone(),
            syscalls: self.current.maps.syscalls.clone(),
            oncpu_start: self.current.maps.oncpu_start.clone(),
            slots_read_ns: self.current.maps.slots_read_ns,
            ..MapSnapshot::default()
        })
    }
    fn snapshot(&self, _tids_of_interest: &[u32]) -> Result<MapSnapshot, ProbeError> {
        Ok(self.current.maps.clone())
    }
    fn wake_edges(&self) -> Result<Vec<(WakeKey, WakeAcc)>, ProbeError> {
        Ok(self.current.wake_edges.clone())
    }
    fn retire_threads(&mut self, tids: &BTreeSet<u32>) -> Result<RetiredThreads, ProbeError> {
        // As the kernel does: the entries leave the current maps (later
        // steps list what the kernel would hold then).
        let maps = &mut self.current.maps;
        let mut out = RetiredThreads::default();
        let (gone, kept) = std::mem::take(&mut maps.threads)
            .into_iter()
            .partition(|t| tids.contains(&t.tid));
        (out.threads, maps.threads) = (gone, kept);
        let (gone, kept) = std::mem::take(&mut maps.syscalls)
            .into_iter()
            .partition(|(k, _)| tids.contains(&k.tid));
        (out.syscalls, maps.syscalls) = (gone, kept);
        let (gone, kept) = std::mem::take(&mut maps.samples)
            .into_iter()
            .partition(|(k, _)| tids.contains(&k.tid));
        (out.samples, maps.samples) = (gone, kept);
        let (gone, kept) = std::mem::take(&mut maps.offcpu)
            .into_iter()
            .partition(|(k, _)| tids.contains(&k.tid));
        (out.offcpu, maps.offcpu) = (gone, kept);
        let (gone, kept) = std::mem::take(&mut self.current.wake_edges)
            .into_iter()
            .partition(|(k, _)| tids.contains(&k.waker_tid) || tids.contains(&k.wakee_tid));
        (out.wake_edges, self.current.wake_edges) = (gone, kept);
        self.retired.extend(tids);
        Ok(out)
    }
    fn stack(&self, id: i32) -> Vec<u64> {
        self.stacks.get(&id).cloned().unwrap_or_default()
    }
    fn lost_events(&self) -> BTreeMap<String, u64> {
        self.lost.clone()
    }
    fn vmstat(&self) -> Option<super::aggregate::VmstatCounters> {
        self.current.vmstat
    }
    fn host_cpu(&self) -> Option<super::aggregate::HostCpuTicks> {
        self.current.host_cpu
    }
    fn lower_devices(&self, dev: u32) -> Vec<LowerDevice> {
        self.lower_devices.get(&dev).cloned().unwrap_or_default()
    }
    fn thread_comm(&self, tgid: u32, tid: u32) -> Option<String> {
        let (owner, comm) = self.host.threads.get(&tid)?;
        (*owner == tgid || tgid == tid).then(|| comm.clone())
    }
    fn thread_alive(&self, tgid: u32, tid: u32) -> bool {
        self.thread_comm(tgid, tid).is_some()
    }
    fn task_ids(&self, pid: u32) -> Vec<u32> {
        self.host
            .threads
            .iter()
            .filter(|(_, (tgid, _))| *tgid == pid)
            .map(|(tid, _)| *tid)
            .collect()
    }
    fn tgid_of(&self, tid: u32) -> Option<u32> {
        self.host.threads.get(&tid).map(|(tgid, _)| *tgid)
    }
    fn parent_of(&self, pid: u32) -> Option<u32> {
        self.host.parents.get(&pid).copied()
    }
    fn exe(&self, tgid: u32) -> Option<PathBuf> {
        self.host.exes.get(&tgid).cloned()
    }
    fn process_layout(&self, tgid: u32) -> Option<ProcessLayout> {
        self.layout_reads.set(self.layout_reads.get() + 1);
        self.host.layouts.get(&tgid).cloned()
    }
    fn code_footprint(&self, tgid: u32) -> Option<CodeFootprint> {
        self.footprints.borrow().get(&tgid).copied()
    }
    fn descendants(&self, pid: u32) -> Vec<u32> {
        // Breadth first over the replayed parents, as /proc's children lists.
        let mut out: Vec<u32> = Vec::new();
        let mut next = vec![pid];
        while let Some(p) = next.pop() {
            for (&child, _) in self
                .host
                .parents
                .iter()
                .filter(|(c, parent)| **parent == p && **c != pid)
            {
                if !out.contains(&child) {
                    out.push(child);
                    next.push(child);
                }
            }
        }
        out
    }
    fn device_name(&self, dev: u32) -> String {
        self.host
            .device_names
            .get(&dev)
            .cloned()
            .unwrap_or_else(|| super::aggregate::dev_fallback_name(dev))
    }
    fn kernel_facts(&self) -> KernelFacts {
        self.host.kernel.clone()
    }
}
