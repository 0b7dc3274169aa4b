use super::*;

mod extraction {
    use super::*;

    #[test]
    fn quantiles_of_log2_histograms() {
        // 10 values in [1024, 2048) ns, 1 in [2^20, 2^21).
        let mut h = vec![0; 21];
        h[10] = 10;
        h[20] = 1;
        assert_eq!(log2_quantile_us(&h, 0.5), Some(2.048));
        assert_eq!(log2_quantile_us(&h, 0.99), Some(2097.152));
        assert_eq!(log2_quantile_us(&[], 0.5), None);
    }

    #[test]
    fn syscalls_match_by_name_or_number() {
        let named = SyscallStats {
            nr: 999,
            name: "pread64".into(),
            ..Default::default()
        };
        let unnamed = SyscallStats {
            nr: 202,
            name: "sys_202".into(),
            ..Default::default()
        };
        assert!(is_syscall(&named, READ_NAMES, nr::READ_FAMILY));
        assert!(is_syscall(&unnamed, FUTEX_NAMES, nr::FUTEX));
        assert!(!is_syscall(&unnamed, READ_NAMES, nr::READ_FAMILY));
    }

    /// One reader thread that read 1 GiB in page-cached preads for 1 s of
    /// its 2 s life, recorded with syscall timing `mode` (None: a session
    /// from before the option), with the blocked part of its preads
    /// `blocked_ns`.
    fn cached_reader_session(mode: Option<&str>, blocked_ns: u64) -> Session {
        let mut s = Session::default();
        s.info.freq_hz = 100;
        s.info.duration_s = 2.0;
        if let Some(mode) = mode {
            s.info.features.insert("syscall_timing".into(), mode.into());
        }
        s.threads = vec![ThreadStats {
            pid: 10,
            tid: 10,
            comm: "reader".into(),
            on_cpu_ns: 2_000_000_000,
            read_bytes: 1 << 30,
            syscalls: vec![SyscallStats {
                nr: 17,
                name: "pread64".into(),
                count: 1000,
                total_ns: blocked_ns,
                bytes: 1 << 30,
                ..Default::default()
            }],
            ..Default::default()
        }];
        // 100 of 200 samples (1 s at 100 Hz) inside the syscall.
        s.oncpu.stacks = vec![
            (
                "reader;main;read_chunk;ksys_pread64_[k];filemap_read_[k]".into(),
                100,
            ),
            ("reader;main;decode".into(), 100),
        ];
        s
    }

    #[test]
    fn blocked_time_sessions_add_the_samples_inside_read_syscalls() {
        let t = Thresholds::default();
        let blocked = Features::extract(&cached_reader_session(Some("blocked"), 0), &t);
        assert!(
            (blocked.reader_read_syscall_share - 0.5).abs() < 1e-9,
            "{}",
            blocked.reader_read_syscall_share
        );
        // Entry-to-exit times already hold the calls' CPU time: the
        // samples are not added again.
        let exact = Features::extract(&cached_reader_session(Some("exact"), 1_000_000_000), &t);
        assert!((exact.reader_read_syscall_share - 0.5).abs() < 1e-9);
        let before = Features::extract(&cached_reader_session(None, 0), &t);
        assert_eq!(before.reader_read_syscall_share, 0.0);
    }
}

mod tests_support {
    use super::*;

    /// A reader that read 1 GiB from the page cache in 2 s, mostly on CPU.
    pub fn cached_reader() -> Session {
        let mut s = Session::default();
        s.info.freq_hz = 100;
        s.info.duration_s = 2.0;
        s.info.num_cpus = 2;
        s.threads = vec![ThreadStats {
            pid: 10,
            tid: 10,
            comm: "reader".into(),
            on_cpu_ns: 2_000_000_000,
            read_bytes: 1 << 30,
            syscalls: vec![SyscallStats {
                nr: 17,
                name: "pread64".into(),
                count: 1000,
                total_ns: 1_000_000_000,
                bytes: 1 << 30,
                ..Default::default()
            }],
            ..Default::default()
        }];
        s.oncpu.stacks = vec![
            (
                "reader;main;read_chunk;ksys_pread64_[k];filemap_read_[k]".into(),
                150,
            ),
            ("reader;main;decode".into(), 50),
        ];
        s
    }
}

/// Write features on a read session (the write rules' own tests, with
/// their wording, are the profiler's `output::verdict_tests`).
mod read_sessions_and_writes {
    use super::*;
    use crate::{
        frames::HotFrames,
        verdict::{Decision, decide},
    };

