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

/// `SessionInfo::features` key of the wake-edge semantics a recording has.
pub const FEATURE_WAKE_EDGES: &str = "wake_edges";
/// Its value since wake edges carry `lock_wait` and interrupt wakers are
/// the innermost handler's (absent before).
pub const WAKE_EDGES_VERSION: &str = "2";

/// `waits.json`: the wake-up graph of the recording.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WaitGraph {
    /// Width of the series' buckets (the time series' buckets), ns.
    pub bucket_ns: u64,
    pub edges: Vec<WakeEdge>,
    /// Traced threads still off CPU (not woken) for a second or more when
    /// the graph was built, longest first: what a stalled job waits on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingWait>,
}

/// A traced thread off CPU, not woken yet, when the recording ended (or
/// when a live view looked).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PendingWait {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// "sleeping", "uninterruptible" or "other".
    pub state: String,
    /// How long it had been off CPU, seconds.
    pub blocked_s: f64,
    /// Its stack when it left the CPU, outermost frame first: user frames,
    /// then kernel frames.
    #[serde(default)]
    pub stack: Vec<String>,
}

/// Wake-ups of one waker that ended blocked intervals of one traced thread
/// in one state, syscall and futex word.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WakeEdge {
    /// "task", "hardirq", "softirq", "timer" or "idle".
    pub waker_kind: String,
    /// The waking task (0 for interrupts).
    pub waker_pid: u32,
    /// The waking task, or the CPU number for interrupts.
    pub waker_tid: u32,
    pub waker_comm: String,
    /// Whether the waker is a traced thread.
    #[serde(default)]
    pub waker_traced: bool,
    pub wakee_pid: u32,
    pub wakee_tid: u32,
    /// "sleeping", "uninterruptible" or "other".
    pub wakee_state: String,
    /// The syscall the wakee blocked in, when known.
    #[serde(default)]
    pub syscall: Option<String>,
    /// A futex wait for a lock: a glibc lock's wait, or a wait on a word
    /// the waker had waited on lately too, a lock both contend for (false:
    /// a hand-off, or not a futex wait).
    #[serde(default)]
    pub futex_shared: bool,
    /// Of `futex_shared` waits, the wakee waited for a glibc or PI lock
    /// (known from the wait itself); false for a word the waker had waited
    /// on too (a lock both contend for, or a condition variable next to a
    /// mutex), and in sessions recorded before it was told apart.
    #[serde(default, skip_serializing_if = "is_false")]
    pub lock_wait: bool,
    /// Σ blocked time these wake-ups ended, ns.
    pub blocked_ns: u64,
    pub count: u64,
    /// First and last wake-up, seconds since the recording's start.
    pub first_s: f64,
    pub last_s: f64,
    /// The blocked time the first wake-up ended, ns.
    #[serde(default)]
    pub first_blocked_ns: u64,
    /// The waker's stack at a sampled wake-up, outermost frame first
    /// (user frames, then kernel frames).
    #[serde(default)]
    pub waker_stack: Vec<String>,
    /// (bucket, blocked ns, wake-ups) of the buckets with wake-ups.
    #[serde(default)]
    pub series: Vec<(u32, u64, u64)>,
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

/// Off-CPU time of one thread split by the state it left the CPU in.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct OffCpuNs {
    /// Preempted while runnable (TASK_RUNNING): waiting for a CPU.
    pub runnable: u64,
    /// Interruptible sleep (TASK_INTERRUPTIBLE): futex, poll, socket, pipe waits.
    pub sleeping: u64,
    /// Uninterruptible sleep (TASK_UNINTERRUPTIBLE, "D"): mostly block I/O.
    pub uninterruptible: u64,
    /// Any other state (stopped, traced, idle...).
    pub other: u64,
}

impl OffCpuNs {
    pub fn total(&self) -> u64 {
        self.runnable + self.sleeping + self.uninterruptible + self.other
    }
}

