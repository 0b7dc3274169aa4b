//! One synthetic feature set per verdict id, worded: the rules, not the
//! extraction, are under test here (fixtures in tests/ cover extraction).
use storprof_analysis::{
    HotFrames, Thresholds, Verdict, VerdictId, features::*, frames::FrameShare, verdict,
};

fn idle_device() -> Option<DeviceFeature> {
    Some(DeviceFeature {
        name: "vda".into(),
        read_bytes: 8 << 20,
        read_mib_per_s: 0.8,
        read_requests: 100,
        utilization: 0.001,
        latency_p50_us: Some(256.0),
        latency_p99_us: Some(1024.0),
        ..Default::default()
    })
}

fn base() -> Features {
    Features {
        duration_s: 10.0,
        num_cpus: 8,
        threads_total: 4,
        processes_total: 1,
        reader_threads: 2,
        reader_comms: vec!["reader".into()],
        reader_thread_s: 20.0,
        reader_user_share: Some(0.5),
        top_device: idle_device(),
        ..Features::default()
    }
}

fn decide(f: &Features) -> Verdict {
    crate::wording::verdict(&verdict::decide(
        f,
        &HotFrames::default(),
        &Thresholds::default(),
    ))
}

#[test]
fn cpu_bound_reader_names_hot_categories() {
    let mut f = base();
    f.reader_on_cpu_share = 0.97;
    f.reader_user_share = Some(0.95);
    f.read_syscall_bytes = 10 << 20;
    f.page_cache_hit_ratio = Some(1.0);
    f.reader_read_syscall_share = 0.02;
    let hot = HotFrames {
        total: 100,
        categories: vec![
            FrameShare {
                name: "libpython string formatting".into(),
                count: 45,
                share: 0.45,
            },
            FrameShare {
                name: "Parquet decode".into(),
                count: 20,
                share: 0.2,
            },
        ],
        ..HotFrames::default()
    };
    let v = crate::wording::verdict(&verdict::decide(&f, &hot, &Thresholds::default()));
    assert_eq!(v.verdict, VerdictId::CpuBoundReader);
    assert_eq!(
        v.headline,
        "CPU-bound in the reader (libpython string formatting 45%, Parquet decode 20%); \
         storage idle: 0.8 MiB/s from vda, 0.1% busy"
    );
    assert_eq!(v.confidence_label, "high");
    // Reads came from the page cache: a secondary, fired finding.
    assert_eq!(v.runners_up[0].verdict, VerdictId::PageCacheServed);
    assert!(v.runners_up[0].fired);
}

#[test]
fn page_cache_served_when_time_goes_into_kernel_copies() {
    let mut f = base();
    f.reader_on_cpu_share = 0.95;
    f.reader_user_share = Some(0.2);
    f.reader_cache_copy_share = 0.78;
    f.read_syscall_bytes = 2 << 30;
    f.read_syscall_mib_per_s = 200.0;
    f.page_cache_hit_ratio = Some(0.999);
    f.reader_read_syscall_share = 0.8;
    let v = decide(&f);
    assert_eq!(v.verdict, VerdictId::PageCacheServed);
    assert!(
        v.headline.starts_with("Served from the page cache"),
        "{}",
        v.headline
    );
}

/// Real two-host recording (tests/multihost.rs): behind a blkio throttle
/// the released block requests are credited to other tasks, so the
/// readers' hit ratio reads 92% while they wait on I/O 94% of the time.
/// The D-state wait decides.
#[test]
fn readers_waiting_on_io_are_not_page_cache_served() {
    let mut f = base();
    f.reader_on_cpu_share = 0.03;
    f.reader_blocked_io_share = 0.94;
    f.reader_read_syscall_share = 0.95;
    f.read_syscall_bytes = 100 << 20;
    f.page_cache_hit_ratio = Some(0.92);
    let v = decide(&f);
    assert_eq!(v.verdict, VerdictId::StorageBound, "{}", v.headline);
    assert!(
        !v.runners_up
            .iter()
            .any(|r| r.verdict == VerdictId::PageCacheServed && r.fired),
        "{:?}",
        v.runners_up
    );
}

/// A bench that maps its files reads without read syscalls: its own
/// byte count stands in, and the headline says how the bytes came.
#[test]
fn page_cache_served_through_file_mappings() {
    let mut f = base();
    f.reader_on_cpu_share = 0.9;
    f.reader_user_share = Some(0.1);
    f.reader_cache_copy_share = 0.85;
    f.mapped_read_bytes = 4 << 30;
    f.page_cache_hit_ratio = Some(1.0);
    let v = decide(&f);
    assert_eq!(v.verdict, VerdictId::PageCacheServed, "{}", v.headline);
    assert!(
        v.headline.contains("4096.0 MiB") && v.headline.contains("file mappings"),
        "{}",
        v.headline
    );
}

