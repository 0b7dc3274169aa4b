//! The live state of one recording and what each drain does with it.
//!
//! Data flow: [`Recorder::drain`] takes the process events (forks, execs:
//! the traced set and the symbolizer's view of each process follow them),
//! the block completions, and the user-stack samples (unwound while their
//! process is alive); [`Recorder::tick_series`] reads the per-thread maps
//! and the wake-up edges once a second for the time series, then retires
//! threads that exited: their entries move from the kernel maps into
//! [`Retired`](super::retired::Retired), so the maps hold live threads only and never fill up
//! under churn. Snapshots for the session merge the two. Everything comes
//! through the [`Kernel`] seam.
use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    time::{Duration, Instant},
};

use storprof_common::{ProcEvent, WakeAcc, WakeKey, proc_event};

use super::{
    RecordError, UnwindMode, aggregate,
    dwarf_samples::DwarfSamples,
    kernel::{CodeFootprint, Kernel},
    procfs, python,
    retired::Retired,
    select,
};
use crate::probes::{self, MapSnapshot};
use storprof_session::model;
use storprof_stacks::{
    symbolize::Symbolizer,
    unwind::{DwarfUnwinder, StackSample, UnwindEnd},
};

/// Live state of one recording.
pub(super) struct Recorder {
    pub(super) probes: Box<dyn Kernel>,
    pub(super) symbolizer: Symbolizer,
    /// Every process traced at some point of the recording.
    pub(super) tracked: BTreeSet<u32>,
    /// The traced processes not seen to exit: what a tick reads and what
    /// an interrupted run may stop. A pid leaves at its process's exit, so
    /// a pid reused later by a process we do not trace is never touched.
    pub(super) live: BTreeSet<u32>,
    /// Block completions so far, aggregated as they are drained.
    pub(super) blocks: aggregate::BlockAggregate,
    /// Processes that exec'ed recently: their layout is re-read often
    /// until the dynamic loader is done.
    pub(super) fresh: BTreeMap<u32, Instant>,
    /// When the layout of a fresh process (or one a sample found stale)
    /// was last read.
    pub(super) layout_read: std::collections::HashMap<u32, Instant>,
    /// The code footprint of each process at its last layout read.
    pub(super) footprints: std::collections::HashMap<u32, CodeFootprint>,
    pub(super) series: aggregate::SeriesBuilder,
    /// `/proc/vmstat` at the same ticks as `series`.
    pub(super) vmstat: aggregate::VmstatBuilder,
    /// `/proc/stat` at the same ticks.
    pub(super) host_cpu: aggregate::HostCpuBuilder,
    /// Threads whose exit was seen, and when: retired once nothing can
    /// still write their entries.
    pub(super) exited: BTreeMap<u32, Instant>,
    /// What the maps held for retired threads.
    pub(super) retired: Retired,
    /// How long after its exit event a thread is retired (`RETIRE_AFTER`).
    pub(super) retire_after: Duration,
    /// Ticks so far (the sweep for exits that sent no event runs on some).
    ticks: u64,
    /// The wake-up edges at the last series tick, and per edge the buckets
    /// in which it grew.
    pub(super) wake_last: aggregate::WakeCumulative,
    pub(super) wake_series: aggregate::WakeSeries,
    /// Process tree: child tgid → parent tgid, from fork events.
    pub(super) parents: BTreeMap<u32, u32>,
    pub(super) start_mono: u64,
    /// storprof's own CPU seconds when the recording loop ended.
    pub(super) cpu_when_recording_ended: Option<f64>,
    /// DWARF mode only: the unwinder and what it produced.
    pub(super) unwinder: Option<DwarfUnwinder>,
    pub(super) dwarf: DwarfSamples,
    /// DWARF mode only: off-CPU time of blocked syscalls (ns per key),
    /// with stacks unwound the same way.
    pub(super) dwarf_offcpu: DwarfSamples,
    /// DWARF mode only: interpreters of traced processes, Python frames.
    pub(super) python: storprof_stacks::python::PythonResolver,
    pub(super) python_offcpu: python::PythonStacks,
    /// Frame-pointer mode: CPU samples of Python processes with their Python frames.
    pub(super) python_fp: python::PythonStacks,
    /// `--netns`: the namespace's processes, rescanned from the loop.
    pub(super) selector: Option<select::NetnsSelector>,
    /// The `--unwind` option.
    pub(super) unwind_mode: UnwindMode,
    /// `--unwind auto`: the mode chosen per process, and per executable.
    pub(super) unwind_decisions: BTreeMap<u32, model::UnwindDecision>,
    /// Forked children past `LISTED_DECISIONS` that inherited their
    /// parent's mode without an entry.
    pub(super) unlisted_inherited_decisions: u64,
    pub(super) exe_choices:
        std::collections::HashMap<PathBuf, storprof_stacks::unwind::frame_pointers::UnwindChoice>,
    /// Where every thread was when storprof first asked the command to
    /// stop (duration, early verdict, Ctrl-C): a hung job's waits as they
    /// were, before its signal handlers and tear-down woke them.
    pub(super) stop_mark: Option<StopMark>,
    /// Block-I/O limits of the traced processes' cgroups, by (cgroup,
    /// device), with the processes seen in each.
    pub(super) io_limits: BTreeMap<(String, String), model::IoLimit>,
    /// Ticks each process's cgroup was read at: a few, since a process
    /// moves into its cgroup as it starts (`echo $$ > cgroup.procs`).
    pub(super) cgroup_reads: std::collections::HashMap<u32, u8>,
}

