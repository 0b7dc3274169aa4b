//! A thread's own time for its loader, from its stacks: the part of a
//! consumer's time that is neither its compute nor a wait for the data
//! side, and the part that is not training at all.
//!
//! ```text
//! oncpu-threads.folded   samples ─┐ per stack: inside the loader's batch
//! offcpu-threads.folded  µs      ─┤ API (fetching), outside training
//!                                 │ (imports, finalization, outside the
//!                                 │ loop that takes the batches), or
//!                                 │ neither (compute, or nothing known)
//!                                 └► OwnTime per thread
//! ```
//!
//! Off CPU, only the waits that no thread of the data side ends count as
//! fetching: on a device (`io_schedule`) or a socket. A wait for a loader
//! thread is a delivery, which the wake-up graph accounts.
use std::collections::{BTreeMap, BTreeSet};

use storprof_session::{load::FoldedStacks, model::ThreadSeries};

use super::{
    ThreadId,
    sites::{in_fetch, is_fetch_frame, is_import_frame, python_frame, thread_and_frames},
};
use crate::frames;

/// A thread's time by what its stacks were doing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnTime {
    /// On-CPU samples inside taking a batch (or setting up the iterator).
    pub fetch: u64,
    /// On-CPU samples outside training: under Python's import machinery
    /// (start-up), the interpreter's finalization or the process's exit
    /// (tear-down), or outside the function that takes the batches (the
    /// training loop) when the stacks show it.
    pub startup: u64,
    /// Of `startup`, the samples in the interpreter's finalization or the
    /// process's exit (tear-down).
    pub teardown: u64,
    /// All on-CPU samples.
    pub all: u64,
    /// Off-CPU µs inside taking a batch, blocked on a device.
    pub fetch_io_us: u64,
    /// Off-CPU µs inside taking a batch, receiving from a socket.
    pub fetch_net_us: u64,
    /// Off-CPU µs outside training, as `startup`.
    pub startup_off_us: u64,
}

/// Frames of the interpreter's and the process's end.
const TEARDOWN_FRAMES: &[&str] = &[
    "Py_FinalizeEx",
    "Py_Exit",
    "__run_exit_handlers",
    "do_exit_[k]",
];

/// A Python frame as (function, file without its line number).
fn python_function(frame: &str) -> Option<(&str, &str)> {
    let (name, file) = python_frame(frame)?;
    let file = match file.rsplit_once(':') {
        Some((path, line)) if line.bytes().all(|b| b.is_ascii_digit()) => path,
        _ => file,
    };
    Some((name, file))
}

/// The Python function that called the loader in a fetching stack
/// (frames outermost first): the training loop.
fn loop_function<'a>(frames: &[&'a str]) -> Option<(&'a str, &'a str)> {
    let at = frames.iter().position(|f| is_fetch_frame(f))?;
    frames[..at].iter().rev().find_map(|f| python_function(f))
}

/// One folded stack of a thread, sorted.
struct Stack<'a> {
    id: ThreadId,
    frames: Vec<&'a str>,
    /// Samples (on CPU) or µs (off CPU).
    n: u64,
    fetch: bool,
}

fn stacks(folded: &FoldedStacks) -> Vec<Stack<'_>> {
    folded
        .stacks
        .iter()
        .filter_map(|(stack, n)| {
            let (id, frames) = thread_and_frames(stack)?;
            let frames: Vec<&str> = frames.collect();
            let fetch = in_fetch(frames.iter().copied());
            Some(Stack {
                id,
                frames,
                n: *n,
                fetch,
            })
        })
        .collect()
}

fn is_teardown(stack: &Stack) -> bool {
    stack.frames.iter().any(|f| TEARDOWN_FRAMES.contains(f))
}

