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
//!   blocked at switch-in → `PY_OFFCPU_EVENTS`.
//! - `sched_process_fork/exec/exit` (tracepoints): the traced set follows descendants.
//! - `sys_enter`/`sys_exit` (raw tracepoints): per-thread per-syscall counts,
//!   latency histogram, bytes of the read/write families.
//! - `block_io_start` (tracepoint, submitter's context): who created a request,
//!   keyed by (dev, sector), so a request a kworker later issues (plug flush,
//!   requeue) is still attributed to the process that asked for it.
//! - `block_rq_issue/complete` (raw tracepoints, see `BlockLayout`): completed
//!   requests → ring buffer.
//! - `filemap_add_to_page_cache` (tracepoint): page-cache misses per thread.
//! - `sched_waking` (tracepoint, waker's context): the wake-up graph. A
//!   traced thread's blocked interval (from its switch-out) ends here; it is
//!   added to the edge (waker, wakee, the wakee's state and syscall, and
//!   for futex waits whether the waker is among the word's last waiters,
//!   from `FUTEX_WAITERS` that `sys_enter` keeps) in `WAKE_EDGES`, with the
//!   waker's stacks sampled. Interrupt
//!   wakers are told from tasks by per-CPU depth counters that
//!   `irq_handler_*`, `softirq_*` and `hrtimer_expire_*` keep (raw
//!   tracepoints: a classic one is skipped inside another probe, and a
//!   missed exit would leave its counter raised).
#![no_std]
#![no_main]

use aya_ebpf::{
    EbpfContext,
    bindings::{BPF_F_USER_STACK, BPF_NOEXIST},
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, perf_event, raw_tracepoint, tracepoint},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf, StackTrace},
    programs::{
        PerfEventContext, RawTracePointContext, TracePointContext, tracing::StackIdContext,
    },
};
use storprof_common::{
    BlockEvent, BlockInflight, BlockKey, FLAG_OFFCPU_DWARF, FLAG_SYSCALL_LATENCY,
    FLAG_UNWIND_PER_PROCESS, FUTEX_WAITER_SLOTS, FutexWaiters, MAX_PY_FRAMES, MAX_PY_THREADS,
    MAX_STACK_BYTES, OffCpuPending, OffCpuStart, PY_NO_OFFSET, ProbeConfig, ProcEvent,
    PyFrameRecord, PyOffCpuSample, PyProcess, SYSCALL_NR_SLOTS, SYSCALL_SLOT_ENTRIES,
    SYSCALL_THREAD_SLOTS, StackKey, SyscallAcc, SyscallKey, SyscallStart, ThreadAcc,
    USER_STACK_PREFIX, UserStackHeader, UserStackSample, WAKE_NO_SYSCALL, WAKER_STACK_EVERY,
    WakeAcc, WakeKey, block_op, irq_context, is_read_family, is_write_family, log2_bucket, lost,
    offcpu_state, proc_event, py_status, py_tstate, waker_kind,
};

/// Sizes of the per-pid arrays; user space sets them to `kernel.pid_max`.
const PID_SLOTS: u32 = 32768;

#[map]
static CONFIG: Array<ProbeConfig> = Array::with_max_entries(1, 0);

/// tgid → 1 when traced. An array so the hot-path filter is one bounds
/// check and one load.
#[map]
static TRACED: Array<u32> = Array::with_max_entries(PID_SLOTS, 0);

#[map]
static LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(lost::COUNT, 0);

#[map]
static STACKS: StackTrace = StackTrace::with_max_entries(16384, 0);

#[map]
static SAMPLES: HashMap<StackKey, u64> = HashMap::with_max_entries(65536, 0);

#[map]
static THREADS: HashMap<u32, ThreadAcc> = HashMap::with_max_entries(16384, 0);

/// tid → time it was last switched in (every task, not only traced ones:
/// the tgid of `next` is not known at switch-in).
#[map]
static ONCPU_START: Array<u64> = Array::with_max_entries(PID_SLOTS, 0);

/// tid → when and how a traced thread left the CPU.
#[map]
static OFFCPU_START: Array<OffCpuStart> = Array::with_max_entries(PID_SLOTS, 0);

#[map]
static OFFCPU_STACKS: HashMap<StackKey, u64> = HashMap::with_max_entries(65536, 0);

/// tid → syscall in progress.
#[map]
static SYSCALL_START: Array<SyscallStart> = Array::with_max_entries(PID_SLOTS, 0);

/// Fallback for threads / entries beyond the array pool below.
#[map]
static SYSCALLS: HashMap<SyscallKey, SyscallAcc> = HashMap::with_max_entries(16384, 0);

/// tid → its syscall thread slot + 1 (0: not looked up yet, `NO_SLOT`:
/// the slot belongs to another thread). Cleared at thread exit.
#[map]
static SYSCALL_THREAD: Array<u32> = Array::with_max_entries(PID_SLOTS, 0);

/// Thread slot → tid that claimed it (insert-if-absent is atomic).
#[map]
static SYSCALL_SLOT_OWNER: HashMap<u32, u32> = HashMap::with_max_entries(SYSCALL_THREAD_SLOTS, 0);

/// Thread slot → entries of its region in use (written by its owner only).
#[map]
static SYSCALL_SLOT_USED: Array<u32> = Array::with_max_entries(SYSCALL_THREAD_SLOTS, 0);

/// (thread slot, nr) → entry index within the slot's region + 1 (0: none yet).
#[map]
static SYSCALL_INDEX: Array<u32> =
    Array::with_max_entries(SYSCALL_THREAD_SLOTS * SYSCALL_NR_SLOTS, 0);

