//! The wake-up graph: `sched_waking` ends a traced thread's blocked
//! interval and adds it to the (waker, wakee) edge in `WAKE_EDGES`;
//! interrupt wakers are told from tasks by per-CPU depth counters
//! (`IRQ_CONTEXT`), and futex wake-ups between threads contending for the
//! same word by the waiters the futex entry hooks remember (`FUTEX_WAITERS`).
use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid},
    programs::RawTracePointContext,
};
use storprof_common::{
    FUTEX_NR, FUTEX_WAITER_SLOTS, FutexWaiters, IrqContext, WAKE_NO_SYSCALL, WAKER_STACK_EVERY,
    WakeAcc, WakeKey, futex_share, irq_context, lost, offcpu_state, waker_kind,
};

use crate::{
    kernel::{kernel_read, now_ns},
    maps::{
        CONFIG, FUTEX_WAIT_WORD, FUTEX_WAITERS, IRQ_CONTEXT, OFFCPU_START, STACK_BUF_TRACE,
        WAKE_EDGES, count_lost, is_traced,
    },
    stacks::stack_ids,
};

/// The kind of the current waker: the innermost interrupt handler running
/// on this CPU, else the task.
#[inline(always)]
fn current_waker_kind(tgid: u32) -> u8 {
    let innermost = IRQ_CONTEXT.get(0).and_then(IrqContext::innermost);
    match innermost {
        Some(irq_context::TIMER) => waker_kind::TIMER,
        Some(irq_context::SOFTIRQ) => waker_kind::SOFTIRQ,
        Some(_) => waker_kind::HARDIRQ,
        None if tgid == 0 => waker_kind::IDLE,
        None => waker_kind::TASK,
    }
}

/// `sched_waking`: `current` (or the interrupt it runs) wakes the task
/// that is the raw tracepoint's argument.
#[inline(always)]
pub(crate) fn waking(ctx: &RawTracePointContext) -> u32 {
    // Arguments: (struct task_struct *p); `ProbeConfig::task_pid` (from
    // BTF) is set before this attaches.
    let task_pid = CONFIG.get(0).map_or(0, |c| c.task_pid);
    if task_pid == 0 {
        return 0;
    }
    let wakee_tid: u32 = kernel_read(ctx.arg::<u64>(0), task_pid);
    let Some(off) = OFFCPU_START.get_ptr_mut(wakee_tid) else {
        return 0;
    };
    // SAFETY: per-tid slot of the wakee; it is blocked, so its own
    // switch-in (the slot's other writer) cannot run before this wake-up.
    let start = unsafe { *off };
    if start.ts == 0 || start.state & offcpu_state::WOKEN != 0 || !is_traced(start.tgid) {
        return 0;
    }
    let now = now_ns();
    if now <= start.ts {
        return 0;
    }
    // SAFETY: as above.
    unsafe {
        (*off).state = start.state | offcpu_state::WOKEN;
        (*off).woken_ts = now;
    }
    let blocked = now - start.ts;
    let pid_tgid = bpf_get_current_pid_tgid();
    let kind = current_waker_kind((pid_tgid >> 32) as u32);
    let (waker_tgid, waker_tid) = if kind == waker_kind::TASK {
        ((pid_tgid >> 32) as u32, pid_tgid as u32)
    } else {
        // SAFETY: no preconditions.
        (0, unsafe { aya_ebpf::helpers::bpf_get_smp_processor_id() })
    };
    let syscall = if start.syscall < u32::from(WAKE_NO_SYSCALL) {
        start.syscall as u16
    } else {
        WAKE_NO_SYSCALL
    };
    let futex_shared = if kind == waker_kind::TASK && u64::from(syscall) == FUTEX_NR {
        self::futex_shared(waker_tid, wakee_tid)
    } else {
        futex_share::NONE
    };
    let key = WakeKey {
        waker_tgid,
        waker_tid,
        wakee_tgid: start.tgid,
        wakee_tid,
        wakee_state: (start.state & offcpu_state::INDEX_MASK) as u8,
        waker_kind: kind,
        syscall,
        futex_shared,
        _pad: [0; 3],
    };
    let known = WAKE_EDGES.get_ptr_mut(key);
    // The waker's stacks on an edge's first wake-up and every
    // `WAKER_STACK_EVERY`-th after; one call site, so the verifier walks
    // the stack code once.
    let take_stacks = match known {
        // SAFETY: the key holds the waker's tid (or CPU for interrupts),
        // which runs on one CPU at a time: no concurrent writer.
        Some(acc) => (unsafe { (*acc).count } + 1) & (WAKER_STACK_EVERY - 1) == 0,
        None => true,
    };
    let (user, kernel) = if take_stacks {
        stack_ids(ctx, STACK_BUF_TRACE)
    } else {
        (-1, -1)
    };
    if let Some(acc) = known {
        // SAFETY: as above.
        unsafe {
            (*acc).blocked_ns += blocked;
            (*acc).count += 1;
            (*acc).last_ns = now;
            if take_stacks {
                (*acc).waker_user_stack = user;
                (*acc).waker_kernel_stack = kernel;
            }
        }
        return 0;
    }
    let fresh = WakeAcc {
        blocked_ns: blocked,
        count: 1,
        first_ns: now,
        last_ns: now,
        first_blocked_ns: blocked,
        waker_user_stack: user,
        waker_kernel_stack: kernel,
        waker_comm: bpf_get_current_comm().unwrap_or_default(),
    };
    if WAKE_EDGES.insert(key, fresh, BPF_NOEXIST as u64).is_err() {
        count_lost(lost::WAKE_MAP_FULL);
    }
    0
}

