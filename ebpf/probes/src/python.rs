//! CPython frame walking: finds the sampled thread's `PyThreadState` in a
//! registered interpreter (`PY_PROCS`) and reads its frames, innermost
//! first, with the struct offsets user space computed for its version.
use storprof_common::{
    MAX_PY_FRAMES, MAX_PY_THREADS, PY_NO_OFFSET, PY_WINDOW_WORDS, PyFrameRecord, PyProcess,
    py_status, py_tstate,
};

use aya_ebpf::cty::c_void;

use crate::{
    kernel::bounded_loop,
    maps::{CONFIG, PY_FRAME_WINDOW, PY_PROCS},
};

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
    let tstate = read_user::<u64>(interp + py.interp_tstate_head as u64)?;
    // What the thread state holds for this thread: its pthread_t (the FS
    // base) in BY_PTHREAD mode, else its id in its own pid namespace.
    let (wanted, field) = if py.tstate_mode == py_tstate::BY_PTHREAD {
        (current_fsbase()?, py.tstate_pthread)
    } else {
        (native_tid(py, tid)? as u64, py.tstate_native_tid)
    };
    let mut search = ThreadSearch {
        tstate,
        wanted,
        field: u64::from(field),
        next: u64::from(py.tstate_next),
        outcome: ThreadSearch::NOT_FOUND,
    };
    bounded_loop(MAX_PY_THREADS, next_thread_state, &mut search);
    match search.outcome {
        ThreadSearch::FOUND => Some(search.tstate),
        ThreadSearch::READ_FAILED => None,
        _ => Some(0),
    }
}

/// A walk of an interpreter's thread-state list for the state whose
/// `field` holds `wanted`, a step at a time (`bounded_loop`).
#[repr(C)]
struct ThreadSearch {
    /// The state the next step looks at (0: the list's end).
    tstate: u64,
    wanted: u64,
    field: u64,
    /// Offset of `PyThreadState.next`.
    next: u64,
    outcome: u64,
}

impl ThreadSearch {
    const NOT_FOUND: u64 = 0;
    const FOUND: u64 = 1;
    const READ_FAILED: u64 = 2;
}

