//! Types shared by the kernel-side probes (`storprof-ebpf`) and the user-side
//! loader (`storprof`). Everything here is `#[repr(C)]`, has explicit padding
//! and a compile-time size assert, so both sides agree byte for byte.
//!
//! Data flow: the probes fill hash maps keyed by these key types with these
//! accumulator types (counted in the kernel), plus two ring buffers of
//! events (process lifecycle, completed block requests); user space drains
//! them (`storprof::probes`) and aggregates them into the session model.
#![cfg_attr(not(test), no_std)]

/// Number of log2 latency buckets: bucket i counts values in [2^i, 2^(i+1)) ns
/// (bucket 0 also holds 0). 40 buckets reach ~18 minutes. The session model
/// re-exports it (`storprof::session::model::LOG2_BUCKETS`).
pub const LOG2_BUCKETS: usize = 40;

/// Byte offsets of the classic tracepoint record fields the probes read
/// (from each event's `format` file under tracefs). The probes read them
/// blind; user space checks every one against the running kernel before
/// attaching (`storprof::probes::TRACEPOINT_FIELDS`), so both use these.
pub mod tracepoint_offsets {
    /// `sched:sched_switch` `prev_pid` (`pid_t`).
    pub const SCHED_SWITCH_PREV_PID: usize = 24;
    /// `sched:sched_switch` `prev_state` (`long`).
    pub const SCHED_SWITCH_PREV_STATE: usize = 32;
    /// `sched:sched_switch` `next_pid` (`pid_t`).
    pub const SCHED_SWITCH_NEXT_PID: usize = 56;
    /// `sched:sched_process_fork` `child_pid` (`pid_t`).
    pub const SCHED_PROCESS_FORK_CHILD_PID: usize = 20;
    /// `sched:sched_process_exit` `group_dead` (`bool`).
    pub const SCHED_PROCESS_EXIT_GROUP_DEAD: usize = 32;
    /// `block:block_io_start` `dev` (`dev_t`, kernel-internal).
    pub const BLOCK_IO_START_DEV: usize = 8;
    /// `block:block_io_start` `sector` (`sector_t`).
    pub const BLOCK_IO_START_SECTOR: usize = 16;
    /// `filemap:mm_filemap_add_to_page_cache` `order` (`unsigned char`).
    pub const FILEMAP_ADD_TO_PAGE_CACHE_ORDER: usize = 36;
    /// `syscalls:sys_enter_futex` `uaddr` (the futex word's address).
    pub const SYS_ENTER_FUTEX_UADDR: usize = 16;
    /// `syscalls:sys_enter_futex` `op`.
    pub const SYS_ENTER_FUTEX_OP: usize = 24;
    /// `syscalls:sys_enter_futex` `val` (the value a wait expects).
    pub const SYS_ENTER_FUTEX_VAL: usize = 32;
}

/// Length of a task's `comm`.
pub const COMM_LEN: usize = 16;

/// Depth of a stack in the stack-trace map (the kernel's PERF_MAX_STACK_DEPTH).
pub const MAX_STACK_DEPTH: usize = 127;

/// Config flag: measure each syscall's latency exactly, from its entry to
/// its exit (a raw `sys_enter` hook on every syscall besides `sys_exit`).
pub const FLAG_SYSCALL_LATENCY: u32 = 1;
/// Config flag (`--unwind auto`): copy stack windows only for processes
/// marked in `DWARF_PROCS` (decided by user space per executable); the
/// others keep frame-pointer stacks only.
pub const FLAG_UNWIND_PER_PROCESS: u32 = 2;
/// DWARF mode: the user stack of a syscall that blocked is copied at the
/// syscall's exit (the stack is the same as when it blocked), so off-CPU
/// time in syscalls gets DWARF-unwound stacks. Needs the `sys_exit` hook.
pub const FLAG_OFFCPU_DWARF: u32 = 4;
/// Config flag: a syscall's time is the time its thread spent switched
/// out inside it (voluntarily: asleep or in D, then waiting for a CPU), taken
/// from `sched_switch` and added up at `sys_exit`; no hook on every
/// syscall's entry. A call that never blocked counts 0.
pub const FLAG_SYSCALL_BLOCKED_TIME: u32 = 8;

/// Global configuration written by user space before the command execs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeConfig {
    /// pid of the forked child that will exec the recorded command: when it
    /// execs, the probes start tracing it (its pre-exec set-up is not traced).
    pub root_tgid: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// Bytes of user stack copied per CPU sample for DWARF unwinding in user
    /// space (0: none, frame-pointer stacks only). At most `MAX_STACK_BYTES`.
    pub stack_bytes: u32,
    /// `FLAG_OFFCPU_DWARF`: blocked-syscall intervals shorter than this are
    /// sampled with probability `blocked / quantum` and then stand for a
    /// whole quantum (an unbiased estimate of the time per stack at a
    /// bounded number of stack copies per second); longer ones are always
    /// taken at their own length. 0: every interval is taken.
    pub offcpu_quantum_us: u32,
    /// Byte offset of `task_struct.thread.fsbase` (from the kernel's BTF;
    /// 0: unknown), for `py_tstate::BY_PTHREAD`.
    pub task_fsbase: u32,
    /// Byte offset of `task_struct.pid` (the thread id; from BTF, 0:
    /// unknown), for the `sched_waking` raw tracepoint.
    pub task_pid: u32,
    /// Where the block raw tracepoints find a request's fields.
    pub block: BlockLayout,
}
const _: () = assert!(core::mem::size_of::<ProbeConfig>() == 52);

