//! Synthetic sessions shaped like real loaders: a trainer with forked
//! workers, pool threads that are idle or fork-joined, a lock among
//! loader threads, a plain reader. Figures are per 1-second bucket
//! over 10 buckets; the window is buckets 1..9.
use super::{consumer::emulates_compute, *};
use crate::{
    VerdictId,
    verdict::{Detail, Note},
};
use storprof_session::model::{
    OffCpuNs, ProcessInfo, SessionInfo, ThreadSeries, ThreadStats, TimeSeries, WaitGraph, WakeEdge,
};

const S: u64 = 1_000_000_000;
const BUCKETS: usize = 10;

/// A thread whose every bucket has the given ns on CPU, runnable,
/// sleeping and in D.
struct T {
    pid: u32,
    tid: u32,
    comm: &'static str,
    per_bucket: [u64; 4],
    read_bytes: u64,
}

fn edge(
    waker: (u32, u32),
    wakee: (u32, u32),
    syscall: &str,
    ns_per_bucket: u64,
    n_per_bucket: u64,
) -> WakeEdge {
    WakeEdge {
        waker_kind: "task".into(),
        waker_pid: waker.0,
        waker_tid: waker.1,
        waker_comm: "w".into(),
        waker_traced: true,
        wakee_pid: wakee.0,
        wakee_tid: wakee.1,
        wakee_state: "sleeping".into(),
        syscall: Some(syscall.into()),
        futex_shared: false,
        lock_wait: false,
        blocked_ns: ns_per_bucket * BUCKETS as u64,
        count: n_per_bucket * BUCKETS as u64,
        first_s: 0.5,
        last_s: BUCKETS as f64 - 0.5,
        first_blocked_ns: 0,
        waker_stack: Vec::new(),
        series: (0..BUCKETS as u32)
            .map(|b| (b, ns_per_bucket, n_per_bucket))
            .collect(),
    }
}

fn timer(wakee: (u32, u32), ns_per_bucket: u64) -> WakeEdge {
    WakeEdge {
        waker_kind: "timer".into(),
        waker_pid: 0,
        waker_tid: 0,
        waker_traced: false,
        syscall: Some("clock_nanosleep".into()),
        ..edge((0, 0), wakee, "clock_nanosleep", ns_per_bucket, 50)
    }
}

/// A futex wait; `shared`: the waker waited on the same word lately.
fn futex(waker: (u32, u32), wakee: (u32, u32), shared: bool, ns: u64) -> WakeEdge {
    WakeEdge {
        futex_shared: shared,
        ..edge(waker, wakee, "futex", ns, 100)
    }
}

fn session(threads: &[T], procs: &[(u32, u32)], edges: Vec<WakeEdge>) -> Session {
    let b = BUCKETS as u64;
    let stats = threads
        .iter()
        .map(|t| ThreadStats {
            pid: t.pid,
            tid: t.tid,
            comm: t.comm.into(),
            on_cpu_ns: t.per_bucket[0] * b,
            off_cpu_ns: OffCpuNs {
                runnable: t.per_bucket[1] * b,
                sleeping: t.per_bucket[2] * b,
                uninterruptible: t.per_bucket[3] * b,
                other: 0,
            },
            samples_user: t.per_bucket[0] / 10_000_000 * b,
            samples_kernel: 0,
            read_bytes: t.read_bytes,
            ..ThreadStats::default()
        })
        .collect();
    let series = threads
        .iter()
        .map(|t| ThreadSeries {
            pid: t.pid,
            tid: t.tid,
            comm: t.comm.into(),
            first_bucket: 0,
            on_cpu_ns: vec![t.per_bucket[0]; BUCKETS],
            read_bytes: vec![t.read_bytes / b; BUCKETS],
            runnable_ns: vec![t.per_bucket[1]; BUCKETS],
            sleeping_ns: vec![t.per_bucket[2]; BUCKETS],
            blocked_io_ns: vec![t.per_bucket[3]; BUCKETS],
        })
        .collect();
    Session {
        info: SessionInfo {
            format_version: 2,
            num_cpus: 8,
            duration_s: BUCKETS as f64,
            freq_hz: 99,
            processes: procs
                .iter()
                .map(|&(pid, ppid)| ProcessInfo {
                    pid,
                    ppid,
                    comm: "python".into(),
                })
                .collect(),
            ..SessionInfo::default()
        },
        threads: stats,
        timeseries: Some(TimeSeries {
            bucket_ns: S,
            threads: series,
            ..TimeSeries::default()
        }),
        waits: Some(WaitGraph {
            bucket_ns: S,
            edges,
            pending: Vec::new(),
        }),
        ..Session::default()
    }
}