/// The threads' off-CPU slots at the stop request, and when it was.
pub(super) struct StopMark {
    /// The probes' clock (CLOCK_MONOTONIC, ns).
    pub(super) at_mono: u64,
    /// Those of threads alive at the mark.
    pub(super) slots: BTreeMap<u32, (u64, storprof_common::OffCpuStart)>,
}

impl Recorder {
    /// A recorder over `probes`, started at `start_mono` (the probes' clock).
    pub(super) fn new(
        probes: Box<dyn Kernel>,
        unwind_mode: UnwindMode,
        selector: Option<select::NetnsSelector>,
        start_mono: u64,
    ) -> Self {
        let dwarf_mode = unwind_mode != UnwindMode::Fp;
        Self {
            probes,
            symbolizer: Symbolizer::new(),
            tracked: BTreeSet::new(),
            live: BTreeSet::new(),
            blocks: aggregate::BlockAggregate::new(start_mono, aggregate::BUCKET_NS),
            fresh: BTreeMap::new(),
            layout_read: std::collections::HashMap::new(),
            footprints: std::collections::HashMap::new(),
            series: aggregate::SeriesBuilder::default(),
            vmstat: aggregate::VmstatBuilder::default(),
            host_cpu: aggregate::HostCpuBuilder::new(procfs::clock_ticks_per_s()),
            exited: BTreeMap::new(),
            retired: Retired::default(),
            retire_after: RETIRE_AFTER,
            ticks: 0,
            wake_last: aggregate::WakeCumulative::new(),
            wake_series: aggregate::WakeSeries::new(),
            parents: BTreeMap::new(),
            start_mono,
            cpu_when_recording_ended: None,
            unwinder: dwarf_mode.then(DwarfUnwinder::new),
            dwarf: DwarfSamples::default(),
            dwarf_offcpu: DwarfSamples::default(),
            python: storprof_stacks::python::PythonResolver::new(),
            python_offcpu: python::PythonStacks::default(),
            python_fp: python::PythonStacks::default(),
            selector,
            unwind_mode,
            unwind_decisions: BTreeMap::new(),
            unlisted_inherited_decisions: 0,
            exe_choices: std::collections::HashMap::new(),
            stop_mark: None,
            io_limits: BTreeMap::new(),
            cgroup_reads: std::collections::HashMap::new(),
        }
    }

    /// Reads the block-I/O limits of the cgroups of `live` processes in
    /// their first ticks.
    fn read_io_limits(&mut self, live: &[u32]) {
        const READS: u8 = 3;
        self.cgroup_reads.retain(|pid, _| live.contains(pid));
        for &pid in live {
            let reads = self.cgroup_reads.entry(pid).or_insert(0);
            if *reads >= READS {
                continue;
            }
            *reads += 1;
            for limit in self.probes.io_limits(pid) {
                let key = (limit.cgroup.clone(), limit.device.clone());
                let entry = self.io_limits.entry(key).or_insert(limit);
                if !entry.pids.contains(&pid) {
                    entry.pids.push(pid);
                }
            }
        }
    }