    fn decision(s: &Session) -> (Features, Decision) {
        let t = Thresholds::default();
        let f = Features::extract(s, &t);
        let d = decide(&f, &HotFrames::default(), &t);
        (f, d)
    }

    /// A read session with a little logging keeps the verdict it has
    /// without any writes, and no write finding fires.
    #[test]
    fn read_sessions_keep_their_verdicts() {
        let mut read = super::tests_support::cached_reader();
        let (f0, d0) = decision(&read);
        assert!(f0.writes.is_none());
        read.threads[0].write_bytes = 16 << 20;
        read.io.devices = vec![DeviceStats {
            name: "vda".into(),
            write_bytes: 16 << 20,
            ..Default::default()
        }];
        let (f1, d1) = decision(&read);
        assert!(!f1.writes.as_ref().unwrap().write_dominated);
        assert_eq!(d1.primary.verdict, d0.primary.verdict);
        assert_eq!(d1.primary.fired, d0.primary.fired);
        assert!(
            !d1.runners_up
                .iter()
                .any(|r| r.verdict.is_write() && r.fired)
        );
        // The features of a session without writes serialize as before.
        let json = serde_json::to_string(&f0).unwrap();
        assert!(!json.contains("\"writes\""), "{json}");
    }
}

/// The reader figures' one basis, and which figure each basis takes from
/// where.
mod reader_basis {
    use super::*;
    use crate::waitgraph::{ConsumerTime, PathBasis, PathKind, PathShare};

    const S: u64 = 1_000_000_000;

    /// A consumer over 10 s of window at `au` percent, waiting `data_wait_s`
    /// for data, with 1 s on a CPU inside its loader's API.
    fn consumer(au: f64, data_wait_s: f64) -> ConsumerTime {
        serde_json::from_value(serde_json::json!({
            "pid": 1, "tid": 1, "comm": "python3",
            "window_ns": 10 * S, "au_percentage": au,
            "data_wait_ns": (data_wait_s * 1e9) as u64,
            "compute_ns": 5 * S, "emulated_compute": false,
            "fetch_cpu_ns": S, "fetch_io_ns": S / 2,
        }))
        .unwrap()
    }

    /// A wait analysis of one consumer whose data wait went half to a
    /// worker's CPU, half to a lock.
    fn wait(consumer: ConsumerTime) -> WaitAnalysis {
        let worker = vec![(1, 2, "pt_data_worker".to_string(), 0.5)];
        let path = |kind, share: f64| PathShare {
            kind,
            share,
            ns: (share * S as f64) as u64,
            threads: worker.clone(),
        };
        WaitAnalysis {
            kernel_au_percentage: Some(consumer.au_percentage),
            consumers: vec![consumer],
            critical_path: vec![path(PathKind::CpuUser, 0.5), path(PathKind::Lock, 0.5)],
            ..WaitAnalysis::default()
        }
    }

    fn session() -> Session {
        tests_support::cached_reader()
    }

    #[test]
    fn the_basis_follows_what_the_graph_measured() {
        let t = Thresholds::default();
        let s = session();
        let choose = |w: Option<&WaitAnalysis>| ReaderBasis::choose(w, &s, &t);
        assert_eq!(choose(None), ReaderBasis::Threads);
        // A consumer that waited on its loaders is judged by them.
        assert_eq!(
            choose(Some(&wait(consumer(60.0, 3.0)))),
            ReaderBasis::CriticalPath
        );
        // One that never waited and lost 40% of its window fetched for itself.
        assert_eq!(
            choose(Some(&wait(consumer(60.0, 0.0)))),
            ReaderBasis::ConsumerFetch
        );
        // At the compute-bound bar it is compute-bound, not its own reader.
        assert_eq!(
            choose(Some(&wait(consumer(95.0, 0.0)))),
            ReaderBasis::CriticalPath
        );
        // No AU measured: the threads' statistics.
        let no_au = WaitAnalysis {
            kernel_au_percentage: None,
            ..wait(consumer(60.0, 3.0))
        };
        assert_eq!(choose(Some(&no_au)), ReaderBasis::Threads);
        // The readers' own time, with and without time on the path.
        let readers = WaitAnalysis {
            basis: PathBasis::ReaderTime,
            consumers: Vec::new(),
            kernel_au_percentage: None,
            ..wait(consumer(60.0, 3.0))
        };
        assert_eq!(choose(Some(&readers)), ReaderBasis::ReaderTime);
        let empty = WaitAnalysis {
            critical_path: Vec::new(),
            ..readers
        };
        assert_eq!(choose(Some(&empty)), ReaderBasis::Threads);
    }