/// Byte offsets (from the kernel's BTF) of the `struct request` fields the
/// block raw tracepoints read. Raw tracepoints get the request pointer, not
/// the formatted record; they are used because a classic tracepoint's BPF
/// program is skipped whenever it fires inside another classic tracepoint
/// or perf-event program on the same CPU (a completion interrupt landing in
/// a running probe), while a raw tracepoint is only skipped when it nests
/// in itself.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockLayout {
    /// `request.q` (a `struct request_queue *`).
    pub request_queue: u32,
    /// `request.cmd_flags` (`blk_opf_t`: the low 8 bits are the operation).
    pub request_cmd_flags: u32,
    /// `request.__data_len` (bytes, `unsigned int`).
    pub request_data_len: u32,
    /// `request.__sector` (`sector_t`).
    pub request_sector: u32,
    /// `request_queue.disk` (a `struct gendisk *`).
    pub queue_disk: u32,
    /// `gendisk.major` and `gendisk.first_minor` (`int`).
    pub disk_major: u32,
    pub disk_first_minor: u32,
}
const _: () = assert!(core::mem::size_of::<BlockLayout>() == 28);

/// Block operations: `cmd_flags & BLOCK_OP_MASK` (`REQ_OP_BITS` is 8).
pub mod block_op {
    pub const MASK: u32 = 0xff;
    pub const READ: u32 = 0;
    pub const WRITE: u32 = 1;
    pub const FLUSH: u32 = 2;
    pub const DISCARD: u32 = 3;

    /// The operation's letter, as the block tracepoints' `rwbs` starts
    /// ('N' for the rest).
    pub const fn letter(cmd_flags: u32) -> u8 {
        match cmd_flags & MASK {
            READ => b'R',
            WRITE => b'W',
            FLUSH => b'F',
            DISCARD => b'D',
            _ => b'N',
        }
    }
}

/// Largest user-stack window a CPU sample can copy (a power of two: the
/// probe masks the length with `MAX_STACK_BYTES - 1` for the verifier).
pub const MAX_STACK_BYTES: u32 = 65536;
/// Default user-stack window (`--stack-bytes`).
pub const DEFAULT_STACK_BYTES: u32 = 16384;
/// Scratch slots of `STACK_SCRATCH` per possible CPU: one for CPU samples,
/// one for blocked syscalls at `sys_exit` (which a CPU sample can
/// interrupt). User space sizes the map to this many times the CPUs.
pub const STACK_SCRATCH_SLOTS_PER_CPU: u32 = 2;

/// Frames a stored stack holds (the kernel's default `perf_event_max_stack`).
pub const MAX_STACK_FRAMES: usize = 127;
/// Stacks the probes can store: `STACK_FRAMES` slots, ids `0..STACK_SLOTS`.
pub const STACK_SLOTS: u32 = 65536;

/// One stored stack (`STACK_FRAMES[id]`): instruction pointers, innermost
/// first, zero after the last (`bpf_get_stack` zeroes the rest).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackFrames {
    pub ips: [u64; MAX_STACK_FRAMES],
}
const _: () = assert!(core::mem::size_of::<StackFrames>() == MAX_STACK_FRAMES * 8);

impl StackFrames {
    /// The frames up to the first zero.
    pub fn frames(&self) -> &[u64] {
        let len = self
            .ips
            .iter()
            .position(|&ip| ip == 0)
            .unwrap_or(MAX_STACK_FRAMES);
        &self.ips[..len]
    }
}

/// Header of a user-stack sample (ring buffer `STACK_EVENTS`), followed by
/// `len` bytes of stack from `sp` upwards.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserStackHeader {
    pub tgid: u32,
    pub tid: u32,
    /// Kernel stack id of the sample (negative: in user mode).
    pub kernel_stack: i32,
    /// Frame-pointer user stack id of the same sample (negative: none).
    pub user_stack: i32,
    /// User registers (the task's saved user registers when the sample
    /// landed in the kernel).
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// Stack bytes that follow the Python frame area (0 when the stack
    /// could not be read).
    pub len: u32,
    /// Python frames filled in the frame area (0: not a registered
    /// interpreter, or no Python frame running on this thread).
    pub py_frames: u16,
    /// `py_status::*`: how the Python walk went.
    pub py_status: u16,
    /// Off-CPU time this stack stands for (ns, `FLAG_OFFCPU_DWARF`): 0 for
    /// a CPU sample.
    pub blocked_ns: u64,
    /// `offcpu_state` index of the off-CPU interval (0 for a CPU sample).
    pub offcpu_state: u32,
    /// Off-CPU intervals merged into this one (one syscall can block
    /// several times; the stacks of the longest are kept).
    pub offcpu_intervals: u32,
}
const _: () = assert!(core::mem::size_of::<UserStackHeader>() == 64);

impl UserStackHeader {
    /// The thread and frame-pointer/kernel stack ids of the sample.
    pub const fn stack_key(&self) -> StackKey {
        StackKey {
            tgid: self.tgid,
            tid: self.tid,
            user_stack: self.user_stack,
            kernel_stack: self.kernel_stack,
        }
    }
}

