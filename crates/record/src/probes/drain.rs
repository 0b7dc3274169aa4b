//! Draining the probes' ring buffers: process events, user-stack samples
//! of the DWARF mode, Python off-CPU samples and block completions; and
//! registering processes for DWARF unwinding and Python frames.
use super::*;

/// One user-stack sample of the DWARF mode: header, Python frames and
/// stack window.
#[derive(Clone, Debug)]
pub struct UserStackEvent {
    pub header: UserStackHeader,
    /// Python frames the probe read (innermost first; empty when the
    /// process has no registered interpreter).
    pub python: Vec<PyFrameRecord>,
    /// `stack[i]` is the byte at `header.sp + i`.
    pub stack: Vec<u8>,
}

impl ProbeSet {
    /// Hands every pending process event to `f`.
    pub fn drain_proc_events(&mut self, mut f: impl FnMut(ProcEvent)) {
        if let Some(ring) = self.proc_events.as_mut() {
            while let Some(item) = ring.next() {
                if let Some(event) = read_pod::<ProcEvent>(&item) {
                    f(event);
                }
            }
        }
    }

    /// Hands every pending user-stack sample (DWARF mode) to `f`.
    pub fn drain_user_stacks(&mut self, mut f: impl FnMut(UserStackEvent)) {
        if let Some(ring) = self.stack_events.as_mut() {
            while let Some(item) = ring.next() {
                if let Some(event) = parse_user_stack_event(&item) {
                    f(event);
                }
            }
        }
    }

    /// Hands every pending off-CPU interval of a Python thread to `f`.
    pub fn drain_python_offcpu(&mut self, mut f: impl FnMut(PyOffCpuSample)) {
        if let Some(ring) = self.py_offcpu_events.as_mut() {
            while let Some(item) = ring.next() {
                if let Some(sample) = read_pod::<PyOffCpuSample>(&item) {
                    f(sample);
                }
            }
        }
    }

    /// Off-CPU Python intervals lost: (map full, ring buffer full).
    pub fn python_offcpu_lost(&self) -> (u64, u64) {
        let Some(map) = self.ebpf.map("PY_OFFCPU_LOST") else {
            return (0, 0);
        };
        let Ok(array) = PerCpuArray::<_, u64>::try_from(map) else {
            return (0, 0);
        };
        let sum = |i: u32| array.get(&i, 0).map_or(0, |v| v.iter().sum());
        (
            sum(py_offcpu_lost::MAP_FULL),
            sum(py_offcpu_lost::RINGBUF_FULL),
        )
    }

    /// Registers the CPython interpreter of `tgid` for the probe's Python
    /// frame walk (forked children inherit it in the kernel).
    pub fn register_python(&mut self, tgid: u32, py: &PyProcess) -> Result<(), ProbeError> {
        let mut entry = *py;
        if let Some((dev, ino)) = foreign_pid_namespace(tgid) {
            entry.pidns_dev = dev;
            entry.pidns_ino = ino;
        }
        if entry.tstate_mode == py_tstate::BY_PTHREAD && !self.task_fsbase_known()? {
            // Without the task layout only the GIL holder can be found.
            entry.tstate_mode = py_tstate::GIL_HOLDER;
        }
        let mut procs: HashMap<&mut MapData, u32, PyProcess> = self.hash_mut("PY_PROCS")?;
        procs
            .insert(tgid, entry, 0)
            .map_err(|source| ProbeError::Map {
                name: "PY_PROCS",
                source,
            })
    }

    /// Looks up `task_struct.thread.fsbase` once (BTF) and writes it to
    /// the probe config; false when the kernel's BTF does not tell.
    fn task_fsbase_known(&mut self) -> Result<bool, ProbeError> {
        if self.task_fsbase.is_none() {
            let found = btf::task_fsbase_offset();
            match &found {
                Ok(offset) => log::debug!("btf: task_struct.thread.fsbase at {offset}"),
                Err(err) => {
                    log::warn!("python 3.10: threads are matched by the GIL holder only ({err})")
                }
            }
            self.task_fsbase = Some(found);
            self.write_current_config()?;
        }
        Ok(matches!(self.task_fsbase, Some(Ok(_))))
    }

    /// Marks `tgid` for stack windows under
    /// [`ProbeOptions::unwind_per_process`]; forked children inherit the
    /// mark in the kernel, exec and exit clear it.
    pub fn set_dwarf(&mut self, tgid: u32) -> Result<(), ProbeError> {
        let mut procs: HashMap<&mut MapData, u32, u8> = self.hash_mut("DWARF_PROCS")?;
        procs
            .insert(tgid, 1u8, 0)
            .map_err(|source| ProbeError::Map {
                name: "DWARF_PROCS",
                source,
            })
    }

    /// True when the kernel holds an interpreter entry for `tgid` (set by
    /// [`Self::register_python`] or copied at fork).
    pub fn python_registered(&self, tgid: u32) -> bool {
        self.hash::<u32, PyProcess>("PY_PROCS")
            .is_ok_and(|procs| procs.get(&tgid, 0).is_ok())
    }

    /// Hands every pending completed block request to `f`.
    pub fn drain_block_events(&mut self, mut f: impl FnMut(BlockEvent)) {
        if let Some(ring) = self.block_events.as_mut() {
            while let Some(item) = ring.next() {
                if let Some(event) = read_pod::<BlockEvent>(&item) {
                    f(event);
                }
            }
        }
    }
}

/// Splits one `STACK_EVENTS` record: header, Python frame area, stack window.
pub fn parse_user_stack_event(item: &[u8]) -> Option<UserStackEvent> {
    let header = read_pod::<UserStackHeader>(item)?;
    let header_len = std::mem::size_of::<UserStackHeader>();
    let frame_len = std::mem::size_of::<PyFrameRecord>();
    let frames = (header.py_frames as usize).min(MAX_PY_FRAMES);
    let python = (0..frames)
        .filter_map(|i| {
            let at = header_len + i * frame_len;
            read_pod::<PyFrameRecord>(item.get(at..at + frame_len)?)
        })
        .collect();
    let end = USER_STACK_PREFIX
        .saturating_add(header.len as usize)
        .min(item.len());
    let stack = item
        .get(USER_STACK_PREFIX.min(end)..end)
        .unwrap_or_default()
        .to_vec();
    Some(UserStackEvent {
        header,
        python,
        stack,
    })
}

fn read_pod<T: Copy>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < std::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: the length is checked above; T is one of the repr(C) integer-only
    // event types from storprof-common, valid for every bit pattern.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}
