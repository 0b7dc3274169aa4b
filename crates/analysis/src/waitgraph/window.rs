//! The training window (from the consumer's first data delivery to its
//! last exchange with the data side, across epochs and worker restarts)
//! and the phases around it.
use std::collections::BTreeSet;

use storprof_session::load::Session;

use super::{
    Phase, ThreadId, Window,
    classify::{self, waker_id},
    graph::{Graph, InEdge},
};

/// Blocked time of `consumer` ended by a hand-off from the data side (or
/// relays): its data deliveries.
pub fn data_waits<'a, 'g>(
    g: &'g Graph<'a>,
    consumer: ThreadId,
    side: &BTreeSet<ThreadId>,
    relays: &BTreeSet<ThreadId>,
) -> Vec<&'g InEdge<'a>> {
    g.edges_into(consumer)
        // A wait for a lock the consumer contends for with its loaders (the
        // GIL re-taken after a sleep) is not a wait for data.
        .filter(|e| {
            e.kind == classify::EdgeKind::Handoff
                && e.waker()
                    .is_some_and(|w| w != consumer && (side.contains(&w) || relays.contains(&w)))
        })
        .collect()
}

/// The window: first to last exchange of the consumers with the data
/// side: data wake-ups, and the work they send (to the side, or to a
/// thread of theirs that wakes the side: a queue feeder). When data was
/// delivered (the consumer woken from a receive), the window starts at the
/// first delivery: the wait for the first batch is start-up (DLIO leaves
/// the first step out too), and so are starting workers and handing them
/// work while they start (a spawned worker's pipe stays full while its
/// interpreter imports). The side holds every epoch's workers and read
/// threads, so the window spans all epochs.
pub fn window(
    session: &Session,
    whole: &Graph,
    consumers: &BTreeSet<ThreadId>,
    side: &BTreeSet<ThreadId>,
    relays: &BTreeSet<ThreadId>,
    min_steps: u64,
) -> (f64, f64, String) {
    let mut first_delivery: Option<f64> = None;
    let mut first = f64::MAX;
    let mut last = 0.0f64;
    let senders: BTreeSet<ThreadId> = whole
        .states
        .keys()
        .filter(|t| !side.contains(*t))
        .filter(|&&t| side.iter().any(|&sd| whole.wakes(t, sd).1 > 0))
        .copied()
        .collect();
    for &c in consumers {
        for e in data_waits(whole, c, side, relays) {
            first = first.min(e.edge.first_s);
            last = last.max(e.edge.last_s);
            if classify::is_receive_wait(e.edge) {
                first_delivery =
                    Some(first_delivery.map_or(e.edge.first_s, |d| d.min(e.edge.first_s)));
            }
        }
        let edges = session.waits.iter().flat_map(|w| &w.edges);
        for e in edges.filter(|e| waker_id(e) == Some(c)) {
            let wakee = (e.wakee_pid, e.wakee_tid);
            if side.contains(&wakee) || (senders.contains(&wakee) && wakee.0 == c.0) {
                first = first.min(e.first_s);
                last = last.max(e.last_s);
            }
        }
    }
    // A consumer that computes in timed sleeps ends training with its last
    // step: what follows (joining its loaders, saving, exiting) is
    // tear-down, though the loaders' exits still wake it.
    let last_step = consumers
        .iter()
        .filter_map(|&c| {
            let steps: Vec<&InEdge> = whole
                .edges_into(c)
                .filter(|e| classify::is_timer_sleep(e.edge))
                .collect();
            let n: u64 = steps.iter().map(|e| e.count).sum();
            (n >= min_steps).then(|| steps.iter().map(|e| e.edge.last_s).fold(0.0, f64::max))
        })
        .fold(None, |m: Option<f64>, s| Some(m.map_or(s, |m| m.max(s))));
    // After storprof asked the command to stop comes its tear-down.
    if let Some(stop) = session.info.stop_requested_s.filter(|s| *s > 0.0) {
        last = last.min(stop);
    }
    let begin = first_delivery.unwrap_or(first);
    if let Some(step) = last_step.filter(|&s| s > begin && s < last) {
        last = step;
    }
    if let Some(delivery) = first_delivery.filter(|&d| last > d) {
        (
            delivery,
            last,
            "the consumer's first data delivery to its last exchange with the data side".into(),
        )
    } else if last > first {
        (
            first,
            last,
            "the consumer's first and last exchanges with the data side".into(),
        )
    } else {
        (0.0, session.duration_s(), "the whole recording".into())
    }
}

