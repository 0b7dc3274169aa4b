//! The session's per-thread time series as a Chrome trace event file
//! (`{"traceEvents": [...], "displayTimeUnit": "ms"}`), which
//! ui.perfetto.dev and chrome://tracing open.
//!
//! ```text
//! timeseries.json threads ──► per thread and second: "X" slices laid out
//!                             on-CPU, runnable, blocked on I/O, sleeping
//!                 ──► per process and second: "C" counter, on-CPU in CPUs
//! waits.json edges (traced task wakers) ──► per waker → wakee pair: one
//!                             "s"/"f" flow at the pair's busiest second
//! session.json processes, threads ──► "M" process_name / thread_name
//! ```
//!
//! What the tracks mean, and what they do not: storprof keeps how long
//! each thread spent in each state per one-second bucket, not when. So
//! inside each second a thread's time is drawn as consecutive slices in a
//! fixed order (on-CPU, runnable, blocked on I/O, sleeping) starting at
//! the second's start; their lengths are the measured times, their places
//! are not. Off-CPU time is accounted when the thread comes back on a
//! CPU, so a long sleep lands whole in the second it ended and a second
//! can hold more than a second of it: such a second's slices are scaled
//! down together to fit (the slices' `args` keep the measured ns and the
//! share of the second, `drawn_ns` says how long the slice is drawn).
//! The last second ends at the recording's end. A thread with nothing
//! recorded in a second has no slice there.
//!
//! Wake-ups carry no per-event timestamps beyond an edge's first and last
//! (`first_s`, `last_s`) and per-second counts (`series`). One flow is
//! drawn per waker → wakee pair of traced threads, at the second with the
//! most wake-ups: from the middle of the waker's on-CPU slice (it was
//! running when it woke the other) to the middle of the wakee's slice of
//! the state the wake-ups ended; a thread with no slice in that second
//! gets a 1 µs "wake-up" slice at the second's start to anchor the arrow.
//! The flow's args hold the pair's totals. Wake-ups by interrupts, timers
//! and untraced processes are not drawn (report.md names them).
use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
};

use serde_json::{Value, json};

use super::{ExportError, ThreadRoles, exporter, session_name};
use storprof_session::{
    load::Session,
    model::{ThreadSeries, TimeSeries, WakeEdge},
};

const FORMAT: &str = "trace";

/// Bucket width when the session has no time series (the recorder's).
const DEFAULT_BUCKET_NS: u64 = 1_000_000_000;

/// Length of the slice that anchors a flow on a thread with no slice.
const MARKER_NS: u64 = 1_000;

/// Thread states in the order they are laid out inside a second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum State {
    OnCpu,
    Runnable,
    BlockedIo,
    Sleeping,
    /// Not a state: the anchor of a flow (see the module doc).
    WakeMarker,
}

impl State {
    const LAID_OUT: [State; 4] = [
        State::OnCpu,
        State::Runnable,
        State::BlockedIo,
        State::Sleeping,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::OnCpu => "on-CPU",
            Self::Runnable => "runnable (waiting for a CPU)",
            Self::BlockedIo => "blocked on I/O (D state)",
            Self::Sleeping => "sleeping (locks, waits, timers)",
            Self::WakeMarker => "wake-up",
        }
    }

    /// catapult's reserved colour names (Perfetto picks its own).
    fn colour(self) -> &'static str {
        match self {
            Self::OnCpu => "thread_state_running",
            Self::Runnable => "thread_state_runnable",
            Self::BlockedIo => "thread_state_iowait",
            Self::Sleeping => "thread_state_sleeping",
            Self::WakeMarker => "thread_state_unknown",
        }
    }

    fn measured(self, t: &ThreadSeries, bucket: usize) -> u64 {
        match self {
            Self::OnCpu => t.on_cpu().at(bucket),
            Self::Runnable => t.runnable().at(bucket),
            Self::BlockedIo => t.blocked_io().at(bucket),
            Self::Sleeping => t.sleeping().at(bucket),
            Self::WakeMarker => 0,
        }
    }
}

/// A thread's track, by (pid, tid).
type ThreadKey = (u32, u32);

