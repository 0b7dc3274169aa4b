//! The scheduler and process lifecycle: on-CPU and off-CPU time per thread
//! at `sched_switch` (with off-CPU stacks, or blocked time held until the
//! syscall's exit in DWARF mode), Python frames of off-CPU intervals, and
//! the traced set following forks, execs and exits.
use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid},
    programs::TracePointContext,
};
use storprof_common::{
    FLAG_OFFCPU_DWARF, FLAG_SYSCALL_BLOCKED_TIME, FLAG_UNWIND_PER_PROCESS, NO_SYSCALL,
    OffCpuPending, OffCpuStart, ProcEvent, StackKey, lost, offcpu_state, proc_event,
    tracepoint_offsets as offsets,
};

use crate::{
    kernel::{current_syscall, field, field_again, now_ns},
    maps::{
        CONFIG, DWARF_PROCS, MISSED_SWITCH_INS, OFFCPU_PENDING, OFFCPU_PENDING_FLAG, OFFCPU_STACKS,
        OFFCPU_START, ONCPU_START, PROC_EVENTS, PY_PROCS, SWITCH_STACKS, SYSCALL_START,
        SYSCALL_THREAD, THREADS, TRACED, add_to, count_lost, is_traced, thread_acc,
    },
    stacks::{capture_user_stack, scratch_slot},
};

/// `sched_switch`: ends `prev`'s on-CPU time and starts its off-CPU
/// interval; ends `next`'s off-CPU interval and adds it to its stacks.
#[inline(always)]
pub(crate) fn switch(ctx: &TracePointContext) -> u32 {
    let now = now_ns();
    let prev_tid: u32 = field(ctx, offsets::SCHED_SWITCH_PREV_PID);
    let prev_state: i64 = field(ctx, offsets::SCHED_SWITCH_PREV_STATE);
    let next_tid: u32 = field(ctx, offsets::SCHED_SWITCH_NEXT_PID);
    // `current` is still `prev` here.
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    crate::wakeups::irq_context_clear();

    if prev_tid != 0 && is_traced(tgid) {
        repair_missed_switch_in(prev_tid, now);
        if let Some(acc) = thread_acc(tgid, prev_tid) {
            let started = ONCPU_START.get(prev_tid).copied().unwrap_or(0);
            // SAFETY: map value of `prev_tid`, written only while that thread is
            // being switched on/off this CPU.
            unsafe {
                if started != 0 && now > started {
                    (*acc).on_cpu_ns += now - started;
                }
                (*acc).comm = bpf_get_current_comm().unwrap_or((*acc).comm);
            }
        }
        let (user_stack, kernel_stack) =
            crate::switch_stacks::switch_out_stacks(ctx, prev_tid, prev_state, now);
        let prev_state: i64 = field_again(ctx, offsets::SCHED_SWITCH_PREV_STATE);
        let mut state = offcpu_state::from_prev_state(prev_state) as u32;
        let syscall = syscall_slept_in(state);
        if syscall != NO_SYSCALL && stack_at_syscall_exit(tgid) {
            state |= offcpu_state::AT_SYSCALL_EXIT;
        }
        if let Some(slot) = OFFCPU_START.get_ptr_mut(prev_tid) {
            // SAFETY: per-tid slot, see above.
            unsafe {
                *slot = OffCpuStart {
                    ts: now,
                    tgid,
                    state,
                    user_stack,
                    kernel_stack,
                    woken_ts: 0,
                    syscall,
                    _pad: 0,
                }
            };
        }
    }

    if next_tid != 0 {
        if let Some(slot) = ONCPU_START.get_ptr_mut(next_tid) {
            // SAFETY: per-tid slot, see above.
            unsafe { *slot = now };
        }
        end_offcpu(next_tid, now);
    }
    0
}

