//! The consumer's own time over the training window, split into compute,
//! data wait, the GIL, other locks and a CPU queue, the kernel AU from it,
//! and its data waits attributed along the critical path.
use std::collections::{BTreeMap, BTreeSet};

use storprof_session::load::Session;

use super::{
    ConsumerTime, ThreadId,
    classify::{self, EdgeKind},
    graph::{Graph, InEdge, window_accounted_ns},
    path::{PathAcc, Walk, attribute},
    sites::{OwnCpu, WaitSite},
    window::data_waits,
};
use crate::Thresholds;

/// The recorded command is a benchmark that emulates compute with sleeps
/// (`storprof bench`, DLIO, mlpstorage), even at a computation time of 0:
/// by its arguments, the words of a shell command line among them
/// (`sh -c '... exec dlio_benchmark ...'`), or a traced process's name.
pub fn emulates_compute(session: &Session) -> bool {
    let argv = &session.info.command;
    let is_benchmark = |word: &str| {
        let name = word.rsplit('/').next().unwrap_or(word);
        name.starts_with("dlio_benchmark") || name == "mlpstorage"
    };
    let words: Vec<String> = argv
        .iter()
        .flat_map(|a| a.split_whitespace())
        .map(str::to_string)
        .collect();
    crate::features::is_storprof_bench(argv)
        || crate::features::is_storprof_bench(&words)
        || words.iter().any(|w| is_benchmark(w))
        || session.info.processes.iter().any(|p| is_benchmark(&p.comm))
}

/// What the consumer computations need besides the graphs.
pub struct ConsumerCtx<'s> {
    pub session: &'s Session,
    pub side: &'s BTreeSet<ThreadId>,
    pub relays: &'s BTreeSet<ThreadId>,
    /// The window in seconds and, when it has per-bucket states, buckets.
    pub span_s: (f64, f64),
    pub buckets: Option<(usize, usize)>,
    /// Per thread, its on-CPU samples by what they were doing.
    pub fetch_cpu: &'s BTreeMap<ThreadId, OwnCpu>,
}

/// Of `c`'s timeouts (futex, poll or select waits a timer ended, outside
/// the GIL's share), the share that was waiting for data: all of them for
/// a thread whose stacks wait mostly to take a batch or receive, else what
/// its stacks spent so beyond what the side's deliveries ended, over the
/// whole recording.
fn timed_out_data_share(
    whole: &Graph,
    c: ThreadId,
    side: &BTreeSet<ThreadId>,
    relays: &BTreeSet<ThreadId>,
) -> f64 {
    let Some(sites) = whole.sites_of(c) else {
        return 0.0;
    };
    let fetching = sites.ns(WaitSite::Fetch) + sites.ns(WaitSite::Receive);
    if fetching as f64 >= 0.5 * sites.total() as f64 {
        return 1.0;
    }
    let delivered: u64 = data_waits(whole, c, side, relays)
        .iter()
        .map(|e| e.ns)
        .sum();
    let timeouts = whole.blocked_by(c, |e| classify::is_timeout(e.edge)).0 as f64
        * (1.0 - whole.gil_share(whole, c));
    if timeouts <= 0.0 {
        return 0.0;
    }
    (fetching.saturating_sub(delivered) as f64 / timeouts).clamp(0.0, 1.0)
}