fn assert_verdict(a: &crate::Analysis, want: VerdictId) {
    assert_eq!(
        a.decision.primary.verdict, want,
        "{:?}",
        a.decision.primary.detail
    );
}

/// The share of its own time a checkpoint-bound consumer spent in
/// uninterruptible I/O (≥ 0.5: storage is the limit, else the saving).
fn own_io_share(a: &crate::Analysis) -> f64 {
    match &a.decision.primary.detail {
        Detail::CheckpointBound { own_io_share, .. } => *own_io_share,
        d => panic!("not checkpoint-bound: {d:?}"),
    }
}

const MS: u64 = 1_000_000;
const TRAINER: (u32, u32) = (100, 100);
const WORKER: (u32, u32) = (200, 200);
const FEEDER: (u32, u32) = (200, 201);

/// The #330 shape: a trainer whose main thread waits for a forked
/// worker; the worker decodes on CPU and fork-joins one pyarrow pool
/// thread; three more pool threads (and the trainer's OpenMP-like pool)
/// sit on futexes all the time.
fn dataloader(consumer_wait_ms: u64, worker_cpu_ms: u64) -> Session {
    let consumer_sleep = 1000 - consumer_wait_ms - 20;
    let mut threads = vec![
        T {
            pid: 100,
            tid: 100,
            comm: "python",
            per_bucket: [20 * MS, 0, (consumer_wait_ms + consumer_sleep) * MS, 0],
            read_bytes: 1 << 20,
        },
        T {
            pid: 200,
            tid: 200,
            comm: "pt_data_worker",
            per_bucket: [worker_cpu_ms * MS, 0, (1000 - worker_cpu_ms) * MS, 0],
            read_bytes: 100 << 20,
        },
        T {
            pid: 200,
            tid: 201,
            comm: "QueueFeederThr",
            per_bucket: [5 * MS, 0, 995 * MS, 0],
            read_bytes: 0,
        },
    ];
    for tid in 202..=205 {
        threads.push(T {
            pid: 200,
            tid,
            comm: "arrow-cpu",
            per_bucket: if tid == 202 {
                [200 * MS, 0, 800 * MS, 0]
            } else {
                [0, 0, 1000 * MS, 0]
            },
            read_bytes: 0,
        });
    }
    for tid in 101..=104 {
        threads.push(T {
            pid: 100,
            tid,
            comm: "omp",
            per_bucket: [0, 0, 1000 * MS, 0],
            read_bytes: 0,
        });
    }
    let idle_ms = 1000 - worker_cpu_ms - 150;
    let edges = vec![
        // Data: the feeder writes the result pipe.
        edge(FEEDER, TRAINER, "poll", consumer_wait_ms * MS, 10),
        timer(TRAINER, consumer_sleep * MS),
        // The worker hands results to its feeder thread.
        futex(WORKER, FEEDER, false, 995 * MS),
        // The next index comes from the trainer (backpressure).
        edge(TRAINER, WORKER, "read", idle_ms * MS, 10),
        // Fork-join: the worker waits on pool thread 202.
        futex((200, 202), WORKER, false, 150 * MS),
        futex(WORKER, (200, 202), false, 800 * MS),
    ];
    session(&threads, &[(100, 0), (200, 100)], edges)
}

