//! Per-thread accumulators: on- and off-CPU time, syscall statistics
//! and the off-CPU interval in progress.
use crate::*;

/// Key of a CPU-sample count or an off-CPU time: one thread in one stack.
/// Stack ids are negative when no stack was taken (e.g. no kernel stack for
/// a sample taken in user mode).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackKey {
    pub tgid: u32,
    pub tid: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
}
const _: () = assert!(core::mem::size_of::<StackKey>() == 16);

/// Per-thread accumulator, keyed by tid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadAcc {
    pub tgid: u32,
    pub tid: u32,
    /// Time on a CPU, accounted at each switch-out.
    pub on_cpu_ns: u64,
    /// Off-CPU time by the state the thread left the CPU in:
    /// `[runnable, sleeping, uninterruptible, other]`.
    pub off_cpu_ns: [u64; 4],
    /// Pages this thread added to the page cache outside write-family
    /// syscalls: read misses (read syscalls, readahead, page faults).
    pub page_cache_pages: u64,
    /// Pages this thread added to the page cache inside a write-family
    /// syscall: new pages of buffered writes, which no device supplied.
    pub page_cache_write_pages: u64,
    /// Last `comm` seen at a switch-out.
    pub comm: [u8; COMM_LEN],
}
const _: () = assert!(core::mem::size_of::<ThreadAcc>() == 80);

/// Off-CPU state indices in `ThreadAcc::off_cpu_ns`.
pub mod offcpu_state {
    pub const RUNNABLE: usize = 0;
    pub const SLEEPING: usize = 1;
    pub const UNINTERRUPTIBLE: usize = 2;
    pub const OTHER: usize = 3;
    /// The index bits of `OffCpuStart::state` (below the flag bits).
    pub const INDEX_MASK: u32 = 3;
    /// Bit of `OffCpuStart::state` (above the index): the thread left the
    /// CPU inside a syscall of a DWARF-unwound process, its stack is taken
    /// at the syscall's exit (`FLAG_OFFCPU_DWARF`).
    pub const AT_SYSCALL_EXIT: u32 = 0x100;
    /// Bit of `OffCpuStart::state`: the blocked interval was already ended
    /// by a wake-up (at `OffCpuStart::woken_ts`) and counted on its edge
    /// (`sched_waking`).
    pub const WOKEN: u32 = 0x200;

    /// Maps `sched_switch`'s `prev_state` (TASK_REPORT bits; 0x100 means
    /// preempted) to an index.
    pub const fn from_prev_state(prev_state: i64) -> usize {
        match prev_state {
            0 | 0x100 => RUNNABLE,
            1 => SLEEPING,
            2 => UNINTERRUPTIBLE,
            _ => OTHER,
        }
    }
}

/// Key of the per-thread per-syscall statistics.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SyscallKey {
    pub tgid: u32,
    pub tid: u32,
    /// Syscall number (x86_64).
    pub nr: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<SyscallKey>() == 16);

/// Per-thread per-syscall statistics.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallAcc {
    pub count: u64,
    /// Calls that returned a negative errno.
    pub errors: u64,
    /// Sum of enter→exit latencies (0 without `FLAG_SYSCALL_LATENCY`).
    pub total_ns: u64,
    /// Bytes returned by read-family and write-family calls.
    pub bytes: u64,
    /// log2 latency histogram (ns).
    pub latency_log2_ns: [u64; LOG2_BUCKETS],
}
const _: () = assert!(core::mem::size_of::<SyscallAcc>() == 32 + 8 * LOG2_BUCKETS);

impl SyscallAcc {
    pub const ZERO: SyscallAcc = SyscallAcc {
        count: 0,
        errors: 0,
        total_ns: 0,
        bytes: 0,
        latency_log2_ns: [0; LOG2_BUCKETS],
    };
}

impl Default for SyscallAcc {
    fn default() -> Self {
        Self::ZERO
    }
}

/// Syscall statistics live in arrays, not a hash map, so `sys_exit` does no
/// hashing: a thread claims thread slot `tid % SYSCALL_THREAD_SLOTS` on its
/// first syscall (an atomic insert into a small hash map: the BPF target has
/// no compare-and-swap), then (slot, nr) → entry of the slot's own region
/// of `SYSCALL_SLOT_ENTRIES` statistics, handed out by a counter only that
/// thread writes. Threads whose slot is taken, and a thread's calls beyond
/// its region, go to the hash map `SYSCALLS`, so counts stay exact.
pub const SYSCALL_THREAD_SLOTS: u32 = 2048;
/// Distinct syscalls per thread slot before falling back to the hash map.
pub const SYSCALL_SLOT_ENTRIES: u32 = 32;
/// Syscall numbers below this get an array entry (x86_64 has ~460).
pub const SYSCALL_NR_SLOTS: u32 = 512;

/// Per-tid syscall timing, read (and reset) at `sys_exit`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallStart {
    /// `FLAG_SYSCALL_LATENCY`: `bpf_ktime_get_ns` at entry; 0 = no syscall
    /// in progress.
    pub ts: u64,
    /// `FLAG_SYSCALL_LATENCY`: the syscall number seen at entry.
    pub nr: u64,
    /// `FLAG_SYSCALL_BLOCKED_TIME`: time switched out inside the current
    /// syscall so far (added at each switch-in).
    pub blocked_ns: u64,
}
const _: () = assert!(core::mem::size_of::<SyscallStart>() == 24);

/// Per-tid slot written when a traced thread leaves the CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffCpuStart {
    /// Switch-out time; 0 = on a CPU (or never seen).
    pub ts: u64,
    pub tgid: u32,
    /// `offcpu_state` index.
    pub state: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
    /// When `sched_waking` ended the blocked interval (with
    /// `offcpu_state::WOKEN`); the time from then to the switch-in is a
    /// wait for a CPU, accounted as runnable.
    pub woken_ts: u64,
    /// The syscall the thread was inside when it left the CPU (from its
    /// saved user registers' `orig_ax`), `NO_SYSCALL` outside one.
    pub syscall: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<OffCpuStart>() == 40);

/// `OffCpuStart::syscall` of a thread not inside a syscall.
pub const NO_SYSCALL: u32 = u32::MAX;

impl OffCpuStart {
    /// The blocked interval that ends at switch-in `now`, split at its
    /// wake-up: (blocked until woken, then waiting for a CPU). Not woken
    /// (preempted, or woken by nothing traced), or a wake time outside the
    /// interval: all of it is blocked time.
    #[inline(always)]
    pub fn split_at_wake(&self, now: u64) -> (u64, u64) {
        match self.woken_at(now) {
            Some(woken) => (woken - self.ts, now - woken),
            None => (now.saturating_sub(self.ts), 0),
        }
    }

    /// The wake-up inside the interval that ends at `now`: `None` when not
    /// woken (preempted, or woken by nothing traced) or woken outside it.
    #[inline(always)]
    pub fn woken_at(&self, now: u64) -> Option<u64> {
        (self.state & offcpu_state::WOKEN != 0 && self.woken_ts > self.ts && self.woken_ts <= now)
            .then_some(self.woken_ts)
    }
}

/// Off-CPU time of a thread inside a syscall, waiting for the syscall's
/// exit to have its user stack copied (`FLAG_OFFCPU_DWARF`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffCpuPending {
    /// Sum of the taken intervals' weights (ns).
    pub weight_ns: u64,
    /// The largest taken interval's weight: its stacks and state are kept.
    pub largest_ns: u64,
    pub tgid: u32,
    pub state: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
    pub intervals: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<OffCpuPending>() == 40);
