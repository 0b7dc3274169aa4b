//! `storprof export` on recorded fixture sessions, without root: the pprof
//! file read back by the real consumer (`go tool pprof`, from Debian's
//! golang-go, which scripts/setup.sh installs), golden speedscope and
//! Chrome trace files, structural checks of both on every fixture, and
//! the command's file handling (default path, --force, bad input).
//!
//! Golden files (testkit::golden): `STORPROF_BLESS=1` rewrites them.
// Tests may unwrap (the guide): a failure here is a test failure.
#![allow(clippy::expect_used)]
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
    process::Command,
};

use serde_json::Value;
use storprof_analysis::Thresholds;
use storprof_report::export::{self, parse_frame};
use storprof_session::load::{self, FoldedStacks, Session};

use crate::support::{assert_golden, copy_dir, session_fixture as fixture, storprof};

/// Fixtures with a session.json (multihost holds several hosts' sessions).
fn every_fixture() -> Vec<String> {
    let mut names: Vec<String> = testkit::fixtures::fixture_dirs(&fixture(""))
        .unwrap()
        .into_iter()
        .filter(|n| fixture(n).join("session.json").exists())
        .collect();
    names.sort();
    assert!(names.len() >= 10, "fixtures: {names:?}");
    names
}

fn load(name: &str) -> Session {
    load::load(&fixture(name)).unwrap()
}

/// `storprof export FIXTURE --format FORMAT -o OUT`, which must succeed.
fn export_to(name: &str, format: &str, out: &Path) {
    let o = storprof([
        "export".as_ref(),
        fixture(name).as_os_str(),
        "--format".as_ref(),
        format.as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert!(
        o.status.success(),
        "export {name} {format}: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
}

// --- pprof, read by go tool pprof -------------------------------------------

/// `go tool pprof ARGS FILE`'s stdout; fails (never skips) without go.
fn go_pprof(args: &[&str], file: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof", "-symbolize=none"])
        .args(args)
        .arg(file)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `go tool pprof` ({e}): install Debian's golang-go \
                 (scripts/setup.sh does) to check the pprof export with its real reader"
            )
        });
    assert!(
        out.status.success(),
        "go tool pprof {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `-top` output: (total, flat value per function name), values with any
/// unit suffix (`ns`) taken off.
fn parse_top(text: &str) -> (u64, BTreeMap<String, u64>) {
    let number = |s: &str| -> u64 {
        s.trim_end_matches(|c: char| c.is_ascii_alphabetic())
            .parse()
            .unwrap_or_else(|e| panic!("{s:?}: {e}\n{text}"))
    };
    let total_line = text
        .lines()
        .find(|l| l.starts_with("Showing nodes accounting for"))
        .unwrap_or_else(|| panic!("no totals line in\n{text}"));
    let total = total_line
        .rsplit_once(" of ")
        .and_then(|(_, t)| t.strip_suffix(" total"))
        .map(number)
        .unwrap_or_else(|| panic!("{total_line}"));
    let mut flat = BTreeMap::new();
    let rows = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1);
    for row in rows {
        // Five columns (flat flat% sum% cum cum%), then the name, which may hold spaces.
        let mut rest = row.trim_start();
        let mut columns = Vec::new();
        for _ in 0..5 {
            let end = rest.find(' ').unwrap_or_else(|| panic!("row {row:?}"));
            columns.push(&rest[..end]);
            rest = rest[end..].trim_start();
        }
        let value = number(columns[0]);
        if value > 0 {
            *flat.entry(rest.to_string()).or_insert(0) += value;
        }
    }
    (total, flat)
}

/// Self time per leaf function of a folded file, as pprof names them
/// (Python frames without their file and line; a comm-only stack under its comm).
fn leaf_functions(folded: &FoldedStacks, scale: u64) -> (u64, BTreeMap<String, u64>) {
    let mut flat = BTreeMap::new();
    for (stack, count) in folded.stacks.iter().filter(|(_, n)| *n > 0) {
        let leaf = stack.rsplit(';').next().unwrap();
        *flat
            .entry(parse_frame(leaf).function.to_string())
            .or_insert(0) += count * scale;
    }
    (folded.total() * scale, flat)
}

/// The hottest functions (self time) and the totals that go tool pprof
/// reads from the export, both sample types, equal the folded stacks': a
/// native C workload and a Python one with file:line frames.
#[test]
fn pprof_top_functions_and_totals_match_the_folded_stacks() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["real-lock-contention", "real-pool-cpu-bound-reader"] {
        let file = tmp.path().join(format!("{name}.pb.gz"));
        export_to(name, "pprof", &file);
        let session = load(name);
        for (index, folded, scale) in [
            ("samples", &session.oncpu, 1),
            ("off_cpu", &session.offcpu, 1000),
        ] {
            let text = go_pprof(
                &[
                    "-top",
                    "-nodefraction=0",
                    "-nodecount=1000000",
                    &format!("-sample_index={index}"),
                    "-unit=ns",
                ],
                &file,
            );
            let (total, flat) = parse_top(&text);
            let (want_total, want_flat) = leaf_functions(folded, scale);
            assert!(want_total > 0, "{name} {index}: empty fixture");
            assert_eq!(total, want_total, "{name} {index} total\n{text}");
            assert_eq!(flat, want_flat, "{name} {index} functions\n{text}");
            let hottest = |m: &BTreeMap<String, u64>| {
                m.iter()
                    .max_by_key(|(_, v)| **v)
                    .map(|(k, v)| (k.clone(), *v))
            };
            println!(
                "{name} {index}: total {total}, hottest {:?}",
                hottest(&flat)
            );
        }
    }
}

