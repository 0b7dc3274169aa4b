//! The live view, the early verdict (`--until-verdict`) and stalls, on real
//! workloads: tests/python/pipeline.py (a DataLoader-shaped job: trainer,
//! forked workers, pyarrow pools) and tests/workloads/workload.c (a fork
//! deadlock, a busy loop). Root only but for the bad-input checks, which
//! must fail before anything starts.
//!
//! The pipelines here are the scenario suite's (tests/scenarios.rs), with
//! a duration far beyond the test's deadline: the early verdict must equal
//! the full recording's verdict there, and come within 60 s of the start.
// Tests may unwrap (a failure is a test failure).
#![allow(clippy::expect_used)]
use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::support;
use crate::support::{
    STORPROF, Throttle, assert_root, build_workload, python_with_pyarrow, run_within,
};

fn pipeline_python() -> (String, String) {
    let python = python_with_pyarrow()
        .expect("a Python with pyarrow (scripts/crosscheck.sh makes target/venv)");
    let script = support::repo().join("tests/python/pipeline.py");
    (
        python.to_string_lossy().into_owned(),
        script.to_string_lossy().into_owned(),
    )
}

fn make_parquet(dir: &Path) -> PathBuf {
    let (py, script) = pipeline_python();
    let data = dir.join("parquet");
    let status = Command::new(&py)
        .args([script.as_str(), "--make-data"])
        .arg(&data)
        .args(["--format", "parquet"])
        .stdout(Stdio::null())
        .status()
        .expect("run pipeline.py --make-data");
    assert!(status.success());
    data
}

struct Diagnosed {
    verdict: serde_json::Value,
    session: serde_json::Value,
    stdout: String,
    stderr: String,
    wall: Duration,
}

/// `storprof diagnose OPTIONS --output SESSION -- CMD`, which must succeed
/// within `limit`.
fn diagnose(session: &Path, options: &[&str], cmd: &[String], limit: Duration) -> Diagnosed {
    let mut c = Command::new(STORPROF);
    c.arg("diagnose")
        .args(options)
        .arg("--output")
        .arg(session)
        .arg("--")
        .args(cmd);
    let started = Instant::now();
    let out = run_within(c, limit, "storprof diagnose");
    let wall = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "storprof diagnose {cmd:?}: {}\n{stdout}\n{stderr}",
        out.status
    );
    Diagnosed {
        verdict: support::read_json(&session.join("verdict.json")),
        session: support::read_json(&session.join("session.json")),
        stdout,
        stderr,
        wall,
    }
}

fn assert_early(d: &Diagnosed, expected: &str) {
    assert_eq!(
        d.verdict["verdict"], expected,
        "{}\n{}",
        d.verdict, d.stderr
    );
    assert_eq!(d.session["end_reason"], "verdict", "{}", d.stderr);
    let early = &d.session["early_verdict"];
    assert_eq!(early["verdict"], expected, "{early}");
    let held_to = early["held_to_s"].as_f64().unwrap();
    assert!(held_to <= 60.0, "verdict at {held_to} s");
    // The live view printed lines (stderr is a pipe here).
    assert!(d.stderr.contains("storprof: live "), "{}", d.stderr);
}