#[test]
fn dataloader_roles_consumer_window_and_fork_join_path() {
    let s = dataloader(600, 700);
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.consumers.len(), 1);
    assert_eq!((w.consumers[0].pid, w.consumers[0].tid), TRAINER);
    let role = |id: ThreadId| w.role_of(id.0, id.1).unwrap();
    assert_eq!(role(WORKER), Role::Loader);
    assert_eq!(role(FEEDER), Role::Loader);
    assert_eq!(role((200, 202)), Role::Helper);
    for idle in [(200, 203), (200, 204), (200, 205), (100, 101)] {
        assert_eq!(role(idle), Role::Idle, "{idle:?}");
    }
    // 600 of 1000 ms waited for data per bucket; its 20 ms of CPU is
    // fetching (it emulates compute with sleeps): AU 38%.
    let au = w.kernel_au_percentage.unwrap();
    assert!((au - 38.0).abs() < 0.5, "{au}");
    let window = w.window.as_ref().unwrap();
    assert_eq!(window.buckets, Some((1, 9)));
    // The wait goes through the feeder to the worker (on CPU 700 of its
    // 850 non-idle ms) and through the fork-join to the pool thread.
    let cpu = w.share(&[PathKind::CpuUser, PathKind::CpuKernel]);
    assert!(cpu > 0.95, "{:?}", w.critical_path);
    let pool: f64 = w
        .critical_path
        .iter()
        .flat_map(|p| &p.threads)
        .filter(|t| t.1 == 202)
        .map(|t| t.3)
        .sum();
    assert!(pool > 0.1 && pool < 0.3, "{:?}", w.critical_path);
    assert!(w.share(&[PathKind::Lock]) == 0.0, "{:?}", w.critical_path);
}

#[test]
fn idle_pool_threads_no_longer_make_lock_contention() {
    let mut s = dataloader(600, 700);
    // pyarrow's pool threads read column chunks too, and every sleep of
    // the worker's threads is a futex wait.
    for t in &mut s.threads {
        if t.pid == 200 {
            t.syscalls.push(storprof_session::model::SyscallStats {
                nr: 202,
                name: "futex".into(),
                count: 1000,
                total_ns: t.off_cpu_ns.sleeping,
                ..Default::default()
            });
            if t.comm == "arrow-cpu" {
                t.read_bytes = 20 << 20;
            }
        }
    }
    let a = crate::analyze(&s, &Thresholds::default());
    assert_verdict(&a, VerdictId::CpuBoundReader);
    assert_eq!(a.decision.rules.as_str(), "wait-graph");
    // The same session read by summed thread time: the workers' threads
    // sleep on futexes most of the time.
    let mut old = s.clone();
    old.waits = None;
    old.info.format_version = 1;
    let a = crate::analyze(&old, &Thresholds::default());
    assert_eq!(a.decision.rules.as_str(), "format-1");
    assert_verdict(&a, VerdictId::LockContention);
}

#[test]
fn a_consumer_that_hardly_waits_is_compute_bound() {
    let s = dataloader(10, 300);
    let a = crate::analyze(&s, &Thresholds::default());
    assert_verdict(&a, VerdictId::ComputeBound);
    let au = a.decision.kernel_au_percentage.unwrap();
    assert!(au > 95.0, "{au}");
}