/// Whether a stack is outside training: start-up or tear-down wherever it
/// runs (lazy imports inside the loop too), or a Python stack outside
/// every loop function of its thread. A stack without Python frames tells
/// nothing of the loop.
fn outside_training(stack: &Stack, loops: &BTreeMap<ThreadId, BTreeSet<(&str, &str)>>) -> bool {
    if is_teardown(stack) || stack.frames.iter().any(|f| is_import_frame(f)) {
        return true;
    }
    let Some(functions) = loops.get(&stack.id) else {
        return false;
    };
    let mut python = stack.frames.iter().filter_map(|f| python_function(f));
    let mut any = false;
    for pf in python.by_ref() {
        if functions.contains(&pf) {
            return false;
        }
        any = true;
    }
    any
}

/// Per thread, its samples and blocked time inside taking a batch (or
/// setting up its iterator), outside training, and all its samples: a
/// consumer's time for its loader (unpickling a batch, starting workers,
/// or loading the samples itself) is not its compute.
pub fn own_time(oncpu: &FoldedStacks, offcpu: &FoldedStacks) -> BTreeMap<ThreadId, OwnTime> {
    let on = stacks(oncpu);
    let off = stacks(offcpu);
    let mut loops: BTreeMap<ThreadId, BTreeSet<(&str, &str)>> = BTreeMap::new();
    for s in on.iter().chain(&off).filter(|s| s.fetch) {
        if let Some(function) = loop_function(&s.frames) {
            loops.entry(s.id).or_default().insert(function);
        }
    }
    let mut out: BTreeMap<ThreadId, OwnTime> = BTreeMap::new();
    for s in &on {
        let e = out.entry(s.id).or_default();
        if s.fetch {
            e.fetch += s.n;
        } else if outside_training(s, &loops) {
            e.startup += s.n;
            if is_teardown(s) {
                e.teardown += s.n;
            }
        }
        e.all += s.n;
    }
    for s in &off {
        if s.fetch {
            match frames::categorize(&s.frames) {
                frames::BLOCK_IO_WAIT => out.entry(s.id).or_default().fetch_io_us += s.n,
                frames::SOCKET_RECEIVE => out.entry(s.id).or_default().fetch_net_us += s.n,
                _ => {}
            }
        } else if outside_training(s, &loops) {
            out.entry(s.id).or_default().startup_off_us += s.n;
        }
    }
    out
}

/// A thread's time between the end of its start-up and the start of its
/// tear-down, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoopSpan {
    pub on_cpu: f64,
    pub runnable: f64,
    /// Off CPU, sleeping or in D.
    pub blocked: f64,
    /// Of `blocked`, in D.
    pub io: f64,
}

impl LoopSpan {
    pub fn total(&self) -> f64 {
        self.on_cpu + self.runnable + self.blocked
    }
}

/// The states of a thread's series after its first `startup_cpu_ns` and
/// before its last `teardown_cpu_ns` on a CPU: start-up runs before the
/// loop and tear-down after it, so they take the first and the last of
/// its CPU time (a bucket's states spread evenly over it). None when they
/// take all of it.
pub fn loop_span(
    series: &ThreadSeries,
    startup_cpu_ns: u64,
    teardown_cpu_ns: u64,
) -> Option<LoopSpan> {
    let on = &series.on_cpu_ns;
    let mut keep = vec![1.0f64; on.len()];
    let mut cut = |order: &mut dyn Iterator<Item = usize>, mut cpu: u64| {
        for i in order {
            if cpu == 0 {
                break;
            }
            let taken = cpu.min(on[i]);
            if on[i] > 0 {
                keep[i] = (keep[i] - taken as f64 / on[i] as f64).max(0.0);
            }
            cpu -= taken;
        }
        cpu
    };
    let left =
        cut(&mut (0..on.len()), startup_cpu_ns) + cut(&mut (0..on.len()).rev(), teardown_cpu_ns);
    if left > 0 {
        return None;
    }
    let sum = |v: &[u64]| -> f64 { v.iter().zip(&keep).map(|(&x, &k)| x as f64 * k).sum() };
    let io = sum(&series.blocked_io_ns);
    let span = LoopSpan {
        on_cpu: sum(on),
        runnable: sum(&series.runnable_ns),
        blocked: sum(&series.sleeping_ns) + io,
        io,
    };
    (span.total() > 0.0).then_some(span)
}

#[cfg(test)]
mod tests;
