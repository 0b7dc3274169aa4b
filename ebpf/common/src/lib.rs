//! Types shared by the kernel-side probes (`storprof-ebpf`) and the user-side
//! loader (`storprof`). Everything here is `#[repr(C)]`, has explicit padding
//! and a compile-time size assert, so both sides agree byte for byte.
//!
//! Data flow: the probes fill hash maps keyed by these key types with these
//! accumulator types (counted in the kernel), plus two ring buffers of
//! events (process lifecycle, completed block requests); user space drains
//! them (`storprof::probes`) and aggregates them into the session model.
//!
//! By module: `config` (what user space tells the probes), `threads`
//! (per-thread time and syscalls), `wakeups` (who woke whom), `stacks` and
//! `python` (stacks and interpreter frames of samples), `events` (the ring
//! buffers' records) and `counters` (why events were dropped); all are
//! re-exported here.
#![cfg_attr(not(test), no_std)]

/// Number of log2 latency buckets: bucket i counts values in [2^i, 2^(i+1)) ns
/// (bucket 0 also holds 0). 40 buckets reach ~18 minutes. The session model
/// re-exports it (`storprof::session::model::LOG2_BUCKETS`).
pub const LOG2_BUCKETS: usize = 40;

mod config;
mod counters;
mod events;
mod python;
mod stacks;
mod threads;
mod wakeups;

pub use config::*;
pub use counters::*;
pub use events::*;
pub use python::*;
pub use stacks::*;
pub use threads::*;
pub use wakeups::*;

/// Length of a task's `comm`.
pub const COMM_LEN: usize = 16;

/// Depth of a stack in the stack-trace map (the kernel's PERF_MAX_STACK_DEPTH).
pub const MAX_STACK_DEPTH: usize = 127;

/// log2 bucket of a value, clamped to the last bucket.
#[inline(always)]
pub const fn log2_bucket(value: u64) -> usize {
    if value == 0 {
        return 0;
    }
    let b = 63 - value.leading_zeros() as usize;
    if b >= LOG2_BUCKETS {
        LOG2_BUCKETS - 1
    } else {
        b
    }
}

/// x86_64 `futex` syscall number: `sys_enter` remembers futex waits and
/// `sched_waking` tells lock contention from hand-offs by it.
pub const FUTEX_NR: u64 = 202;

/// x86_64 syscall numbers of the read family (bytes returned count as read).
pub const fn is_read_family(nr: u64) -> bool {
    matches!(nr, 0 | 17 | 19 | 295 | 327)
}

/// x86_64 syscall numbers of socket receives whose return value is a byte
/// count (recvfrom, recvmsg): a network reader's input.
pub const fn is_recv_family(nr: u64) -> bool {
    matches!(nr, 45 | 47)
}

/// x86_64 syscall numbers of the write family.
pub const fn is_write_family(nr: u64) -> bool {
    matches!(nr, 1 | 18 | 20 | 296 | 328)
}

