//! Every map of the object (user space finds them by these names) and the
//! small helpers the programs share to update them: the traced-set filter,
//! lost-event counters, u64 sums and per-thread accumulators.
//!
//! Hash maps whose entries come with a new key (a stack, a thread, a
//! wake-up edge) and then live on are allocated as entries arrive
//! (`BPF_F_NO_PREALLOC`): preallocating every one was most of a
//! recording's start, for maps a job fills a few percent of. Maps with an
//! insert and a delete at every event (an I/O in flight, a pending wait)
//! stay preallocated, which keeps allocation off those paths.
use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_NOEXIST},
    helpers::bpf_get_current_comm,
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
};
use storprof_common::{
    BlockInflight, BlockKey, BlockSubmitter, FutexWaiters, IrqContext, KsymNames, KsymRequest,
    OffCpuPending, OffCpuStart, PY_WINDOW_WORDS, ProbeConfig, PyOffCpuSample, PyProcess,
    STACK_SCRATCH_SLOTS_PER_CPU, STACK_SLOTS, SYSCALL_NR_SLOTS, SYSCALL_SLOT_ENTRIES,
    SYSCALL_THREAD_SLOTS, StackFrames, StackKey, SyscallAcc, SyscallKey, SyscallStart, ThreadAcc,
    UserStackSample, WakeAcc, WakeKey, lost, py_offcpu_lost,
};

/// Sizes of the per-pid arrays; user space sets them to `kernel.pid_max`.
const PID_SLOTS: u32 = 32768;

#[map]
pub(crate) static CONFIG: Array<ProbeConfig> = Array::with_max_entries(1, 0);

/// tgid → 1 when traced. An array so the hot-path filter is one bounds
/// check and one load.
#[map]
pub(crate) static TRACED: Array<u32> = Array::with_max_entries(PID_SLOTS, 0);

#[map]
pub(crate) static LOST: PerCpuArray<u64> = PerCpuArray::with_max_entries(lost::COUNT, 0);

/// Stacks of every probe by id (`stacks::stack_id`). Not a kernel stack-trace
/// map: that one drops a stack whose hash bucket holds another, which lost
/// 79–108 stacks of a real DLIO run at 65536 buckets. Here a stack is lost
/// only when all slots are taken. Entries are allocated as stacks arrive: a
/// job stores a few thousand, and preallocating all 66 MB (1016 B a slot)
/// was the largest single cost of a recording's start.
#[map]
pub(crate) static STACK_FRAMES: HashMap<u32, StackFrames> =
    HashMap::with_max_entries(STACK_SLOTS, BPF_F_NO_PREALLOC);

/// Slot of `STACK_FRAMES` → the 64-bit hash of the stack it holds. A hash
/// map so a slot can be claimed atomically (insert with BPF_NOEXIST);
/// allocated as slots are claimed, like the frames.
#[map]
pub(crate) static STACK_OWNERS: HashMap<u32, u64> =
    HashMap::with_max_entries(STACK_SLOTS, BPF_F_NO_PREALLOC);

/// Slots a new stack tries before it is lost (`stack_map_full`): with half
/// the slots taken, 16 probes all fail about once in 65536 new stacks.
pub(crate) const STACK_PROBES: u32 = 16;

/// Per-CPU buffer a stack is copied into before it is hashed: slot
/// `STACK_BUF_SAMPLE` for CPU samples (an NMI can interrupt a raw
/// tracepoint's program), `STACK_BUF_TRACE` for every other program.
#[map]
pub(crate) static STACK_BUF: PerCpuArray<StackFrames> = PerCpuArray::with_max_entries(2, 0);
pub(crate) const STACK_BUF_SAMPLE: u32 = 0;
pub(crate) const STACK_BUF_TRACE: u32 = 1;

#[map]
pub(crate) static SAMPLES: HashMap<StackKey, u64> =
    HashMap::with_max_entries(65536, BPF_F_NO_PREALLOC);

/// Threads the per-thread hash maps hold.
pub(crate) const THREAD_ENTRIES: u32 = 16384;

#[map]
pub(crate) static THREADS: HashMap<u32, ThreadAcc> =
    HashMap::with_max_entries(THREAD_ENTRIES, BPF_F_NO_PREALLOC);

