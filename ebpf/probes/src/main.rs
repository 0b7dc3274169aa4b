//! storprof's kernel-side probes.
//!
//! Data flow: every program first asks "is the current task traced?" with
//! one array lookup indexed by tgid (`TRACED`, inlined by the verifier, no
//! hashing), so untraced tasks cost almost nothing. Traced work is counted
//! in the kernel into hash maps keyed by thread (and stack / syscall), which
//! user space reads at the end; only block completions and process
//! lifecycle events go through ring buffers. Every map that can fill up
//! bumps a `LOST` counter instead of failing silently.
//!
//! Programs:
//! - `cpu_sample` (perf_event, cpu-clock): samples per (tgid, tid, user stack, kernel stack).
//!   With `ProbeConfig::stack_bytes` set (`--unwind dwarf`) it also copies the
//!   task's saved user registers and a user-stack window → `STACK_EVENTS`;
//!   for a process with a registered CPython interpreter (`PY_PROCS`, filled
//!   by user space, copied to forked children here) it also walks the
//!   sampled thread's Python frames (bounded) into the same event, and in
//!   frame-pointer mode sends that event without a stack window.
//! - `sched_switch` (tracepoint): on-CPU time, off-CPU time by state, off-CPU stacks.
//!   With `FLAG_OFFCPU_DWARF`, time a DWARF-unwound thread spends blocked
//!   inside a syscall is held per thread (`OFFCPU_PENDING`, sampled by
//!   blocked time) and sent by `sys_exit` with the thread's user stack,
//!   which is the same at the exit as when it blocked → `STACK_EVENTS`.
//! - `offcpu_python` (tracepoint sched_switch, DWARF mode only): Python frames
//!   of registered interpreters' threads at switch-out, sent with the time
//!   blocked at switch-in → `PY_OFFCPU_EVENTS` (a preempted thread's
//!   frames stand for its next preemptions for 10 ms).
//! - `sched_process_fork/exec/exit` (tracepoints): the traced set follows descendants.
//! - `sys_exit` (raw tracepoint): per-thread per-syscall counts, time
//!   histogram, bytes of the read/write families. A call's time is by
//!   default its time switched out inside it, added up by `sched_switch`
//!   (which reads the syscall from the task's saved `orig_ax`);
//!   `sys_enter_futex` (tracepoint) remembers futex waits' words. With
//!   exact latency, a raw `sys_enter` on every syscall does both instead.
//! - `block_io_start` (tracepoint, submitter's context): who created a request,
//!   keyed by (dev, sector), so a request a kworker later issues (plug flush,
//!   requeue) is still attributed to the process that asked for it.
//! - `block_rq_issue/complete` (raw tracepoints, see `BlockLayout`): completed
//!   requests → ring buffer.
//! - `filemap_add_to_page_cache` (tracepoint): page-cache misses per thread,
//!   and apart from them the pages buffered writes add (by the syscall the
//!   thread is in).
//! - `sched_waking` (tracepoint, waker's context): the wake-up graph. A
//!   traced thread's blocked interval (from its switch-out) ends here; it is
//!   added to the edge (waker, wakee, the wakee's state and syscall, and
//!   for futex waits whether the waker is among the word's last waiters,
//!   from `FUTEX_WAITERS` that the futex entry hooks keep) in `WAKE_EDGES`, with the
//!   waker's stacks sampled. Interrupt
//!   wakers are told from tasks by per-CPU depth counters that
//!   `irq_handler_*`, `softirq_*` and `hrtimer_expire_*` keep (raw
//!   tracepoints: a classic one is skipped inside another probe, and a
//!   missed exit would leave its counter raised).
//! - `kernel_symbols` (raw tracepoint, never attached): user space runs it
//!   to name kernel addresses (`ksyms`).
//!
//! Layout: this file holds only the entry points (user space finds the
//! programs and maps by name, so those names are fixed); each calls into
//! the module of its concern: `maps` (every map and the helpers that update
//! them), `kernel` (tracepoint fields, kernel reads, registers, clock),
//! `stacks`, `ksyms` (kernel symbol names), `sched` (scheduler, off-CPU time, process lifecycle),
//! `syscalls`, `block`, `page_cache`, `python` (CPython frames) and
//! `wakeups`. Tracepoint field offsets come from
//! `storprof_common::tracepoint_offsets`, which user space checks.
#![no_std]
#![no_main]

