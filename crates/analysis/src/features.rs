//! Features: the figures a verdict rests on, extracted from a session.
//!
//! ```text
//! Session ──► select reader threads (by read bytes, else by activity)
//!         ──► shares of reader thread-time: on CPU, runnable, sleeping, D,
//!             in read syscalls, futex, socket receive, reclaim
//!         ──► I/O: read-syscall bytes vs device bytes (page-cache hit ratio),
//!             device utilization; consumer (simulated accelerator) sleep;
//!             bench AU and derived-vs-measured I/O
//! ```
//!
//! "Thread time" of a thread is its on-CPU plus off-CPU time, i.e. the part
//! of the recording it was alive; shares are sums over the selected threads
//! divided by the sum of their thread time, so short-lived workers weigh by
//! how long they lived.
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{Thresholds, frames, waitgraph::WaitAnalysis};
use storprof_session::{
    load::{FoldedStacks, Session},
    model::{DeviceStats, Stacking, SyscallStats, ThreadStats},
};

/// x86_64 syscall numbers used when a syscall has no name.
mod nr {
    pub const READ_FAMILY: &[u32] = &[0, 17, 19, 295, 327];
    pub const FUTEX: &[u32] = &[202, 449];
    pub const SOCKET_RECV: &[u32] = &[45, 47, 299];
    pub const NANOSLEEP: &[u32] = &[35, 230];
}

const READ_NAMES: &[&str] = &["read", "pread64", "readv", "preadv", "preadv2"];
const FUTEX_NAMES: &[&str] = &["futex", "futex_waitv"];
const SOCKET_RECV_NAMES: &[&str] = &["recvfrom", "recvmsg", "recvmmsg"];
const NANOSLEEP_NAMES: &[&str] = &["nanosleep", "clock_nanosleep"];

/// Kernel frames of off-CPU stacks that mean "waiting on a socket".
pub const SOCKET_FRAMES: &[&str] = &[
    "tcp_recvmsg",
    "sk_wait_data",
    "inet_recvmsg",
    "sock_recvmsg",
];
/// Kernel frames that mean "waiting on a futex".
pub const FUTEX_FRAMES: &[&str] = &["futex_wait", "futex_q_lock", "do_futex"];
/// Kernel frames of on-CPU stacks that mean "copying file data out of the
/// page cache": the read path of read/pread/readv and faults on file
/// mappings. The reader's other kernel time (faulting in fresh anonymous
/// buffers, allocation) is its own work.
pub const CACHE_COPY_FRAMES: &[&str] = &[
    "filemap_read",
    "filemap_get_pages",
    "copy_page_to_iter",
    "generic_file_read_iter",
    "ksys_read",
    "ksys_pread64",
    "vfs_read",
    "vfs_readv",
    "do_iter_readv_writev",
    "filemap_fault",
    "filemap_map_pages",
    "do_read_fault",
];
/// Kernel frames of on-CPU stacks inside a read-family syscall (not a
/// fault on a mapping).
pub const READ_SYSCALL_FRAMES: &[&str] = &[
    "ksys_read",
    "ksys_pread64",
    "vfs_read",
    "vfs_readv",
    "do_iter_readv_writev",
    "__x64_sys_read",
    "__x64_sys_pread64",
    "__x64_sys_readv",
    "__x64_sys_preadv",
];

/// Whether the session's syscall times are time switched out inside each
/// call (`--syscall-timing blocked`, the default since it was added), so a
/// call's on-CPU part must come from the CPU samples. Sessions recorded
/// before it timed every call from entry to exit.
fn syscall_times_are_blocked_time(session: &Session) -> bool {
    session
        .info
        .features
        .get("syscall_timing")
        .is_some_and(|mode| mode == "blocked")
}

/// fsync-family syscalls: the writer waits until its data is on the device.
const SYNC_NAMES: &[&str] = &[
    "fsync",
    "fdatasync",
    "sync_file_range",
    "msync",
    "syncfs",
    "sync",
];
/// x86_64 numbers of [`SYNC_NAMES`] (msync 26, fsync 74, fdatasync 75,
/// sync 162, sync_file_range 277, syncfs 306).
const SYNC_NRS: &[u32] = &[26, 74, 75, 162, 277, 306];

/// Kernel frames of an fsync-family call (names checked on kernel 6.18).
pub const SYNC_FRAMES: &[&str] = &[
    "__x64_sys_fsync",
    "__x64_sys_fdatasync",
    "__x64_sys_sync_file_range",
    "__x64_sys_msync",
    "__x64_sys_syncfs",
    "__x64_sys_sync",
    "do_fsync",
    "vfs_fsync_range",
];
/// Kernel frames of a writer throttled for dirtying pages faster than they
/// are written back, or waiting for pages under writeback.
pub const WRITEBACK_WAIT_FRAMES: &[&str] = &[
    "balance_dirty_pages",
    "folio_wait_writeback",
    "wait_on_page_writeback",
    "folio_wait_stable",
    "__filemap_fdatawait_range",
    "file_write_and_wait_range",
    "filemap_write_and_wait_range",
];
/// The throttling part of [`WRITEBACK_WAIT_FRAMES`] (matches
/// `balance_dirty_pages_ratelimited_flags` too).
pub const DIRTY_THROTTLE_FRAMES: &[&str] = &["balance_dirty_pages"];
/// Kernel frames of on-CPU stacks inside the write path: the syscall and
/// the copy of user data into the page cache.
pub const WRITE_PATH_FRAMES: &[&str] = &[
    "ksys_write",
    "ksys_pwrite64",
    "vfs_write",
    "vfs_writev",
    "__x64_sys_write",
    "__x64_sys_pwrite64",
    "__x64_sys_writev",
    "__x64_sys_pwritev",
    "generic_perform_write",
    "copy_page_from_iter_atomic",
    "copy_from_user",
    "copy_user_generic",
];

/// Kernel frames of a write-family syscall (names checked on kernel 6.18):
/// off-CPU time under them is a writer blocked inside a write call.
pub const WRITE_SYSCALL_FRAMES: &[&str] = &[
    "__x64_sys_write",
    "__x64_sys_pwrite64",
    "__x64_sys_writev",
    "__x64_sys_pwritev",
    "ksys_write",
    "ksys_pwrite64",
    "vfs_write",
    "vfs_writev",
];

/// Kernel frames that mean reclaim, swap-in or OOM handling.
pub const RECLAIM_FRAMES: &[&str] = &[
    "try_to_free_pages",
    "shrink_node",
    "__alloc_pages_slowpath",
    "__alloc_pages_direct_reclaim",
    "mem_cgroup_handle_over_high",
    "throttle_direct_reclaim",
    "do_swap_page",
    "out_of_memory",
    "oom_kill_process",
];

fn is_syscall(s: &SyscallStats, names: &[&str], nrs: &[u32]) -> bool {
    if s.name.is_empty() || s.name.starts_with("sys_") {
        nrs.contains(&s.nr)
    } else {
        names.contains(&s.name.as_str())
    }
}

fn syscall_ns(t: &ThreadStats, names: &[&str], nrs: &[u32]) -> u64 {
    t.syscalls
        .iter()
        .filter(|s| is_syscall(s, names, nrs))
        .map(|s| s.total_ns)
        .sum()
}