/// A reader that faults in a fresh buffer per sample spends kernel time
/// that is its own work, not page-cache serving: it stays cpu-bound even
/// with less than half its samples in user space.
#[test]
fn kernel_time_outside_cache_copies_is_the_readers_own_work() {
    let mut f = base();
    f.reader_on_cpu_share = 0.95;
    f.reader_user_share = Some(0.45);
    f.reader_cache_copy_share = 0.3;
    f.read_syscall_bytes = 1 << 30;
    f.read_syscall_mib_per_s = 750.0;
    f.page_cache_hit_ratio = Some(1.0);
    f.reader_read_syscall_share = 0.35;
    let v = decide(&f);
    assert_eq!(v.verdict, VerdictId::CpuBoundReader, "{}", v.headline);
    assert_eq!(v.runners_up[0].verdict, VerdictId::PageCacheServed);
}

/// Copies out of the page cache split by the bench's read amplification:
/// a reader that reads 8× what it returns caused 7/8 of its copies.
#[test]
fn read_amplification_makes_cache_copies_the_readers_own_work() {
    let mut f = base();
    f.reader_on_cpu_share = 0.95;
    f.reader_user_share = Some(0.35);
    f.reader_cache_copy_share = 0.6;
    f.read_syscall_bytes = 1 << 30;
    f.read_syscall_mib_per_s = 750.0;
    f.page_cache_hit_ratio = Some(1.0);
    f.reader_read_syscall_share = 0.5;
    // Without amplification the copies win: page-cache-served.
    assert_eq!(decide(&f).verdict, VerdictId::PageCacheServed);
    f.bench = Some(BenchFeature {
        read_amplification: Some(8.0),
        ..BenchFeature::default()
    });
    let own = f.reader_own_work_share().unwrap();
    assert!((own - (1.0 - 0.6 / 8.0)).abs() < 1e-9, "{own}");
    let v = decide(&f);
    assert_eq!(v.verdict, VerdictId::CpuBoundReader, "{}", v.headline);
    assert!(
        v.notes.iter().any(|n| n.contains("read amplification")),
        "{:?}",
        v.notes
    );
}

#[test]
fn storage_bound_names_the_throttle_when_the_device_is_not_busy() {
    let mut f = base();
    f.reader_on_cpu_share = 0.05;
    f.reader_blocked_io_share = 0.9;
    f.reader_read_syscall_share = 0.93;
    f.page_cache_hit_ratio = Some(0.0);
    f.read_syscall_bytes = 64 << 20;
    let v = decide(&f);
    assert_eq!(v.verdict, VerdictId::StorageBound);
    assert!(v.headline.contains("throttle"), "{}", v.headline);
    f.top_device.as_mut().unwrap().utilization = 0.97;
    let v = decide(&f);
    assert!(
        v.headline.contains("the device is the limit"),
        "{}",
        v.headline
    );
}

#[test]
fn compute_bound_wins_when_au_is_high() {
    let mut f = base();
    // Readers are also CPU-heavy, but the consumer is kept busy.
    f.reader_on_cpu_share = 0.6;
    f.reader_user_share = Some(0.9);
    f.reader_sleeping_share = 0.4;
    f.bench = Some(BenchFeature {
        au_percentage: Some(95.0),
        ..BenchFeature::default()
    });
    let v = decide(&f);
    assert_eq!(v.verdict, VerdictId::ComputeBound);
    assert!(v.headline.contains("AU 95.0%"), "{}", v.headline);
    // Low AU: not compute-bound.
    f.bench = Some(BenchFeature {
        au_percentage: Some(37.2),
        ..BenchFeature::default()
    });
    assert_eq!(decide(&f).verdict, VerdictId::CpuBoundReader);
}

#[test]
fn compute_bound_from_consumer_sleep_without_bench() {
    let mut f = base();
    f.reader_sleeping_share = 0.9;
    f.reader_futex_share = 0.85;
    f.consumer = Some(ConsumerFeature {
        comm: "consumer".into(),
        tids: vec![7],
        sleep_share: 0.96,
        from_wait_graph: false,
        writes: None,
    });
    let v = decide(&f);
    assert_eq!(v.verdict, VerdictId::ComputeBound);
    // The futex waits are the loaders waiting for the consumer: runner-up.
    assert!(
        v.runners_up
            .iter()
            .any(|r| r.verdict == VerdictId::LockContention && r.fired)
    );
}