mod block;
mod kernel;
mod ksyms;
mod maps;
mod page_cache;
mod python;
mod python_offcpu;
mod sched;
mod stacks;
mod switch_stacks;
mod syscalls;
mod wakeups;

use aya_ebpf::{
    macros::{perf_event, raw_tracepoint, tracepoint},
    programs::{PerfEventContext, RawTracePointContext, TracePointContext},
};
use storprof_common::irq_context;

#[perf_event]
pub fn cpu_sample(ctx: PerfEventContext) -> u32 {
    stacks::cpu_sample(&ctx)
}

#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    sched::switch(&ctx)
}

#[tracepoint]
pub fn offcpu_python(ctx: TracePointContext) -> u32 {
    // Attached to sched_switch too (DWARF mode only).
    python_offcpu::offcpu_python(&ctx)
}

#[tracepoint]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    sched::process_fork(&ctx)
}

#[tracepoint]
pub fn sched_process_exec(_ctx: TracePointContext) -> u32 {
    sched::process_exec()
}

#[tracepoint]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    sched::process_exit(&ctx)
}

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_enter(ctx: RawTracePointContext) -> u32 {
    syscalls::enter(&ctx)
}

#[tracepoint]
pub fn sys_enter_futex(ctx: TracePointContext) -> u32 {
    syscalls::enter_futex(&ctx)
}

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit(ctx: RawTracePointContext) -> u32 {
    syscalls::exit(&ctx)
}

#[tracepoint]
pub fn block_io_start(ctx: TracePointContext) -> u32 {
    block::io_start(&ctx)
}

#[raw_tracepoint(tracepoint = "block_rq_issue")]
pub fn block_rq_issue(ctx: RawTracePointContext) -> u32 {
    block::rq_issue(&ctx)
}

#[raw_tracepoint(tracepoint = "block_rq_complete")]
pub fn block_rq_complete(ctx: RawTracePointContext) -> u32 {
    block::rq_complete(&ctx)
}

#[tracepoint]
pub fn filemap_add_to_page_cache(ctx: TracePointContext) -> u32 {
    page_cache::add_to_page_cache(&ctx)
}

#[raw_tracepoint(tracepoint = "sched_waking")]
pub fn sched_waking(ctx: RawTracePointContext) -> u32 {
    wakeups::waking(&ctx)
}

#[raw_tracepoint(tracepoint = "irq_handler_entry")]
pub fn irq_handler_entry(_ctx: RawTracePointContext) -> u32 {
    wakeups::irq_depth_add(irq_context::HARDIRQ, true);
    0
}

#[raw_tracepoint(tracepoint = "irq_handler_exit")]
pub fn irq_handler_exit(_ctx: RawTracePointContext) -> u32 {
    wakeups::irq_depth_add(irq_context::HARDIRQ, false);
    0
}

#[raw_tracepoint(tracepoint = "softirq_entry")]
pub fn softirq_entry(_ctx: RawTracePointContext) -> u32 {
    wakeups::irq_depth_add(irq_context::SOFTIRQ, true);
    0
}

#[raw_tracepoint(tracepoint = "softirq_exit")]
pub fn softirq_exit(_ctx: RawTracePointContext) -> u32 {
    wakeups::irq_depth_add(irq_context::SOFTIRQ, false);
    0
}

#[raw_tracepoint(tracepoint = "hrtimer_expire_entry")]
pub fn hrtimer_expire_entry(_ctx: RawTracePointContext) -> u32 {
    wakeups::irq_depth_add(irq_context::TIMER, true);
    0
}

#[raw_tracepoint(tracepoint = "hrtimer_expire_exit")]
pub fn hrtimer_expire_exit(_ctx: RawTracePointContext) -> u32 {
    wakeups::irq_depth_add(irq_context::TIMER, false);
    0
}

/// Never attached: user space runs it to name kernel addresses.
#[raw_tracepoint]
pub fn kernel_symbols(_ctx: RawTracePointContext) -> u32 {
    ksyms::name_requested()
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
