//! The model on recorded sessions of real loaders (tests/data/sessions):
//! the direction each lever must go on each shape, and what a recording
//! that cannot be fitted says. How close the figures come to re-runs is
//! measured by scripts/check-whatif.sh, not here.
use super::*;
use crate::{Thresholds, analyze};

fn fixture(name: &str) -> (Session, Analysis) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/sessions")
        .join(name);
    let session = storprof_session::load::load(&dir).unwrap();
    let analysis = analyze(&session, &Thresholds::default());
    (session, analysis)
}

fn projected(name: &str, kind: LeverKind, factor: f64) -> Projection {
    let (s, a) = fixture(name);
    whatif(&s, &a, &[Lever { kind, factor }]).unwrap().remove(0)
}

fn gain(p: &Projection) -> f64 {
    p.projected_au_percentage.unwrap() - p.au_percentage
}

/// A data-bound pipeline: 0.1 s steps, 0.02 s of compute, the data side
/// spending `split` of its cycle, its loaders on `loader_cpus` CPUs of
/// `cpus_for_loaders`.
fn pipeline(split: Split, loader_cpus: f64, cpus_for_loaders: f64) -> Pipeline {
    Pipeline {
        steps: 100,
        step_s: 0.1,
        compute_s: 0.02,
        overhead_s: 0.0,
        wait_s: 0.08,
        producer_s: 0.1,
        producer_known: true,
        producer_capacity_s: 0.1,
        loader_split: Some(split),
        path_split: Some(split),
        loaders: 4,
        loader_cpus,
        cpus_for_loaders,
        queued_cpus: 0.0,
        others_cpus: 0.1,
        untraced: None,
        io_headroom: None,
        device_reads: true,
        serial_share: 0.0,
    }
}

fn lever(kind: LeverKind, factor: f64) -> Lever {
    Lever { kind, factor }
}

#[test]
fn faster_storage_helps_a_storage_bound_pipeline_and_not_a_cpu_bound_reader() {
    let storage_bound = Split {
        io: 0.9,
        cpu: 0.1,
        ..Split::default()
    };
    let p = project(
        &pipeline(storage_bound, 0.2, 2.0),
        lever(LeverKind::Storage, 2.0),
    );
    // The cycle 0.1 × (1 − 0.9 / 2) = 0.055 s: AU 20% → 36.4%.
    assert!(
        (p.projected_au_percentage.unwrap() - 100.0 * 0.02 / 0.055).abs() < 1e-6,
        "{p:?}"
    );
    let cpu = projected("real-pool-cpu-bound-reader", LeverKind::Storage, 2.0);
    assert!(
        cpu.projected_au_percentage.is_none() || gain(&cpu) < 3.0,
        "{cpu:?}"
    );
}

#[test]
fn after_faster_storage_a_reader_that_becomes_cpu_bound_caps_the_gain() {
    // Half the cycle on a CPU, 0.5 CPUs used of the 0.6 left: storage ×4
    // would make the cycle 0.0625 s, but 0.05 s of CPU a step over 0.6
    // CPUs takes 0.083 s.
    let split = Split {
        io: 0.5,
        cpu: 0.5,
        ..Split::default()
    };
    let p = project(&pipeline(split, 0.5, 0.6), lever(LeverKind::Storage, 4.0));
    let capped = 100.0 * 0.02 / (0.05 / 0.6);
    assert!(
        (p.projected_au_percentage.unwrap() - capped).abs() < 1e-6,
        "{p:?}"
    );
}

#[test]
fn more_threads_at_the_storage_limit_gain_nothing() {
    let split = Split {
        io: 0.9,
        cpu: 0.1,
        ..Split::default()
    };
    let mut at_limit = pipeline(split, 0.2, 2.0);
    at_limit.io_headroom = Some(1.0);
    let p = project(&at_limit, lever(LeverKind::ReadThreads, 2.0));
    assert!((gain(&p)).abs() < 1e-6, "{p:?}");
    assert!(p.reason.contains("headroom"), "{p:?}");
    // With room to spare they halve the cycle.
    let free = project(
        &pipeline(split, 0.2, 2.0),
        lever(LeverKind::ReadThreads, 2.0),
    );
    assert!(
        (free.projected_au_percentage.unwrap() - 40.0).abs() < 1e-6,
        "{free:?}"
    );
}

