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
//! fetching: on a device (`io_schedule`) or a network socket (a receive,
//! or a socket client's poll for readiness). A wait for a loader thread is
//! a delivery, which the wake-up graph accounts.
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
    /// Of `startup`, the samples after the loop: the interpreter's
    /// finalization, the process's exit, or the loop's caller past the
    /// call (tear-down).
    pub teardown: u64,
    /// All on-CPU samples.
    pub all: u64,
    /// Off-CPU µs inside taking a batch, blocked on a device.
    pub fetch_io_us: u64,
    /// Off-CPU µs inside taking a batch, receiving from a network socket.
    pub fetch_net_us: u64,
}

/// Python functions of a socket client waiting for its socket to be
/// ready, as (name, file): CPython polls before each receive or connect on
/// a socket with a timeout (as urllib, requests and boto3 set one). Python
/// frames only: the native `sock_call_ex` also polls for a worker's file
/// descriptors received over a Unix socket that has the default timeout,
/// a delivery.
const SOCKET_READY_FRAMES: &[(&str, &str)] = &[
    ("SocketIO.readinto", "socket.py"),
    ("create_connection", "socket.py"),
    ("SSLSocket.recv", "ssl.py"),
    ("SSLSocket.recv_into", "ssl.py"),
    ("SSLSocket.read", "ssl.py"),
];

/// Whether a poll, select or epoll wait is a socket client's wait for its
/// socket inside the loader (a multiprocessing connection's or an event
/// loop's is not).
fn waits_for_socket(frames: &[&str]) -> bool {
    let inside = frames
        .iter()
        .position(|f| is_fetch_frame(f))
        .map_or(&[][..], |at| &frames[at..]);
    inside
        .iter()
        .filter_map(|f| python_function(f))
        .any(|(name, path)| {
            SOCKET_READY_FRAMES.iter().any(|(n, file)| {
                name == *n
                    && path
                        .strip_suffix(file)
                        .is_some_and(|dir| dir.is_empty() || dir.ends_with('/'))
            })
        })
}

/// Frames of the interpreter's and the process's end.
const TEARDOWN_FRAMES: &[&str] = &[
    "Py_FinalizeEx",
    "Py_Exit",
    "__run_exit_handlers",
    "do_exit_[k]",
];

/// A Python frame as (function, file without its line number).
fn python_function(frame: &str) -> Option<Function<'_>> {
    let (name, file) = python_frame(frame)?;
    let file = match file.rsplit_once(':') {
        Some((path, line)) if line.bytes().all(|b| b.is_ascii_digit()) => path,
        _ => file,
    };
    Some((name, file))
}

/// A Python frame's line number.
fn python_line(frame: &str) -> Option<u32> {
    let (_, file) = python_frame(frame)?;
    file.rsplit_once(':')?.1.parse().ok()
}

/// Where a fetching stack's loop function was called from: its Python
/// caller and the line of the call.
fn loop_call_site<'a>(frames: &[&'a str], loop_fn: Function) -> Option<(Function<'a>, u32)> {
    let fetch_at = frames.iter().position(|f| is_fetch_frame(f))?;
    let at = frames[..fetch_at]
        .iter()
        .rposition(|f| python_function(f) == Some(loop_fn))?;
    frames[..at]
        .iter()
        .rev()
        .find_map(|f| Some((python_function(f)?, python_line(f)?)))
}

/// The line at which a fetching stack's loop function takes its batch (or
/// sets up its iterator).
fn loop_fetch_line<'a>(frames: &[&'a str], loop_fn: Function) -> Option<(Function<'a>, u32)> {
    let fetch_at = frames.iter().position(|f| is_fetch_frame(f))?;
    let frame = frames[..fetch_at]
        .iter()
        .rev()
        .find(|f| python_function(f) == Some(loop_fn))?;
    Some((python_function(frame)?, python_line(frame)?))
}

