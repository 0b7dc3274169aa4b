//! Syscalls: per-thread per-syscall counts, errors, bytes of the read/write
//! families and a time histogram, in array slots claimed per thread (no
//! hashing at `sys_exit`) with a hash map fallback; `sys_exit` also sends
//! pending off-CPU time's user stack.
//!
//! A call's time is, by default, the time its thread spent switched out
//! inside it, which `sched_switch` adds up (`FLAG_SYSCALL_BLOCKED_TIME`):
//! only `sys_exit` runs on every syscall, and the futex entry hook on
//! futex calls. `FLAG_SYSCALL_LATENCY` times every call from a raw
//! `sys_enter` hook instead, at about twice the per-syscall cost.
use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::bpf_get_current_pid_tgid,
    programs::{RawTracePointContext, TracePointContext},
};
use storprof_common::{
    FLAG_SYSCALL_BLOCKED_TIME, FLAG_SYSCALL_LATENCY, FUTEX_NR, SYSCALL_NR_SLOTS,
    SYSCALL_SLOT_ENTRIES, SYSCALL_THREAD_SLOTS, SyscallAcc, SyscallKey, is_read_family,
    is_recv_family, is_write_family, log2_bucket, lost, tracepoint_offsets as offsets,
};

use crate::{
    kernel::{field, now_ns, pt_regs, pt_regs_word},
    maps::{
        CONFIG, SYSCALL_INDEX, SYSCALL_POOL, SYSCALL_POOL_KEY, SYSCALL_SLOT_OWNER,
        SYSCALL_SLOT_USED, SYSCALL_START, SYSCALL_THREAD, SYSCALL_ZERO, SYSCALLS, count_lost,
        is_traced,
    },
    sched::{flush_offcpu, offcpu_open, repair_missed_switch_in, take_offcpu_pending},
    wakeups::{is_futex_wait, is_lock_wait, remember_futex_wait},
};

/// `SYSCALL_THREAD` value of a thread without a slot of its own.
const NO_SLOT: u32 = u32::MAX;

/// Raw `sys_enter` (`FLAG_SYSCALL_LATENCY` only): the syscall's start, and
/// the word of a futex wait.
#[inline(always)]
pub(crate) fn enter(ctx: &RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    let nr: u64 = ctx.arg(1);
    let tid = pid_tgid as u32;
    if let Some(slot) = SYSCALL_START.get_ptr_mut(tid) {
        // SAFETY: per-tid slot; only this thread writes it.
        unsafe {
            (*slot).ts = now_ns();
            (*slot).nr = nr;
        }
    }
    if nr == FUTEX_NR {
        let regs: *const u64 = ctx.arg(0);
        // The futex op is the second argument, the futex word the first.
        let op = pt_regs_word(regs, pt_regs::SI).unwrap_or(1);
        if is_futex_wait(op) {
            let word = pt_regs_word(regs, pt_regs::DI).unwrap_or(0);
            let val = pt_regs_word(regs, pt_regs::DX).unwrap_or(0);
            remember_futex_wait(tid, word, is_lock_wait(op, val));
        }
    }
    0
}

/// `syscalls:sys_enter_futex` (without `FLAG_SYSCALL_LATENCY`): the word
/// of a futex wait. A per-syscall tracepoint, so other syscalls do not run
/// a program on entry.
#[inline(always)]
pub(crate) fn enter_futex(ctx: &TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !is_traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    let op: u64 = field(ctx, offsets::SYS_ENTER_FUTEX_OP);
    if is_futex_wait(op) {
        let word: u64 = field(ctx, offsets::SYS_ENTER_FUTEX_UADDR);
        let val: u64 = field(ctx, offsets::SYS_ENTER_FUTEX_VAL);
        remember_futex_wait(pid_tgid as u32, word, is_lock_wait(op, val));
    }
    0
}

