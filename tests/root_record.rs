//! `storprof record` as root, what it keeps and how it stops the command:
//! - secrets planted in the environment and arguments of a process the
//!   command starts (and in its own shell command line, and in config
//!   files left in the session) appear nowhere in report.md or in any file
//!   of the bundle;
//! - a command that ignores SIGTERM at `--duration` is killed after the
//!   grace period: storprof returns promptly, session.json `ended_by` and
//!   report.md say so; one that obeys SIGTERM is recorded as such;
//! - a Ctrl-C (SIGINT to storprof) that the command ignores is followed,
//!   after the grace period, by SIGTERM, then SIGKILL, each said on stderr
//!   and in `ended_by`; a second and third Ctrl-C take those steps at once;
//! - `diagnose --json` prints verdict.json alone on stdout: the command's
//!   own output goes to stderr.
//!
//! Root only.
// Tests may unwrap (a failure is a test failure).
#![allow(clippy::expect_used)]

use std::{
    fs,
    io::Read,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::support::{STORPROF, assert_root, read_session_json, run_within, storprof};

/// Every entry of a tar.gz: (name, bytes).
fn bundle_entries(tgz: &Path) -> Vec<(String, Vec<u8>)> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(
        fs::File::open(tgz).expect("open the bundle"),
    ));
    archive
        .entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = e.path().unwrap().to_string_lossy().into_owned();
            let mut bytes = Vec::new();
            e.read_to_end(&mut bytes).unwrap();
            (name, bytes)
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
#[ignore = "needs root"]
fn secrets_of_every_traced_process_stay_out_of_the_report_and_the_bundle() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    // Unique, so a hit cannot be anything else.
    let tag = format!(
        "{}x{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    );
    let s = |name: &str| format!("{name}-{tag}");
    // Only in the child's environment and arguments (the shell reads them
    // from a file, storprof's own argv never holds them).
    let child_token = s("childtoken");
    let child_aws = s("childaws");
    let child_password = s("childpassword");
    let child_url_password = s("childurlpw");
    // Also literally in the shell command line storprof launches.
    let argv_token = s("argvtoken");
    let argv_password = s("argvpassword");
    let argv_key_id = s("AKIAargv");
    let argv_s3_secret = s("argvs3secret");
    // In config files left in the session directory.
    let yaml_secret = s("yamlsecret");
    let ini_secret = s("inisecret");
    let env_secret = s("envsecret");
    let json_secret = s("jsonsecret");

    let secrets_env = tmp.path().join("secrets.env");
    fs::write(
        &secrets_env,
        format!(
            "CHILD_TOKEN={child_token}\nCHILD_AWS={child_aws}\nCHILD_PW={child_password}\n\
             CHILD_URL_PW={child_url_password}\n"
        ),
    )
    .unwrap();
    let marker = tmp.path().join("child-ran");
    // The child (python3, started by the shell through env) has every
    // secret in its environment and arguments, and burns CPU for a while so
    // that it is sampled and named in the session.
    let busy = format!(
        "import sys,time\nopen('{}','w').write(' '.join(sys.argv))\nt=time.time()\n\
         while time.time()-t<0.6: pass",
        marker.display()
    );
    let script = format!(
        ". {env}; env SECRET_TOKEN=\"$CHILD_TOKEN\" AWS_SECRET_ACCESS_KEY=\"$CHILD_AWS\" \
         API_TOKEN={argv_token} python3 -c \"$BUSY\" --password \"$CHILD_PW\" \
         --db-password={argv_password} https://user:\"$CHILD_URL_PW\"@example.invalid/x \
         s3://{argv_key_id}:{argv_s3_secret}@minio:9000/bucket",
        env = secrets_env.display()
    );
    let session = tmp.path().join("session");
    let mut record = Command::new(STORPROF);
    record
        .args(["record", "--live", "off", "--output"])
        .arg(&session)
        .args(["--", "sh", "-c", &script])
        .env("BUSY", &busy);
    let out = run_within(record, Duration::from_secs(60), "storprof record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The child ran with the secrets in its argv.
    let child_argv = fs::read_to_string(&marker).expect("the child ran");
    assert!(
        child_argv.contains(&child_password),
        "child argv: {child_argv}"
    );
    // storprof saw the child, and its own session keeps the command as
    // launched (the user's own directory): the planted secrets are where
    // storprof can see them.
    let info: serde_json::Value = read_session_json(&session, "session.json");
    let comms: Vec<&str> = info["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["comm"].as_str())
        .collect();
    assert!(
        comms.iter().any(|c| c.starts_with("python3")),
        "the child was not traced: {comms:?}"
    );
    assert!(info.to_string().contains(&argv_password));

    // Config files a user left in the session, copied into the bundle.
    fs::write(
        session.join("dlio-config.yaml"),
        format!(
            "storage:\n  storage_type: s3\n  storage_options:\n    secret_access_key: \
             {yaml_secret}\n"
        ),
    )
    .unwrap();
    fs::write(
        session.join("credentials"),
        format!("[default]\naws_secret_access_key = {ini_secret}\n"),
    )
    .unwrap();
    fs::write(
        session.join(".env"),
        format!("export HF_TOKEN=\"{env_secret}\"\n"),
    )
    .unwrap();
    fs::write(
        session.join("extra.json"),
        format!("{{\"storage\": {{\"password\": \"{json_secret}\", \"bucket\": \"b\"}}}}"),
    )
    .unwrap();

    let tgz = tmp.path().join("bundle.tar.gz");
    let mut bundle = Command::new(STORPROF);
    bundle.arg("bundle").arg(&session).arg("-o").arg(&tgz);
    let out = run_within(bundle, Duration::from_secs(60), "storprof bundle");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let secrets = [
        &child_token,
        &child_aws,
        &child_password,
        &child_url_password,
        &argv_token,
        &argv_password,
        &argv_key_id,
        &argv_s3_secret,
        &yaml_secret,
        &ini_secret,
        &env_secret,
        &json_secret,
    ];
    let entries = bundle_entries(&tgz);
    let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "session/session.json",
        "session/report.md",
        "session/system.json",
        "session/oncpu.folded",
        "session/dlio-config.yaml",
        "session/credentials",
        "session/.env",
        "session/extra.json",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for (name, bytes) in &entries {
        for secret in secrets {
            assert!(
                !contains(bytes, secret),
                "{secret} in {name}:\n{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
    // The report on disk (shared as is) holds none either.
    let report = fs::read_to_string(session.join("report.md")).unwrap();
    for secret in secrets {
        assert!(!report.contains(secret.as_str()), "{secret} in report.md");
    }
    // What was redacted is still recognisable.
    assert!(report.contains("API_TOKEN=<redacted>"), "{report}");
    let json = &entries
        .iter()
        .find(|(n, _)| n == "session/extra.json")
        .unwrap()
        .1;
    assert!(contains(json, "\"bucket\": \"b\""));
}

/// `storprof record --live off --duration 1 [extra] -- sh -c SCRIPT` in
/// `dir`, within a deadline; returns the output and how long it took.
fn record_for_a_second(
    dir: &Path,
    extra: &[&str],
    script: &str,
) -> (std::process::Output, Duration) {
    let mut cmd = Command::new(STORPROF);
    cmd.args(["record", "--live", "off", "--duration", "1"])
        .args(extra)
        .arg("--output")
        .arg(dir)
        .args(["--", "sh", "-c", script]);
    let started = Instant::now();
    let out = run_within(cmd, Duration::from_secs(25), "storprof record --duration 1");
    (out, started.elapsed())
}

/// Runs `storprof report` on `session` and asserts report.md says `sentence`.
fn assert_report_says(session: &Path, sentence: &str) {
    let out = storprof([Path::new("report"), session]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = fs::read_to_string(session.join("report.md")).unwrap();
    assert!(report.contains(sentence), "{report}");
}

/// The process whose pid `pid_file` holds (`what`) is gone, or a zombie
/// nobody reaps.
fn assert_gone(pid_file: &Path, what: &str) {
    let pid = fs::read_to_string(pid_file).unwrap();
    let stat = fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
    assert!(
        stat.as_ref().map_or(true, |s| s
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))),
        "{what} still runs: {stat:?}"
    );
}

/// Sends `signo` to `pid` (a process this test started).
fn send(pid: u32, signo: i32) {
    // SAFETY: kill(2) of a child this test started, with a valid signal.
    let rc = unsafe { libc::kill(pid as libc::pid_t, signo) };
    assert_eq!(rc, 0, "kill {pid}: {}", std::io::Error::last_os_error());
}

/// `storprof record --live off --grace GRACE -- sh -c SCRIPT` in `dir`,
/// interrupted as a user would: once the command has written `ready`,
/// SIGINT to storprof (a `kill`, which storprof forwards), then again
/// after each of `again`. Returns the output and the time from the first
/// SIGINT until storprof exited (within a deadline).
fn record_interrupted(
    dir: &Path,
    grace: &str,
    script: &str,
    ready: &Path,
    again: &[Duration],
) -> (std::process::Output, Duration) {
    let mut cmd = Command::new(STORPROF);
    cmd.args(["record", "--live", "off", "--grace", grace, "--output"])
        .arg(dir)
        .args(["--", "sh", "-c", script]);
    // Its own process group: nothing the test leaves outlives it.
    let child = std::os::unix::process::CommandExt::process_group(&mut cmd, 0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(child.wait_with_output());
    });
    let waited = Instant::now();
    while !ready.exists() && waited.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let first = Instant::now();
    if ready.exists() {
        send(pid, libc::SIGINT);
        for pause in again {
            std::thread::sleep(*pause);
            send(pid, libc::SIGINT);
        }
    }
    let out = match done_rx.recv_timeout(Duration::from_secs(40)) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            // SAFETY: kill(2) of the process group this test started.
            unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
            panic!("storprof record did not exit 40 s after the Ctrl-C");
        }
    };
    let took = first.elapsed();
    assert!(
        ready.exists(),
        "the command never started: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out, took)
}

#[test]
#[ignore = "needs root"]
fn a_command_ignoring_ctrl_c_gets_sigterm_after_the_grace_period() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let session = tmp.path().join("session");
    let ready = tmp.path().join("ready");
    // The shell ignores SIGINT (and so do the sleeps it starts); SIGTERM
    // ends it.
    let script = format!(
        "trap '' INT; echo $$ > {}; while :; do sleep 0.1; done",
        ready.display()
    );
    let (out, took) = record_interrupted(&session, "1", &script, &ready, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(took < Duration::from_secs(15), "took {took:?}\n{stderr}");
    assert_eq!(out.status.code(), Some(128 + 15), "{stderr}");
    assert!(
        stderr.contains("passed SIGINT to the command")
            && stderr.contains("SIGTERM in 1 s if it is still running (Ctrl-C again: now)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("still running 1 s after the Ctrl-C: sent SIGTERM to the command"),
        "{stderr}"
    );
    let info: serde_json::Value = read_session_json(&session, "session.json");
    assert_eq!(info["end_reason"], "interrupted");
    assert_eq!(info["ended_by"], "interrupt-sigterm");
    assert_eq!(info["grace_s"], 1.0);
    assert_eq!(info["exit_signal"], 15);
    assert_report_says(
        &session,
        "After Ctrl-C the command was still running, was sent SIGTERM and ended (signal 15).",
    );
}

#[test]
#[ignore = "needs root"]
fn ctrl_c_again_skips_to_sigterm_then_sigkill() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let session = tmp.path().join("session");
    let ready = tmp.path().join("ready");
    // Ignores SIGINT and SIGTERM: only SIGKILL ends it.
    let script = format!(
        "trap '' INT TERM; echo $$ > {}; while :; do sleep 0.1; done",
        ready.display()
    );
    let pause = Duration::from_millis(700);
    // A 60 s grace period: only the second and third Ctrl-C can end it soon.
    let (out, took) = record_interrupted(&session, "60", &script, &ready, &[pause, pause]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(took < Duration::from_secs(15), "took {took:?}\n{stderr}");
    assert_eq!(out.status.code(), Some(128 + 9), "{stderr}");
    assert!(
        stderr.contains("Ctrl-C again: sent SIGTERM to the command"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Ctrl-C again: killing the command"),
        "{stderr}"
    );
    let info: serde_json::Value = read_session_json(&session, "session.json");
    assert_eq!(info["end_reason"], "interrupted");
    assert_eq!(info["ended_by"], "interrupt-sigkill");
    assert_eq!(info["exit_signal"], 9);
    // The shell's pid: gone (or a zombie of nobody's).
    assert_gone(&ready, "the command");
    assert_report_says(
        &session,
        "After Ctrl-C the command outlived SIGINT and SIGTERM and was killed with SIGKILL.",
    );
}

#[test]
#[ignore = "needs root"]
fn a_command_ignoring_sigterm_at_the_duration_is_killed_after_the_grace_period() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let session = tmp.path().join("session");
    let pid_file = tmp.path().join("sleep.pid");
    // The shell ignores SIGTERM, and so does the sleep it starts (ignored
    // signals are inherited).
    let script = format!(
        "trap '' TERM; sleep 30 & echo $! > {}; wait",
        pid_file.display()
    );
    let (out, took) = record_for_a_second(&session, &["--grace", "1"], &script);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The duration, the grace period, then the session: not the 30 s.
    assert!(took < Duration::from_secs(15), "took {took:?}\n{stderr}");
    assert_eq!(out.status.code(), Some(128 + 9), "{stderr}");
    assert!(
        stderr.contains("still running 1 s after SIGTERM: killed with SIGKILL"),
        "{stderr}"
    );
    let info: serde_json::Value = read_session_json(&session, "session.json");
    assert_eq!(info["end_reason"], "duration");
    assert_eq!(info["ended_by"], "duration-sigkill-after-grace");
    assert_eq!(info["grace_s"], 1.0);
    assert_eq!(info["exit_signal"], 9);
    // The sleep the shell left is gone too.
    assert_gone(&pid_file, "the sleep");

    assert_report_says(
        &session,
        "The command ignored SIGTERM at --duration and was killed with SIGKILL after the \
         1 s grace period.",
    );
}

#[test]
#[ignore = "needs root"]
fn a_command_that_obeys_sigterm_at_the_duration_ends_within_the_grace_period() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let session = tmp.path().join("session");
    // `exec`: the sleep is the command and takes the SIGTERM itself.
    let (out, took) = record_for_a_second(&session, &[], "exec sleep 30");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(took < Duration::from_secs(10), "took {took:?}\n{stderr}");
    // The command's signal passes through, as before.
    assert_eq!(out.status.code(), Some(128 + 15), "{stderr}");
    let info: serde_json::Value = read_session_json(&session, "session.json");
    assert_eq!(info["ended_by"], "duration-sigterm");
    assert_eq!(info["grace_s"], 5.0);
    assert_eq!(info["exit_signal"], 15);
    assert_report_says(
        &session,
        "At --duration the command was sent SIGTERM and ended within the 5 s grace period \
         (signal 15).",
    );
}

#[test]
#[ignore = "needs root"]
fn diagnose_json_prints_the_verdict_alone_on_stdout() {
    assert_root();
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("session");
    let mut cmd = Command::new(STORPROF);
    cmd.args(["diagnose", "--json", "--live", "off", "-o"])
        .arg(&session)
        .args(["--", "sh", "-c", "echo workload-says-hello; sleep 0.5"]);
    let out = run_within(cmd, Duration::from_secs(120), "storprof diagnose --json");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let verdict: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{stdout}"));
    assert!(verdict["verdict"].is_string(), "{verdict}");
    assert!(verdict["what_would_help"].is_object(), "{verdict}");
    assert!(stderr.contains("workload-says-hello"), "{stderr}");
    assert!(session.join("verdict.json").exists());
}
