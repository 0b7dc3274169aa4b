//! Analysis on recorded sessions, without root: verdicts of the labelled
//! fixture sessions in tests/data/sessions/<scenario>/, golden verdict.json,
//! report.md and a pretty on-CPU flamegraph in tests/data/golden/<scenario>/,
//! bad input (missing dir, partial session, empty folded, newer format) and
//! bundle redaction through the `storprof` binary.
//!
//! Golden files (testkit::golden): `STORPROF_BLESS=1` rewrites them;
//! missing ones are created, except under `CI=true`, where they fail.
// Tests may unwrap (the guide): a failure here is a test failure.
use std::{fs, path::Path};

use storprof_analysis::{self, Thresholds, VerdictId};
use storprof_report::{ReportOptions, report};
use storprof_session::load::{self, LoadError};

use crate::support::{assert_golden, copy_dir, session_fixture as fixture, storprof};

/// One `#[test]` per fixture session (so one mismatch does not hide the
/// others, as inferno's tests do), each calling `$check(fixture, label)`,
/// and `$list`, the fixtures declared, for the coverage test.
macro_rules! fixture_tests {
    ($check:ident, $list:ident; $($test:ident => $fixture:literal, $label:ident;)+) => {
        $(
            #[test]
            fn $test() {
                $check($fixture, VerdictId::$label);
            }
        )+
        const $list: &[&str] = &[$($fixture),+];
    };
}

/// The analysis of the fixture session `name`, which must get its label.
fn analyze_labelled(
    name: &str,
    session: &load::Session,
    label: VerdictId,
) -> storprof_report::diagnosis::Diagnosis {
    let a = storprof_report::diagnosis::diagnose(session, &Thresholds::default());
    println!(
        "{name:34} -> {:18} {:.2} {}",
        a.verdict.verdict, a.verdict.confidence, a.verdict.headline
    );
    assert_eq!(
        a.verdict.verdict, label,
        "{name}: want {label}, got {} ({})",
        a.verdict.verdict, a.verdict.headline
    );
    a
}

/// A synthetic labelled session (tests/data/sessions/make_fixtures.py): a
/// complete session, its label, golden verdict.json and report.md.
fn synthetic_fixture(name: &str, label: VerdictId) {
    let session = load::load(&fixture(name)).unwrap();
    assert!(session.is_complete(), "{name}: {:?}", session.missing);
    let a = analyze_labelled(name, &session, label);
    assert_golden(
        format!("{name}/verdict.json"),
        &report::verdict_json(&a).unwrap(),
    );
    assert_golden(
        format!("{name}/report.md"),
        &report::render_markdown(&session, &a),
    );
}

fixture_tests! { synthetic_fixture, SYNTHETIC_FIXTURES;
    synthetic_cpu_bound_dlio_legacy => "cpu-bound-dlio-legacy", CpuBoundReader;
    synthetic_storage_bound_odirect_throttled => "storage-bound-odirect-throttled", StorageBound;
    synthetic_page_cache_served => "page-cache-served", PageCacheServed;
    synthetic_compute_bound => "compute-bound", ComputeBound;
    synthetic_cpu_starved => "cpu-starved", CpuStarved;
    synthetic_lock_contention => "lock-contention", LockContention;
}

/// A real recording of the root scenario suite (tests/scenarios.rs, saved
/// with STORPROF_SAVE_FIXTURES=1, trimmed to the session files): its label,
/// golden verdict.json, and report.md when the wait-for graph decided (the
/// "Who waits for whom" section on real graphs).
fn real_recording(name: &str, label: VerdictId) {
    let session = load::load(&fixture(name)).unwrap();
    let a = analyze_labelled(name, &session, label);
    assert_golden(
        format!("{name}/verdict.json"),
        &report::verdict_json(&a).unwrap(),
    );
    if a.verdict.rules == "wait-graph" {
        assert_golden(
            format!("{name}/report.md"),
            &report::render_markdown(&session, &a),
        );
    }
}