/// tid → time it was last switched in (every task, not only traced ones:
/// the tgid of `next` is not known at switch-in).
#[map]
pub(crate) static ONCPU_START: Array<u64> = Array::with_max_entries(PID_SLOTS, 0);

/// tid → when and how a traced thread left the CPU.
#[map]
pub(crate) static OFFCPU_START: Array<OffCpuStart> = Array::with_max_entries(PID_SLOTS, 0);

#[map]
pub(crate) static OFFCPU_STACKS: HashMap<StackKey, u64> =
    HashMap::with_max_entries(65536, BPF_F_NO_PREALLOC);

/// tid → the stacks its last switch-outs took, and what they were taken
/// for (`switch_stacks::switch_out_stacks`). A hash map of traced threads
/// (removed at their exit), not a per-pid array: at 160 B a slot, an array
/// sized to a systemd host's pid_max (4194304) would pin 640 MiB.
/// Full, a switch-out takes its stacks anew (this is only a cache).
#[map]
pub(crate) static SWITCH_STACKS: HashMap<u32, SwitchStacks> =
    HashMap::with_max_entries(THREAD_ENTRIES, BPF_F_NO_PREALLOC);

/// The stack ids a thread's switch-outs took, for its next switch-outs
/// from the same places: four ways, for a thread that leaves the CPU in
/// turn from several places.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct SwitchStacks {
    pub ways: [SwitchStackWay; SWITCH_STACK_WAYS],
}

/// Places remembered per thread: a condition variable's wait, its mutex,
/// and the preemptions at a syscall's return that a hand-off causes.
pub(crate) const SWITCH_STACK_WAYS: usize = 4;

/// One place a thread left the CPU from, and the stacks taken there.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct SwitchStackWay {
    /// The user instruction and stack pointers saved at the kernel entry
    /// (the syscall, or the interrupt that preempted it in user space).
    pub ip: u64,
    pub sp: u64,
    /// When the stacks were taken.
    pub taken_ns: u64,
    pub syscall: u32,
    /// The `offcpu_state` index it left the CPU in.
    pub state: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
}

impl SwitchStackWay {
    /// Whether this way's stacks stand for a switch-out at `now` from
    /// (`ip`, `sp`) in `syscall` and `state`, taken less than `reuse_ns` ago.
    #[inline(always)]
    pub fn stands_for(
        &self,
        ip: u64,
        sp: u64,
        syscall: u32,
        state: u32,
        now: u64,
        reuse_ns: u64,
    ) -> bool {
        ip != 0
            && self.ip == ip
            && self.sp == sp
            && self.syscall == syscall
            && self.state == state
            && self.user_stack >= 0
            && now.wrapping_sub(self.taken_ns) < reuse_ns
    }
}

/// tid → syscall in progress.
#[map]
pub(crate) static SYSCALL_START: Array<SyscallStart> = Array::with_max_entries(PID_SLOTS, 0);

/// Fallback for threads / entries beyond the array pool below.
#[map]
pub(crate) static SYSCALLS: HashMap<SyscallKey, SyscallAcc> =
    HashMap::with_max_entries(16384, BPF_F_NO_PREALLOC);

/// tid → its syscall thread slot + 1 (0: not looked up yet, `NO_SLOT`:
/// the slot belongs to another thread). Cleared at thread exit.
#[map]
pub(crate) static SYSCALL_THREAD: Array<u32> = Array::with_max_entries(PID_SLOTS, 0);

/// Thread slot → tid that claimed it (insert-if-absent is atomic).
#[map]
pub(crate) static SYSCALL_SLOT_OWNER: HashMap<u32, u32> =
    HashMap::with_max_entries(SYSCALL_THREAD_SLOTS, 0);

/// Thread slot → entries of its region in use (written by its owner only).
#[map]
pub(crate) static SYSCALL_SLOT_USED: Array<u32> = Array::with_max_entries(SYSCALL_THREAD_SLOTS, 0);

/// (thread slot, nr) → entry index within the slot's region + 1 (0: none yet).
#[map]
pub(crate) static SYSCALL_INDEX: Array<u32> =
    Array::with_max_entries(SYSCALL_THREAD_SLOTS * SYSCALL_NR_SLOTS, 0);