fn thread_ns(t: &ThreadStats) -> u64 {
    t.on_cpu_ns + t.off_cpu_ns.total()
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        (a / b).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// How the reader threads were chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReaderSelection {
    /// Threads that returned at least `reader_read_fraction` of all read bytes.
    ReadBytes,
    /// No significant reads: threads busy (on CPU, runnable or in D) at least
    /// `busy_thread_share` of their life, or sleeping on futex/sockets.
    Activity,
    /// Nothing stood out: every thread.
    All,
    /// The threads on the critical path of the consumer's data waits
    /// (wake-up graph); shares are of the consumer's data wait.
    CriticalPath,
    /// No consumer: the readers and their worker processes' threads, with
    /// their waits sorted by what ended them (wake-up graph); shares are of
    /// what they did and waited on, less waiting on each other.
    ReaderTime,
}

/// One block device's figures over the recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceFeature {
    pub name: String,
    pub read_bytes: u64,
    pub read_mib_per_s: f64,
    pub read_requests: u64,
    /// Bytes the device wrote (whole device: writeback runs in kernel
    /// threads, not in the writer).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub write_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub write_mib_per_s: f64,
    /// Busy time / duration (0..1).
    pub utilization: f64,
    /// Median issue→complete latency, upper bound of its log2 bucket (µs).
    pub latency_p50_us: Option<f64>,
    pub latency_p99_us: Option<f64>,
    /// The same for reads and for writes alone (None: no such request, or
    /// a session recorded before latency was split by direction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_latency_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_latency_p99_us: Option<f64>,
    /// Median creation → issue time of reads (plug, I/O scheduler queue),
    /// upper bound of its log2 bucket (µs); None when not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_queue_p50_us: Option<f64>,
    /// The session's devices stacked right on this one (a loop device
    /// whose image file lives on it, a dm/md device it is a member of):
    /// its requests carry their bytes again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carries: Vec<CarriedDevice>,
}

/// A device stacked on another one ([`DeviceFeature::carries`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CarriedDevice {
    pub name: String,
    pub via: Stacking,
}

/// The session's devices with their stacking: which devices sit right on
/// which, and each device's bytes beyond those of the devices on it (a
/// lower device's own traffic), so totals count stacked bytes once and the
/// device named is the one the files are on, not the one carrying it.
struct DeviceStack<'a> {
    devices: &'a [DeviceStats],
    /// Per device: the indices of the devices directly on it, and how.
    uppers: Vec<Vec<(usize, Stacking)>>,
}

impl<'a> DeviceStack<'a> {
    fn new(devices: &'a [DeviceStats]) -> Self {
        let is = |lower: &storprof_session::model::LowerDevice, d: &DeviceStats| {
            if lower.dev.is_empty() || d.dev.is_empty() {
                lower.name == d.name
            } else {
                lower.dev == d.dev
            }
        };
        let on = |upper: usize, lower: usize| -> Option<Stacking> {
            devices[upper]
                .sits_on
                .iter()
                .find(|l| is(l, &devices[lower]))
                .map(|l| l.via)
        };
        let uppers = (0..devices.len())
            .map(|lower| {
                let all: Vec<(usize, Stacking)> = (0..devices.len())
                    .filter(|&u| u != lower)
                    .filter_map(|u| on(u, lower).map(|via| (u, via)))
                    .collect();
                // Directly on it: not on top of another of them (loop0 on
                // dm-0 on vda: dm-0's bytes already hold loop0's).
                all.iter()
                    .filter(|&&(u, _)| !all.iter().any(|&(o, _)| o != u && on(u, o).is_some()))
                    .copied()
                    .collect()
            })
            .collect();
        DeviceStack { devices, uppers }
    }

    /// Device `i`'s bytes (`bytes` of it) beyond those of the devices
    /// directly on it.
    fn own(&self, i: usize, bytes: fn(&DeviceStats) -> u64) -> u64 {
        let carried: u64 = self.uppers[i]
            .iter()
            .map(|&(u, _)| bytes(&self.devices[u]))
            .fold(0, u64::saturating_add);
        bytes(&self.devices[i]).saturating_sub(carried)
    }

    /// The sum of every device's own `bytes`: stacked bytes once.
    fn total(&self, bytes: fn(&DeviceStats) -> u64) -> u64 {
        (0..self.devices.len())
            .map(|i| self.own(i, bytes))
            .fold(0, u64::saturating_add)
    }

    /// The device with the most own `bytes` (a disk only carrying a loop
    /// device's image gives way to the loop device), ties to a real disk,
    /// then to `tie` (larger first), then by name; None when no device
    /// has any.
    fn top(&self, bytes: fn(&DeviceStats) -> u64, tie: &dyn Fn(usize) -> u64) -> Option<usize> {
        (0..self.devices.len())
            .filter(|&i| bytes(&self.devices[i]) > 0)
            .max_by(|&a, &b| {
                let key = |i: usize| {
                    (
                        self.own(i, bytes),
                        !is_virtual_device(&self.devices[i].name),
                        tie(i),
                    )
                };
                key(a)
                    .cmp(&key(b))
                    .then_with(|| self.devices[b].name.cmp(&self.devices[a].name))
            })
    }

    fn feature(&self, i: usize, duration_s: f64) -> DeviceFeature {
        DeviceFeature {
            carries: self.uppers[i]
                .iter()
                .map(|&(u, via)| CarriedDevice {
                    name: self.devices[u].name.clone(),
                    via,
                })
                .collect(),
            ..device_feature(&self.devices[i], duration_s)
        }
    }
}

/// The simulated accelerator: threads asleep in nanosleep most of their life.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsumerFeature {
    pub comm: String,
    pub tids: Vec<u32>,
    /// Time in nanosleep / thread time (an AU estimate from the kernel
    /// side); with the wake-up graph, the kernel-measured AU over the
    /// training window (1 − data-wait share).
    pub sleep_share: f64,
    /// The share came from the wake-up graph's data wait.
    #[serde(default)]
    pub from_wait_graph: bool,
    /// The consumers' own writes and the window time around them, when
    /// they wrote (a trainer saving checkpoints in its own thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<ConsumerWrites>,
}

/// The consumers' training window split, for consumers that wrote: the
/// shares are of their summed window time (wake-up graph).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsumerWrites {
    /// Write-syscall bytes of the consumer threads.
    pub write_bytes: u64,
    /// The consumers' summed window time, s.
    pub window_s: f64,
    /// Computing: the rest of the window (timed sleeps for a consumer that
    /// emulates compute, on CPU as well for one that does not).
    pub compute_share: f64,
    /// Waiting for data.
    pub data_wait_share: f64,
    /// Neither: their own work, where a checkpoint save goes.
    pub own_share: f64,
    /// Of the own time, in uninterruptible (D) waits: fsync, writeback.
    pub own_io_share: f64,
}

/// Figures of the `storprof bench` run, when the command was one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BenchFeature {
    pub au_percentage: Option<f64>,
    pub au_expected_percentage: Option<f64>,
    pub computation_time_s: Option<f64>,
    pub throughput_samples_per_second: Option<f64>,
    /// DLIO's I/O figure: samples/s × record size, not measured.
    pub derived_io_mib_per_s: Option<f64>,
    /// What the reader really read, per the bench itself.
    pub measured_read_mib_per_s: Option<f64>,
    pub read_amplification: Option<f64>,
    /// measured / derived, when both exist.
    pub measured_over_derived: Option<f64>,
}