fixture_tests! { real_recording, REAL_FIXTURES;
    real_storage_bound => "real-storage-bound", StorageBound;
    real_page_cache_served => "real-page-cache-served", PageCacheServed;
    real_cpu_starved => "real-cpu-starved", CpuStarved;
    real_lock_contention => "real-lock-contention", LockContention;
    // One thread won the mutex most of the time: its lock releases woke
    // the others, which must not make them consumers fed by it.
    real_lock_contention_unfair_mutex => "real-lock-contention-unfair-mutex", LockContention;
    real_cpu_bound_reader => "real-cpu-bound-reader", CpuBoundReader;
    real_compute_bound => "real-compute-bound", ComputeBound;
    real_pool_cpu_bound_reader => "real-pool-cpu-bound-reader", CpuBoundReader;
    real_pool_compute_bound => "real-pool-compute-bound", ComputeBound;
    real_pool_storage_bound => "real-pool-storage-bound", StorageBound;
    real_files_spawn => "real-files-spawn", ComputeBound;
    real_threads_lock_contention => "real-threads-lock-contention", LockContention;
    // The real DLIO 2.0.0 with storage #330's debug formatting (tests/dlio.rs's
    // cpu-bound-reader run), two forked workers. Edited: every futex wait of
    // a worker's feeder threads ended by the worker's main thread is marked
    // shared (the main thread had waited on the word too), as the GIL's
    // waits came out in a CI recording that was then called lock-contention.
    real_dlio_worker_gil => "real-dlio-worker-gil", CpuBoundReader;
    // tests/frameworks.rs's pyarrow workers, results collected only at the
    // end: no consumer. Their idle pool threads' condition variable shares
    // a futex granule with the mutex their main thread takes, both ways,
    // which read as lock contention before waits counted only for threads
    // that work once woken.
    real_arrow_workers_no_trainer => "real-arrow-workers-no-trainer", CpuBoundReader;
    // The same job recorded by a CI run on a crowded machine: the idle
    // pool threads were queued for a CPU long enough to pass for threads
    // that work (3.5% of their time), and were called lock-contention
    // (61%) until a thread waiting almost only in a pool's idle loop
    // stopped counting as a contender.
    real_arrow_workers_crowded => "real-arrow-workers-crowded", CpuBoundReader;
    // tests/python/pipeline.py (two forked workers, files, 5 ms steps) on
    // this 2-CPU VM with two untraced `yes` hogging the CPUs. Its control,
    // the same job on an idle machine, is compute-bound (kernel AU 93.4%).
    // In both the trainer never waited for data (0.00 s): here its AU fell
    // to 87.2% because it sat queued for a CPU 1.37 s of the 1.78 s it
    // spent taking its batches. It was called inconclusive ("too short",
    // 0 s of reader time) until a consumer that fetches for itself became
    // its own reader, and its CPU demand came from the other load.
    real_consumer_fetch_other_load => "real-consumer-fetch-other-load", CpuBoundReader;
    // The real DLIO 2.0.0, the #330 reader with two workers and 20 ms steps
    // (scripts/check-whatif.sh dlio-compute): DLIO's AU 92%. Stacks emptied
    // to keep it small: the wait-for graph and the time series decide.
    real_dlio_compute_bound => "real-dlio-compute-bound", ComputeBound;
}

/// A fixture directory without a test would go unchecked.
#[test]
fn every_fixture_session_has_its_test() {
    let declared = [SYNTHETIC_FIXTURES, REAL_FIXTURES].concat();
    // tests/merge.rs covers the multi-host sets.
    testkit::fixtures::assert_fixture_dirs_declared(&fixture(""), &declared, &["multihost"]);
}

#[test]
fn cpu_bound_legacy_names_the_hot_reader_functions_and_the_330_mismatch() {
    let session = load::load(&fixture("cpu-bound-dlio-legacy")).unwrap();
    let a = storprof_report::diagnosis::diagnose(&session, &Thresholds::default());
    let v = &a.verdict;
    assert!(
        v.headline.contains("format_global_index_map"),
        "{}",
        v.headline
    );
    assert!(v.headline.contains("storage idle"), "{}", v.headline);
    assert!(v.headline.contains("from vda"), "{}", v.headline);
    assert_eq!(v.confidence_label, "high");
    // Reads came from the page cache: secondary finding.
    assert!(
        v.runners_up
            .iter()
            .any(|r| r.verdict == VerdictId::PageCacheServed && r.fired),
        "{:?}",
        v.runners_up
    );
    assert!(v.notes.iter().any(|n| n.contains("#330")), "{:?}", v.notes);
    // The consumer was found and its sleep share is the AU seen by the kernel.
    let c = a.features.consumer.as_ref().unwrap();
    assert_eq!(c.comm, "consumer");
    assert!((c.sleep_share - 0.372).abs() < 0.01, "{}", c.sleep_share);
    assert_eq!(
        a.features.bench.as_ref().unwrap().computation_time_s,
        Some(1.35)
    );
    assert_eq!(a.features.reader_comms, ["reader-2", "reader-3"]);
}