/// Outcome of the Python frame walk of one sample (`UserStackHeader::py_status`).
pub mod py_status {
    /// The process has no registered interpreter.
    pub const NONE: u16 = 0;
    /// The walk ran; `py_frames` frames were read (the last one is the outermost).
    pub const OK: u16 = 1;
    /// No thread state of the interpreter belongs to the sampled thread
    /// (a thread that never ran Python, or the interpreter is not up yet).
    pub const NO_THREAD: u16 = 2;
    /// The walk stopped at `MAX_PY_FRAMES`: outer frames are missing.
    pub const TRUNCATED: u16 = 3;
    /// A read of the interpreter's memory failed midway.
    pub const READ_FAILED: u16 = 4;
}

/// Most Python frames one sample records.
pub const MAX_PY_FRAMES: usize = 64;
/// Most thread states the probe looks at to find the sampled thread's.
pub const MAX_PY_THREADS: u32 = 32;
/// An offset in `PyProcess` that is not used by this interpreter version.
pub const PY_NO_OFFSET: u32 = u32::MAX;

/// How the probe finds the sampled thread's `PyThreadState`.
pub mod py_tstate {
    /// Walk the interpreter's thread-state list for `native_thread_id == tid`
    /// (3.11+).
    pub const BY_NATIVE_TID: u32 = 0;
    /// Read the GIL holder `_PyRuntime.gilstate.tstate_current` (3.10,
    /// which has no native thread id: right for the thread running Python).
    pub const GIL_HOLDER: u32 = 1;
    /// Walk the thread-state list for `thread_id == pthread_self()` of the
    /// sampled thread, which is its FS base on x86_64 glibc, read from its
    /// task (3.10: right for every thread, GIL holder or not; needs
    /// `ProbeConfig::task_fsbase`).
    pub const BY_PTHREAD: u32 = 2;
}

/// A registered CPython interpreter of one process (map `PY_PROCS`, keyed
/// by tgid): where its runtime is and the struct offsets of its version,
/// computed by user space from the interpreter's symbols and version.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PyProcess {
    /// Address of `_PyRuntime` in the process.
    pub runtime: u64,
    /// `PY_VERSION_HEX >> 16`, e.g. 0x030b for 3.11.
    pub version: u32,
    /// `py_tstate::*`.
    pub tstate_mode: u32,
    /// `_PyRuntime.interpreters.head` (BY_NATIVE_TID, BY_PTHREAD).
    pub runtime_interp_head: u32,
    /// `PyInterpreterState.threads.head` (`tstate_head` in 3.10).
    pub interp_tstate_head: u32,
    /// `PyThreadState.next`.
    pub tstate_next: u32,
    /// `PyThreadState.native_thread_id` (BY_NATIVE_TID).
    pub tstate_native_tid: u32,
    /// `_PyRuntime.gilstate.tstate_current` (GIL_HOLDER).
    pub runtime_tstate_current: u32,
    /// `PyThreadState` field leading to the current frame: `cframe`
    /// (3.11, 3.12), `current_frame` (3.13+) or `frame` (3.10).
    pub tstate_frame: u32,
    /// `_PyCFrame.current_frame` when `tstate_frame` is a cframe, else `PY_NO_OFFSET`.
    pub cframe_current_frame: u32,
    /// Frame fields: the calling frame, the code object, the instruction
    /// (pointer, or `f_lasti` in 3.10), and a byte recorded as the frame's
    /// flag (`is_entry` in 3.11, `owner` in 3.12+, `PY_NO_OFFSET`: none).
    pub frame_previous: u32,
    pub frame_code: u32,
    pub frame_instr: u32,
    pub frame_flag: u32,
    /// The process's pid namespace (`stat` of /proc/PID/ns/pid: device and
    /// inode) when it is not the recorder's, else 0: `native_thread_id` is
    /// the thread id as seen in that namespace (a container's), so the
    /// probe compares it with the sampled thread's id there.
    pub pidns_dev: u64,
    pub pidns_ino: u64,
    /// `PyThreadState.thread_id` (BY_PTHREAD).
    pub tstate_pthread: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<PyProcess>() == 88);

/// One Python frame of a sample, as the probe read it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PyFrameRecord {
    /// Code object address (bits 0..56) and the frame's flag byte (bits 56..64).
    pub code_and_flag: u64,
    /// The frame's instruction pointer field (`f_lasti` in 3.10).
    pub instr: u64,
}
const _: () = assert!(core::mem::size_of::<PyFrameRecord>() == 16);

impl PyFrameRecord {
    /// Packs a code object address (user addresses fit in 56 bits) and a flag byte.
    pub const fn new(code: u64, instr: u64, flag: u8) -> Self {
        Self {
            code_and_flag: (code & ((1 << 56) - 1)) | ((flag as u64) << 56),
            instr,
        }
    }
    pub const fn code(&self) -> u64 {
        self.code_and_flag & ((1 << 56) - 1)
    }
    pub const fn flag(&self) -> u8 {
        (self.code_and_flag >> 56) as u8
    }
}

/// An off-CPU interval of a Python thread (DWARF mode): taken at switch-out
/// (the Python frames, stack ids and time), sent at switch-in with the time
/// blocked (ring buffer `PY_OFFCPU_EVENTS`, the whole struct).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PyOffCpuSample {
    pub tgid: u32,
    pub tid: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
    /// Switch-out time.
    pub ts_out: u64,
    /// Time off the CPU (filled at switch-in).
    pub blocked_ns: u64,
    /// `offcpu_state` index.
    pub state: u32,
    pub py_frames: u16,
    pub py_status: u16,
    pub py: [PyFrameRecord; MAX_PY_FRAMES],
}
const _: () = assert!(
    core::mem::size_of::<PyOffCpuSample>()
        == 40 + MAX_PY_FRAMES * core::mem::size_of::<PyFrameRecord>()
);