/// The samples carry the thread's comm, pid, tid and (for a pipeline) role
/// as labels, and the Python functions their file.
#[test]
fn pprof_labels_name_threads_roles_and_python_files() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "real-pool-cpu-bound-reader";
    let file = tmp.path().join("p.pb.gz");
    export_to(name, "pprof", &file);
    let tags = go_pprof(&["-tags"], &file);
    for key in ["thread:", "pid:", "tid:", "role:", "consumer", "loader"] {
        assert!(tags.contains(key), "{key} missing from\n{tags}");
    }
    let raw = go_pprof(&["-raw"], &file);
    assert!(
        raw.contains("samples/count[dflt] off_cpu/nanoseconds"),
        "{raw}"
    );
    // Locations section: "ID: ... function file:line".
    assert!(
        raw.lines()
            .any(|l| l.contains(" load_sample ") && l.contains("pipeline.py:181")),
        "no load_sample at pipeline.py:181 in\n{raw}"
    );
}

// --- speedscope -------------------------------------------------------------

/// The schema's rules a reader relies on, and the folded totals.
fn check_speedscope(name: &str, session: &Session, v: &Value) {
    assert_eq!(
        v["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    assert!(v["exporter"].as_str().unwrap().starts_with("storprof "));
    let frames = v["shared"]["frames"].as_array().unwrap();
    assert!(frames.iter().all(|f| f["name"].is_string()), "{name}");
    let profiles = v["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2, "{name}");
    let wants = [
        ("none", session.oncpu.total()),
        ("nanoseconds", session.offcpu.total() * 1000),
    ];
    for (p, (unit, total)) in profiles.iter().zip(wants) {
        assert_eq!(p["type"], "sampled", "{name}");
        assert_eq!(p["unit"], unit, "{name}");
        let samples = p["samples"].as_array().unwrap();
        let weights = p["weights"].as_array().unwrap();
        assert_eq!(samples.len(), weights.len(), "{name} {unit}");
        for s in samples {
            let s = s.as_array().unwrap();
            assert!(!s.is_empty(), "{name}: an empty stack");
            for i in s {
                assert!((i.as_u64().unwrap() as usize) < frames.len(), "{name}: {i}");
            }
        }
        let sum: u64 = weights.iter().map(|w| w.as_u64().unwrap()).sum();
        assert_eq!(p["endValue"].as_u64(), Some(sum), "{name} {unit}");
        assert_eq!(sum, total, "{name} {unit}: the folded file's total");
        assert_eq!(p["startValue"], 0);
    }
}

#[test]
fn speedscope_golden_of_a_small_session() {
    let name = "real-lock-contention";
    let session = load(name);
    let bytes = export::speedscope::render(&session).unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    check_speedscope(name, &session, &v);
    assert_golden(
        format!("export/{name}.speedscope.json"),
        &String::from_utf8(bytes).unwrap(),
    );
}

#[test]
fn speedscope_structure_of_every_fixture() {
    for name in every_fixture() {
        let session = load(&name);
        let v: Value =
            serde_json::from_slice(&export::speedscope::render(&session).unwrap()).unwrap();
        check_speedscope(&name, &session, &v);
    }
}

// --- Chrome trace -------------------------------------------------------------

/// What Perfetto and chrome://tracing need of the file, and what the module
/// doc promises: every thread track named, no slices crossing on a track,
/// every flow's ends paired and inside a slice, times inside the
/// recording, and the on-CPU slices' measured times equal the series'.
fn check_trace(name: &str, session: &Session, v: &Value) {
    assert_eq!(v["displayTimeUnit"], "ms", "{name}");
    let events = v["traceEvents"].as_array().unwrap();
    let duration_us = session.duration_s() * 1e6;
    let key = |e: &Value| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
    let ts = |e: &Value| e["ts"].as_f64().unwrap();
    let named: BTreeSet<(u64, u64)> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(key)
        .collect();
    let processes: BTreeSet<u64> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    let mut slices: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    let mut starts = BTreeMap::new();
    let mut finishes = BTreeMap::new();
    let mut on_cpu_ns = 0u64;
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        if ph == "M" {
            continue;
        }
        let t = ts(e);
        assert!(t >= 0.0 && t <= duration_us + 1e-3, "{name}: ts {t} of {e}");
        assert!(
            processes.contains(&e["pid"].as_u64().unwrap()),
            "{name}: {e}"
        );
        if ph == "C" {
            continue;
        }
        assert!(named.contains(&key(e)), "{name}: no thread_name for {e}");
        match ph {
            "X" => {
                let end = t + e["dur"].as_f64().unwrap();
                assert!(
                    end <= duration_us + 1e-3,
                    "{name}: ends at {end} > {duration_us}: {e}"
                );
                slices.entry(key(e)).or_default().push((t, end));
                if e["name"] == "on-CPU" {
                    on_cpu_ns += e["args"]["measured_ns"].as_u64().unwrap();
                }
            }
            "s" => assert!(
                starts
                    .insert(e["id"].as_u64().unwrap(), (key(e), t))
                    .is_none()
            ),
            "f" => {
                assert_eq!(e["bp"], "e", "{name}: {e}");
                assert!(
                    finishes
                        .insert(e["id"].as_u64().unwrap(), (key(e), t))
                        .is_none()
                );
            }
            other => panic!("{name}: unexpected phase {other}: {e}"),
        }
    }
    for (thread, list) in &mut slices {
        list.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for pair in list.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1 - 1e-3,
                "{name}: slices cross on {thread:?}: {pair:?}"
            );
        }
    }
    let ids = |m: &BTreeMap<u64, ((u64, u64), f64)>| m.keys().copied().collect::<BTreeSet<_>>();
    assert_eq!(ids(&starts), ids(&finishes), "{name}: unpaired flows");
    for (id, (thread, t)) in starts.iter().chain(&finishes) {
        let inside = slices
            .get(thread)
            .is_some_and(|l| l.iter().any(|(a, b)| a <= t && t <= b));
        assert!(
            inside,
            "{name}: flow {id} at {t} on {thread:?} is in no slice"
        );
    }
    let series_on_cpu: u64 = session
        .timeseries
        .as_ref()
        .map_or(0, |ts| ts.threads.iter().map(|t| t.on_cpu().total()).sum());
    assert_eq!(
        on_cpu_ns, series_on_cpu,
        "{name}: on-CPU ns drawn vs recorded"
    );
    let traced_edges = session.waits.as_ref().map_or(0, |w| {
        w.edges
            .iter()
            .filter(|e| e.waker_kind == "task" && e.waker_traced)
            .count()
    });
    assert_eq!(
        starts.is_empty(),
        traced_edges == 0,
        "{name}: {} flows for {traced_edges} traced wake-up edges",
        starts.len()
    );
}