/// Raises (`enter`) or lowers this CPU's depth of interrupt context
/// `index` (an `irq_context` index).
#[inline(always)]
pub(crate) fn irq_depth_add(index: usize, enter: bool) {
    if let Some(ctx) = IRQ_CONTEXT.get_ptr_mut(0) {
        // SAFETY: per-CPU slot; a handler's entry and exit run on one CPU,
        // and nested handlers unwind in order.
        unsafe { (*ctx).add(index, enter) };
    }
}

/// Clears this CPU's interrupt contexts: called from `sched_switch`, which
/// never runs inside an interrupt handler, so whatever depth is left is
/// from a handler whose exit program did not run.
#[inline(always)]
pub(crate) fn irq_context_clear() {
    if let Some(ctx) = IRQ_CONTEXT.get_ptr_mut(0) {
        // SAFETY: per-CPU slot; interrupts that could touch it run only
        // after the switch, and their entries raise it again.
        unsafe {
            if (*ctx).depth != [0; irq_context::COUNT] {
                (*ctx).depth = [0; irq_context::COUNT];
            }
        }
    }
}

/// FUTEX_WAIT, FUTEX_LOCK_PI, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI,
/// FUTEX_LOCK_PI2 (the op without its private/clock flags).
#[inline(always)]
pub(crate) fn is_futex_wait(op: u64) -> bool {
    matches!(op & 0x7f, 0 | 6 | 9 | 11 | 13)
}

/// A futex wait for a lock: FUTEX_LOCK_PI(2), or FUTEX_WAIT for the value
/// 2, glibc's "locked, with waiters" (its mutexes' and low-level locks'
/// wait). Condition variables and semaphores wait with FUTEX_WAIT_BITSET.
#[inline(always)]
pub(crate) fn is_lock_wait(op: u64, val: u64) -> bool {
    match op & 0x7f {
        6 | 13 => true,
        0 => val as u32 == 2,
        _ => false,
    }
}

/// `FUTEX_WAIT_WORD`'s mark of a lock wait, in the word's low bit (futex
/// words are 4-byte aligned).
const LOCK_WAIT_MARK: u64 = 1;

/// Records that thread `tid` waits on the futex `word` (`lock`: for a
/// lock), among the word's last distinct waiters.
#[inline(always)]
pub(crate) fn remember_futex_wait(tid: u32, word: u64, lock: bool) {
    let marked = if lock { word | LOCK_WAIT_MARK } else { word };
    let _ = FUTEX_WAIT_WORD.insert(tid, marked, 0);
    let granule = word >> 6;
    if let Some(waiters) = FUTEX_WAITERS.get_ptr_mut(granule) {
        // SAFETY: a map value; threads on other CPUs waiting on the same
        // word may update it at once, which at worst forgets one waiter.
        unsafe {
            let mut i = 0;
            while i < FUTEX_WAITER_SLOTS {
                if (*waiters).tids[i] == tid {
                    return;
                }
                i += 1;
            }
            let slot = ((*waiters).next as usize) & (FUTEX_WAITER_SLOTS - 1);
            (*waiters).tids[slot] = tid;
            (*waiters).next = (slot as u32 + 1) & (FUTEX_WAITER_SLOTS as u32 - 1);
        }
        return;
    }
    let mut fresh = FutexWaiters::default();
    fresh.tids[0] = tid;
    fresh.next = 1;
    // A full LRU map evicts its oldest entry; nothing to count.
    let _ = FUTEX_WAITERS.insert(granule, fresh, 0);
}

/// Whether `wakee` waits for a lock (`futex_share::LOCK_WAIT`), or `waker`
/// is among the last waiters of the futex word (64-byte granule) that
/// `wakee` waits on (`futex_share::RING`).
#[inline(always)]
fn futex_shared(waker: u32, wakee: u32) -> u8 {
    // SAFETY: the value is copied out.
    let Some(word) = unsafe { FUTEX_WAIT_WORD.get(wakee) }.copied() else {
        return futex_share::NONE;
    };
    if word & LOCK_WAIT_MARK != 0 {
        return futex_share::LOCK_WAIT;
    }
    // SAFETY: as above; a concurrent update only makes it one wait older.
    let Some(waiters) = unsafe { FUTEX_WAITERS.get(word >> 6) }.copied() else {
        return futex_share::NONE;
    };
    let mut i = 0;
    while i < FUTEX_WAITER_SLOTS {
        if waiters.tids[i] == waker {
            return futex_share::RING;
        }
        i += 1;
    }
    futex_share::NONE
}
