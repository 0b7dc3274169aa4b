//! `storprof merge` on recorded multi-host fixture sessions
//! (tests/data/sessions/multihost/): per-host verdicts, straggler, cluster
//! verdict, report golden, bundle with every host's data. No root needed.
#![allow(clippy::expect_used)]
use std::io::Read;
use std::path::PathBuf;
use std::process::Command;

use storprof::merge::command::{files, merge_sessions};
use storprof_analysis::{Thresholds, VerdictId};

use crate::support::{STORPROF as BIN, assert_golden, session_fixture};

fn fixture(set: &str, host: &str) -> PathBuf {
    session_fixture("multihost").join(set).join(host)
}

/// `storprof merge` of the netns fixture's two hosts into `out`, with
/// `extra` arguments.
fn merge_netns(out: &std::path::Path, extra: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .arg("merge")
        .arg(fixture("netns", "h1"))
        .arg(fixture("netns", "h2"))
        .arg("-o")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

/// The report names each session's path; golden files hold `<repo>` in
/// place of this checkout's location so they match in any clone.
fn golden(name: &str, got: &str) {
    let got = got.replace(env!("CARGO_MANIFEST_DIR"), "<repo>/profiler");
    assert_golden(format!("multihost/{name}"), &got);
}

#[test]
fn throttled_host_is_the_storage_bound_straggler() {
    let sessions: Vec<PathBuf> = ["h1", "h2", "h3"]
        .iter()
        .map(|h| fixture("straggler", h))
        .collect();
    let m = merge_sessions(&sessions, &Thresholds::default()).unwrap();
    let verdicts: Vec<(&str, VerdictId)> = m
        .hosts
        .iter()
        .map(|h| (h.host.as_str(), h.verdict))
        .collect();
    assert_eq!(
        verdicts,
        vec![
            ("h1", VerdictId::ComputeBound),
            ("h2", VerdictId::StorageBound),
            ("h3", VerdictId::ComputeBound)
        ]
    );
    assert_eq!(m.stragglers.len(), 1, "{:?}", m.stragglers);
    assert_eq!(m.stragglers[0].host, "h2");
    assert_eq!(m.cluster_verdict, VerdictId::StorageBound);
    assert!(m.io_wait_imbalance > storprof::merge::STRAGGLER_IMBALANCE);
    golden(
        "straggler-report.md",
        &storprof::merge::report::render_markdown(&m),
    );
}

/// Sessions recorded by tests/multihost.rs (`record --netns` on two
/// network-namespace hosts, storprof-h2 blkio-throttled, O_DIRECT reads),
/// with their wake-up graphs: each rank is a child of its host's `orted`,
/// which reads its output and must not pass for its consumer.
#[test]
fn real_netns_recording_names_the_throttled_host() {
    let sessions: Vec<PathBuf> = ["storprof-h1", "storprof-h2"]
        .iter()
        .map(|h| fixture("real-netns", h))
        .collect();
    let m = merge_sessions(&sessions, &Thresholds::default()).unwrap();
    let hosts: Vec<&str> = m.hosts.iter().map(|h| h.host.as_str()).collect();
    assert_eq!(hosts, vec!["storprof-h1", "storprof-h2"]);
    assert_eq!(m.stragglers.len(), 1, "{:?}", m.stragglers);
    let s = &m.stragglers[0];
    assert_eq!(s.host, "storprof-h2");
    assert_eq!(s.verdict, VerdictId::StorageBound);
    assert_eq!(m.cluster_verdict, VerdictId::StorageBound);
    assert!(s.reader_io_wait_share > 0.5, "{s:?}");
    assert!(s.others_median_io_wait_share < 0.1, "{s:?}");
    assert!(m.hosts[1].storage_bound_fired);
    // The fast host's consumer hardly waits: it is compute-bound (its
    // readers' few waits may still be storage, a runner-up).
    assert_eq!(m.hosts[0].verdict, VerdictId::ComputeBound);
    assert!(m.hosts[0].reader_io_wait_share < 0.1, "{:?}", m.hosts[0]);
    golden(
        "real-netns-report.md",
        &storprof::merge::report::render_markdown(&m),
    );
}

#[test]
fn balanced_hosts_give_the_majority_verdict_and_no_straggler() {
    let sessions: Vec<PathBuf> = ["h1", "h2"]
        .iter()
        .map(|h| fixture("balanced", h))
        .collect();
    let m = merge_sessions(&sessions, &Thresholds::default()).unwrap();
    assert!(m.stragglers.is_empty(), "{:?}", m.stragglers);
    assert_eq!(m.cluster_verdict, VerdictId::ComputeBound);
    assert!(
        m.cluster_headline.contains("2 of 2"),
        "{}",
        m.cluster_headline
    );
}

#[test]
fn cli_writes_report_json_and_bundle_of_every_host() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("merged");
    let o = merge_netns(&out, &[]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Both sessions say hostname ci-vm: named by their directories.
    assert!(
        stdout.contains("cluster verdict: storage-bound"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("h2") && l.contains("STRAGGLER")),
        "{stdout}"
    );
    let report = std::fs::read_to_string(out.join(files::REPORT)).unwrap();
    assert!(report.contains("| | h1 | h2 (straggler) |"), "{report}");
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join(files::MERGED_JSON)).unwrap())
            .unwrap();
    assert_eq!(merged["stragglers"][0]["host"], "h2");

    let mut names = Vec::new();
    let mut all_text = String::new();
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(out.join(files::BUNDLE)).unwrap());
    let mut tar = tar::Archive::new(gz);
    for e in tar.entries().unwrap() {
        let mut e = e.unwrap();
        names.push(e.path().unwrap().display().to_string());
        let mut s = String::new();
        let _ = e.read_to_string(&mut s);
        all_text.push_str(&s);
    }
    for host in ["h1", "h2"] {
        for f in [
            "session.json",
            "threads.json",
            "io.json",
            "oncpu.folded",
            "offcpu.folded",
        ] {
            let want = format!("storprof-merged/hosts/{host}/{f}");
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
    }
    assert!(names.contains(&"storprof-merged/report.md".to_string()));
    // The storage-bound fixture's command carries secrets: redacted in the bundle.
    assert!(!all_text.contains("wJalrXUtnFEMIK7MDENG") && !all_text.contains("hunter2"));
}

#[test]
fn cli_json_prints_merged_json() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("merged");
    let o = merge_netns(&out, &["--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join(files::MERGED_JSON)).unwrap())
            .unwrap();
    assert_eq!(printed, written);
    assert_eq!(printed["stragglers"][0]["host"], "h2");
}

#[test]
fn cli_bad_input_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .args(["merge", "/nonexistent/session", "-o"])
        .arg(tmp.path().join("m"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/session"));
    // Two sessions with the same hostname and the same directory name.
    let o = Command::new(BIN)
        .arg("merge")
        .arg(fixture("netns", "h1"))
        .arg(fixture("netns", "h1"))
        .arg("-o")
        .arg(tmp.path().join("m2"))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
