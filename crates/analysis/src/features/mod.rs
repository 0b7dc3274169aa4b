//! Features: the figures a verdict rests on, built in one pass from a
//! session and its wait analysis.
//!
//! ```text
//! WaitAnalysis ──► ReaderBasis::choose: critical path, consumer's own
//!                  fetching, readers' own time, or per-thread statistics
//! Session ──► the reader threads and the shares of their time by state
//!             (on CPU, runnable, sleeping, D, read syscalls, futex, GIL,
//!             socket, reclaim) from that one basis
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
    /// The consumer never waited for data, yet its AU is short of
    /// `compute_bound_au_percentage`: it fetches for itself (on a CPU
    /// taking batches, or queued for a CPU), and is its own reader; shares
    /// are of that time.
    ConsumerFetch,
    /// No consumer: the readers and their worker processes' threads, with
    /// their waits sorted by what ended them (wake-up graph); shares are of
    /// what they did and waited on, less waiting on each other.
    ReaderTime,
}

mod devices;
mod extract;
mod readers;
#[cfg(test)]
mod tests;
mod writes;

use devices::*;
pub use devices::{CarriedDevice, DeviceFeature, FsDaemonFeature, IoLimitFeature};
use extract::bench_feature;
pub use readers::{ReaderBasis, ReaderSource};
use writes::*;
pub use writes::{DirtyPages, WriteFeatures, WriterRow, WriterTimeSplit};

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
    /// Where the readers waited for a lock most (their off-CPU stacks).
    pub reader_lock_site: Option<crate::locks::LockSite>,
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
    /// CPUs the whole machine kept busy (and its hypervisor took: steal)
    /// on average, traced or not, storprof's own left out; None without a
    /// host CPU series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpus_busy: Option<f64>,
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
    /// The FUSE daemon whose replies ended most storage waits, when one
    /// did: the reads went to a file system served from user space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_daemon: Option<FsDaemonFeature>,
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
