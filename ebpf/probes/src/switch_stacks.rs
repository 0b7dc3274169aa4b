//! Stacks at `sched_switch`: a thread that leaves the CPU again and again
//! from the same place (a futex hand-off, a small read) has its stacks
//! taken about every 10 ms instead of at every switch (preemptions too),
//! most of that hook's cost; the Python off-CPU program reuses the ones
//! `switch` took.
use aya_ebpf::programs::TracePointContext;
use storprof_common::{offcpu_state, tracepoint_offsets as offsets};

use crate::{
    kernel::{current_syscall, field_again, pt_regs, pt_regs_word},
    maps::{STACK_BUF_TRACE, SWITCH_STACK_WAYS, SWITCH_STACKS, SwitchStackWay, SwitchStacks},
    stacks::stack_ids,
};

/// How long the stacks a switch-out took stand for the thread's next
/// switch-outs from the same place: a thread that blocks thousands of
/// times a second in one call (a futex hand-off, a small read) has its
/// stacks taken about every 10 ms instead of at every switch, which was
/// most of this hook's cost.
pub(crate) const STACK_REUSE_NS: u64 = 10_000_000;

/// The (user, kernel) stack ids of the current task `tid`, leaving the CPU
/// at `now` in `prev_state` (inside a syscall or not): those one of its
/// last switch-outs took when that was from the same place (the same
/// syscall and state, the same user instruction and stack pointers) less
/// than `STACK_REUSE_NS` ago, else taken now and remembered.
///
/// Preemptions are keyed the same way: the user registers are where a
/// thread preempted in user space stopped, or the syscall a thread
/// preempted in the kernel is in. A hand-off preempts the waker at its
/// syscall's return thousands of times a second; taking those stacks anew
/// each time was most of this hook's cost in a futex storm. The one
/// confusion left: a preemption inside a syscall may get the kernel stack
/// of another preemption in the same call less than 10 ms before; both are
/// time spent runnable in that call.
#[inline(always)]
pub(crate) fn switch_out_stacks(
    ctx: &TracePointContext,
    tid: u32,
    prev_state: i64,
    now: u64,
) -> (i32, i32) {
    if let Some(ids) = reusable_stacks(tid, prev_state, now) {
        return ids;
    }
    // Only what lived across `stack_ids` before the reuse lives across it
    // now (the state and syscall are worked out again after): more there,
    // known differently on each way here, had the verifier walk it once
    // per way, several times the work at every load.
    let ids = stack_ids(ctx, STACK_BUF_TRACE);
    remember_stacks(
        tid,
        field_again(ctx, offsets::SCHED_SWITCH_PREV_STATE),
        now,
        ids,
    );
    ids
}

/// The `offcpu_state` index of a switch-out in `prev_state`, and the
/// syscall the thread is in (`NO_SYSCALL` outside one), preempted or not.
#[inline(always)]
fn state_and_syscall(prev_state: i64) -> (u32, u32) {
    let state = offcpu_state::from_prev_state(prev_state) as u32;
    (state, current_syscall())
}

/// The current task's user instruction and stack pointers (0 when its
/// saved registers cannot be read).
#[inline(always)]
fn user_ip_sp() -> (u64, u64) {
    // SAFETY: helpers without preconditions; the saved user register frame
    // is read only through probe_read_kernel.
    let regs = unsafe {
        let task = aya_ebpf::helpers::generated::bpf_get_current_task_btf();
        aya_ebpf::helpers::generated::bpf_task_pt_regs(task) as *const u64
    };
    (
        pt_regs_word(regs, pt_regs::IP).unwrap_or(0),
        pt_regs_word(regs, pt_regs::SP).unwrap_or(0),
    )
}

/// The stacks thread `tid`'s last switch-out took, when they stand for
/// this one (see [`switch_out_stacks`]).
#[inline(always)]
fn reusable_stacks(tid: u32, prev_state: i64, now: u64) -> Option<(i32, i32)> {
    let (state, syscall) = state_and_syscall(prev_state);
    // SAFETY: the value of `tid`, written only at that thread's own
    // switch-outs (this one, on this CPU) and removed at its exit.
    let slot = unsafe { SWITCH_STACKS.get(tid) }?;
    let (ip, sp) = user_ip_sp();
    slot.ways
        .iter()
        .find(|way| way.stands_for(ip, sp, syscall, state, now, STACK_REUSE_NS))
        .map(|way| (way.user_stack, way.kernel_stack))
}

/// Remembers the stacks a switch-out of thread `tid` took, in place of
/// the oldest of its ways.
#[inline(always)]
fn remember_stacks(tid: u32, prev_state: i64, now: u64, ids: (i32, i32)) {
    let (state, syscall) = state_and_syscall(prev_state);
    let (ip, sp) = user_ip_sp();
    let way = SwitchStackWay {
        ip,
        sp,
        taken_ns: now,
        syscall,
        state,
        user_stack: ids.0,
        kernel_stack: ids.1,
    };
    let Some(slot) = SWITCH_STACKS.get_ptr_mut(tid) else {
        // The thread's first switch-out: its entry, the other ways empty
        // (`ip` 0 never stands for a switch-out). A full map keeps
        // nothing: the next switch-out takes its stacks anew.
        let empty = SwitchStackWay {
            ip: 0,
            taken_ns: 0,
            ..way
        };
        let mut ways = [empty; SWITCH_STACK_WAYS];
        ways[0] = way;
        let _ = SWITCH_STACKS.insert(tid, SwitchStacks { ways }, 0);
        return;
    };
    // SAFETY: the value of the thread leaving this CPU; written only at
    // its own switch-outs.
    unsafe {
        let mut oldest = 0;
        for (i, candidate) in (*slot).ways.iter().enumerate() {
            if candidate.taken_ns < (*slot).ways[oldest].taken_ns {
                oldest = i;
            }
        }
        // `oldest` is in bounds; the modulo shows the verifier so.
        (*slot).ways[oldest % SWITCH_STACK_WAYS] = way;
    }
}
