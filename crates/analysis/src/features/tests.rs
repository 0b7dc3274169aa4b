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
