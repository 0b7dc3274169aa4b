//! Python frames of off-CPU intervals (DWARF mode): at a Python thread's
//! switch-out its frames go to `PY_OFFCPU`, at its switch-in they are sent
//! with the time it was off the CPU (`PY_OFFCPU_EVENTS`), sampled by the
//! off-CPU quantum. A runnable interval (a preemption) keeps its entry
//! after the switch-in, and the thread's next preemptions within
//! `STACK_REUSE_NS` send the same frames (with the native stacks taken
//! with them) without walking them again: a
//! CPU-bound thread is preempted every few milliseconds, most of those
//! intervals are shorter than the quantum and dropped at switch-in, and a
//! walk at each was most of this program's cost.
use aya_ebpf::{helpers::bpf_get_current_pid_tgid, programs::TracePointContext};
use storprof_common::{
    NO_SYSCALL, PyOffCpuSample, offcpu_state, py_offcpu_lost, tracepoint_offsets as offsets,
};

use crate::{
    kernel::{field, now_ns},
    maps::{
        PY_OFFCPU, PY_OFFCPU_EVENTS, PY_OFFCPU_PENDING, PY_OFFCPU_SCRATCH, PY_PROCS,
        STACK_BUF_TRACE, count_py_offcpu_lost, is_traced,
    },
    python::python_frames,
    sched::{sampled_weight, stack_at_syscall_exit, stacks_just_taken, syscall_slept_in},
    stacks::stack_ids,
    switch_stacks::STACK_REUSE_NS,
};

/// `offcpu_python`: at switch-out, the Python frames of a registered
/// interpreter's thread (`PY_OFFCPU`); at its switch-in, sent with the
/// time it was blocked (`PY_OFFCPU_EVENTS`).
#[inline(always)]
pub(crate) fn offcpu_python(ctx: &TracePointContext) -> u32 {
    let now = now_ns();
    let prev_tid: u32 = field(ctx, offsets::SCHED_SWITCH_PREV_PID);
    let prev_state: i64 = field(ctx, offsets::SCHED_SWITCH_PREV_STATE);
    let next_tid: u32 = field(ctx, offsets::SCHED_SWITCH_NEXT_PID);
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let state = offcpu_state::from_prev_state(prev_state) as u32;

    // An interval inside a syscall of a DWARF-unwound process gets its
    // Python frames with its native stack at the syscall's exit instead.
    if prev_tid != 0
        && is_traced(tgid)
        // SAFETY: the lookup result is only tested.
        && unsafe { PY_PROCS.get(tgid) }.is_some()
        && !(stack_at_syscall_exit(tgid) && syscall_slept_in(state) != NO_SYSCALL)
    {
        take_frames(ctx, prev_tid, tgid, state, now);
    }

    if next_tid != 0 {
        send_interval(next_tid, now);
    }
    0
}

/// Puts the Python frames of thread `tid` of `tgid`, leaving the CPU at
/// `now` in `state`, into its `PY_OFFCPU` entry, pending until its
/// switch-in: walked now, or, for a runnable interval, those its entry
/// holds when they were walked at a runnable switch-out less than
/// `STACK_REUSE_NS` ago (a sample of where the thread ran, as the native
/// stacks of `switch_stacks` are: [`reuse_frames`]).
#[inline(always)]
fn take_frames(ctx: &TracePointContext, tid: u32, tgid: u32, state: u32, now: u64) {
    let runnable = state == offcpu_state::RUNNABLE as u32;
    if runnable && reuse_frames(tid, tgid, now) {
        return;
    }
    let Some(scratch) = PY_OFFCPU_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    // Before the walk: nothing that differs between a runnable switch-out
    // and another lives across it, so the verifier walks it once.
    // SAFETY: this CPU's scratch value.
    unsafe {
        (*scratch).walked_ns = if runnable { now } else { 0 };
        (*scratch).state = state;
    }
    // SAFETY: as above.
    let walked = python_frames(tgid, tid, unsafe { &mut (*scratch).py }, STACK_BUF_TRACE);
    if walked.0 == 0 {
        return;
    }
    let (user_stack, kernel_stack) =
        stacks_just_taken(tid, tgid, now).unwrap_or_else(|| stack_ids(ctx, STACK_BUF_TRACE));
    // SAFETY: this CPU's scratch value.
    unsafe {
        (*scratch).tgid = tgid;
        (*scratch).tid = tid;
        (*scratch).user_stack = user_stack;
        (*scratch).kernel_stack = kernel_stack;
        (*scratch).ts_out = now;
        (*scratch).blocked_ns = 0;
        (*scratch).py_frames = walked.0;
        (*scratch).py_status = walked.1;
    }
    // By reference: a copy of the value would not fit the BPF stack.
    #[allow(clippy::needless_borrows_for_generic_args)]
    // SAFETY: as above; the map copies the value.
    let inserted = PY_OFFCPU.insert(tid, unsafe { &*scratch }, 0).is_ok();
    if inserted {
        mark_pending(tid);
    } else {
        count_py_offcpu_lost(py_offcpu_lost::MAP_FULL);
    }
}