#[cfg(feature = "user")]
mod pod {
    use super::*;
    // SAFETY (all impls below): the types are repr(C), Copy, built only from
    // integers and integer arrays with explicit padding fields, so they have
    // no uninitialised bytes and every bit pattern is valid.
    macro_rules! pod {
        ($($t:ty),*) => { $(
            // SAFETY: see the module comment above.
            unsafe impl aya::Pod for $t {}
        )* };
    }
    pod!(
        ProbeConfig,
        StackKey,
        StackFrames,
        ThreadAcc,
        SyscallKey,
        SyscallAcc,
        SyscallStart,
        OffCpuStart,
        BlockKey,
        BlockLayout,
        BlockInflight,
        BlockEvent,
        BlockSubmitter,
        ProcEvent,
        UserStackHeader,
        PyProcess,
        PyFrameRecord,
        WakeKey,
        WakeAcc,
        FutexWaiters,
        IrqContext,
        KsymRequest,
        KsymNames
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets() {
        assert_eq!(log2_bucket(0), 0);
        assert_eq!(log2_bucket(1), 0);
        assert_eq!(log2_bucket(2), 1);
        assert_eq!(log2_bucket(3), 1);
        assert_eq!(log2_bucket(1024), 10);
        assert_eq!(log2_bucket(u64::MAX), LOG2_BUCKETS - 1);
    }

    #[test]
    fn the_innermost_interrupt_context_wins() {
        let mut c = IrqContext::default();
        assert_eq!(c.innermost(), None);
        // A softirq run from inside an hrtimer callback.
        c.add(irq_context::TIMER, true);
        c.add(irq_context::SOFTIRQ, true);
        assert_eq!(c.innermost(), Some(irq_context::SOFTIRQ));
        c.add(irq_context::SOFTIRQ, false);
        assert_eq!(c.innermost(), Some(irq_context::TIMER));
        c.add(irq_context::TIMER, false);
        assert_eq!(c.innermost(), None);
        // An hrtimer run from a softirq, then a hard interrupt on top.
        c.add(irq_context::SOFTIRQ, true);
        c.add(irq_context::TIMER, true);
        assert_eq!(c.innermost(), Some(irq_context::TIMER));
        c.add(irq_context::HARDIRQ, true);
        assert_eq!(c.innermost(), Some(irq_context::HARDIRQ));
        // A skipped exit leaves no negative depth.
        c = IrqContext::default();
        c.add(irq_context::TIMER, false);
        assert_eq!(c.depth[irq_context::TIMER], 0);
        // The entry stamps wrap.
        c.seq = u32::MAX;
        c.add(irq_context::SOFTIRQ, true);
        c.add(irq_context::TIMER, true);
        assert_eq!(c.innermost(), Some(irq_context::TIMER));
    }

    #[test]
    fn prev_state_mapping() {
        assert_eq!(offcpu_state::from_prev_state(0x100), offcpu_state::RUNNABLE);
        assert_eq!(offcpu_state::from_prev_state(1), offcpu_state::SLEEPING);
        assert_eq!(
            offcpu_state::from_prev_state(2),
            offcpu_state::UNINTERRUPTIBLE
        );
        assert_eq!(offcpu_state::from_prev_state(0x80), offcpu_state::OTHER);
    }

    #[test]
    fn a_woken_interval_splits_into_blocked_and_waiting_for_a_cpu() {
        let slot = |state: u32, woken_ts: u64| OffCpuStart {
            ts: 1_000,
            tgid: 1,
            state,
            user_stack: -1,
            kernel_stack: -1,
            woken_ts,
            syscall: NO_SYSCALL,
            _pad: 0,
        };
        let sleeping = offcpu_state::SLEEPING as u32;
        let woken = sleeping | offcpu_state::WOKEN;
        // Blocked 1000 ns, then 500 ns on a run queue.
        assert_eq!(slot(woken, 2_000).split_at_wake(2_500), (1_000, 500));
        // Switched in at its wake-up: no queueing.
        assert_eq!(slot(woken, 2_500).split_at_wake(2_500), (1_500, 0));
        // Not woken (preempted, or an untraced wake path): all blocked.
        assert_eq!(slot(sleeping, 0).split_at_wake(2_500), (1_500, 0));
        // A wake time outside the interval (a stale slot) is not trusted.
        assert_eq!(slot(woken, 500).split_at_wake(2_500), (1_500, 0));
        assert_eq!(slot(woken, 3_000).split_at_wake(2_500), (1_500, 0));
        // The repair of a missed switch-in puts it at the wake-up only when
        // that lies inside the interval.
        assert_eq!(slot(woken, 2_000).woken_at(2_500), Some(2_000));
        assert_eq!(slot(woken, 2_000).woken_at(1_999), None);
        assert_eq!(slot(sleeping, 2_000).woken_at(2_500), None);
        assert_eq!(slot(woken, 1_000).woken_at(2_500), None);
    }
}
