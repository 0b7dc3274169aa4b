//! Syscalls (raw `sys_enter`/`sys_exit`): per-thread per-syscall counts,
//! errors, bytes of the read/write families and a latency histogram, in
//! array slots claimed per thread (no hashing at `sys_exit`) with a hash
//! map fallback; `sys_exit` also sends pending off-CPU time's user stack.
use aya_ebpf::{
    bindings::BPF_NOEXIST, helpers::bpf_get_current_pid_tgid, programs::RawTracePointContext,
};
use storprof_common::{
    FLAG_SYSCALL_LATENCY, FUTEX_NR, SYSCALL_NR_SLOTS, SYSCALL_SLOT_ENTRIES, SYSCALL_THREAD_SLOTS,
    SyscallAcc, SyscallKey, SyscallStart, is_read_family, is_write_family, log2_bucket, lost,
};

use crate::{
    kernel::{now_ns, pt_regs, pt_regs_word},
    maps::{
        CONFIG, SYSCALL_INDEX, SYSCALL_POOL, SYSCALL_POOL_KEY, SYSCALL_SLOT_OWNER,
        SYSCALL_SLOT_USED, SYSCALL_START, SYSCALL_THREAD, SYSCALLS, count_lost, is_traced,
    },
    sched::{flush_offcpu, take_offcpu_pending},
    wakeups::{is_futex_wait, remember_futex_wait},
};

/// `SYSCALL_THREAD` value of a thread without a slot of its own.
const NO_SLOT: u32 = u32::MAX;

/// The all-zero syscall accumulator inserted on a thread's first call.
static SYSCALL_ZERO: SyscallAcc = SyscallAcc::ZERO;

/// `sys_enter`: the syscall's start (for its latency and for off-CPU and
/// wake-up attribution), and the word of a futex wait.
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
        unsafe { *slot = SyscallStart { ts: now_ns(), nr } };
    }
    if nr == FUTEX_NR {
        let regs: *const u64 = ctx.arg(0);
        // The futex op is the second argument, the futex word the first.
        let op = pt_regs_word(regs, pt_regs::SI).unwrap_or(1);
        if is_futex_wait(op) {
            let word = pt_regs_word(regs, pt_regs::DI).unwrap_or(0);
            remember_futex_wait(tid, word);
        }
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
    if take_offcpu_pending(tid) {
        flush_offcpu(tgid, tid, ctx.arg(0));
    }
    let latency_on = CONFIG
        .get(0)
        .is_some_and(|c| c.flags & FLAG_SYSCALL_LATENCY != 0);
    let (nr, latency) = if latency_on {
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
        // Exit-only mode: the syscall number is regs->orig_ax.
        let regs: *const u64 = ctx.arg(0);
        match pt_regs_word(regs, pt_regs::ORIG_AX) {
            Some(nr) => (nr, 0),
            None => return 0,
        }
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
        (*acc).total_ns += latency;
        if latency_on {
            (*acc).latency_log2_ns[log2_bucket(latency)] += 1;
        }
        if ret < 0 {
            (*acc).errors += 1;
        } else if is_read_family(nr) || is_write_family(nr) {
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
    if SYSCALLS
        .insert(key, SYSCALL_ZERO, BPF_NOEXIST as u64)
        .is_err()
    {
        count_lost(lost::SYSCALLS_MAP_FULL);
        return None;
    }
    SYSCALLS.get_ptr_mut(key)
}
