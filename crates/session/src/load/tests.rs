use super::*;

/// `load_from` with the files' texts in memory gives the session
/// `load` reads from the directory, and the same errors.
#[test]
fn load_from_memory_matches_load_from_disk() {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/sessions/real-storage-bound"
    ));
    let from_disk = load(dir).unwrap();
    let from_memory =
        load_from(dir, |name| Ok(std::fs::read_to_string(dir.join(name)).ok())).unwrap();
    assert_eq!(from_memory.info, from_disk.info);
    assert_eq!(from_memory.threads, from_disk.threads);
    assert_eq!(from_memory.offcpu, from_disk.offcpu);
    assert_eq!(from_memory.offcpu_threads, from_disk.offcpu_threads);
    assert_eq!(from_memory.missing, from_disk.missing);
    assert_eq!(from_memory.warnings, from_disk.warnings);
    assert!(!from_memory.offcpu.stacks.is_empty());

    let nothing = load_from(Path::new("mem"), |_| Ok(None)).unwrap_err();
    assert!(
        matches!(nothing, LoadError::NotASession { .. }),
        "{nothing}"
    );
    let bad = load_from(Path::new("mem"), |name| {
        Ok((name == files::THREADS).then(|| "[1,".to_string()))
    })
    .unwrap_err();
    assert!(bad.to_string().starts_with("mem/threads.json"), "{bad}");
}

/// Found by the `session_dir` fuzz target: folded counts whose sum
/// passes u64 (loading the session panicked in `is_empty`). The line that
/// passes it is skipped with a warning; what remains loads.
#[test]
fn folded_counts_past_u64_are_skipped() {
    let text = format!("a;b {}\nc 2\nc;d 1\n", u64::MAX - 1);
    let (stacks, warnings) = FoldedStacks::parse(&text, "oncpu.folded");
    assert_eq!(stacks.total(), u64::MAX);
    assert_eq!(stacks.stacks.len(), 2, "{stacks:?}");
    assert_eq!(
        warnings,
        ["oncpu.folded: skipped 1 line(s) whose count takes the file's total past 2^64 (line 2)"]
    );
    // Built directly (not parsed), the total saturates.
    let built = FoldedStacks {
        stacks: vec![("a".into(), u64::MAX), ("b".into(), 1)],
    };
    assert_eq!(built.total(), u64::MAX);
    assert!(!built.is_empty());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(files::ONCPU_FOLDED), &text).unwrap();
    std::fs::write(dir.path().join(files::OFFCPU_FOLDED), &text).unwrap();
    let session = load(dir.path()).unwrap();
    assert_eq!(session.oncpu.total(), u64::MAX);
}

/// frames.json gives the session its frame table; a session without
/// one (recorded before it) loads with an empty table; a malformed one
/// is an error naming it.
#[test]
fn frame_modules_are_loaded_from_frames_json() {
    let d = tempfile::tempdir().unwrap();
    let info = serde_json::to_string(&SessionInfo::default()).unwrap();
    std::fs::write(d.path().join(files::SESSION), info).unwrap();
    assert!(load(d.path()).unwrap().frame_modules.modules.is_empty());
    std::fs::write(
        d.path().join(files::FRAMES),
        r#"{"modules": {"list_dealloc": "python3.12"}}"#,
    )
    .unwrap();
    let s = load(d.path()).unwrap();
    assert_eq!(s.frame_modules.modules["list_dealloc"], "python3.12");
    std::fs::write(d.path().join(files::FRAMES), "{").unwrap();
    let e = load(d.path()).unwrap_err().to_string();
    assert!(e.contains(files::FRAMES), "{e}");
}