/// The consumer `c`'s time over the window, its data waits attributed on
/// `acc`; returns the time and its data wait (ns) for the path's total.
pub fn consumer_time(
    ctx: &ConsumerCtx,
    walk: &Walk,
    c: ThreadId,
    t: &Thresholds,
    acc: &mut PathAcc,
) -> ConsumerTime {
    let (g, whole) = (walk.g, walk.whole);
    let waits = data_waits(whole, c, ctx.side, ctx.relays);
    // The wait for the first batch is start-up, not training (DLIO
    // excludes the first step too).
    let first_edge = waits
        .iter()
        .min_by(|a, b| a.edge.first_s.total_cmp(&b.edge.first_s))
        .map(|e| e.edge);
    let mut delivered = Vec::new();
    let mut deliveries = 0u64;
    for e in &waits {
        let in_window = match ctx.buckets {
            Some((b0, b1)) => e
                .edge
                .series
                .iter()
                .filter(|(b, _, _)| (b0..b1).contains(&(*b as usize)))
                .map(|(_, ns, _)| ns)
                .sum::<u64>(),
            None => {
                let mut ns = e.edge.blocked_ns;
                if first_edge.is_some_and(|f| std::ptr::eq(f, e.edge)) {
                    ns = ns.saturating_sub(e.edge.first_blocked_ns);
                }
                ns
            }
        };
        deliveries += match ctx.buckets {
            Some((b0, b1)) => e
                .edge
                .series
                .iter()
                .filter(|(b, _, _)| (b0..b1).contains(&(*b as usize)))
                .map(|(_, _, n)| n)
                .sum::<u64>(),
            None => e.edge.count,
        };
        if let Some(w) = e.waker() {
            delivered.push((w, in_window));
        }
    }
    let delivered_ns: u64 = delivered.iter().map(|(_, ns)| ns).sum();
    let (epoch_starts, epoch_start_wait_ns) = epoch_starts(&waits, ctx.span_s);
    // Waits for data that a timer ended (a queue get with a timeout): the
    // same wait, spread over the threads that delivered.
    let gil = g.gil_share(whole, c);
    let timeouts = g.blocked_by(c, |e| classify::is_timeout(e.edge)).0 as f64;
    let timed_out =
        (timeouts * (1.0 - gil) * timed_out_data_share(whole, c, ctx.side, ctx.relays)) as u64;
    for &(w, ns) in &delivered {
        let share = if delivered_ns > 0 {
            ns as f64 / delivered_ns as f64
        } else {
            0.0
        };
        let mut path = vec![c];
        attribute(
            walk,
            w,
            ns as f64 + timed_out as f64 * share,
            &mut path,
            acc,
        );
    }
    if delivered_ns == 0 && timed_out > 0 {
        acc.add(super::PathKind::Unattributed, c, timed_out as f64);
    }
    let wait_ns = delivered_ns + timed_out;
    // The GIL: its lock releases by loaders and its timed waits. The
    // consumer could run but a loader was running Python: that time goes
    // to the threads that released it to the consumer (the timed waits in
    // proportion), on the path like a data wait.
    let gil_parts: Vec<(ThreadId, u64)> = g
        .edges_into(c)
        .filter(|e| e.kind == EdgeKind::Lock)
        .filter_map(|e| Some((e.waker()?, (e.ns as f64 * gil) as u64)))
        .collect();
    let gil_released: u64 = gil_parts.iter().map(|(_, ns)| ns).sum();
    let gil_timed_out = (g
        .blocked_by(c, |e| {
            e.kind != EdgeKind::Lock
                && e.edge.syscall.as_deref() == Some("futex")
                && classify::is_timeout(e.edge)
        })
        .0 as f64
        * gil) as u64;
    let gil_ns = gil_released + gil_timed_out;
    for &(w, ns) in &gil_parts {
        let timed = if gil_released > 0 {
            gil_timed_out as f64 * ns as f64 / gil_released as f64
        } else {
            0.0
        };
        let mut path = vec![c];
        attribute(walk, w, ns as f64 + timed, &mut path, acc);
    }
    if gil_released == 0 && gil_timed_out > 0 {
        acc.add(super::PathKind::Gil, c, gil_timed_out as f64);
    }
    let lock_ns = (g.blocked_by(c, |e| e.kind == EdgeKind::Lock).0 as f64 * (1.0 - gil)) as u64;

    // Off-CPU time is accounted when a thread comes back on a CPU, so a
    // wait that spans a bucket boundary lands in one bucket: the
    // consumer's own accounted time in the window is the denominator
    // that matches its data waits, not the window's length.
    let own = g.states.get(&c).copied().unwrap_or_default();
    let mut window_ns = match ctx.buckets {
        Some(_) => window_accounted_ns(whole, g, c, own),
        None => ((ctx.span_s.1 - ctx.span_s.0).max(0.0) * 1e9) as u64,
    };
    let compute_ns = g.timer_sleep_ns(c);
    // A consumer that emulates compute with timed sleeps (DLIO, the
    // bench) computes only inside its sleep call: its own time on CPU
    // (unpickling a batch, queue bookkeeping) is fetching, as DLIO
    // counts it, and so is its data wait. A consumer that does not (a
    // real trainer computes on CPU or waits on a device) is computing
    // whenever it is not waiting for data or for the GIL.
    let emulated = window_ns > 0
        && (emulates_compute(ctx.session)
            || compute_ns as f64 >= t.consumer_sleep_share * window_ns as f64);
    // A trainer's CPU inside its loader's API (unpickling a batch,
    // starting an epoch's workers) is fetching, not its compute.
    let own_cpu = ctx.fetch_cpu.get(&c).copied().unwrap_or_default();
    let cpu_share = |samples: u64| {
        if own_cpu.all > 0 && !emulated {
            (own.on_cpu as f64 * samples as f64 / own_cpu.all as f64) as u64
        } else {
            0
        }
    };
    let fetch_cpu_ns = cpu_share(own_cpu.fetch);
    // A trainer that loads its samples itself has no deliveries to start
    // its window at: its imports are start-up, not training.
    if waits.is_empty() {
        window_ns = window_ns.saturating_sub(cpu_share(own_cpu.startup));
    }
    let not_computing = if emulated {
        wait_ns + own.on_cpu + own.runnable + gil_ns
    } else {
        wait_ns + gil_ns + fetch_cpu_ns
    };
    let au = if window_ns == 0 {
        100.0
    } else {
        (1.0 - not_computing as f64 / window_ns as f64).clamp(0.0, 1.0) * 100.0
    };
    let own_ns = if emulated {
        window_ns.saturating_sub(compute_ns.saturating_add(wait_ns).saturating_add(gil_ns))
    } else {
        own.io
    };
    let write_bytes = ctx
        .session
        .threads
        .iter()
        .find(|t| (t.pid, t.tid) == c)
        .map_or(0, |t| t.write_bytes);
    ConsumerTime {
        pid: c.0,
        tid: c.1,
        comm: g.comm(c),
        data_wait_ns: wait_ns,
        compute_ns,
        emulated_compute: emulated,
        window_ns,
        au_percentage: au,
        write_bytes,
        own_ns,
        own_io_ns: own.io.min(own_ns),
        timed_out_wait_ns: timed_out,
        gil_ns,
        lock_ns,
        queued_ns: own.runnable,
        fetch_cpu_ns,
        steps: deliveries.max(g.blocked_by(c, |e| classify::is_timer_sleep(e.edge)).1),
        epoch_starts,
        epoch_start_wait_ns,
    }
}