/// When thread `tid`'s `PY_OFFCPU` entry holds frames walked at a runnable
/// switch-out of process `tgid` less than `STACK_REUSE_NS` before `now`,
/// makes it pending again for this runnable interval and says so. The
/// entry keeps the native stacks taken with its frames, so that the two
/// agree (and no stack is taken here, which kept this path from doubling
/// what the verifier walks).
#[inline(always)]
fn reuse_frames(tid: u32, tgid: u32, now: u64) -> bool {
    let Some(entry) = PY_OFFCPU.get_ptr_mut(tid) else {
        return false;
    };
    // SAFETY: the entry of the thread leaving this CPU, written only at its
    // own switch-outs and switch-ins (never on two CPUs at once).
    let (walked_ns, owner) = unsafe { ((*entry).walked_ns, (*entry).tgid) };
    if walked_ns == 0 || owner != tgid || now.wrapping_sub(walked_ns) >= STACK_REUSE_NS {
        return false;
    }
    // SAFETY: as above.
    unsafe {
        (*entry).ts_out = now;
        (*entry).blocked_ns = 0;
        (*entry).state = offcpu_state::RUNNABLE as u32;
    }
    mark_pending(tid);
    true
}

/// Flags `tid`'s `PY_OFFCPU` entry as waiting for its switch-in.
#[inline(always)]
fn mark_pending(tid: u32) {
    if let Some(pending) = PY_OFFCPU_PENDING.get_ptr_mut(tid) {
        // SAFETY: per-tid slot of the thread leaving this CPU.
        unsafe { *pending = 1 };
    }
}

/// The switch-in of thread `tid` at `now`: its pending interval, if any,
/// goes out with the time it was off the CPU (sampled). The entry stays
/// when its frames may stand for the next preemptions.
#[inline(always)]
fn send_interval(tid: u32, now: u64) {
    let Some(pending) = PY_OFFCPU_PENDING.get_ptr_mut(tid) else {
        return;
    };
    // SAFETY: per-tid slot of the thread being switched in here.
    if unsafe { *pending } == 0 {
        return;
    }
    // SAFETY: as above.
    unsafe { *pending = 0 };
    let Some(entry) = PY_OFFCPU.get_ptr_mut(tid) else {
        return;
    };
    // SAFETY: the entry of `tid`, written only at its own switch-outs and
    // switch-ins.
    let keep = unsafe {
        let blocked = now.saturating_sub((*entry).ts_out);
        if let Some(weight) = sampled_weight(blocked) {
            (*entry).blocked_ns = weight;
            if PY_OFFCPU_EVENTS
                .output::<PyOffCpuSample>(&*entry, 0)
                .is_err()
            {
                count_py_offcpu_lost(py_offcpu_lost::RINGBUF_FULL);
            }
        }
        (*entry).walked_ns != 0
    };
    if !keep {
        let _ = PY_OFFCPU.remove(tid);
    }
}

/// Drops thread `tid`'s Python off-CPU entry (it exits, or its process
/// runs a new image).
#[inline(always)]
pub(crate) fn forget_python_frames(tid: u32) {
    if let Some(pending) = PY_OFFCPU_PENDING.get_ptr_mut(tid) {
        // SAFETY: per-tid slot of the current thread.
        unsafe { *pending = 0 };
    }
    let _ = PY_OFFCPU.remove(tid);
}