/// Per-thread per-syscall statistics, `SYSCALL_SLOT_ENTRIES` per thread slot...
#[map]
pub(crate) static SYSCALL_POOL: Array<SyscallAcc> =
    Array::with_max_entries(SYSCALL_THREAD_SLOTS * SYSCALL_SLOT_ENTRIES, 0);

/// Switch-ins of traced threads that had no `sched_switch` event, found
/// and repaired later (`sched::repair_missed_switch_in`), per CPU.
#[map]
pub(crate) static MISSED_SWITCH_INS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// One all-zero statistic, never written: the value a thread's first call
/// is inserted with in `SYSCALLS`. A map value, not a constant, so the
/// compiler cannot build its 368 bytes on `sys_exit`'s stack (it did, and
/// with `flush_offcpu`'s frame that overran the verifier's 512 bytes).
#[map]
pub(crate) static SYSCALL_ZERO: Array<SyscallAcc> = Array::with_max_entries(1, 0);

/// ...and whose they are (written before the entry is published).
#[map]
pub(crate) static SYSCALL_POOL_KEY: Array<SyscallKey> =
    Array::with_max_entries(SYSCALL_THREAD_SLOTS * SYSCALL_SLOT_ENTRIES, 0);

/// In-flight requests by `struct request` address (unique while in flight).
#[map]
pub(crate) static BLOCK_INFLIGHT: HashMap<u64, BlockInflight> = HashMap::with_max_entries(16384, 0);

/// Who created a request and when (`block_io_start`), taken at issue. LRU:
/// a request whose sector changes before issue (front merge) would
/// otherwise leave its entry behind forever.
#[map]
pub(crate) static BLOCK_SUBMITTER: LruHashMap<BlockKey, BlockSubmitter> =
    LruHashMap::with_max_entries(16384, 0);

#[map]
pub(crate) static BLOCK_EVENTS: RingBuf = RingBuf::with_byte_size(8 << 20, 0);

/// Kernel addresses to name (`kernel_symbols`), written by user space.
#[map]
pub(crate) static KSYM_REQUEST: Array<KsymRequest> = Array::with_max_entries(1, 0);

/// Their names, written by `kernel_symbols`.
#[map]
pub(crate) static KSYM_NAMES: Array<KsymNames> = Array::with_max_entries(1, 0);

/// User-stack samples for DWARF unwinding (header + stack window).
#[map]
pub(crate) static STACK_EVENTS: RingBuf = RingBuf::with_byte_size(16 << 20, 0);

/// Scratch where a user-stack sample is assembled, two slots per CPU
/// (a per-CPU array cannot hold values over 32 KiB): slot `2 * cpu` for
/// CPU samples, `2 * cpu + 1` for blocked syscalls at `sys_exit`, which a
/// CPU sample (an NMI) can interrupt. User space sizes it to twice the
/// possible CPUs. Neither program nests with itself on one CPU, so a slot
/// has one writer at a time.
#[map]
pub(crate) static STACK_SCRATCH: Array<UserStackSample> =
    Array::with_max_entries(STACK_SCRATCH_SLOTS_PER_CPU, 0);

/// tid → its blocked time inside the current syscall, until the syscall's
/// exit copies its user stack (`FLAG_OFFCPU_DWARF`).
#[map]
pub(crate) static OFFCPU_PENDING: HashMap<u32, OffCpuPending> = HashMap::with_max_entries(8192, 0);

/// tid → 1 while it has an entry in `OFFCPU_PENDING` (an array: the check
/// at every syscall exit costs one load, no hashing).
#[map]
pub(crate) static OFFCPU_PENDING_FLAG: Array<u32> = Array::with_max_entries(PID_SLOTS, 0);

/// tgid → its CPython interpreter (runtime address and struct offsets).
/// Written by user space when it finds an interpreter; copied to forked
/// children at fork, removed at exec and exit.
#[map]
pub(crate) static PY_PROCS: HashMap<u32, PyProcess> = HashMap::with_max_entries(4096, 0);

/// tgid → 1 when its CPU samples carry a stack window (`--unwind auto`,
/// `FLAG_UNWIND_PER_PROCESS`). Written by user space after exec from the
/// executable's frame-pointer check; copied to forked children at fork,
/// removed at exec and exit.
#[map]
pub(crate) static DWARF_PROCS: HashMap<u32, u8> = HashMap::with_max_entries(4096, 0);

