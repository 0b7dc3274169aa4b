//! CPython interpreters the probes walk: a process's offsets and the
//! frames a sample records.
use crate::*;

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
/// Most 8-byte words of a frame the probe reads at once
/// ([`PyProcess::frame_window`]).
pub const PY_WINDOW_WORDS: usize = 16;

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

impl PyProcess {
    /// The bytes of a frame that hold its four fields, (start, length),
    /// read by the probe at once: None unless the code, instruction and
    /// previous-frame offsets are set and 8-byte aligned from the lowest
    /// field, and all fit [`PY_WINDOW_WORDS`] words.
    pub fn frame_window(&self) -> Option<(u32, u32)> {
        let words = [self.frame_code, self.frame_instr, self.frame_previous];
        let mut base = words[0].min(words[1]).min(words[2]);
        let mut end = 0;
        if self.frame_flag != PY_NO_OFFSET {
            base = base.min(self.frame_flag);
            end = self.frame_flag.checked_add(1)?;
        }
        for offset in words {
            if offset == PY_NO_OFFSET || !(offset - base).is_multiple_of(8) {
                return None;
            }
            end = end.max(offset + 8);
        }
        let len = end - base;
        (len <= (PY_WINDOW_WORDS * 8) as u32).then_some((base, len))
    }
}

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
    /// When the frames were walked, for a runnable interval (its frames
    /// stand for the thread's next runnable intervals for a while); 0 for
    /// other states.
    pub walked_ns: u64,
    /// `offcpu_state` index.
    pub state: u32,
    pub py_frames: u16,
    pub py_status: u16,
    pub py: [PyFrameRecord; MAX_PY_FRAMES],
}
const _: () = assert!(
    core::mem::size_of::<PyOffCpuSample>()
        == 48 + MAX_PY_FRAMES * core::mem::size_of::<PyFrameRecord>()
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
