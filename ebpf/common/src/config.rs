//! What user space tells the probes before the command runs: the
//! configuration, the tracepoint record offsets and `struct request`'s
//! layout.

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