/// Number of log2 latency buckets (the probes' own): bucket i counts values
/// in [2^i, 2^(i+1)) ns (bucket 0 also holds 0).
pub use storprof_common::LOG2_BUCKETS;

/// Per-thread, per-syscall statistics.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct SyscallStats {
    /// x86_64 syscall number.
    pub nr: u32,
    /// Name ("pread64"); `sys_<nr>` when unknown.
    pub name: String,
    pub count: u64,
    /// Calls that returned a negative errno.
    #[serde(default)]
    pub errors: u64,
    /// Sum of latencies (enter → exit), ns.
    pub total_ns: u64,
    /// Bytes returned by successful read-family, write-family or socket
    /// receive (recvfrom, recvmsg; sessions before them: 0) calls.
    #[serde(default)]
    pub bytes: u64,
    /// log2 latency histogram (ns), `LOG2_BUCKETS` entries, trailing zeros may be trimmed.
    #[serde(default)]
    pub latency_log2_ns: Vec<u64>,
}

/// Thread ids from here up are the recorder's folded groups (threads that
/// exited past the first few thousand, summed per name): above the
/// kernel's `PID_MAX_LIMIT` (2^22), so never a real thread's.
pub const FOLDED_GROUP_TID_MIN: u32 = 1 << 22;

/// Whether `tid` is a folded group of exited threads, not one thread.
pub const fn is_folded_group(tid: u32) -> bool {
    tid >= FOLDED_GROUP_TID_MIN
}

/// `comm pid/tid` as the outputs name a thread; a folded group is
/// `comm (exited threads)`: its pid and tid are not a real thread's.
pub fn thread_label(comm: &str, pid: u32, tid: u32) -> String {
    if is_folded_group(tid) {
        folded_group_label(comm)
    } else {
        format!("{comm} {pid}/{tid}")
    }
}

/// How the outputs name the folded group of exited threads named `comm`.
pub fn folded_group_label(comm: &str) -> String {
    format!("{comm} (exited threads)")
}

/// `threads.json` entry.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ThreadStats {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub on_cpu_ns: u64,
    pub off_cpu_ns: OffCpuNs,
    /// CPU samples that landed in user space / kernel space.
    #[serde(default)]
    pub samples_user: u64,
    #[serde(default)]
    pub samples_kernel: u64,
    #[serde(default)]
    pub syscalls: Vec<SyscallStats>,
    /// Bytes returned by read, pread64, readv, preadv, preadv2.
    pub read_bytes: u64,
    /// Bytes returned by write, pwrite64, writev, pwritev, pwritev2.
    pub write_bytes: u64,
    /// Pages this thread added to the page cache outside write-family
    /// syscalls (read misses). Sessions recorded before buffered writes'
    /// pages were counted apart include those here.
    #[serde(default)]
    pub page_cache_misses: u64,
    /// Pages this thread's buffered writes added to the page cache (inside
    /// write-family syscalls; no device supplied them).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub page_cache_write_pages: u64,
}

/// `io.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IoStats {
    pub devices: Vec<DeviceStats>,
    pub page_cache: PageCacheStats,
}

/// One block device, whole-system (the block layer does not know the process
/// reliably); `by_pid` attributes each request to the process that created it
/// (`block_io_start`), or to the issuing one when the creation was not seen.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceStats {
    /// Kernel name ("vda", "nvme0n1", "loop3").
    pub name: String,
    /// "MAJ:MIN".
    pub dev: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_requests: u64,
    pub write_requests: u64,
    /// Issue → complete latency, log2 ns buckets (every request: reads,
    /// writes, flushes, discards).
    #[serde(default)]
    pub latency_log2_ns: Vec<u64>,
    /// The same for reads and for writes only (empty in sessions recorded
    /// before they were split).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_latency_log2_ns: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_latency_log2_ns: Vec<u64>,
    /// Reads' creation → issue, log2 ns buckets: time in the plug and the
    /// I/O scheduler's queue, after any cgroup throttle (which holds bios
    /// before a request exists). Empty before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_queue_log2_ns: Vec<u64>,
    /// Time with at least one request in flight, ns.
    pub busy_ns: u64,
    /// busy_ns / recording duration (0..1).
    #[serde(default)]
    pub utilization: f64,
    /// Bytes read by request issued in a traced process's context.
    #[serde(default)]
    pub traced_read_bytes: u64,
    /// pid → bytes (read + write) for requests issued in that pid's context.
    #[serde(default)]
    pub by_pid: BTreeMap<u32, u64>,
    /// The devices this one sits on, nearest first, read from sysfs at the
    /// end of the recording: a loop device's image file's device (and that
    /// partition's whole disk, and on down), a dm/md device's members
    /// (`slaves/`). Their requests carry this device's bytes again. Empty
    /// for a disk, and in sessions recorded before it was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sits_on: Vec<LowerDevice>,
}

