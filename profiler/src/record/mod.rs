//! `storprof record`: attach the probes, run or attach to the workload,
//! drain and symbolize, and write the session directory.
//!
//! Data flow: [`record`] loads and attaches every probe family
//! (`probes::ProbeSet`), forks the command (it waits on a pipe), registers
//! its pid, lets it exec ([`launch`]); then loops: process events keep the
//! symbolizer's view of each traced process fresh, block completions are
//! collected, the per-thread maps are read every second for the time
//! series, and (DWARF mode) user-stack samples are unwound while their
//! process is alive: CPU samples, and blocked syscalls' stacks copied at
//! the syscall's exit, which become DWARF off-CPU stacks. When the command exits (or the duration ends, or SIGINT/SIGTERM), the
//! maps are read one last time, turned into the model by the pure functions
//! of [`aggregate`], symbolized, and written; dropping the probe set detaches
//! everything.
pub mod aggregate;
pub mod args;
pub mod launch;
pub mod python;
pub mod select;
mod unwind_choice;

use std::{
    collections::{BTreeMap, BTreeSet},
    os::fd::{AsFd, AsRawFd},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use storprof_common::{BlockEvent, ProcEvent, StackKey, proc_event};

use crate::{
    probes::{self, MapSnapshot, ProbeOptions, ProbeSet},
    session::model::{
        self, IoStats, PageCacheStats, SESSION_DIR_ENV, SESSION_FORMAT_VERSION, SessionInfo,
        TimeSeries,
    },
    symbolize::Symbolizer,
    unwind::{DwarfUnwinder, StackSample, UnwindEnd},
};

/// Options of one recording. Defaults are documented per field.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RecordOptions {
    /// Command to start and follow (with all its descendants). Empty: attach to `pids`.
    pub command: Vec<String>,
    /// Running processes to trace (with descendants forked after attach).
    pub pids: Vec<u32>,
    /// Trace every process of this network namespace (an `ip netns` name or
    /// an nsfs path), rescanned every [`select::RESCAN_INTERVAL`]. Default none.
    pub netns: Option<String>,
    /// Stop after this long. Default: until the command exits (or Ctrl-C).
    pub duration: Option<std::time::Duration>,
    /// CPU sampling frequency. Default 99 Hz.
    pub freq_hz: u64,
    /// Session directory to write. Default: `storprof-<timestamp>` in the cwd.
    pub output: PathBuf,
    /// Run the command as root even under sudo. Default false: run it as SUDO_UID/SUDO_GID.
    pub as_root: bool,
    /// Measure syscall latency (a `sys_enter` hook besides `sys_exit`).
    /// Default true; false halves the per-syscall cost but leaves
    /// `total_ns` and the latency histograms empty.
    pub syscall_latency: bool,
    /// How user stacks are unwound. Default `Auto` (per process: DWARF when
    /// its executable lacks frame pointers or it runs CPython, else frame pointers).
    pub unwind: UnwindMode,
    /// Bytes of user stack copied per sample in `Dwarf` mode. Default 16384.
    pub stack_bytes: u32,
    /// Off-CPU stacks of DWARF-unwound processes: time blocked in a
    /// syscall is sampled, one stack copy per this many µs of blocked time
    /// on average (shorter intervals are taken with probability
    /// `blocked / quantum` and weigh one quantum, longer ones are always
    /// taken; an unbiased estimate at a bounded cost). `Some(0)` takes
    /// every blocked syscall. Default `None`: one sampling period at
    /// `freq_hz` (10101 µs at 99 Hz), as dense as the CPU samples.
    pub offcpu_quantum_us: Option<u32>,
}

impl RecordOptions {
    /// The off-CPU sampling quantum in effect (µs).
    pub fn offcpu_quantum_us(&self) -> u32 {
        self.offcpu_quantum_us
            .unwrap_or_else(|| (1_000_000 / self.freq_hz.max(1)).min(u32::MAX as u64) as u32)
    }
}

/// How user stacks of CPU samples are unwound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum UnwindMode {
    /// Per process, decided at exec: `Dwarf` when the main executable lacks
    /// frame pointers (`unwind::frame_pointers`) or runs a CPython
    /// interpreter, `Fp` otherwise. Only DWARF processes pay for the
    /// stack copy.
    #[default]
    Auto,
    /// Frame pointers, walked by the kernel (cheap; stops at code built
    /// without frame pointers).
    Fp,
    /// A copy of the user registers and stack window per sample, unwound in
    /// user space from `.eh_frame`/`.debug_frame` (no frame pointers needed).
    Dwarf,
}

impl UnwindMode {
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Fp => "fp",
            Self::Dwarf => "dwarf",
        }
    }
}

impl Default for RecordOptions {
    fn default() -> Self {
        Self {
            command: Vec::new(),
            pids: Vec::new(),
            netns: None,
            duration: None,
            freq_hz: 99,
            output: PathBuf::from("storprof-session"),
            as_root: false,
            syscall_latency: true,
            unwind: UnwindMode::Auto,
            stack_bytes: storprof_common::DEFAULT_STACK_BYTES,
            offcpu_quantum_us: None,
        }
    }
}

/// What a finished recording produced.
#[derive(Clone, Debug)]
pub struct RecordOutcome {
    /// The session directory written.
    pub dir: PathBuf,
    /// The exit code `storprof record` should exit with (the command's status,
    /// 128+signal when it was killed, 0 when attached to pids).
    pub exit_code: i32,
}