/// The writers' figures: threads that returned at least
/// `writer_write_fraction` of all write-syscall bytes. Shares are of the
/// writers' summed thread time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriteFeatures {
    /// Write-syscall bytes ≥ `writer_min_write_bytes` and ≥
    /// `write_dominated_factor` × read bytes: the write rules apply.
    pub write_dominated: bool,
    pub writer_threads: usize,
    pub writer_comms: Vec<String>,
    /// Sum of writer thread time (s).
    pub writer_thread_s: f64,
    /// Bytes returned by write-family syscalls of all traced threads.
    pub write_syscall_bytes: u64,
    pub write_syscall_mib_per_s: f64,
    /// fsync/fdatasync/sync_file_range/msync calls of the writers.
    pub writer_sync_calls: u64,
    /// Time inside those calls / writer time.
    pub writer_sync_share: f64,
    /// Off-CPU time in [`WRITEBACK_WAIT_FRAMES`] outside fsync-family calls
    /// / writer time: throttled for dirtying pages, or waiting for pages
    /// under writeback.
    pub writer_writeback_wait_share: f64,
    /// The [`DIRTY_THROTTLE_FRAMES`] part of it.
    pub writer_dirty_throttle_share: f64,
    pub writer_on_cpu_share: f64,
    /// Uninterruptible (D) sleep / writer time.
    pub writer_blocked_io_share: f64,
    /// Of writer CPU samples, the share in user space (None: no samples).
    pub writer_user_share: Option<f64>,
    /// Of writer CPU samples, the share in the kernel write path
    /// ([`WRITE_PATH_FRAMES`]); the rest is making the data.
    pub writer_write_path_share: f64,
    /// Bytes the block devices wrote during the recording, stacked
    /// devices' bytes once (a disk's beyond those of a loop or dm device
    /// on it).
    pub device_write_bytes: u64,
    /// device_write_bytes / write_syscall_bytes (None: nothing written).
    pub device_over_written: Option<f64>,
    /// The device that wrote the most of its own: a disk that only wrote
    /// a loop device's image (or a dm device's blocks) gives way to that
    /// device.
    pub top_write_device: Option<DeviceFeature>,
    /// No fsync-family call, and devices wrote less than
    /// `write_memory_only_device_ratio` of the bytes: the data only reached
    /// memory (the page cache) while recording.
    pub only_in_memory: bool,
    /// Off-CPU time under [`WRITE_SYSCALL_FRAMES`] outside fsync-family
    /// calls and outside [`WRITEBACK_WAIT_FRAMES`] / writer time: blocked
    /// in a write call for another reason (locks, allocation, the device
    /// for a direct write).
    #[serde(default)]
    pub writer_write_other_wait_share: f64,
    /// The writers' time split, from the shares above.
    #[serde(default)]
    pub time_split: WriterTimeSplit,
    /// Each writer thread's own split (sessions with per-thread stacks),
    /// most bytes first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writers: Vec<WriterRow>,
    /// The system's dirty page cache over the recording (None: the session
    /// has no /proc/vmstat series).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty: Option<DirtyPages>,
}

/// Where writer time went, as shares of writer thread time. On-CPU time
/// is split by the CPU samples (user space, the kernel write path, the rest
/// of the kernel); blocked time by the off-CPU stacks and syscall times
/// the write rules use. `other_off_cpu` is what is left (sleeping outside
/// these, waiting for a CPU); fsync-family time is the calls' whole time,
/// so the parts can overlap by the CPU time spent inside them and
/// `other_off_cpu` is clamped at 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriterTimeSplit {
    pub on_cpu_user: f64,
    /// In the kernel write path (copying data into the page cache).
    pub on_cpu_write_path: f64,
    pub on_cpu_other_kernel: f64,
    /// `writer_write_other_wait_share`.
    pub write_blocked: f64,
    /// `writer_sync_share`.
    pub fsync_blocked: f64,
    /// `writer_writeback_wait_share`: throttled in balance_dirty_pages or
    /// waiting for pages under writeback.
    pub writeback_wait: f64,
    /// `writer_dirty_throttle_share`, the balance_dirty_pages part of it.
    pub dirty_throttle: f64,
    pub other_off_cpu: f64,
}

/// One writer thread and its time split.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriterRow {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub write_bytes: u64,
    /// Thread time (s).
    pub thread_s: f64,
    pub split: WriterTimeSplit,
}

/// Dirty and under-writeback page cache, system-wide, from the session's
/// /proc/vmstat series (MiB).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DirtyPages {
    pub dirty_peak_mib: f64,
    pub dirty_mean_mib: f64,
    pub writeback_peak_mib: f64,
    pub writeback_mean_mib: f64,
    /// Made dirty / written back during the recording.
    pub dirtied_mib: f64,
    pub written_mib: f64,
}

impl DirtyPages {
    /// The figures of a series (None: no buckets).
    pub fn from_series(vm: &storprof_session::model::VmstatSeries) -> Option<Self> {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let peak = |v: &[u64]| mib(v.iter().copied().max().unwrap_or(0));
        let mean = |v: &[u64]| mib(v.iter().sum::<u64>()) / v.len().max(1) as f64;
        (!vm.dirty_bytes.is_empty()).then(|| Self {
            dirty_peak_mib: peak(&vm.dirty_bytes),
            dirty_mean_mib: mean(&vm.dirty_bytes),
            writeback_peak_mib: peak(&vm.writeback_bytes),
            writeback_mean_mib: mean(&vm.writeback_bytes),
            dirtied_mib: mib(vm.dirtied_bytes.iter().sum()),
            written_mib: mib(vm.written_bytes.iter().sum()),
        })
    }
}

impl WriteFeatures {
    /// Of writer CPU, the share that is not the kernel write path.
    pub fn own_work_share(&self) -> f64 {
        (1.0 - self.writer_write_path_share).clamp(0.0, 1.0)
    }
}

/// Off-CPU time (ns) of `stacks` (µs weights) matching `patterns` but not
/// under any of `outside` frames; kernel frames only.
fn offcpu_ns_outside(stacks: &FoldedStacks, patterns: &[&str], outside: &[&str]) -> f64 {
    let has = |stack: &str, names: &[&str]| {
        stack
            .split(';')
            .skip(1)
            .any(|f| frames::is_kernel_frame(f) && names.iter().any(|p| f.contains(p)))
    };
    stacks
        .stacks
        .iter()
        .filter(|(s, _)| has(s, patterns) && !has(s, outside))
        .map(|(_, n)| *n as f64 * 1e3)
        .sum::<f64>()
        // An empty f64 sum is -0.0; written as "-0.0" in verdict.json.
        + 0.0
}

/// The time figures of a group of writer threads, from their statistics
/// and their stacks (on-CPU samples; off-CPU µs): one computation for the
/// writers together (the write rules' features) and for each writer.
struct WriterTime {
    life_ns: f64,
    sync_calls: u64,
    sync_share: f64,
    writeback_wait_share: f64,
    dirty_throttle_share: f64,
    write_other_wait_share: f64,
    on_cpu_share: f64,
    blocked_io_share: f64,
    user_share: Option<f64>,
    write_path_share: f64,
}