impl PyOffCpuSample {
    /// The thread and frame-pointer/kernel stack ids of the interval.
    pub const fn stack_key(&self) -> StackKey {
        StackKey {
            tgid: self.tgid,
            tid: self.tid,
            user_stack: self.user_stack,
            kernel_stack: self.kernel_stack,
        }
    }
}

/// Per-CPU scratch of the probe: a header, the Python frame area (always
/// sent whole) and the largest stack window.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UserStackSample {
    pub header: UserStackHeader,
    pub py: [PyFrameRecord; MAX_PY_FRAMES],
    pub stack: [u8; MAX_STACK_BYTES as usize],
}
/// Bytes of a user-stack event before its stack window.
pub const USER_STACK_PREFIX: usize =
    core::mem::size_of::<UserStackHeader>() + MAX_PY_FRAMES * core::mem::size_of::<PyFrameRecord>();
const _: () = assert!(
    core::mem::size_of::<UserStackSample>() == USER_STACK_PREFIX + MAX_STACK_BYTES as usize
);

/// Indices into the `LOST` per-CPU counter array: why an event was dropped.
pub mod lost {
    /// The CPU-sample map was full.
    pub const SAMPLES_MAP_FULL: u32 = 0;
    /// The per-thread map was full.
    pub const THREADS_MAP_FULL: u32 = 1;
    /// The per-thread per-syscall map was full.
    pub const SYSCALLS_MAP_FULL: u32 = 2;
    /// The off-CPU stack map was full.
    pub const OFFCPU_MAP_FULL: u32 = 3;
    /// The in-flight block request map was full.
    pub const BLOCK_INFLIGHT_FULL: u32 = 4;
    /// The block event ring buffer was full.
    pub const BLOCK_RINGBUF_FULL: u32 = 5;
    /// The process event ring buffer was full.
    pub const PROC_RINGBUF_FULL: u32 = 6;
    /// Every stack slot was taken: a new stack was not stored.
    pub const STACKS_FULL: u32 = 7;
    /// The user-stack ring buffer was full (a DWARF-mode sample was lost).
    pub const STACK_RINGBUF_FULL: u32 = 8;
    /// The pending off-CPU map was full: a blocked syscall's time went to
    /// the frame-pointer off-CPU stacks instead.
    pub const OFFCPU_PENDING_FULL: u32 = 9;
    /// The wake-up edge map was full: a wake-up was not counted.
    pub const WAKE_MAP_FULL: u32 = 10;
    /// Number of counters.
    pub const COUNT: u32 = 11;
    /// Names used in `session.json` `lost_events`, by index.
    pub const NAMES: [&str; COUNT as usize] = [
        "cpu_samples_map_full",
        "threads_map_full",
        "syscalls_map_full",
        "offcpu_stacks_map_full",
        "block_inflight_map_full",
        "block_ringbuf_full",
        "process_ringbuf_full",
        "stack_map_full",
        "user_stack_ringbuf_full",
        "offcpu_pending_map_full",
        "wake_edges_map_full",
    ];
}

/// Indices into the `PY_OFFCPU_LOST` per-CPU counter array: why an
/// off-CPU Python sample was dropped.
pub mod py_offcpu_lost {
    /// `PY_OFFCPU` (samples waiting for their thread's switch-in) was full.
    pub const MAP_FULL: u32 = 0;
    /// The `PY_OFFCPU_EVENTS` ring buffer was full.
    pub const RINGBUF_FULL: u32 = 1;
    /// Number of counters.
    pub const COUNT: u32 = 2;
}

/// Key of a CPU-sample count or an off-CPU time: one thread in one stack.
/// Stack ids are negative when no stack was taken (e.g. no kernel stack for
/// a sample taken in user mode).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackKey {
    pub tgid: u32,
    pub tid: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
}
const _: () = assert!(core::mem::size_of::<StackKey>() == 16);

/// Per-thread accumulator, keyed by tid.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadAcc {
    pub tgid: u32,
    pub tid: u32,
    /// Time on a CPU, accounted at each switch-out.
    pub on_cpu_ns: u64,
    /// Off-CPU time by the state the thread left the CPU in:
    /// `[runnable, sleeping, uninterruptible, other]`.
    pub off_cpu_ns: [u64; 4],
    /// Pages this thread added to the page cache outside write-family
    /// syscalls: read misses (read syscalls, readahead, page faults).
    pub page_cache_pages: u64,
    /// Pages this thread added to the page cache inside a write-family
    /// syscall: new pages of buffered writes, which no device supplied.
    pub page_cache_write_pages: u64,
    /// Last `comm` seen at a switch-out.
    pub comm: [u8; COMM_LEN],
}
const _: () = assert!(core::mem::size_of::<ThreadAcc>() == 80);