/// A device under another one ([`DeviceStats::sits_on`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LowerDevice {
    /// Kernel name ("vda", "nvme0n1p2"), or "MAJ:MIN" when it has none.
    pub name: String,
    /// "MAJ:MIN".
    pub dev: String,
    /// How the upper device reaches it (the first step down from it).
    pub via: Stacking,
}

/// How a device sits on the devices under it.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Stacking {
    /// A loop device: its image file lives on the lower device.
    LoopImage,
    /// A dm or md device: the lower device is one of its members.
    Member,
    /// A kind a newer storprof recorded.
    #[default]
    #[serde(other)]
    Other,
}

/// Page-cache activity of the traced processes.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PageCacheStats {
    /// Pages added to the page cache by traced processes outside
    /// write-family syscalls (read misses). Sessions recorded before
    /// buffered writes' pages were counted apart include those here.
    pub misses_pages: u64,
    /// Pages traced processes' buffered writes added to the page cache
    /// (absent: none, or a session recorded before they were counted apart).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub write_pages: u64,
    /// Page size used to turn pages into bytes.
    pub page_size: u64,
}

/// `timeseries.json`: 1-second buckets from `start_unix_ns`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TimeSeries {
    pub bucket_ns: u64,
    pub start_unix_ns: u64,
    /// Buckets in the recording (0 in sessions written before thread
    /// series were stored sparse: the longest series gives it).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub buckets: u32,
    /// One series per thread: on-CPU ns and read-syscall bytes per bucket.
    pub threads: Vec<ThreadSeries>,
    /// One series per device: bytes per bucket.
    pub devices: Vec<DeviceSeries>,
    /// System-wide dirty and writeback page cache per bucket (absent in
    /// sessions recorded before it was sampled, or where /proc/vmstat
    /// could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmstat: Option<VmstatSeries>,
    /// The machine's CPU time per bucket, every process's and the
    /// kernel's (absent in sessions recorded before it was sampled, or
    /// where /proc/stat could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu: Option<HostCpuSeries>,
}

/// `/proc/stat`'s first line once per bucket: CPU time summed over the
/// machine's CPUs during the bucket, ns. Traced threads are part of
/// `busy_ns`; what is left of it is untraced (other processes, storprof
/// itself, kernel threads, interrupts).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostCpuSeries {
    /// user + nice + system + irq + softirq.
    pub busy_ns: Vec<u64>,
    /// Time a hypervisor ran something else while a CPU of this machine
    /// wanted to run: CPU the job could not have.
    pub steal_ns: Vec<u64>,
    /// idle + iowait.
    pub idle_ns: Vec<u64>,
}

/// `/proc/vmstat` once per bucket, system-wide (the page cache is shared:
/// writeback of other processes' files counts too). Gauges are read at
/// each bucket's end; counters are the bucket's increase. Bytes are pages
/// × the page size.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct VmstatSeries {
    /// `nr_dirty`: page cache waiting to be written back.
    pub dirty_bytes: Vec<u64>,
    /// `nr_writeback`: page cache being written back (I/O in flight).
    pub writeback_bytes: Vec<u64>,
    /// Increase of `nr_dirtied`: pages made dirty during the bucket.
    pub dirtied_bytes: Vec<u64>,
    /// Increase of `nr_written`: pages written back during the bucket.
    pub written_bytes: Vec<u64>,
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

