//! Stalls: a job that makes no progress at all, found from the end of the
//! recording (or of what a live view has seen so far).
//!
//! ```text
//! timeseries (read-syscall bytes per thread and bucket)  ─┐  last progress
//! waits.json edges (task wake-ups among traced threads)  ─┘      │
//!                                       quiet = end − last progress ≥ stall_s?
//!        ├─ it had read, and a traced thread is on CPU ≥ stall_busy_share
//!        │  of the quiet time                                        → busy loop
//!        └─ no thread busy, and one blocked (not in a timed sleep)
//!           ≥ stall_s, from waits.json `pending` with its stack       → blocked
//! ```
//!
//! A job that exited by itself is not stalled; neither is one that reads
//! or hands work between its threads. Timer and interrupt wake-ups are not
//! progress: a loader that polls its queue with a timeout (PyTorch's
//! DataLoader checks every 5 s) keeps waking while nothing arrives.
use serde::{Deserialize, Serialize};

use super::Thresholds;
use storprof_session::load::Session;

/// What the stalled job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StallKind {
    /// Its threads are blocked and nobody wakes them (a deadlock, or a wait
    /// on something that never comes).
    Blocked,
    /// A thread loops on a CPU without reading anything.
    BusyLoop,
}

impl StallKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Blocked => "blocked",
            Self::BusyLoop => "busy-loop",
        }
    }
}

/// One thread the stall is stuck on, with its stack.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StalledThread {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// "on-cpu", or the off-CPU state ("sleeping", "uninterruptible", "other").
    pub state: String,
    /// Blocked: how long it had been off CPU; busy loop: its CPU time in
    /// the quiet interval.
    pub seconds: f64,
    /// Outermost frame first: its hottest on-CPU stack (busy loop), or its
    /// user then kernel stack when it left the CPU (blocked).
    pub stack: Vec<String>,
}

/// A stall: no progress for `quiet_s` seconds up to the end of the data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stall {
    pub kind: StallKind,
    /// Seconds since the last progress (read bytes or a hand-off).
    pub quiet_s: f64,
    /// When the last progress was, seconds from the recording's start
    /// (0: none was seen at all).
    pub since_s: f64,
    pub threads: Vec<StalledThread>,
}

/// Threads named per stall.
const MAX_THREADS: usize = 8;

/// Kernel frames of a timed sleep: a thread in one is waiting for a clock,
/// not for another thread.
fn timed_sleep(stack: &[String]) -> bool {
    stack.iter().any(|f| f.contains("nanosleep"))
}