/// tid → its Python frames and stack ids at switch-out, until switch-in.
#[map]
pub(crate) static PY_OFFCPU: HashMap<u32, PyOffCpuSample> = HashMap::with_max_entries(4096, 0);

/// tid → 1 while it has an entry in `PY_OFFCPU` (an array: the switch-in
/// check of every task costs one load, no hashing).
#[map]
pub(crate) static PY_OFFCPU_PENDING: Array<u32> = Array::with_max_entries(PID_SLOTS, 0);

/// Per-CPU buffer a Python frame's fields are read into (too large for the
/// BPF stack under a walk), one per slot as `STACK_BUF`.
#[map]
pub(crate) static PY_FRAME_WINDOW: PerCpuArray<[u64; PY_WINDOW_WORDS]> =
    PerCpuArray::with_max_entries(2, 0);

/// Where an off-CPU Python sample is assembled (too large for the BPF stack).
#[map]
pub(crate) static PY_OFFCPU_SCRATCH: PerCpuArray<PyOffCpuSample> =
    PerCpuArray::with_max_entries(1, 0);

/// Off-CPU intervals of Python threads with their frames.
#[map]
pub(crate) static PY_OFFCPU_EVENTS: RingBuf = RingBuf::with_byte_size(4 << 20, 0);

/// Off-CPU Python samples lost, by `py_offcpu_lost` index.
#[map]
pub(crate) static PY_OFFCPU_LOST: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(py_offcpu_lost::COUNT, 0);

/// The futex word each thread waits (or last waited) on, by tid, written
/// at `sys_enter` of a futex wait; LRU, so threads gone are forgotten.
#[map]
pub(crate) static FUTEX_WAIT_WORD: LruHashMap<u32, u64> = LruHashMap::with_max_entries(16384, 0);

/// The last distinct waiters per futex word granule; LRU, so words of
/// futures and condition variables used once are forgotten.
#[map]
pub(crate) static FUTEX_WAITERS: LruHashMap<u64, FutexWaiters> =
    LruHashMap::with_max_entries(16384, 0);

/// Wake-up edges, summed in the kernel (nothing per event is streamed).
#[map]
pub(crate) static WAKE_EDGES: HashMap<WakeKey, WakeAcc> =
    HashMap::with_max_entries(32768, BPF_F_NO_PREALLOC);

/// The interrupt contexts active on each CPU (one entry per CPU).
#[map]
pub(crate) static IRQ_CONTEXT: PerCpuArray<IrqContext> = PerCpuArray::with_max_entries(1, 0);

#[map]
pub(crate) static PROC_EVENTS: RingBuf = RingBuf::with_byte_size(1 << 20, 0);

/// Bumps `LOST[index]`: an event dropped because a map or buffer was full.
#[inline(always)]
pub(crate) fn count_lost(index: u32) {
    if let Some(counter) = LOST.get_ptr_mut(index) {
        // SAFETY: per-CPU slot; programs do not nest on one CPU for these hooks.
        unsafe { *counter += 1 };
    }
}

/// Bumps `PY_OFFCPU_LOST[index]` (a `py_offcpu_lost` index).
#[inline(always)]
pub(crate) fn count_py_offcpu_lost(index: u32) {
    if let Some(counter) = PY_OFFCPU_LOST.get_ptr_mut(index) {
        // SAFETY: per-CPU slot; programs do not nest on one CPU for this hook.
        unsafe { *counter += 1 };
    }
}

#[inline(always)]
pub(crate) fn is_traced(tgid: u32) -> bool {
    matches!(TRACED.get(tgid), Some(&1))
}

/// Adds `value` to the u64 stored under `key`, inserting it when new.
#[inline(always)]
pub(crate) fn add_to<K>(map: &HashMap<K, u64>, key: &K, value: u64, lost_index: u32) {
    if let Some(slot) = map.get_ptr_mut(key) {
        // SAFETY: a map value slot; keys include the tid, and a thread runs
        // on one CPU at a time, so there is no concurrent writer.
        unsafe { *slot += value };
    } else if map.insert(key, value, BPF_NOEXIST as u64).is_err() {
        count_lost(lost_index);
    }
}

/// The accumulator of thread `tid`, inserted (with the current comm) when new.
#[inline(always)]
pub(crate) fn thread_acc(tgid: u32, tid: u32) -> Option<*mut ThreadAcc> {
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