/// `sys_exit`: adds the call to its thread's statistics.
#[inline(always)]
pub(crate) fn exit(ctx: &RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !is_traced(tgid) {
        return 0;
    }
    let tid = pid_tgid as u32;
    // Before the pending stack and the blocked time are taken: a switch-in
    // without its event leaves this call's blocked time unaccounted. The
    // clock is read only then: a helper call on every syscall cost the
    // storm about 80 ns a call.
    if offcpu_open(tid) {
        repair_missed_switch_in(tid, now_ns());
    }
    if take_offcpu_pending(tid) {
        flush_offcpu(tgid, tid, ctx.arg(0));
    }
    let flags = CONFIG.get(0).map_or(0, |c| c.flags);
    let timed = flags & (FLAG_SYSCALL_LATENCY | FLAG_SYSCALL_BLOCKED_TIME) != 0;
    let (nr, time_ns) = if flags & FLAG_SYSCALL_LATENCY != 0 {
        let Some(slot) = SYSCALL_START.get_ptr_mut(tid) else {
            return 0;
        };
        // SAFETY: per-tid slot; only this thread writes it.
        let start = unsafe { *slot };
        if start.ts == 0 {
            return 0;
        }
        // SAFETY: as above.
        unsafe { (*slot).ts = 0 };
        (start.nr, now_ns().saturating_sub(start.ts))
    } else {
        // The syscall number is regs->orig_ax.
        let regs: *const u64 = ctx.arg(0);
        let Some(nr) = pt_regs_word(regs, pt_regs::ORIG_AX) else {
            return 0;
        };
        let mut blocked = 0;
        if flags & FLAG_SYSCALL_BLOCKED_TIME != 0
            && let Some(slot) = SYSCALL_START.get_ptr_mut(tid)
        {
            // SAFETY: per-tid slot; its other writer is this thread's
            // switch-in, which cannot run while it is on a CPU here.
            unsafe {
                blocked = (*slot).blocked_ns;
                if blocked != 0 {
                    (*slot).blocked_ns = 0;
                }
            }
        }
        (nr, blocked)
    };
    let ret: i64 = ctx.arg(1);
    let acc = match pooled_syscall_acc(tgid, tid, nr as u32) {
        Some(acc) => acc,
        None => match hashed_syscall_acc(tgid, tid, nr as u32) {
            Some(acc) => acc,
            None => return 0,
        },
    };
    // SAFETY: map value keyed by this thread's tid: no concurrent writer.
    unsafe {
        (*acc).count += 1;
        (*acc).total_ns += time_ns;
        if timed {
            (*acc).latency_log2_ns[log2_bucket(time_ns)] += 1;
        }
        if ret < 0 {
            (*acc).errors += 1;
        } else if is_read_family(nr) || is_write_family(nr) || is_recv_family(nr) {
            (*acc).bytes += ret as u64;
        }
    }
    0
}

/// The pooled statistics of (tid, nr): array lookups only once the thread
/// has its slot. None when the thread has no slot or its region is full.
#[inline(always)]
fn pooled_syscall_acc(tgid: u32, tid: u32, nr: u32) -> Option<*mut SyscallAcc> {
    if nr >= SYSCALL_NR_SLOTS {
        return None;
    }
    let thread_ptr = SYSCALL_THREAD.get_ptr_mut(tid)?;
    // SAFETY: per-tid slot; only this thread writes it (and its exit).
    let mut thread = unsafe { *thread_ptr };
    if thread == NO_SLOT {
        return None;
    }
    if thread == 0 {
        let slot = tid % SYSCALL_THREAD_SLOTS;
        thread = if SYSCALL_SLOT_OWNER
            .insert(slot, tid, BPF_NOEXIST as u64)
            .is_ok()
        {
            slot + 1
        } else {
            NO_SLOT
        };
        // SAFETY: as above.
        unsafe { *thread_ptr = thread };
        if thread == NO_SLOT {
            return None;
        }
    }
    let slot = thread - 1;
    let index_ptr = SYSCALL_INDEX.get_ptr_mut(slot * SYSCALL_NR_SLOTS + nr)?;
    // SAFETY: the slot's row belongs to the thread that claimed it: this one.
    let mut index = unsafe { *index_ptr };
    if index == 0 {
        let used_ptr = SYSCALL_SLOT_USED.get_ptr_mut(slot)?;
        // SAFETY: as above.
        let used = unsafe { *used_ptr };
        if used >= SYSCALL_SLOT_ENTRIES {
            return None;
        }
        let entry = slot * SYSCALL_SLOT_ENTRIES + used;
        let key_ptr = SYSCALL_POOL_KEY.get_ptr_mut(entry)?;
        // SAFETY: an entry of this thread's region.
        unsafe {
            *key_ptr = SyscallKey {
                tgid,
                tid,
                nr,
                _pad: 0,
            };
            *used_ptr = used + 1;
        }
        index = used + 1;
        // SAFETY: as above.
        unsafe { *index_ptr = index };
    }
    SYSCALL_POOL.get_ptr_mut(slot * SYSCALL_SLOT_ENTRIES + index - 1)
}

/// The hash-map statistics of (tid, nr), inserted when new.
#[inline(always)]
fn hashed_syscall_acc(tgid: u32, tid: u32, nr: u32) -> Option<*mut SyscallAcc> {
    let key = SyscallKey {
        tgid,
        tid,
        nr,
        _pad: 0,
    };
    if let Some(acc) = SYSCALLS.get_ptr_mut(key) {
        return Some(acc);
    }
    // By reference to the map value: the helper copies it into the map.
    let zero = SYSCALL_ZERO.get(0)?;
    if SYSCALLS.insert(key, zero, BPF_NOEXIST as u64).is_err() {
        count_lost(lost::SYSCALLS_MAP_FULL);
        return None;
    }
    SYSCALLS.get_ptr_mut(key)
}