impl WriterTime {
    fn of(
        session: &Session,
        writers: &[&ThreadStats],
        oncpu: &FoldedStacks,
        offcpu: &FoldedStacks,
    ) -> Self {
        let sum =
            |f: &dyn Fn(&ThreadStats) -> u64| writers.iter().map(|w| f(w)).sum::<u64>() as f64;
        let life = sum(&thread_ns);
        let freq = session.info.freq_hz.max(1) as f64;
        let sync_calls = writers
            .iter()
            .flat_map(|w| w.syscalls.iter())
            .filter(|s| is_syscall(s, SYNC_NAMES, SYNC_NRS))
            .map(|s| s.count)
            .sum();
        // Blocked-time sessions add the calls' CPU time (samples inside them).
        let sync_ns = sum(&|w| syscall_ns(w, SYNC_NAMES, SYNC_NRS))
            + if syscall_times_are_blocked_time(session) {
                frames::share_matching(oncpu, SYNC_FRAMES, true) * oncpu.total() as f64 / freq * 1e9
            } else {
                0.0
            };
        let samples_user = sum(&|w| w.samples_user);
        let samples_kernel = sum(&|w| w.samples_kernel);
        let user_share = if samples_user + samples_kernel > 0.0 {
            Some(samples_user / (samples_user + samples_kernel))
        } else {
            frames::kernel_leaf_share(oncpu).map(|k| 1.0 - k)
        };
        let not_write_other: Vec<&str> = SYNC_FRAMES
            .iter()
            .chain(WRITEBACK_WAIT_FRAMES)
            .copied()
            .collect();
        Self {
            life_ns: life,
            sync_calls,
            sync_share: ratio(sync_ns, life),
            writeback_wait_share: ratio(
                offcpu_ns_outside(offcpu, WRITEBACK_WAIT_FRAMES, SYNC_FRAMES),
                life,
            ),
            dirty_throttle_share: ratio(
                offcpu_ns_outside(offcpu, DIRTY_THROTTLE_FRAMES, SYNC_FRAMES),
                life,
            ),
            write_other_wait_share: ratio(
                offcpu_ns_outside(offcpu, WRITE_SYSCALL_FRAMES, &not_write_other),
                life,
            ),
            on_cpu_share: ratio(sum(&|w| w.on_cpu_ns), life),
            blocked_io_share: ratio(sum(&|w| w.off_cpu_ns.uninterruptible), life),
            user_share,
            write_path_share: frames::share_matching(oncpu, WRITE_PATH_FRAMES, true),
        }
    }

    fn split(&self) -> WriterTimeSplit {
        let on_cpu = self.on_cpu_share;
        // No samples: no user share, the on-CPU time stays "other kernel"
        // but for the write path the stacks saw.
        let user = on_cpu * self.user_share.unwrap_or(0.0);
        let write_path = (on_cpu * self.write_path_share).min(on_cpu - user);
        let blocked = self.write_other_wait_share + self.sync_share + self.writeback_wait_share;
        WriterTimeSplit {
            on_cpu_user: user,
            on_cpu_write_path: write_path,
            on_cpu_other_kernel: on_cpu - user - write_path,
            write_blocked: self.write_other_wait_share,
            fsync_blocked: self.sync_share,
            writeback_wait: self.writeback_wait_share,
            dirty_throttle: self.dirty_throttle_share,
            other_off_cpu: (1.0 - on_cpu - blocked).max(0.0),
        }
    }
}

/// Stacks whose first frame (the comm) is one of `comms`.
fn stacks_of_comms(stacks: &FoldedStacks, comms: &BTreeSet<String>) -> FoldedStacks {
    FoldedStacks {
        stacks: stacks
            .stacks
            .iter()
            .filter(|(s, _)| comms.contains(s.split(';').next().unwrap_or("")))
            .cloned()
            .collect(),
    }
}

/// Per-thread stacks (`comm;[pid/tid];...`) of thread `tid`.
fn stacks_of_thread(stacks: &FoldedStacks, pid: u32, tid: u32) -> FoldedStacks {
    let marker = format!("[{pid}/{tid}]");
    FoldedStacks {
        stacks: stacks
            .stacks
            .iter()
            .filter(|(s, _)| s.split(';').nth(1) == Some(marker.as_str()))
            .cloned()
            .collect(),
    }
}

fn extract_writes(session: &Session, t: &Thresholds, app_read_bytes: u64) -> WriteFeatures {
    let duration_s = session.duration_s();
    let threads = &session.threads;
    let total_write: u64 = threads.iter().map(|t| t.write_bytes).sum();
    let floor = ((total_write as f64 * t.writer_write_fraction) as u64).max(1);
    let writers: Vec<&ThreadStats> = threads.iter().filter(|t| t.write_bytes >= floor).collect();
    let comms: BTreeSet<String> = writers.iter().map(|w| w.comm.clone()).collect();
    let all = WriterTime::of(
        session,
        &writers,
        &stacks_of_comms(&session.oncpu, &comms),
        &stacks_of_comms(&session.offcpu, &comms),
    );
    // Per writer only with per-thread stacks: the per-comm ones would
    // give every writer of a name the whole group's waits.
    let per_thread_stacks =
        !session.oncpu_threads.stacks.is_empty() || !session.offcpu_threads.stacks.is_empty();
    let mut rows: Vec<WriterRow> = if per_thread_stacks {
        writers
            .iter()
            .map(|w| {
                let time = WriterTime::of(
                    session,
                    &[*w],
                    &stacks_of_thread(&session.oncpu_threads, w.pid, w.tid),
                    &stacks_of_thread(&session.offcpu_threads, w.pid, w.tid),
                );
                WriterRow {
                    pid: w.pid,
                    tid: w.tid,
                    comm: w.comm.clone(),
                    write_bytes: w.write_bytes,
                    thread_s: time.life_ns / 1e9,
                    split: time.split(),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    rows.sort_by(|a, b| b.write_bytes.cmp(&a.write_bytes).then(a.tid.cmp(&b.tid)));
    let stack = DeviceStack::new(&session.io.devices);
    let device_write_bytes = stack.total(|d| d.write_bytes);
    let top_write_device = stack
        .top(|d| d.write_bytes, &|_| 0)
        .map(|i| stack.feature(i, duration_s));
    let device_over_written =
        (total_write > 0).then(|| device_write_bytes as f64 / total_write as f64);
    let write_dominated = total_write >= t.writer_min_write_bytes
        && total_write as f64 >= t.write_dominated_factor * app_read_bytes as f64;
    WriteFeatures {
        write_dominated,
        writer_threads: writers.len(),
        writer_comms: comms.iter().cloned().collect(),
        writer_thread_s: all.life_ns / 1e9,
        write_syscall_bytes: total_write,
        write_syscall_mib_per_s: mib_per_s(total_write, duration_s),
        writer_sync_calls: all.sync_calls,
        writer_sync_share: all.sync_share,
        writer_writeback_wait_share: all.writeback_wait_share,
        writer_dirty_throttle_share: all.dirty_throttle_share,
        writer_on_cpu_share: all.on_cpu_share,
        writer_blocked_io_share: all.blocked_io_share,
        writer_user_share: all.user_share,
        writer_write_path_share: all.write_path_share,
        device_write_bytes,
        device_over_written,
        top_write_device,
        only_in_memory: write_dominated
            && all.sync_calls == 0
            && device_over_written.is_some_and(|r| r < t.write_memory_only_device_ratio),
        writer_write_other_wait_share: all.write_other_wait_share,
        time_split: all.split(),
        writers: rows,
        dirty: session
            .timeseries
            .as_ref()
            .and_then(|ts| ts.vmstat.as_ref())
            .and_then(DirtyPages::from_series),
    }
}

/// Everything the verdict rules look at.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Features {
    pub duration_s: f64,
    /// No progress at the end of the data ([`super::stall::detect`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<super::stall::Stall>,
    pub num_cpus: u32,
    pub threads_total: usize,
    pub processes_total: usize,
    pub reader_selection: Option<ReaderSelection>,
    pub reader_threads: usize,
    pub reader_comms: Vec<String>,
    /// Sum of reader thread time (s).
    pub reader_thread_s: f64,
    pub reader_on_cpu_share: f64,
    pub reader_runnable_share: f64,
    pub reader_sleeping_share: f64,
    /// Uninterruptible (D) share: block I/O and page-cache misses.
    pub reader_blocked_io_share: f64,
    /// Of reader on-CPU samples, the share in user space (None: no samples).
    pub reader_user_share: Option<f64>,
    /// Of reader on-CPU samples, the share copying file data out of the page
    /// cache ([`CACHE_COPY_FRAMES`]); 0 without samples.
    #[serde(default)]
    pub reader_cache_copy_share: f64,
    pub reader_read_syscall_share: f64,
    pub reader_futex_share: f64,
    pub reader_socket_recv_share: f64,
    /// Waiting for CPython's GIL (wake-up graph sessions with Python
    /// stacks): CPU the readers wanted while another thread held the
    /// interpreter.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub reader_gil_share: f64,
    /// Reclaim, swap-in and OOM stacks (off-CPU and on-CPU) / reader thread time.
    pub reader_reclaim_share: f64,
    pub oom_killed: bool,
    /// Σ on-CPU of all traced threads / duration: CPUs kept busy.
    pub cpus_used: f64,
    /// Threads on CPU or runnable at least `busy_thread_share` of their life.
    pub busy_threads: u32,
    /// Σ (on CPU + runnable) of all traced threads / duration: threads wanting
    /// a CPU at the same time on average (a load average of the command).
    /// Unlike `busy_threads` it does not add up threads that never overlapped
    /// (workers started anew each epoch).
    #[serde(default)]
    pub cpu_demand_threads: f64,
    pub read_syscall_bytes: u64,
    pub read_syscall_mib_per_s: f64,
    /// Bytes a `storprof bench` read beyond what its read syscalls returned:
    /// read through file mappings (its default for local files), which no
    /// syscall counter sees. 0 without a bench.
    #[serde(default)]
    pub mapped_read_bytes: u64,
    /// Device read bytes attributed to traced processes when the kernel gave
    /// pids, else all device reads (the block layer is system-wide).
    pub device_read_bytes: u64,
    /// Bytes of pages traced threads added to the page cache outside
    /// write-family syscalls: read misses, which storage supplied.
    pub page_cache_miss_bytes: u64,
    /// Bytes of pages traced threads' buffered writes added to the page
    /// cache (0 in sessions recorded before they were counted apart, whose
    /// misses include them).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub page_cache_write_bytes: u64,
    /// Share of read-syscall bytes not fetched from storage (None: no reads).
    pub page_cache_hit_ratio: Option<f64>,
    /// The device that served the most reads of its own, as for
    /// [`WriteFeatures::top_write_device`] (without reads: the busiest).
    pub top_device: Option<DeviceFeature>,
    /// The tightest read limit a traced process's cgroup sets on the top
    /// device (cgroup v1 blkio throttle or v2 io.max).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_limit: Option<IoLimitFeature>,
    pub devices: Vec<DeviceFeature>,
    pub consumer: Option<ConsumerFeature>,
    pub bench: Option<BenchFeature>,
    /// The writers' figures, when anything was written
    /// (≥ `writer_min_write_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<WriteFeatures>,
    pub lost_events: u64,
    pub missing_files: Vec<String>,
}

/// A cgroup's read limit on a device, as the verdict names it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IoLimitFeature {
    pub cgroup: String,
    /// "blkio" or "io.max".
    pub kind: String,
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_mib_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_iops: Option<u64>,
}

/// The tightest read limit (bytes first) of `limits` on the device named
/// `device`.
fn read_limit_on(
    limits: &[storprof_session::model::IoLimit],
    devices: &[DeviceStats],
    device: &str,
) -> Option<IoLimitFeature> {
    let dev = devices.iter().find(|d| d.name == device)?.dev.clone();
    limits
        .iter()
        .filter(|l| l.device == dev && (l.read_bps.is_some() || l.read_iops.is_some()))
        .min_by_key(|l| {
            (
                l.read_bps.unwrap_or(u64::MAX),
                l.read_iops.unwrap_or(u64::MAX),
            )
        })
        .map(|l| IoLimitFeature {
            cgroup: l.cgroup.clone(),
            kind: l.kind.clone(),
            device: device.to_string(),
            read_mib_per_s: l.read_bps.map(|b| b as f64 / (1 << 20) as f64),
            read_iops: l.read_iops,
        })
}

/// The value of option `name` in an argv (`--name VALUE` or `--name=VALUE`).
pub fn arg_value<'a>(argv: &'a [String], name: &str) -> Option<&'a str> {
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if a == name {
            return it.next().map(String::as_str);
        }
        if let Some(v) = a.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
            return Some(v);
        }
    }
    None
}

