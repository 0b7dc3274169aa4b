//! CPython frame walking: finds the sampled thread's `PyThreadState` in a
//! registered interpreter (`PY_PROCS`) and reads its frames, innermost
//! first, with the struct offsets user space computed for its version.
use storprof_common::{
    MAX_PY_FRAMES, MAX_PY_THREADS, PY_NO_OFFSET, PyFrameRecord, PyProcess, py_status, py_tstate,
};

use crate::maps::{CONFIG, PY_PROCS};

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
    let mut tstate = read_user::<u64>(interp + py.interp_tstate_head as u64)?;
    // What the thread state holds for this thread: its pthread_t (the FS
    // base) in BY_PTHREAD mode, else its id in its own pid namespace.
    let (wanted, field) = if py.tstate_mode == py_tstate::BY_PTHREAD {
        (current_fsbase()?, py.tstate_pthread)
    } else {
        (native_tid(py, tid)? as u64, py.tstate_native_tid)
    };
    for _ in 0..MAX_PY_THREADS {
        if tstate == 0 {
            break;
        }
        let value = read_user::<u64>(tstate + field as u64)?;
        if value == wanted {
            return Some(tstate);
        }
        tstate = read_user::<u64>(tstate + py.tstate_next as u64)?;
    }
    Some(0)
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
/// `out`. Returns (frames written, `py_status`).
#[inline(always)]
pub(crate) fn python_frames(
    tgid: u32,
    tid: u32,
    out: &mut [PyFrameRecord; MAX_PY_FRAMES],
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
    let mut count: u16 = 0;
    for slot in out.iter_mut() {
        if frame == 0 {
            return (count, py_status::OK);
        }
        let (Some(code), Some(instr)) = (
            read_user::<u64>(frame + py.frame_code as u64),
            read_user::<u64>(frame + py.frame_instr as u64),
        ) else {
            return (count, py_status::READ_FAILED);
        };
        let flag = if py.frame_flag == PY_NO_OFFSET {
            0
        } else {
            read_user::<u8>(frame + py.frame_flag as u64).unwrap_or(0)
        };
        *slot = PyFrameRecord::new(code, instr, flag);
        count += 1;
        frame = match read_user::<u64>(frame + py.frame_previous as u64) {
            Some(f) => f,
            None => return (count, py_status::READ_FAILED),
        };
    }
    if frame == 0 {
        (count, py_status::OK)
    } else {
        (count, py_status::TRUNCATED)
    }
}
