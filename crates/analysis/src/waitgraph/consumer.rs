//! The consumer's own time over the training window, split into compute,
//! data wait, the GIL, other locks, a CPU queue and its own fetching, the
//! kernel AU from it, and its data waits attributed along the critical
//! path.
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use storprof_session::load::Session;

use super::{
    ThreadId,
    classify::{self, EdgeKind},
    graph::{Graph, InEdge, window_accounted_ns},
    is_zero, is_zero_u32, own_time,
    own_time::OwnTime,
    path::{PathAcc, Walk, attribute},
    sites::WaitSite,
    window::data_waits,
};
use crate::Thresholds;

/// The consumer's time over the training window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConsumerTime {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// Blocked time ended by the data side (loaders, relays), ns.
    pub data_wait_ns: u64,
    /// Timed sleeps (nanosleep ended by a timer): emulated compute, ns.
    pub compute_ns: u64,
    /// The consumer emulates compute with timed sleeps (DLIO, the bench):
    /// all its time but its sleeps is then fetching or waiting; else
    /// only its data and GIL waits and its own fetching are.
    pub emulated_compute: bool,
    /// The consumer's own accounted time in the window (on CPU, runnable,
    /// blocked), ns: the AU's denominator. For a consumer without
    /// deliveries (its own reader), its time in its loop: after its
    /// start-up, before its tear-down.
    pub window_ns: u64,
    /// 1 − (data wait + GIL + own fetching) / window, in percent (a
    /// consumer that emulates compute: its CPU and queue time fetching; one
    /// that computes on a CPU: its D waits outside its loader, `own_io_ns`,
    /// not computing either).
    pub au_percentage: f64,
    /// Bytes the consumer thread wrote with write-family syscalls over the
    /// recording (checkpoints, logs); 0 for a consumer that wrote nothing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub write_bytes: u64,
    /// The consumer's own time in the window, neither computing, waiting
    /// for data nor blocked inside its loader, ns: what is left of the
    /// window after those for a consumer that emulates compute; only its
    /// uninterruptible (D) waits outside its loader for one that computes
    /// on a CPU (its CPU time is its compute). A trainer that saves
    /// checkpoints in its own thread spends them here.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub own_ns: u64,
    /// Of `own_ns`, the time in uninterruptible (D) waits: I/O such as
    /// fsync or writeback throttling.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub own_io_ns: u64,
    /// Of `data_wait_ns`, the waits for data that timed out and were
    /// started again (a queue `get` with a timeout, DataLoader's status
    /// checks): still waiting for data, though a timer ended them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub timed_out_wait_ns: u64,
    /// Time waiting for the GIL (neither compute nor data: the consumer
    /// could run but another thread held the interpreter), ns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gil_ns: u64,
    /// Time waiting for other locks the loaders hold too, ns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lock_ns: u64,
    /// Time runnable, waiting for a CPU, ns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub queued_ns: u64,
    /// Time on a CPU inside its loader's API (a real trainer's: taking
    /// and unpickling batches, starting an epoch's workers, decoding
    /// samples itself), ns: fetching, not compute. Over a window between
    /// deliveries, the stacks' share of its CPU time there; over its own
    /// loop, its samples there.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fetch_cpu_ns: u64,
    /// Time queued for a CPU inside its loader's API, ns (its queued time
    /// in the share of its CPU time there).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fetch_queued_ns: u64,
    /// Time blocked on a device inside its loader's API (a loader running
    /// in its own thread, reading files), ns: fetching, not compute, and
    /// no wait that a thread of the data side ends.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fetch_io_ns: u64,
    /// Time receiving from a socket inside its loader's API, ns.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fetch_net_ns: u64,
    /// Its steps in the window: a consumer that emulates its compute, its
    /// timed sleeps; else its data deliveries, or its timed sleeps when it
    /// took more of those (a consumer that never waits).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub steps: u64,
    /// Later generations of worker processes (started anew each epoch)
    /// whose first batch it waited for in the window, and that wait, ns:
    /// part of `data_wait_ns`, which DLIO's AU leaves out (its first step
    /// of each epoch).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub epoch_starts: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epoch_start_wait_ns: u64,
}

impl ConsumerTime {
    /// What keeps its AU under 100% besides its waits for data and the
    /// GIL (and a CPU trainer's own D waits): its own fetching (on a CPU
    /// or queued for one taking and unpickling batches, blocked on the
    /// device or a socket reading samples itself), ns.
    pub fn own_fetch_ns(&self) -> u64 {
        let not_computing = self.window_ns as f64 * (1.0 - self.au_percentage / 100.0);
        let own_io = if self.emulated_compute {
            0
        } else {
            self.own_io_ns
        };
        (not_computing.max(0.0).round() as u64)
            .saturating_sub(self.data_wait_ns + self.gil_ns + own_io)
    }