/// True when the recorded command is `storprof bench` (any path to storprof).
pub fn is_storprof_bench(argv: &[String]) -> bool {
    argv.windows(2)
        .any(|w| w[0].rsplit('/').next() == Some("storprof") && w[1] == "bench")
}

/// Upper bound (µs) of the log2 bucket holding quantile `q` of a histogram.
pub fn log2_quantile_us(hist: &[u64], q: f64) -> Option<f64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let target = (q * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, n) in hist.iter().enumerate() {
        seen += n;
        if seen >= target {
            return Some(2f64.powi(i as i32 + 1) / 1e3);
        }
    }
    None
}

/// The window split of consumers that wrote; None when none did.
fn consumer_writes(consumers: &[super::waitgraph::ConsumerTime]) -> Option<ConsumerWrites> {
    let write_bytes: u64 = consumers.iter().map(|c| c.write_bytes).sum();
    let window_ns: u64 = consumers.iter().map(|c| c.window_ns).sum();
    if write_bytes == 0 || window_ns == 0 {
        return None;
    }
    let share = |ns: u64| ns as f64 / window_ns as f64;
    let sum = |part: fn(&super::waitgraph::ConsumerTime) -> u64| -> u64 {
        consumers.iter().map(part).sum()
    };
    let own_ns = sum(|c| c.own_ns);
    let data_wait_share = share(sum(|c| c.data_wait_ns));
    let own_share = share(own_ns);
    Some(ConsumerWrites {
        write_bytes,
        window_s: window_ns as f64 / 1e9,
        // The rest of the window: timed sleeps are summed over the whole
        // wait that ended in the window, so they can exceed it.
        compute_share: (1.0 - data_wait_share - own_share).max(0.0),
        data_wait_share,
        own_share,
        own_io_share: if own_ns == 0 {
            0.0
        } else {
            sum(|c| c.own_io_ns) as f64 / own_ns as f64
        },
    })
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

fn mib_per_s(bytes: u64, duration_s: f64) -> f64 {
    if duration_s > 0.0 {
        bytes as f64 / (1 << 20) as f64 / duration_s
    } else {
        0.0
    }
}

fn device_feature(d: &DeviceStats, duration_s: f64) -> DeviceFeature {
    let utilization = if d.utilization > 0.0 {
        d.utilization
    } else {
        ratio(d.busy_ns as f64, duration_s * 1e9)
    };
    DeviceFeature {
        name: d.name.clone(),
        read_bytes: d.read_bytes,
        read_mib_per_s: if duration_s > 0.0 {
            d.read_bytes as f64 / (1 << 20) as f64 / duration_s
        } else {
            0.0
        },
        read_requests: d.read_requests,
        write_bytes: d.write_bytes,
        write_mib_per_s: mib_per_s(d.write_bytes, duration_s),
        utilization,
        latency_p50_us: log2_quantile_us(&d.latency_log2_ns, 0.5),
        latency_p99_us: log2_quantile_us(&d.latency_log2_ns, 0.99),
        read_latency_p50_us: log2_quantile_us(&d.read_latency_log2_ns, 0.5),
        read_latency_p99_us: log2_quantile_us(&d.read_latency_log2_ns, 0.99),
        write_latency_p50_us: log2_quantile_us(&d.write_latency_log2_ns, 0.5),
        write_latency_p99_us: log2_quantile_us(&d.write_latency_log2_ns, 0.99),
        read_queue_p50_us: log2_quantile_us(&d.read_queue_log2_ns, 0.5),
        carries: Vec::new(),
    }
}

fn is_virtual_device(name: &str) -> bool {
    ["loop", "ram", "zram", "nbd"]
        .iter()
        .any(|p| name.starts_with(p))
}

fn select_readers<'a>(
    threads: &'a [ThreadStats],
    t: &Thresholds,
) -> (ReaderSelection, Vec<&'a ThreadStats>) {
    let total_read: u64 = threads.iter().map(|t| t.read_bytes).sum();
    if total_read >= t.reader_min_read_bytes {
        let floor = (total_read as f64 * t.reader_read_fraction) as u64;
        let readers: Vec<_> = threads
            .iter()
            .filter(|t| t.read_bytes >= floor.max(1))
            .collect();
        if !readers.is_empty() {
            return (ReaderSelection::ReadBytes, readers);
        }
    }
    let active: Vec<_> = threads
        .iter()
        .filter(|th| {
            let life = thread_ns(th) as f64;
            let busy =
                (th.on_cpu_ns + th.off_cpu_ns.runnable + th.off_cpu_ns.uninterruptible) as f64;
            let waiting = (syscall_ns(th, FUTEX_NAMES, nr::FUTEX)
                + syscall_ns(th, SOCKET_RECV_NAMES, nr::SOCKET_RECV))
                as f64;
            life > 0.0
                && (ratio(busy, life) >= t.busy_thread_share
                    || ratio(waiting, life) >= t.busy_thread_share)
        })
        .collect();
    if !active.is_empty() {
        return (ReaderSelection::Activity, active);
    }
    (ReaderSelection::All, threads.iter().collect())
}

