//! What the probe object holds and how each program attaches: the
//! families named in `session.json`, the tracepoint fields the probes
//! read at fixed offsets, and every program with its attach point.
use super::*;

/// Probe family names as they appear in `session.json` `probes`.
pub mod family {
    pub const CPU_SAMPLES: &str = "cpu_samples";
    pub const SCHED: &str = "sched";
    pub const PROCESS: &str = "process";
    pub const SYSCALLS: &str = "syscalls";
    pub const BLOCK: &str = "block";
    /// Request creator attribution (`block_io_start`); without it block
    /// requests are attributed to the issuing task.
    pub const BLOCK_SUBMITTER: &str = "block_submitter";
    pub const PAGE_CACHE: &str = "page_cache";
    /// Python frames of off-CPU intervals (DWARF mode only).
    pub const PYTHON_OFFCPU: &str = "python_offcpu";
    /// The wake-up graph (`sched_waking`, with the interrupt-context
    /// hooks that tell interrupt wakers from tasks).
    pub const WAKEUPS: &str = "wakeups";
    /// The words futex waits sleep on (`sys_enter_futex`), which tell lock
    /// hand-offs from other futex wake-ups; without them every futex
    /// wake-up counts as unshared.
    pub const FUTEX_WAITS: &str = "futex_waits";
}

/// Tracepoint fields the probes read at fixed offsets: (category, event,
/// field, offset). Checked against the kernel's `format` files before
/// attaching, so a kernel with another layout disables the probe instead of
/// recording garbage. The offsets are the ones the probes read
/// (`storprof_common::tracepoint_offsets`), so the two cannot drift.
#[rustfmt::skip] // a table: one field per row
pub const TRACEPOINT_FIELDS: &[(&str, &str, &str, usize)] = &[
    ("sched", "sched_switch", "prev_pid", offsets::SCHED_SWITCH_PREV_PID),
    ("sched", "sched_switch", "prev_state", offsets::SCHED_SWITCH_PREV_STATE),
    ("sched", "sched_switch", "next_pid", offsets::SCHED_SWITCH_NEXT_PID),
    ("sched", "sched_process_fork", "child_pid", offsets::SCHED_PROCESS_FORK_CHILD_PID),
    ("sched", "sched_process_exit", "group_dead", offsets::SCHED_PROCESS_EXIT_GROUP_DEAD),
    ("block", "block_io_start", "dev", offsets::BLOCK_IO_START_DEV),
    ("block", "block_io_start", "sector", offsets::BLOCK_IO_START_SECTOR),
    ("filemap", "mm_filemap_add_to_page_cache", "order", offsets::FILEMAP_ADD_TO_PAGE_CACHE_ORDER),
    ("syscalls", "sys_enter_futex", "uaddr", offsets::SYS_ENTER_FUTEX_UADDR),
    ("syscalls", "sys_enter_futex", "op", offsets::SYS_ENTER_FUTEX_OP),
    ("syscalls", "sys_enter_futex", "val", offsets::SYS_ENTER_FUTEX_VAL),
];

/// One program: its name in the object, its family and where it attaches.
#[derive(Clone, Copy, Debug)]
pub enum Attach {
    PerfCpuClock,
    TracePoint(&'static str, &'static str),
    RawTracePoint(&'static str),
}

/// Every program of the object.
pub const PROGRAMS: &[(&str, &str, Attach)] = &[
    ("cpu_sample", family::CPU_SAMPLES, Attach::PerfCpuClock),
    (
        "sched_switch",
        family::SCHED,
        Attach::TracePoint("sched", "sched_switch"),
    ),
    (
        "offcpu_python",
        family::PYTHON_OFFCPU,
        Attach::TracePoint("sched", "sched_switch"),
    ),
    (
        "sched_process_fork",
        family::PROCESS,
        Attach::TracePoint("sched", "sched_process_fork"),
    ),
    (
        "sched_process_exec",
        family::PROCESS,
        Attach::TracePoint("sched", "sched_process_exec"),
    ),
    (
        "sched_process_exit",
        family::PROCESS,
        Attach::TracePoint("sched", "sched_process_exit"),
    ),
    (
        "sys_enter",
        family::SYSCALLS,
        Attach::RawTracePoint("sys_enter"),
    ),
    (
        "sys_exit",
        family::SYSCALLS,
        Attach::RawTracePoint("sys_exit"),
    ),
    (
        "sys_enter_futex",
        family::FUTEX_WAITS,
        Attach::TracePoint("syscalls", "sys_enter_futex"),
    ),
    (
        "block_io_start",
        family::BLOCK_SUBMITTER,
        Attach::TracePoint("block", "block_io_start"),
    ),
    (
        "block_rq_issue",
        family::BLOCK,
        Attach::RawTracePoint("block_rq_issue"),
    ),
    (
        "block_rq_complete",
        family::BLOCK,
        Attach::RawTracePoint("block_rq_complete"),
    ),
    (
        "filemap_add_to_page_cache",
        family::PAGE_CACHE,
        Attach::TracePoint("filemap", "mm_filemap_add_to_page_cache"),
    ),
    // The interrupt-context counters attach before the wake-up hook that
    // reads them, exits before entries: an exit seen without its entry
    // leaves a depth at 0, an entry without its exit would leave it raised.
    (
        "irq_handler_exit",
        family::WAKEUPS,
        Attach::RawTracePoint("irq_handler_exit"),
    ),
    (
        "softirq_exit",
        family::WAKEUPS,
        Attach::RawTracePoint("softirq_exit"),
    ),
    (
        "hrtimer_expire_exit",
        family::WAKEUPS,
        Attach::RawTracePoint("hrtimer_expire_exit"),
    ),
    (
        "irq_handler_entry",
        family::WAKEUPS,
        Attach::RawTracePoint("irq_handler_entry"),
    ),
    (
        "softirq_entry",
        family::WAKEUPS,
        Attach::RawTracePoint("softirq_entry"),
    ),
    (
        "hrtimer_expire_entry",
        family::WAKEUPS,
        Attach::RawTracePoint("hrtimer_expire_entry"),
    ),
    (
        "sched_waking",
        family::WAKEUPS,
        Attach::RawTracePoint("sched_waking"),
    ),
];