    /// Marks where every traced thread is, once, as storprof asks the
    /// command to stop; a failed read leaves no mark (the end's snapshot
    /// then stands for it).
    pub(super) fn mark_stop(&mut self) {
        if self.stop_mark.is_some() {
            return;
        }
        match self.probes.thread_snapshot(&[]) {
            Ok(snapshot) => {
                // Alive now: by the time the session is built, the stopped
                // command's threads are gone.
                let slots = snapshot
                    .oncpu_start
                    .into_iter()
                    .filter(|(tid, (_, off))| self.probes.thread_alive(off.tgid, *tid))
                    .collect();
                self.stop_mark = Some(StopMark {
                    at_mono: snapshot.slots_read_ns,
                    slots,
                });
            }
            Err(err) => log::warn!("reading the threads at the stop request failed: {err}"),
        }
    }

    /// Notes a process that the probes trace from now on.
    pub(super) fn track(&mut self, pid: u32) {
        self.tracked.insert(pid);
        self.live.insert(pid);
    }

    /// Traces the processes that entered the selected namespace since the last scan.
    pub(super) fn add_selected(&mut self) -> Result<(), RecordError> {
        let Some(selector) = self.selector.as_mut() else {
            return Ok(());
        };
        for pid in selector.scan() {
            self.probes.trace_tgid(pid)?;
            self.track(pid);
            self.read_layout(pid);
            self.fresh.insert(pid, Instant::now());
            self.decide_unwind(pid);
        }
        Ok(())
    }

    fn handle_proc_event(&mut self, event: ProcEvent) {
        match event.kind {
            proc_event::FORK => {
                let child = event.tid;
                let child_tgid = self.probes.tgid_of(child).unwrap_or(child);
                if child_tgid == child {
                    self.parents.insert(child, event.tgid);
                    self.track(child);
                    self.inherit_layout(child, event.tgid);
                    self.inherit_unwind(child, event.tgid);
                    self.inherit_python(child, event.tgid);
                }
            }
            proc_event::EXIT => {
                self.exited.insert(event.tid, Instant::now());
                if event.group_dead != 0 {
                    self.live.remove(&event.tgid);
                }
                if event.tid != event.tgid && self.parents.remove(&event.tid).is_some() {
                    // A thread gone before its fork event was read looked
                    // like a process then (no /proc entry told its tgid).
                    self.tracked.remove(&event.tid);
                    self.live.remove(&event.tid);
                    self.symbolizer.forget_process(event.tid);
                    self.footprints.remove(&event.tid);
                    self.unwind_decisions.remove(&event.tid);
                    self.python.forget(event.tid);
                }
            }
            proc_event::EXEC => {
                self.track(event.tgid);
                if let Some(unwinder) = self.unwinder.as_mut() {
                    unwinder.forget(event.tgid);
                }
                self.python.forget(event.tgid);
                self.unwind_decisions.remove(&event.tgid);
                self.decide_unwind(event.tgid);
                self.read_layout(event.tgid);
                self.fresh.insert(event.tgid, Instant::now());
            }
            _ => {}
        }
    }

    pub(super) fn drain(&mut self) {
        let mut events = Vec::new();
        self.probes.drain_proc_events(&mut |e| events.push(e));
        for e in events {
            self.handle_proc_event(e);
        }
        let blocks = &mut self.blocks;
        self.probes.drain_block_events(&mut |e| blocks.add(&e));
        self.fresh
            .retain(|_, t| t.elapsed() < Duration::from_secs(2));
        // Entries only matter while they can still hold a re-read back.
        self.layout_read
            .retain(|_, t| t.elapsed() < Duration::from_secs(1));
        self.reread_due_layouts();
        // DWARF mode: every sample; frame-pointer mode: Python processes' samples.
        let mut stacks = Vec::new();
        self.probes.drain_user_stacks(&mut |e| stacks.push(e));
        for event in stacks {
            self.unwind_sample(event);
        }
        self.drain_python_offcpu();
    }