/// Ends thread `tid`'s off-CPU interval at its switch-in `end`: the time
/// goes to the state it blocked in (runnable after its wake-up), to the
/// syscall it blocked in and to its stacks. Nothing when none is open.
#[inline(always)]
fn end_offcpu(tid: u32, end: u64) {
    let Some(off) = OFFCPU_START.get_ptr_mut(tid) else {
        return;
    };
    // SAFETY: per-tid slot, written at the thread's switch-out and here (its
    // switch-in, or when it is on a CPU), and by its wake-up before either.
    let off_copy = unsafe { *off };
    if off_copy.ts == 0 {
        return;
    }
    // SAFETY: as above.
    unsafe { (*off).ts = 0 };
    // An empty interval (a repaired preemption, or clocks read out of order
    // on two CPUs) is closed without adding anything.
    if end <= off_copy.ts {
        return;
    }
    let blocked = end - off_copy.ts;
    if let Some(acc) = THREADS.get_ptr_mut(tid) {
        let state = (off_copy.state & offcpu_state::INDEX_MASK) as usize;
        // Woken earlier, the thread then waited for a CPU: that part is
        // runnable time, not the state it blocked in.
        let (asleep, queued) = off_copy.split_at_wake(end);
        // SAFETY: map value of `tid`, which is being switched in or runs.
        unsafe {
            (*acc).off_cpu_ns[state] += asleep;
            (*acc).off_cpu_ns[offcpu_state::RUNNABLE] += queued;
        }
    }
    if off_copy.syscall != NO_SYSCALL {
        add_syscall_blocked(tid, blocked);
    }
    let key = StackKey {
        tgid: off_copy.tgid,
        tid,
        user_stack: off_copy.user_stack,
        kernel_stack: off_copy.kernel_stack,
    };
    if off_copy.state & offcpu_state::AT_SYSCALL_EXIT != 0 {
        pend_offcpu(key, off_copy.state & offcpu_state::INDEX_MASK, blocked);
    } else {
        add_to(&OFFCPU_STACKS, &key, blocked, lost::OFFCPU_MAP_FULL);
    }
}

/// Whether thread `tid` has an off-CPU interval open (one array load).
#[inline(always)]
pub(crate) fn offcpu_open(tid: u32) -> bool {
    OFFCPU_START.get(tid).is_some_and(|off| off.ts != 0)
}

/// For thread `tid`, known to be on a CPU at `now` (at its switch-out or a
/// syscall exit): when its off-CPU interval is still open, the kernel ran
/// it without a `sched_switch` event for its switch-in (seen on a VM whose
/// agent thread is switched away from without the tracepoint firing). The
/// switch-in is put at its wake-up (`sched_waking` still saw that), or, not
/// woken, at its switch-out for a preempted thread and at `now` for one that
/// blocked: a missed switch-in never turns a sleep into time on a CPU. The
/// interval is then ended there as the switch-in would have, and counted.
#[inline(always)]
pub(crate) fn repair_missed_switch_in(tid: u32, now: u64) {
    let Some(off) = OFFCPU_START.get(tid) else {
        return;
    };
    if off.ts == 0 || now <= off.ts {
        return;
    }
    let switched_in = match off.woken_at(now) {
        Some(woken) => woken,
        None if off.state & offcpu_state::INDEX_MASK == offcpu_state::RUNNABLE as u32 => off.ts,
        None => now,
    };
    if let Some(slot) = ONCPU_START.get_ptr_mut(tid) {
        // SAFETY: per-tid slot of the thread on this CPU.
        unsafe { *slot = switched_in };
    }
    end_offcpu(tid, switched_in);
    if let Some(counter) = MISSED_SWITCH_INS.get_ptr_mut(0) {
        // SAFETY: this CPU's slot; these hooks do not nest on one CPU.
        unsafe { *counter += 1 };
    }
}

/// The syscall the current task, leaving the CPU in `offcpu_state` index
/// `state`, sleeps in; `NO_SYSCALL` when it was preempted (it may be past
/// its syscall's exit: preemption on the way back to user space still
/// shows the syscall's number) or is not inside one.
#[inline(always)]
pub(crate) fn syscall_slept_in(state: u32) -> u32 {
    if state == offcpu_state::RUNNABLE as u32 {
        NO_SYSCALL
    } else {
        current_syscall()
    }
}