#[test]
fn faster_reader_code_helps_a_cpu_bound_reader() {
    let p = projected("real-pool-cpu-bound-reader", LeverKind::ReaderCpu, 2.0);
    assert!(gain(&p) > 5.0, "{p:?}");
    let low = p.low.unwrap();
    let high = p.high.unwrap();
    assert!(
        low <= p.projected_au_percentage.unwrap() + 1e-9 && high >= low,
        "{p:?}"
    );
}

#[test]
fn longer_computation_raises_the_au_of_a_data_bound_job_and_keeps_a_compute_bound_one() {
    let data_bound = projected("real-pool-cpu-bound-reader", LeverKind::Computation, 4.0);
    assert!(gain(&data_bound) > 5.0, "{data_bound:?}");
    // Spawned workers feeding a trainer that computes 98% of its window.
    let compute_bound = projected("real-files-spawn", LeverKind::Computation, 2.0);
    assert!(
        compute_bound.projected_au_percentage.unwrap() >= compute_bound.au_percentage - 1.0,
        "{compute_bound:?}"
    );
    // Twice the computation: at most about half the steps a second.
    assert!(
        compute_bound.projected_steps_per_s.unwrap() <= compute_bound.steps_per_s * 0.52,
        "{compute_bound:?}"
    );
}

#[test]
fn more_threads_on_a_host_without_idle_cpus_gain_little() {
    let (s, a) = fixture("real-pool-cpu-bound-reader");
    let p = fit(&s, &a).unwrap();
    let more = project(
        &p,
        Lever {
            kind: LeverKind::ReadThreads,
            factor: 2.0,
        },
    );
    // The loaders already keep the CPUs left for them busy: no more than
    // those CPUs can give.
    let cycle = if p.wait_s > 0.0 {
        p.producer_s
    } else {
        p.step_s
    };
    let most = p.au_with(p.compute_s, p.loader_cpus * cycle / p.cpus_for_loaders);
    assert!(
        more.projected_au_percentage.unwrap() <= most.max(more.au_percentage) + 1e-6,
        "{more:?} {p:?}"
    );
}

#[test]
fn a_cache_lever_without_device_reads_is_not_measurable() {
    let p = projected("real-pool-cpu-bound-reader", LeverKind::Cache, 1.0);
    if p.projected_au_percentage.is_none() {
        assert!(p.reason.contains("not measurable"), "{p:?}");
    }
}

#[test]
fn a_recording_without_a_consumer_says_why_there_is_no_projection() {
    let (s, a) = fixture("real-arrow-workers-no-trainer");
    let err = whatif(&s, &a, &REPORT_LEVERS).unwrap_err();
    assert!(
        matches!(err, NoProjection::NoConsumer | NoProjection::NoWindow),
        "{err:?}"
    );
    assert!(err.to_string().starts_with("no projection"), "{err}");
}

#[test]
fn lever_names_round_trip() {
    for kind in LeverKind::ALL {
        assert_eq!(LeverKind::parse(kind.name()), Some(kind));
    }
    assert_eq!(LeverKind::parse("disk"), None);
}

#[test]
fn more_threads_behind_a_lock_they_contend_for_gain_little() {
    // Loaders waiting 73% of their cycle for a mutex another loader holds:
    // doubling them cannot halve the cycle; the lock lever is what helps.
    let (s, a) = fixture("real-threads-lock-contention");
    let p = fit(&s, &a).unwrap();
    assert!(p.serial_share > 0.5, "{p:?}");
    let threads = project(&p, lever(LeverKind::ReadThreads, 2.0));
    let lock = project(&p, lever(LeverKind::Lock, 1.0));
    assert!(gain(&threads) < gain(&lock) / 2.0, "{threads:?} {lock:?}");
    assert!(threads.reason.contains("lock"), "{threads:?}");
    // The range reaches down to no gain at all.
    assert!(
        (threads.low.unwrap() - threads.au_percentage).abs() < 1e-6,
        "{threads:?}"
    );
}

