//! A storprof killed with SIGKILL mid-recording leaves the checkpoint it
//! last wrote: a session that `report` reads and calls partial, with the
//! threads recorded up to then, and no BPF program of storprof's left.
//!
//! Root only.
// Tests may unwrap (a failure is a test failure).
#![allow(clippy::expect_used)]

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::support::{STORPROF, assert_root, read_session_json, run_within};

/// Names of the loaded BPF programs (bpftool's JSON listing).
fn bpf_program_names() -> Vec<String> {
    let out = Command::new("bpftool")
        .args(["-j", "prog", "show"])
        .output()
        .expect("bpftool (scripts/setup.sh installs it)");
    let progs: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    progs
        .iter()
        .filter_map(|p| p.get("name").and_then(|n| n.as_str()).map(str::to_string))
        .collect()
}

#[test]
#[ignore = "needs root"]
fn sigkill_of_storprof_leaves_the_last_checkpoint_as_a_partial_session() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let session = tmp.path().join("session");
    // A reader that keeps going for longer than the test waits; `timeout`
    // ends it, since storprof will not be there to.
    let mut rec = Command::new(STORPROF)
        .args(["record", "--checkpoint", "1", "--live", "off", "-o"])
        .arg(&session)
        .args([
            "--",
            "timeout",
            "60",
            "sh",
            "-c",
            "while :; do head -c 65536 /dev/zero > /dev/null; done",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Two checkpoints at least: one 2 s in or later replaced the first
    // (1 s in). They keep to a CPU budget, so the second may come later
    // than 2 s; each is renamed into place whole, so reading it is safe.
    let started = Instant::now();
    let info_path = session.join("session.json");
    let mut last_s = 0.0;
    while last_s < 2.0 && started.elapsed() < Duration::from_secs(40) {
        std::thread::sleep(Duration::from_millis(100));
        last_s = std::fs::read_to_string(&info_path)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|info| info["duration_s"].as_f64())
            .unwrap_or(0.0);
    }
    assert!(
        last_s >= 2.0,
        "no second checkpoint after 40 s (the last {last_s} s in)"
    );
    rec.kill().unwrap();
    rec.wait().unwrap();

    let info: serde_json::Value = read_session_json(&session, "session.json");
    assert_eq!(info["end_reason"], "checkpoint", "{info}");
    let duration = info["duration_s"].as_f64().unwrap();
    assert!(duration >= 2.0, "the last checkpoint is {duration} s in");
    let threads: Vec<serde_json::Value> = read_session_json(&session, "threads.json");
    assert!(
        threads.iter().any(|t| t["comm"] == "head"),
        "the reader's processes are in the checkpoint"
    );
    // No half-written file: every JSON parses (read_session_json panics
    // otherwise), and no temporary file is left by a finished write
    // before the last.
    let _: serde_json::Value = read_session_json(&session, "timeseries.json");
    let _: serde_json::Value = read_session_json(&session, "io.json");

    let mut report = Command::new(STORPROF);
    report.arg("report").arg(&session);
    let out = run_within(report, Duration::from_secs(60), "storprof report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(session.join("report.md")).unwrap();
    assert!(md.contains("**Partial session.**"), "{md}");

    // The kernel dropped storprof's programs with its file descriptors.
    std::thread::sleep(Duration::from_millis(500));
    let left: Vec<String> = bpf_program_names()
        .into_iter()
        .filter(|n| n.starts_with("sched_") || n.starts_with("sys_e") || n == "cpu_samples")
        .collect();
    assert!(left.is_empty(), "BPF programs left: {left:?}");
}