#[test]
fn a_sleep_the_time_series_and_the_edges_put_in_different_buckets_does_not_move_the_au() {
    let s = dataloader(10, 300);
    let before = analyze(&s, &Thresholds::default()).unwrap();
    let window = before.window.as_ref().unwrap().buckets.unwrap();
    // The time series was read just before a 500-ms sleep ended at the
    // tick that closed the bucket before the window, the edges just
    // after: the series has the sleep inside the window, the edges
    // outside.
    let mut shifted = s.clone();
    let series = shifted.timeseries.as_mut().unwrap();
    let trainer = series
        .threads
        .iter_mut()
        .find(|t| (t.pid, t.tid) == TRAINER)
        .unwrap();
    trainer.sleeping_ns[window.0 - 1] -= 500 * MS;
    trainer.sleeping_ns[window.0] += 500 * MS;
    let after = analyze(&shifted, &Thresholds::default()).unwrap();
    let (au0, au1) = (
        before.kernel_au_percentage.unwrap(),
        after.kernel_au_percentage.unwrap(),
    );
    assert!((au0 - au1).abs() < 0.01, "{au0} -> {au1}");
    // Without edges for most of its blocked time the series is the
    // account, shift and all.
    let mut no_timer = shifted.clone();
    for e in &mut no_timer.waits.as_mut().unwrap().edges {
        if e.waker_kind == "timer" {
            e.blocked_ns = 0;
        }
    }
    let lost = analyze(&no_timer, &Thresholds::default()).unwrap();
    let consumer = &lost.consumers[0];
    assert_eq!(consumer.window_ns, {
        let t = &shifted.timeseries.as_ref().unwrap().threads;
        let t = t.iter().find(|t| (t.pid, t.tid) == TRAINER).unwrap();
        (window.0..window.1)
            .map(|b| t.on_cpu_ns[b] + t.runnable_ns[b] + t.sleeping_ns[b] + t.blocked_io_ns[b])
            .sum::<u64>()
    });
}

/// DLIO's shape with checkpoints on: the trainer (which emulates compute
/// with timed sleeps) hardly waits for data but spends `own_ms` of
/// every second of its window saving a checkpoint in its own thread,
/// on CPU or, with `in_d`, in uninterruptible waits (fsync).
fn checkpointing_trainer(own_ms: u64, in_d: bool) -> Session {
    let wait_ms = 20;
    let compute_ms = 1000 - wait_ms - own_ms;
    let mut s = dataloader(wait_ms, 300);
    s.info.command = vec!["dlio_benchmark".into(), "workload=unet3d_a100".into()];
    let (cpu, d) = if in_d { (0, own_ms) } else { (own_ms, 0) };
    let per_bucket = [cpu * MS, 0, (wait_ms + compute_ms) * MS, d * MS];
    let b = BUCKETS as u64;
    for t in s.threads.iter_mut().filter(|t| (t.pid, t.tid) == TRAINER) {
        t.on_cpu_ns = per_bucket[0] * b;
        t.off_cpu_ns.sleeping = per_bucket[2] * b;
        t.off_cpu_ns.uninterruptible = per_bucket[3] * b;
        t.write_bytes = 2 << 30;
    }
    let series = s.timeseries.as_mut().unwrap();
    for t in series
        .threads
        .iter_mut()
        .filter(|t| (t.pid, t.tid) == TRAINER)
    {
        t.on_cpu_ns = vec![per_bucket[0]; BUCKETS];
        t.sleeping_ns = vec![per_bucket[2]; BUCKETS];
        t.blocked_io_ns = vec![per_bucket[3]; BUCKETS];
    }
    for e in &mut s.waits.as_mut().unwrap().edges {
        if e.waker_kind == "timer" {
            *e = timer(TRAINER, compute_ms * MS);
        }
    }
    s
}

