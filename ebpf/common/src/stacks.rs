//! Stored stacks and the user-stack samples a CPU sample copies.
use crate::*;

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

/// Kernel addresses `kernel_symbols` names in one run (`KSYM_REQUEST`).
pub const KSYM_BATCH: usize = 256;
/// Bytes of one name in `KsymNames`, its NUL included: longer names are
/// cut.
pub const KSYM_NAME_BYTES: usize = 128;

/// The addresses user space asks `kernel_symbols` to name (map
/// `KSYM_REQUEST`, one value).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KsymRequest {
    /// Addresses of `addrs` to name (at most `KSYM_BATCH`).
    pub count: u32,
    pub _pad: u32,
    pub addrs: [u64; KSYM_BATCH],
}
const _: () = assert!(core::mem::size_of::<KsymRequest>() == 8 + KSYM_BATCH * 8);

/// What `kernel_symbols` wrote (map `KSYM_NAMES`, one value): the kernel's
/// `%ps` of each requested address, NUL-terminated. The kernel prints a
/// module's symbol as `name [module]` and an address it does not know as
/// `0x…`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KsymNames {
    pub names: [[u8; KSYM_NAME_BYTES]; KSYM_BATCH],
}
const _: () = assert!(core::mem::size_of::<KsymNames>() == KSYM_BATCH * KSYM_NAME_BYTES);