/// The whole time-series buckets inside [start_s, end_s], when the series
/// has per-bucket states and the window holds at least two.
pub fn buckets_of(session: &Session, start_s: f64, end_s: f64) -> Option<(usize, usize)> {
    let bucket_s = session
        .waits
        .as_ref()
        .map_or(1e9, |w| w.bucket_ns.max(1) as f64)
        / 1e9;
    let has_states = session
        .timeseries
        .as_ref()
        .is_some_and(|ts| ts.threads.iter().any(|s| !s.sleeping_ns.is_empty()));
    let b0 = (start_s / bucket_s).ceil() as usize;
    let b1 = (end_s / bucket_s).floor() as usize;
    (has_states && b1 >= b0 + 2).then_some((b0, b1))
}

/// A window over the readers' own activity (no consumer): the span in
/// which they took data in.
pub fn reader_window(session: &Session, readers: &BTreeSet<ThreadId>) -> Window {
    let duration = session.duration_s();
    let span = session.timeseries.as_ref().and_then(|ts| {
        let bucket_s = ts.bucket_ns.max(1) as f64 / 1e9;
        let mut span: Option<(usize, usize)> = None;
        for s in ts
            .threads
            .iter()
            .filter(|s| readers.contains(&(s.pid, s.tid)))
        {
            // Taking data in: a job that read, then loops on a CPU, is
            // not reading any more (it may be stalled).
            let busy = |b: usize| s.read().at(b) > 0 || s.blocked_io().at(b) > 0;
            let end = s.end_bucket();
            let (Some(a), Some(z)) = (
                (s.first_bucket as usize..end).find(|&b| busy(b)),
                (s.first_bucket as usize..end).rev().find(|&b| busy(b)),
            ) else {
                continue;
            };
            span = Some(span.map_or((a, z), |(x, y)| (x.min(a), y.max(z))));
        }
        let end = session
            .info
            .stop_requested_s
            .unwrap_or(duration)
            .min(duration);
        span.map(|(a, z)| (a as f64 * bucket_s, ((z + 1) as f64 * bucket_s).min(end)))
    });
    let (start_s, end_s, source) = match span {
        Some((a, z)) if z > a => (
            a,
            z,
            "the readers' first to last second of reading".to_string(),
        ),
        _ => (0.0, duration, "the whole recording".to_string()),
    };
    Window {
        start_s,
        end_s,
        source,
        buckets: buckets_of(session, start_s, end_s),
    }
}

/// Start-up, training and tear-down with what their busiest threads did.
pub fn phases(session: &Session, start_s: f64, end_s: f64, duration: f64) -> Vec<Phase> {
    let mut out = Vec::new();
    let ts = session.timeseries.as_ref();
    let bucket_s = ts.map_or(1.0, |t| t.bucket_ns.max(1) as f64 / 1e9);
    let activity = |a: f64, b: f64| -> String {
        let Some(ts) = ts else {
            return String::new();
        };
        let (b0, b1) = (
            (a / bucket_s).floor() as usize,
            (b / bucket_s).ceil() as usize,
        );
        let len_s = ((b1.saturating_sub(b0)) as f64 * bucket_s).max(1e-9);
        let mut busy: Vec<(f64, String, u32)> = ts
            .threads
            .iter()
            .map(|s| {
                let on = s.on_cpu().sum(b0, b1);
                let read = s.read().sum(b0, b1);
                (on as f64 / 1e9 / len_s, s.comm.clone(), u32::from(read > 0))
            })
            .filter(|(cpu, _, _)| *cpu >= 0.05)
            .collect();
        busy.sort_by(|x, y| y.0.total_cmp(&x.0));
        let cpus: f64 = busy.iter().map(|b| b.0).sum();
        let top: Vec<String> = busy
            .iter()
            .take(3)
            .map(|(cpu, comm, read)| {
                format!(
                    "{comm} {:.0}% CPU{}",
                    cpu * 100.0,
                    if *read > 0 { " (reading)" } else { "" }
                )
            })
            .collect();
        if top.is_empty() {
            "threads mostly off CPU".to_string()
        } else {
            format!("{:.1} CPUs busy: {}", cpus, top.join(", "))
        }
    };
    if start_s > 0.05 {
        out.push(Phase {
            name: "start-up".into(),
            start_s: 0.0,
            end_s: start_s,
            activity: activity(0.0, start_s),
        });
    }
    out.push(Phase {
        name: "training".into(),
        start_s,
        end_s,
        activity: activity(start_s, end_s),
    });
    if duration > end_s + 0.05 {
        out.push(Phase {
            name: "tear-down".into(),
            start_s: end_s,
            end_s: duration,
            activity: activity(end_s, duration),
        });
    }
    out
}