#[test]
fn cpu_starved_beats_cpu_bound_when_runnable_dominates() {
    let mut f = base();
    f.num_cpus = 2;
    f.busy_threads = 6;
    f.cpu_demand_threads = 6.0;
    f.reader_on_cpu_share = 0.33;
    f.reader_runnable_share = 0.66;
    f.reader_user_share = Some(0.99);
    let v = decide(&f);
    assert_eq!(v.verdict, VerdictId::CpuStarved);
    assert!(
        v.headline.contains("6 busy thread(s) on 2 CPU(s)"),
        "{}",
        v.headline
    );
}

#[test]
fn lock_contention() {
    let mut f = base();
    f.reader_on_cpu_share = 0.1;
    f.reader_sleeping_share = 0.85;
    f.reader_futex_share = 0.8;
    assert_eq!(decide(&f).verdict, VerdictId::LockContention);
}

#[test]
fn memory_pressure_and_oom() {
    let mut f = base();
    f.reader_on_cpu_share = 0.3;
    f.reader_blocked_io_share = 0.2;
    f.reader_reclaim_share = 0.5;
    assert_eq!(decide(&f).verdict, VerdictId::MemoryPressure);
    let mut f = base();
    f.oom_killed = true;
    let v = decide(&f);
    assert_eq!(v.verdict, VerdictId::MemoryPressure);
    assert!(v.headline.contains("OOM"));
}

#[test]
fn network_bound() {
    let mut f = base();
    f.reader_on_cpu_share = 0.1;
    f.reader_sleeping_share = 0.85;
    f.reader_socket_recv_share = 0.8;
    assert_eq!(decide(&f).verdict, VerdictId::NetworkBound);
}

#[test]
fn nothing_fired_is_inconclusive_with_low_confidence() {
    let mut f = base();
    f.reader_on_cpu_share = 0.1;
    f.reader_sleeping_share = 0.9;
    let v = decide(&f);
    assert!(v.inconclusive);
    assert_eq!(v.confidence_label, "low");
    assert!(v.headline.starts_with("No rule fired"), "{}", v.headline);
}

#[test]
fn dlio_derived_vs_measured_mismatch_is_called_out() {
    let mut f = base();
    f.reader_on_cpu_share = 0.97;
    f.reader_user_share = Some(0.95);
    f.bench = Some(BenchFeature {
        au_percentage: Some(37.2),
        derived_io_mib_per_s: Some(0.83),
        measured_read_mib_per_s: Some(27.3),
        measured_over_derived: Some(27.3 / 0.83),
        ..BenchFeature::default()
    });
    let v = decide(&f);
    assert!(
        v.notes
            .iter()
            .any(|n| n.contains("#330") && n.contains("27.30 MiB/s")),
        "{:?}",
        v.notes
    );
}

#[test]
fn partial_sessions_lower_confidence_and_say_so() {
    let mut f = base();
    f.reader_on_cpu_share = 0.97;
    f.reader_user_share = Some(0.95);
    let full = decide(&f);
    f.missing_files = vec!["offcpu.folded".into()];
    let partial = decide(&f);
    assert!(partial.confidence < full.confidence);
    assert!(
        partial
            .notes
            .iter()
            .any(|n| n.contains("missing offcpu.folded"))
    );
}

#[test]
fn verdict_ids_serialize_as_issue_ids() {
    let ids: Vec<String> = VerdictId::ALL
        .iter()
        .map(|v| {
            serde_json::to_value(v)
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        ids,
        [
            "cpu-bound-reader",
            "storage-bound",
            "page-cache-served",
            "compute-bound",
            "cpu-starved",
            "lock-contention",
            "memory-pressure",
            "network-bound",
            "stalled",
            "writeback-bound",
            "fsync-bound",
            "write-generator-bound",
            "checkpoint-bound"
        ]
    );
    for v in VerdictId::ALL {
        assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
    }
}

#[test]
fn a_recording_too_short_to_decide_from_is_inconclusive() {
    // Readers fully on CPU, but for 0.01 s in all (`diagnose -- /bin/true`).
    let mut f = base();
    f.reader_on_cpu_share = 0.97;
    f.reader_user_share = Some(0.95);
    f.reader_thread_s = 0.01;
    let v = decide(&f);
    assert!(v.inconclusive, "{v:?}");
    assert_eq!(v.confidence, 0.0);
    assert!(
        v.headline
            .starts_with("Inconclusive: the recording is too short"),
        "{}",
        v.headline
    );
    // From the threshold on, the rule decides.
    f.reader_thread_s = Thresholds::default().min_decision_thread_s;
    let v = decide(&f);
    assert!(!v.inconclusive, "{v:?}");
    assert_eq!(v.verdict, VerdictId::CpuBoundReader);
}