#[test]
fn the_gil_holds_back_threads_of_one_process_but_not_worker_processes() {
    let split = Split {
        cpu: 0.5,
        lock: 0.5,
        ..Split::default()
    };
    let mut threads = pipeline(split, 0.5, 2.0);
    threads.serial_share = 0.5;
    let mut processes = pipeline(split, 0.5, 2.0);
    processes.serial_share = 0.0;
    let t = project(&threads, lever(LeverKind::ReadThreads, 2.0));
    let w = project(&processes, lever(LeverKind::ReadThreads, 2.0));
    // 0.1 × (0.5 + 0.5 / 2) = 0.075 s against 0.05 s.
    assert!(
        (t.projected_au_percentage.unwrap() - 100.0 * 0.02 / 0.075).abs() < 1e-6,
        "{t:?}"
    );
    assert!(
        (w.projected_au_percentage.unwrap() - 40.0).abs() < 1e-6,
        "{w:?}"
    );
}

#[test]
fn the_loaders_idle_sleep_is_not_counted_as_a_lock_wait() {
    // DataLoader workers of a GIL-light DLIO reader sleep much of their
    // time (a full queue); the path saw 4% GIL: the lock share stays small.
    let (s, a) = fixture("real-dlio-worker-gil");
    let p = fit(&s, &a).unwrap();
    let lock = p.loader_split.unwrap().lock;
    assert!(lock < 0.15, "{p:?}");
}

#[test]
fn the_report_table_names_the_fixes_that_help_most_first() {
    let (s, a) = fixture("real-threads-lock-contention");
    let t = table(&s, &a, &REPORT_LEVERS);
    assert!(t.none.is_none() && t.today.is_some(), "{t:?}");
    assert_eq!(t.projections.len(), REPORT_LEVERS.len());
    let helps = t.helps();
    assert_eq!(
        helps.first().map(|p| p.lever),
        Some(LeverKind::Lock),
        "{helps:?}"
    );
    assert!(
        helps
            .iter()
            .all(|p| !matches!(p.lever, LeverKind::Computation | LeverKind::Accelerators))
    );
    let (s, a) = fixture("real-arrow-workers-no-trainer");
    let none = table(&s, &a, &REPORT_LEVERS);
    assert!(none.projections.is_empty() && none.helps().is_empty());
    assert!(none.none.unwrap().starts_with("no projection"));
}

#[test]
fn a_compute_bound_dlio_job_loses_nothing_with_half_its_workers() {
    // The real DLIO benchmark (the #330 reader, 2 workers, 20 ms steps):
    // the consumer waits for data 0.6% of its window and spends 7% on its
    // own (taking batches). Re-runs (scripts/check-whatif.sh dlio-compute)
    // measured DLIO's AU 92.1% with 2 workers, 92.5% with 1, 95.7% with
    // 40 ms steps: its own time is not a data wait, and half the workers
    // still keep up.
    let (s, a) = fixture("real-dlio-compute-bound");
    let p = fit(&s, &a).unwrap();
    assert!(p.wait_s < 0.02 * p.step_s, "{p:?}");
    let half = project(&p, lever(LeverKind::ReadThreads, 0.5));
    assert!(gain(&half) > -3.0, "{half:?}");
    let slower = project(&p, lever(LeverKind::Computation, 2.0));
    assert!(
        (slower.projected_au_percentage.unwrap() - 95.7).abs() < 3.0,
        "{slower:?}"
    );
    // Today's step is reproduced: no lever that changes nothing moves it.
    let storage = project(&p, lever(LeverKind::Storage, 2.0));
    assert!(gain(&storage).abs() < 0.5, "{storage:?}");
}