#[test]
fn storage_bound_names_the_throttle() {
    let session = load::load(&fixture("storage-bound-odirect-throttled")).unwrap();
    let v = storprof_report::diagnosis::diagnose(&session, &Thresholds::default()).verdict;
    assert!(v.headline.contains("throttle"), "{}", v.headline);
    // With a looser "device busy" threshold the device itself is blamed.
    let t = Thresholds {
        storage_busy_utilization: 0.1,
        ..Thresholds::default()
    };
    let v = storprof_report::diagnosis::diagnose(&session, &t).verdict;
    assert!(
        v.headline.contains("the device is the limit"),
        "{}",
        v.headline
    );
}

/// The pretty on-CPU flamegraph is golden; the folded stacks survive
/// loading unchanged (compared with the fixture's own file, not a copy).
#[test]
fn flamegraph_golden_and_folded_round_trip() {
    let session = load::load(&fixture("cpu-bound-dlio-legacy")).unwrap();
    let mut o = storprof_report::flamegraph::FlamegraphOptions::new(
        storprof_report::flamegraph::Kind::OnCpu,
    );
    o.deterministic = true;
    let mut svg = Vec::new();
    storprof_report::flamegraph::write(&session.oncpu, &o, &mut svg).unwrap();
    assert_golden(
        "cpu-bound-dlio-legacy/flamegraph-oncpu.svg",
        &String::from_utf8(svg).unwrap(),
    );
    let mut folded = session.oncpu.lines().join("\n");
    folded.push('\n');
    let input = fs::read_to_string(fixture("cpu-bound-dlio-legacy").join("oncpu.folded")).unwrap();
    assert!(
        folded == input,
        "oncpu.folded changed on its way through load::load"
    );
}

#[test]
fn missing_dir_is_a_clear_error() {
    let err = load::load(Path::new("/nonexistent/storprof-session")).unwrap_err();
    assert!(matches!(err, LoadError::MissingDir(_)));
    assert!(
        err.to_string()
            .contains("/nonexistent/storprof-session does not exist")
    );
    let empty = tempfile::tempdir().unwrap();
    let err = load::load(empty.path()).unwrap_err();
    assert!(matches!(err, LoadError::NotASession { .. }), "{err}");
}

#[test]
fn partial_session_reports_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    // Killed mid-way: threads and on-CPU stacks written, nothing else.
    for f in ["threads.json", "oncpu.folded"] {
        fs::copy(fixture("cpu-bound-dlio-legacy").join(f), dir.path().join(f)).unwrap();
    }
    let session = load::load(dir.path()).unwrap();
    assert_eq!(
        session.missing,
        [
            "session.json",
            "io.json",
            "timeseries.json",
            "offcpu.folded"
        ]
    );
    let out = storprof_report::write_report(dir.path(), &ReportOptions::default()).unwrap();
    let md = fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(
        md.contains(
            "Partial session: session.json, io.json, timeseries.json, offcpu.folded missing"
        ),
        "{md}"
    );
    assert!(
        out.analysis
            .verdict
            .notes
            .iter()
            .any(|n| n.contains("Partial session"))
    );
    for f in [
        "verdict.json",
        "flamegraph-oncpu.svg",
        "flamegraph-offcpu.svg",
        "timeline.svg",
    ] {
        assert!(dir.path().join(f).exists(), "{f}");
    }
}

#[test]
fn empty_folded_files_are_warnings_not_errors() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("page-cache-served"), dir.path());
    fs::write(dir.path().join("oncpu.folded"), "").unwrap();
    let session = load::load(dir.path()).unwrap();
    assert!(
        session
            .warnings
            .iter()
            .any(|w| w == "oncpu.folded is empty: no stacks were recorded")
    );
    storprof_report::write_report(dir.path(), &ReportOptions::default()).unwrap();
    let svg = fs::read_to_string(dir.path().join("flamegraph-oncpu.svg")).unwrap();
    assert!(svg.contains("no oncpu stacks were recorded"));
}

