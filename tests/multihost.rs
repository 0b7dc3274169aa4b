//! Multi-host diagnosis on one machine (issue 7): two test hosts made as
//! network namespaces joined by a bridge on a private subnet, a 2-rank
//! `storprof bench` (O_DIRECT reads) launched across them by `mpirun`
//! through scripts/netns-rsh-agent.sh, one host's ranks throttled by a
//! blkio cgroup, each host recorded by its own `storprof record --netns`,
//! the two sessions merged: the merged diagnosis must name the throttled
//! host as the straggler and storage-bound.
//!
//! ```text
//!  root ns: bridge sp-br0 10.213.47.1 ─┬─ veth ─ storprof-h1 (10.213.47.2): rank 0
//!          mpirun, 2 × record --netns  └─ veth ─ storprof-h2 (10.213.47.3): rank 1, blkio-throttled
//! ```
//! Everything the test makes (namespaces, bridge, veths, the /etc/hosts
//! lines, the cgroup, processes left in the namespaces) is removed by a
//! Drop guard, on failure too. Root only (`#[ignore = "needs root"]`, run
//! with `-- --include-ignored`); skips with the reason printed without
//! mpirun, ip or storprof built with `--features storprof/mpi`.
//!
//! `STORPROF_SAVE_FIXTURES=1` copies the two recorded sessions to
//! tests/data/sessions/multihost/real-netns/, where tests/merge.rs checks
//! their merged verdicts without root.
#![allow(clippy::expect_used)]
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support;
use crate::support::{
    SESSION_FILES, STORPROF as BIN, assert_root, param_args, read_json, run_within,
    save_session_files, saving_fixtures, session_fixture,
};
const HOSTS: [&str; 2] = ["storprof-h1", "storprof-h2"];
/// The throttled host.
const SLOW: &str = "storprof-h2";
const BRIDGE: &str = "sp-br0";
const VETHS: [&str; 2] = ["sp-h1", "sp-h2"];
const SUBNET: &str = "10.213.47.0/24";
const ADDRS: [&str; 2] = ["10.213.47.2", "10.213.47.3"];
const BRIDGE_ADDR: &str = "10.213.47.1/24";
const HOSTS_MARKER: &str = "# storprof-multihost-test";
/// Read limit of the slow host: its rank's 16 samples (35 MB) per epoch take ~3 s.
const SLOW_BPS: u64 = 12 << 20;

fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Why the test cannot run here, root aside (the tests are ignored without it).
fn skip_reason() -> Option<String> {
    if !cfg!(feature = "mpi") {
        return Some("storprof built without the mpi feature (--features storprof/mpi)".into());
    }
    if !runs("mpirun", "--version") {
        return Some("mpirun not found (apt-get install openmpi-bin libopenmpi-dev)".into());
    }
    if !runs("ip", "-V") {
        return Some("ip not found (apt-get install iproute2)".into());
    }
    if !Path::new("/sys/fs/cgroup/blkio/blkio.throttle.read_bps_device").exists() {
        return Some("no cgroup v1 blkio throttling at /sys/fs/cgroup/blkio".into());
    }
    let addrs = Command::new("ip").args(["-4", "addr"]).output().ok()?;
    if String::from_utf8_lossy(&addrs.stdout).contains("10.213.47.") {
        return Some(format!(
            "the test subnet {SUBNET} is in use on this machine"
        ));
    }
    None
}