/// `bpf_loop` callback: one step of the `ThreadSearch` at `ctx`.
extern "C" fn next_thread_state(_index: u64, ctx: *mut c_void) -> i64 {
    let search = ctx.cast::<ThreadSearch>();
    // SAFETY: `ctx` is the caller's `ThreadSearch`.
    unsafe {
        let tstate = (*search).tstate;
        if tstate == 0 {
            return 1;
        }
        let Some(value) = read_user::<u64>(tstate + (*search).field) else {
            (*search).outcome = ThreadSearch::READ_FAILED;
            return 1;
        };
        if value == (*search).wanted {
            (*search).outcome = ThreadSearch::FOUND;
            return 1;
        }
        match read_user::<u64>(tstate + (*search).next) {
            Some(next) => (*search).tstate = next,
            None => {
                (*search).outcome = ThreadSearch::READ_FAILED;
                return 1;
            }
        }
    }
    0
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
/// `out`, reading each frame through `PY_FRAME_WINDOW[buf_slot]`
/// (`STACK_BUF_SAMPLE` from CPU samples, else `STACK_BUF_TRACE`). Returns
/// (frames written, `py_status`).
#[inline(always)]
pub(crate) fn python_frames(
    tgid: u32,
    tid: u32,
    out: &mut [PyFrameRecord; MAX_PY_FRAMES],
    buf_slot: u32,
) -> (u16, u16) {
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
    let mut walk = FrameWalk {
        frame,
        out: core::ptr::from_mut(out),
        window: FrameWindow::of(&py, buf_slot),
        count: 0,
        status: FrameWalk::WALKING,
    };
    bounded_loop(MAX_PY_FRAMES as u32, read_frame, &mut walk);
    let status = match walk.status {
        FrameWalk::WALKING if walk.frame == 0 => py_status::OK,
        FrameWalk::WALKING => py_status::TRUNCATED,
        done => done,
    };
    (walk.count, status)
}

/// A walk of a thread's Python frames, innermost first, into `out`, a
/// frame at a time (`bounded_loop`).
#[repr(C)]
struct FrameWalk {
    /// The frame the next step reads (0: the outermost was read).
    frame: u64,
    out: *mut [PyFrameRecord; MAX_PY_FRAMES],
    /// Where the frame's fields lie in one read of it.
    window: FrameWindow,
    count: u16,
    /// `WALKING`, or the `py_status` the walk ended with.
    status: u16,
}

impl FrameWalk {
    const WALKING: u16 = u16::MAX;
}

/// `bpf_loop` callback: reads frame `index` of the `FrameWalk` at `ctx`.
extern "C" fn read_frame(index: u64, ctx: *mut c_void) -> i64 {
    let walk = ctx.cast::<FrameWalk>();
    let i = index as usize;
    if i >= MAX_PY_FRAMES {
        return 1;
    }
    // SAFETY: `ctx` is the caller's `FrameWalk`, whose `out` is this CPU's
    // scratch value; `i` is in bounds.
    unsafe {
        let frame = (*walk).frame;
        if frame == 0 {
            (*walk).status = py_status::OK;
            return 1;
        }
        let Some(fields) = (*walk).window.read(frame) else {
            (*walk).status = py_status::READ_FAILED;
            return 1;
        };
        (*(*walk).out)[i] = PyFrameRecord::new(fields.code, fields.instr, fields.flag);
        (*walk).count = i as u16 + 1;
        (*walk).frame = fields.previous;
    }
    0
}

/// The fields of one frame the walk records.
struct FrameFields {
    code: u64,
    instr: u64,
    flag: u8,
    previous: u64,
}

/// Where a frame's fields lie in one read of it (a read costs about the
/// same for 8 bytes or 80, and a frame has four fields to read): the read
/// spans `len` bytes from `base` into `buf`; the 8-byte fields are at word
/// indexes, the flag at a byte index. User space registers only offsets
/// that fit (`PyProcess::frame_window`).
#[repr(C)]
#[derive(Clone, Copy)]
struct FrameWindow {
    buf: *mut [u64; PY_WINDOW_WORDS],
    base: u32,
    len: u32,
    code: u32,
    instr: u32,
    previous: u32,
    /// Byte index of the flag (`PY_NO_OFFSET`: no flag).
    flag: u32,
}

impl FrameWindow {
    /// The window of `py`'s frames, read into `PY_FRAME_WINDOW[buf_slot]`
    /// (`len` 0 when the offsets do not fit one: every read then fails).
    #[inline(always)]
    fn of(py: &PyProcess, buf_slot: u32) -> Self {
        let buf = PY_FRAME_WINDOW
            .get_ptr_mut(buf_slot)
            .unwrap_or(core::ptr::null_mut());
        let (base, len) = py.frame_window().unwrap_or((0, 0));
        let flag = if py.frame_flag == PY_NO_OFFSET {
            PY_NO_OFFSET
        } else {
            py.frame_flag.wrapping_sub(base)
        };
        Self {
            buf,
            base,
            len,
            code: py.frame_code.wrapping_sub(base) / 8,
            instr: py.frame_instr.wrapping_sub(base) / 8,
            previous: py.frame_previous.wrapping_sub(base) / 8,
            flag,
        }
    }

    /// The fields of the frame at `frame` in one read (None: the read
    /// faulted, or there is no window).
    #[inline(always)]
    fn read(&self, frame: u64) -> Option<FrameFields> {
        let len = self.len as usize;
        if len == 0 || len > PY_WINDOW_WORDS * 8 || self.buf.is_null() {
            return None;
        }
        // SAFETY: `buf` is this CPU's value of `PY_FRAME_WINDOW` for this
        // context, and `len` fits it.
        let words = unsafe {
            let rc = aya_ebpf::helpers::generated::bpf_probe_read_user(
                self.buf.cast(),
                len as u32,
                (frame + u64::from(self.base)) as *const c_void,
            );
            if rc != 0 {
                return None;
            }
            &*self.buf
        };
        let word = |index: u32| words[index as usize % PY_WINDOW_WORDS];
        let flag = if self.flag == PY_NO_OFFSET {
            0
        } else {
            (word(self.flag / 8) >> ((self.flag % 8) * 8)) as u8
        };
        Some(FrameFields {
            code: word(self.code),
            instr: word(self.instr),
            flag,
            previous: word(self.previous),
        })
    }
}