/// `FLAG_SYSCALL_BLOCKED_TIME`: adds `blocked` ns to the time thread `tid`
/// has spent switched out inside its current syscall, which `sys_exit`
/// takes as the call's time.
#[inline(always)]
fn add_syscall_blocked(tid: u32, blocked: u64) {
    if CONFIG
        .get(0)
        .is_none_or(|c| c.flags & FLAG_SYSCALL_BLOCKED_TIME == 0)
    {
        return;
    }
    if let Some(slot) = SYSCALL_START.get_ptr_mut(tid) {
        // SAFETY: per-tid slot; written here at the thread's switch-in and
        // at its own syscall exit, never at the same time.
        unsafe { (*slot).blocked_ns += blocked };
    }
}

/// Whether a thread of `tgid` that blocks inside a syscall now belongs to
/// a DWARF-unwound process: then its user stack stays as it is until the
/// syscall's exit, and is copied there (`FLAG_OFFCPU_DWARF`).
#[inline(always)]
pub(crate) fn stack_at_syscall_exit(tgid: u32) -> bool {
    let Some(config) = CONFIG.get(0) else {
        return false;
    };
    if config.flags & FLAG_OFFCPU_DWARF == 0 {
        return false;
    }
    // SAFETY: the lookup result is only tested.
    config.flags & FLAG_UNWIND_PER_PROCESS == 0 || unsafe { DWARF_PROCS.get(tgid) }.is_some()
}

/// The weight a blocked interval of `blocked` ns is taken with, sampled by
/// `ProbeConfig::offcpu_quantum_us`: an interval shorter than the quantum
/// is taken (None: left out) with probability `blocked / quantum` and then
/// weighs a whole quantum, so the expected weight is its length.
#[inline(always)]
pub(crate) fn sampled_weight(blocked: u64) -> Option<u64> {
    let quantum = CONFIG
        .get(0)
        .map_or(0, |c| c.offcpu_quantum_us as u64 * 1000);
    if quantum == 0 || blocked >= quantum {
        return Some(blocked);
    }
    // SAFETY: no preconditions.
    let draw = unsafe { aya_ebpf::helpers::bpf_get_prandom_u32() } as u64;
    (draw % quantum < blocked).then_some(quantum)
}

/// The stack ids `switch` (attached first to the same tracepoint) stored
/// for thread `tid` of `tgid` leaving the CPU at about `now`, when it did.
#[inline(always)]
pub(crate) fn stacks_just_taken(tid: u32, tgid: u32, now: u64) -> Option<(i32, i32)> {
    let off = OFFCPU_START.get(tid)?;
    let fresh = off.ts != 0 && off.tgid == tgid && now.wrapping_sub(off.ts) < JUST_TAKEN_NS;
    fresh.then_some((off.user_stack, off.kernel_stack))
}

/// How recent `switch`'s record of a switch-out must be to be the one the
/// Python program's run on the same switch sees.
const JUST_TAKEN_NS: u64 = 50_000;

/// Adds a blocked interval of a thread inside a syscall to its pending
/// off-CPU time, sampled ([`sampled_weight`]).
#[inline(always)]
fn pend_offcpu(key: StackKey, state: u32, blocked: u64) {
    let Some(weight) = sampled_weight(blocked) else {
        return;
    };
    let tid = key.tid;
    let Some(flag) = OFFCPU_PENDING_FLAG.get_ptr_mut(tid) else {
        return;
    };
    // SAFETY: per-tid slot of the thread being switched in here; its
    // pending entry is written only here and at its own syscall exit,
    // which cannot run while it is being switched in.
    unsafe {
        if *flag != 0
            && let Some(entry) = OFFCPU_PENDING.get_ptr_mut(tid)
        {
            (*entry).weight_ns += weight;
            (*entry).intervals += 1;
            if weight > (*entry).largest_ns {
                (*entry).largest_ns = weight;
                (*entry).state = state;
                (*entry).user_stack = key.user_stack;
                (*entry).kernel_stack = key.kernel_stack;
            }
            return;
        }
    }
    let entry = OffCpuPending {
        weight_ns: weight,
        largest_ns: weight,
        tgid: key.tgid,
        state,
        user_stack: key.user_stack,
        kernel_stack: key.kernel_stack,
        intervals: 1,
        _pad: 0,
    };
    if OFFCPU_PENDING.insert(tid, entry, 0).is_ok() {
        // SAFETY: as above.
        unsafe { *flag = 1 };
    } else {
        // Counted, and the time still shows under the frame-pointer stack.
        count_lost(lost::OFFCPU_PENDING_FULL);
        add_to(&OFFCPU_STACKS, &key, weight, lost::OFFCPU_MAP_FULL);
    }
}