/// Per-thread per-syscall statistics, `SYSCALL_SLOT_ENTRIES` per thread slot...
#[map]
static SYSCALL_POOL: Array<SyscallAcc> =
    Array::with_max_entries(SYSCALL_THREAD_SLOTS * SYSCALL_SLOT_ENTRIES, 0);

/// ...and whose they are (written before the entry is published).
#[map]
static SYSCALL_POOL_KEY: Array<SyscallKey> =
    Array::with_max_entries(SYSCALL_THREAD_SLOTS * SYSCALL_SLOT_ENTRIES, 0);

/// `SYSCALL_THREAD` value of a thread without a slot of its own.
const NO_SLOT: u32 = u32::MAX;

/// In-flight requests by `struct request` address (unique while in flight).
#[map]
static BLOCK_INFLIGHT: HashMap<u64, BlockInflight> = HashMap::with_max_entries(16384, 0);

/// tgid that created a request (`block_io_start`), taken at issue. LRU: a
/// request whose sector changes before issue (front merge) would otherwise
/// leave its entry behind forever.
#[map]
static BLOCK_SUBMITTER: LruHashMap<BlockKey, u32> = LruHashMap::with_max_entries(16384, 0);

#[map]
static BLOCK_EVENTS: RingBuf = RingBuf::with_byte_size(8 << 20, 0);

/// User-stack samples for DWARF unwinding (header + stack window).
#[map]
static STACK_EVENTS: RingBuf = RingBuf::with_byte_size(16 << 20, 0);

/// Scratch where a user-stack sample is assembled, two slots per CPU
/// (a per-CPU array cannot hold values over 32 KiB): slot `2 * cpu` for
/// CPU samples, `2 * cpu + 1` for blocked syscalls at `sys_exit`, which a
/// CPU sample (an NMI) can interrupt. User space sizes it to twice the
/// possible CPUs. Neither program nests with itself on one CPU, so a slot
/// has one writer at a time.
#[map]
static STACK_SCRATCH: Array<UserStackSample> = Array::with_max_entries(2, 0);

/// tid → its blocked time inside the current syscall, until the syscall's
/// exit copies its user stack (`FLAG_OFFCPU_DWARF`).
#[map]
static OFFCPU_PENDING: HashMap<u32, OffCpuPending> = HashMap::with_max_entries(8192, 0);

/// tid → 1 while it has an entry in `OFFCPU_PENDING` (an array: the check
/// at every syscall exit costs one load, no hashing).
#[map]
static OFFCPU_PENDING_FLAG: Array<u32> = Array::with_max_entries(PID_SLOTS, 0);

/// tgid → its CPython interpreter (runtime address and struct offsets).
/// Written by user space when it finds an interpreter; copied to forked
/// children at fork, removed at exec and exit.
#[map]
static PY_PROCS: HashMap<u32, PyProcess> = HashMap::with_max_entries(4096, 0);

/// tgid → 1 when its CPU samples carry a stack window (`--unwind auto`,
/// `FLAG_UNWIND_PER_PROCESS`). Written by user space after exec from the
/// executable's frame-pointer check; copied to forked children at fork,
/// removed at exec and exit.
#[map]
static DWARF_PROCS: HashMap<u32, u8> = HashMap::with_max_entries(4096, 0);

/// tid → its Python frames and stack ids at switch-out, until switch-in.
#[map]
static PY_OFFCPU: HashMap<u32, PyOffCpuSample> = HashMap::with_max_entries(4096, 0);

/// tid → 1 while it has an entry in `PY_OFFCPU` (an array: the switch-in
/// check of every task costs one load, no hashing).
#[map]
static PY_OFFCPU_PENDING: Array<u32> = Array::with_max_entries(PID_SLOTS, 0);

/// Where an off-CPU Python sample is assembled (too large for the BPF stack).
#[map]
static PY_OFFCPU_SCRATCH: PerCpuArray<PyOffCpuSample> = PerCpuArray::with_max_entries(1, 0);

/// Off-CPU intervals of Python threads with their frames.
#[map]
static PY_OFFCPU_EVENTS: RingBuf = RingBuf::with_byte_size(4 << 20, 0);

/// Off-CPU Python samples lost: [0] `PY_OFFCPU` full, [1] ring buffer full.
#[map]
static PY_OFFCPU_LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(2, 0);

/// The futex word each thread waits (or last waited) on, by tid, written
/// at `sys_enter` of a futex wait; LRU, so threads gone are forgotten.
#[map]
static FUTEX_WAIT_WORD: LruHashMap<u32, u64> = LruHashMap::with_max_entries(16384, 0);

/// The last distinct waiters per futex word granule; LRU, so words of
/// futures and condition variables used once are forgotten.
#[map]
static FUTEX_WAITERS: LruHashMap<u64, FutexWaiters> = LruHashMap::with_max_entries(16384, 0);

/// Wake-up edges, summed in the kernel (nothing per event is streamed).
#[map]
static WAKE_EDGES: HashMap<WakeKey, WakeAcc> = HashMap::with_max_entries(32768, 0);

/// Interrupt-context depth per CPU, by `irq_context` index.
#[map]
static IRQ_CONTEXT: PerCpuArray<u32> = PerCpuArray::with_max_entries(irq_context::COUNT, 0);

#[map]
static PROC_EVENTS: RingBuf = RingBuf::with_byte_size(1 << 20, 0);

/// The all-zero syscall accumulator inserted on a thread's first call.
static SYSCALL_ZERO: SyscallAcc = SyscallAcc::ZERO;