    /// Unwinds a sample of `tgid` with its last layout read.
    fn unwind_with_layout(
        &mut self,
        tgid: u32,
        sample: &StackSample,
    ) -> storprof_stacks::unwind::Unwound {
        let Some(unwinder) = self.unwinder.as_mut() else {
            return storprof_stacks::unwind::Unwound {
                ips: Vec::new(),
                end: UnwindEnd::Early,
            };
        };
        let layout = self.symbolizer.layout(tgid).unwrap_or_default();
        let symbolizer = &self.symbolizer;
        unwinder.unwind_with(tgid, layout, sample, &|addr| {
            symbolizer.is_python_trampoline(tgid, addr)
        })
    }

    /// Unwinds one DWARF-mode sample with the process's current layout.
    fn unwind_sample(&mut self, event: probes::UserStackEvent) {
        let h = event.header;
        // Auto mode: frame-pointer processes send Python frames only.
        let window = h.len > 0 || self.is_dwarf_process(h.tgid);
        if self.unwinder.is_none() || !window {
            self.python_fp_sample(event);
            return;
        }
        let sample = StackSample {
            ip: h.ip,
            sp: h.sp,
            bp: h.bp,
            stack: event.stack,
        };
        // A sample in code the layout does not know yet (a library loaded
        // since the last read) has the layout read again, at most every
        // `ON_DEMAND_REREAD`: before unwinding when the sampled ip is
        // unknown, after it when the walk stopped at an unknown caller.
        let unknown_ip =
            !self.symbolizer.knows(h.tgid) || (h.ip != 0 && !self.symbolizer.covers(h.tgid, h.ip));
        if unknown_ip {
            self.reread_layout_on_demand(h.tgid);
        }
        let mut unwound = self.unwind_with_layout(h.tgid, &sample);
        if unwound.end == UnwindEnd::Early
            && unwound
                .ips
                .last()
                .is_some_and(|&ip| !self.symbolizer.covers(h.tgid, ip))
            && self.reread_layout_on_demand(h.tgid)
        {
            unwound = self.unwind_with_layout(h.tgid, &sample);
        }
        let python = self.resolve_python(h.tgid, h.py_status, &event.python);
        if h.blocked_ns != 0 {
            // A blocked syscall's stack, copied at its exit.
            self.dwarf_offcpu.add(&h, unwound, python, h.blocked_ns);
        } else {
            self.dwarf.add(&h, unwound, python, 1);
        }
    }

    /// On-CPU time of slices in progress at `now` (not yet accounted),
    /// counted up to when the slots were read at the latest: a thread seen
    /// on a CPU then may have gone to sleep before `now`, and time counted
    /// here that its switch-out does not confirm would stay in the series.
    pub(super) fn running_ns(snapshot: &MapSnapshot, now: u64) -> BTreeMap<u32, u64> {
        let seen = match snapshot.slots_read_ns {
            0 => now,
            read => now.min(read),
        };
        snapshot
            .oncpu_start
            .iter()
            .filter(|(_, (on, off))| *on != 0 && off.ts == 0 && seen > *on)
            .map(|(&tid, (on, _))| (tid, seen - on))
            .collect()
    }

    fn known_tids(snapshot: &MapSnapshot) -> Vec<u32> {
        let mut tids: BTreeSet<u32> = snapshot.threads.iter().map(|t| t.tid).collect();
        tids.extend(snapshot.syscalls.iter().map(|(k, _)| k.tid));
        tids.extend(snapshot.samples.iter().map(|(k, _)| k.tid));
        tids.into_iter().collect()
    }

    /// Snapshot with the on-CPU slots of every known thread, retired
    /// threads included.
    pub(super) fn full_snapshot(&self) -> Result<MapSnapshot, RecordError> {
        let first = self.probes.snapshot(&[])?;
        let tids = Self::known_tids(&first);
        let live = self.probes.snapshot(&tids)?;
        Ok(self.retired.merged_with(live))
    }

    /// The wake-up edges summed so far, retired threads' included.
    pub(super) fn wake_edges(&self) -> Result<Vec<(WakeKey, WakeAcc)>, RecordError> {
        let live = self.probes.wake_edges()?;
        Ok(aggregate::merge_wake_edges(
            self.retired.wake_edges.iter().map(|(k, v)| (*k, *v)),
            live,
        ))
    }