/// Whether the current thread has blocked time pending (one array load:
/// this runs at every traced syscall exit); clears the mark.
#[inline(always)]
pub(crate) fn take_offcpu_pending(tid: u32) -> bool {
    let Some(flag) = OFFCPU_PENDING_FLAG.get_ptr_mut(tid) else {
        return false;
    };
    // SAFETY: per-tid slot of the current thread.
    unsafe {
        if *flag == 0 {
            return false;
        }
        *flag = 0;
    }
    true
}

/// At a syscall's exit: the pending blocked time of this thread, sent
/// with its user stack (the same as when it blocked) to `STACK_EVENTS`.
/// Not inlined: `sys_exit`'s own frame and the stack copy's would not fit
/// one 512-byte BPF stack frame together.
#[inline(never)]
pub(crate) fn flush_offcpu(tgid: u32, tid: u32, regs: *const u64) {
    // SAFETY: the value is copied out before the entry is removed.
    let Some(pending) = (unsafe { OFFCPU_PENDING.get(tid) }).copied() else {
        return;
    };
    let _ = OFFCPU_PENDING.remove(tid);
    if pending.tgid != tgid {
        // Not this process's time (a stale entry of a reused tid).
        return;
    }
    let stack_bytes = CONFIG.get(0).map_or(0, |c| c.stack_bytes);
    let key = StackKey {
        tgid,
        tid,
        user_stack: pending.user_stack,
        kernel_stack: pending.kernel_stack,
    };
    // SAFETY: no preconditions.
    let cpu = unsafe { aya_ebpf::helpers::bpf_get_smp_processor_id() };
    // The second slot: a CPU sample (an NMI) may interrupt this copy.
    capture_user_stack(key, stack_bytes, regs, scratch_slot(cpu) + 1, &pending);
}

#[inline(always)]
fn emit_proc_event(kind: u32, tgid: u32, tid: u32, group_dead: u32) {
    let event = ProcEvent {
        kind,
        tgid,
        tid,
        group_dead,
        ts: now_ns(),
    };
    if PROC_EVENTS.output::<ProcEvent>(&event, 0).is_err() {
        count_lost(lost::PROC_RINGBUF_FULL);
    }
}

/// `sched_process_fork`: a traced parent's child (or thread) is traced,
/// with the parent's interpreter and unwinding mode.
#[inline(always)]
pub(crate) fn process_fork(ctx: &TracePointContext) -> u32 {
    // `current` is the parent.
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let child: u32 = field(ctx, offsets::SCHED_PROCESS_FORK_CHILD_PID);
    if !is_traced(tgid) {
        // A traced process's slot stays marked after it exits (its last
        // switch-out comes after its exit event); once its pid is reused
        // by a process we do not trace, the mark goes.
        if let Some(slot) = TRACED.get_ptr_mut(child) {
            // SAFETY: a u32 array slot; only the fork of this pid writes it now.
            unsafe {
                if *slot != 0 {
                    *slot = 0;
                }
            }
        }
        return 0;
    }
    // Threads are forks too: marking a thread's tid is harmless (no other
    // process can own that pid while it lives) and undone at its exit.
    if let Some(slot) = TRACED.get_ptr_mut(child) {
        // SAFETY: a u32 array slot; a racing writer would write the same value.
        unsafe { *slot = 1 };
    }
    // A forked child runs the parent's interpreter at the same addresses.
    // SAFETY: the value is copied out at once.
    if let Some(py) = (unsafe { PY_PROCS.get(tgid) }).copied() {
        let _ = PY_PROCS.insert(child, py, 0);
    }
    // ... and the same executable, so it unwinds the same way.
    // SAFETY: the value is copied out at once.
    if let Some(mode) = (unsafe { DWARF_PROCS.get(tgid) }).copied() {
        let _ = DWARF_PROCS.insert(child, mode, 0);
    }
    emit_proc_event(proc_event::FORK, tgid, child, 0);
    0
}