#[test]
fn a_trainer_saving_checkpoints_in_its_own_thread_is_checkpoint_bound() {
    let s = checkpointing_trainer(600, false);
    let w = analyze(&s, &Thresholds::default()).unwrap();
    let c = &w.consumers[0];
    assert_eq!(c.write_bytes, 2 << 30);
    let own = c.own_ns as f64 / c.window_ns as f64;
    assert!((own - 0.6).abs() < 0.02, "{own}");
    assert_eq!(c.own_io_ns, 0);
    let a = crate::analyze(&s, &Thresholds::default());
    assert_verdict(&a, VerdictId::CheckpointBound);
    // The saving itself (on a CPU), not storage, is the limit.
    assert!(own_io_share(&a) < 0.5, "{:?}", a.decision.primary.detail);
    // The same time in fsync: storage is the limit.
    let a = crate::analyze(&checkpointing_trainer(600, true), &Thresholds::default());
    assert_verdict(&a, VerdictId::CheckpointBound);
    assert!(own_io_share(&a) >= 0.5, "{:?}", a.decision.primary.detail);
    let checkpoint_fired = |s: &Session| {
        let a = crate::analyze(s, &Thresholds::default());
        a.decision.primary.verdict == VerdictId::CheckpointBound
            || a.decision
                .runners_up
                .iter()
                .any(|r| r.verdict == VerdictId::CheckpointBound && r.fired)
    };
    // A short save (10% of the window) is not the limit.
    assert!(!checkpoint_fired(&checkpointing_trainer(100, false)));
    // Nor is the own time of a trainer that wrote nothing.
    let mut quiet = checkpointing_trainer(600, false);
    for t in &mut quiet.threads {
        t.write_bytes = 0;
    }
    assert!(!checkpoint_fired(&quiet));
}

#[test]
fn benchmarks_are_known_through_a_shell_or_by_their_process_name() {
    let mut s = dataloader(10, 300);
    s.info.command = vec!["python".into(), "train.py".into()];
    assert!(!emulates_compute(&s));
    s.info.command = vec![
        "sh".into(),
        "-c".into(),
        "echo $$ > cgroup.procs && exec /venv/bin/dlio_benchmark workload=unet3d_a100".into(),
    ];
    assert!(emulates_compute(&s));
    s.info.command = vec![
        "sh".into(),
        "-c".into(),
        "storprof bench --workload flux".into(),
    ];
    assert!(emulates_compute(&s));
    s.info.command = vec!["./run.sh".into()];
    s.info.processes[0].comm = "dlio_benchmark".into();
    assert!(emulates_compute(&s));
}

const LOCK_MAIN: (u32, u32) = (300, 300);

/// A main thread fed by four loader threads of its process, each reading
/// and on CPU `cpu_ms[i]` of each second, with the lock waits
/// `lock_edges(i, loaders)` gives for loader `i`.
fn four_loaders(
    cpu_ms: [u64; 4],
    lock_edges: impl Fn(usize, &[(u32, u32)]) -> Vec<WakeEdge>,
) -> Session {
    let loaders: Vec<(u32, u32)> = (301..=304).map(|t| (300, t)).collect();
    let mut threads = vec![T {
        pid: 300,
        tid: 300,
        comm: "python",
        per_bucket: [10 * MS, 0, 990 * MS, 0],
        read_bytes: 0,
    }];
    let mut edges = vec![timer(LOCK_MAIN, 200 * MS)];
    for (i, &l) in loaders.iter().enumerate() {
        threads.push(T {
            pid: 300,
            tid: l.1,
            comm: "loader",
            per_bucket: [cpu_ms[i] * MS, 0, (1000 - cpu_ms[i]) * MS, 0],
            read_bytes: 50 << 20,
        });
        edges.push(edge(l, LOCK_MAIN, "futex", 195 * MS, 5));
        edges.extend(lock_edges(i, &loaders));
    }
    session(&threads, &[(300, 0)], edges)
}

#[test]
fn loader_threads_serialized_by_one_lock_are_lock_contention() {
    // Each waits on the one lock, released by the next, which waited on
    // it too.
    let s = four_loaders([250; 4], |i, loaders| {
        vec![futex(
            loaders[(i + 1) % loaders.len()],
            loaders[i],
            true,
            700 * MS,
        )]
    });
    let a = crate::analyze(&s, &Thresholds::default());
    let w = a.wait.as_ref().unwrap();
    assert_eq!((w.consumers[0].pid, w.consumers[0].tid), LOCK_MAIN);
    assert!(w.share(&[PathKind::Lock]) > 0.6, "{:?}", w.critical_path);
    assert_verdict(&a, VerdictId::LockContention);
}