/// One drawn slice.
#[derive(Clone, Debug)]
struct Slice {
    thread: ThreadKey,
    bucket: usize,
    state: State,
    /// ns since the recording's start.
    start: u64,
    drawn: u64,
    measured: u64,
}

impl Slice {
    fn middle(&self) -> u64 {
        self.start + self.drawn / 2
    }
}

/// Where the buckets are: bucket `b` spans `offset + b × width` up to the
/// next bucket or the recording's end, whichever comes first.
#[derive(Clone, Copy, Debug)]
struct Clock {
    offset_ns: u64,
    width_ns: u64,
    end_ns: u64,
}

impl Clock {
    /// The span of bucket `b`, None when it starts at or after the end.
    fn span(&self, bucket: usize) -> Option<(u64, u64)> {
        let start = (bucket as u64)
            .checked_mul(self.width_ns)?
            .checked_add(self.offset_ns)?;
        let end = start.saturating_add(self.width_ns).min(self.end_ns);
        (start < end).then_some((start, end))
    }
}

/// Slices of every thread, with an index by (thread, bucket).
#[derive(Default)]
struct Layout {
    slices: Vec<Slice>,
    by_bucket: BTreeMap<(ThreadKey, usize), Vec<usize>>,
}

impl Layout {
    fn push(&mut self, slice: Slice) -> usize {
        let i = self.slices.len();
        self.by_bucket
            .entry((slice.thread, slice.bucket))
            .or_default()
            .push(i);
        self.slices.push(slice);
        i
    }

    /// Lays out one thread's buckets (see the module doc).
    fn add_thread(&mut self, t: &ThreadSeries, clock: &Clock) {
        for bucket in t.first_bucket as usize..t.end_bucket() {
            let Some((start, end)) = clock.span(bucket) else {
                continue;
            };
            let measured = State::LAID_OUT.map(|s| s.measured(t, bucket));
            let total: u128 = measured.iter().map(|&m| u128::from(m)).sum();
            let span = end - start;
            let mut at = start;
            for (state, m) in State::LAID_OUT.into_iter().zip(measured) {
                let drawn = if total > u128::from(span) {
                    // Below `span` because m ≤ total.
                    u64::try_from(u128::from(m) * u128::from(span) / total).unwrap_or(span)
                } else {
                    m
                };
                if drawn == 0 {
                    continue;
                }
                self.push(Slice {
                    thread: (t.pid, t.tid),
                    bucket,
                    state,
                    start: at,
                    drawn,
                    measured: m,
                });
                at += drawn;
            }
        }
    }

    /// The slice of `thread` in `bucket` to anchor a flow on: one in
    /// `state`, else its first, else a new marker slice at the bucket's
    /// start (None when the bucket is past the end).
    fn anchor(
        &mut self,
        thread: ThreadKey,
        bucket: usize,
        state: State,
        clock: &Clock,
    ) -> Option<usize> {
        if let Some(list) = self.by_bucket.get(&(thread, bucket)) {
            let found = list
                .iter()
                .copied()
                .find(|&i| self.slices[i].state == state)
                .or_else(|| list.first().copied());
            if found.is_some() {
                return found;
            }
        }
        let (start, end) = clock.span(bucket)?;
        Some(self.push(Slice {
            thread,
            bucket,
            state: State::WakeMarker,
            start,
            drawn: MARKER_NS.min(end - start),
            measured: 0,
        }))
    }
}

/// The wake-ups of one waker → wakee pair, summed over its edges.
#[derive(Default)]
struct Pair<'a> {
    count: u64,
    blocked_ns: u64,
    first_s: f64,
    last_s: f64,
    /// Wake-ups per series bucket.
    per_bucket: BTreeMap<u32, u64>,
    /// Blocked ns ended, per wakee state.
    by_state: BTreeMap<&'a str, u64>,
    syscalls: BTreeSet<&'a str>,
}