/// Whether a stack in a loop function runs there before the loop: at a
/// line above the first that takes a batch (the model built at the top of
/// the function that then iterates). Work in the loop's body above that
/// line (a `while` loop that zeroes its gradients before `next()`) would
/// be taken as start-up too; it is cheap in the loops seen.
fn before_loop(stack: &Stack, fetch_lines: &BTreeMap<Function, u32>) -> bool {
    // The innermost frame of a loop function decides (a validation loop
    // called from the training loop's body is the training loop's work).
    let Some((frame, first)) = stack.frames.iter().rev().find_map(|f| {
        let first = fetch_lines.get(&python_function(f)?)?;
        Some((f, *first))
    }) else {
        return false;
    };
    python_line(frame).is_some_and(|line| line < first)
}

/// Whether a stack outside the loop runs after it: in the loop
/// function's caller, past the line that called it (saving the model,
/// a final evaluation); else it ran before (building the model).
fn after_loop(stack: &Stack, call_sites: &BTreeMap<Function, u32>) -> bool {
    stack.frames.iter().any(|f| {
        python_function(f)
            .and_then(|pf| call_sites.get(&pf))
            .zip(python_line(f))
            .is_some_and(|(call, line)| line > *call)
    })
}

/// The Python functions that called the loader in a fetching stack
/// (frames outermost first), nearest first.
fn loader_callers<'a>(frames: &[&'a str]) -> Vec<Function<'a>> {
    let Some(at) = frames.iter().position(|f| is_fetch_frame(f)) else {
        return Vec::new();
    };
    frames[..at]
        .iter()
        .rev()
        .filter_map(|f| python_function(f))
        .collect()
}

/// The training loop among a fetching stack's callers (nearest first):
/// the nearest that holds at least half of the thread's other work (its
/// samples outside the loader, imports and tear-down), where the step
/// runs. The nearest caller is often the loop itself, but a generator
/// that wraps the loader (moving each batch to a device, Accelerate's
/// sharded loader) or a framework's batch fetcher only fetches; the step
/// is in its caller. The search stops below a caller of another loop
/// (`shared`: a train loop's and a validation loop's common caller),
/// and without a caller holding the work it is the nearest.
fn loop_function<'a>(
    callers: &[Function<'a>],
    work: &BTreeMap<Function, u64>,
    work_total: u64,
    shared: &BTreeSet<Function>,
) -> Option<Function<'a>> {
    let holds =
        |f: &(&str, &str)| work_total > 0 && 2 * work.get(f).copied().unwrap_or(0) >= work_total;
    for (i, f) in callers.iter().enumerate() {
        if i > 0 && shared.contains(f) {
            break;
        }
        if holds(f) {
            return Some(*f);
        }
    }
    callers.first().copied()
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
fn outside_training(stack: &Stack, loops: &BTreeMap<ThreadId, BTreeSet<Function>>) -> bool {
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

/// A Python function as (name, file).
type Function<'a> = (&'a str, &'a str);

/// Per thread, the samples of its work outside the loader, imports and
/// tear-down that each Python function was on the stack of (once per
/// stack), and their total.
type Work<'a> = (BTreeMap<Function<'a>, u64>, u64);

/// Per thread, its training loops: for each fetching stack, the loop
/// among its loader's callers (`loop_function`).
fn training_loops<'a>(
    on: &'a [Stack<'a>],
    fetching: &[&Stack<'a>],
) -> BTreeMap<ThreadId, BTreeSet<Function<'a>>> {
    let mut work: BTreeMap<ThreadId, Work> = BTreeMap::new();
    for s in on.iter().filter(|s| !s.fetch) {
        if is_teardown(s) || s.frames.iter().any(|f| is_import_frame(f)) {
            continue;
        }
        let functions: BTreeSet<Function> =
            s.frames.iter().filter_map(|f| python_function(f)).collect();
        if functions.is_empty() {
            continue;
        }
        let (per_function, total) = work.entry(s.id).or_default();
        *total += s.n;
        for f in functions {
            *per_function.entry(f).or_default() += s.n;
        }
    }
    let chains: Vec<(ThreadId, Vec<Function>)> = fetching
        .iter()
        .map(|s| (s.id, loader_callers(&s.frames)))
        .filter(|(_, chain)| !chain.is_empty())
        .collect();
    // Per thread and function, the nearest callers it is above.
    let mut above: BTreeMap<(ThreadId, Function), BTreeSet<Function>> = BTreeMap::new();
    for (id, chain) in &chains {
        for f in &chain[1..] {
            above.entry((*id, *f)).or_default().insert(chain[0]);
        }
    }
    let mut loops: BTreeMap<ThreadId, BTreeSet<Function>> = BTreeMap::new();
    let no_work = (BTreeMap::new(), 0);
    for (id, chain) in &chains {
        // The callers above another loop's nearest caller.
        let shared: BTreeSet<Function> = chain
            .iter()
            .filter(|f| {
                above
                    .get(&(*id, **f))
                    .is_some_and(|nearest| nearest.iter().any(|n| *n != chain[0]))
            })
            .copied()
            .collect();
        let (per_function, total) = work.get(id).unwrap_or(&no_work);
        if let Some(function) = loop_function(chain, per_function, *total, &shared) {
            loops.entry(*id).or_default().insert(function);
        }
    }
    loops
}