/// Off-CPU state indices in `ThreadAcc::off_cpu_ns`.
pub mod offcpu_state {
    pub const RUNNABLE: usize = 0;
    pub const SLEEPING: usize = 1;
    pub const UNINTERRUPTIBLE: usize = 2;
    pub const OTHER: usize = 3;
    /// The index bits of `OffCpuStart::state` (below the flag bits).
    pub const INDEX_MASK: u32 = 3;
    /// Bit of `OffCpuStart::state` (above the index): the thread left the
    /// CPU inside a syscall of a DWARF-unwound process, its stack is taken
    /// at the syscall's exit (`FLAG_OFFCPU_DWARF`).
    pub const AT_SYSCALL_EXIT: u32 = 0x100;
    /// Bit of `OffCpuStart::state`: the blocked interval was already ended
    /// by a wake-up (at `OffCpuStart::woken_ts`) and counted on its edge
    /// (`sched_waking`).
    pub const WOKEN: u32 = 0x200;

    /// Maps `sched_switch`'s `prev_state` (TASK_REPORT bits; 0x100 means
    /// preempted) to an index.
    pub const fn from_prev_state(prev_state: i64) -> usize {
        match prev_state {
            0 | 0x100 => RUNNABLE,
            1 => SLEEPING,
            2 => UNINTERRUPTIBLE,
            _ => OTHER,
        }
    }
}

/// Key of the per-thread per-syscall statistics.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SyscallKey {
    pub tgid: u32,
    pub tid: u32,
    /// Syscall number (x86_64).
    pub nr: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<SyscallKey>() == 16);

/// Per-thread per-syscall statistics.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallAcc {
    pub count: u64,
    /// Calls that returned a negative errno.
    pub errors: u64,
    /// Sum of enter→exit latencies (0 without `FLAG_SYSCALL_LATENCY`).
    pub total_ns: u64,
    /// Bytes returned by read-family and write-family calls.
    pub bytes: u64,
    /// log2 latency histogram (ns).
    pub latency_log2_ns: [u64; LOG2_BUCKETS],
}
const _: () = assert!(core::mem::size_of::<SyscallAcc>() == 32 + 8 * LOG2_BUCKETS);

impl SyscallAcc {
    pub const ZERO: SyscallAcc = SyscallAcc {
        count: 0,
        errors: 0,
        total_ns: 0,
        bytes: 0,
        latency_log2_ns: [0; LOG2_BUCKETS],
    };
}

impl Default for SyscallAcc {
    fn default() -> Self {
        Self::ZERO
    }
}

/// Syscall statistics live in arrays, not a hash map, so `sys_exit` does no
/// hashing: a thread claims thread slot `tid % SYSCALL_THREAD_SLOTS` on its
/// first syscall (an atomic insert into a small hash map: the BPF target has
/// no compare-and-swap), then (slot, nr) → entry of the slot's own region
/// of `SYSCALL_SLOT_ENTRIES` statistics, handed out by a counter only that
/// thread writes. Threads whose slot is taken, and a thread's calls beyond
/// its region, go to the hash map `SYSCALLS`, so counts stay exact.
pub const SYSCALL_THREAD_SLOTS: u32 = 2048;
/// Distinct syscalls per thread slot before falling back to the hash map.
pub const SYSCALL_SLOT_ENTRIES: u32 = 32;
/// Syscall numbers below this get an array entry (x86_64 has ~460).
pub const SYSCALL_NR_SLOTS: u32 = 512;

/// Per-tid syscall timing, read (and reset) at `sys_exit`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallStart {
    /// `FLAG_SYSCALL_LATENCY`: `bpf_ktime_get_ns` at entry; 0 = no syscall
    /// in progress.
    pub ts: u64,
    /// `FLAG_SYSCALL_LATENCY`: the syscall number seen at entry.
    pub nr: u64,
    /// `FLAG_SYSCALL_BLOCKED_TIME`: time switched out inside the current
    /// syscall so far (added at each switch-in).
    pub blocked_ns: u64,
}
const _: () = assert!(core::mem::size_of::<SyscallStart>() == 24);

/// Per-tid slot written when a traced thread leaves the CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffCpuStart {
    /// Switch-out time; 0 = on a CPU (or never seen).
    pub ts: u64,
    pub tgid: u32,
    /// `offcpu_state` index.
    pub state: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
    /// When `sched_waking` ended the blocked interval (with
    /// `offcpu_state::WOKEN`); the time from then to the switch-in is a
    /// wait for a CPU, accounted as runnable.
    pub woken_ts: u64,
    /// The syscall the thread was inside when it left the CPU (from its
    /// saved user registers' `orig_ax`), `NO_SYSCALL` outside one.
    pub syscall: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<OffCpuStart>() == 40);

/// `OffCpuStart::syscall` of a thread not inside a syscall.
pub const NO_SYSCALL: u32 = u32::MAX;

impl OffCpuStart {
    /// The blocked interval that ends at switch-in `now`, split at its
    /// wake-up: (blocked until woken, then waiting for a CPU). Not woken
    /// (preempted, or woken by nothing traced), or a wake time outside the
    /// interval: all of it is blocked time.
    #[inline(always)]
    pub fn split_at_wake(&self, now: u64) -> (u64, u64) {
        match self.woken_at(now) {
            Some(woken) => (woken - self.ts, now - woken),
            None => (now.saturating_sub(self.ts), 0),
        }
    }

    /// The wake-up inside the interval that ends at `now`: `None` when not
    /// woken (preempted, or woken by nothing traced) or woken outside it.
    #[inline(always)]
    pub fn woken_at(&self, now: u64) -> Option<u64> {
        (self.state & offcpu_state::WOKEN != 0 && self.woken_ts > self.ts && self.woken_ts <= now)
            .then_some(self.woken_ts)
    }
}

