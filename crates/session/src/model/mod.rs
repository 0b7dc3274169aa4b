//! The on-disk session directory written by `storprof record` and read by the
//! analysis. One serde struct per file; every field added later must be
//! `#[serde(default)]` so older sessions still load.
//!
//! ```text
//! DIR/session.json      SessionInfo
//! DIR/threads.json      Vec<ThreadStats>
//! DIR/io.json           IoStats
//! DIR/timeseries.json   TimeSeries (1-second buckets)
//! DIR/oncpu.folded      `comm;outer;...;leaf COUNT` (samples)
//! DIR/offcpu.folded     `comm;outer;...;leaf MICROSECONDS` (blocked time)
//! DIR/bench-summary.json  copy of the workload's DLIO-format summary.json:
//!                         storprof bench's, or DLIO's / mlpstorage's own
//!                         found by the recorder (optional)
//! DIR/waits.json        WaitGraph: wake-up edges (who ended whose blocked
//!                       time), with 1-second series (format 2 on)
//! DIR/oncpu-threads.folded, offcpu-threads.folded
//!                       the same stacks per thread: `comm;[pid/tid];...`
//! ```
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod io;
mod series;
mod threads;
mod waits;

pub use io::*;
pub use series::*;
pub use threads::*;
pub use waits::*;

/// Version of the session directory layout. Bumped on incompatible changes;
/// readers refuse sessions with a newer major version.
/// Version 2 added the wake-up graph (`waits.json`), per-thread folded
/// stacks, the process tree and per-bucket thread states; version 1
/// sessions still load and get the verdict rules of that format.
pub const SESSION_FORMAT_VERSION: u32 = 2;

/// File names inside a session directory.
pub mod files {
    pub const SESSION: &str = "session.json";
    pub const THREADS: &str = "threads.json";
    pub const IO: &str = "io.json";
    pub const TIMESERIES: &str = "timeseries.json";
    pub const ONCPU_FOLDED: &str = "oncpu.folded";
    pub const OFFCPU_FOLDED: &str = "offcpu.folded";
    pub const BENCH_SUMMARY: &str = "bench-summary.json";
    pub const WAITS: &str = "waits.json";
    pub const ONCPU_THREADS_FOLDED: &str = "oncpu-threads.folded";
    pub const OFFCPU_THREADS_FOLDED: &str = "offcpu-threads.folded";
    pub const FRAMES: &str = "frames.json";
}

/// `frames.json`: the file each named user frame of the folded stacks came
/// from (its basename: `libc.so.6`, `python3.12`), which the frame's name
/// does not tell. Sessions before it have none; their libraries are guessed
/// from the names.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FrameModules {
    pub modules: std::collections::BTreeMap<String, String>,
}

/// Environment variable set for the recorded command: the session directory.
/// `storprof bench` copies its summary.json there as `bench-summary.json`.
pub const SESSION_DIR_ENV: &str = "STORPROF_SESSION_DIR";

/// An early verdict (`--until-verdict`): it held from `held_from_s` to
/// `held_to_s` (seconds since the start), when recording stopped.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct EarlyVerdict {
    pub verdict: String,
    pub confidence_label: String,
    pub held_from_s: f64,
    pub held_to_s: f64,
}

/// `session.json`: what was recorded, how, and how well.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SessionInfo {
    pub format_version: u32,
    pub storprof_version: String,
    /// argv of the recorded command (empty when attached to `--pid`s).
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// pids given with `--pid`.
    #[serde(default)]
    pub attached_pids: Vec<u32>,
    /// Every process (tgid) seen in the traced set, root and descendants.
    #[serde(default)]
    pub tracked_pids: Vec<u32>,
    pub hostname: String,
    pub kernel: String,
    pub num_cpus: u32,
    /// Wall-clock start and end, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// `end - start` in seconds, for readers that do not want to subtract.
    pub duration_s: f64,
    /// CPU sampling frequency (Hz).
    pub freq_hz: u64,
    /// Exit status of the command (None: attached, killed by a signal or still running).
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub exit_signal: Option<i32>,
    /// Why recording ended: "exited", "duration", "interrupted"
    /// (Ctrl-C/SIGTERM) or "verdict" (`--until-verdict`).
    #[serde(default)]
    pub end_reason: String,
    /// How the launched command ended: "exit", "signal" (one storprof did
    /// not send), "duration-sigterm" (it ended within the grace period
    /// after the SIGTERM at --duration), "duration-sigkill-after-grace"
    /// (it outlived the grace period: SIGKILL), "verdict-sigterm",
    /// "verdict-sigkill-after-grace" (stopped after an early verdict) or
    /// "left-running". Absent: attached to --pid, or an older session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<String>,
    /// Seconds the command had between storprof's SIGTERM and its SIGKILL
    /// (`--grace`), when storprof sent a SIGTERM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_s: Option<f64>,
    /// Seconds since the start when storprof asked the command to stop
    /// (`--duration`, an early verdict, Ctrl-C); what follows is its
    /// tear-down, and `waits.pending` is as the threads were then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_requested_s: Option<f64>,
    /// `--until-verdict`: the verdict that held, and over which window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early_verdict: Option<EarlyVerdict>,
    /// CPU seconds storprof itself used (user + system, not the traced
    /// command's) up to when the session was built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder_cpu_s: Option<f64>,
    /// Of `recorder_cpu_s`, what storprof used while it recorded (start-up
    /// included): the CPU it could take from the workload. The rest built
    /// the session after the workload ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder_cpu_recording_s: Option<f64>,
    /// One entry per probe: did it run, and if not why.
    #[serde(default)]
    pub probes: Vec<ProbeStatus>,
    /// Kernel feature checks (btf, tracefs, perf_event, ...) → result text.
    #[serde(default)]
    pub features: BTreeMap<String, String>,
    /// Events or samples that were dropped, by counter name; all zero is the goal.
    #[serde(default)]
    pub lost_events: BTreeMap<String, u64>,
    /// Switch-ins of traced threads that the kernel made without a
    /// `sched_switch` event; the probes found each at the thread's next
    /// syscall exit or switch-out and put it at its wake-up.
    #[serde(default)]
    pub missed_switch_ins: u64,
    /// Free-form notes for the reader of the session (what is missing and why).
    #[serde(default)]
    pub notes: Vec<String>,
    /// How user stacks were unwound, and how deep they got per process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwind: Option<UnwindStats>,
    /// The traced processes with their parents (format 2 on).
    #[serde(default)]
    pub processes: Vec<ProcessInfo>,
    /// Block-I/O limits of the traced processes' cgroups, read while they
    /// ran (empty: none, or a session recorded before they were read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_limits: Vec<IoLimit>,
}

