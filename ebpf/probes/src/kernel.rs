//! Reads from the kernel shared by every module: tracepoint record fields,
//! kernel memory, the saved user registers' layout and the clock; and
//! `bounded_loop`, the one way the probes loop.
use aya_ebpf::{
    EbpfContext,
    cty::c_void,
    helpers::{bpf_ktime_get_ns, generated::bpf_loop},
    programs::TracePointContext,
};
use storprof_common::NO_SYSCALL;

/// x86_64 `struct pt_regs` word indices.
pub(crate) mod pt_regs {
    pub(crate) const BP: usize = 4;
    /// The third syscall argument.
    pub(crate) const DX: usize = 12;
    /// The second syscall argument.
    pub(crate) const SI: usize = 13;
    /// The first syscall argument.
    pub(crate) const DI: usize = 14;
    /// The syscall number.
    pub(crate) const ORIG_AX: usize = 15;
    pub(crate) const IP: usize = 16;
    pub(crate) const SP: usize = 19;
}

/// A `bpf_loop` callback: step `index` over the caller's state at `ctx`;
/// returns 0 to go on, 1 to stop.
pub(crate) type LoopStep = extern "C" fn(index: u64, ctx: *mut c_void) -> i64;

/// Runs `step` over `state` for indices `0..count` until it returns 1.
/// The verifier checks a callback's body once, where it walks an inlined
/// loop once per iteration, and the rest of the program once per way out
/// of it, at each place the loop is inlined.
#[inline(always)]
pub(crate) fn bounded_loop<T>(count: u32, step: LoopStep, state: &mut T) {
    // SAFETY: `step` has `bpf_loop`'s callback signature, and `state`, the
    // pointer it is handed, outlives the call.
    unsafe {
        bpf_loop(
            count,
            step as *mut c_void,
            core::ptr::from_mut(state).cast(),
            0,
        )
    };
}

#[inline(always)]
pub(crate) fn now_ns() -> u64 {
    // SAFETY: a helper without arguments or preconditions.
    unsafe { bpf_ktime_get_ns() }
}

/// Reads a field of a tracepoint record at `offset` (one of
/// `storprof_common::tracepoint_offsets`, checked by user space before
/// attaching).
#[inline(always)]
pub(crate) fn field<T: Copy>(ctx: &TracePointContext, offset: usize) -> T {
    // SAFETY: the tracepoint context is the record itself; the verifier
    // bounds-checks direct context reads.
    unsafe { core::ptr::read_unaligned(ctx.as_ptr().cast::<u8>().add(offset).cast::<T>()) }
}

/// [`field`], read again however often it was read before: what the
/// verifier learnt of the earlier read on each branch does not carry over
/// (see `sched::switch_out_stacks`).
#[inline(always)]
pub(crate) fn field_again<T: Copy>(ctx: &TracePointContext, offset: usize) -> T {
    // SAFETY: as in `field`; volatile only so the read is not merged.
    unsafe { core::ptr::read_volatile(ctx.as_ptr().cast::<u8>().add(offset).cast::<T>()) }
}

/// Reads a kernel value at `base + offset` (0 when unreadable).
#[inline(always)]
pub(crate) fn kernel_read<T: Copy + Default>(base: u64, offset: u32) -> T {
    // SAFETY: the checked helper copies from kernel memory and fails
    // instead of faulting on a bad address.
    unsafe { aya_ebpf::helpers::bpf_probe_read_kernel((base + offset as u64) as *const T) }
        .unwrap_or_default()
}

/// Reads word `index` of the saved register frame at `regs` (None when
/// unreadable).
#[inline(always)]
pub(crate) fn pt_regs_word(regs: *const u64, index: usize) -> Option<u64> {
    // SAFETY: a word of pt_regs, read through the checked helper.
    unsafe { aya_ebpf::helpers::bpf_probe_read_kernel(regs.wrapping_add(index)) }.ok()
}

/// The syscall the current task is inside (`NO_SYSCALL` when it entered
/// the kernel by an interrupt or a fault, whose entry sets `orig_ax` to -1,
/// or when its registers cannot be read).
#[inline(always)]
pub(crate) fn current_syscall() -> u32 {
    // SAFETY: helpers without preconditions; `bpf_task_pt_regs` returns the
    // task's saved user register frame, read only through probe_read_kernel.
    let regs = unsafe {
        let task = aya_ebpf::helpers::generated::bpf_get_current_task_btf();
        aya_ebpf::helpers::generated::bpf_task_pt_regs(task) as *const u64
    };
    match pt_regs_word(regs, pt_regs::ORIG_AX) {
        Some(nr) if nr < u64::from(NO_SYSCALL) => nr as u32,
        _ => NO_SYSCALL,
    }
}