#[test]
fn twice_the_accelerators_on_a_busy_host_starve_each_data_side() {
    let cpu = Split {
        cpu: 1.0,
        ..Split::default()
    };
    // Loaders on 1 of the 1.9 CPUs left: two data sides need 2 of 1.8.
    let busy = project(
        &pipeline(cpu, 1.0, 1.9),
        lever(LeverKind::Accelerators, 2.0),
    );
    assert!(
        (busy.projected_au_percentage.unwrap() - 100.0 * 0.02 / (2.0 * 0.1 / 1.8)).abs() < 1e-6,
        "{busy:?}"
    );
    assert!(busy.reason.contains("CPUs left"), "{busy:?}");
    // Loaders on 0.2 CPUs: room for both, each consumer's AU as today.
    let idle = project(
        &pipeline(cpu, 0.2, 1.9),
        lever(LeverKind::Accelerators, 2.0),
    );
    assert!(gain(&idle).abs() < 1e-6, "{idle:?}");
}

#[test]
fn a_slower_consumer_lets_the_data_side_run_at_its_capacity() {
    let split = Split {
        cpu: 1.0,
        ..Split::default()
    };
    // Producers busy half of today's 0.1 s cycle: the rest was hand-off.
    let mut p = pipeline(split, 0.5, 2.0);
    p.producer_capacity_s = 0.05;
    let slower = project(&p, lever(LeverKind::Computation, 3.0));
    assert!(
        (slower.projected_au_percentage.unwrap() - 100.0).abs() < 1e-6,
        "{slower:?}"
    );
    // The range keeps today's cycle: 0.06 s of compute against 0.1 s.
    assert!((slower.low.unwrap() - 60.0).abs() < 1e-6, "{slower:?}");
    // A faster consumer waits as today.
    let faster = project(&p, lever(LeverKind::Computation, 0.5));
    assert!(
        (faster.projected_au_percentage.unwrap() - 10.0).abs() < 1e-6,
        "{faster:?}"
    );
}

#[test]
fn more_readers_of_a_network_bound_side_are_a_range_not_a_figure() {
    let net = Split {
        network: 0.5,
        cpu: 0.5,
        ..Split::default()
    };
    for kind in [LeverKind::ReadThreads, LeverKind::Accelerators] {
        let p = project(&pipeline(net, 0.2, 2.0), lever(kind, 2.0));
        assert!(p.projected_au_percentage.is_none(), "{p:?}");
        assert!(p.reason.contains("not measurable"), "{p:?}");
        assert!((p.low.unwrap() - p.au_percentage).abs() < 1e-6, "{p:?}");
    }
    // The network's own lever still projects.
    let faster = project(&pipeline(net, 0.2, 2.0), lever(LeverKind::Network, 2.0));
    assert!(gain(&faster) > 5.0, "{faster:?}");
}

#[test]
fn untraced_load_on_the_host_leaves_fewer_cpus_for_the_loaders() {
    let (mut s, a) = fixture("real-pool-cpu-bound-reader");
    let before = fit(&s, &a).unwrap();
    assert_eq!(before.untraced, None, "the fixture has no host CPU series");
    // The host as busy as the traced threads, storprof's own share, and
    // one CPU more (another process); a fifth of a CPU stolen.
    let info = &s.info;
    let observer_ns = info
        .recorder_cpu_recording_s
        .or(info.recorder_cpu_s)
        .map_or(0.0, |c| c / info.duration_s * 1e9);
    let ts = s.timeseries.as_mut().unwrap();
    let buckets = ts.bucket_count();
    let traced: Vec<u64> = (0..buckets)
        .map(|b| ts.threads.iter().map(|t| t.on_cpu().sum(b, b + 1)).sum())
        .collect();
    ts.host_cpu = Some(storprof_session::model::HostCpuSeries {
        busy_ns: traced
            .iter()
            .map(|t| t + observer_ns as u64 + 1_000_000_000)
            .collect(),
        steal_ns: vec![200_000_000; buckets],
        idle_ns: vec![0; buckets],
    });
    let after = fit(&s, &a).unwrap();
    let u = after.untraced.unwrap();
    assert!((u.others_cpus - 1.0).abs() < 0.05, "{u:?}");
    assert!((u.steal_cpus - 0.2).abs() < 0.01, "{u:?}");
    let fewer = before.cpus_for_loaders - after.cpus_for_loaders;
    assert!(
        (fewer - 1.2).abs() < 0.05 || after.cpus_for_loaders == after.loader_cpus.max(0.1),
        "{before:?} {after:?}"
    );
    let today = Today::from(&after);
    assert_eq!(today.untraced_cpus, Some(u.total()));
}

