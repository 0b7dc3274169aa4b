//! Synthetic sessions shaped like real loaders: a trainer with forked
//! workers, pool threads that are idle or fork-joined, a lock among
//! loader threads, a plain reader. Figures are per 1-second bucket
//! over 10 buckets; the window is buckets 1..9.
//!
//! `locks`: loader threads at a lock, the GIL, a fork-join pool, a plain
//! reader; `windows`: the training window and what a consumer's AU counts.
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

/// Wake-ups from `waker` to `wakee` between `span_s`, with per-bucket
/// (bucket, blocked ns, count); the totals are their sums.
fn wakes(
    waker: (u32, u32),
    wakee: (u32, u32),
    syscall: &str,
    span_s: (f64, f64),
    series: Vec<(u32, u64, u64)>,
) -> WakeEdge {
    WakeEdge {
        blocked_ns: series.iter().map(|s| s.1).sum(),
        count: series.iter().map(|s| s.2).sum(),
        first_s: span_s.0,
        last_s: span_s.1,
        series,
        ..edge(waker, wakee, syscall, 0, 0)
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

mod locks;
mod windows;