/// Off-CPU time of a thread inside a syscall, waiting for the syscall's
/// exit to have its user stack copied (`FLAG_OFFCPU_DWARF`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffCpuPending {
    /// Sum of the taken intervals' weights (ns).
    pub weight_ns: u64,
    /// The largest taken interval's weight: its stacks and state are kept.
    pub largest_ns: u64,
    pub tgid: u32,
    pub state: u32,
    pub user_stack: i32,
    pub kernel_stack: i32,
    pub intervals: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<OffCpuPending>() == 40);

/// Who ran the wake-up of a blocked thread (`sched_waking` fires in the
/// waker's context): a task, or an interrupt on top of whatever task was
/// running, which is then not the waker.
pub mod waker_kind {
    /// A task in process context: the current task is the waker.
    pub const TASK: u8 = 0;
    /// A hardware interrupt handler (block completions, virtio).
    pub const HARDIRQ: u8 = 1;
    /// A softirq (network receive, block completion, RCU); also when it
    /// runs in ksoftirqd.
    pub const SOFTIRQ: u8 = 2;
    /// An hrtimer callback: a timed sleep or a timeout ended.
    pub const TIMER: u8 = 3;
    /// The idle task (pid 0): an interrupt taken on an idle CPU outside
    /// the handlers above.
    pub const IDLE: u8 = 4;
}

/// Interrupt-context depth counters per CPU (`IrqContext` indices),
/// raised at the handlers' entry tracepoints and lowered at their exit.
pub mod irq_context {
    pub const HARDIRQ: usize = 0;
    pub const SOFTIRQ: usize = 1;
    pub const TIMER: usize = 2;
    pub const COUNT: usize = 3;
}

/// The interrupt contexts active on one CPU (`IRQ_CONTEXT`, per CPU): a
/// depth per `irq_context` kind and when each was last entered, so that a
/// wake-up is credited to the innermost one (a softirq run from inside an
/// hrtimer callback, or an hrtimer run from a softirq). `sched_switch`
/// clears it, since the scheduler never runs inside a handler: a handler
/// whose exit program the kernel skipped (a BPF program does not nest in
/// itself on one CPU) cannot leave a depth raised for later wake-ups.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqContext {
    pub depth: [u32; irq_context::COUNT],
    /// `seq` at each kind's last entry.
    pub entered: [u32; irq_context::COUNT],
    pub seq: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<IrqContext>() == 32);

impl IrqContext {
    /// The innermost active kind (`irq_context` index), if any.
    #[inline(always)]
    pub fn innermost(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        let mut i = 0;
        while i < irq_context::COUNT {
            if self.depth[i] > 0 {
                best = match best {
                    Some(b) if self.entered[b].wrapping_sub(self.entered[i]) < u32::MAX / 2 => {
                        Some(b)
                    }
                    _ => Some(i),
                };
            }
            i += 1;
        }
        best
    }

    /// A handler of `kind` was entered (`enter`) or left.
    #[inline(always)]
    pub fn add(&mut self, kind: usize, enter: bool) {
        if kind >= irq_context::COUNT {
            return;
        }
        if enter {
            self.seq = self.seq.wrapping_add(1);
            self.entered[kind] = self.seq;
            self.depth[kind] = self.depth[kind].saturating_add(1);
        } else {
            self.depth[kind] = self.depth[kind].saturating_sub(1);
        }
    }
}

/// `WakeKey::syscall` when the wakee was not inside a traced syscall.
pub const WAKE_NO_SYSCALL: u16 = u16::MAX;

/// A waker's stack is taken on the first wake-up of an edge and then on
/// every `WAKER_STACK_EVERY`-th one (a power of two).
pub const WAKER_STACK_EVERY: u64 = 64;

/// Key of a wake-up edge: a waker ended a blocked interval of a traced
/// wakee. Interrupt wakers (`waker_kind` other than `TASK`) have
/// `waker_tgid` 0 and `waker_tid` the CPU number, since the interrupted
/// task is not the waker.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WakeKey {
    pub waker_tgid: u32,
    pub waker_tid: u32,
    pub wakee_tgid: u32,
    pub wakee_tid: u32,
    /// The wakee's `offcpu_state` index when it blocked.
    pub wakee_state: u8,
    /// `waker_kind`.
    pub waker_kind: u8,
    /// The syscall the wakee blocked in (`WAKE_NO_SYSCALL`: none or unknown).
    pub syscall: u16,
    /// For futex waits, `futex_share::*`: whether the wakee waited for a
    /// lock, and how that is known: a glibc low-level lock's wait
    /// (FUTEX_WAIT for the value 2, "locked with waiters") or a PI lock's
    /// (`LOCK_WAIT`: a lock, whoever wakes it, which catches a holder that
    /// re-takes the lock after each release and never waits itself), or a
    /// wait on a futex word (64-byte granule) that the waker is among the
    /// last waiters of (`RING`: a lock they both contend for, or a
    /// condition variable that shares a granule with a mutex); 0 for a
    /// hand-off. Keeps the key free of addresses, so the edge count stays
    /// bounded by the thread pairs.
    pub futex_shared: u8,
    pub _pad: [u8; 3],
}
const _: () = assert!(core::mem::size_of::<WakeKey>() == 24);