#[test]
fn a_worker_and_its_feeder_taking_turns_at_the_gil_are_not_lock_contention() {
    // DLIO #330: the worker formats on CPU holding the GIL; its feeder
    // waits for the GIL to send the last batch, and the worker waited on
    // the same word when the feeder had it. Both are loaders.
    let mut s = dataloader(600, 900);
    for e in &mut s.waits.as_mut().unwrap().edges {
        if (e.waker_pid, e.waker_tid) == WORKER && (e.wakee_pid, e.wakee_tid) == FEEDER {
            e.futex_shared = true;
        }
    }
    s.waits
        .as_mut()
        .unwrap()
        .edges
        .push(futex(FEEDER, WORKER, true, 20 * MS));
    let a = crate::analyze(&s, &Thresholds::default());
    let w = a.wait.as_ref().unwrap();
    assert_eq!(w.role_of(FEEDER.0, FEEDER.1), Some(Role::Loader));
    assert_eq!(w.share(&[PathKind::Lock]), 0.0, "{:?}", w.critical_path);
    assert_verdict(&a, VerdictId::CpuBoundReader);
    // A feeder that does a third of the pair's work under the same lock
    // is contention: without the lock the pair could go 1.5x faster.
    let mut shared = s.clone();
    for series in &mut shared.timeseries.as_mut().unwrap().threads {
        if (series.pid, series.tid) == FEEDER {
            series.on_cpu_ns = vec![450 * MS; BUCKETS];
        }
    }
    let w = analyze(&shared, &Thresholds::default()).unwrap();
    assert!(w.share(&[PathKind::Lock]) > 0.3, "{:?}", w.critical_path);
}

#[test]
fn readers_starved_at_an_unfair_lock_are_lock_contention() {
    // One of four readers wins the lock nearly every time: it does most
    // of the CPU work, the others wait to do theirs.
    let s = four_loaders([900, 30, 30, 30], |i, loaders| {
        if i == 0 {
            return Vec::new();
        }
        vec![
            futex(loaders[0], loaders[i], true, 900 * MS),
            futex(loaders[i], loaders[0], true, 50 * MS),
        ]
    });
    let a = crate::analyze(&s, &Thresholds::default());
    let w = a.wait.as_ref().unwrap();
    assert!(w.share(&[PathKind::Lock]) > 0.3, "{:?}", w.critical_path);
}

#[test]
fn fork_join_on_a_pool_is_not_lock_contention() {
    // The pool thread never waits on the word the worker waits on: a
    // hand-off. A shared word between a loader and a helper is not
    // contention among loaders either.
    let mut s = dataloader(600, 300);
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.share(&[PathKind::Lock]), 0.0);
    for e in &mut s.waits.as_mut().unwrap().edges {
        if (e.waker_pid, e.waker_tid) == (200, 202) {
            e.futex_shared = true;
        }
    }
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.share(&[PathKind::Lock]), 0.0, "{:?}", w.critical_path);
}

#[test]
fn a_plain_reader_has_no_consumer() {
    let threads = [T {
        pid: 400,
        tid: 400,
        comm: "cat",
        per_bucket: [900 * MS, 0, 0, 100 * MS],
        read_bytes: 500 << 20,
    }];
    let s = session(&threads, &[(400, 0)], Vec::new());
    let a = crate::analyze(&s, &Thresholds::default());
    let w = a.wait.as_ref().unwrap();
    assert!(w.consumers.is_empty());
    assert!(w.notes.iter().any(|n| n.contains("no consumer")));
    assert_eq!(a.decision.rules.as_str(), "readers");
    assert!(
        a.decision
            .notes
            .iter()
            .any(|n| matches!(n, Note::WaitGraph(t) if t.contains("no consumer")))
    );
}