impl TimeSeries {
    /// Buckets in the recording: the stored count, or where the longest
    /// series ends.
    pub fn bucket_count(&self) -> usize {
        self.threads
            .iter()
            .map(ThreadSeries::end_bucket)
            .chain(self.devices.iter().map(|d| d.read_bytes.len()))
            .chain(std::iter::once(self.buckets as usize))
            .max()
            .unwrap_or(0)
    }
}

/// One thread's counters per bucket. Stored sparse: the vectors cover
/// buckets `first_bucket ..` up to the thread's last active bucket (a
/// thread that lived two seconds of a twelve-hour recording stores two
/// values, not 43,200); read them through [`Buckets`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ThreadSeries {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// The bucket of each vector's first value.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub first_bucket: u32,
    pub on_cpu_ns: Vec<u64>,
    pub read_bytes: Vec<u64>,
    /// Off-CPU time per bucket by state, accounted when the thread comes
    /// back on a CPU (format 2 on; empty before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runnable_ns: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sleeping_ns: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_io_ns: Vec<u64>,
}

impl ThreadSeries {
    fn view<'a>(&self, values: &'a [u64]) -> Buckets<'a> {
        Buckets {
            first: self.first_bucket as usize,
            values,
        }
    }
    pub fn on_cpu(&self) -> Buckets<'_> {
        self.view(&self.on_cpu_ns)
    }
    pub fn read(&self) -> Buckets<'_> {
        self.view(&self.read_bytes)
    }
    pub fn runnable(&self) -> Buckets<'_> {
        self.view(&self.runnable_ns)
    }
    pub fn sleeping(&self) -> Buckets<'_> {
        self.view(&self.sleeping_ns)
    }
    pub fn blocked_io(&self) -> Buckets<'_> {
        self.view(&self.blocked_io_ns)
    }
    /// One past the last bucket any of its vectors covers.
    pub fn end_bucket(&self) -> usize {
        let longest = [
            &self.on_cpu_ns,
            &self.read_bytes,
            &self.runnable_ns,
            &self.sleeping_ns,
            &self.blocked_io_ns,
        ]
        .iter()
        .map(|v| v.len())
        .max()
        .unwrap_or(0);
        self.first_bucket as usize + longest
    }
}

/// One counter of a [`ThreadSeries`] by absolute bucket index: buckets
/// outside the stored range are 0.
#[derive(Clone, Copy, Debug)]
pub struct Buckets<'a> {
    pub first: usize,
    pub values: &'a [u64],
}

impl Buckets<'_> {
    /// The value of bucket `i`.
    pub fn at(&self, i: usize) -> u64 {
        i.checked_sub(self.first)
            .and_then(|j| self.values.get(j))
            .copied()
            .unwrap_or(0)
    }
    /// The sum over buckets `b0..b1`.
    pub fn sum(&self, b0: usize, b1: usize) -> u64 {
        let lo = b0.saturating_sub(self.first).min(self.values.len());
        let hi = b1.saturating_sub(self.first).min(self.values.len());
        self.values[lo..hi.max(lo)].iter().sum()
    }
    /// The sum over every bucket.
    pub fn total(&self) -> u64 {
        self.values.iter().sum()
    }
    /// The first bucket with a non-zero value.
    pub fn first_nonzero(&self) -> Option<usize> {
        self.values
            .iter()
            .position(|&v| v > 0)
            .map(|j| j + self.first)
    }
    /// The last bucket with a non-zero value.
    pub fn last_nonzero(&self) -> Option<usize> {
        self.values
            .iter()
            .rposition(|&v| v > 0)
            .map(|j| j + self.first)
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceSeries {
    pub name: String,
    pub read_bytes: Vec<u64>,
    pub write_bytes: Vec<u64>,
    #[serde(default)]
    pub busy_ns: Vec<u64>,
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