/// `WakeKey::futex_shared` values.
pub mod futex_share {
    /// A hand-off (or not a futex wait).
    pub const NONE: u8 = 0;
    /// The waker waited on the same futex word lately.
    pub const RING: u8 = 1;
    /// The wakee waited for a glibc or PI lock.
    pub const LOCK_WAIT: u8 = 2;
}

/// The last distinct threads that waited on one futex word (64-byte
/// granule; `FUTEX_WAITERS`): a ring of `FUTEX_WAITER_SLOTS` tids. A lock
/// has several; a future or a hand-off's condition variable has one.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FutexWaiters {
    pub tids: [u32; FUTEX_WAITER_SLOTS],
    pub next: u32,
    pub _pad: u32,
}
const _: () = assert!(core::mem::size_of::<FutexWaiters>() == 4 * FUTEX_WAITER_SLOTS + 8);

impl Default for FutexWaiters {
    fn default() -> Self {
        FutexWaiters {
            tids: [0; FUTEX_WAITER_SLOTS],
            next: 0,
            _pad: 0,
        }
    }
}

/// Waiters remembered per futex word (a power of two), more than a loader
/// pool has threads (Python's ThreadPoolExecutor takes up to 32): the ring
/// is first in, first out, so a contender that seldom waits is pushed out
/// once as many others have waited, and its releases would look like
/// hand-offs. Waits that race on two CPUs lose a tid, added again later.
pub const FUTEX_WAITER_SLOTS: usize = 64;

/// What the wake-ups of one edge ended, summed in the kernel.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WakeAcc {
    /// Σ the wakee's blocked time, switch-out → wake-up (ns).
    pub blocked_ns: u64,
    pub count: u64,
    /// `bpf_ktime_get_ns` of the first and the last wake-up.
    pub first_ns: u64,
    pub last_ns: u64,
    /// The blocked time the first wake-up ended.
    pub first_blocked_ns: u64,
    /// The waker's stacks at a sampled wake-up (negative: none).
    pub waker_user_stack: i32,
    pub waker_kernel_stack: i32,
    /// The waker's comm at its first wake-up.
    pub waker_comm: [u8; COMM_LEN],
}
const _: () = assert!(core::mem::size_of::<WakeAcc>() == 64);

/// Key of an in-flight block request.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockKey {
    /// Kernel-internal dev_t (major << 20 | minor).
    pub dev: u32,
    pub _pad: u32,
    pub sector: u64,
}
const _: () = assert!(core::mem::size_of::<BlockKey>() == 16);

/// Who created a block request and when (`block_io_start`), until issue.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockSubmitter {
    pub tgid: u32,
    pub _pad: u32,
    /// When the request was created: after any cgroup throttle held its
    /// bios, before plugging and the I/O scheduler.
    pub created_ns: u64,
}
const _: () = assert!(core::mem::size_of::<BlockSubmitter>() == 16);

/// An in-flight block request, recorded at issue.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockInflight {
    pub issue_ns: u64,
    pub bytes: u32,
    /// tgid of the task that created the request (`block_io_start`), or of
    /// the issuing task (may be a kworker) when the creation was not seen.
    pub tgid: u32,
    /// The operation's letter (`block_op::letter`), NUL padded.
    pub rwbs: [u8; 8],
    /// Kernel-internal dev_t of the request's disk.
    pub dev: u32,
    pub _pad: u32,
    /// `BlockSubmitter::created_ns`; 0 when the creation was not seen.
    pub created_ns: u64,
}
const _: () = assert!(core::mem::size_of::<BlockInflight>() == 40);

/// A completed block request (ring buffer `BLOCK_EVENTS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockEvent {
    /// Kernel-internal dev_t (major << 20 | minor).
    pub dev: u32,
    pub bytes: u32,
    pub issue_ns: u64,
    pub complete_ns: u64,
    pub tgid: u32,
    pub error: i32,
    pub rwbs: [u8; 8],
    /// When the request was created (0: not seen); creation → issue is its
    /// time in the plug and the I/O scheduler's queue.
    pub created_ns: u64,
}
const _: () = assert!(core::mem::size_of::<BlockEvent>() == 48);

/// Process lifecycle event kinds.
pub mod proc_event {
    pub const FORK: u32 = 1;
    pub const EXEC: u32 = 2;
    pub const EXIT: u32 = 3;
}

/// A lifecycle event of a traced task (ring buffer `PROC_EVENTS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcEvent {
    /// `proc_event::*`.
    pub kind: u32,
    /// FORK: the parent's tgid; EXEC/EXIT: the task's tgid.
    pub tgid: u32,
    /// FORK: the new task's pid (a tid: threads are forks too); EXEC/EXIT: the task's tid.
    pub tid: u32,
    /// EXIT: 1 when the whole thread group is gone.
    pub group_dead: u32,
    pub ts: u64,
}
const _: () = assert!(core::mem::size_of::<ProcEvent>() == 24);

/// log2 bucket of a value, clamped to the last bucket.
#[inline(always)]
pub const fn log2_bucket(value: u64) -> usize {
    if value == 0 {
        return 0;
    }
    let b = 63 - value.leading_zeros() as usize;
    if b >= LOG2_BUCKETS {
        LOG2_BUCKETS - 1
    } else {
        b
    }
}

/// x86_64 `futex` syscall number: `sys_enter` remembers futex waits and
/// `sched_waking` tells lock contention from hand-offs by it.
pub const FUTEX_NR: u64 = 202;

