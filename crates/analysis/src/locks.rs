//! Where the loaders wait for a lock: from their off-CPU stacks, the code
//! that took the lock (the caller of the lock's acquire), so that a
//! lock-contention verdict can name it.
//!
//! ```text
//! off-CPU stacks (per thread) ──keep the loaders'──► stacks through a
//!   lock's acquire (not a queue's or a condition's wait)
//!   ──caller of the outermost acquire, past the interpreter's plumbing──►
//!   ns per site ──► the site with the most, and its share
//! ```
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use storprof_session::load::FoldedStacks;

use crate::frames::python_function;

/// Frames that take a lock and wait for it when it is held: CPython's
/// `threading.Lock` / `RLock`, glibc's mutexes and rwlocks, C++'s and
/// Rust's mutexes. A queue's `get` and a condition variable wait for
/// data, not for a holder, and are not here.
const ACQUIRE_FRAMES: &[&str] = &[
    "lock_PyThread_acquire_lock",
    "rlock_acquire",
    "pthread_mutex_lock",
    "__pthread_mutex_lock",
    "___pthread_mutex_lock",
    "__lll_lock_wait",
    "pthread_rwlock_rdlock",
    "pthread_rwlock_wrlock",
    "pthread_spin_lock",
    "std::mutex::lock",
    "std::sys::sync::mutex::futex::Mutex::lock_contended",
];

/// Python code that waits on a lock for an event, not for a holder: a
/// condition's waiter lock, a thread's end, a semaphore's count.
const EVENT_WAITS: &[&str] = &[
    "Condition.wait",
    "Condition.wait_for",
    "Event.wait",
    "Semaphore.acquire",
    "BoundedSemaphore.acquire",
    "Barrier.wait",
    "Thread.join",
    "Thread._wait_for_tstate_lock",
    "Queue.get",
    "Queue.put",
    "Future.result",
];

/// True for a Python frame of [`EVENT_WAITS`].
fn is_event_wait(frame: &str) -> bool {
    let function = frame.rsplit_once(" (").map_or(frame, |(f, _)| f);
    EVENT_WAITS.contains(&function)
}

/// Frames of an interpreter's or a runtime's calling machinery: never the
/// site a user would look for.
fn is_plumbing(frame: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "_Py",
        "Py",
        "cfunction_",
        "method_vectorcall",
        "call_function",
        "do_call_core",
        "slot_tp_call",
        "vectorcall",
        "[",
    ];
    PREFIXES.iter().any(|p| frame.starts_with(p))
}

/// The code where the loaders waited for a lock most.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockSite {
    /// The caller of the lock's acquire: `function (dir/file.py)` for
    /// Python code, else the native function.
    pub site: String,
    /// Its share of the loaders' off-CPU time in a lock's acquire (0..1).
    pub share: f64,
}

/// The site of `stacks` (off-CPU, per thread: `comm;[pid/tid];frames...`)
/// where the threads `keep(comm, pid, tid)` spent the most time waiting in
/// a lock's acquire; None without such a wait.
pub fn lock_site(stacks: &FoldedStacks, keep: &dyn Fn(&str, u32, u32) -> bool) -> Option<LockSite> {
    let mut by_site: BTreeMap<String, u64> = BTreeMap::new();
    for (stack, ns) in &stacks.stacks {
        let frames: Vec<&str> = stack.split(';').collect();
        let Some((comm, pid, tid)) = thread_of(&frames) else {
            continue;
        };
        if !keep(comm, pid, tid) {
            continue;
        }
        let Some(acquire) = frames.iter().position(|f| ACQUIRE_FRAMES.contains(f)) else {
            continue;
        };
        if frames[..acquire].iter().any(|f| is_event_wait(f)) {
            continue;
        }
        let site = frames[2..acquire]
            .iter()
            .rev()
            .find(|f| !is_plumbing(f))
            .map(|f| python_function(f).unwrap_or_else(|| (*f).to_string()));
        if let Some(site) = site {
            *by_site.entry(site).or_default() += ns;
        }
    }
    let total: u64 = by_site.values().sum();
    let (site, ns) = by_site.into_iter().max_by_key(|(_, ns)| *ns)?;
    (total > 0).then(|| LockSite {
        site,
        share: ns as f64 / total as f64,
    })
}

/// `comm;[pid/tid];...` → (comm, pid, tid).
fn thread_of<'a>(frames: &[&'a str]) -> Option<(&'a str, u32, u32)> {
    let (pid, tid) = storprof_session::load::thread_ids(frames.get(1)?)?;
    Some((frames.first()?, pid, tid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stacks(rows: &[(&str, u64)]) -> FoldedStacks {
        FoldedStacks {
            stacks: rows.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
        }
    }

    #[test]
    fn the_caller_of_the_outermost_acquire_is_the_site() {
        let s = stacks(&[
            // A Python Lock taken in thread_loader, twice as long as ...
            (
                "python;[1/2];pythread_wrapper;_PyEval_Vector;thread_loader (/x/tests/python/pipeline.py:220);\
                 _PyObject_MakeTpCall;cfunction_call;lock_PyThread_acquire_lock;acquire_timed;\
                 PyThread_acquire_lock_timed;[libc.so.6];futex_wait_[k]",
                600,
            ),
            // ... a C mutex taken in decode_row (through glibc's slow path).
            (
                "python;[1/3];start_thread;decode_row;pthread_mutex_lock;__lll_lock_wait;futex_wait_[k]",
                300,
            ),
            // A queue's get is a wait for data, not for a lock's holder.
            (
                "python;[1/2];_worker (/x/concurrent/futures/thread.py:81);_queue_SimpleQueue_get;\
                 PyThread_acquire_lock_timed;futex_wait_[k]",
                5000,
            ),
            // A condition's waiter lock waits for a notify, not a holder.
            (
                "python;[1/2];worker (/x/w.py:3);Condition.wait (/usr/lib/python3.11/threading.py:320);\
                 _PyEval_Vector;lock_PyThread_acquire_lock;futex_wait_[k]",
                7000,
            ),
            // Another process's threads are not the loaders.
            ("other;[9/9];main;pthread_mutex_lock;futex_wait_[k]", 9000),
        ]);
        let site = lock_site(&s, &|_, pid, _| pid == 1).unwrap();
        assert_eq!(site.site, "thread_loader (python/pipeline.py)");
        assert!((site.share - 600.0 / 900.0).abs() < 1e-9, "{site:?}");
        let native = lock_site(&s, &|_, _, tid| tid == 3).unwrap();
        assert_eq!(native.site, "decode_row");
        assert_eq!(lock_site(&s, &|_, _, _| false), None);
    }
}