#[inline(always)]
fn now_ns() -> u64 {
    // SAFETY: a helper without arguments or preconditions.
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
fn count_lost(index: u32) {
    if let Some(counter) = LOST.get_ptr_mut(index) {
        // SAFETY: per-CPU slot; programs do not nest on one CPU for these hooks.
        unsafe { *counter += 1 };
    }
}

#[inline(always)]
fn is_traced(tgid: u32) -> bool {
    matches!(TRACED.get(tgid), Some(&1))
}

/// Reads a field of a tracepoint record at `offset` (offsets from the
/// event's `format` file; checked by user space before attaching).
#[inline(always)]
fn field<T: Copy>(ctx: &TracePointContext, offset: usize) -> T {
    // SAFETY: the tracepoint context is the record itself; the verifier
    // bounds-checks direct context reads.
    unsafe { core::ptr::read_unaligned(ctx.as_ptr().cast::<u8>().add(offset).cast::<T>()) }
}

#[inline(always)]
fn stack_ids<C: StackIdContext>(ctx: &C) -> (i32, i32) {
    let user = match ctx.get_stackid(&STACKS, BPF_F_USER_STACK as u64) {
        Ok(id) => id as i32,
        Err(err) => {
            if err == -17 || err == -12 {
                count_lost(lost::STACKS_FULL);
            }
            -1
        }
    };
    let kernel = match ctx.get_stackid(&STACKS, 0) {
        Ok(id) => id as i32,
        Err(err) => {
            if err == -17 || err == -12 {
                count_lost(lost::STACKS_FULL);
            }
            -1
        }
    };
    (user, kernel)
}

/// Adds `value` to the u64 stored under `key`, inserting it when new.
#[inline(always)]
fn add_to<K>(map: &HashMap<K, u64>, key: &K, value: u64, lost_index: u32) {
    if let Some(slot) = map.get_ptr_mut(key) {
        // SAFETY: a map value slot; keys include the tid, and a thread runs
        // on one CPU at a time, so there is no concurrent writer.
        unsafe { *slot += value };
    } else if map.insert(key, value, BPF_NOEXIST as u64).is_err() {
        count_lost(lost_index);
    }
}

#[inline(always)]
fn thread_acc(tgid: u32, tid: u32) -> Option<*mut ThreadAcc> {
    if let Some(acc) = THREADS.get_ptr_mut(tid) {
        return Some(acc);
    }
    let fresh = ThreadAcc {
        tgid,
        tid,
        comm: bpf_get_current_comm().unwrap_or_default(),
        ..ThreadAcc::default()
    };
    if THREADS.insert(tid, fresh, BPF_NOEXIST as u64).is_err() {
        count_lost(lost::THREADS_MAP_FULL);
    }
    THREADS.get_ptr_mut(tid)
}

#[perf_event]
pub fn cpu_sample(ctx: PerfEventContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;
    if tid == 0 || !is_traced(tgid) {
        return 0;
    }
    let (user_stack, kernel_stack) = stack_ids(&ctx);
    let key = StackKey {
        tgid,
        tid,
        user_stack,
        kernel_stack,
    };
    add_to(&SAMPLES, &key, 1, lost::SAMPLES_MAP_FULL);
    let (mut stack_bytes, flags) = CONFIG.get(0).map_or((0, 0), |c| (c.stack_bytes, c.flags));
    // SAFETY: the lookup result is only tested.
    if flags & FLAG_UNWIND_PER_PROCESS != 0 && unsafe { DWARF_PROCS.get(tgid) }.is_none() {
        // `--unwind auto`: this process unwinds by frame pointers.
        stack_bytes = 0;
    }
    // SAFETY: the lookup result is only tested.
    let python_fp = stack_bytes == 0 && unsafe { PY_PROCS.get(tgid) }.is_some();
    if stack_bytes != 0 || python_fp {
        // SAFETY: helpers without preconditions; `bpf_task_pt_regs` returns
        // the task's user register frame, read only through probe_read_kernel.
        let regs = unsafe {
            let task = aya_ebpf::helpers::generated::bpf_get_current_task_btf();
            aya_ebpf::helpers::generated::bpf_task_pt_regs(task) as *const u64
        };
        // SAFETY: no preconditions.
        let cpu = unsafe { aya_ebpf::helpers::bpf_get_smp_processor_id() };
        // Frame-pointer mode: a Python process's sample still carries its
        // Python frames (no stack window).
        capture_user_stack(key, stack_bytes, regs, cpu * 2, &NO_OFFCPU);
    }
    0
}

/// The off-CPU part of a CPU sample's header: none.
static NO_OFFCPU: OffCpuPending = OffCpuPending {
    weight_ns: 0,
    largest_ns: 0,
    tgid: 0,
    state: 0,
    user_stack: -1,
    kernel_stack: -1,
    intervals: 0,
    _pad: 0,
};

/// x86_64 `struct pt_regs` word indices.
const PT_REGS_BP: usize = 4;
const PT_REGS_IP: usize = 16;
const PT_REGS_SP: usize = 19;

/// Copies the current task's user registers `regs` (its saved user
/// register frame: right for samples in user mode, in a syscall or a
/// fault) and up to `stack_bytes` of its user stack into `STACK_EVENTS`,
/// assembled in scratch slot `slot`; `offcpu` is the blocked time the
/// stack stands for (none for a CPU sample).
#[inline(always)]
fn capture_user_stack(
    key: StackKey,
    stack_bytes: u32,
    regs: *const u64,
    slot: u32,
    offcpu: &OffCpuPending,
) {
    let read = |index: usize| -> u64 {
        // SAFETY: a word of pt_regs, through the checked helper.
        unsafe { aya_ebpf::helpers::bpf_probe_read_kernel(regs.wrapping_add(index)) }.unwrap_or(0)
    };
    let Some(scratch) = STACK_SCRATCH.get_ptr_mut(slot) else {
        return;
    };
    let sp = read(PT_REGS_SP);
    let mut header = UserStackHeader {
        tgid: key.tgid,
        tid: key.tid,
        kernel_stack: key.kernel_stack,
        user_stack: key.user_stack,
        ip: read(PT_REGS_IP),
        sp,
        bp: read(PT_REGS_BP),
        len: 0,
        py_frames: 0,
        py_status: py_status::NONE,
        blocked_ns: offcpu.weight_ns,
        offcpu_state: offcpu.state,
        offcpu_intervals: offcpu.intervals,
    };
    // SAFETY: `scratch` is this CPU's map value.
    let (frames, status) = python_frames(key.tgid, key.tid, unsafe { &mut (*scratch).py });
    header.py_frames = frames;
    header.py_status = status;
    // Near the top of the stack a long read faults: retry shorter.
    let mut len = stack_bytes;
    for _ in 0..6 {
        let bounded = len & (MAX_STACK_BYTES - 1);
        if bounded == 0 {
            break;
        }
        // SAFETY: `scratch` is this CPU's map value, `bounded` fits its stack array.
        let rc = unsafe {
            aya_ebpf::helpers::generated::bpf_probe_read_user(
                (*scratch).stack.as_mut_ptr().cast(),
                bounded,
                sp as *const core::ffi::c_void,
            )
        };
        if rc == 0 {
            header.len = bounded;
            break;
        }
        len /= 2;
    }
    // SAFETY: as above.
    unsafe { (*scratch).header = header };
    // The mask (a power of two minus one) bounds the length for the
    // verifier; the check below keeps it inside the scratch value.
    let total =
        (USER_STACK_PREFIX as u32 + header.len) as usize & (2 * MAX_STACK_BYTES as usize - 1);
    if total > core::mem::size_of::<UserStackSample>() {
        return;
    }
    // SAFETY: `total` bytes of this CPU's scratch value.
    let bytes = unsafe { core::slice::from_raw_parts(scratch.cast::<u8>(), total) };
    if STACK_EVENTS.output::<[u8]>(bytes, 0).is_err() {
        count_lost(lost::STACK_RINGBUF_FULL);
    }
}

/// Reads a `T` from the current task's user memory (None when it faults).
#[inline(always)]
fn read_user<T>(addr: u64) -> Option<T> {
    // SAFETY: a user address read through the checked helper.
    unsafe { aya_ebpf::helpers::bpf_probe_read_user(addr as *const T) }.ok()
}

/// The `PyThreadState` of thread `tid` (the current thread), or 0.
#[inline(always)]
fn python_thread_state(py: &PyProcess, tid: u32) -> Option<u64> {
    if py.tstate_mode == py_tstate::GIL_HOLDER {
        return read_user::<u64>(py.runtime + py.runtime_tstate_current as u64);
    }
    let interp = read_user::<u64>(py.runtime + py.runtime_interp_head as u64)?;
    if interp == 0 {
        return Some(0);
    }
    let mut tstate = read_user::<u64>(interp + py.interp_tstate_head as u64)?;
    // What the thread state holds for this thread: its pthread_t (the FS
    // base) in BY_PTHREAD mode, else its id in its own pid namespace.
    let (wanted, field) = if py.tstate_mode == py_tstate::BY_PTHREAD {
        (current_fsbase()?, py.tstate_pthread)
    } else {
        (native_tid(py, tid)? as u64, py.tstate_native_tid)
    };
    for _ in 0..MAX_PY_THREADS {
        if tstate == 0 {
            break;
        }
        let value = read_user::<u64>(tstate + field as u64)?;
        if value == wanted {
            return Some(tstate);
        }
        tstate = read_user::<u64>(tstate + py.tstate_next as u64)?;
    }
    Some(0)
}

/// The current task's user FS base (`pthread_self()` on x86_64 glibc).
#[inline(always)]
fn current_fsbase() -> Option<u64> {
    let offset = CONFIG.get(0).map_or(0, |c| c.task_fsbase);
    if offset == 0 {
        return None;
    }
    // SAFETY: no preconditions; the task pointer is only read through the
    // checked helper below.
    let task = unsafe { aya_ebpf::helpers::bpf_get_current_task() };
    // SAFETY: a kernel read through the checked helper.
    unsafe { aya_ebpf::helpers::bpf_probe_read_kernel((task + offset as u64) as *const u64) }.ok()
}

/// Thread `tid` (the current thread)'s id in its process's pid namespace,
/// which is what `native_thread_id` holds.
#[inline(always)]
fn native_tid(py: &PyProcess, tid: u32) -> Option<u32> {
    Some(if py.pidns_ino != 0 {
        let mut ns = aya_ebpf::bindings::bpf_pidns_info { pid: 0, tgid: 0 };
        // SAFETY: `ns` is a valid, writable bpf_pidns_info of the size given.
        let rc = unsafe {
            aya_ebpf::helpers::generated::bpf_get_ns_current_pid_tgid(
                py.pidns_dev,
                py.pidns_ino,
                &mut ns,
                core::mem::size_of::<aya_ebpf::bindings::bpf_pidns_info>() as u32,
            )
        };
        if rc != 0 {
            return None;
        }
        ns.pid
    } else {
        tid
    })
}

/// Walks the Python frames of the sampled thread, innermost first, into
/// `out`. Returns (frames written, `py_status`).
#[inline(always)]
fn python_frames(tgid: u32, tid: u32, out: &mut [PyFrameRecord; MAX_PY_FRAMES]) -> (u16, u16) {
    // SAFETY: the value is copied out at once.
    let Some(py) = (unsafe { PY_PROCS.get(tgid) }).copied() else {
        return (0, py_status::NONE);
    };
    let tstate = match python_thread_state(&py, tid) {
        Some(0) => return (0, py_status::NO_THREAD),
        Some(t) => t,
        None => return (0, py_status::READ_FAILED),
    };
    let Some(mut frame) = read_user::<u64>(tstate + py.tstate_frame as u64) else {
        return (0, py_status::READ_FAILED);
    };
    if py.cframe_current_frame != PY_NO_OFFSET && frame != 0 {
        match read_user::<u64>(frame + py.cframe_current_frame as u64) {
            Some(f) => frame = f,
            None => return (0, py_status::READ_FAILED),
        }
    }
    let mut count: u16 = 0;
    for slot in out.iter_mut() {
        if frame == 0 {
            return (count, py_status::OK);
        }
        let (Some(code), Some(instr)) = (
            read_user::<u64>(frame + py.frame_code as u64),
            read_user::<u64>(frame + py.frame_instr as u64),
        ) else {
            return (count, py_status::READ_FAILED);
        };
        let flag = if py.frame_flag == PY_NO_OFFSET {
            0
        } else {
            read_user::<u8>(frame + py.frame_flag as u64).unwrap_or(0)
        };
        *slot = PyFrameRecord::new(code, instr, flag);
        count += 1;
        frame = match read_user::<u64>(frame + py.frame_previous as u64) {
            Some(f) => f,
            None => return (count, py_status::READ_FAILED),
        };
    }
    if frame == 0 {
        (count, py_status::OK)
    } else {
        (count, py_status::TRUNCATED)
    }
}

#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    // Format (checked by user space): prev_pid@24 i32, prev_state@32 i64, next_pid@56 i32.
    let now = now_ns();
    let prev_tid: u32 = field(&ctx, 24);
    let prev_state: i64 = field(&ctx, 32);
    let next_tid: u32 = field(&ctx, 56);
    // `current` is still `prev` here.
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;

    if prev_tid != 0 && is_traced(tgid) {
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
        let (user_stack, kernel_stack) = stack_ids(&ctx);
        let mut state = offcpu_state::from_prev_state(prev_state) as u32;
        if stack_at_syscall_exit(tgid, prev_tid) {
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
                }
            };
        }
    }

    if next_tid != 0 {
        if let Some(slot) = ONCPU_START.get_ptr_mut(next_tid) {
            // SAFETY: per-tid slot, see above.
            unsafe { *slot = now };
        }
        if let Some(off) = OFFCPU_START.get_ptr_mut(next_tid) {
            // SAFETY: per-tid slot, see above.
            let off_copy = unsafe { *off };
            if off_copy.ts != 0 && now > off_copy.ts {
                // SAFETY: as above.
                unsafe { (*off).ts = 0 };
                let blocked = now - off_copy.ts;
                if let Some(acc) = THREADS.get_ptr_mut(next_tid) {
                    let state = (off_copy.state as usize) & 3;
                    // SAFETY: map value of `next_tid`, which is being switched in here.
                    unsafe { (*acc).off_cpu_ns[state] += blocked };
                }
                let key = StackKey {
                    tgid: off_copy.tgid,
                    tid: next_tid,
                    user_stack: off_copy.user_stack,
                    kernel_stack: off_copy.kernel_stack,
                };
                if off_copy.state & offcpu_state::AT_SYSCALL_EXIT != 0 {
                    pend_offcpu(key, off_copy.state & 3, blocked);
                } else {
                    add_to(&OFFCPU_STACKS, &key, blocked, lost::OFFCPU_MAP_FULL);
                }
            }
        }
    }
    0
}