impl Features {
    /// Replaces the reader shares by the critical path of the consumer's
    /// data waits: each share is then of the time the consumer waited for
    /// data, spent in that state by the threads it waited on (directly or
    /// through their own waits). Idle pool threads weigh nothing.
    pub fn apply_critical_path(&mut self, w: &WaitAnalysis, path_oncpu: &FoldedStacks) {
        let Some(au) = w.kernel_au_percentage else {
            return;
        };
        self.reader_selection = Some(ReaderSelection::CriticalPath);
        let threads: BTreeSet<(u32, u32)> = w
            .critical_path
            .iter()
            .flat_map(|p| p.threads.iter().map(|t| (t.0, t.1)))
            .collect();
        self.reader_threads = threads.len();
        let comms: BTreeSet<String> = w
            .critical_path
            .iter()
            .flat_map(|p| p.threads.iter().map(|t| t.2.clone()))
            .collect();
        if !comms.is_empty() {
            self.reader_comms = comms.into_iter().collect();
        }
        self.reader_thread_s = w
            .consumers
            .iter()
            .map(|c| (c.data_wait_ns + c.gil_ns) as f64 / 1e9)
            .sum();
        self.apply_path_shares(w, path_oncpu);
        if let Some(c) = w.consumers.first() {
            self.consumer = Some(ConsumerFeature {
                comm: c.comm.clone(),
                tids: w.consumers.iter().map(|c| c.tid).collect(),
                sleep_share: au / 100.0,
                from_wait_graph: true,
                writes: consumer_writes(&w.consumers),
            });
        }
    }

    /// The readers' shares by state from a wait analysis's path (of the
    /// consumer's data wait, or of the readers' own time).
    fn apply_path_shares(&mut self, w: &WaitAnalysis, path_oncpu: &FoldedStacks) {
        use super::waitgraph::PathKind as K;
        let cpu = w.share(&[K::CpuUser, K::CpuKernel]);
        let user = w.share(&[K::CpuUser]);
        self.reader_on_cpu_share = cpu;
        self.reader_user_share = (cpu > 0.0).then(|| user / cpu);
        self.reader_runnable_share = w.share(&[K::Runnable]);
        self.reader_blocked_io_share = w.share(&[K::BlockIo]);
        self.reader_futex_share = w.share(&[K::Lock]);
        self.reader_gil_share = w.share(&[K::Gil]);
        self.reader_socket_recv_share = w.share(&[K::Network]);
        self.reader_sleeping_share = w.share(&[K::Timer, K::Unattributed, K::WaitsForConsumer]);
        if !path_oncpu.is_empty() {
            self.reader_cache_copy_share =
                frames::share_matching(path_oncpu, CACHE_COPY_FRAMES, true);
        }
    }

    /// Without a consumer: the reader shares from the readers' own time in
    /// the wake-up graph (their waits sorted by what ended them: an
    /// io_uring wait for a block completion is I/O, a poll for a socket
    /// is the network).
    pub fn apply_reader_time(&mut self, w: &WaitAnalysis, path_oncpu: &FoldedStacks) {
        let total_ns: u64 = w.critical_path.iter().map(|p| p.ns).sum();
        if total_ns == 0 {
            return;
        }
        self.reader_selection = Some(ReaderSelection::ReaderTime);
        let threads: BTreeSet<(u32, u32)> = w.roles.iter().map(|r| (r.pid, r.tid)).collect();
        self.reader_threads = threads.len();
        let comms: BTreeSet<String> = w.roles.iter().map(|r| r.comm.clone()).collect();
        if !comms.is_empty() {
            self.reader_comms = comms.into_iter().collect();
        }
        self.reader_thread_s = total_ns as f64 / 1e9;
        // The wait-for graph found no consumer: a thread that only sleeps
        // (fio's status loop) is none either.
        self.consumer = None;
        self.apply_path_shares(w, path_oncpu);
    }

    /// Of reader CPU, the share that is the reader's own work: user code,
    /// faulting in its own buffers, allocation — everything but copying from
    /// the page cache. A reader that reads `a`× the bytes it returns (bench
    /// read amplification) caused `1 − 1/a` of its copies itself, so only
    /// `copy/a` is discounted. None without CPU samples.
    pub fn reader_own_work_share(&self) -> Option<f64> {
        self.reader_user_share?;
        let amplification = self
            .bench
            .as_ref()
            .and_then(|b| b.read_amplification)
            .filter(|a| a.is_finite() && *a > 1.0)
            .unwrap_or(1.0);
        Some((1.0 - self.reader_cache_copy_share / amplification).clamp(0.0, 1.0))
    }