/// Pairs of traced threads: (waker, wakee) → their wake-ups.
fn pairs(edges: &[WakeEdge]) -> BTreeMap<(ThreadKey, ThreadKey), Pair<'_>> {
    let mut out: BTreeMap<(ThreadKey, ThreadKey), Pair<'_>> = BTreeMap::new();
    for e in edges
        .iter()
        .filter(|e| e.waker_kind == "task" && e.waker_traced)
    {
        let key = ((e.waker_pid, e.waker_tid), (e.wakee_pid, e.wakee_tid));
        let fresh = !out.contains_key(&key);
        let p = out.entry(key).or_default();
        if fresh || e.first_s < p.first_s {
            p.first_s = e.first_s;
        }
        p.last_s = p.last_s.max(e.last_s);
        p.count = p.count.saturating_add(e.count);
        p.blocked_ns = p.blocked_ns.saturating_add(e.blocked_ns);
        let state = p.by_state.entry(e.wakee_state.as_str()).or_default();
        *state = state.saturating_add(e.blocked_ns);
        if let Some(s) = &e.syscall {
            p.syscalls.insert(s);
        }
        for &(bucket, _, wakeups) in &e.series {
            let n = p.per_bucket.entry(bucket).or_default();
            *n = n.saturating_add(wakeups);
        }
    }
    out
}

/// µs, as trace events count time, from ns.
fn micros(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// `x` rounded to 4 decimals (shares: readable, stable across platforms).
fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// The trace of `session`; `roles` name the threads' parts.
pub fn render(session: &Session, roles: &ThreadRoles) -> Result<Vec<u8>, ExportError> {
    let empty = Default::default();
    let series = session.timeseries.as_ref().unwrap_or(&empty);
    let buckets = series.bucket_count();
    let clock = session_clock(session, series)?;
    let edges = session.waits.as_ref().map_or(&[][..], |w| &w.edges[..]);
    let mut thread_names = thread_names(session, series, edges);

    let mut layout = Layout::default();
    for t in &series.threads {
        layout.add_thread(t, &clock);
    }

    let waits_width = session
        .waits
        .as_ref()
        .map_or(clock.width_ns, |w| match w.bucket_ns {
            0 => clock.width_ns,
            n => n,
        });
    let flows = flow_events(
        edges,
        waits_width,
        buckets,
        &clock,
        &mut layout,
        &mut thread_names,
    );

    let mut events = metadata_events(session, &thread_names, roles);
    events.extend(counter_events(series, &clock));
    events.extend(slice_events(&layout, clock.width_ns));
    events.extend(flows);
    encode_trace(&events, session, clock.end_ns)
}

/// Where the session's buckets are: the series' bucket width (the
/// recorder's when it has none), its start relative to the recording's,
/// and the recording's end (from its duration, else the buckets').
fn session_clock(session: &Session, series: &TimeSeries) -> Result<Clock, ExportError> {
    let width_ns = match series.bucket_ns {
        0 => DEFAULT_BUCKET_NS,
        w => w,
    };
    let buckets = series.bucket_count();
    let offset_ns = match session.info.start_unix_ns {
        0 => 0,
        start => series.start_unix_ns.saturating_sub(start),
    };
    let end_ns = match (session.duration_s() * 1e9) as u64 {
        0 => (buckets as u64)
            .checked_mul(width_ns)
            .and_then(|n| n.checked_add(offset_ns))
            .ok_or_else(|| ExportError::TooLarge {
                format: FORMAT,
                what: "the recording's length in ns".to_string(),
                value: buckets as u64,
            })?,
        n => n,
    };
    Ok(Clock {
        offset_ns,
        width_ns,
        end_ns,
    })
}

/// The threads' names by (pid, tid): the time series', then threads.json's,
/// then the traced wakers'.
fn thread_names<'a>(
    session: &'a Session,
    series: &'a TimeSeries,
    edges: &'a [WakeEdge],
) -> BTreeMap<ThreadKey, &'a str> {
    let mut thread_names: BTreeMap<ThreadKey, &str> = BTreeMap::new();
    for t in &series.threads {
        thread_names.entry((t.pid, t.tid)).or_insert(&t.comm);
    }
    for t in &session.threads {
        thread_names.entry((t.pid, t.tid)).or_insert(&t.comm);
    }
    for e in edges {
        if e.waker_kind == "task" && e.waker_traced {
            thread_names
                .entry((e.waker_pid, e.waker_tid))
                .or_insert(&e.waker_comm);
        }
    }
    thread_names
}