/// Worker processes started within this long of each other are one
/// generation (one epoch's DataLoader workers).
const GENERATION_GAP_S: f64 = 1.0;

/// The first batch of each later generation of worker processes inside
/// the window (workers started anew each epoch): how many, and how long
/// the consumer waited for each generation's first delivery in all (its
/// first wake-up's blocked time; DLIO leaves each epoch's first step out
/// of its AU).
fn epoch_starts(waits: &[&InEdge], span_s: (f64, f64)) -> (u32, u64) {
    let mut firsts: BTreeMap<u32, (f64, u64)> = BTreeMap::new();
    for e in waits {
        let Some(w) = e.waker() else { continue };
        let first = (e.edge.first_s, e.edge.first_blocked_ns);
        firsts
            .entry(w.0)
            .and_modify(|f| {
                if first.0 < f.0 {
                    *f = first;
                }
            })
            .or_insert(first);
    }
    let mut starts: Vec<(f64, u64)> = firsts
        .into_values()
        .filter(|(at, _)| *at > span_s.0 + GENERATION_GAP_S && *at <= span_s.1)
        .collect();
    starts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut generations: Vec<(f64, u64)> = Vec::new();
    for (at, ns) in starts {
        match generations.last_mut() {
            Some(g) if at - g.0 <= GENERATION_GAP_S => g.1 = g.1.max(ns),
            _ => generations.push((at, ns)),
        }
    }
    (
        generations.len() as u32,
        generations.iter().map(|g| g.1).sum(),
    )
}