fn trace_of(name: &str) -> (Session, Vec<u8>) {
    let session = load(name);
    let roles = export::thread_roles(&session, &Thresholds::default());
    let bytes = export::trace::render(&session, &roles).unwrap();
    (session, bytes)
}

#[test]
fn trace_golden_of_a_small_pipeline_session() {
    let name = "real-cpu-bound-reader";
    let (session, bytes) = trace_of(name);
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    check_trace(name, &session, &v);
    let text = String::from_utf8(bytes).unwrap();
    // A pipeline: the roles name the threads.
    assert!(
        text.contains("(consumer)") && text.contains("(loader)"),
        "{text}"
    );
    assert_golden(format!("export/{name}.trace.json"), &text);
}

#[test]
fn trace_structure_of_every_fixture() {
    for name in every_fixture() {
        let (session, bytes) = trace_of(&name);
        let v: Value =
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{name}: not JSON: {e}"));
        check_trace(&name, &session, &v);
    }
}

// --- the command ----------------------------------------------------------------

#[test]
fn export_writes_into_the_session_by_default_and_replaces_a_named_file_only_with_force() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("session");
    copy_dir(&fixture("real-storage-bound"), &dir);
    for (format, file) in [
        ("pprof", "profile.pb.gz"),
        ("speedscope", "profile.speedscope.json"),
        ("trace", "trace.json"),
    ] {
        // Twice: the default file is storprof's own and is replaced.
        for _ in 0..2 {
            let o = storprof([
                "export".as_ref(),
                dir.as_os_str(),
                "--format".as_ref(),
                format.as_ref(),
            ]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        assert!(fs::metadata(dir.join(file)).unwrap().len() > 0, "{file}");
    }
    let named = tmp.path().join("mine.json");
    fs::write(&named, "keep me").unwrap();
    let args = |force: bool| {
        let mut a = vec![
            "export".into(),
            dir.clone().into_os_string(),
            "--format".into(),
            "trace".into(),
            "--output".into(),
            named.clone().into_os_string(),
        ];
        if force {
            a.push("--force".into());
        }
        a
    };
    let o = storprof(args(false));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--force"));
    assert_eq!(fs::read_to_string(&named).unwrap(), "keep me");
    let o = storprof(args(true));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_str(&fs::read_to_string(&named).unwrap()).unwrap();
    assert!(v["traceEvents"].is_array());

    // Not a session: a usage error, nothing written.
    let out = tmp.path().join("none.pb.gz");
    let o = storprof([
        "export".as_ref(),
        tmp.path().join("absent").as_os_str(),
        "--format".as_ref(),
        "pprof".as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not exist"));
    assert!(!out.exists());
    let o = storprof([
        "export".as_ref(),
        dir.as_os_str(),
        "--format".as_ref(),
        "svg".as_ref(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "an unknown format is a usage error"
    );
}