/// Whether thread `tid` of `tgid`, leaving the CPU now, is inside a
/// syscall of a DWARF-unwound process: then its user stack stays as it is
/// until the syscall's exit, and is copied there (`FLAG_OFFCPU_DWARF`).
#[inline(always)]
fn stack_at_syscall_exit(tgid: u32, tid: u32) -> bool {
    let Some(config) = CONFIG.get(0) else {
        return false;
    };
    if config.flags & FLAG_OFFCPU_DWARF == 0 {
        return false;
    }
    if !SYSCALL_START.get(tid).is_some_and(|s| s.ts != 0) {
        return false;
    }
    // SAFETY: the lookup result is only tested.
    config.flags & FLAG_UNWIND_PER_PROCESS == 0 || unsafe { DWARF_PROCS.get(tgid) }.is_some()
}

/// Adds a blocked interval of a thread inside a syscall to its pending
/// off-CPU time, sampled by `ProbeConfig::offcpu_quantum_us`: an interval
/// shorter than the quantum is taken with probability `blocked / quantum`
/// and then weighs a whole quantum, so the expected weight is its length.
#[inline(always)]
fn pend_offcpu(key: StackKey, state: u32, blocked: u64) {
    let quantum = CONFIG
        .get(0)
        .map_or(0, |c| c.offcpu_quantum_us as u64 * 1000);
    let weight = if quantum == 0 || blocked >= quantum {
        blocked
    } else {
        // SAFETY: no preconditions.
        let draw = unsafe { aya_ebpf::helpers::bpf_get_prandom_u32() } as u64;
        if draw % quantum >= blocked {
            return;
        }
        quantum
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
fn take_offcpu_pending(tid: u32) -> bool {
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
fn flush_offcpu(tgid: u32, tid: u32, regs: *const u64) {
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
    capture_user_stack(key, stack_bytes, regs, cpu * 2 + 1, &pending);
}

#[inline(always)]
fn count_py_offcpu_lost(index: u32) {
    if let Some(counter) = PY_OFFCPU_LOST.get_ptr_mut(index) {
        // SAFETY: per-CPU slot; programs do not nest on one CPU for this hook.
        unsafe { *counter += 1 };
    }
}

#[tracepoint]
pub fn offcpu_python(ctx: TracePointContext) -> u32 {
    // Same format as `sched_switch`.
    let now = now_ns();
    let prev_tid: u32 = field(&ctx, 24);
    let prev_state: i64 = field(&ctx, 32);
    let next_tid: u32 = field(&ctx, 56);
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;

    // SAFETY (PY_PROCS.get): the lookup result is only tested.
    // An interval inside a syscall of a DWARF-unwound process gets its
    // Python frames with its native stack at the syscall's exit instead.
    if prev_tid != 0
        && is_traced(tgid)
        && unsafe { PY_PROCS.get(tgid) }.is_some()
        && !stack_at_syscall_exit(tgid, prev_tid)
        && let Some(scratch) = PY_OFFCPU_SCRATCH.get_ptr_mut(0)
    {
        // SAFETY: this CPU's scratch value.
        let (frames, status) = python_frames(tgid, prev_tid, unsafe { &mut (*scratch).py });
        if frames > 0 {
            let (user_stack, kernel_stack) = stack_ids(&ctx);
            // SAFETY: as above.
            unsafe {
                (*scratch).tgid = tgid;
                (*scratch).tid = prev_tid;
                (*scratch).user_stack = user_stack;
                (*scratch).kernel_stack = kernel_stack;
                (*scratch).ts_out = now;
                (*scratch).blocked_ns = 0;
                (*scratch).state = offcpu_state::from_prev_state(prev_state) as u32;
                (*scratch).py_frames = frames;
                (*scratch).py_status = status;
            }
            // By reference: a copy of the value would not fit the BPF stack.
            #[allow(clippy::needless_borrows_for_generic_args)]
            // SAFETY: as above; the map copies the value.
            let inserted = PY_OFFCPU.insert(prev_tid, unsafe { &*scratch }, 0).is_ok();
            if inserted {
                if let Some(pending) = PY_OFFCPU_PENDING.get_ptr_mut(prev_tid) {
                    // SAFETY: per-tid slot of the thread leaving this CPU.
                    unsafe { *pending = 1 };
                }
            } else {
                count_py_offcpu_lost(0);
            }
        }
    }

    if next_tid != 0
        && let Some(pending) = PY_OFFCPU_PENDING.get_ptr_mut(next_tid)
        // SAFETY: per-tid slot of the thread being switched in here.
        && unsafe { *pending } != 0
    {
        // SAFETY: as above.
        unsafe { *pending = 0 };
        if let Some(entry) = PY_OFFCPU.get_ptr_mut(next_tid) {
            // SAFETY: the entry of `next_tid`, written only at its switch-out.
            unsafe {
                (*entry).blocked_ns = now.saturating_sub((*entry).ts_out);
                if PY_OFFCPU_EVENTS
                    .output::<PyOffCpuSample>(&*entry, 0)
                    .is_err()
                {
                    count_py_offcpu_lost(1);
                }
            }
            let _ = PY_OFFCPU.remove(next_tid);
        }
    }
    0
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

#[tracepoint]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    // Format: child_pid@20 i32. `current` is the parent.
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if !is_traced(tgid) {
        return 0;
    }
    let child: u32 = field(&ctx, 20);
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

#[tracepoint]
pub fn sched_process_exec(_ctx: TracePointContext) -> u32 {
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
    emit_proc_event(proc_event::EXEC, tgid, pid_tgid as u32, 0);
    0
}

#[tracepoint]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    // Format: group_dead@32 bool.
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
        unsafe { (*slot).ts = 0 };
    }
    // ... and has no blocked time pending.
    if let Some(flag) = OFFCPU_PENDING_FLAG.get_ptr_mut(tid) {
        // SAFETY: per-tid slot of the exiting thread.
        if unsafe { *flag } != 0 {
            // SAFETY: as above.
            unsafe { *flag = 0 };
            let _ = OFFCPU_PENDING.remove(tid);
        }
    }
    if tid != tgid || group_dead_now(&ctx) {
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
    let group_dead: u8 = field(&ctx, 32);
    emit_proc_event(proc_event::EXIT, tgid, tid, group_dead as u32);
    0
}

#[inline(always)]
fn group_dead_now(ctx: &TracePointContext) -> bool {
    field::<u8>(ctx, 32) != 0
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

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_enter(ctx: RawTracePointContext) -> u32 {
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
        // SAFETY: reading regs->si (the futex op) through the checked helper.
        let op = unsafe { aya_ebpf::helpers::bpf_probe_read_kernel(regs.add(13)) }.unwrap_or(1);
        if is_futex_wait(op) {
            // SAFETY: reading regs->di (the futex word) through the checked helper.
            let word =
                unsafe { aya_ebpf::helpers::bpf_probe_read_kernel(regs.add(14)) }.unwrap_or(0);
            remember_futex_wait(tid, word);
        }
    }
    0
}

/// FUTEX_WAIT, FUTEX_LOCK_PI, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI,
/// FUTEX_LOCK_PI2 (the op without its private/clock flags).
#[inline(always)]
fn is_futex_wait(op: u64) -> bool {
    matches!(op & 0x7f, 0 | 6 | 9 | 11 | 13)
}

#[inline(always)]
fn remember_futex_wait(tid: u32, word: u64) {
    let _ = FUTEX_WAIT_WORD.insert(tid, word, 0);
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

/// Whether `waker` is among the last waiters of the futex word (64-byte
/// granule) that `wakee` waits on.
#[inline(always)]
fn futex_shared(waker: u32, wakee: u32) -> bool {
    // SAFETY: the value is copied out.
    let Some(word) = unsafe { FUTEX_WAIT_WORD.get(wakee) }.copied() else {
        return false;
    };
    // SAFETY: as above; a concurrent update only makes it one wait older.
    let Some(waiters) = unsafe { FUTEX_WAITERS.get(word >> 6) }.copied() else {
        return false;
    };
    let mut i = 0;
    while i < FUTEX_WAITER_SLOTS {
        if waiters.tids[i] == waker {
            return true;
        }
        i += 1;
    }
    false
}

/// x86_64 `futex`.
const FUTEX_NR: u64 = 202;

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit(ctx: RawTracePointContext) -> u32 {
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
        // SAFETY: reading a kernel pointer through the checked helper.
        match unsafe { aya_ebpf::helpers::bpf_probe_read_kernel(regs.add(15)) } {
            Ok(nr) => (nr, 0),
            Err(_) => return 0,
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

#[tracepoint]
pub fn block_io_start(ctx: TracePointContext) -> u32 {
    // Format: dev@8 u32, sector@16 u64. Runs in the task that created the
    // request (blk_account_io_start from the bio submission path).
    let key = BlockKey {
        dev: field(&ctx, 8),
        _pad: 0,
        sector: field(&ctx, 16),
    };
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    // An LRU map evicts instead of failing; nothing to count.
    let _ = BLOCK_SUBMITTER.insert(key, tgid, 0);
    0
}

/// Reads a kernel value at `base + offset` (0 when unreadable).
#[inline(always)]
fn kernel_read<T: Copy + Default>(base: u64, offset: u32) -> T {
    // SAFETY: the checked helper copies from kernel memory and fails
    // instead of faulting on a bad address.
    unsafe { aya_ebpf::helpers::bpf_probe_read_kernel((base + offset as u64) as *const T) }
        .unwrap_or_default()
}

#[raw_tracepoint(tracepoint = "block_rq_issue")]
pub fn block_rq_issue(ctx: RawTracePointContext) -> u32 {
    // Arguments: (struct request *rq). Fields at `ProbeConfig::block`.
    // Unset until user space has read the layout (`__data_len` is never
    // the first member).
    let Some(layout) = CONFIG.get(0).map(|c| c.block) else {
        return 0;
    };
    if layout.request_data_len == 0 {
        return 0;
    }
    let rq: u64 = ctx.arg(0);
    let queue: u64 = kernel_read(rq, layout.request_queue);
    let disk: u64 = if queue == 0 {
        0
    } else {
        kernel_read(queue, layout.queue_disk)
    };
    let dev = if disk == 0 {
        0
    } else {
        let major: u32 = kernel_read(disk, layout.disk_major);
        let minor: u32 = kernel_read(disk, layout.disk_first_minor);
        (major << 20) | (minor & 0xfffff)
    };
    let cmd_flags: u32 = kernel_read(rq, layout.request_cmd_flags);
    let submitted = BlockKey {
        dev,
        _pad: 0,
        sector: kernel_read(rq, layout.request_sector),
    };
    // Attribution: a re-issued (requeued) request keeps its owner; a new one
    // belongs to the task that created it; the issuing task only when the
    // creation was not seen (no block_io_start, or bio-based device).
    // SAFETY: values are copied out at once.
    let tgid = match unsafe { BLOCK_INFLIGHT.get(rq) } {
        Some(prev) => prev.tgid,
        // SAFETY: as above.
        None => match unsafe { BLOCK_SUBMITTER.get(submitted) }.copied() {
            Some(submitter) => {
                let _ = BLOCK_SUBMITTER.remove(submitted);
                submitter
            }
            None => (bpf_get_current_pid_tgid() >> 32) as u32,
        },
    };
    let mut rwbs = [0u8; 8];
    rwbs[0] = block_op::letter(cmd_flags);
    let inflight = BlockInflight {
        issue_ns: now_ns(),
        bytes: kernel_read(rq, layout.request_data_len),
        tgid,
        rwbs,
        dev,
        _pad: 0,
    };
    if BLOCK_INFLIGHT.insert(rq, inflight, 0).is_err() {
        count_lost(lost::BLOCK_INFLIGHT_FULL);
    }
    0
}

#[raw_tracepoint(tracepoint = "block_rq_complete")]
pub fn block_rq_complete(ctx: RawTracePointContext) -> u32 {
    // Arguments: (struct request *rq, blk_status_t error, unsigned int nr_bytes).
    let rq: u64 = ctx.arg(0);
    // SAFETY: the value is copied out before the entry is removed.
    let Some(inflight) = (unsafe { BLOCK_INFLIGHT.get(rq) }).copied() else {
        return 0;
    };
    let _ = BLOCK_INFLIGHT.remove(rq);
    let status: u64 = ctx.arg(1);
    let event = BlockEvent {
        dev: inflight.dev,
        bytes: inflight.bytes,
        issue_ns: inflight.issue_ns,
        complete_ns: now_ns(),
        tgid: inflight.tgid,
        // A `blk_status_t`: 0 is success.
        error: (status & 0xff) as i32,
        rwbs: inflight.rwbs,
    };
    if BLOCK_EVENTS.output::<BlockEvent>(&event, 0).is_err() {
        count_lost(lost::BLOCK_RINGBUF_FULL);
    }
    0
}

#[tracepoint]
pub fn filemap_add_to_page_cache(ctx: TracePointContext) -> u32 {
    // Format: order@36 u8 (a folio of 2^order pages).
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !is_traced(tgid) {
        return 0;
    }
    let order: u8 = field(&ctx, 36);
    if let Some(acc) = thread_acc(tgid, pid_tgid as u32) {
        // SAFETY: map value of the current thread.
        unsafe { (*acc).page_cache_pages += 1u64 << (order & 31) };
    }
    0
}

/// The kind of the current waker: an interrupt handler when one runs on
/// this CPU, else the task.
#[inline(always)]
fn current_waker_kind(tgid: u32) -> u8 {
    let depth = |i: u32| IRQ_CONTEXT.get(i).copied().unwrap_or(0);
    if depth(irq_context::TIMER) > 0 {
        waker_kind::TIMER
    } else if depth(irq_context::SOFTIRQ) > 0 {
        waker_kind::SOFTIRQ
    } else if depth(irq_context::HARDIRQ) > 0 {
        waker_kind::HARDIRQ
    } else if tgid == 0 {
        waker_kind::IDLE
    } else {
        waker_kind::TASK
    }
}

#[raw_tracepoint(tracepoint = "sched_waking")]
pub fn sched_waking(ctx: RawTracePointContext) -> u32 {
    // Format (checked by user space): pid@24 i32. `current` is the waker.
    // Arguments: (struct task_struct *p); `ProbeConfig::task_pid` is set
    // before this attaches.
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
    unsafe { (*off).state = start.state | offcpu_state::WOKEN };
    let blocked = now - start.ts;
    let pid_tgid = bpf_get_current_pid_tgid();
    let kind = current_waker_kind((pid_tgid >> 32) as u32);
    let (waker_tgid, waker_tid) = if kind == waker_kind::TASK {
        ((pid_tgid >> 32) as u32, pid_tgid as u32)
    } else {
        // SAFETY: no preconditions.
        (0, unsafe { aya_ebpf::helpers::bpf_get_smp_processor_id() })
    };
    let syscall = match SYSCALL_START.get(wakee_tid) {
        Some(s) if s.ts != 0 && s.nr < u64::from(WAKE_NO_SYSCALL) => s.nr as u16,
        _ => WAKE_NO_SYSCALL,
    };
    let futex_shared = kind == waker_kind::TASK
        && u64::from(syscall) == FUTEX_NR
        && self::futex_shared(waker_tid, wakee_tid);
    let key = WakeKey {
        waker_tgid,
        waker_tid,
        wakee_tgid: start.tgid,
        wakee_tid,
        wakee_state: (start.state & 3) as u8,
        waker_kind: kind,
        syscall,
        futex_shared: u8::from(futex_shared),
        _pad: [0; 3],
    };
    if let Some(acc) = WAKE_EDGES.get_ptr_mut(key) {
        // SAFETY: the key holds the waker's tid (or CPU for interrupts),
        // which runs on one CPU at a time: no concurrent writer.
        unsafe {
            (*acc).blocked_ns += blocked;
            (*acc).count += 1;
            (*acc).last_ns = now;
            if (*acc).count & (WAKER_STACK_EVERY - 1) == 0 {
                let (user, kernel) = stack_ids(&ctx);
                (*acc).waker_user_stack = user;
                (*acc).waker_kernel_stack = kernel;
            }
        }
        return 0;
    }
    let (user, kernel) = stack_ids(&ctx);
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

#[inline(always)]
fn irq_depth_add(index: u32, enter: bool) {
    if let Some(depth) = IRQ_CONTEXT.get_ptr_mut(index) {
        // SAFETY: per-CPU slot; a handler's entry and exit run on one CPU,
        // and nested handlers of one kind unwind in order.
        unsafe {
            *depth = if enter {
                (*depth).saturating_add(1)
            } else {
                (*depth).saturating_sub(1)
            }
        };
    }
}

#[raw_tracepoint(tracepoint = "irq_handler_entry")]
pub fn irq_handler_entry(_ctx: RawTracePointContext) -> u32 {
    irq_depth_add(irq_context::HARDIRQ, true);
    0
}

#[raw_tracepoint(tracepoint = "irq_handler_exit")]
pub fn irq_handler_exit(_ctx: RawTracePointContext) -> u32 {
    irq_depth_add(irq_context::HARDIRQ, false);
    0
}

#[raw_tracepoint(tracepoint = "softirq_entry")]
pub fn softirq_entry(_ctx: RawTracePointContext) -> u32 {
    irq_depth_add(irq_context::SOFTIRQ, true);
    0
}

#[raw_tracepoint(tracepoint = "softirq_exit")]
pub fn softirq_exit(_ctx: RawTracePointContext) -> u32 {
    irq_depth_add(irq_context::SOFTIRQ, false);
    0
}

#[raw_tracepoint(tracepoint = "hrtimer_expire_entry")]
pub fn hrtimer_expire_entry(_ctx: RawTracePointContext) -> u32 {
    irq_depth_add(irq_context::TIMER, true);
    0
}

#[raw_tracepoint(tracepoint = "hrtimer_expire_exit")]
pub fn hrtimer_expire_exit(_ctx: RawTracePointContext) -> u32 {
    irq_depth_add(irq_context::TIMER, false);
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
