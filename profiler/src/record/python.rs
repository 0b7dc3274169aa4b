//! The recorder's Python side (DWARF mode): registers each traced
//! process's CPython interpreter with the probe as soon as it is mapped
//! (after exec, in forked children, in processes that load libpython
//! later), resolves the Python frames of each sample while the process is
//! alive, and splices them into the symbolized native stack at the end.
use storprof_common::PyFrameRecord;

use super::Recorder;
use crate::python::{
    Detection,
    decode::{self, FrameRole},
};

/// Resolved Python frames of one sample, innermost first.
pub type PythonFrames = Vec<(String, FrameRole)>;

impl Recorder {
    /// Looks for an interpreter in `tgid` (once found, it stays registered).
    pub(super) fn detect_python(&mut self, tgid: u32) {
        if self.unwinder.is_none() || self.python.has_interpreter(tgid) {
            return;
        }
        let Some(layout) = self.symbolizer.layout(tgid) else {
            return;
        };
        let layout = layout.to_vec();
        if let Detection::Found(interp) = self.python.detect(tgid, &layout) {
            log::debug!(
                "python: CPython {} in pid {tgid} ({})",
                interp.version(),
                interp.path
            );
            if let Err(err) = self.probes.register_python(tgid, &interp.probe) {
                log::warn!("python: registering pid {tgid}: {err}");
            }
        }
    }

    /// A forked child runs its parent's interpreter: register it too (the
    /// probe copies the entry at fork, unless the parent was registered
    /// after the fork).
    pub(super) fn inherit_python(&mut self, child: u32, parent: u32) {
        if self.unwinder.is_none() {
            return;
        }
        self.python.inherit(child, parent);
        if let Some(interp) = self.python.interpreter(child).cloned()
            && !self.probes.python_registered(child)
            && let Err(err) = self.probes.register_python(child, &interp.probe)
        {
            log::warn!("python: registering pid {child}: {err}");
        }
    }

    /// Names the Python frames of one sample (reads the process's memory).
    pub(super) fn resolve_python(
        &mut self,
        tgid: u32,
        status: u16,
        records: &[PyFrameRecord],
    ) -> PythonFrames {
        if status == storprof_common::py_status::NONE {
            return Vec::new();
        }
        self.python.resolve(tgid, status, records)
    }
}

/// The native frames (leaf first) with each `_PyEval_EvalFrameDefault`
/// replaced by the Python frames it was running.
pub fn splice_python(native: Vec<String>, python: &PythonFrames) -> Vec<String> {
    if python.is_empty() {
        return native;
    }
    let groups = decode::group_by_eval_call(python);
    decode::splice(&native, &groups)
}