/// The "s"/"f" flow events, one pair per waker → wakee pair of traced
/// threads, anchored in `layout` (which gains marker slices where a thread
/// has none); wakees without a name get an empty one in `thread_names`.
fn flow_events(
    edges: &[WakeEdge],
    waits_width: u64,
    buckets: usize,
    clock: &Clock,
    layout: &mut Layout,
    thread_names: &mut BTreeMap<ThreadKey, &str>,
) -> Vec<Value> {
    let mut flows = Vec::new();
    for (id, ((waker, wakee), p)) in pairs(edges).into_iter().enumerate() {
        // The busiest second (the earliest of equals), else the first wake-up's.
        let busiest = p
            .per_bucket
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(&b, &n)| (b, n));
        let anchor_ns = match busiest {
            Some((b, _)) => u64::from(b).saturating_mul(waits_width),
            None => (p.first_s.max(0.0) * 1e9) as u64,
        };
        let bucket = ((anchor_ns / clock.width_ns) as usize).min(buckets.saturating_sub(1));
        let ended_state = match p.by_state.iter().max_by_key(|(_, ns)| **ns) {
            Some((&"uninterruptible", _)) => State::BlockedIo,
            Some((&"sleeping", _)) => State::Sleeping,
            _ => State::Runnable,
        };
        thread_names.entry(wakee).or_insert("");
        let (Some(from), Some(to)) = (
            layout.anchor(waker, bucket, State::OnCpu, clock),
            layout.anchor(wakee, bucket, ended_state, clock),
        ) else {
            continue;
        };
        let states: BTreeMap<&str, f64> = p
            .by_state
            .iter()
            .map(|(s, ns)| (*s, round4(*ns as f64 / 1e6)))
            .collect();
        let flow_id = id + 1;
        let common = |ph: &str, (pid, tid): ThreadKey, ts: u64| {
            json!({"ph": ph, "id": flow_id, "name": "wake-up", "cat": "wake-up",
                   "pid": pid, "tid": tid, "ts": micros(ts)})
        };
        let mut start = common("s", waker, layout.slices[from].middle());
        if let Some(map) = start.as_object_mut() {
            map.insert(
                "args".into(),
                json!({
                    "wake_ups": p.count,
                    "blocked_ms_ended": round4(p.blocked_ns as f64 / 1e6),
                    "blocked_ms_by_state": states,
                    "syscalls": p.syscalls,
                    "first_s": round4(p.first_s),
                    "last_s": round4(p.last_s),
                    "drawn_at_second": bucket,
                    "wake_ups_that_second": busiest.map_or(0, |(_, n)| n),
                }),
            );
        }
        let mut finish = common("f", wakee, layout.slices[to].middle());
        if let Some(map) = finish.as_object_mut() {
            // Bind to the slice around the point, not the next one.
            map.insert("bp".into(), json!("e"));
        }
        flows.push(start);
        flows.push(finish);
    }
    flows
}

/// The "M" metadata events: each process's name (its comm, else its main
/// thread's, else its pid), then each thread's, with its role when it has
/// one.
fn metadata_events(
    session: &Session,
    thread_names: &BTreeMap<ThreadKey, &str>,
    roles: &ThreadRoles,
) -> Vec<Value> {
    let mut events = Vec::new();
    let mut process_names: BTreeMap<u32, String> = BTreeMap::new();
    for p in &session.info.processes {
        if !p.comm.is_empty() {
            process_names.insert(p.pid, p.comm.clone());
        }
    }
    for (&(pid, tid), comm) in thread_names {
        if pid == tid && !comm.is_empty() {
            process_names.entry(pid).or_insert_with(|| comm.to_string());
        }
    }
    let pids: BTreeSet<u32> = thread_names.keys().map(|(pid, _)| *pid).collect();
    for &pid in &pids {
        let name = process_names
            .get(&pid)
            .map_or_else(|| format!("pid {pid}"), |c| format!("{c} ({pid})"));
        events.push(
            json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": name}}),
        );
    }
    for (&(pid, tid), comm) in thread_names {
        let comm = if comm.is_empty() { "?" } else { comm };
        let name = match roles.get(&(pid, tid)) {
            Some(role) => format!("{comm} ({role})"),
            None => comm.to_string(),
        };
        events.push(
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": name}}),
        );
    }
    events
}

