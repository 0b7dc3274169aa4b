//! Wake-ups: who woke a blocked thread, from what context, and the
//! futex waiters that tell lock contention from hand-offs.
use crate::*;

/// Who ran the wake-up of a blocked thread (`sched_waking` fires in the
/// waker's context): a task, or an interrupt on top of whatever task was
/// running, which is then not the waker.
pub mod waker_kind {
    /// A task in process context: the current task is the waker.
    pub const TASK: u8 = 0;
    /// A hardware interrupt handler (block completions, virtio).
    pub const HARDIRQ: u8 = 1;
    /// A softirq (network receive, block completion, RCU); also when it
    /// runs in ksoftirqd.
    pub const SOFTIRQ: u8 = 2;
    /// An hrtimer callback: a timed sleep or a timeout ended.
    pub const TIMER: u8 = 3;
    /// The idle task (pid 0): an interrupt taken on an idle CPU outside
    /// the handlers above.
    pub const IDLE: u8 = 4;
}

/// Interrupt-context depth counters per CPU (`IrqContext` indices),
/// raised at the handlers' entry tracepoints and lowered at their exit.
pub mod irq_context {
    pub const HARDIRQ: usize = 0;
    pub const SOFTIRQ: usize = 1;
    pub const TIMER: usize = 2;
    pub const COUNT: usize = 3;
}

/// The interrupt contexts active on one CPU (`IRQ_CONTEXT`, per CPU): a
/// depth per `irq_context` kind and when each was last entered, so that a
/// wake-up is credited to the innermost one (a softirq run from inside an
/// hrtimer callback, or an hrtimer run from a softirq). `sched_switch`
/// clears it, since the scheduler never runs inside a handler: a handler
/// whose exit program the kernel skipped (a BPF program does not nest in
/// itself on one CPU) cannot leave a depth raised for later wake-ups.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqContext {
    pub depth: [u32; irq_context::COUNT],
    /// `seq` at each kind's last entry.
    pub entered: [u32; irq_context::COUNT],
    pub seq: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<IrqContext>() == 32);

impl IrqContext {
    /// The innermost active kind (`irq_context` index), if any.
    #[inline(always)]
    pub fn innermost(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        let mut i = 0;
        while i < irq_context::COUNT {
            if self.depth[i] > 0 {
                best = match best {
                    Some(b) if self.entered[b].wrapping_sub(self.entered[i]) < u32::MAX / 2 => {
                        Some(b)
                    }
                    _ => Some(i),
                };
            }
            i += 1;
        }
        best
    }

    /// A handler of `kind` was entered (`enter`) or left.
    #[inline(always)]
    pub fn add(&mut self, kind: usize, enter: bool) {
        if kind >= irq_context::COUNT {
            return;
        }
        if enter {
            self.seq = self.seq.wrapping_add(1);
            self.entered[kind] = self.seq;
            self.depth[kind] = self.depth[kind].saturating_add(1);
        } else {
            self.depth[kind] = self.depth[kind].saturating_sub(1);
        }
    }
}

/// `WakeKey::syscall` when the wakee was not inside a traced syscall.
pub const WAKE_NO_SYSCALL: u16 = u16::MAX;

/// A waker's stack is taken on the first wake-up of an edge and then on
/// every `WAKER_STACK_EVERY`-th one (a power of two).
pub const WAKER_STACK_EVERY: u64 = 64;

/// Key of a wake-up edge: a waker ended a blocked interval of a traced
/// wakee. Interrupt wakers (`waker_kind` other than `TASK`) have
/// `waker_tgid` 0 and `waker_tid` the CPU number, since the interrupted
/// task is not the waker.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WakeKey {
    pub waker_tgid: u32,
    pub waker_tid: u32,
    pub wakee_tgid: u32,
    pub wakee_tid: u32,
    /// The wakee's `offcpu_state` index when it blocked.
    pub wakee_state: u8,
    /// `waker_kind`.
    pub waker_kind: u8,
    /// The syscall the wakee blocked in (`WAKE_NO_SYSCALL`: none or unknown).
    pub syscall: u16,
    /// For futex waits, `futex_share::*`: whether the wakee waited for a
    /// lock, and how that is known: a glibc low-level lock's wait
    /// (FUTEX_WAIT for the value 2, "locked with waiters") or a PI lock's
    /// (`LOCK_WAIT`: a lock, whoever wakes it, which catches a holder that
    /// re-takes the lock after each release and never waits itself), or a
    /// wait on a futex word (64-byte granule) that the waker is among the
    /// last waiters of (`RING`: a lock they both contend for, or a
    /// condition variable that shares a granule with a mutex); 0 for a
    /// hand-off. Keeps the key free of addresses, so the edge count stays
    /// bounded by the thread pairs.
    pub futex_shared: u8,
    pub _pad: [u8; 3],
}
const _: () = assert!(core::mem::size_of::<WakeKey>() == 24);

/// `WakeKey::futex_shared` values.
pub mod futex_share {
    /// A hand-off (or not a futex wait).
    pub const NONE: u8 = 0;
    /// The waker waited on the same futex word lately.
    pub const RING: u8 = 1;
    /// The wakee waited for a glibc or PI lock.
    pub const LOCK_WAIT: u8 = 2;
}

/// The last distinct threads that waited on one futex word (64-byte
/// granule; `FUTEX_WAITERS`): a ring of `FUTEX_WAITER_SLOTS` tids. A lock
/// has several; a future or a hand-off's condition variable has one.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FutexWaiters {
    pub tids: [u32; FUTEX_WAITER_SLOTS],
    pub next: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<FutexWaiters>() == 4 * FUTEX_WAITER_SLOTS + 8);

impl Default for FutexWaiters {
    fn default() -> Self {
        FutexWaiters {
            tids: [0; FUTEX_WAITER_SLOTS],
            next: 0,
            _pad: 0,
        }
    }
}

/// Waiters remembered per futex word (a power of two), more than a loader
/// pool has threads (Python's ThreadPoolExecutor takes up to 32): the ring
/// is first in, first out, so a contender that seldom waits is pushed out
/// once as many others have waited, and its releases would look like
/// hand-offs. Waits that race on two CPUs lose a tid, added again later.
pub const FUTEX_WAITER_SLOTS: usize = 64;

/// What the wake-ups of one edge ended, summed in the kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WakeAcc {
    /// Σ the wakee's blocked time, switch-out → wake-up (ns).
    pub blocked_ns: u64,
    pub count: u64,
    /// `bpf_ktime_get_ns` of the first and the last wake-up.
    pub first_ns: u64,
    pub last_ns: u64,
    /// The blocked time the first wake-up ended.
    pub first_blocked_ns: u64,
    /// The waker's stacks at a sampled wake-up (negative: none).
    pub waker_user_stack: i32,
    pub waker_kernel_stack: i32,
    /// The waker's comm at its first wake-up.
    pub waker_comm: [u8; COMM_LEN],
}
const _: () = assert!(core::mem::size_of::<WakeAcc>() == 64);