/// `ip ARGS...`, failing with its stderr.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `ip ARGS...` whose failure does not matter (clean-up of what may not exist).
fn ip_quiet(args: &[&str]) {
    let _ = Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The test hosts and everything made for them; removed on drop.
struct TestHosts {
    cgroup: Option<PathBuf>,
}

impl TestHosts {
    fn create() -> TestHosts {
        let guard = TestHosts { cgroup: None };
        // Leftovers of a run that was killed before its clean-up.
        guard.remove_network();
        ip(&["link", "add", BRIDGE, "type", "bridge"]);
        ip(&["addr", "add", BRIDGE_ADDR, "dev", BRIDGE]);
        ip(&["link", "set", BRIDGE, "up"]);
        let mut hosts_lines = String::new();
        for ((host, veth), addr) in HOSTS.iter().zip(VETHS).zip(ADDRS) {
            ip(&["netns", "add", host]);
            ip(&[
                "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", host,
            ]);
            ip(&["link", "set", veth, "master", BRIDGE]);
            ip(&["link", "set", veth, "up"]);
            ip(&[
                "-n",
                host,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ]);
            ip(&["-n", host, "link", "set", "eth0", "up"]);
            ip(&["-n", host, "link", "set", "lo", "up"]);
            hosts_lines.push_str(&format!("{addr} {host} {HOSTS_MARKER}\n"));
        }
        let hosts = fs::read_to_string("/etc/hosts").unwrap_or_default();
        let mut text = strip_marked(&hosts);
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        fs::write("/etc/hosts", text + &hosts_lines).expect("write /etc/hosts");
        guard
    }

    /// A blkio group limiting reads of the device behind `path`; its
    /// `cgroup.procs` path.
    fn throttle(&mut self, path: &Path, bytes_per_sec: u64) -> PathBuf {
        let dev = fs::metadata(path).unwrap().dev();
        let disk = whole_disk(libc::major(dev), libc::minor(dev));
        let dir = PathBuf::from(format!(
            "/sys/fs/cgroup/blkio/storprof-multihost-{}",
            std::process::id()
        ));
        fs::create_dir_all(&dir).unwrap();
        self.cgroup = Some(dir.clone());
        fs::write(
            dir.join("blkio.throttle.read_bps_device"),
            format!("{disk} {bytes_per_sec}"),
        )
        .unwrap_or_else(|e| {
            panic!(
                "cannot throttle reads of {disk} (the disk under {}): {e}",
                path.display()
            )
        });
        dir.join("cgroup.procs")
    }

    fn remove_network(&self) {
        for host in HOSTS {
            // Processes still in a test host are ours (rank, daemon): end them.
            if let Ok(out) = Command::new("ip").args(["netns", "pids", host]).output() {
                for pid in String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                {
                    // SAFETY: kill(2) of a process left in a namespace this test made.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            ip_quiet(&["netns", "delete", host]);
        }
        for veth in VETHS {
            ip_quiet(&["link", "delete", veth]);
        }
        ip_quiet(&["link", "delete", BRIDGE]);
        if let Ok(hosts) = fs::read_to_string("/etc/hosts")
            && hosts.contains(HOSTS_MARKER)
        {
            let _ = fs::write("/etc/hosts", strip_marked(&hosts));
        }
    }
}

/// `MAJ:MIN` of the whole disk holding device `major:minor` (blkio
/// throttles disks, not partitions).
fn whole_disk(major: u32, minor: u32) -> String {
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if sys.join("partition").exists()
        && let Ok(parent) = fs::read_to_string(sys.join("../dev"))
    {
        return parent.trim().to_string();
    }
    format!("{major}:{minor}")
}

fn strip_marked(hosts: &str) -> String {
    hosts
        .lines()
        .filter(|l| !l.contains(HOSTS_MARKER))
        .map(|l| format!("{l}\n"))
        .collect()
}

impl Drop for TestHosts {
    fn drop(&mut self) {
        self.remove_network();
        if let Some(dir) = &self.cgroup {
            // The group empties once its killed processes are reaped.
            for _ in 0..50 {
                if fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Child processes this test started; killed on drop if still running.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if c.try_wait().ok().flatten().is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// `mpirun` of one rank on each test host, through `agent`.
fn mpirun_across_hosts(agent: &Path) -> Command {
    let mut mpirun = Command::new("mpirun");
    mpirun
        .args(["--allow-run-as-root", "-n", "2", "--host"])
        .arg(HOSTS.map(|h| format!("{h}:1")).join(","))
        .args(["--mca", "plm_rsh_agent"])
        .arg(agent)
        .args(["--mca", "btl", "tcp,self"])
        .args(["--mca", "btl_tcp_if_include", SUBNET])
        .args(["--mca", "oob_tcp_if_include", SUBNET])
        .args(["-x", "STORPROF_MPI_TIMEOUT"])
        .env("STORPROF_MPI_TIMEOUT", "60")
        .env("STORPROF", BIN)
        .env_remove("STORPROF_HOST")
        .env_remove("STORPROF_RECORD_DIR");
    support::isolate_mpirun(&mut mpirun);
    mpirun
}

/// `mpirun ... storprof bench` of the test's small flux dataset across the
/// two hosts, 0.05 s computation per step, with `extra` bench arguments.
fn mpirun_bench(agent: &Path, data: &Path, results: &Path, extra: &[&str]) -> Command {
    let mut mpirun = mpirun_across_hosts(agent);
    mpirun
        .args([
            BIN,
            "bench",
            "--workload",
            "flux",
            "--computation-time",
            "0.05",
        ])
        .args(extra)
        .arg("--data-dir")
        .arg(data)
        .arg("--results-dir")
        .arg(results)
        .args(params());
    mpirun
}

/// The test hosts have fixed names: one test at a time makes them.
static HOSTS_IN_USE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A scratch directory on a real disk (not tmpfs) under this build's target
/// dir, so the blkio throttle has a block device to act on.
fn scratch() -> tempfile::TempDir {
    support::scratch("multihost")
}

/// `storprof datagen` of the small flux dataset into DIR/data.
fn datagen(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    let out = Command::new(BIN)
        .args(["datagen", "--workload", "flux", "--data-dir"])
        .arg(&data)
        .args(params())
        .arg("--results-dir")
        .arg(dir.join("datagen-record"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "datagen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    data
}

fn params() -> Vec<String> {
    param_args(&[
        "dataset.num_files_train=4",
        "dataset.num_samples_per_file=8",
        "dataset.parquet.row_group_size=4",
        "reader.batch_size=4",
        "reader.read_threads=2",
        "reader.odirect=True",
        "train.epochs=3",
    ])
}

/// Starts `storprof record --netns HOST` and waits until it traces the host.
fn start_recorder(host: &str, session: &Path) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(BIN)
        .args(["record", "--netns", host, "--output"])
        .arg(session)
        .env_remove("STORPROF_HOST")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start storprof record");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

fn wait_ready(host: &str, rx: &mpsc::Receiver<String>) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                let ready = line.contains("storprof: recording host");
                seen.push(line);
                if ready {
                    return seen;
                }
            }
            Err(_) => break,
        }
    }
    panic!("record --netns {host} did not start:\n{}", seen.join("\n"));
}

fn save_fixtures(sessions: &Path) {
    if !saving_fixtures() {
        return;
    }
    let dest = session_fixture("multihost/real-netns");
    for host in HOSTS {
        save_session_files(&sessions.join(host), &dest.join(host), SESSION_FILES);
    }
    eprintln!("saved fixtures under {}", dest.display());
}

#[test]
#[ignore = "needs root"]
fn throttled_netns_host_is_the_storage_bound_straggler() {
    assert_root();
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let _serial = HOSTS_IN_USE.lock().unwrap_or_else(|e| e.into_inner());
    let t0 = Instant::now();
    let tmp = scratch();
    let data = datagen(tmp.path());

    let mut hosts = TestHosts::create();
    let procs = hosts.throttle(&data, SLOW_BPS);
    // The launch agent: the slow host's daemon (and so its ranks) joins
    // the throttled group, then the repo's netns agent starts it in its host.
    let agent = tmp.path().join("agent.sh");
    let repo_agent = support::repo().join("scripts/netns-rsh-agent.sh");
    fs::write(
        &agent,
        format!(
            "#!/bin/sh\nif [ \"$1\" = {SLOW} ]; then echo $$ > {}; fi\nexec sh {} \"$@\"\n",
            procs.display(),
            repo_agent.display()
        ),
    )
    .unwrap();
    fs::set_permissions(&agent, fs::Permissions::from_mode(0o755)).unwrap();
    eprintln!("setup: {:.1} s", t0.elapsed().as_secs_f64());

    let sessions = tmp.path().join("sessions");
    let mut recorders = Children(Vec::new());
    let mut logs = Vec::new();
    for host in HOSTS {
        let (child, rx) = start_recorder(host, &sessions.join(host));
        recorders.0.push(child);
        logs.push(rx);
    }
    for (host, rx) in HOSTS.iter().zip(&logs) {
        wait_ready(host, rx);
    }
    eprintln!("recorders ready: {:.1} s", t0.elapsed().as_secs_f64());

    let results = tmp.path().join("results");
    let mpirun = mpirun_bench(&agent, &data, &results, &[]);
    let bench_started = Instant::now();
    let out = run_within(mpirun, Duration::from_secs(120), "mpirun storprof bench");
    let bench_s = bench_started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "mpirun bench failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("bench across 2 netns hosts: {bench_s:.1} s");
    let summary = read_json::<Value>(&results.join("summary.json"));
    assert_eq!(summary["num_hosts"], 2, "{summary}");
    assert_eq!(summary["host_names"], serde_json::json!(HOSTS), "{summary}");

    // Stop the recorders (Ctrl-C): each writes its session.
    for c in &recorders.0 {
        // SAFETY: kill(2) of a recorder this test started.
        unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    }
    for (i, c) in recorders.0.iter_mut().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "record {} did not stop",
                HOSTS[i]
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let log: Vec<String> = logs[i].try_iter().collect();
        // Ctrl-C of a recording without a command: 130, session written.
        assert!(
            matches!(status.code(), Some(0 | 130)),
            "record {}: {status}\n{}",
            HOSTS[i],
            log.join("\n")
        );
    }
    eprintln!("sessions written: {:.1} s", t0.elapsed().as_secs_f64());

    for host in HOSTS {
        let info = read_json::<Value>(&sessions.join(host).join("session.json"));
        assert_eq!(info["hostname"], host, "session named after its host");
        // The host's ranks were traced: its bench process shows up.
        let threads = read_json::<Value>(&sessions.join(host).join("threads.json"));
        let comms: Vec<&str> = threads
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["comm"].as_str())
            .collect();
        assert!(
            comms.iter().any(|c| c.contains("storprof")),
            "{host}: no bench thread among {comms:?}"
        );
    }

    let merged_dir = tmp.path().join("merged");
    let out = Command::new(BIN)
        .arg("merge")
        .args(HOSTS.map(|h| sessions.join(h)))
        .arg("-o")
        .arg(&merged_dir)
        .output()
        .unwrap();
    let merge_out = String::from_utf8_lossy(&out.stdout);
    println!("{merge_out}");
    assert!(
        out.status.success(),
        "{merge_out}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    save_fixtures(&sessions);
    let merged = read_json::<Value>(&merged_dir.join("merged.json"));
    let report = fs::read_to_string(merged_dir.join("report.md")).unwrap();
    let stragglers: Vec<&str> = merged["stragglers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["host"].as_str())
        .collect();
    assert_eq!(stragglers, vec![SLOW], "{report}");
    assert_eq!(merged["cluster_verdict"], "storage-bound", "{report}");
    let slow = merged["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == SLOW)
        .unwrap();
    assert_eq!(
        merged["stragglers"][0]["verdict"], "storage-bound",
        "{report}"
    );
    // Its readers' block-I/O wait fired storage-bound on the host itself. (Its
    // primary single-host verdict may read page-cache-served: the throttle
    // issues the block requests from its own context, so the host's device
    // bytes undercount; see the report.)
    assert_eq!(slow["storage_bound_fired"], true, "{report}");
    eprintln!("{SLOW}'s own verdict: {}", slow["verdict"]);
    eprintln!("total: {:.1} s", t0.elapsed().as_secs_f64());
    drop(hosts);
    assert!(
        !fs::read_to_string("/etc/hosts")
            .unwrap()
            .contains(HOSTS_MARKER)
    );
    assert!(!Path::new("/run/netns").join(SLOW).exists());
}

/// Ctrl-C at the terminal of `mpirun ... storprof bench` across the two
/// hosts (SIGINT to mpirun's process group; OpenMPI puts the ranks in their
/// own groups and forwards SIGTERM through its daemons): every rank stops
/// at the next barrier, rank 0 writes the results of the completed steps
/// marked interrupted, and nothing is left running on the hosts.
#[test]
#[ignore = "needs root"]
fn ctrl_c_of_mpirun_stops_every_rank_with_results_written() {
    assert_root();
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let _serial = HOSTS_IN_USE.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = scratch();
    let data = datagen(tmp.path());
    let hosts = TestHosts::create();
    let agent = support::repo().join("scripts/netns-rsh-agent.sh");
    let results = tmp.path().join("results");
    let mut mpirun = mpirun_bench(&agent, &data, &results, &["--epochs", "1000"]);
    mpirun
        // Its own process group, as a terminal's foreground job.
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut job = Children(vec![mpirun.spawn().expect("start mpirun")]);
    let stdout = job.0[0].stdout.take().unwrap();
    let stderr = job.0[0].stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let out_reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let err_reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // Training is under way on both hosts once epoch 2 ended (a barrier
    // after every step).
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let left = deadline
            .checked_duration_since(Instant::now())
            .unwrap_or_default();
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("Ending epoch 2 ") => break,
            Ok(_) => {}
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("the job did not reach epoch 2 within 90 s")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = job.0[0].wait();
                panic!(
                    "mpirun ended ({status:?}) before epoch 2:\n{}\n{}",
                    out_reader.join().unwrap_or_default(),
                    err_reader.join().unwrap_or_default()
                )
            }
        }
    }
    let pgid = job.0[0].id() as i32;
    // SAFETY: kill(2) of the process group of the mpirun this test started.
    unsafe { libc::kill(-pgid, libc::SIGINT) };
    let stopped = Instant::now();
    let status = loop {
        if let Some(s) = job.0[0].try_wait().unwrap() {
            break s;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(60),
            "mpirun still running 60 s after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let stop_s = stopped.elapsed().as_secs_f64();
    let stdout = out_reader.join().unwrap();
    let stderr = err_reader.join().unwrap();
    eprintln!("mpirun ended {stop_s:.1} s after Ctrl-C ({status})");
    assert!(stdout.contains("Interrupted by SIG"), "{stdout}\n{stderr}");
    let summary = read_json::<Value>(&results.join("summary.json"));
    assert_eq!(summary["interrupted"], true, "{summary}");
    assert_eq!(summary["num_hosts"], 2, "{summary}");
    for rank in 0..2 {
        let o = results.join(format!("{rank}_output.json"));
        assert!(o.exists(), "{} missing\n{stdout}\n{stderr}", o.display());
    }
    // Every rank and daemon is gone from the hosts (within a moment of mpirun's exit).
    let gone = Instant::now();
    for host in HOSTS {
        loop {
            let out = Command::new("ip")
                .args(["netns", "pids", host])
                .output()
                .unwrap();
            let left = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if left.is_empty() {
                break;
            }
            assert!(
                gone.elapsed() < Duration::from_secs(5),
                "processes left on {host} after the job: {left}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    drop(hosts);
}