/// Errors of a recording.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("storprof record needs root (it loads eBPF programs); run it with sudo")]
    NotRoot,
    #[error("not implemented yet")]
    NotImplemented,
    #[error("nothing to record: give a command after `--`, at least one --pid, or --netns")]
    NothingToRecord,
    #[error("command not found or not executable: {0}")]
    UnknownCommand(String),
    #[error("cannot start {command}: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no such process: {0}")]
    NoSuchPid(u32),
    #[error(transparent)]
    Select(#[from] select::SelectError),
    #[error(transparent)]
    Probes(#[from] probes::ProbeError),
    #[error("tracefs: {0}")]
    Tracefs(String),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Descendant processes of `pid` (from /proc/PID/task/*/children).
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut stack = vec![pid];
    while let Some(p) = stack.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !out.contains(&c) {
                    out.push(c);
                    stack.push(c);
                }
            }
        }
    }
    out
}

/// Tgid of a task, from /proc (None when gone).
/// The thread ids of process `pid` (empty when it is gone).
fn task_ids(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn tgid_of(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Parent pid of a live process (/proc/PID/stat field 4).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The comm (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Kernel name of a block device from its kernel-internal dev_t.
fn device_name(dev: u32) -> String {
    let (major, minor) = aggregate::dev_major_minor(dev);
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent"));
    uevent
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("DEVNAME="))
                .map(str::to_string)
        })
        .unwrap_or_else(|| format!("{major}:{minor}"))
}

/// Live state of one recording.
struct Recorder {
    probes: ProbeSet,
    symbolizer: Symbolizer,
    tracked: BTreeSet<u32>,
    block_events: Vec<BlockEvent>,
    /// Processes that exec'ed recently: their layout is re-read often
    /// until the dynamic loader is done.
    fresh: BTreeMap<u32, Instant>,
    /// When the layout of a fresh process (or one a sample found stale)
    /// was last read.
    layout_read: std::collections::HashMap<u32, Instant>,
    series: Vec<aggregate::ThreadCumulative>,
    /// The wake-up edges at the last series tick, and per edge the buckets
    /// in which it grew.
    wake_last: aggregate::WakeCumulative,
    wake_series: aggregate::WakeSeries,
    /// Process tree: child tgid → parent tgid, from fork events.
    parents: BTreeMap<u32, u32>,
    start_mono: u64,
    /// DWARF mode only: the unwinder and what it produced.
    unwinder: Option<DwarfUnwinder>,
    dwarf: DwarfSamples,
    /// DWARF mode only: off-CPU time of blocked syscalls (ns per key),
    /// with stacks unwound the same way.
    dwarf_offcpu: DwarfSamples,
    /// DWARF mode only: interpreters of traced processes, Python frames.
    python: crate::python::PythonResolver,
    python_offcpu: python::PythonStacks,
    /// Frame-pointer mode: CPU samples of Python processes with their Python frames.
    python_fp: python::PythonStacks,
    /// `--netns`: the namespace's processes, rescanned from the loop.
    selector: Option<select::NetnsSelector>,
    /// The `--unwind` option.
    unwind_mode: UnwindMode,
    /// `--unwind auto`: the mode chosen per process, and per executable.
    unwind_decisions: BTreeMap<u32, model::UnwindDecision>,
    exe_choices: std::collections::HashMap<PathBuf, crate::unwind::frame_pointers::UnwindChoice>,
}

/// On-CPU samples unwound in user space: counts per key whose `user_stack`
/// indexes `chains` (leaf-first instruction pointers, and the Python
/// frames of the sample).
#[derive(Default)]
struct DwarfSamples {
    chains: Vec<(Vec<u64>, python::PythonFrames)>,
    chain_ids: std::collections::HashMap<(Vec<u64>, python::PythonFrames), i32>,
    counts: BTreeMap<StackKey, u64>,
    /// The frame-pointer keys of the same samples (`--unwind auto` takes
    /// them out of the frame-pointer counts).
    fp_keys: BTreeMap<StackKey, u64>,
    /// (tgid, depth, stopped early) → samples.
    depths: BTreeMap<(u32, u32, bool), u64>,
    /// Events added (CPU samples, or blocked syscalls with their merged
    /// intervals counted in `intervals`).
    events: u64,
    intervals: u64,
}

impl DwarfSamples {
    /// Adds `value` (samples or ns) for one unwound event.
    fn add(
        &mut self,
        header: &storprof_common::UserStackHeader,
        unwound: crate::unwind::Unwound,
        python: python::PythonFrames,
        value: u64,
    ) {
        let depth = unwound.ips.len() as u32;
        let next_id = self.chains.len() as i32;
        let chain = (unwound.ips, python);
        let id = *self.chain_ids.entry(chain.clone()).or_insert(next_id);
        if id == next_id {
            self.chains.push(chain);
        }
        let fp_key = header.stack_key();
        let key = StackKey {
            user_stack: id,
            ..fp_key
        };
        *self.counts.entry(key).or_insert(0) += value;
        *self.fp_keys.entry(fp_key).or_insert(0) += value;
        *self
            .depths
            .entry((header.tgid, depth, unwound.end == UnwindEnd::Early))
            .or_insert(0) += 1;
        self.events += 1;
        self.intervals += u64::from(header.offcpu_intervals.max(1));
    }
}

impl Recorder {
    /// Traces the processes that entered the selected namespace since the last scan.
    fn add_selected(&mut self) -> Result<(), RecordError> {
        let Some(selector) = self.selector.as_mut() else {
            return Ok(());
        };
        for pid in selector.scan() {
            self.probes.trace_tgid(pid)?;
            self.tracked.insert(pid);
            self.symbolizer.snapshot_process(pid);
            self.fresh.insert(pid, Instant::now());
            self.decide_unwind(pid);
        }
        Ok(())
    }

    fn handle_proc_event(&mut self, event: ProcEvent) {
        match event.kind {
            proc_event::FORK => {
                let child = event.tid;
                let child_tgid = tgid_of(child).unwrap_or(child);
                if child_tgid == child {
                    self.parents.insert(child, event.tgid);
                    self.tracked.insert(child);
                    self.symbolizer.inherit(child, event.tgid);
                    self.symbolizer.snapshot_process(child);
                    self.inherit_unwind(child, event.tgid);
                    self.inherit_python(child, event.tgid);
                }
            }
            proc_event::EXEC => {
                self.tracked.insert(event.tgid);
                if let Some(unwinder) = self.unwinder.as_mut() {
                    unwinder.forget(event.tgid);
                }
                self.python.forget(event.tgid);
                self.unwind_decisions.remove(&event.tgid);
                self.decide_unwind(event.tgid);
                self.symbolizer.snapshot_process(event.tgid);
                self.fresh.insert(event.tgid, Instant::now());
            }
            _ => {}
        }
    }

    fn drain(&mut self) {
        let mut events = Vec::new();
        self.probes.drain_proc_events(|e| events.push(e));
        for e in events {
            self.handle_proc_event(e);
        }
        let mut blocks = Vec::new();
        self.probes.drain_block_events(|e| blocks.push(e));
        self.block_events.extend(blocks);
        self.fresh
            .retain(|_, t| t.elapsed() < Duration::from_secs(2));
        // Entries only matter while they can still hold a re-read back.
        self.layout_read
            .retain(|_, t| t.elapsed() < Duration::from_secs(1));
        // Fresh processes' layouts are re-read every `FRESH_REREAD` (a
        // large process's maps cost about a millisecond to read); a sample
        // in code mapped meanwhile asks for a read itself (`unwind_sample`).
        let due: Vec<u32> = self
            .fresh
            .keys()
            .copied()
            .filter(|tgid| {
                self.layout_read
                    .get(tgid)
                    .is_none_or(|t| t.elapsed() >= FRESH_REREAD)
            })
            .collect();
        for tgid in due {
            self.reread_layout(tgid);
            self.detect_python(tgid);
        }
        // DWARF mode: every sample; frame-pointer mode: Python processes' samples.
        let mut stacks = Vec::new();
        self.probes.drain_user_stacks(|e| stacks.push(e));
        for event in stacks {
            self.unwind_sample(event);
        }
        self.drain_python_offcpu();
    }

    /// Re-reads the layout of `tgid` and drops its unwinder modules (the
    /// loader may have mapped libraries; unwind tables stay cached per file).
    fn reread_layout(&mut self, tgid: u32) {
        self.symbolizer.snapshot_process(tgid);
        self.layout_read.insert(tgid, Instant::now());
        if let Some(unwinder) = self.unwinder.as_mut() {
            unwinder.forget(tgid);
        }
    }

    /// Re-reads the layout of `tgid` unless it was read in the last
    /// `ON_DEMAND_REREAD`; looks for an interpreter in what it maps now.
    /// Returns whether it was read.
    fn reread_layout_on_demand(&mut self, tgid: u32) -> bool {
        if self
            .layout_read
            .get(&tgid)
            .is_some_and(|t| t.elapsed() < ON_DEMAND_REREAD)
        {
            return false;
        }
        self.reread_layout(tgid);
        self.detect_python(tgid);
        true
    }

    /// Unwinds a sample of `tgid` with its last layout read.
    fn unwind_with_layout(&mut self, tgid: u32, sample: &StackSample) -> crate::unwind::Unwound {
        let Some(unwinder) = self.unwinder.as_mut() else {
            return crate::unwind::Unwound {
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

    /// On-CPU time of slices in progress at `now` (not yet accounted).
    fn running_ns(snapshot: &MapSnapshot, now: u64) -> BTreeMap<u32, u64> {
        snapshot
            .oncpu_start
            .iter()
            .filter(|(_, (on, off))| *on != 0 && off.ts == 0 && now > *on)
            .map(|(&tid, (on, _))| (tid, now - on))
            .collect()
    }

    fn known_tids(snapshot: &MapSnapshot) -> Vec<u32> {
        let mut tids: BTreeSet<u32> = snapshot.threads.iter().map(|t| t.tid).collect();
        tids.extend(snapshot.syscalls.iter().map(|(k, _)| k.tid));
        tids.extend(snapshot.samples.iter().map(|(k, _)| k.tid));
        tids.into_iter().collect()
    }

    /// Snapshot with the on-CPU slots of every known thread.
    fn full_snapshot(&self) -> Result<MapSnapshot, RecordError> {
        let first = self.probes.snapshot(&[])?;
        let tids = Self::known_tids(&first);
        Ok(self.probes.snapshot(&tids)?)
    }

    fn tick_series(&mut self) -> Result<(), RecordError> {
        let live: Vec<u32> = self
            .tracked
            .iter()
            .copied()
            .filter(|p| launch::alive(*p))
            .collect();
        // Threads running since before their first switch-out are in no
        // map yet: their tids come from /proc.
        let tasks: Vec<u32> = live.iter().flat_map(|&p| task_ids(p)).collect();
        let snapshot = self.probes.thread_snapshot(&tasks)?;
        let running = Self::running_ns(&snapshot, monotonic_ns());
        self.series.push(aggregate::thread_cumulative(
            &snapshot.threads,
            &snapshot.syscalls,
            &running,
        ));
        let wakes = aggregate::wake_cumulative(&self.probes.wake_edges()?);
        let bucket = u32::try_from(self.series.len().saturating_sub(2)).unwrap_or(u32::MAX);
        aggregate::add_wake_bucket(&mut self.wake_series, &self.wake_last, &wakes, bucket);
        self.wake_last = wakes;
        // DWARF processes' layouts are re-read when their samples need it.
        for tgid in live {
            if !self.is_dwarf_process(tgid) {
                self.symbolizer.snapshot_process(tgid);
                self.detect_python(tgid);
            }
        }
        Ok(())
    }
}

/// How often the layout of a process that exec'ed or forked in the last
/// two seconds is re-read.
const FRESH_REREAD: Duration = Duration::from_millis(100);
/// The shortest time between two reads of a process's layout asked for by
/// samples in unknown code.
const ON_DEMAND_REREAD: Duration = Duration::from_millis(20);

/// Why the recording loop ended.
struct Ending {
    reason: &'static str,
    exit_code: Option<i32>,
    exit_signal: Option<i32>,
}

/// Record one session. Blocks until the command exits, the duration ends or
/// SIGINT/SIGTERM arrives; the session is written in every case.
pub fn record(options: &RecordOptions) -> Result<RecordOutcome, RecordError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(RecordError::NotRoot);
    }
    if options.command.is_empty() && options.pids.is_empty() && options.netns.is_none() {
        return Err(RecordError::NothingToRecord);
    }
    let program = match options.command.first() {
        Some(name) => Some(
            launch::resolve_command(name)
                .ok_or_else(|| RecordError::UnknownCommand(name.clone()))?,
        ),
        None => None,
    };
    for &pid in &options.pids {
        if !launch::alive(pid) {
            return Err(RecordError::NoSuchPid(pid));
        }
    }
    let selector = options
        .netns
        .as_deref()
        .map(select::NetnsSelector::open)
        .transpose()?;
    let tracefs_line = probes::tracefs::ensure_mounted().map_err(RecordError::Tracefs)?;
    let dir = options.output.clone();
    std::fs::create_dir_all(&dir).map_err(|source| RecordError::Write {
        path: dir.clone(),
        source,
    })?;
    let dir_abs = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());

    // Auto mode copies stack windows too, for the processes it marks.
    let dwarf_mode = options.unwind != UnwindMode::Fp;
    let probe_options = ProbeOptions {
        freq_hz: options.freq_hz,
        syscall_latency: options.syscall_latency,
        stack_bytes: if dwarf_mode {
            options.stack_bytes.max(64)
        } else {
            0
        },
        unwind_per_process: options.unwind == UnwindMode::Auto,
        offcpu_quantum_us: options.offcpu_quantum_us(),
    };
    let mut probes = ProbeSet::load(&probe_options)?;
    probes.attach_all();
    for status in &probes.status {
        if !status.attached {
            log::warn!("probe {} disabled: {}", status.name, status.note);
        }
    }
    launch::install_signal_handlers();

    let start_unix = unix_ns();
    let start_mono = monotonic_ns();
    let mut recorder = Recorder {
        probes,
        symbolizer: Symbolizer::new(),
        tracked: BTreeSet::new(),
        block_events: Vec::new(),
        fresh: BTreeMap::new(),
        layout_read: std::collections::HashMap::new(),
        series: Vec::new(),
        wake_last: aggregate::WakeCumulative::new(),
        wake_series: aggregate::WakeSeries::new(),
        parents: BTreeMap::new(),
        start_mono,
        unwinder: dwarf_mode.then(DwarfUnwinder::new),
        dwarf: DwarfSamples::default(),
        dwarf_offcpu: DwarfSamples::default(),
        python: crate::python::PythonResolver::new(),
        python_offcpu: python::PythonStacks::default(),
        python_fp: python::PythonStacks::default(),
        selector,
        unwind_mode: options.unwind,
        unwind_decisions: BTreeMap::new(),
        exe_choices: std::collections::HashMap::new(),
    };
    recorder.add_selected()?;
    if let Some(selector) = &recorder.selector {
        eprintln!(
            "storprof: recording host {}: {} processes of {} now, newcomers within {} ms; \
             --duration or Ctrl-C ends it",
            selector.host_name(),
            selector.selected(),
            selector.describe(),
            select::RESCAN_INTERVAL.as_millis()
        );
    }

    // Attached pids and their existing descendants.
    for &pid in &options.pids {
        let mut all = vec![pid];
        all.extend(descendants(pid));
        for p in all {
            recorder.probes.trace_tgid(p)?;
            recorder.tracked.insert(p);
            recorder.symbolizer.snapshot_process(p);
            recorder.decide_unwind(p);
            recorder.detect_python(p);
        }
    }

    // The command: forked, registered, then released to exec.
    let mut child_pid: Option<i32> = None;
    if let Some(path) = &program {
        let credentials = if options.as_root {
            None
        } else {
            launch::sudo_credentials()
        };
        let env = [(SESSION_DIR_ENV, dir_abs.as_os_str())];
        let pending =
            launch::fork_command(path, &options.command, &env, credentials).map_err(|source| {
                RecordError::Spawn {
                    command: options.command.join(" "),
                    source,
                }
            })?;
        if let Err(err) = recorder.probes.set_root_tgid(pending.pid as u32) {
            pending.abort();
            return Err(err.into());
        }
        let pid = pending.start().map_err(|source| RecordError::Spawn {
            command: options.command.join(" "),
            source,
        })?;
        recorder.tracked.insert(pid as u32);
        // Its unwinding mode is decided at its EXEC event.
        recorder.symbolizer.snapshot_process(pid as u32);
        recorder.fresh.insert(pid as u32, Instant::now());
        child_pid = Some(pid);
    }
    recorder.series.push(aggregate::ThreadCumulative::new());

    let ending = run_loop(&mut recorder, options, child_pid)?;
    // Let the exiting tasks' last context switches land in the maps.
    std::thread::sleep(Duration::from_millis(30));
    recorder.drain();
    recorder.tick_series()?;
    let end_unix = unix_ns();
    let end_mono = monotonic_ns();

    write_session(
        &mut recorder,
        options,
        &dir,
        &ending,
        (start_unix, end_unix, end_mono),
        tracefs_line,
    )?;
    // Dropping `recorder` detaches every probe.
    drop(recorder);

    let exit_code = match (ending.exit_code, ending.exit_signal) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) if ending.reason == "interrupted" => 130,
        _ => 0,
    };
    Ok(RecordOutcome { dir, exit_code })
}

fn run_loop(
    recorder: &mut Recorder,
    options: &RecordOptions,
    child_pid: Option<i32>,
) -> Result<Ending, RecordError> {
    let started = Instant::now();
    let mut next_tick = Instant::now() + Duration::from_secs(1);
    let mut interrupted_at: Option<Instant> = None;
    let mut terminated_at: Option<Instant> = None;
    let mut next_scan = Instant::now() + select::RESCAN_INTERVAL;
    let proc_fd = recorder_proc_fd(recorder);
    loop {
        let timeout = if recorder.fresh.is_empty() { 100 } else { 20 };
        if let Some(fd) = proc_fd {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, timeout) };
        } else {
            std::thread::sleep(Duration::from_millis(timeout as u64));
        }
        recorder.drain();
        if Instant::now() >= next_scan {
            recorder.add_selected()?;
            next_scan = Instant::now() + select::RESCAN_INTERVAL;
        }
        if Instant::now() >= next_tick {
            recorder.tick_series()?;
            next_tick += Duration::from_secs(1);
        }
        if let Some(pid) = child_pid
            && let Some((code, signal)) = launch::try_wait(pid)
        {
            let reason = if interrupted_at.is_some() {
                "interrupted"
            } else if terminated_at.is_some() {
                "duration"
            } else {
                "exited"
            };
            return Ok(Ending {
                reason,
                exit_code: code,
                exit_signal: signal,
            });
        }
        if child_pid.is_none()
            && recorder.selector.is_none()
            && options.pids.iter().all(|p| !launch::alive(*p))
        {
            return Ok(Ending {
                reason: "exited",
                exit_code: None,
                exit_signal: None,
            });
        }
        let (signo, forward) = launch::pending_signal();
        if signo != 0 {
            match child_pid {
                Some(pid) => {
                    if forward {
                        launch::send_signal(pid, signo);
                    }
                    interrupted_at.get_or_insert_with(Instant::now);
                }
                None => {
                    return Ok(Ending {
                        reason: "interrupted",
                        exit_code: None,
                        exit_signal: None,
                    });
                }
            }
        }
        // After a signal or the duration, give the command 5 s to exit.
        if let Some(t) = interrupted_at.or(terminated_at)
            && t.elapsed() > Duration::from_secs(5)
        {
            let reason = if interrupted_at.is_some() {
                "interrupted"
            } else {
                "duration"
            };
            return Ok(Ending {
                reason,
                exit_code: None,
                exit_signal: None,
            });
        }
        if let Some(limit) = options.duration
            && started.elapsed() >= limit
            && terminated_at.is_none()
            && interrupted_at.is_none()
        {
            match child_pid {
                Some(pid) => {
                    launch::send_signal(pid, libc::SIGTERM);
                    terminated_at = Some(Instant::now());
                }
                None => {
                    return Ok(Ending {
                        reason: "duration",
                        exit_code: None,
                        exit_signal: None,
                    });
                }
            }
        }
    }
}

fn recorder_proc_fd(recorder: &Recorder) -> Option<i32> {
    recorder
        .probes
        .proc_events_fd()
        .map(|fd| fd.as_fd().as_raw_fd())
}

fn write_json<T: serde::Serialize>(dir: &Path, name: &str, value: &T) -> Result<(), RecordError> {
    let path = dir.join(name);
    let text = serde_json::to_string_pretty(value).map_err(|e| RecordError::Write {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(&path, text + "\n").map_err(|source| RecordError::Write { path, source })
}

fn write_text(dir: &Path, name: &str, text: &str) -> Result<(), RecordError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|source| RecordError::Write { path, source })
}

fn write_session(
    recorder: &mut Recorder,
    options: &RecordOptions,
    dir: &Path,
    ending: &Ending,
    (start_unix, end_unix, end_mono): (u64, u64, u64),
    tracefs_line: String,
) -> Result<(), RecordError> {
    let snapshot = recorder.full_snapshot()?;
    let running = Recorder::running_ns(&snapshot, end_mono);
    let duration_ns = end_mono.saturating_sub(recorder.start_mono);

    // Every process seen: from the maps too (short-lived ones included).
    recorder
        .tracked
        .extend(snapshot.threads.iter().map(|t| t.tgid));
    recorder
        .tracked
        .extend(snapshot.syscalls.iter().map(|(k, _)| k.tgid));
    recorder
        .tracked
        .extend(snapshot.samples.iter().map(|(k, _)| k.tgid));

    let comms: BTreeMap<u32, String> = snapshot
        .threads
        .iter()
        .map(|t| (t.tid, aggregate::comm_string(&t.comm)))
        .collect();
    let comm_of = |tgid: u32, tid: u32| -> String {
        comms.get(&tid).cloned().unwrap_or_else(|| {
            std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/comm"))
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| format!("tid-{tid}"))
        })
    };
    let threads = aggregate::thread_stats(
        &snapshot.threads,
        &snapshot.syscalls,
        &snapshot.samples,
        &running,
        &comm_of,
    );

    let devices = aggregate::device_stats(
        &recorder.block_events,
        &recorder.tracked,
        duration_ns,
        &device_name,
    );
    let page_size = {
        // SAFETY: sysconf has no preconditions.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if size > 0 { size as u64 } else { 4096 }
    };
    let io = IoStats {
        devices,
        page_cache: PageCacheStats {
            misses_pages: threads.iter().map(|t| t.page_cache_misses).sum(),
            page_size,
        },
    };

    let bucket_ns = 1_000_000_000;
    let buckets = recorder.series.len().saturating_sub(1);
    let timeseries = TimeSeries {
        bucket_ns,
        start_unix_ns: start_unix,
        threads: aggregate::thread_series(&recorder.series, &|tid| {
            comms.get(&tid).cloned().unwrap_or_default()
        }),
        devices: aggregate::device_series(
            &recorder.block_events,
            recorder.start_mono,
            bucket_ns,
            buckets,
            &device_name,
        ),
    };

    let tracked_pids: Vec<u32> = recorder.tracked.iter().copied().collect();
    // Folded stacks, symbolized.
    let Recorder {
        probes,
        symbolizer,
        dwarf,
        dwarf_offcpu,
        unwinder,
        python: python_resolver,
        python_offcpu,
        python_fp,
        selector,
        unwind_decisions,
        wake_series,
        tracked: recorder_tracked,
        parents,
        start_mono,
        ..
    } = recorder;
    let start_mono = *start_mono;
    let dwarf_mode = unwinder.is_some();
    let auto_mode = options.unwind == UnwindMode::Auto;
    // One kallsyms pass for every kernel address (per stack it cost ~5 ms each).
    let wake_edges = probes.wake_edges()?;
    let kernel_ips: BTreeSet<u64> = snapshot
        .samples
        .iter()
        .chain(&snapshot.offcpu)
        .map(|(key, _)| key)
        .chain(dwarf_offcpu.counts.keys())
        .flat_map(|key| probes.stack(key.kernel_stack))
        .chain(
            wake_edges
                .iter()
                .flat_map(|(_, acc)| probes.stack(acc.waker_kernel_stack)),
        )
        .collect();
    symbolizer.kernel_frames(&kernel_ips.into_iter().collect::<Vec<_>>());
    // DWARF-mode keys index the unwound chains; the others are stack ids.
    let mut frames_with =
        |key: &StackKey, chains: Option<&Vec<(Vec<u64>, python::PythonFrames)>>| -> Vec<String> {
            let no_python = python::PythonFrames::new();
            let (user_ips, python_frames) = match chains {
                Some(chains) => usize::try_from(key.user_stack)
                    .ok()
                    .and_then(|i| chains.get(i))
                    .map_or((Vec::new(), &no_python), |(ips, py)| (ips.clone(), py)),
                None => (probes.stack(key.user_stack), &no_python),
            };
            let native = symbolizer.user_frames(key.tgid, &user_ips);
            let mut frames: Vec<String> = python::splice_python(native, python_frames)
                .into_iter()
                .rev()
                .collect();
            frames.extend(
                symbolizer
                    .kernel_frames(&probes.stack(key.kernel_stack))
                    .into_iter()
                    .rev(),
            );
            frames
        };
    // Folded per thread first (the comm, then the ids after a mark), split
    // into the per-comm and per-thread files at the end.
    let comm_of_key = |key: &StackKey| {
        format!(
            "{}{}{}/{}",
            comm_of(key.tgid, key.tid),
            aggregate::THREAD_MARK,
            key.tgid,
            key.tid
        )
    };
    let (oncpu, unwind_entries) = if dwarf_mode {
        let samples: Vec<(StackKey, u64)> = dwarf.counts.iter().map(|(k, v)| (*k, *v)).collect();
        let chains = &dwarf.chains;
        let folded = aggregate::fold(&samples, 1, &comm_of_key, &mut |k| {
            frames_with(k, Some(chains))
        });
        let mut entries: Vec<(u32, u32, Option<bool>, u64)> = dwarf
            .depths
            .iter()
            .map(|(&(tgid, depth, early), &n)| (tgid, depth, Some(early), n))
            .collect();
        if auto_mode {
            // The frame-pointer processes' samples: those without a stack
            // window, less the Python ones (folded with their frames below).
            let held: Vec<(StackKey, u64)> = dwarf.fp_keys.iter().map(|(k, v)| (*k, *v)).collect();
            let fp_only = python_fp.subtract_from(&python::subtract(&snapshot.samples, &held));
            let fp_folded =
                aggregate::fold(&fp_only, 1, &comm_of_key, &mut |k| frames_with(k, None));
            entries.extend(
                python::subtract(&snapshot.samples, &held)
                    .iter()
                    .map(|(k, n)| (k.tgid, probes.stack(k.user_stack).len() as u32, None, *n)),
            );
            (python::merge_folded(&folded, &fp_folded), entries)
        } else {
            (folded, entries)
        }
    } else {
        // Python processes' samples are folded with their Python frames.
        let fp_only = python_fp.subtract_from(&snapshot.samples);
        let folded = aggregate::fold(&fp_only, 1, &comm_of_key, &mut |k| frames_with(k, None));
        let entries: Vec<(u32, u32, Option<bool>, u64)> = snapshot
            .samples
            .iter()
            .map(|(k, n)| (k.tgid, probes.stack(k.user_stack).len() as u32, None, *n))
            .collect();
        (folded, entries)
    };
    // Off-CPU: frame-pointer stacks, less the intervals folded with their
    // Python frames (DWARF mode, outside syscalls) ...
    let offcpu_fp = python_offcpu.subtract_from(&snapshot.offcpu);
    let offcpu = aggregate::fold(&offcpu_fp, 1000, &comm_of_key, &mut |k| {
        frames_with(k, None)
    });
    // ... and blocked syscalls of DWARF-unwound processes, with their
    // unwound user stacks (never in the frame-pointer map).
    let offcpu_dwarf: Vec<(StackKey, u64)> =
        dwarf_offcpu.counts.iter().map(|(k, v)| (*k, *v)).collect();
    let offcpu_dwarf_chains = &dwarf_offcpu.chains;
    let offcpu_dwarf_folded = aggregate::fold(&offcpu_dwarf, 1000, &comm_of_key, &mut |k| {
        frames_with(k, Some(offcpu_dwarf_chains))
    });
    let offcpu = python::merge_folded(&offcpu, &offcpu_dwarf_folded);
    let oncpu = if dwarf_mode && !auto_mode {
        oncpu
    } else {
        let python = python::fold_python_stacks(python_fp, 1, symbolizer, probes, &comm_of_key);
        python::merge_folded(&oncpu, &python)
    };
    let (offcpu_python, offcpu_python_note) =
        python::fold_python_offcpu(python_offcpu, symbolizer, probes, &comm_of_key);
    let offcpu = python::merge_folded(&offcpu, &offcpu_python);
    let (oncpu, oncpu_threads) = aggregate::split_thread_folded(&oncpu);
    let (offcpu, offcpu_threads) = aggregate::split_thread_folded(&offcpu);
    let tracked = &recorder_tracked;
    let waits = aggregate::wait_graph(
        &wake_edges,
        wake_series,
        start_mono,
        bucket_ns,
        &|pid| tracked.contains(&pid),
        &mut |tgid, user, kernel| {
            let mut frames: Vec<String> = symbolizer
                .user_frames(tgid, &probes.stack(user))
                .into_iter()
                .rev()
                .collect();
            frames.extend(
                symbolizer
                    .kernel_frames(&probes.stack(kernel))
                    .into_iter()
                    .rev(),
            );
            frames
        },
    );
    let unwind = model::UnwindStats {
        mode: options.unwind.name().to_string(),
        stack_bytes: if dwarf_mode { options.stack_bytes } else { 0 },
        processes: aggregate::process_unwind(&unwind_entries),
        decisions: unwind_decisions.values().cloned().collect(),
        offcpu: offcpu_unwind_stats(probes, dwarf_offcpu),
    };

    let mut features = BTreeMap::new();
    features.insert("tracefs".to_string(), tracefs_line);
    features.insert(
        "btf".to_string(),
        if Path::new("/sys/kernel/btf/vmlinux").exists() {
            "present".to_string()
        } else {
            "missing".to_string()
        },
    );
    features.insert(
        "syscall_latency".to_string(),
        if options.syscall_latency {
            "on"
        } else {
            "off (exit-only hook)"
        }
        .to_string(),
    );
    let mut notes = python_resolver.notes();
    notes.extend(offcpu_python_note);
    if let Some(selector) = selector {
        notes.push(format!(
            "processes selected by {}: {} seen",
            selector.describe(),
            selector.selected()
        ));
    }
    for status in &probes.status {
        if !status.attached {
            notes.push(format!("probe {} disabled: {}", status.name, status.note));
        }
    }
    let info = SessionInfo {
        format_version: SESSION_FORMAT_VERSION,
        storprof_version: env!("CARGO_PKG_VERSION").to_string(),
        command: options.command.clone(),
        cwd: std::env::current_dir()
            .ok()
            .map(|p| p.display().to_string()),
        attached_pids: options.pids.clone(),
        tracked_pids,
        hostname: selector
            .as_ref()
            .map_or_else(select::default_host_name, select::NetnsSelector::host_name),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        num_cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        start_unix_ns: start_unix,
        end_unix_ns: end_unix,
        duration_s: (end_unix.saturating_sub(start_unix)) as f64 / 1e9,
        freq_hz: options.freq_hz,
        exit_code: ending.exit_code,
        exit_signal: ending.exit_signal,
        end_reason: ending.reason.to_string(),
        probes: probes.status.clone(),
        features,
        lost_events: probes.lost_events(),
        notes,
        unwind: Some(unwind),
        processes: recorder_tracked
            .iter()
            .map(|&pid| model::ProcessInfo {
                pid,
                ppid: parents
                    .get(&pid)
                    .copied()
                    .or_else(|| parent_of(pid))
                    .unwrap_or(0),
                comm: std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| {
                        threads
                            .iter()
                            .find(|t| t.tid == pid)
                            .map(|t| t.comm.clone())
                            .unwrap_or_default()
                    }),
            })
            .collect(),
    };
    use model::files;
    write_json(dir, files::SESSION, &info)?;
    write_json(dir, files::THREADS, &threads)?;
    write_json(dir, files::IO, &io)?;
    write_json(dir, files::TIMESERIES, &timeseries)?;
    write_text(dir, files::ONCPU_FOLDED, &oncpu)?;
    write_text(dir, files::OFFCPU_FOLDED, &offcpu)?;
    write_text(dir, files::ONCPU_THREADS_FOLDED, &oncpu_threads)?;
    write_text(dir, files::OFFCPU_THREADS_FOLDED, &offcpu_threads)?;
    if probes.attached(probes::family::WAKEUPS) {
        write_json(dir, files::WAITS, &waits)?;
    }
    chown_session(dir);
    Ok(())
}

/// How off-CPU user stacks were unwound (`session.json` `unwind.offcpu`).
fn offcpu_unwind_stats(probes: &ProbeSet, dwarf_offcpu: &DwarfSamples) -> model::OffCpuUnwind {
    if !probes.offcpu_dwarf() {
        return model::OffCpuUnwind {
            mode: "fp".to_string(),
            ..model::OffCpuUnwind::default()
        };
    }
    let early: u64 = dwarf_offcpu
        .depths
        .iter()
        .filter(|((_, _, early), _)| *early)
        .map(|(_, n)| n)
        .sum();
    model::OffCpuUnwind {
        mode: "dwarf-at-syscall-exit".to_string(),
        quantum_us: probes.offcpu_quantum_us(),
        stacks: dwarf_offcpu.events,
        intervals: dwarf_offcpu.intervals,
        estimated_ns: dwarf_offcpu.counts.values().sum(),
        early_stop_stacks: early,
    }
}

/// Gives the session directory to the sudo user who ran storprof.
fn chown_session(dir: &Path) {
    let Some(creds) = launch::sudo_credentials() else {
        return;
    };
    let mut paths = vec![dir.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(dir) {
        paths.extend(entries.flatten().map(|e| e.path()));
    }
    for path in paths {
        if let Err(err) = std::os::unix::fs::chown(&path, Some(creds.uid), Some(creds.gid)) {
            log::warn!("chown {}: {err}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::unwind::Unwound;
    use storprof_common::UserStackHeader;

    fn header(tid: u32, user_stack: i32, blocked_ns: u64, intervals: u32) -> UserStackHeader {
        UserStackHeader {
            tgid: 7,
            tid,
            kernel_stack: 3,
            user_stack,
            blocked_ns,
            offcpu_intervals: intervals,
            ..UserStackHeader::default()
        }
    }

    fn unwound(ips: &[u64], end: UnwindEnd) -> Unwound {
        Unwound {
            ips: ips.to_vec(),
            end,
        }
    }

    #[test]
    fn dwarf_samples_sum_values_per_chain_and_keep_frame_pointer_keys() {
        let mut offcpu = DwarfSamples::default();
        // Two blocked syscalls of one thread in the same stack, one merging
        // two intervals; a third in another stack that stopped early.
        offcpu.add(
            &header(8, 11, 2_000_000, 1),
            unwound(&[0x10, 0x20, 0x30], UnwindEnd::Complete),
            Vec::new(),
            2_000_000,
        );
        offcpu.add(
            &header(8, 11, 5_000_000, 2),
            unwound(&[0x10, 0x20, 0x30], UnwindEnd::Complete),
            Vec::new(),
            5_000_000,
        );
        offcpu.add(
            &header(8, 12, 1_000_000, 1),
            unwound(&[0x40], UnwindEnd::Early),
            Vec::new(),
            1_000_000,
        );
        assert_eq!(offcpu.chains.len(), 2);
        let key = |user_stack| StackKey {
            tgid: 7,
            tid: 8,
            user_stack,
            kernel_stack: 3,
        };
        assert_eq!(offcpu.counts.get(&key(0)), Some(&7_000_000));
        assert_eq!(offcpu.counts.get(&key(1)), Some(&1_000_000));
        // The frame-pointer keys the same time was seen under.
        assert_eq!(offcpu.fp_keys.get(&key(11)), Some(&7_000_000));
        assert_eq!(offcpu.fp_keys.get(&key(12)), Some(&1_000_000));
        // Depths count stacks, not time.
        assert_eq!(offcpu.depths.get(&(7, 3, false)), Some(&2));
        assert_eq!(offcpu.depths.get(&(7, 1, true)), Some(&1));
        assert_eq!((offcpu.events, offcpu.intervals), (3, 4));
    }

    #[test]
    fn offcpu_quantum_defaults_to_one_sampling_period() {
        let options = RecordOptions::default();
        assert_eq!(options.offcpu_quantum_us(), 10_101);
        let options = RecordOptions {
            freq_hz: 1000,
            ..RecordOptions::default()
        };
        assert_eq!(options.offcpu_quantum_us(), 1000);
        let options = RecordOptions {
            offcpu_quantum_us: Some(0),
            ..RecordOptions::default()
        };
        assert_eq!(options.offcpu_quantum_us(), 0);
    }
}