    /// Extracts the features of `session`. Pure; never fails: absent data
    /// gives zeros and `None`s, and `missing_files` says why.
    pub fn extract(session: &Session, t: &Thresholds) -> Self {
        let duration_s = session.duration_s();
        let threads = &session.threads;
        let (selection, readers) = select_readers(threads, t);
        let reader_tids: BTreeSet<(u32, u32)> = readers.iter().map(|r| (r.pid, r.tid)).collect();
        let reader_comms: BTreeSet<String> = readers.iter().map(|r| r.comm.clone()).collect();

        let sum =
            |f: &dyn Fn(&ThreadStats) -> u64| readers.iter().map(|r| f(r)).sum::<u64>() as f64;
        let life = sum(&thread_ns);
        let on = sum(&|r| r.on_cpu_ns);
        let samples_user = sum(&|r| r.samples_user);
        let samples_kernel = sum(&|r| r.samples_kernel);
        let in_reader = |comm: &str| reader_comms.contains(comm);
        let only_readers = |stacks: &FoldedStacks| FoldedStacks {
            stacks: stacks
                .stacks
                .iter()
                .filter(|(s, _)| in_reader(s.split(';').next().unwrap_or("")))
                .cloned()
                .collect(),
        };
        let reader_oncpu = only_readers(&session.oncpu);
        let reader_offcpu = only_readers(&session.offcpu);
        // Per-thread sample counters when the recorder filled them, else the
        // leaf frames of the readers' on-CPU stacks.
        let reader_user_share = if samples_user + samples_kernel > 0.0 {
            Some(samples_user / (samples_user + samples_kernel))
        } else {
            frames::kernel_leaf_share(&reader_oncpu).map(|k| 1.0 - k)
        };

        let offcpu_ns = |patterns: &[&str]| {
            frames::share_matching(&reader_offcpu, patterns, true)
                * reader_offcpu.total() as f64
                * 1e3
        };
        let freq = session.info.freq_hz.max(1) as f64;
        let oncpu_ns = |patterns: &[&str]| {
            frames::share_matching(&reader_oncpu, patterns, true) * reader_oncpu.total() as f64
                / freq
                * 1e9
        };

        // Folded stacks name threads by comm only. When a non-reader thread
        // shares a reader's comm (threads of one program are often all
        // "python" or "storprof"), its stacks cannot be told apart: a main
        // thread parked in futex_wait would count as reader lock waits. Then
        // the per-thread syscall times (exact by tid) decide futex and socket
        // waits, and stack-based reclaim time is scaled by the readers' part
        // of those comms' off-CPU time.
        let comm_shared = threads
            .iter()
            .any(|th| !reader_tids.contains(&(th.pid, th.tid)) && reader_comms.contains(&th.comm));
        let stack_ns = |patterns: &[&str]| {
            if comm_shared {
                0.0
            } else {
                offcpu_ns(patterns)
            }
        };
        let comm_off: u64 = threads
            .iter()
            .filter(|th| reader_comms.contains(&th.comm))
            .map(|th| th.off_cpu_ns.total())
            .sum();
        let reader_part = if comm_shared {
            ratio(sum(&|r| r.off_cpu_ns.total()), comm_off as f64)
        } else {
            1.0
        };
        let futex_ns = sum(&|r| syscall_ns(r, FUTEX_NAMES, nr::FUTEX)).max(stack_ns(FUTEX_FRAMES));
        // Time in read syscalls: blocked-time sessions add the calls' CPU
        // time (the readers' samples inside them), which entry-to-exit
        // timing already holds.
        let read_syscall_ns = sum(&|r| syscall_ns(r, READ_NAMES, nr::READ_FAMILY))
            + if syscall_times_are_blocked_time(session) {
                oncpu_ns(READ_SYSCALL_FRAMES)
            } else {
                0.0
            };
        let socket_ns = sum(&|r| syscall_ns(r, SOCKET_RECV_NAMES, nr::SOCKET_RECV))
            .max(stack_ns(SOCKET_FRAMES));
        let reclaim_ns = (offcpu_ns(RECLAIM_FRAMES) + oncpu_ns(RECLAIM_FRAMES)) * reader_part;
        let oom_killed = session.info.exit_signal == Some(9)
            && session
                .info
                .notes
                .iter()
                .any(|n| n.to_ascii_lowercase().contains("oom"))
            || frames::share_matching(&session.offcpu, &["oom_kill_process"], true) > 0.0
            || frames::share_matching(&session.oncpu, &["oom_kill_process"], true) > 0.0;

        let all_on: u64 = threads.iter().map(|t| t.on_cpu_ns).sum();
        let busy_threads = threads
            .iter()
            .filter(|th| {
                let l = thread_ns(th) as f64;
                ratio((th.on_cpu_ns + th.off_cpu_ns.runnable) as f64, l) >= t.busy_thread_share
            })
            .count() as u32;

        let read_syscall_bytes: u64 = threads.iter().map(|t| t.read_bytes).sum();
        let traced_dev: u64 = session.io.devices.iter().map(|d| d.traced_read_bytes).sum();
        let stack = DeviceStack::new(&session.io.devices);
        let all_dev = stack.total(|d| d.read_bytes);
        let device_read_bytes = if traced_dev > 0 { traced_dev } else { all_dev };
        let page_size = if session.io.page_cache.page_size > 0 {
            session.io.page_cache.page_size
        } else {
            4096
        };
        // Read misses only: the pages buffered writes add are counted apart
        // (they came from the writer's memory, not from storage).
        let page_cache_miss_bytes = session.io.page_cache.misses_pages.saturating_mul(page_size);
        let page_cache_write_bytes = session.io.page_cache.write_pages.saturating_mul(page_size);
        let mapped_read_bytes = session
            .bench
            .as_ref()
            .and_then(|b| b.measured.as_ref())
            .and_then(|m| m.read_bytes)
            .map_or(0, |bench_read| {
                bench_read.saturating_sub(read_syscall_bytes)
            });
        let app_read_bytes = read_syscall_bytes + mapped_read_bytes;
        let page_cache_hit_ratio = (app_read_bytes > 0).then(|| {
            let from_storage = device_read_bytes.max(page_cache_miss_bytes) as f64;
            (1.0 - ratio(from_storage, app_read_bytes as f64)).max(0.0)
        });

        let devices: Vec<DeviceFeature> = (0..session.io.devices.len())
            .map(|i| stack.feature(i, duration_s))
            .collect();
        // The most (own) reads; without reads, the busiest.
        let top_device = stack
            .top(|d| d.read_bytes, &|i| devices[i].utilization.to_bits())
            .or_else(|| {
                (0..devices.len()).max_by(|&a, &b| {
                    (
                        !is_virtual_device(&devices[a].name),
                        devices[a].utilization.to_bits(),
                    )
                        .cmp(&(
                            !is_virtual_device(&devices[b].name),
                            devices[b].utilization.to_bits(),
                        ))
                        .then_with(|| devices[b].name.cmp(&devices[a].name))
                })
            })
            .map(|i| devices[i].clone());

        // Consumer: non-reader threads asleep in nanosleep most of their life.
        let consumer = threads
            .iter()
            .filter(|th| !reader_tids.contains(&(th.pid, th.tid)))
            .filter_map(|th| {
                let share = ratio(
                    syscall_ns(th, NANOSLEEP_NAMES, nr::NANOSLEEP) as f64,
                    thread_ns(th) as f64,
                );
                (share >= t.consumer_sleep_share).then_some((th, share))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.tid.cmp(&a.0.tid)))
            .map(|(th, share)| ConsumerFeature {
                comm: th.comm.clone(),
                tids: vec![th.tid],
                sleep_share: share,
                from_wait_graph: false,
                writes: None,
            });

        let bench = session.bench.as_ref().map(|b| {
            let measured = b.measured.as_ref().and_then(|m| m.read_mib_per_second);
            BenchFeature {
                au_percentage: b.au_mean_percentage,
                au_expected_percentage: b.au_expected.map(|a| if a <= 1.0 { a * 100.0 } else { a }),
                computation_time_s: b.computation_time_s.or_else(|| {
                    arg_value(&session.info.command, "--computation-time")
                        .and_then(|v| v.parse().ok())
                }),
                throughput_samples_per_second: b.throughput_samples_per_second,
                derived_io_mib_per_s: b.derived_io_mib_per_second,
                measured_read_mib_per_s: measured,
                read_amplification: b.measured.as_ref().and_then(|m| m.read_amplification),
                measured_over_derived: match (measured, b.derived_io_mib_per_second) {
                    (Some(m), Some(d)) if d > 0.0 => Some(m / d),
                    _ => None,
                },
            }
        });

        let processes: BTreeSet<u32> = threads.iter().map(|t| t.pid).collect();
        Self {
            duration_s,
            // Set by `analysis::analyze` (stall::detect).
            stall: None,
            num_cpus: session.info.num_cpus,
            threads_total: threads.len(),
            processes_total: processes.len(),
            reader_selection: (!threads.is_empty()).then_some(selection),
            reader_threads: readers.len(),
            reader_comms: reader_comms.into_iter().collect(),
            reader_thread_s: life / 1e9,
            reader_on_cpu_share: ratio(on, life),
            reader_runnable_share: ratio(sum(&|r| r.off_cpu_ns.runnable), life),
            reader_sleeping_share: ratio(sum(&|r| r.off_cpu_ns.sleeping), life),
            reader_blocked_io_share: ratio(sum(&|r| r.off_cpu_ns.uninterruptible), life),
            reader_user_share,
            reader_cache_copy_share: frames::share_matching(&reader_oncpu, CACHE_COPY_FRAMES, true),
            reader_read_syscall_share: ratio(read_syscall_ns, life),
            reader_futex_share: ratio(futex_ns, life),
            reader_socket_recv_share: ratio(socket_ns, life),
            reader_gil_share: 0.0,
            reader_reclaim_share: ratio(reclaim_ns, life),
            oom_killed,
            cpus_used: if duration_s > 0.0 {
                all_on as f64 / 1e9 / duration_s
            } else {
                0.0
            },
            busy_threads,
            cpu_demand_threads: if duration_s > 0.0 {
                threads
                    .iter()
                    .map(|t| (t.on_cpu_ns + t.off_cpu_ns.runnable) as f64)
                    .sum::<f64>()
                    / 1e9
                    / duration_s
            } else {
                0.0
            },
            read_syscall_bytes,
            mapped_read_bytes,
            read_syscall_mib_per_s: if duration_s > 0.0 {
                read_syscall_bytes as f64 / (1 << 20) as f64 / duration_s
            } else {
                0.0
            },
            device_read_bytes,
            page_cache_miss_bytes,
            page_cache_write_bytes,
            page_cache_hit_ratio,
            io_limit: top_device
                .as_ref()
                .and_then(|d| read_limit_on(&session.info.io_limits, &session.io.devices, &d.name)),
            top_device,
            devices,
            consumer,
            bench,
            writes: Some(extract_writes(session, t, app_read_bytes))
                .filter(|w| w.write_syscall_bytes >= t.writer_min_write_bytes),
            lost_events: session.info.lost_events.values().sum(),
            missing_files: session.missing.iter().map(|s| s.to_string()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_log2_histograms() {
        // 10 values in [1024, 2048) ns, 1 in [2^20, 2^21).
        let mut h = vec![0; 21];
        h[10] = 10;
        h[20] = 1;
        assert_eq!(log2_quantile_us(&h, 0.5), Some(2.048));
        assert_eq!(log2_quantile_us(&h, 0.99), Some(2097.152));
        assert_eq!(log2_quantile_us(&[], 0.5), None);
    }

    #[test]
    fn syscalls_match_by_name_or_number() {
        let named = SyscallStats {
            nr: 999,
            name: "pread64".into(),
            ..Default::default()
        };
        let unnamed = SyscallStats {
            nr: 202,
            name: "sys_202".into(),
            ..Default::default()
        };
        assert!(is_syscall(&named, READ_NAMES, nr::READ_FAMILY));
        assert!(is_syscall(&unnamed, FUTEX_NAMES, nr::FUTEX));
        assert!(!is_syscall(&unnamed, READ_NAMES, nr::READ_FAMILY));
    }

    /// One reader thread that read 1 GiB in page-cached preads for 1 s of
    /// its 2 s life, recorded with syscall timing `mode` (None: a session
    /// from before the option), with the blocked part of its preads
    /// `blocked_ns`.
    fn cached_reader_session(mode: Option<&str>, blocked_ns: u64) -> Session {
        let mut s = Session::default();
        s.info.freq_hz = 100;
        s.info.duration_s = 2.0;
        if let Some(mode) = mode {
            s.info.features.insert("syscall_timing".into(), mode.into());
        }
        s.threads = vec![ThreadStats {
            pid: 10,
            tid: 10,
            comm: "reader".into(),
            on_cpu_ns: 2_000_000_000,
            read_bytes: 1 << 30,
            syscalls: vec![SyscallStats {
                nr: 17,
                name: "pread64".into(),
                count: 1000,
                total_ns: blocked_ns,
                bytes: 1 << 30,
                ..Default::default()
            }],
            ..Default::default()
        }];
        // 100 of 200 samples (1 s at 100 Hz) inside the syscall.
        s.oncpu.stacks = vec![
            (
                "reader;main;read_chunk;ksys_pread64_[k];filemap_read_[k]".into(),
                100,
            ),
            ("reader;main;decode".into(), 100),
        ];
        s
    }

    #[test]
    fn blocked_time_sessions_add_the_samples_inside_read_syscalls() {
        let t = Thresholds::default();
        let blocked = Features::extract(&cached_reader_session(Some("blocked"), 0), &t);
        assert!(
            (blocked.reader_read_syscall_share - 0.5).abs() < 1e-9,
            "{}",
            blocked.reader_read_syscall_share
        );
        // Entry-to-exit times already hold the calls' CPU time: the
        // samples are not added again.
        let exact = Features::extract(&cached_reader_session(Some("exact"), 1_000_000_000), &t);
        assert!((exact.reader_read_syscall_share - 0.5).abs() < 1e-9);
        let before = Features::extract(&cached_reader_session(None, 0), &t);
        assert_eq!(before.reader_read_syscall_share, 0.0);
    }
}

#[cfg(test)]
mod tests_support {
    use super::*;

    /// A reader that read 1 GiB from the page cache in 2 s, mostly on CPU.
    pub fn cached_reader() -> Session {
        let mut s = Session::default();
        s.info.freq_hz = 100;
        s.info.duration_s = 2.0;
        s.info.num_cpus = 2;
        s.threads = vec![ThreadStats {
            pid: 10,
            tid: 10,
            comm: "reader".into(),
            on_cpu_ns: 2_000_000_000,
            read_bytes: 1 << 30,
            syscalls: vec![SyscallStats {
                nr: 17,
                name: "pread64".into(),
                count: 1000,
                total_ns: 1_000_000_000,
                bytes: 1 << 30,
                ..Default::default()
            }],
            ..Default::default()
        }];
        s.oncpu.stacks = vec![
            (
                "reader;main;read_chunk;ksys_pread64_[k];filemap_read_[k]".into(),
                150,
            ),
            ("reader;main;decode".into(), 50),
        ];
        s
    }
}

/// Write features on a read session (the write rules' own tests, with
/// their wording, are the profiler's `output::verdict_tests`).
#[cfg(test)]
mod read_sessions_and_writes {
    use super::*;
    use crate::{
        frames::HotFrames,
        verdict::{Decision, decide},
    };

    fn decision(s: &Session) -> (Features, Decision) {
        let t = Thresholds::default();
        let f = Features::extract(s, &t);
        let d = decide(&f, &HotFrames::default(), &t);
        (f, d)
    }

    /// A read session with a little logging keeps the verdict it has
    /// without any writes, and no write finding fires.
    #[test]
    fn read_sessions_keep_their_verdicts() {
        let mut read = super::tests_support::cached_reader();
        let (f0, d0) = decision(&read);
        assert!(f0.writes.is_none());
        read.threads[0].write_bytes = 16 << 20;
        read.io.devices = vec![DeviceStats {
            name: "vda".into(),
            write_bytes: 16 << 20,
            ..Default::default()
        }];
        let (f1, d1) = decision(&read);
        assert!(!f1.writes.as_ref().unwrap().write_dominated);
        assert_eq!(d1.primary.verdict, d0.primary.verdict);
        assert_eq!(d1.primary.fired, d0.primary.fired);
        assert!(
            !d1.runners_up
                .iter()
                .any(|r| r.verdict.is_write() && r.fired)
        );
        // The features of a session without writes serialize as before.
        let json = serde_json::to_string(&f0).unwrap();
        assert!(!json.contains("\"writes\""), "{json}");
    }
}