#[test]
fn the_loaders_cpus_are_their_buckets_over_the_buckets_span() {
    let (s, a) = fixture("real-pool-cpu-bound-reader");
    let p = fit(&s, &a).unwrap();
    let wait = a.wait.as_ref().unwrap();
    let (b0, b1) = wait.window.as_ref().unwrap().buckets.unwrap();
    let ts = s.timeseries.as_ref().unwrap();
    let loaders: Vec<u32> = wait
        .roles
        .iter()
        .filter(|r| {
            matches!(
                r.role,
                crate::waitgraph::Role::Loader | crate::waitgraph::Role::Helper
            )
        })
        .map(|r| r.tid)
        .collect();
    let span_s = (b1 - b0) as f64 * ts.bucket_ns as f64 / 1e9;
    let sum = |keep: &dyn Fn(u32) -> bool, runnable: bool| -> f64 {
        ts.threads
            .iter()
            .filter(|t| keep(t.tid))
            .map(|t| {
                let series = if runnable { t.runnable() } else { t.on_cpu() };
                series.sum(b0, b1) as f64 / 1e9 / span_s
            })
            .sum()
    };
    assert!((p.loader_cpus - sum(&|t| loaders.contains(&t), false)).abs() < 1e-9);
    assert!((p.others_cpus - sum(&|t| !loaders.contains(&t), false)).abs() < 1e-9);
    assert!((p.queued_cpus - sum(&|_| true, true)).abs() < 1e-9);
}

#[test]
fn loaders_on_every_cpu_they_can_have_gain_nothing_from_themselves_alone() {
    // The loaders on all the CPUs left for them: the same loaders again
    // give today's AU back, twice as many no more than today's.
    let cpu = Split {
        cpu: 1.0,
        ..Split::default()
    };
    let p = pipeline(cpu, 1.8, 1.8);
    let same = project(&p, lever(LeverKind::ReadThreads, 1.0));
    assert!((gain(&same)).abs() < 1e-6, "{same:?}");
    let more = project(&p, lever(LeverKind::ReadThreads, 2.0));
    assert!((gain(&more)).abs() < 1e-6, "{more:?}");
}

#[test]
fn a_job_queued_for_its_cpus_projects_half_the_idle_cpu_and_a_range() {
    let cpu = Split {
        cpu: 1.0,
        ..Split::default()
    };
    let idle = pipeline(cpu, 1.6, 2.0);
    let queued = Pipeline {
        queued_cpus: 0.4,
        ..idle.clone()
    };
    assert_eq!(queued.loader_cpu_range(), (1.8, 1.6, 2.0));
    let free = project(&idle, lever(LeverKind::ReadThreads, 2.0));
    let busy = project(&queued, lever(LeverKind::ReadThreads, 2.0));
    // All of the idle CPU for more loaders without a queue; half of it
    // with one, and a range from none of it to all of it.
    assert!(
        gain(&busy) > 0.0 && gain(&busy) < gain(&free),
        "{busy:?} {free:?}"
    );
    assert!(
        (busy.low.unwrap() - busy.au_percentage).abs() < 1e-6,
        "{busy:?}"
    );
    assert!(busy.high.unwrap() >= free.projected_au_percentage.unwrap() - 1e-6);
    assert!(
        busy.reason.contains("waited 0.4 CPUs for a CPU"),
        "{busy:?}"
    );
}