/// The "C" counter events: each process's on-CPU time per second, in CPUs,
/// over the seconds its threads store (sparse, as the series are), then 0
/// after each run of them so the counter falls when the process goes quiet.
fn counter_events(series: &TimeSeries, clock: &Clock) -> Vec<Value> {
    let mut events = Vec::new();
    let mut on_cpu: BTreeMap<u32, BTreeMap<usize, u64>> = BTreeMap::new();
    for t in &series.threads {
        let sums = on_cpu.entry(t.pid).or_default();
        for (i, ns) in t.on_cpu_ns.iter().enumerate() {
            let sum = sums.entry(t.first_bucket as usize + i).or_default();
            *sum = sum.saturating_add(*ns);
        }
    }
    for (pid, sums) in &on_cpu {
        let ends = sums
            .keys()
            .filter(|&&b| !sums.contains_key(&(b + 1)))
            .map(|&b| (b + 1, 0));
        let points: BTreeMap<usize, u64> =
            sums.iter().map(|(&b, &ns)| (b, ns)).chain(ends).collect();
        for (b, ns) in points {
            let Some((start, _)) = clock.span(b) else {
                continue;
            };
            events.push(json!({"ph": "C", "name": "on-CPU (CPUs)", "pid": pid,
                               "ts": micros(start),
                               "args": {"CPUs": round4(ns as f64 / clock.width_ns as f64)}}));
        }
    }
    events
}

/// The "X" slice events of `layout`, per thread in time order, with their
/// measured (and, when scaled, drawn) ns in `args`.
fn slice_events(layout: &Layout, width_ns: u64) -> Vec<Value> {
    let mut events = Vec::new();
    let mut order: Vec<&Slice> = layout.slices.iter().collect();
    order.sort_by_key(|s| (s.thread, s.start, s.state));
    for s in order {
        let mut args = json!({
            "second": s.bucket,
            "measured_ns": s.measured,
            "share_of_second": round4(s.measured as f64 / width_ns as f64),
        });
        if s.drawn != s.measured
            && let Some(map) = args.as_object_mut()
        {
            map.insert("drawn_ns".into(), json!(s.drawn));
        }
        if s.state == State::WakeMarker {
            args = json!({"second": s.bucket, "note": "anchors a wake-up flow; no state was recorded for this thread in this second"});
        }
        events.push(
            json!({"ph": "X", "name": s.state.name(), "cat": "thread-state",
                           "cname": s.state.colour(),
                           "pid": s.thread.0, "tid": s.thread.1,
                           "ts": micros(s.start), "dur": micros(s.drawn), "args": args}),
        );
    }
    events
}

/// The trace file's bytes: `events` one a line (diffable, and still one
/// JSON document), then the display unit and `otherData`.
fn encode_trace(events: &[Value], session: &Session, end_ns: u64) -> Result<Vec<u8>, ExportError> {
    let encode = |v: &Value| {
        serde_json::to_string(v).map_err(|e| ExportError::Encode {
            format: FORMAT,
            source: e.into(),
        })
    };
    let mut out = String::from("{\"traceEvents\": [\n");
    for (i, e) in events.iter().enumerate() {
        let sep = if i + 1 < events.len() { "," } else { "" };
        let _ = writeln!(out, "{}{sep}", encode(e)?);
    }
    let other = json!({
        "exporter": exporter(),
        "session": session_name(session),
        "duration_s": round4(end_ns as f64 / 1e9),
        "note": "thread slices are laid out inside each second from its measured \
                 per-state times (on-CPU, runnable, blocked on I/O, sleeping), \
                 not at the times they happened",
    });
    let _ = write!(
        out,
        "],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {}\n}}\n",
        encode(&other)?
    );
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests;