#[test]
fn newer_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("cpu-starved"), dir.path());
    let path = dir.path().join("session.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    v["format_version"] = 99.into();
    v["something_new"] = serde_json::json!({"x": 1});
    fs::write(&path, v.to_string()).unwrap();
    let err = load::load(dir.path()).unwrap_err();
    assert!(
        matches!(err, LoadError::NewerFormat { found: 99, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade storprof"), "{err}");
}

#[test]
fn malformed_json_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture("cpu-starved"), dir.path());
    fs::write(dir.path().join("io.json"), "{\"devices\": [").unwrap();
    let err = load::load(dir.path()).unwrap_err();
    assert!(
        err.to_string().contains("io.json is not valid JSON"),
        "{err}"
    );
}

#[test]
fn cli_report_flamegraph_and_bad_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("s");
    copy_dir(&fixture("cpu-bound-dlio-legacy"), &s);
    let out = storprof(["report", s.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("verdict: cpu-bound-reader"), "{stdout}");
    for f in [
        "verdict.json",
        "report.md",
        "report.html",
        "flamegraph-oncpu.svg",
        "flamegraph-offcpu.svg",
        "timeline.svg",
    ] {
        assert!(s.join(f).exists(), "{f}");
    }
    let other = dir.path().join("raw");
    copy_dir(&fixture("compute-bound"), &other);
    let diff = dir.path().join("diff.svg");
    let out = storprof([
        "flamegraph",
        s.to_str().unwrap(),
        "--diff",
        other.to_str().unwrap(),
        "-o",
        diff.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        fs::read_to_string(&diff)
            .unwrap()
            .contains("format_global_index_map")
    );
    let out = storprof(["flamegraph", s.to_str().unwrap(), "--kind", "offcpu"]);
    assert!(out.status.success());
    assert!(
        fs::read_to_string(s.join("flamegraph-offcpu.svg"))
            .unwrap()
            .contains(" us")
    );

    let out = storprof(["report", "/nonexistent/session"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}

#[test]
fn bundle_holds_everything_and_no_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("session");
    copy_dir(&fixture("storage-bound-odirect-throttled"), &s);
    let tgz = dir.path().join("evidence.tar.gz");
    let out = storprof(["bundle", s.to_str().unwrap(), "-o", tgz.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut archive =
        tar::Archive::new(flate2::read::GzDecoder::new(fs::File::open(&tgz).unwrap()));
    let mut names = Vec::new();
    let mut all = String::new();
    for e in archive.entries().unwrap() {
        let mut e = e.unwrap();
        names.push(e.path().unwrap().to_string_lossy().to_string());
        let mut text = String::new();
        std::io::Read::read_to_string(&mut e, &mut text).unwrap();
        all.push_str(&text);
    }
    for want in [
        "session/session.json",
        "session/report.md",
        "session/report.html",
        "session/verdict.json",
        "session/flamegraph-oncpu.svg",
        "session/timeline.svg",
        "session/system.json",
        "session/oncpu.folded",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    // Every file report.md links or shows as an image travels with it.
    let report_md = fs::read_to_string(s.join("report.md")).unwrap();
    let targets: Vec<&str> = report_md
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .filter(|t| !t.starts_with('#') && !t.contains("://"))
        .collect();
    assert!(targets.contains(&"timeline.svg"), "{targets:?}");
    assert!(targets.contains(&"report.html"), "{targets:?}");
    for t in targets {
        let entry = format!("session/{t}");
        assert!(
            names.contains(&entry),
            "report.md names {t}, not in the bundle"
        );
    }
    for secret in ["wJalrXUtnFEMIK7MDENG", "hunter2", "abc123"] {
        assert!(!all.contains(secret), "{secret} leaked into the bundle");
    }
    assert!(all.contains("AWS_SECRET_ACCESS_KEY=<redacted>"));
    // The session on disk is untouched; only the bundle is redacted.
    assert!(
        fs::read_to_string(s.join("session.json"))
            .unwrap()
            .contains("hunter2")
    );
}
