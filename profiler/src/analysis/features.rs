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
use crate::session::{
    load::{FoldedStacks, Session},
    model::{DeviceStats, SyscallStats, ThreadStats},
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
    /// Bytes the block devices wrote during the recording.
    pub device_write_bytes: u64,
    /// device_write_bytes / write_syscall_bytes (None: nothing written).
    pub device_over_written: Option<f64>,
    /// The device that wrote the most.
    pub top_write_device: Option<DeviceFeature>,
    /// No fsync-family call, and devices wrote less than
    /// `write_memory_only_device_ratio` of the bytes: the data only reached
    /// memory (the page cache) while recording.
    pub only_in_memory: bool,
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

fn extract_writes(session: &Session, t: &Thresholds, app_read_bytes: u64) -> WriteFeatures {
    let duration_s = session.duration_s();
    let threads = &session.threads;
    let total_write: u64 = threads.iter().map(|t| t.write_bytes).sum();
    let floor = ((total_write as f64 * t.writer_write_fraction) as u64).max(1);
    let writers: Vec<&ThreadStats> = threads.iter().filter(|t| t.write_bytes >= floor).collect();
    let comms: BTreeSet<String> = writers.iter().map(|w| w.comm.clone()).collect();
    let sum = |f: &dyn Fn(&ThreadStats) -> u64| writers.iter().map(|w| f(w)).sum::<u64>() as f64;
    let life = sum(&thread_ns);
    let only_writers = |stacks: &FoldedStacks| FoldedStacks {
        stacks: stacks
            .stacks
            .iter()
            .filter(|(s, _)| comms.contains(s.split(';').next().unwrap_or("")))
            .cloned()
            .collect(),
    };
    let oncpu = only_writers(&session.oncpu);
    let offcpu = only_writers(&session.offcpu);
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
            frames::share_matching(&oncpu, SYNC_FRAMES, true) * oncpu.total() as f64 / freq * 1e9
        } else {
            0.0
        };
    let samples_user = sum(&|w| w.samples_user);
    let samples_kernel = sum(&|w| w.samples_kernel);
    let writer_user_share = if samples_user + samples_kernel > 0.0 {
        Some(samples_user / (samples_user + samples_kernel))
    } else {
        frames::kernel_leaf_share(&oncpu).map(|k| 1.0 - k)
    };
    let device_write_bytes: u64 = session.io.devices.iter().map(|d| d.write_bytes).sum();
    let top_write_device = session
        .io
        .devices
        .iter()
        .max_by(|a, b| {
            (a.write_bytes, !is_virtual_device(&a.name))
                .cmp(&(b.write_bytes, !is_virtual_device(&b.name)))
                .then_with(|| b.name.cmp(&a.name))
        })
        .filter(|d| d.write_bytes > 0)
        .map(|d| device_feature(d, duration_s));
    let device_over_written =
        (total_write > 0).then(|| device_write_bytes as f64 / total_write as f64);
    let write_dominated = total_write >= t.writer_min_write_bytes
        && total_write as f64 >= t.write_dominated_factor * app_read_bytes as f64;
    WriteFeatures {
        write_dominated,
        writer_threads: writers.len(),
        writer_comms: comms.iter().cloned().collect(),
        writer_thread_s: life / 1e9,
        write_syscall_bytes: total_write,
        write_syscall_mib_per_s: mib_per_s(total_write, duration_s),
        writer_sync_calls: sync_calls,
        writer_sync_share: ratio(sync_ns, life),
        writer_writeback_wait_share: ratio(
            offcpu_ns_outside(&offcpu, WRITEBACK_WAIT_FRAMES, SYNC_FRAMES),
            life,
        ),
        writer_dirty_throttle_share: ratio(
            offcpu_ns_outside(&offcpu, DIRTY_THROTTLE_FRAMES, SYNC_FRAMES),
            life,
        ),
        writer_on_cpu_share: ratio(sum(&|w| w.on_cpu_ns), life),
        writer_blocked_io_share: ratio(sum(&|w| w.off_cpu_ns.uninterruptible), life),
        writer_user_share,
        writer_write_path_share: frames::share_matching(&oncpu, WRITE_PATH_FRAMES, true),
        device_write_bytes,
        device_over_written,
        top_write_device,
        only_in_memory: write_dominated
            && sync_calls == 0
            && device_over_written.is_some_and(|r| r < t.write_memory_only_device_ratio),
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
    pub page_cache_miss_bytes: u64,
    /// Share of read-syscall bytes not fetched from storage (None: no reads).
    pub page_cache_hit_ratio: Option<f64>,
    /// The device that served the most reads (or the busiest).
    pub top_device: Option<DeviceFeature>,
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
        use super::waitgraph::PathKind as K;
        let Some(au) = w.kernel_au_percentage else {
            return;
        };
        let cpu = w.share(&[K::CpuUser, K::CpuKernel]);
        let user = w.share(&[K::CpuUser]);
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
            .map(|c| c.data_wait_ns as f64 / 1e9)
            .sum();
        self.reader_on_cpu_share = cpu;
        self.reader_user_share = (cpu > 0.0).then(|| user / cpu);
        self.reader_runnable_share = w.share(&[K::Runnable]);
        self.reader_blocked_io_share = w.share(&[K::BlockIo]);
        self.reader_futex_share = w.share(&[K::Lock]);
        self.reader_socket_recv_share = w.share(&[K::Network]);
        self.reader_sleeping_share = w.share(&[K::Timer, K::Unattributed, K::WaitsForConsumer]);
        if !path_oncpu.is_empty() {
            self.reader_cache_copy_share =
                frames::share_matching(path_oncpu, CACHE_COPY_FRAMES, true);
        }
        if let Some(c) = w.consumers.first() {
            self.consumer = Some(ConsumerFeature {
                comm: c.comm.clone(),
                tids: w.consumers.iter().map(|c| c.tid).collect(),
                sleep_share: au / 100.0,
                from_wait_graph: true,
            });
        }
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
        let all_dev: u64 = session.io.devices.iter().map(|d| d.read_bytes).sum();
        let device_read_bytes = if traced_dev > 0 { traced_dev } else { all_dev };
        let page_cache_miss_bytes = session.io.page_cache.misses_pages
            * if session.io.page_cache.page_size > 0 {
                session.io.page_cache.page_size
            } else {
                4096
            };
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

        let devices: Vec<DeviceFeature> = session
            .io
            .devices
            .iter()
            .map(|d| device_feature(d, duration_s))
            .collect();
        let top_device = devices
            .iter()
            .max_by(|a, b| {
                (
                    a.read_bytes,
                    !is_virtual_device(&a.name),
                    a.utilization.to_bits(),
                )
                    .cmp(&(
                        b.read_bytes,
                        !is_virtual_device(&b.name),
                        b.utilization.to_bits(),
                    ))
                    .then_with(|| b.name.cmp(&a.name))
            })
            .cloned();

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
            page_cache_hit_ratio,
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
#[allow(clippy::unwrap_used)]
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

/// The write rules on synthetic sessions: each fires on its own kind of
/// session and not on the others, and read sessions keep their verdicts.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod write_rule_tests {
    use super::*;
    use crate::analysis::frames::HotFrames;
    use crate::analysis::verdict::{Decision, Note, VerdictId, decide};
    use crate::session::model::{DeviceStats, OffCpuNs};

    const GIB: u64 = 1 << 30;
    const S: u64 = 1_000_000_000;

    /// One checkpoint writer ("ckpt") alive 10 s that wrote 4 GiB, a vda
    /// that wrote `device_write` bytes at `util`.
    fn writer_session(
        on_cpu_s: u64,
        d_state_s: u64,
        syscalls: Vec<SyscallStats>,
        device_write: u64,
        util: f64,
    ) -> Session {
        let mut s = Session::default();
        s.info.freq_hz = 100;
        s.info.duration_s = 10.0;
        s.info.num_cpus = 2;
        s.info
            .features
            .insert("syscall_timing".into(), "blocked".into());
        s.threads = vec![ThreadStats {
            pid: 20,
            tid: 20,
            comm: "ckpt".into(),
            on_cpu_ns: on_cpu_s * S,
            off_cpu_ns: OffCpuNs {
                uninterruptible: d_state_s * S,
                sleeping: (10 - on_cpu_s - d_state_s) * S,
                ..Default::default()
            },
            write_bytes: 4 * GIB,
            syscalls,
            ..Default::default()
        }];
        s.io.devices = vec![DeviceStats {
            name: "vda".into(),
            dev: "254:0".into(),
            write_bytes: device_write,
            write_requests: device_write / (1 << 20),
            busy_ns: (util * 10.0 * 1e9) as u64,
            utilization: util,
            ..Default::default()
        }];
        s
    }

    fn sync_call(name: &str, nr: u32, count: u64, total_s: u64) -> SyscallStats {
        SyscallStats {
            nr,
            name: name.into(),
            count,
            total_ns: total_s * S,
            ..Default::default()
        }
    }

    fn decision(s: &Session) -> (Features, Decision) {
        let t = Thresholds::default();
        let f = Features::extract(s, &t);
        let d = decide(&f, &HotFrames::default(), &t);
        (f, d)
    }

    fn fired(d: &Decision, id: VerdictId) -> bool {
        d.primary.verdict == id && d.primary.fired
            || d.runners_up.iter().any(|r| r.verdict == id && r.fired)
    }

    fn writeback_session(wait_us: u64) -> Session {
        let mut s = writer_session(1, 9, vec![sync_call("fsync", 74, 4, 0)], 4 * GIB, 0.95);
        s.offcpu.stacks = vec![
            (
                "ckpt;main;write_shard;vfs_write_[k];generic_perform_write_[k];\
                 balance_dirty_pages_ratelimited_flags_[k];balance_dirty_pages_[k];io_schedule_timeout_[k]"
                    .into(),
                wait_us,
            ),
            ("ckpt;main;__x64_sys_fsync_[k];do_fsync_[k];folio_wait_writeback_[k]".into(), 500_000),
        ];
        s
    }

    #[test]
    fn dirty_throttled_writers_are_writeback_bound() {
        let (f, d) = decision(&writeback_session(8_000_000));
        let w = f.writes.as_ref().unwrap();
        assert!(w.write_dominated);
        assert_eq!(w.writer_comms, vec!["ckpt".to_string()]);
        // The wait inside fsync is fsync's, not writeback's.
        assert!((w.writer_writeback_wait_share - 0.8).abs() < 1e-9, "{w:?}");
        assert!((w.writer_dirty_throttle_share - 0.8).abs() < 1e-9);
        assert_eq!(d.primary.verdict, VerdictId::WritebackBound);
        assert!(d.primary.fired);
        assert!(!fired(&d, VerdictId::FsyncBound));
        assert!(!fired(&d, VerdictId::WriteGeneratorBound));
        let v = crate::output::wording::verdict(&d);
        assert!(
            v.headline.contains("the device is the limit"),
            "{}",
            v.headline
        );
        assert!(
            v.evidence
                .iter()
                .any(|e| e.key == "writer_writeback_wait_share")
        );
        assert!(!v.headline.contains("only reached memory"));
    }

    #[test]
    fn brief_throttling_is_not_writeback_bound() {
        let (_, d) = decision(&writeback_session(1_000_000));
        assert!(!fired(&d, VerdictId::WritebackBound));
    }

    fn fsync_session(sync_s: u64) -> Session {
        let mut s = writer_session(1, 8, vec![sync_call("fsync", 74, 8, sync_s)], 4 * GIB, 0.9);
        s.offcpu.stacks = vec![(
            "ckpt;main;__x64_sys_fsync_[k];do_fsync_[k];file_write_and_wait_range_[k];\
             __filemap_fdatawait_range_[k];folio_wait_writeback_[k];io_schedule_[k]"
                .into(),
            sync_s * 1_000_000,
        )];
        s
    }

    #[test]
    fn writers_waiting_in_fsync_are_fsync_bound() {
        let (f, d) = decision(&fsync_session(7));
        let w = f.writes.as_ref().unwrap();
        assert!((w.writer_sync_share - 0.7).abs() < 1e-9, "{w:?}");
        assert_eq!(w.writer_sync_calls, 8);
        assert_eq!(w.writer_writeback_wait_share, 0.0);
        assert_eq!(d.primary.verdict, VerdictId::FsyncBound);
        assert!(d.primary.fired);
        assert!(!fired(&d, VerdictId::WritebackBound));
        assert!(!w.only_in_memory);
        // Short fsyncs are not the limit.
        let (_, d) = decision(&fsync_session(1));
        assert!(!fired(&d, VerdictId::FsyncBound));
    }

    fn generator_session(sync: Vec<SyscallStats>, device_write: u64) -> Session {
        let mut s = writer_session(9, 0, sync, device_write, 0.05);
        s.threads[0].samples_user = 800;
        s.threads[0].samples_kernel = 100;
        s.oncpu.stacks = vec![
            ("ckpt;main;fill_block;sha256_block".into(), 800),
            (
                "ckpt;main;write_shard;vfs_write_[k];generic_perform_write_[k];rep_movs_alternative_[k]"
                    .into(),
                100,
            ),
        ];
        s
    }

    #[test]
    fn writers_busy_making_data_are_write_generator_bound() {
        let (f, d) = decision(&generator_session(
            vec![sync_call("fdatasync", 75, 4, 0)],
            4 * GIB,
        ));
        let w = f.writes.as_ref().unwrap();
        assert!((w.writer_on_cpu_share - 0.9).abs() < 1e-9);
        assert!((w.own_work_share() - 8.0 / 9.0).abs() < 1e-9);
        // The read rules see the busy writer as a CPU-bound "reader": the
        // write finding still comes first.
        assert_eq!(d.primary.verdict, VerdictId::WriteGeneratorBound);
        assert!(d.primary.fired);
        assert!(!fired(&d, VerdictId::FsyncBound));
        assert!(
            !d.notes
                .iter()
                .any(|n| matches!(n, Note::WritesOnlyInMemory { .. }))
        );
    }

    #[test]
    fn a_busy_device_is_not_a_slow_generator() {
        let mut s = generator_session(vec![sync_call("fsync", 74, 4, 0)], 4 * GIB);
        s.io.devices[0].utilization = 0.9;
        let (_, d) = decision(&s);
        assert!(!fired(&d, VerdictId::WriteGeneratorBound));
    }

    #[test]
    fn unsynced_writes_that_stayed_in_the_page_cache_are_called_so() {
        let (f, d) = decision(&generator_session(Vec::new(), 100 << 20));
        let w = f.writes.as_ref().unwrap();
        assert!(w.only_in_memory, "{w:?}");
        assert!(
            d.notes
                .iter()
                .any(|n| matches!(n, Note::WritesOnlyInMemory { .. }))
        );
        let v = crate::output::wording::verdict(&d);
        assert!(v.headline.contains("only reached memory"), "{}", v.headline);
        assert!(v.notes.iter().any(|n| n.contains("only reached memory")));
        // An fsync, or the devices writing most of it, is not memory only.
        let (f, _) = decision(&generator_session(vec![sync_call("fsync", 74, 1, 0)], 0));
        assert!(!f.writes.unwrap().only_in_memory);
        let (f, _) = decision(&generator_session(Vec::new(), 3 * GIB));
        assert!(!f.writes.unwrap().only_in_memory);
    }

    /// A checkpoint that reads its shards back reads as much as it writes:
    /// the write rules stay out, the read rules decide.
    #[test]
    fn read_back_sessions_are_not_write_dominated() {
        let mut s = fsync_session(7);
        s.threads[0].read_bytes = 4 * GIB;
        let (f, d) = decision(&s);
        assert!(!f.writes.unwrap().write_dominated);
        assert!(!d.primary.verdict.is_write());
        for id in [
            VerdictId::WritebackBound,
            VerdictId::FsyncBound,
            VerdictId::WriteGeneratorBound,
        ] {
            assert!(!fired(&d, id));
        }
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
