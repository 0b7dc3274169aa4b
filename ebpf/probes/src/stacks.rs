//! Stacks: frame-pointer stack ids (`STACK_FRAMES`), CPU samples, and the copy
//! of a task's user registers and user-stack window (with its Python
//! frames) into `STACK_EVENTS` for DWARF unwinding in user space.
use aya_ebpf::{
    EbpfContext,
    bindings::{BPF_F_USER_STACK, BPF_NOEXIST},
    cty::c_void,
    helpers::{bpf_get_current_pid_tgid, generated::bpf_get_stack},
    programs::PerfEventContext,
};
use storprof_common::{
    FLAG_UNWIND_PER_PROCESS, MAX_STACK_BYTES, MAX_STACK_FRAMES, OffCpuPending,
    STACK_SCRATCH_SLOTS_PER_CPU, STACK_SLOTS, StackFrames, StackKey, USER_STACK_PREFIX,
    UserStackHeader, UserStackSample, lost, py_status,
};

use crate::{
    kernel::{bounded_loop, pt_regs, pt_regs_word},
    maps::{
        CONFIG, DWARF_PROCS, PY_PROCS, SAMPLES, STACK_BUF, STACK_BUF_SAMPLE, STACK_EVENTS,
        STACK_FRAMES, STACK_OWNERS, STACK_PROBES, STACK_SCRATCH, add_to, count_lost, is_traced,
    },
    python::python_frames,
};

/// `STACK_SCRATCH` slot of the current CPU for CPU samples (`+ 1`: for
/// blocked syscalls, see `sched::flush_offcpu`).
#[inline(always)]
pub(crate) fn scratch_slot(cpu: u32) -> u32 {
    cpu * STACK_SCRATCH_SLOTS_PER_CPU
}

/// The (user, kernel) stack ids of the current task (-1: none), copied
/// through `STACK_BUF[buf_slot]` (`STACK_BUF_SAMPLE` from CPU samples,
/// else `STACK_BUF_TRACE`).
#[inline(always)]
pub(crate) fn stack_ids<C: EbpfContext>(ctx: &C, buf_slot: u32) -> (i32, i32) {
    (
        stack_id(ctx, BPF_F_USER_STACK as u64, buf_slot),
        stack_id(ctx, 0, buf_slot),
    )
}

/// The id of the current task's user or kernel stack (`flags`) in
/// `STACK_FRAMES`, stored there when new; -1 when there is none or every
/// slot it may take is taken. A stack is known by a 64-bit hash of its
/// frames, so two stacks share an id only if their hashes collide (odds
/// near 2^-64 a pair), where the kernel's stack-trace map drops a stack
/// whenever its bucket holds another.
#[inline(always)]
fn stack_id<C: EbpfContext>(ctx: &C, flags: u64, buf_slot: u32) -> i32 {
    let Some(buf) = STACK_BUF.get_ptr_mut(buf_slot) else {
        return -1;
    };
    // SAFETY: bpf_get_stack writes at most `size` bytes into this CPU's
    // buffer and zeroes what the stack does not fill.
    let len = unsafe {
        bpf_get_stack(
            ctx.as_ptr(),
            buf.cast(),
            core::mem::size_of::<StackFrames>() as u32,
            flags,
        )
    };
    if len <= 0 {
        return -1;
    }
    let mut fold = FrameHash {
        frames: buf.cast_const(),
        // FNV-1a, seeded apart for user and kernel stacks.
        hash: 0xcbf2_9ce4_8422_2325 ^ flags,
    };
    bounded_loop(MAX_STACK_FRAMES as u32, hash_frame, &mut fold);
    let hash = fold.hash;
    // Open addressing over the slots: the first probe is the hash's low
    // bits, then an odd step (it visits every slot of a power-of-two
    // table). A slot is claimed by inserting its owner's hash with
    // BPF_NOEXIST, which one CPU alone can win.
    let mut search = SlotSearch {
        hash,
        frames: buf,
        slot: (hash as u32) & (STACK_SLOTS - 1),
        step: ((hash >> 32) as u32) | 1,
        found: SLOT_NOT_FOUND,
    };
    bounded_loop(STACK_PROBES, probe_slot, &mut search);
    if search.found == SLOT_NOT_FOUND {
        count_lost(lost::STACKS_FULL);
        return -1;
    }
    search.found
}

/// The FNV-1a hash `hash_frame` folds a stack's frames into.
#[repr(C)]
struct FrameHash {
    frames: *const StackFrames,
    hash: u64,
}

/// `bpf_loop` callback: folds frame `index` into the `FrameHash` at
/// `ctx`; stops at the first zero frame.
extern "C" fn hash_frame(index: u64, ctx: *mut c_void) -> i64 {
    let fold = ctx.cast::<FrameHash>();
    let i = index as usize;
    if i >= MAX_STACK_FRAMES {
        return 1;
    }
    // SAFETY: `ctx` is the caller's `FrameHash`, whose `frames` is this
    // CPU's stack buffer; `i` is in bounds.
    unsafe {
        let ip = (*(*fold).frames).ips[i];
        if ip == 0 {
            return 1;
        }
        (*fold).hash = ((*fold).hash ^ ip).wrapping_mul(0x0000_0100_0000_01b3);
    }
    0
}

