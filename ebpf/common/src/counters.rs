//! Why events were dropped: the indices of the per-CPU counters.

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
    /// Every stack slot was taken, or the kernel had no memory for one: a
    /// new stack was not stored.
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
