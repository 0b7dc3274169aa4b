//! The analysis of a recorded session: pure functions, no I/O.
//!
//! ```text
//! session::load::Session
//!        │ features::Features::extract      (figures: shares, bytes, AU)
//!        │ waitgraph::analyze               (roles, window, data wait, critical
//!        │                                   path; replaces the reader shares
//!        │                                   when a consumer is found)
//!        │ frames::hot_frames               (hottest categories, functions, libraries)
//!        │ stall::detect                    (no progress at the end: blocked or looping)
//!        ▼
//! verdict::decide ──► Decision (data) ──► output::wording ──► Verdict (verdict.json)
//!                                                    ──► output::report, bundle
//! ```
//!
//! Thresholds are named fields of [`Thresholds`] (documented in
//! `profiler/THRESHOLDS.md`); change them there, not in the rules.
pub mod features;
pub mod frames;
pub mod stall;
pub mod thresholds;
pub mod verdict;
pub mod waitgraph;

use serde::Serialize;

pub use features::Features;
pub use frames::HotFrames;
pub use thresholds::Thresholds;
pub use verdict::{Verdict, VerdictId};
pub use waitgraph::WaitAnalysis;

use std::collections::BTreeMap;

use crate::session::load::{FoldedStacks, Session};

/// Rows kept per "hottest" list.
pub const HOT_LIMIT: usize = 15;

/// Everything the outputs need: the verdict and what it was computed from.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    pub verdict: Verdict,
    pub features: Features,
    /// On-CPU hot frames of the reader threads.
    pub hot_oncpu_readers: HotFrames,
    /// On-CPU hot frames of every traced thread.
    pub hot_oncpu: HotFrames,
    /// Off-CPU hot frames (microseconds) of every traced thread.
    pub hot_offcpu: HotFrames,
    /// Who waits for whom (None: a format 1 session, or no wake-up probe).
    pub wait: Option<WaitAnalysis>,
}

/// Analyses a loaded session.
pub fn analyze(session: &Session, thresholds: &Thresholds) -> Analysis {
    let mut features = Features::extract(session, thresholds);
    features.stall = stall::detect(session, thresholds);
    let wait = waitgraph::analyze(session, thresholds);
    let path = wait.as_ref().and_then(|w| {
        let readers_only = w.basis == waitgraph::PathBasis::ReaderTime;
        let has_path =
            w.kernel_au_percentage.is_some() || readers_only && !w.critical_path.is_empty();
        if !has_path {
            return None;
        }
        let stacks = threads_stacks(&session.oncpu_threads, &w.path_cpu_threads);
        if readers_only {
            features.apply_reader_time(w, &stacks);
        } else {
            features.apply_critical_path(w, &stacks);
        }
        Some(stacks)
    });
    let modules = &session.frame_modules;
    let hot_oncpu_readers = match &path {
        Some(stacks) if !stacks.is_empty() => {
            frames::hot_frames(stacks, &|_| true, HOT_LIMIT, modules)
        }
        _ => {
            let readers = features.reader_comms.clone();
            let is_reader = |comm: &str| readers.iter().any(|r| r == comm);
            frames::hot_frames(&session.oncpu, &is_reader, HOT_LIMIT, modules)
        }
    };
    let hot_oncpu = frames::hot_frames(&session.oncpu, &|_| true, HOT_LIMIT, modules);
    let hot_offcpu = frames::hot_frames(&session.offcpu, &|_| true, HOT_LIMIT, modules);
    let mut decision = verdict::decide(&features, &hot_oncpu_readers, thresholds);
    decision.attach_wait(wait.as_ref(), session.info.format_version);
    // The rules gave data; verdict.json carries it in words.
    let verdict = crate::output::wording::verdict(&decision);
    Analysis {
        verdict,
        features,
        hot_oncpu_readers,
        hot_oncpu,
        hot_offcpu,
        wait,
    }
}

/// The per-thread on-CPU stacks (`comm;[pid/tid];...`) of `threads`, each
/// weighted by its share of the critical path, as per-comm stacks: the
/// hottest frames of the time the consumer waited for.
pub fn threads_stacks(per_thread: &FoldedStacks, threads: &[(u32, u32, f64)]) -> FoldedStacks {
    let mut samples: BTreeMap<(u32, u32), u64> = BTreeMap::new();
    let mut parsed = Vec::new();
    for (stack, n) in &per_thread.stacks {
        let mut parts = stack.splitn(3, ';');
        let (Some(comm), Some(ids)) = (parts.next(), parts.next()) else {
            continue;
        };
        let rest = parts.next().unwrap_or("");
        let Some((pid, tid)) = ids
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
            .and_then(|s| s.split_once('/'))
            .and_then(|(p, t)| Some((p.parse().ok()?, t.parse().ok()?)))
        else {
            continue;
        };
        *samples.entry((pid, tid)).or_insert(0) += n;
        parsed.push(((pid, tid), comm, rest, *n));
    }
    // Scaled so that each thread's samples sum to its path share × 10^4.
    let weight: BTreeMap<(u32, u32), f64> = threads
        .iter()
        .filter_map(|&(pid, tid, share)| {
            let n = *samples.get(&(pid, tid))?;
            (n > 0).then(|| ((pid, tid), share * 1e4 / n as f64))
        })
        .collect();
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for (id, comm, rest, n) in parsed {
        let Some(w) = weight.get(&id) else { continue };
        let value = (n as f64 * w).round() as u64;
        if value == 0 {
            continue;
        }
        let stack = if rest.is_empty() {
            comm.to_string()
        } else {
            format!("{comm};{rest}")
        };
        *merged.entry(stack).or_insert(0) += value;
    }
    FoldedStacks {
        stacks: merged.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    //! One synthetic feature set per verdict id: the rules, not the
    //! extraction, are under test here (fixtures in tests/ cover extraction).
    use super::{features::*, frames::FrameShare, *};

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
        crate::output::wording::verdict(&verdict::decide(
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
        let v = crate::output::wording::verdict(&verdict::decide(&f, &hot, &Thresholds::default()));
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
}