#[test]
fn the_window_starts_at_the_first_delivery_not_at_a_spawned_workers_start() {
    // A spawned worker imports for 3 s while the trainer sits in a
    // write to its full pipe (and a vfork before): data arrives from
    // 3.5 s on.
    let mut s = dataloader(600, 700);
    let edges = &mut s.waits.as_mut().unwrap().edges;
    for e in edges.iter_mut() {
        if (e.wakee_pid, e.wakee_tid) == TRAINER && e.syscall.as_deref() == Some("poll") {
            e.first_s = 3.5;
        }
    }
    let mut spawn = edge(WORKER, TRAINER, "write", 0, 0);
    spawn.blocked_ns = 3 * S;
    spawn.count = 3;
    spawn.first_s = 0.2;
    spawn.last_s = 3.2;
    spawn.series = vec![(0, S, 1), (1, S, 1), (2, S, 1)];
    let mut vfork = edge(WORKER, TRAINER, "vfork", 0, 0);
    vfork.first_s = 0.1;
    vfork.last_s = 0.1;
    vfork.series = vec![(0, MS, 1)];
    edges.extend([spawn, vfork]);
    let w = analyze(&s, &Thresholds::default()).unwrap();
    let window = w.window.as_ref().unwrap();
    assert_eq!(window.start_s, 3.5);
    assert!(
        window.source.contains("first data delivery"),
        "{}",
        window.source
    );
    assert_eq!(window.buckets, Some((4, 9)));
    // Only the steady state counts: 600 ms of every 1000 waited.
    let au = w.kernel_au_percentage.unwrap();
    assert!((au - 38.0).abs() < 0.5, "{au}");
}

#[test]
fn a_forkservers_reply_with_a_workers_pid_is_not_a_data_delivery() {
    // Python's forkserver (a child of the trainer) forks the worker and
    // answers the trainer's request with the new pid at 0.5 s; the
    // worker wakes the forkserver (its exit status pipe); data arrives
    // from 3.5 s on.
    const FORKSERVER: (u32, u32) = (300, 300);
    let mut s = dataloader(600, 700);
    let edges = &mut s.waits.as_mut().unwrap().edges;
    for e in edges.iter_mut() {
        if (e.wakee_pid, e.wakee_tid) == TRAINER && e.syscall.as_deref() == Some("poll") {
            e.first_s = 3.5;
        }
    }
    let mut reply = edge(FORKSERVER, TRAINER, "poll", 0, 0);
    reply.blocked_ns = 2 * S;
    reply.count = 1;
    reply.first_s = 0.5;
    reply.last_s = 0.5;
    reply.series = vec![(0, 2 * S, 1)];
    let mut child = edge(WORKER, FORKSERVER, "read", 0, 0);
    child.blocked_ns = 9 * S;
    child.count = 1;
    child.first_s = 9.5;
    child.last_s = 9.5;
    child.series = vec![(9, 9 * S, 1)];
    edges.extend([reply, child]);
    s.info.processes = [(100, 0), (300, 100), (200, 300)]
        .iter()
        .map(|&(pid, ppid)| ProcessInfo {
            pid,
            ppid,
            comm: "python".into(),
        })
        .collect();
    s.threads.push(ThreadStats {
        pid: FORKSERVER.0,
        tid: FORKSERVER.1,
        comm: "python".into(),
        ..ThreadStats::default()
    });
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.window.as_ref().unwrap().start_s, 3.5);
    assert_ne!(w.role_of(FORKSERVER.0, FORKSERVER.1), Some(Role::Loader));
    assert_eq!(w.role_of(WORKER.0, WORKER.1), Some(Role::Loader));
}

#[test]
fn the_first_batch_wait_is_start_up() {
    // No per-bucket states: the whole-run figures, less the first wait.
    let mut s = dataloader(600, 700);
    s.timeseries = None;
    for e in &mut s.waits.as_mut().unwrap().edges {
        e.series.clear();
        if (e.wakee_pid, e.wakee_tid) == TRAINER && e.syscall.as_deref() == Some("poll") {
            e.first_blocked_ns = 3 * S;
            e.blocked_ns += 3 * S;
        }
    }
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.window.as_ref().unwrap().buckets, None);
    assert_eq!(w.consumers[0].data_wait_ns, 6 * S);
}