    #[test]
    fn each_basis_takes_its_figures_from_one_place() {
        let t = Thresholds::default();
        let s = session();
        let by_threads = Features::extract(&s, &t);
        let none = FoldedStacks::default();

        let w = wait(consumer(60.0, 3.0));
        let path = ReaderSource::CriticalPath {
            wait: &w,
            path_oncpu: &none,
        };
        let f = Features::build(&s, &t, Some(&w), path);
        assert_eq!(f.reader_selection, Some(ReaderSelection::CriticalPath));
        assert_eq!(f.reader_comms, ["pt_data_worker"]);
        assert!((f.reader_thread_s - 3.0).abs() < 1e-9);
        assert!((f.reader_on_cpu_share - 0.5).abs() < 1e-9);
        assert!((f.reader_futex_share - 0.5).abs() < 1e-9);
        assert!(f.consumer.as_ref().unwrap().from_wait_graph);
        // What the graph does not measure stays the threads'.
        assert_eq!(
            f.reader_read_syscall_share,
            by_threads.reader_read_syscall_share
        );

        let w = wait(consumer(60.0, 0.0));
        let own = ReaderSource::ConsumerFetch {
            wait: &w,
            path_oncpu: &none,
            own_oncpu: &none,
        };
        let f = Features::build(&s, &t, Some(&w), own);
        assert_eq!(f.reader_selection, Some(ReaderSelection::ConsumerFetch));
        assert_eq!(f.reader_comms, ["python3"]);
        // 4 s not computing, none of it waiting: all its own fetching,
        // 0.5 s of it blocked on the device.
        assert!((f.reader_thread_s - 4.0).abs() < 1e-9);
        assert!((f.reader_blocked_io_share - 0.125).abs() < 1e-9);
        assert!((f.reader_on_cpu_share - 0.875).abs() < 1e-9);
        // Its fetching does not split locks: the path's share stays.
        assert!((f.reader_futex_share - 0.5).abs() < 1e-9);

        let readers = WaitAnalysis {
            basis: PathBasis::ReaderTime,
            ..wait(consumer(60.0, 3.0))
        };
        let time = ReaderSource::ReaderTime {
            wait: &readers,
            path_oncpu: &none,
        };
        let f = Features::build(&s, &t, Some(&readers), time);
        assert_eq!(f.reader_selection, Some(ReaderSelection::ReaderTime));
        assert!((f.reader_thread_s - 1.0).abs() < 1e-9);
        // No consumer for the readers' own time.
        assert_eq!(f.consumer, None);
    }
}

mod fs_daemon {
    use super::*;
    use storprof_session::model::{WaitGraph, WakeEdge};

    fn edge(waker: (u32, &str), stack: &[&str], ns: u64) -> WakeEdge {
        WakeEdge {
            waker_kind: "task".into(),
            waker_pid: waker.0,
            waker_tid: waker.0,
            waker_comm: waker.1.into(),
            waker_stack: stack.iter().map(|f| format!("{f}_[k]")).collect(),
            wakee_pid: 100,
            wakee_tid: 101,
            wakee_state: "sleeping".into(),
            syscall: Some("read".into()),
            blocked_ns: ns,
            count: 1,
            ..WakeEdge::default()
        }
    }

    fn session(edges: Vec<WakeEdge>) -> Session {
        Session {
            waits: Some(WaitGraph {
                edges,
                ..WaitGraph::default()
            }),
            ..Session::default()
        }
    }

    const FUSE: &[&str] = &["fuse_dev_do_write", "fuse_request_end", "try_to_wake_up"];
    const DISK: &[&str] = &["blk_mq_end_request", "bio_endio", "try_to_wake_up"];

    #[test]
    fn the_daemon_that_answered_most_storage_waits_is_named() {
        let s = session(vec![
            edge((7, "mount-s3"), FUSE, 6_000),
            edge((8, "other-fuse"), FUSE, 1_000),
            edge((0, "swapper"), DISK, 3_000),
            // Not storage: a pipe write by another process.
            edge((9, "sh"), &["anon_pipe_write"], 50_000),
        ]);
        let d = devices::fs_daemon(&s).expect("a daemon");
        assert_eq!((d.pid, d.comm.as_str()), (7, "mount-s3"));
        assert!((d.share - 0.7).abs() < 1e-9, "{}", d.share);
    }

    #[test]
    fn under_half_of_the_storage_waits_is_no_daemon() {
        let s = session(vec![
            edge((7, "mount-s3"), FUSE, 4_000),
            edge((0, "swapper"), DISK, 6_000),
        ]);
        assert_eq!(devices::fs_daemon(&s), None);
        assert_eq!(devices::fs_daemon(&Session::default()), None);
    }
}