/// `SlotSearch::found` while no slot holds or took the stack.
const SLOT_NOT_FOUND: i32 = i32::MIN;

/// A search of `STACK_OWNERS` for the slot of the stack hashed `hash`.
#[repr(C)]
struct SlotSearch {
    hash: u64,
    /// The stack's frames, stored when a free slot is claimed.
    frames: *mut StackFrames,
    /// The slot the next probe looks at.
    slot: u32,
    step: u32,
    /// The stack's id once found or stored (-1: claimed, not stored).
    found: i32,
}

/// `bpf_loop` callback: one probe of the `SlotSearch` at `ctx`; stops
/// when the slot holds the stack or has just been claimed for it.
extern "C" fn probe_slot(_index: u64, ctx: *mut c_void) -> i64 {
    let search = ctx.cast::<SlotSearch>();
    // SAFETY: `ctx` is the caller's `SlotSearch`.
    let (hash, slot) = unsafe { ((*search).hash, (*search).slot) };
    // SAFETY: a lookup; the value is a plain u64.
    let found = match unsafe { STACK_OWNERS.get(slot) } {
        Some(&owner) if owner == hash => Some(slot as i32),
        Some(_) => None,
        None if STACK_OWNERS.insert(slot, hash, BPF_NOEXIST as u64).is_ok() => {
            // SAFETY: as above.
            Some(store_frames(slot, unsafe { (*search).frames }))
        }
        None => {
            // Another CPU claimed it first, maybe for this very stack.
            // SAFETY: as above.
            let owner = unsafe { STACK_OWNERS.get(slot) }.copied();
            (owner == Some(hash)).then_some(slot as i32)
        }
    };
    // SAFETY: as above.
    unsafe {
        match found {
            Some(id) => {
                (*search).found = id;
                1
            }
            None => {
                (*search).slot = slot.wrapping_add((*search).step) & (STACK_SLOTS - 1);
                0
            }
        }
    }
}

/// Stores the stack in `buf` as `STACK_FRAMES[slot]`, a slot just claimed.
/// When the entry cannot be allocated the claim is given back (a later
/// sighting of the stack tries again) and the stack is lost.
#[inline(always)]
fn store_frames(slot: u32, buf: *mut StackFrames) -> i32 {
    // SAFETY: `buf` is this CPU's stack buffer, a map value holding a
    // StackFrames; the insert copies it.
    let frames = unsafe { &*buf };
    if STACK_FRAMES
        .insert(slot, frames, BPF_NOEXIST as u64)
        .is_ok()
    {
        return slot as i32;
    }
    let _ = STACK_OWNERS.remove(slot);
    count_lost(lost::STACKS_FULL);
    -1
}

/// `cpu_sample`: counts the sample under its thread and stacks, and in
/// DWARF mode (or for a Python process) sends its user stack.
#[inline(always)]
pub(crate) fn cpu_sample(ctx: &PerfEventContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;
    if tid == 0 || !is_traced(tgid) {
        return 0;
    }
    let (user_stack, kernel_stack) = stack_ids(ctx, STACK_BUF_SAMPLE);
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
        capture_user_stack(key, stack_bytes, regs, scratch_slot(cpu), &NO_OFFCPU);
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

/// Copies the current task's user registers `regs` (its saved user
/// register frame: right for samples in user mode, in a syscall or a
/// fault) and up to `stack_bytes` of its user stack into `STACK_EVENTS`,
/// assembled in scratch slot `slot`; `offcpu` is the blocked time the
/// stack stands for (none for a CPU sample).
#[inline(always)]
pub(crate) fn capture_user_stack(
    key: StackKey,
    stack_bytes: u32,
    regs: *const u64,
    slot: u32,
    offcpu: &OffCpuPending,
) {
    let read = |index: usize| -> u64 { pt_regs_word(regs, index).unwrap_or(0) };
    let Some(scratch) = STACK_SCRATCH.get_ptr_mut(slot) else {
        return;
    };
    let sp = read(pt_regs::SP);
    let mut header = UserStackHeader {
        tgid: key.tgid,
        tid: key.tid,
        kernel_stack: key.kernel_stack,
        user_stack: key.user_stack,
        ip: read(pt_regs::IP),
        sp,
        bp: read(pt_regs::BP),
        len: 0,
        py_frames: 0,
        py_status: py_status::NONE,
        blocked_ns: offcpu.weight_ns,
        offcpu_state: offcpu.state,
        offcpu_intervals: offcpu.intervals,
    };
    // The slot's context (`STACK_BUF_SAMPLE` or `STACK_BUF_TRACE`) picks
    // the frame buffer too.
    let buf_slot = slot % STACK_SCRATCH_SLOTS_PER_CPU;
    // SAFETY: `scratch` is this CPU's map value.
    let (frames, status) =
        python_frames(key.tgid, key.tid, unsafe { &mut (*scratch).py }, buf_slot);
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