/// A session recorded before the vmstat series and the per-direction
/// device latency (the real-storage-bound fixture) loads with none of
/// them; a session with them reads them back.
#[test]
fn sessions_without_vmstat_or_split_latency_still_load() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/sessions/real-storage-bound"
    );
    let old = load(Path::new(fixture)).unwrap();
    let ts = old.timeseries.as_ref().unwrap();
    assert!(ts.vmstat.is_none());
    assert!(ts.bucket_count() > 0);
    let dev = &old.io.devices[0];
    assert!(!dev.latency_log2_ns.is_empty());
    assert!(dev.read_latency_log2_ns.is_empty() && dev.write_latency_log2_ns.is_empty());

    let d = tempfile::tempdir().unwrap();
    let info = serde_json::to_string(&SessionInfo::default()).unwrap();
    std::fs::write(d.path().join(files::SESSION), info).unwrap();
    std::fs::write(
        d.path().join(files::TIMESERIES),
        r#"{"bucket_ns": 1000000000, "start_unix_ns": 0, "threads": [], "devices": [],
                "vmstat": {"dirty_bytes": [4096, 8192], "writeback_bytes": [0, 4096],
                           "dirtied_bytes": [4096, 4096], "written_bytes": [0, 0]}}"#,
    )
    .unwrap();
    std::fs::write(
        d.path().join(files::IO),
        r#"{"devices": [{"name": "loop0", "dev": "7:0", "read_bytes": 0, "write_bytes": 8192,
                "read_requests": 0, "write_requests": 2, "latency_log2_ns": [0, 2],
                "write_latency_log2_ns": [0, 2], "busy_ns": 10}],
                "page_cache": {"misses_pages": 0, "page_size": 4096}}"#,
    )
    .unwrap();
    let new = load(d.path()).unwrap();
    let vm = new.timeseries.unwrap().vmstat.unwrap();
    assert_eq!(vm.dirty_bytes, vec![4096, 8192]);
    assert_eq!(new.io.devices[0].write_latency_log2_ns, vec![0, 2]);
    assert!(new.io.devices[0].read_latency_log2_ns.is_empty());
}

#[test]
fn folded_parse_skips_malformed_lines() {
    let (f, w) = FoldedStacks::parse("a;b 3\n\nbad line\na;c x\na;b;c 2\n", "t.folded");
    assert_eq!(
        f.stacks,
        vec![("a;b".to_string(), 3), ("a;b;c".to_string(), 2)]
    );
    assert_eq!(f.total(), 5);
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("2 malformed"), "{w:?}");
    assert!(w[0].contains("line 3, 4"), "{w:?}");
}

#[test]
fn frames_with_spaces_keep_their_names() {
    let (f, w) = FoldedStacks::parse("python;Foo::bar(int, long) 7\n", "t");
    assert!(w.is_empty());
    assert_eq!(f.stacks[0], ("python;Foo::bar(int, long)".to_string(), 7));
}

#[test]
fn bench_summary_fields() {
    let v = serde_json::json!({
        "metric": {"train_au_mean_percentage": 37.2, "train_io_mean_MB_per_second": 0.83,
                    "train_au_meet_expectation": "fail",
                    "train_throughput_mean_samples_per_second": 13.2},
        "computation_time": {"mean": 1.35},
        "measured": {"read_bytes": 1000, "read_MiB_per_second": 27.3, "read_amplification": 33.0}
    });
    let b = BenchSummary::from_value(v);
    assert_eq!(b.au_mean_percentage, Some(37.2));
    assert_eq!(b.computation_time_s, Some(1.35));
    assert_eq!(b.au_meet_expectation.as_deref(), Some("fail"));
    let m = b.measured.unwrap();
    assert_eq!(m.read_mib_per_second, Some(27.3));
    assert_eq!(m.read_bytes, Some(1000));
}

/// The bench's own golden summary.json parses whole: a type mismatch in
/// any `measured` field would silently drop the measured figures.
#[test]
fn bench_golden_summary_measured_parses() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../benchmark/tests/data/summary.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let b = BenchSummary::from_value(serde_json::from_str(&text).unwrap());
    let m = b
        .measured
        .expect("measured{} of the bench's summary.json parses");
    assert!(m.read_mib_per_second.is_some());
    assert!(m.record_size_bytes_real.is_some_and(|r| r > 0.0));
    assert!(b.au_mean_percentage.is_some());
}

/// io.json as sessions recorded before devices' stacking and buffered
/// writes' page-cache pages were recorded: it loads, with neither.
#[test]
fn an_io_json_without_stacking_or_write_pages_loads() {
    let old = r#"{"devices":[{"name":"vda","dev":"254:0","read_bytes":4096,
            "write_bytes":562270208,"read_requests":1,"write_requests":300,
            "latency_log2_ns":[0,1],"busy_ns":1000,"utilization":0.01,
            "traced_read_bytes":0,"by_pid":{"7":4096}}],
            "page_cache":{"misses_pages":137272,"page_size":4096}}"#;
    let session = load_from(Path::new("mem"), |name| {
        Ok((name == files::IO).then(|| old.to_string()))
    })
    .unwrap();
    let dev = &session.io.devices[0];
    assert_eq!((dev.name.as_str(), dev.write_bytes), ("vda", 562270208));
    assert!(dev.sits_on.is_empty());
    assert_eq!(session.io.page_cache.misses_pages, 137272);
    assert_eq!(session.io.page_cache.write_pages, 0);
    // And writes back without the new fields.
    let json = serde_json::to_string(&session.io).unwrap();
    assert!(
        !json.contains("sits_on") && !json.contains("write_pages"),
        "{json}"
    );
}