    /// Moves the entries of threads that exited at least `RETIRE_AFTER`
    /// ago out of the kernel maps. Runs after a tick's snapshots, which
    /// hold their final counts. Every `EXIT_SWEEP_TICKS` ticks, threads of
    /// `seen` whose /proc entry is gone count as exited too (an exit event
    /// lost to a full ring).
    fn retire_exited(&mut self, seen: &[u32]) -> Result<(), RecordError> {
        self.ticks += 1;
        if self.ticks.is_multiple_of(EXIT_SWEEP_TICKS) {
            return_freed_memory();
            let now = Instant::now();
            for &tid in seen {
                if !self.exited.contains_key(&tid) && !self.probes.thread_alive(tid, tid) {
                    self.exited.insert(tid, now);
                }
            }
        }
        let due: BTreeSet<u32> = self
            .exited
            .iter()
            .filter(|(_, t)| t.elapsed() >= self.retire_after)
            .map(|(&tid, _)| tid)
            .collect();
        if due.is_empty() {
            return Ok(());
        }
        let moved = self.probes.retire_threads(&due)?;
        self.tracked.extend(moved.threads.iter().map(|t| t.tgid));
        let folded = self.retired.add(moved);
        for (&tid, &(group_tgid, group_tid)) in &folded {
            self.series.fold_thread(tid, group_tgid, group_tid);
        }
        aggregate::fold_wake_series(&mut self.wake_series, &folded);
        self.exited.retain(|tid, _| !due.contains(tid));
        Ok(())
    }

    /// The baseline of the time series: the first tick closes bucket 0.
    pub(super) fn start_series(&mut self) {
        self.series.push(aggregate::ThreadCumulative::new());
        self.vmstat.push(self.probes.vmstat());
        self.host_cpu.push(self.probes.host_cpu());
    }

    pub(super) fn tick_series(&mut self) -> Result<(), RecordError> {
        // An exit whose event was lost to a full ring leaves here.
        let probes = &self.probes;
        self.live.retain(|&p| probes.thread_alive(p, p));
        let live: Vec<u32> = self.live.iter().copied().collect();
        // Threads running since before their first switch-out are in no
        // map yet: their tids come from /proc.
        let tasks: Vec<u32> = live.iter().flat_map(|&p| self.probes.task_ids(p)).collect();
        let snapshot = self.probes.thread_snapshot(&tasks)?;
        // The edges right after the threads: a wake-up between the two
        // reads lands in different buckets in each.
        let edges = self.probes.wake_edges()?;
        let running = Self::running_ns(&snapshot, procfs::monotonic_ns());
        self.series.push(aggregate::thread_cumulative(
            &snapshot.threads,
            &snapshot.syscalls,
            &running,
        ));
        self.vmstat.push(self.probes.vmstat());
        self.host_cpu.push(self.probes.host_cpu());
        // Live edges only: a retired edge's last growth is in an earlier
        // bucket, and one that comes back (a reused tid) counts from zero.
        let wakes = aggregate::wake_cumulative(&edges);
        let bucket = self.series.buckets().saturating_sub(1);
        aggregate::add_wake_bucket(&mut self.wake_series, &self.wake_last, &wakes, bucket);
        self.wake_last = wakes;
        let seen: Vec<u32> = snapshot.threads.iter().map(|t| t.tid).collect();
        self.retire_exited(&seen)?;
        self.read_io_limits(&live);
        // DWARF processes' layouts are re-read when their samples need it.
        for tgid in live {
            if !self.is_dwarf_process(tgid) {
                self.read_layout(tgid);
                self.detect_python(tgid);
            }
        }
        Ok(())
    }
}

/// Gives the pages of freed heap memory back to the kernel. Ticks, live
/// updates and checkpoints build and drop snapshots of the maps (tens of
/// megabytes under churn) while small long-lived entries are added between
/// them, so glibc's heap fragments and the process's RSS grew at twice its
/// live heap's rate.
pub(super) fn return_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free chunks of the allocator's
    // arenas; it is safe to call at any time from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How long after its exit a thread's entries are moved out of the maps:
/// its last context switch lands microseconds after the exit event, and
/// the tick between takes the snapshot with its final counts.
const RETIRE_AFTER: Duration = Duration::from_secs(1);
/// Every this many ticks, threads in the maps without a /proc entry are
/// taken as exited.
const EXIT_SWEEP_TICKS: u64 = 10;
