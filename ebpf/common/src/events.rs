//! Ring-buffer events: completed block requests and process lifecycle.

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