/// A block-I/O limit of a traced process's cgroup (or an ancestor's):
/// cgroup v1's blkio throttle or cgroup v2's `io.max`. None: unlimited.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct IoLimit {
    /// The cgroup's path ("/job/readers").
    pub cgroup: String,
    /// "blkio" (v1) or "io.max" (v2).
    pub kind: String,
    /// "MAJ:MIN" of the device it limits.
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_bps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_iops: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_iops: Option<u64>,
    /// Traced processes seen in it.
    #[serde(default)]
    pub pids: Vec<u32>,
}

impl IoLimit {
    pub fn is_limited(&self) -> bool {
        self.read_bps.is_some()
            || self.write_bps.is_some()
            || self.read_iops.is_some()
            || self.write_iops.is_some()
    }
}

/// One traced process and its parent (the process tree: DataLoader
/// workers are children of the trainer).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: u32,
    /// 0 when unknown.
    pub ppid: u32,
    #[serde(default)]
    pub comm: String,
}

/// Whether one probe ran.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProbeStatus {
    /// "cpu_samples", "sched", "syscalls", "block", "page_cache", "process".
    pub name: String,
    pub attached: bool,
    /// Why not, or what it is attached to.
    #[serde(default)]
    pub note: String,
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// User-stack unwinding of a recording (`storprof record --unwind`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct UnwindStats {
    /// "fp" (frame pointers, in the kernel), "dwarf" (copied stack
    /// windows unwound in user space from `.eh_frame`/`.debug_frame`) or
    /// "auto" (one of the two per process, see `decisions`).
    pub mode: String,
    /// Bytes of user stack copied per sample (dwarf mode; 0 in fp mode).
    #[serde(default)]
    pub stack_bytes: u32,
    /// One entry per process with on-CPU samples.
    #[serde(default)]
    pub processes: Vec<ProcessUnwind>,
    /// `--unwind auto`: the mode chosen per process and why (empty when
    /// the mode was forced for all).
    #[serde(default)]
    pub decisions: Vec<UnwindDecision>,
    /// How off-CPU user stacks were unwound.
    #[serde(default)]
    pub offcpu: OffCpuUnwind,
}

/// Off-CPU user stacks of a recording. In "dwarf-at-syscall-exit" mode
/// (DWARF unwinding with syscall latency on), the time a DWARF-unwound
/// process's thread spends blocked inside a syscall is sampled by blocked
/// time, and each taken interval's user stack is copied at the syscall's
/// exit (unchanged since it blocked) and unwound like a CPU sample. Other
/// off-CPU time (preemption, faults outside syscalls, frame-pointer
/// processes) keeps its frame-pointer stack. "fp": all of it does.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct OffCpuUnwind {
    pub mode: String,
    /// Sampling quantum (µs): a shorter interval is taken with probability
    /// interval/quantum and then weighs one quantum. 0: every interval.
    #[serde(default)]
    pub quantum_us: u32,
    /// Stacks copied and unwound (one per blocked syscall taken).
    #[serde(default)]
    pub stacks: u64,
    /// Blocked intervals they stand for (a syscall can block several times).
    #[serde(default)]
    pub intervals: u64,
    /// Off-CPU time (ns) the DWARF stacks stand for (an estimate: sampled).
    #[serde(default)]
    pub estimated_ns: u64,
    /// Stacks whose unwinding stopped before the outermost frame.
    #[serde(default)]
    pub early_stop_stacks: u64,
}

/// The unwinding mode `--unwind auto` chose for one process.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct UnwindDecision {
    pub pid: u32,
    /// Its main executable.
    pub exe: String,
    /// "fp" or "dwarf".
    pub mode: String,
    /// Why, e.g. "2% of 810 functions of the executable keep frame pointers".
    pub reason: String,
}

/// Stack depths of one process's on-CPU samples.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcessUnwind {
    pub pid: u32,
    pub samples: u64,
    /// User frames per stack → samples with that depth.
    #[serde(default)]
    pub depth_samples: BTreeMap<u32, u64>,
    /// Median user-stack depth.
    #[serde(default)]
    pub median_depth: u32,
    /// Samples whose unwinding stopped before the outermost frame (dwarf
    /// mode; `None` in fp mode, where the kernel does not say).
    #[serde(default)]
    pub early_stop_samples: Option<u64>,
    /// `early_stop_samples / samples`.
    #[serde(default)]
    pub early_stop_share: Option<f64>,
}