/// Per thread, its samples and blocked time inside taking a batch (or
/// setting up its iterator), outside training, and all its samples: a
/// consumer's time for its loader (unpickling a batch, starting workers,
/// or loading the samples itself) is not its compute.
pub fn own_time(oncpu: &FoldedStacks, offcpu: &FoldedStacks) -> BTreeMap<ThreadId, OwnTime> {
    let on = stacks(oncpu);
    let off = stacks(offcpu);
    let fetching: Vec<&Stack> = on.iter().chain(&off).filter(|s| s.fetch).collect();
    let loops = training_loops(&on, &fetching);
    // Per thread, where its loops were called from (the first call), and
    // the first line of each loop that takes a batch.
    let mut call_sites: BTreeMap<ThreadId, BTreeMap<Function, u32>> = BTreeMap::new();
    let mut fetch_lines: BTreeMap<ThreadId, BTreeMap<Function, u32>> = BTreeMap::new();
    for s in &fetching {
        for &function in loops.get(&s.id).into_iter().flatten() {
            let sites = [
                (&mut call_sites, loop_call_site(&s.frames, function)),
                (&mut fetch_lines, loop_fetch_line(&s.frames, function)),
            ];
            for (lines, site) in sites {
                if let Some((f, line)) = site {
                    let at = lines.entry(s.id).or_default().entry(f).or_insert(line);
                    *at = (*at).min(line);
                }
            }
        }
    }
    let no_sites = BTreeMap::new();
    let mut out: BTreeMap<ThreadId, OwnTime> = BTreeMap::new();
    for s in &on {
        let e = out.entry(s.id).or_default();
        let before = !s.fetch && before_loop(s, fetch_lines.get(&s.id).unwrap_or(&no_sites));
        if s.fetch {
            e.fetch += s.n;
        } else if before || outside_training(s, &loops) {
            e.startup += s.n;
            // Work above a loop's first batch is start-up even in a later
            // call of its function.
            let past = !before && after_loop(s, call_sites.get(&s.id).unwrap_or(&no_sites));
            if is_teardown(s) || past {
                e.teardown += s.n;
            }
        }
        e.all += s.n;
    }
    for s in off.iter().filter(|s| s.fetch) {
        // A Unix socket inside the loader is a worker's hand-off (PyTorch
        // passes a batch's file descriptors over one), which a traced
        // thread ends: a delivery, not the network.
        let unix = s.frames.iter().any(|f| f.starts_with("unix_"));
        match frames::categorize(&s.frames) {
            frames::BLOCK_IO_WAIT => out.entry(s.id).or_default().fetch_io_us += s.n,
            frames::SOCKET_RECEIVE if !unix => out.entry(s.id).or_default().fetch_net_us += s.n,
            frames::POLL_WAIT if !unix && waits_for_socket(&s.frames) => {
                out.entry(s.id).or_default().fetch_net_us += s.n
            }
            _ => {}
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
    // Without every state per bucket the span would be CPU alone.
    let states = [
        &series.runnable_ns,
        &series.sleeping_ns,
        &series.blocked_io_ns,
    ];
    if states.iter().any(|v| v.len() != on.len()) {
        return None;
    }
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