#[test]
fn a_consumers_own_fetching_is_what_its_au_loses_besides_its_waits() {
    let consumer = |emulated: bool, queued_ns: u64| -> ConsumerTime {
        serde_json::from_value(serde_json::json!({
            "pid": 1, "tid": 1, "comm": "python3",
            // 10 s of window at AU 80%: 2 s not computing, 0.5 s of it
            // waiting for data and 0.25 s for the GIL.
            "window_ns": 10_000_000_000u64, "au_percentage": 80.0,
            "data_wait_ns": 500_000_000u64, "gil_ns": 250_000_000u64,
            "compute_ns": 8_000_000_000u64, "emulated_compute": emulated,
            "queued_ns": queued_ns,
        }))
        .unwrap()
    };
    let sleeper = consumer(true, 2_000_000_000);
    assert_eq!(sleeper.own_fetch_ns(), 1_250_000_000);
    // Queued for a CPU longer than it fetched: the queue counts up to it.
    assert_eq!(sleeper.own_fetch_queued_ns(), 1_250_000_000);
    // A real trainer's queueing is not fetching.
    assert_eq!(consumer(false, 2_000_000_000).own_fetch_queued_ns(), 0);
}

#[test]
fn a_trainer_loading_its_own_batches_is_its_own_cpu_bound_reader() {
    // A DataLoader without workers: the trainer's main thread decodes
    // inside the loader's next() 8 s of 11, trains 1 s in the same loop,
    // imported 1 s and built its model 1 s before the loop; it never
    // blocks. A short-lived child (ldconfig at torch's import)
    // wrote to it once.
    let threads = [
        T {
            pid: 100,
            tid: 100,
            comm: "python",
            per_bucket: [1000 * MS, 0, 0, 0],
            read_bytes: 100 << 20,
        },
        T {
            pid: 100,
            tid: 101,
            comm: "python",
            per_bucket: [0, 0, 1000 * MS, 0],
            read_bytes: 0,
        },
    ];
    let mut child = edge((300, 300), TRAINER, "read", 0, 0);
    child.count = 8;
    child.series = vec![(0, MS, 8)];
    let mut s = session(&threads, &[(100, 0), (300, 100)], vec![child]);
    let stack = |frames: &str, n: u64| {
        (
            format!("python;[100/100];<module> (/t/train.py:9);{frames}"),
            n,
        )
    };
    s.oncpu_threads.stacks = vec![
        stack(
            "train (/t/train.py:61);_BaseDataLoaderIter.__next__ (/v/torch/utils/data/dataloader.py:733);ImageFile.load (/v/PIL/ImageFile.py:290);decode",
            792,
        ),
        stack(
            "train (/t/train.py:64);train_step (/t/train.py:40);sgemm",
            99,
        ),
        stack(
            "_find_and_load (<frozen importlib._bootstrap>:1176);read",
            99,
        ),
        stack("build_model (/t/train.py:20);init_weights", 99),
        // A forked worker's stacks keep the frames it was forked from.
        (
            "pt_data_worker;[200/200];<module> (/t/train.py:9);train (/t/train.py:60);\
             DataLoader.__iter__ (/v/torch/utils/data/dataloader.py:491);\
             _worker_loop (/v/torch/utils/data/_utils/worker.py:337);decode"
                .to_string(),
            900,
        ),
    ];
    let w = analyze(&s, &Thresholds::default()).unwrap();
    assert_eq!(w.consumers.len(), 1);
    assert_eq!((w.consumers[0].pid, w.consumers[0].tid), TRAINER);
    // 1 s of training in the 9 s of its loop.
    let au = w.kernel_au_percentage.unwrap();
    assert!((au - 11.1).abs() < 1.0, "{au}");
    let a = crate::analyze(&s, &Thresholds::default());
    assert_verdict(&a, VerdictId::CpuBoundReader);
}