/// Finds a stall at the end of `session`, if there is one.
pub fn detect(session: &Session, t: &Thresholds) -> Option<Stall> {
    if t.stall_s <= 0.0 || session.info.end_reason == "exited" {
        return None;
    }
    let series = session.timeseries.as_ref()?;
    let waits = session.waits.as_ref()?;
    if series.bucket_ns == 0 {
        return None;
    }
    let bucket_s = series.bucket_ns as f64 / 1e9;
    // A command storprof stopped is judged as it was at the stop request:
    // its signal handlers and tear-down read and hand off afterwards.
    let stop_s = session.info.stop_requested_s.filter(|s| *s > 0.0);
    let all_buckets = series.bucket_count();
    // Only the buckets wholly before the stop request: the one it falls in
    // holds the tear-down too (what came just before it is a fraction of a
    // bucket, next to `stall_s`).
    let buckets = stop_s.map_or(all_buckets, |s| {
        ((s / bucket_s).floor() as usize).min(all_buckets)
    });
    let end_s = stop_s.unwrap_or((all_buckets as f64 * bucket_s).max(session.info.duration_s));
    let progress_at = |b: usize| (b + 1) as f64 * bucket_s;
    let last_read_s = series
        .threads
        .iter()
        .filter_map(|s| {
            (0..buckets.min(s.end_bucket()))
                .rev()
                .find(|&b| s.read().at(b) > 0)
        })
        .max()
        .map_or(0.0, progress_at);
    let last_handoff_s = waits
        .edges
        .iter()
        .filter(|e| e.waker_kind == "task" && e.waker_traced)
        .map(|e| {
            if e.last_s <= end_s {
                return e.last_s;
            }
            e.series
                .iter()
                .filter(|(b, _, n)| *n > 0 && (*b as usize) < buckets)
                .map(|(b, _, _)| progress_at(*b as usize))
                .fold(0.0, f64::max)
        })
        .fold(0.0, f64::max);

    // Busy loop: a job that read, then nothing for stall_s while a thread
    // stays on a CPU. One that never read is not a stalled data pipeline
    // (its verdict is about its threads), though blocked it may well be.
    let quiet_read_s = end_s - last_read_s;
    let read_bytes: u64 = series.threads.iter().map(|s| s.read().total()).sum();
    // Start-up reads (a loader reading an ELF header) are not data.
    let read_data = read_bytes >= t.reader_min_read_bytes;
    if read_data && quiet_read_s >= t.stall_s {
        let first = (last_read_s / bucket_s).ceil() as usize;
        let window_ns = (buckets.saturating_sub(first)) as f64 * series.bucket_ns as f64;
        let mut busy: Vec<StalledThread> = series
            .threads
            .iter()
            .filter_map(|s| {
                let on = s.on_cpu().sum(first, buckets);
                (window_ns > 0.0 && on as f64 >= t.stall_busy_share * window_ns).then(|| {
                    StalledThread {
                        pid: s.pid,
                        tid: s.tid,
                        comm: s.comm.clone(),
                        state: "on-cpu".to_string(),
                        seconds: on as f64 / 1e9,
                        stack: hottest_stack(session, s.pid, s.tid),
                    }
                })
            })
            .collect();
        if !busy.is_empty() {
            busy.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
            busy.truncate(MAX_THREADS);
            return Some(Stall {
                kind: StallKind::BusyLoop,
                quiet_s: quiet_read_s,
                since_s: last_read_s,
                threads: busy,
            });
        }
    }

    // Blocked: no read and no hand-off for stall_s, and a thread that has
    // waited (not on a clock) for all of it.
    let last_s = last_read_s.max(last_handoff_s);
    let quiet_s = end_s - last_s;
    if quiet_s < t.stall_s {
        return None;
    }
    // A job busy on its CPUs meanwhile is working, not stuck (a main
    // thread joining busy workers waits with nobody to wake it too): its
    // threads together on CPU half a CPU's time or more.
    let first = (last_s / bucket_s).ceil() as usize;
    let window_ns = buckets.saturating_sub(first) as f64 * series.bucket_ns as f64;
    let on_cpu_ns: u64 = series
        .threads
        .iter()
        .map(|s| s.on_cpu().sum(first, buckets))
        .sum();
    if window_ns > 0.0 && on_cpu_ns as f64 >= t.busy_thread_share * window_ns {
        return None;
    }
    let waiting = |p: &&storprof_session::model::PendingWait| !timed_sleep(&p.stack);
    if !waits
        .pending
        .iter()
        .filter(waiting)
        .any(|p| p.blocked_s >= t.stall_s)
    {
        return None;
    }
    let threads = waits
        .pending
        .iter()
        .filter(waiting)
        .take(MAX_THREADS)
        .map(|p| StalledThread {
            pid: p.pid,
            tid: p.tid,
            comm: p.comm.clone(),
            state: p.state.clone(),
            seconds: p.blocked_s,
            stack: p.stack.clone(),
        })
        .collect();
    Some(Stall {
        kind: StallKind::Blocked,
        quiet_s,
        since_s: last_s,
        threads,
    })
}

