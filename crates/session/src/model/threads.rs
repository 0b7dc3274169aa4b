//! threads.json: each thread's time by state, its syscalls, and the
//! labels of folded stacks (threads, and groups of short-lived ones).
use super::*;

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
