//! The recorder's Python side (DWARF mode): registers each traced
//! process's CPython interpreter with the probe as soon as it is mapped
//! (after exec, in forked children, in processes that load libpython
//! later), resolves the Python frames of each CPU sample and off-CPU
//! interval while the process is alive, and splices them into the
//! symbolized native stacks at the end.
use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;
use storprof_common::{MAX_PY_FRAMES, PyFrameRecord, StackKey};

use super::{aggregate, fold::StackFrames, recorder::Recorder};
use storprof_stacks::python::{
    Detection,
    decode::{self, FrameRole},
};

/// Resolved Python frames of one sample, innermost first.
pub type PythonFrames = Vec<(String, FrameRole)>;

/// Samples or off-CPU time of Python threads by (stack ids, Python frames):
/// CPU samples in frame-pointer mode, off-CPU intervals in DWARF mode.
#[derive(Default)]
pub struct PythonStacks {
    chains: Vec<PythonFrames>,
    chain_ids: FxHashMap<PythonFrames, usize>,
    /// (thread and its frame-pointer/kernel stack ids, chain) → samples or ns.
    times: BTreeMap<(StackKey, usize), u64>,
    intervals: u64,
}

impl PythonStacks {
    fn add(&mut self, key: StackKey, frames: PythonFrames, value: u64) {
        // Looked up before it is cloned: most intervals repeat a chain.
        let id = match self.chain_ids.get(&frames) {
            Some(&id) => id,
            None => {
                let id = self.chains.len();
                self.chain_ids.insert(frames.clone(), id);
                self.chains.push(frames);
                id
            }
        };
        *self.times.entry((key, id)).or_insert(0) += value;
        self.intervals += 1;
    }