/// The thread's hottest on-CPU stack (`comm;[pid/tid];frames...` in the
/// per-thread folded file), frames only, outermost first.
fn hottest_stack(session: &Session, pid: u32, tid: u32) -> Vec<String> {
    let mark = format!("[{pid}/{tid}]");
    session
        .oncpu_threads
        .stacks
        .iter()
        .filter(|(stack, _)| stack.split(';').nth(1) == Some(mark.as_str()))
        .max_by_key(|(_, n)| *n)
        .map(|(stack, _)| stack.split(';').skip(2).map(str::to_string).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use storprof_session::model::{PendingWait, ThreadSeries, TimeSeries, WaitGraph, WakeEdge};

    const S: u64 = 1_000_000_000;

    /// `buckets` seconds; thread 10 reads in the first `reads_until` s.
    fn session(buckets: usize, reads_until: usize, busy_tid: Option<u32>) -> Session {
        let series = |tid: u32| ThreadSeries {
            pid: 10,
            tid,
            comm: format!("t{tid}"),
            on_cpu_ns: (0..buckets)
                .map(|_| if Some(tid) == busy_tid { S } else { S / 100 })
                .collect(),
            read_bytes: (0..buckets)
                .map(|b| {
                    if tid == 10 && b < reads_until {
                        1 << 20
                    } else {
                        0
                    }
                })
                .collect(),
            ..ThreadSeries::default()
        };
        let mut s = Session::default();
        s.info.end_reason = "interrupted".to_string();
        s.info.duration_s = buckets as f64;
        s.timeseries = Some(TimeSeries {
            bucket_ns: S,
            threads: vec![series(10), series(11)],
            ..TimeSeries::default()
        });
        s.waits = Some(WaitGraph {
            bucket_ns: S,
            edges: vec![WakeEdge {
                waker_kind: "task".into(),
                waker_traced: true,
                waker_pid: 10,
                waker_tid: 11,
                wakee_pid: 10,
                wakee_tid: 10,
                last_s: reads_until as f64,
                count: 10,
                ..WakeEdge::default()
            }],
            pending: Vec::new(),
        });
        s.oncpu_threads.stacks = vec![
            ("t11;[10/11];main;spin".to_string(), 90),
            ("t11;[10/11];main;other".to_string(), 3),
        ];
        s
    }

    fn pending(tid: u32, blocked_s: f64, leaf: &str) -> PendingWait {
        PendingWait {
            pid: 10,
            tid,
            comm: format!("t{tid}"),
            state: "sleeping".into(),
            blocked_s,
            stack: vec!["main".into(), "lock".into(), leaf.into()],
        }
    }

    #[test]
    fn a_thread_blocked_with_no_progress_is_a_blocked_stall_with_its_stack() {
        let mut s = session(100, 20, None);
        let w = s.waits.as_mut().unwrap();
        w.pending = vec![
            pending(11, 80.0, "futex_wait"),
            pending(10, 3.0, "futex_wait"),
        ];
        let stall = detect(&s, &Thresholds::default()).unwrap();
        assert_eq!(stall.kind, StallKind::Blocked);
        assert_eq!(stall.since_s, 20.0);
        assert_eq!(stall.quiet_s, 80.0);
        assert_eq!(stall.threads.len(), 2);
        assert_eq!(stall.threads[0].tid, 11);
        assert_eq!(stall.threads[0].stack.last().unwrap(), "futex_wait");
    }

    #[test]
    fn a_busy_thread_that_reads_nothing_is_a_busy_loop_with_its_hottest_stack() {
        let s = session(100, 20, Some(11));
        let stall = detect(&s, &Thresholds::default()).unwrap();
        assert_eq!(stall.kind, StallKind::BusyLoop);
        assert_eq!(stall.threads.len(), 1);
        assert_eq!(stall.threads[0].stack, vec!["main", "spin"]);
        assert_eq!(stall.threads[0].state, "on-cpu");
    }

    #[test]
    fn no_stall_while_data_flows_or_when_the_job_exited_or_only_sleeps() {
        let t = Thresholds::default();
        // Reads until 70 s of 100: 30 s quiet < 60 s.
        let mut s = session(100, 70, Some(11));
        s.waits.as_mut().unwrap().pending = vec![pending(11, 80.0, "futex_wait")];
        assert_eq!(detect(&s, &t), None);
        // Quiet, blocked, but the command exited by itself.
        let mut s = session(100, 20, None);
        s.waits.as_mut().unwrap().pending = vec![pending(11, 80.0, "futex_wait")];
        s.info.end_reason = "exited".into();
        assert_eq!(detect(&s, &t), None);
        // Quiet, but the only long wait is a timed sleep.
        let mut s = session(100, 20, None);
        s.waits.as_mut().unwrap().pending = vec![pending(11, 80.0, "hrtimer_nanosleep")];
        assert_eq!(detect(&s, &t), None);
        // Quiet and blocked, but the wait began inside the window.
        let mut s = session(100, 20, None);
        s.waits.as_mut().unwrap().pending = vec![pending(11, 30.0, "futex_wait")];
        assert_eq!(detect(&s, &t), None);
        // Busy, but it never read anything: not a stalled pipeline, and
        // its main thread waiting for the busy one is not blocked either.
        let mut s = session(100, 0, Some(11));
        s.waits.as_mut().unwrap().pending = vec![pending(10, 99.0, "futex_wait")];
        assert_eq!(detect(&s, &t), None);
        // A stall threshold of 0 disables detection.
        let mut s = session(100, 20, Some(11));
        s.waits.as_mut().unwrap().pending = vec![pending(11, 80.0, "futex_wait")];
        let off = Thresholds {
            stall_s: 0.0,
            ..Thresholds::default()
        };
        assert_eq!(detect(&s, &off), None);
    }

    #[test]
    fn a_hand_off_between_traced_threads_is_progress() {
        let mut s = session(100, 20, None);
        let w = s.waits.as_mut().unwrap();
        w.pending = vec![pending(11, 80.0, "futex_wait")];
        w.edges[0].last_s = 90.0;
        assert_eq!(detect(&s, &Thresholds::default()), None);
        // A timer wake-up is not.
        let w = s.waits.as_mut().unwrap();
        w.edges[0].waker_kind = "timer".into();
        w.edges[0].waker_traced = false;
        assert!(detect(&s, &Thresholds::default()).is_some());
    }
}