/// x86_64 syscall numbers of the read family (bytes returned count as read).
pub const fn is_read_family(nr: u64) -> bool {
    matches!(nr, 0 | 17 | 19 | 295 | 327)
}

/// x86_64 syscall numbers of socket receives whose return value is a byte
/// count (recvfrom, recvmsg): a network reader's input.
pub const fn is_recv_family(nr: u64) -> bool {
    matches!(nr, 45 | 47)
}

/// x86_64 syscall numbers of the write family.
pub const fn is_write_family(nr: u64) -> bool {
    matches!(nr, 1 | 18 | 20 | 296 | 328)
}

#[cfg(feature = "user")]
mod pod {
    use super::*;
    // SAFETY (all impls below): the types are repr(C), Copy, built only from
    // integers and integer arrays with explicit padding fields, so they have
    // no uninitialised bytes and every bit pattern is valid.
    macro_rules! pod {
        ($($t:ty),*) => { $(
            // SAFETY: see the module comment above.
            unsafe impl aya::Pod for $t {}
        )* };
    }
    pod!(
        ProbeConfig,
        StackKey,
        StackFrames,
        ThreadAcc,
        SyscallKey,
        SyscallAcc,
        SyscallStart,
        OffCpuStart,
        BlockKey,
        BlockLayout,
        BlockInflight,
        BlockEvent,
        BlockSubmitter,
        ProcEvent,
        UserStackHeader,
        PyProcess,
        PyFrameRecord,
        WakeKey,
        WakeAcc,
        FutexWaiters,
        IrqContext
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log2_buckets() {
        assert_eq!(log2_bucket(0), 0);
        assert_eq!(log2_bucket(1), 0);
        assert_eq!(log2_bucket(2), 1);
        assert_eq!(log2_bucket(3), 1);
        assert_eq!(log2_bucket(1024), 10);
        assert_eq!(log2_bucket(u64::MAX), LOG2_BUCKETS - 1);
    }

    #[test]
    fn the_innermost_interrupt_context_wins() {
        let mut c = IrqContext::default();
        assert_eq!(c.innermost(), None);
        // A softirq run from inside an hrtimer callback.
        c.add(irq_context::TIMER, true);
        c.add(irq_context::SOFTIRQ, true);
        assert_eq!(c.innermost(), Some(irq_context::SOFTIRQ));
        c.add(irq_context::SOFTIRQ, false);
        assert_eq!(c.innermost(), Some(irq_context::TIMER));
        c.add(irq_context::TIMER, false);
        assert_eq!(c.innermost(), None);
        // An hrtimer run from a softirq, then a hard interrupt on top.
        c.add(irq_context::SOFTIRQ, true);
        c.add(irq_context::TIMER, true);
        assert_eq!(c.innermost(), Some(irq_context::TIMER));
        c.add(irq_context::HARDIRQ, true);
        assert_eq!(c.innermost(), Some(irq_context::HARDIRQ));
        // A skipped exit leaves no negative depth.
        c = IrqContext::default();
        c.add(irq_context::TIMER, false);
        assert_eq!(c.depth[irq_context::TIMER], 0);
        // The entry stamps wrap.
        c.seq = u32::MAX;
        c.add(irq_context::SOFTIRQ, true);
        c.add(irq_context::TIMER, true);
        assert_eq!(c.innermost(), Some(irq_context::TIMER));
    }

    #[test]
    fn prev_state_mapping() {
        assert_eq!(offcpu_state::from_prev_state(0x100), offcpu_state::RUNNABLE);
        assert_eq!(offcpu_state::from_prev_state(1), offcpu_state::SLEEPING);
        assert_eq!(
            offcpu_state::from_prev_state(2),
            offcpu_state::UNINTERRUPTIBLE
        );
        assert_eq!(offcpu_state::from_prev_state(0x80), offcpu_state::OTHER);
    }

    #[test]
    fn a_woken_interval_splits_into_blocked_and_waiting_for_a_cpu() {
        let slot = |state: u32, woken_ts: u64| OffCpuStart {
            ts: 1_000,
            tgid: 1,
            state,
            user_stack: -1,
            kernel_stack: -1,
            woken_ts,
            syscall: NO_SYSCALL,
            _pad: 0,
        };
        let sleeping = offcpu_state::SLEEPING as u32;
        let woken = sleeping | offcpu_state::WOKEN;
        // Blocked 1000 ns, then 500 ns on a run queue.
        assert_eq!(slot(woken, 2_000).split_at_wake(2_500), (1_000, 500));
        // Switched in at its wake-up: no queueing.
        assert_eq!(slot(woken, 2_500).split_at_wake(2_500), (1_500, 0));
        // Not woken (preempted, or an untraced wake path): all blocked.
        assert_eq!(slot(sleeping, 0).split_at_wake(2_500), (1_500, 0));
        // A wake time outside the interval (a stale slot) is not trusted.
        assert_eq!(slot(woken, 500).split_at_wake(2_500), (1_500, 0));
        assert_eq!(slot(woken, 3_000).split_at_wake(2_500), (1_500, 0));
        // The repair of a missed switch-in puts it at the wake-up only when
        // that lies inside the interval.
        assert_eq!(slot(woken, 2_000).woken_at(2_500), Some(2_000));
        assert_eq!(slot(woken, 2_000).woken_at(1_999), None);
        assert_eq!(slot(sleeping, 2_000).woken_at(2_500), None);
        assert_eq!(slot(woken, 1_000).woken_at(2_500), None);
    }
}
