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
/// replaced by the Python frames it was running. Perf-map trampolines of
/// `-X perf` (3.12+, `py::function:file`) say the same as the spliced
/// frames and are dropped then; without Python frames (an unsupported
/// version) they are what names the Python code, and stay.
pub fn splice_python(native: Vec<String>, python: &PythonFrames) -> Vec<String> {
    if python.is_empty() {
        return native;
    }
    let native: Vec<String> = native
        .into_iter()
        .filter(|frame| !frame.starts_with(PERF_MAP_PYTHON_PREFIX))
        .collect();
    let groups = decode::group_by_eval_call(python);
    decode::splice(&native, &groups)
}

/// Prefix of CPython's perf-map entries (`-X perf`).
const PERF_MAP_PYTHON_PREFIX: &str = "py::";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_map_trampolines_give_way_to_spliced_frames() {
        let native: Vec<String> = [
            "leaf_c",
            "_PyEval_EvalFrameDefault",
            "py::f:/x.py",
            "_PyEval_EvalFrameDefault",
            "py::main:/x.py",
            "main",
        ]
        .map(String::from)
        .to_vec();
        let python: PythonFrames = vec![
            ("f (/x.py:3)".to_string(), FrameRole::Entry),
            ("main (/x.py:9)".to_string(), FrameRole::Entry),
        ];
        assert_eq!(
            splice_python(native.clone(), &python),
            ["leaf_c", "f (/x.py:3)", "main (/x.py:9)", "main"]
        );
        assert_eq!(splice_python(native.clone(), &Vec::new()), native);
    }
}