#[test]
#[ignore = "needs root"]
fn until_verdict_stops_a_launched_pipeline_with_the_full_recordings_verdict() {
    assert_root();
    let tmp = support::scratch("live");
    let data = make_parquet(tmp.path());
    let (py, script) = pipeline_python();
    let data_s = data.to_string_lossy().into_owned();
    let pipeline = |extra: &[&str]| -> Vec<String> {
        let mut v = vec![py.clone(), script.clone(), "--data".into(), data_s.clone()];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let options = ["--until-verdict", "10", "--live", "lines"];

    // CPU-bound: forked workers decode and format a dict per sample.
    let cmd = pipeline(&["--computation-time", "0.005", "--duration", "600"]);
    let d = diagnose(
        &tmp.path().join("cpu"),
        &options,
        &cmd,
        Duration::from_secs(90),
    );
    assert_early(&d, "cpu-bound-reader");
    // Stopped with SIGTERM, the trainer ended its run cleanly and said so.
    assert!(d.stdout.contains("PIPELINE_RESULT "), "{}", d.stdout);
    assert_eq!(d.session["exit_code"], 0, "{}", d.session);
    let report = fs::read_to_string(tmp.path().join("cpu/report.md")).unwrap();
    assert!(report.contains("Verdict reached early"), "{report}");

    // Storage-bound: O_DIRECT reads under a 10 MiB/s blkio throttle.
    let throttle = Throttle::new(&data, 10 << 20).expect("blkio cgroup v1 throttling available");
    let procs = throttle.dir.join("cgroup.procs");
    let inner = pipeline(&[
        "--odirect",
        "--no-format-dict",
        "--computation-time",
        "0.005",
        "--duration",
        "600",
    ]);
    let cmd = vec![
        "sh".to_string(),
        "-c".to_string(),
        format!("echo $$ > {} && exec {}", procs.display(), inner.join(" ")),
    ];
    let d = diagnose(
        &tmp.path().join("storage"),
        &options,
        &cmd,
        Duration::from_secs(90),
    );
    drop(throttle);
    assert_early(&d, "storage-bound");
    assert!(d.stdout.contains("PIPELINE_RESULT "), "{}", d.stdout);
}

#[test]
#[ignore = "needs root"]
fn until_verdict_with_pid_leaves_the_workload_running() {
    assert_root();
    let tmp = support::scratch("live");
    let data = make_parquet(tmp.path());
    let (py, script) = pipeline_python();
    let mut job = Command::new(&py)
        .arg(&script)
        .arg("--data")
        .arg(&data)
        .args(["--computation-time", "0.005", "--duration", "300"])
        .stdout(Stdio::null())
        .spawn()
        .expect("start pipeline.py");
    // Attach to a job that already trains: its workers come from the process tree.
    std::thread::sleep(Duration::from_secs(3));
    let session = tmp.path().join("attached");
    let mut c = Command::new(STORPROF);
    c.args([
        "diagnose",
        "--until-verdict",
        "10",
        "--live",
        "lines",
        "--pid",
    ])
    .arg(job.id().to_string())
    .arg("--output")
    .arg(&session);
    let out = run_within(c, Duration::from_secs(90), "storprof diagnose --pid");
    let still_running = job.try_wait().unwrap().is_none();
    // SAFETY: SIGTERM to the job this test started (it stops cleanly).
    unsafe { libc::kill(job.id() as libc::pid_t, libc::SIGTERM) };
    let _ = job.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(still_running, "--then continue is the default for --pid");
    let verdict: serde_json::Value = support::read_json(&session.join("verdict.json"));
    let info: serde_json::Value = support::read_json(&session.join("session.json"));
    assert_eq!(verdict["verdict"], "cpu-bound-reader", "{verdict}");
    assert_eq!(info["end_reason"], "verdict");
    // The forked workers were traced: found from the process tree.
    assert!(
        info["tracked_pids"].as_array().unwrap().len() >= 3,
        "{info}"
    );
}

#[test]
#[ignore = "needs root"]
fn until_verdict_with_a_command_that_ends_first_gives_the_full_report() {
    assert_root();
    let tmp = support::scratch("live");
    let workload = build_workload(tmp.path());
    let data = tmp.path().join("data.bin");
    let wl = workload.to_string_lossy().into_owned();
    let data_s = data.to_string_lossy().into_owned();
    let status = Command::new(&wl)
        .args(["make-file", &data_s, "64"])
        .status()
        .unwrap();
    assert!(status.success());
    let cmd = vec![wl, "cached-read".into(), data_s, "3".into()];
    let d = diagnose(
        &tmp.path().join("short"),
        &["--until-verdict", "30"],
        &cmd,
        Duration::from_secs(60),
    );
    assert_eq!(d.session["end_reason"], "exited");
    assert!(d.session.get("early_verdict").is_none(), "{}", d.session);
    assert_eq!(d.verdict["verdict"], "page-cache-served");
    assert!(d.wall < Duration::from_secs(30));
}

#[test]
#[ignore = "needs root"]
fn a_fork_deadlock_and_a_busy_loop_are_stalled_with_their_stacks() {
    assert_root();
    let tmp = support::scratch("live");
    let workload = build_workload(tmp.path());
    let wl = workload.to_string_lossy().into_owned();
    let data = tmp.path().join("data.bin");
    let data_s = data.to_string_lossy().into_owned();
    let status = Command::new(&wl)
        .args(["make-file", &data_s, "64"])
        .status()
        .unwrap();
    assert!(status.success());
    let limit = Duration::from_secs(120);

    // A child forked while a thread held a lock waits for it forever; its
    // parent waits for the child. Default stall threshold (60 s).
    let cmd = vec![
        wl.clone(),
        "fork-deadlock".into(),
        data_s.clone(),
        "2".into(),
    ];
    let d = diagnose(
        &tmp.path().join("deadlock"),
        &["--until-verdict"],
        &cmd,
        limit,
    );
    assert_eq!(d.verdict["verdict"], "stalled", "{}", d.verdict);
    let stall = &d.verdict["stall"];
    assert_eq!(stall["kind"], "blocked", "{stall}");
    let stacks: Vec<String> = stall["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["stack"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_str().unwrap().to_string())
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect();
    assert!(
        stacks
            .iter()
            .any(|s| s.contains("futex") && s.contains("lll_lock_wait")),
        "the child's lock wait, user and kernel frames: {stacks:?}"
    );
    assert!(
        stacks.iter().any(|s| s.contains("wait4")),
        "the parent's wait for its child: {stacks:?}"
    );
    // The deadlocked child was stopped with its parent.
    // (Killed, it may linger a moment as a zombie until init reaps it.)
    let alive = |pid: u64| {
        fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
            st.rsplit_once(')')
                .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    for p in d.session["tracked_pids"].as_array().unwrap() {
        let pid = p.as_u64().unwrap();
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!alive(pid), "traced process {pid} outlived the stop");
    }
    let report = fs::read_to_string(tmp.path().join("deadlock/report.md")).unwrap();
    assert!(report.contains("## Stalled (blocked)"), "{report}");

    // A job that read, then loops on a CPU and reads nothing.
    let cmd = vec![wl, "read-then-spin".into(), data_s.clone(), "2".into()];
    let d = diagnose(&tmp.path().join("busy"), &["--until-verdict"], &cmd, limit);
    assert_eq!(d.verdict["verdict"], "stalled", "{}", d.verdict);
    let stall = &d.verdict["stall"];
    assert_eq!(stall["kind"], "busy-loop", "{stall}");
    assert!(
        stall["threads"][0]["stack"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "burn_cpu"),
        "{stall}"
    );
}

/// Exit status and stderr of `storprof ARGS`.
fn refused(args: &[&str]) -> (i32, String) {
    let out = support::storprof(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_times_are_refused_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("never");
    let out_s = out.to_str().unwrap();
    for (flags, says) in [
        (&["--until-verdict", "0"][..], "--until-verdict must be"),
        (&["--until-verdict=-3"], "--until-verdict must be"),
        (&["--stall-after", "0"], "--stall-after must be"),
        (&["--live-interval", "nan"], "--live-interval must be"),
        (&["--live-budget", "150"], "--live-budget must be"),
        (&["--live-budget=-1"], "--live-budget must be"),
        (&["--duration=-1"], "--duration must be"),
    ] {
        for command in ["record", "diagnose"] {
            let mut args = vec![command];
            args.extend_from_slice(flags);
            args.extend(["--output", out_s, "--", "true"]);
            let (code, stderr) = refused(&args);
            assert_eq!(code, 2, "{args:?}: {stderr}");
            assert!(stderr.contains(says), "{args:?}: {stderr}");
            assert!(!out.exists(), "{args:?} created its output");
        }
    }
    // --then without --until-verdict is a usage error too.
    let (code, stderr) = refused(&["record", "--then", "stop", "--", "true"]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
#[ignore = "needs root"]
fn then_stop_with_a_pid_storprof_may_not_stop_is_refused() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("never");
    let out_s = out.to_str().unwrap();
    let own = std::process::id().to_string();
    for (pid, says) in [("1", "init"), (own.as_str(), "ancestors")] {
        let (code, stderr) = refused(&[
            "diagnose",
            "--pid",
            pid,
            "--until-verdict",
            "--then",
            "stop",
            "--output",
            out_s,
        ]);
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains(&format!("cannot stop pid {pid}")) && stderr.contains(says),
            "{stderr}"
        );
        assert!(!out.exists());
    }
}

/// The text of tmux pane `target`.
fn capture(target: &str) -> String {
    let out = Command::new("tmux")
        .args(["capture-pane", "-p", "-t", target])
        .output()
        .expect("tmux capture-pane");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[ignore = "needs root"]
fn the_live_view_in_a_terminal_shows_a_status_block_that_updates() {
    assert_root();
    if Command::new("tmux").arg("-V").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs tmux (scripts/setup.sh installs it)"
        );
        eprintln!("skipping: no tmux");
        return;
    }
    let tmp = support::scratch("live");
    let workload = build_workload(tmp.path());
    let session = tmp.path().join("tmux");
    let name = format!("storprof-live-{}", std::process::id());
    // The workload prints a line a second, which must scroll above the block.
    let inner = format!(
        "for i in $(seq 1 14); do echo workload line $i; sleep 1; done & {} spin 1 14; wait",
        workload.display()
    );
    let command = format!(
        "{STORPROF} record --live block --live-interval 1 --output {} -- sh -c '{inner}'; sleep 60",
        session.display()
    );
    let status = Command::new("tmux")
        .args(["new-session", "-d", "-x", "160", "-y", "30", "-s", &name])
        .arg(command)
        .status()
        .expect("tmux new-session");
    assert!(status.success());
    let mut screens = Vec::new();
    for wait in [6, 4] {
        std::thread::sleep(Duration::from_secs(wait));
        screens.push(capture(&name));
    }
    let _ = Command::new("tmux")
        .args(["kill-session", "-t", &name])
        .status();
    for screen in &screens {
        for field in [
            "storprof live",
            "phase",
            "verdict",
            "I/O (last",
            "busiest",
            "would help",
            "workload/",
        ] {
            assert!(screen.contains(field), "no {field:?} on screen:\n{screen}");
        }
        // The block sits at the bottom; the workload's lines above it.
        let lines: Vec<&str> = screen.lines().collect();
        let block_top = lines
            .iter()
            .rposition(|l| l.starts_with("storprof live"))
            .unwrap();
        // Six rows: clock, verdict, headline, I/O, busiest, would help.
        assert!(
            block_top + 6 >= lines.len(),
            "block not at the bottom:\n{screen}"
        );
        assert!(
            lines[..block_top]
                .iter()
                .any(|l| l.contains("workload line")),
            "the workload's output is not above the block:\n{screen}"
        );
    }
    let clock = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("storprof live"))
            .map(|l| l.split_whitespace().nth(2).unwrap_or("").to_string())
    };
    assert_ne!(
        clock(&screens[0]),
        clock(&screens[1]),
        "the block did not update:\n{}\n---\n{}",
        screens[0],
        screens[1]
    );
}