    /// Of [`Self::own_fetch_ns`], the time queued for a CPU, ns.
    pub fn own_fetch_queued_ns(&self) -> u64 {
        if self.emulated_compute {
            self.queued_ns.min(self.own_fetch_ns())
        } else {
            self.fetch_queued_ns.min(self.own_fetch_ns())
        }
    }
}

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
    /// Per thread, its time by what its stacks were doing.
    pub own_time: &'s BTreeMap<ThreadId, OwnTime>,
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
    let (delivered, deliveries) = deliveries_in_window(ctx, &waits);
    let delivered_ns: u64 = delivered.iter().map(|(_, ns)| ns).sum();
    let (epoch_starts, epoch_start_wait_ns) = epoch_starts(&waits, ctx.span_s);
    // Waits for data that a timer ended (a queue get with a timeout): the
    // same wait, spread over the threads that delivered.
    let gil = g.gil_share(whole, c);
    let timeouts = g.blocked_by(c, |e| classify::is_timeout(e.edge)).0 as f64;
    let timed_out =
        (timeouts * (1.0 - gil) * timed_out_data_share(whole, c, ctx.side, ctx.relays)) as u64;
    attribute_data_waits(walk, c, &delivered, timed_out, acc);
    let wait_ns = delivered_ns + timed_out;
    let gil_ns = gil_wait_ns(walk, c, gil, acc);
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
    let (compute_ns, timer_sleeps) = g.blocked_by(c, |e| classify::is_timer_sleep(e.edge));
    // A consumer that emulates compute with timed sleeps (DLIO, the
    // bench) computes only inside its sleep call: its own time on CPU
    // (unpickling a batch, queue bookkeeping) is fetching, as DLIO
    // counts it, and so is its data wait. A consumer that does not (a
    // real trainer computes on CPU or waits on a device) is computing
    // whenever it is not waiting for data or for the GIL.
    let emulated = window_ns > 0
        && (emulates_compute(ctx.session)
            || compute_ns as f64 >= t.consumer_sleep_share * window_ns as f64);
    let f = own_fetching(ctx, walk, c, emulated, waits.is_empty());
    if let Some(loop_ns) = f.loop_ns {
        window_ns = loop_ns;
    }
    let own_fetch_blocked = f.io_ns + f.net_ns;
    // A trainer blocked on a device outside its loader (a checkpoint's
    // fsync, code or an mmap'd file paged in during a step) computes
    // nothing meanwhile: that time is its own, not its compute.
    let not_computing = if emulated {
        wait_ns + own.on_cpu + own.runnable + gil_ns + own_fetch_blocked
    } else {
        wait_ns + gil_ns + f.cpu_ns + f.queued_ns + own_fetch_blocked + f.own_io_ns
    };
    let au = if window_ns == 0 {
        100.0
    } else {
        (1.0 - not_computing as f64 / window_ns as f64).clamp(0.0, 1.0) * 100.0
    };
    // Its own time besides fetching: a trainer's D-state I/O outside its
    // loader (a checkpoint's fsync), or what a sleeping consumer does
    // neither computing nor waiting.
    let own_ns = if emulated {
        window_ns.saturating_sub(
            compute_ns
                .saturating_add(wait_ns)
                .saturating_add(gil_ns)
                .saturating_add(own_fetch_blocked),
        )
    } else {
        f.own_io_ns
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
        own_io_ns: f.own_io_ns.min(own_ns),
        timed_out_wait_ns: timed_out,
        gil_ns,
        lock_ns,
        queued_ns: own.runnable,
        fetch_cpu_ns: f.cpu_ns,
        fetch_queued_ns: f.queued_ns,
        fetch_io_ns: f.io_ns,
        fetch_net_ns: f.net_ns,
        // A consumer that emulates its compute sleeps once a step, where a
        // batch can take it several wake-ups (PyTorch's workers pass a
        // batch's tensors as file descriptors over sockets): its sleeps
        // count its steps.
        steps: if emulated && timer_sleeps > 0 {
            timer_sleeps
        } else {
            deliveries.max(timer_sleeps)
        },
        epoch_starts,
        epoch_start_wait_ns,
    }
}