    /// The threads with samples or time here.
    pub fn thread_count(&self) -> usize {
        self.times
            .keys()
            .map(|(key, _)| key.tid)
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// `samples` (frame-pointer CPU samples per key) less the samples held
    /// here, which are folded with their Python frames instead.
    pub fn subtract_from(&self, samples: &[(StackKey, u64)]) -> Vec<(StackKey, u64)> {
        let mut held: BTreeMap<StackKey, u64> = BTreeMap::new();
        for ((key, _), n) in &self.times {
            *held.entry(*key).or_insert(0) += n;
        }
        samples
            .iter()
            .map(|(key, n)| (*key, n.saturating_sub(held.get(key).copied().unwrap_or(0))))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

/// `samples` less `held` counts per key (keys left with 0 dropped).
pub fn subtract(samples: &[(StackKey, u64)], held: &[(StackKey, u64)]) -> Vec<(StackKey, u64)> {
    let held: BTreeMap<StackKey, u64> = held.iter().copied().collect();
    samples
        .iter()
        .map(|(key, n)| (*key, n.saturating_sub(held.get(key).copied().unwrap_or(0))))
        .filter(|(_, n)| *n > 0)
        .collect()
}

impl Recorder {
    /// Looks for an interpreter in `tgid` (once found, it stays registered).
    pub(super) fn detect_python(&mut self, tgid: u32) {
        if self.python.has_interpreter(tgid) {
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
            let version = interp.version().to_string();
            self.python_needs_dwarf(tgid, &version);
            // Children forked before the interpreter was found run it too.
            for child in self.python.children_without_interpreter(tgid) {
                self.inherit_python(child, tgid);
            }
        }
    }

    /// A forked child runs its parent's interpreter: register it too (the
    /// probe copies the entry at fork, unless the parent was registered
    /// after the fork).
    pub(super) fn inherit_python(&mut self, child: u32, parent: u32) {
        self.python.inherit(child, parent);
        if let Some(interp) = self.python.interpreter(child).cloned() {
            if !self.probes.python_registered(child)
                && let Err(err) = self.probes.register_python(child, &interp.probe)
            {
                log::warn!("python: registering pid {child}: {err}");
            }
            // Its layout and perf map (3.12+ `-X perf` makes new trampolines
            // in a forked child) are re-read often for a while.
            self.fresh.insert(child, std::time::Instant::now());
            let version = interp.version().to_string();
            self.python_needs_dwarf(child, &version);
        }
    }

    /// Drains the off-CPU intervals of Python threads and names their frames.
    pub(super) fn drain_python_offcpu(&mut self) {
        let mut samples = Vec::new();
        self.probes.drain_python_offcpu(&mut |s| samples.push(s));
        for sample in samples {
            let count = (sample.py_frames as usize).min(MAX_PY_FRAMES);
            let frames = self.python.resolve_frames(sample.tgid, &sample.py[..count]);
            if frames.is_empty() {
                continue;
            }
            self.python_offcpu
                .add(sample.stack_key(), frames, sample.blocked_ns);
        }
    }

    /// Frame-pointer mode: a CPU sample of a Python process with its
    /// Python frames (its native stack is the frame-pointer one).
    pub(super) fn python_fp_sample(&mut self, event: crate::probes::UserStackEvent) {
        let h = event.header;
        let frames = self.resolve_python(h.tgid, h.py_status, &event.python);
        if frames.is_empty() {
            return;
        }
        self.python_fp.add(h.stack_key(), frames, 1);
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

/// Folded stacks of Python threads (values divided by `divisor`):
/// frame-pointer user frames spliced with the Python frames, then the
/// kernel frames.
pub fn fold_python_stacks(
    stacks: &PythonStacks,
    divisor: u64,
    frames: &mut dyn StackFrames,
    comm_of_key: &dyn Fn(&StackKey) -> String,
) -> String {
    // Keys whose `user_stack` indexes `entries`, for `aggregate::fold`.
    let entries: Vec<(&(StackKey, usize), &u64)> = stacks.times.iter().collect();
    let indexed: Vec<(StackKey, u64)> = entries
        .iter()
        .enumerate()
        .map(|(i, ((key, _), ns))| {
            (
                StackKey {
                    user_stack: i as i32,
                    ..*key
                },
                **ns,
            )
        })
        .collect();
    aggregate::fold(&indexed, divisor, comm_of_key, &mut |k| {
        let Some(((key, chain), _)) = usize::try_from(k.user_stack)
            .ok()
            .and_then(|i| entries.get(i))
        else {
            return Vec::new();
        };
        let user = frames.stack(key.user_stack);
        let native = frames.user_frames(key.tgid, &user);
        let python = stacks.chains.get(*chain).cloned().unwrap_or_default();
        let mut out: Vec<String> = splice_python(native, &python).into_iter().rev().collect();
        let kernel = frames.stack(key.kernel_stack);
        out.extend(frames.kernel_frames(&kernel).into_iter().rev());
        out
    })
}

/// Folded off-CPU stacks (µs) of Python threads with their Python frames,
/// and a note; `lost` is (map full, ring buffer full).
pub fn fold_python_offcpu(
    offcpu: &PythonStacks,
    (map_full, ring_full): (u64, u64),
    frames: &mut dyn StackFrames,
    comm_of_key: &dyn Fn(&StackKey) -> String,
) -> (String, Option<String>) {
    let folded = fold_python_stacks(offcpu, 1000, frames, comm_of_key);
    let note = (offcpu.intervals > 0 || map_full + ring_full > 0).then(|| {
        format!(
            "python: {} off-CPU intervals of {} Python threads with their Python frames, those shorter than the off-CPU quantum sampled (lost: {map_full} map full, {ring_full} ring buffer full)",
            offcpu.intervals,
            offcpu.thread_count()
        )
    });
    (folded, note)
}

/// Merges two folded-stack texts (same stacks summed), sorted.
pub fn merge_folded(a: &str, b: &str) -> String {
    let mut lines: BTreeMap<&str, u64> = BTreeMap::new();
    for line in a.lines().chain(b.lines()) {
        if let Some((stack, n)) = line.rsplit_once(' ')
            && let Ok(n) = n.parse::<u64>()
        {
            *lines.entry(stack).or_insert(0) += n;
        }
    }
    lines
        .into_iter()
        .map(|(stack, n)| format!("{stack} {n}\n"))
        .collect()
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

    #[test]
    fn python_samples_are_taken_out_of_the_fp_counts() {
        let key = |tid, user_stack| StackKey {
            tgid: 1,
            tid,
            user_stack,
            kernel_stack: -1,
        };
        let mut stacks = PythonStacks::default();
        let frames: PythonFrames = vec![("f (/x.py:1)".to_string(), FrameRole::Entry)];
        stacks.add(key(1, 5), frames.clone(), 1);
        stacks.add(key(1, 5), frames, 1);
        stacks.add(
            key(2, 5),
            vec![("g (/x.py:2)".to_string(), FrameRole::Entry)],
            1,
        );
        assert_eq!(stacks.chains.len(), 2);
        assert_eq!(stacks.thread_count(), 2);
        let left = stacks.subtract_from(&[(key(1, 5), 3), (key(2, 5), 1), (key(3, 7), 4)]);
        assert_eq!(left, vec![(key(1, 5), 1), (key(3, 7), 4)]);
    }

    #[test]
    fn merges_folded_texts() {
        assert_eq!(
            merge_folded("a;b 2\nc 1\n", "a;b 3\nb;x 4\n"),
            "a;b 5\nb;x 4\nc 1\n"
        );
    }
}