/// `sched_process_exec`: the recorded command starts being traced; a
/// traced process's new image loses its interpreter and unwinding mode.
#[inline(always)]
pub(crate) fn process_exec() -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !is_traced(tgid) {
        let root = CONFIG.get(0).map(|c| c.root_tgid).unwrap_or(0);
        if root == 0 || root != tgid {
            return 0;
        }
        // The recorded command: trace it from its exec on.
        if let Some(slot) = TRACED.get_ptr_mut(tgid) {
            // SAFETY: a u32 array slot.
            unsafe { *slot = 1 };
        }
    }
    // A new image: its interpreter (if any) is registered anew by user space.
    let _ = PY_PROCS.remove(tgid);
    // ... and its unwinding mode is decided anew.
    let _ = DWARF_PROCS.remove(tgid);
    // Time blocked in `execve` would otherwise get the new image's stack.
    let tid = pid_tgid as u32;
    if let Some(flag) = OFFCPU_PENDING_FLAG.get_ptr_mut(tid) {
        // SAFETY: per-tid slot of the current thread.
        if unsafe { *flag } != 0 {
            // SAFETY: as above.
            unsafe { *flag = 0 };
            let _ = OFFCPU_PENDING.remove(tid);
        }
    }
    // ... and frames of the old image would be named from the new one.
    crate::python_offcpu::forget_python_frames(tid);
    emit_proc_event(proc_event::EXEC, tgid, pid_tgid as u32, 0);
    0
}

/// `sched_process_exit`: clears the exiting thread's per-tid state so a
/// later thread with its tid starts afresh.
#[inline(always)]
pub(crate) fn process_exit(ctx: &TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;
    if !is_traced(tgid) {
        return 0;
    }
    // A later thread with this tid gets its own syscall slot.
    if let Some(slot) = SYSCALL_THREAD.get_ptr_mut(tid) {
        // SAFETY: per-tid slot of the exiting thread.
        unsafe { *slot = 0 };
    }
    // ... starts outside any syscall (this one exits inside `exit`) ...
    if let Some(slot) = SYSCALL_START.get_ptr_mut(tid) {
        // SAFETY: per-tid slot of the exiting thread.
        unsafe {
            (*slot).ts = 0;
            (*slot).blocked_ns = 0;
        }
    }
    // ... keeps no stacks or Python frames of this one's switch-outs ...
    let _ = SWITCH_STACKS.remove(tid);
    crate::python_offcpu::forget_python_frames(tid);
    // ... and has no blocked time pending.
    if let Some(flag) = OFFCPU_PENDING_FLAG.get_ptr_mut(tid) {
        // SAFETY: per-tid slot of the exiting thread.
        if unsafe { *flag } != 0 {
            // SAFETY: as above.
            unsafe { *flag = 0 };
            let _ = OFFCPU_PENDING.remove(tid);
        }
    }
    if tid != tgid || group_dead_now(ctx) {
        // The entry copied at the fork of this thread or process.
        let _ = PY_PROCS.remove(tid);
        let _ = DWARF_PROCS.remove(tid);
    }
    if tid != tgid {
        // Undo the fork-time mark of a thread's tid.
        if let Some(slot) = TRACED.get_ptr_mut(tid) {
            // SAFETY: a u32 array slot.
            unsafe { *slot = 0 };
        }
    }
    let group_dead: u8 = field(ctx, offsets::SCHED_PROCESS_EXIT_GROUP_DEAD);
    emit_proc_event(proc_event::EXIT, tgid, tid, group_dead as u32);
    0
}

#[inline(always)]
fn group_dead_now(ctx: &TracePointContext) -> bool {
    field::<u8>(ctx, offsets::SCHED_PROCESS_EXIT_GROUP_DEAD) != 0
}