/// Of the consumer's data waits `waits`, what each waker delivered in
/// the window (ns), and the deliveries there. Without window buckets the
/// wait for the first batch is start-up, not training (DLIO excludes the
/// first step too).
fn deliveries_in_window(ctx: &ConsumerCtx, waits: &[&InEdge]) -> (Vec<(ThreadId, u64)>, u64) {
    let first_edge = waits
        .iter()
        .min_by(|a, b| a.edge.first_s.total_cmp(&b.edge.first_s))
        .map(|e| e.edge);
    let mut delivered = Vec::new();
    let mut deliveries = 0u64;
    for e in waits {
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
    (delivered, deliveries)
}

/// Puts the consumer `c`'s data waits on the critical path: each waker's
/// delivered time, plus its share of the waits a timer ended
/// (`timed_out`); with no waker, the timed-out waits are unattributed.
fn attribute_data_waits(
    walk: &Walk,
    c: ThreadId,
    delivered: &[(ThreadId, u64)],
    timed_out: u64,
    acc: &mut PathAcc,
) {
    let delivered_ns: u64 = delivered.iter().map(|(_, ns)| ns).sum();
    for &(w, ns) in delivered {
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
}

/// The consumer `c`'s time waiting for the GIL, ns (`gil`: the share of
/// its lock waits that are the GIL's), put on the critical path.
fn gil_wait_ns(walk: &Walk, c: ThreadId, gil: f64, acc: &mut PathAcc) -> u64 {
    let g = walk.g;
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
    gil_ns
}

/// A consumer's own fetching in the window, ns, from its stacks, and its
/// time outside training to take off its window.
#[derive(Default)]
struct OwnFetching {
    cpu_ns: u64,
    queued_ns: u64,
    io_ns: u64,
    net_ns: u64,
    /// A consumer without deliveries (they start and end a window): its
    /// own time in its loop, after its start-up and before its tear-down.
    loop_ns: Option<u64>,
    /// Its time in D outside its loader, ns.
    own_io_ns: u64,
}

fn own_fetching(
    ctx: &ConsumerCtx,
    walk: &Walk,
    c: ThreadId,
    emulated: bool,
    no_deliveries: bool,
) -> OwnFetching {
    let (g, whole) = (walk.g, walk.whole);
    let own_time = ctx.own_time.get(&c).copied().unwrap_or_default();
    // A trainer that loads its samples itself has no deliveries to start
    // its window at: its loop is its time after its start-up (imports,
    // building its model) and before its tear-down, which its samples
    // measure on a CPU.
    let period_ns = 1e9 / ctx.session.info.freq_hz.max(1) as f64;
    let span = ctx
        .session
        .timeseries
        .as_ref()
        .and_then(|ts| ts.threads.iter().find(|t| (t.pid, t.tid) == c))
        .filter(|_| no_deliveries && !emulated && own_time.all > 0)
        .and_then(|series| {
            let cpu_ns = |samples: u64| (samples as f64 * period_ns) as u64;
            let startup = own_time.startup - own_time.teardown;
            own_time::loop_span(series, cpu_ns(startup), cpu_ns(own_time.teardown))
        });
    // Its states over its loop, or over the window; and its blocked time
    // over the span the stacks cover (the loop; else the recording).
    let (w, all_blocked) = match span {
        Some(s) => (s, s.blocked),
        None => {
            let st = g.states.get(&c).copied().unwrap_or_default();
            let window = own_time::LoopSpan {
                on_cpu: st.on_cpu as f64,
                runnable: st.runnable as f64,
                blocked: st.sleeping.saturating_add(st.io) as f64,
                io: st.io as f64,
            };
            let whole_blocked = whole
                .states
                .get(&c)
                .map_or(0, |st| st.sleeping.saturating_add(st.io));
            (window, whole_blocked as f64)
        }
    };
    // Its own waits on a device or a socket inside the loader's API (a
    // loader in its own thread): no thread of the data side ends them, so
    // they are no delivery. The stacks span the recording: a window
    // between deliveries holds its share of the thread's blocked time; its
    // loop holds all of them (its start-up, blocked in imports and page
    // faults, takes no batch).
    let in_span = match span {
        Some(_) => 1.0,
        None => (w.blocked / all_blocked.max(1.0)).min(1.0),
    };
    let io_ns = (own_time.fetch_io_us as f64 * 1e3 * in_span).min(w.blocked);
    let net_ns = (own_time.fetch_net_us as f64 * 1e3 * in_span).min(w.blocked - io_ns);
    // Its CPU inside that API (unpickling a batch, starting an epoch's
    // workers, decoding samples itself) is fetching, not its compute,
    // and so is the time it was queued for a CPU there: over its loop,
    // what its samples there measure, and of its queueing the share of
    // its loop's time (on a CPU and blocked) it spent there, as a thread
    // queues both when preempted (in proportion to its CPU) and after
    // each wake-up (in proportion to its waits: a trainer woken by every
    // received packet of its samples queues there); over a window between
    // deliveries, its samples' share of its time (a sleeping consumer's
    // CPU is all fetching already).
    let (cpu_ns, queued_ns) = if emulated {
        (0.0, 0.0)
    } else if span.is_some() {
        let cpu = (own_time.fetch as f64 * period_ns).min(w.on_cpu);
        let in_loader = (cpu + io_ns + net_ns) / (w.on_cpu + w.blocked).max(1.0);
        (cpu, w.runnable * in_loader.min(1.0))
    } else {
        let share = own_time.fetch as f64 / own_time.all.max(1) as f64;
        (w.on_cpu * share, w.runnable * share)
    };
    OwnFetching {
        cpu_ns: cpu_ns as u64,
        queued_ns: queued_ns as u64,
        io_ns: io_ns as u64,
        net_ns: net_ns as u64,
        loop_ns: span.map(|s| s.total() as u64),
        own_io_ns: (w.io - io_ns).max(0.0) as u64,
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
