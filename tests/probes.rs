//! Root integration tests of the probe data plane: `storprof record` on
//! static C helpers (tests/helpers/*.c, built with `gcc -static`) must give
//! exact figures. The root tests are `#[ignore = "needs root"]`: run them as
//! root with `cargo test -p storprof --test integration -- probes:: --include-ignored`.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use storprof_session::model::{IoStats, SessionInfo, SyscallStats, ThreadStats, WaitGraph};

use crate::support;
use crate::support::{
    STORPROF, assert_root, build_c, folded_count, is_root, read_session_json as read_json, record,
    record_with,
};

/// Builds a helper from tests/helpers/NAME.c with `gcc -static` (frame pointers on).
fn helper(name: &str) -> PathBuf {
    helper_with(name, &["-fno-omit-frame-pointer"])
}

/// Builds a helper from tests/helpers/NAME.c with `gcc -static -O2 -g` and `flags`.
fn helper_with(name: &str, flags: &[&str]) -> PathBuf {
    let src = support::repo().join(format!("tests/helpers/{name}.c"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("helper-{name}"));
    build_c(&src, &out, &[&["-static", "-O2", "-g"], flags].concat());
    out
}

/// Leaf user frame → summed samples.
fn leaves(folded: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in folded.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let leaf = stack
            .split(';')
            .rfind(|f| !f.ends_with("_[k]"))
            .unwrap_or("")
            .to_string();
        *out.entry(leaf).or_insert(0) += count.parse::<u64>().unwrap_or(0);
    }
    out
}

#[test]
#[ignore = "needs root"]
fn pread_calls_are_counted_exactly() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("data");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let (n, b) = (5000u64, 4096u64);
    let session = tmp.path().join("session");
    let helper = helper("pread_n");
    record(
        &session,
        [
            helper.to_str().unwrap(),
            file.to_str().unwrap(),
            &n.to_string(),
            &b.to_string(),
        ],
    );
    let threads: Vec<ThreadStats> = read_json(&session, "threads.json");
    assert_eq!(threads.len(), 1, "one thread expected: {threads:?}");
    let t = &threads[0];
    let pread = t
        .syscalls
        .iter()
        .find(|s| s.name == "pread64")
        .expect("pread64 counted");
    assert_eq!(pread.count, n);
    assert_eq!(pread.bytes, n * b);
    assert_eq!(pread.errors, 0);
    assert_eq!(
        t.read_bytes,
        n * b,
        "no other read-family bytes in a static helper"
    );
    // One time per call (a page-cached read that never left the CPU
    // counts 0 by default).
    assert_eq!(pread.latency_log2_ns.iter().sum::<u64>(), n);
    let info: SessionInfo = read_json(&session, "session.json");
    assert_eq!(info.tracked_pids, vec![t.pid]);
    assert_eq!(info.exit_code, Some(0));
    assert!(
        info.lost_events.values().all(|&v| v == 0),
        "{:?}",
        info.lost_events
    );
    assert!(info.probes.iter().all(|p| p.attached), "{:?}", info.probes);
}

/// The clock_nanosleep (glibc's nanosleep) and pread64 statistics of a `sleep_n` run recorded with
/// `options`.
fn sleep_n_syscalls(options: &[&str], n: u64, ms: u64) -> (SyscallStats, SyscallStats) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("data");
    std::fs::write(&file, vec![7u8; 4096]).unwrap();
    let session = tmp.path().join("session");
    let helper = helper("sleep_n");
    record_with(
        &session,
        options,
        [
            helper.to_str().unwrap(),
            file.to_str().unwrap(),
            &n.to_string(),
            &ms.to_string(),
        ],
    );
    let threads: Vec<ThreadStats> = read_json(&session, "threads.json");
    assert_eq!(threads.len(), 1, "one thread expected: {threads:?}");
    let by_name = |name: &str| {
        threads[0]
            .syscalls
            .iter()
            .find(|s| s.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} counted: {:?}", threads[0].syscalls))
    };
    (by_name("clock_nanosleep"), by_name("pread64"))
}

#[test]
#[ignore = "needs root"]
fn blocked_syscall_time_comes_from_the_scheduler() {
    assert_root();
    let (n, ms) = (20u64, 20u64);
    let slept_ns = n * ms * 1_000_000;
    let (sleep, pread) = sleep_n_syscalls(&[], n, ms);
    assert_eq!((sleep.count, pread.count), (n, n));
    assert_eq!(sleep.latency_log2_ns.iter().sum::<u64>(), n);
    assert_eq!(pread.latency_log2_ns.iter().sum::<u64>(), n);
    // Each sleep is its time switched out: at least the nap, at most the
    // nap plus a generous scheduling delay.
    assert!(
        sleep.total_ns >= slept_ns && sleep.total_ns < slept_ns * 3 / 2 + 200_000_000,
        "nanosleep time {} ns for {slept_ns} ns of naps",
        sleep.total_ns
    );
    // Page-cached reads hardly ever leave the CPU.
    assert!(
        pread.total_ns < slept_ns / 100,
        "pread64 time {} ns",
        pread.total_ns
    );
}

#[test]
#[ignore = "needs root"]
fn exact_syscall_timing_times_every_call() {
    assert_root();
    let (n, ms) = (10u64, 20u64);
    let slept_ns = n * ms * 1_000_000;
    let (sleep, pread) = sleep_n_syscalls(&["--syscall-timing", "exact"], n, ms);
    assert_eq!((sleep.count, pread.count), (n, n));
    assert!(sleep.total_ns >= slept_ns, "{}", sleep.total_ns);
    // Every call takes some time from entry to exit, blocked or not.
    assert!(pread.total_ns > 0);
    assert_eq!(pread.latency_log2_ns.iter().sum::<u64>(), n);
    assert_eq!(pread.latency_log2_ns.first().copied().unwrap_or(0), 0);
    let (sleep, pread) = sleep_n_syscalls(&["--syscall-timing", "off"], n, ms);
    assert_eq!((sleep.count, pread.count), (n, n));
    assert_eq!((sleep.total_ns, pread.total_ns), (0, 0));
}

#[test]
#[ignore = "needs root"]
fn cpu_burner_tops_oncpu_profile() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let session = tmp.path().join("session");
    let helper = helper("burn");
    // The helper burns 1.5 s of its own CPU time, however loaded the machine
    // is, so the figures below do not depend on the load: at 99 Hz that is
    // about 148 samples, all but a few in the burner.
    record(&session, [helper.to_str().unwrap(), "1.5"]);
    let folded = std::fs::read_to_string(session.join("oncpu.folded")).unwrap();
    let leaves = leaves(&folded);
    let (top, count) = leaves.iter().max_by_key(|(_, c)| **c).expect("samples");
    assert_eq!(top, "storprof_test_burn_cpu", "folded:\n{folded}");
    assert!(*count >= 75, "too few samples ({count}) in:\n{folded}");
    let total: u64 = leaves.values().sum();
    assert!(
        *count * 10 >= total * 9,
        "burner has {count} of {total} samples:\n{folded}"
    );
    assert!(
        folded
            .lines()
            .any(|l| l.contains(";main;storprof_test_burn_cpu")),
        "{folded}"
    );
    let threads: Vec<ThreadStats> = read_json(&session, "threads.json");
    assert!(threads[0].on_cpu_ns >= 1_500_000_000, "{threads:?}");
}

#[test]
#[ignore = "needs root"]
fn dwarf_unwinding_crosses_code_without_frame_pointers() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let helper = helper_with(
        "nofp_chain",
        &["-fomit-frame-pointer", "-fno-optimize-sibling-calls"],
    );
    let chain = "main;storprof_nofp_outer;storprof_nofp_middle;storprof_nofp_inner";
    // Frame pointers: the walk loses the chain in this code (which is what
    // makes the DWARF result below mean something).
    let fp = tmp.path().join("fp");
    record_with(&fp, &["--unwind", "fp"], [helper.to_str().unwrap(), "1"]);
    let folded = std::fs::read_to_string(fp.join("oncpu.folded")).unwrap();
    assert!(
        !folded.contains("storprof_nofp_outer;storprof_nofp_middle"),
        "frame pointers unexpectedly walked the chain:\n{folded}"
    );
    // DWARF: the whole chain, in (nearly) every sample of the burner.
    let dwarf = tmp.path().join("dwarf");
    record_with(
        &dwarf,
        &["--unwind", "dwarf", "--stack-bytes", "16384"],
        [helper.to_str().unwrap(), "1"],
    );
    let folded = std::fs::read_to_string(dwarf.join("oncpu.folded")).unwrap();
    let total: u64 = leaves(&folded).values().sum();
    let full = folded_count(&folded, |l| l.contains(chain));
    assert!(full >= 50, "only {full} samples with the chain:\n{folded}");
    assert!(full * 10 >= total * 9, "{full} of {total}:\n{folded}");
    let info: SessionInfo = read_json(&dwarf, "session.json");
    let unwind = info.unwind.expect("unwind stats in session.json");
    assert_eq!(unwind.mode, "dwarf");
    assert_eq!(unwind.stack_bytes, 16384);
    let process = &unwind.processes[0];
    assert!(process.median_depth >= 4, "{unwind:?}");
    assert!(process.early_stop_share.unwrap() < 0.1, "{unwind:?}");
    assert_eq!(info.lost_events.get("user_stack_ringbuf_full"), Some(&0));
}

#[test]
#[ignore = "needs root"]
fn dwarf_offcpu_stacks_cross_code_without_frame_pointers() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let helper = helper_with(
        "nofp_block_chain",
        &["-fomit-frame-pointer", "-fno-optimize-sibling-calls"],
    );
    let chain = "main;storprof_nofp_block_outer;storprof_nofp_block_middle;";
    // Frame pointers lose the chain of the sleeping code.
    let fp = tmp.path().join("fp");
    record_with(&fp, &["--unwind", "fp"], [helper.to_str().unwrap(), "2"]);
    let folded = std::fs::read_to_string(fp.join("offcpu.folded")).unwrap();
    assert!(
        !folded.contains("storprof_nofp_block_outer;storprof_nofp_block_middle"),
        "frame pointers unexpectedly walked the chain:\n{folded}"
    );
    let info: SessionInfo = read_json(&fp, "session.json");
    assert_eq!(info.unwind.unwrap().offcpu.mode, "fp");
    // Auto (the executable lacks frame pointers: DWARF), with a 2 ms
    // quantum: the 50 µs sleeps are sampled (about 1 in 20 taken, each
    // weighing 2 ms), the 2 ms sleeps are all taken at their length.
    let auto = tmp.path().join("auto");
    record_with(
        &auto,
        &["--offcpu-quantum-us", "2000"],
        [helper.to_str().unwrap(), "2"],
    );
    let folded = std::fs::read_to_string(auto.join("offcpu.folded")).unwrap();
    let long_chain = format!("{chain}storprof_nofp_long_wait;");
    let short_chain = format!("{chain}storprof_nofp_short_wait;");
    let long = folded_count(&folded, |l| l.contains(&long_chain));
    let short = folded_count(&folded, |l| l.contains(&short_chain));
    let threads: Vec<ThreadStats> = read_json(&auto, "threads.json");
    let sleeping_us = threads[0].off_cpu_ns.sleeping / 1000;
    // Each half sleeps about 1 s. The sampled half's estimate has a
    // relative standard deviation of about 1/sqrt(500) = 4.5%.
    assert!(
        long * 10 >= sleeping_us * 4 && short * 10 >= sleeping_us * 4,
        "long {long} µs, short {short} µs of {sleeping_us} µs asleep:\n{folded}"
    );
    let ratio = short as f64 / long as f64;
    assert!(
        (0.75..1.33).contains(&ratio),
        "short/long = {ratio:.2}:\n{folded}"
    );
    // Together they account for the time asleep (within sampling error).
    let total = long + short;
    assert!(
        total * 100 >= sleeping_us * 85 && total * 100 <= sleeping_us * 115,
        "{total} µs in the chain vs {sleeping_us} µs asleep:\n{folded}"
    );
    let info: SessionInfo = read_json(&auto, "session.json");
    let offcpu = info.unwind.expect("unwind stats").offcpu;
    assert_eq!(offcpu.mode, "dwarf-at-syscall-exit");
    assert_eq!(offcpu.quantum_us, 2000);
    assert!(offcpu.stacks >= 500, "{offcpu:?}");
    assert_eq!(info.lost_events.get("offcpu_pending_map_full"), Some(&0));
    assert_eq!(info.lost_events.get("user_stack_ringbuf_full"), Some(&0));
}

/// Builds a dynamically linked helper from tests/helpers/NAME.c (its
/// executable holds only its own code, as most programs' do).
fn dynamic_helper(name: &str, flags: &[&str]) -> PathBuf {
    let src = support::repo().join(format!("tests/helpers/{name}.c"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("helper-dyn-{name}"));
    build_c(&src, &out, &[&["-O2", "-g"], flags].concat());
    out
}

#[test]
#[ignore = "needs root"]
fn auto_unwinding_gives_stack_windows_only_to_code_without_frame_pointers() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    // Default (--unwind auto), code without frame pointers: DWARF is chosen
    // and the whole chain comes out (fp loses it, see the test above).
    let nofp = dynamic_helper(
        "nofp_chain",
        &["-fomit-frame-pointer", "-fno-optimize-sibling-calls"],
    );
    let session = tmp.path().join("nofp");
    record(&session, [nofp.to_str().unwrap(), "1"]);
    let info: SessionInfo = read_json(&session, "session.json");
    let unwind = info.unwind.expect("unwind stats in session.json");
    assert_eq!(unwind.mode, "auto");
    let decision = unwind
        .decisions
        .iter()
        .find(|d| d.exe == nofp.to_str().unwrap())
        .unwrap_or_else(|| panic!("no decision for {}: {unwind:?}", nofp.display()));
    assert_eq!(decision.mode, "dwarf", "{decision:?}");
    assert_ne!(unwind.stack_bytes, 0, "{unwind:?}");
    let process = unwind
        .processes
        .iter()
        .find(|p| p.pid == decision.pid)
        .unwrap_or_else(|| panic!("no samples of pid {}: {unwind:?}", decision.pid));
    // Unwound in user space (the kernel's fp walk does not say).
    assert!(process.early_stop_samples.is_some(), "{unwind:?}");
    let folded = std::fs::read_to_string(session.join("oncpu.folded")).unwrap();
    let chain = "main;storprof_nofp_outer;storprof_nofp_middle;storprof_nofp_inner";
    let total: u64 = leaves(&folded).values().sum();
    let full = folded_count(&folded, |l| l.contains(chain));
    assert!(full >= 50, "only {full} samples with the chain:\n{folded}");
    assert!(full * 10 >= total * 8, "{full} of {total}:\n{folded}");

    // Code with frame pointers: fp is chosen, no stack window is copied,
    // the kernel's walk gives the stack.
    let fp = dynamic_helper("burn", &["-fno-omit-frame-pointer"]);
    let session = tmp.path().join("fp");
    record(&session, [fp.to_str().unwrap(), "1"]);
    let info: SessionInfo = read_json(&session, "session.json");
    let unwind = info.unwind.expect("unwind stats in session.json");
    let decision = unwind
        .decisions
        .iter()
        .find(|d| d.exe == fp.to_str().unwrap())
        .unwrap_or_else(|| panic!("no decision for {}: {unwind:?}", fp.display()));
    assert_eq!(decision.mode, "fp", "{decision:?}");
    let process = unwind
        .processes
        .iter()
        .find(|p| p.pid == decision.pid)
        .unwrap_or_else(|| panic!("no samples of pid {}: {unwind:?}", decision.pid));
    assert_eq!(process.early_stop_samples, None, "{unwind:?}");
    assert!(process.samples >= 50, "{unwind:?}");
    let folded = std::fs::read_to_string(session.join("oncpu.folded")).unwrap();
    assert!(
        folded
            .lines()
            .any(|l| l.contains(";main;storprof_test_burn_cpu")),
        "{folded}"
    );
}

/// Whole-disk "MAJ:MIN" of the filesystem holding `path` (partitions map to their disk).
fn disk_of(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).unwrap().dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if sys.join("partition").exists() {
        let parent = std::fs::read_to_string(sys.join("../dev")).unwrap();
        return parent.trim().to_string();
    }
    format!("{major}:{minor}")
}

#[test]
#[ignore = "needs root"]
fn direct_read_reaches_the_device() {
    assert_root();
    // Not tmpfs: a directory on a block device (the test target dir is).
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let file = tmp.path().join("direct");
    let mib = 16u64;
    // Synced: a write-back of the new file that began before the probes
    // were up would mix writes, some unseen, into what dd does.
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&file).unwrap();
        f.write_all(&vec![1u8; (mib << 20) as usize]).unwrap();
        f.sync_all().unwrap();
    }
    let disk = disk_of(&file);
    let session = tmp.path().join("session");
    record(
        &session,
        [
            "dd",
            &format!("if={}", file.display()),
            "of=/dev/null",
            "bs=1M",
            "iflag=direct",
        ],
    );
    let io: IoStats = read_json(&session, "io.json");
    let info: SessionInfo = read_json(&session, "session.json");
    let dev = io
        .devices
        .iter()
        .find(|d| d.dev == disk)
        .unwrap_or_else(|| panic!("device {disk} missing from {:?}", io.devices));
    let context = format!(
        "{dev:?}\nall devices: {:?}\nlost: {:?}",
        io.devices, info.lost_events
    );
    assert!(dev.read_bytes >= mib << 20, "{context}");
    assert!(dev.traced_read_bytes >= mib << 20, "{context}");
    // Attributed to dd itself, even for requests a kblockd worker issued
    // (plug flush): the owner is taken where the request is created.
    let dd_bytes: u64 = info
        .tracked_pids
        .iter()
        .filter_map(|pid| dev.by_pid.get(pid))
        .sum();
    assert!(dd_bytes >= mib << 20, "{dev:?} {:?}", info.tracked_pids);
    assert!(dev.read_requests > 0 && dev.busy_ns > 0, "{dev:?}");
    assert!(!dev.latency_log2_ns.is_empty());
}

#[test]
#[ignore = "needs root"]
fn forked_workers_are_tracked_and_symbolized() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let session = tmp.path().join("session");
    let helper = helper("burn");
    let out = record(&session, [helper.to_str().unwrap(), "0.5", "3"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let workers: Vec<u32> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("worker ")?.trim().parse().ok())
        .collect();
    assert_eq!(workers.len(), 3, "helper output: {stdout}");
    let info: SessionInfo = read_json(&session, "session.json");
    for w in &workers {
        assert!(
            info.tracked_pids.contains(w),
            "worker {w} not in {:?}",
            info.tracked_pids
        );
    }
    let folded = std::fs::read_to_string(session.join("oncpu.folded")).unwrap();
    for i in 0..3 {
        let prefix = format!("worker-{i};");
        assert!(
            folded
                .lines()
                .any(|l| l.starts_with(&prefix) && l.contains("storprof_test_burn_cpu")),
            "worker-{i} not symbolized in:\n{folded}"
        );
    }
}

#[test]
fn unknown_command_fails_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(STORPROF)
        .args(["record", "--output"])
        .arg(tmp.path().join("s"))
        .args(["--", "/nonexistent/storprof-no-such-command"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    if is_root() {
        assert!(stderr.contains("command not found"), "{stderr}");
    } else {
        assert!(stderr.contains("needs root"), "{stderr}");
    }
}

#[test]
#[ignore = "needs root"]
fn doctor_passes_on_this_machine() {
    assert_root();
    let out = Command::new(STORPROF).arg("doctor").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    for check in [
        "root",
        "BTF",
        "tracefs",
        "sched:sched_switch",
        "perf_event",
        "attach syscalls",
    ] {
        assert!(stdout.contains(check), "no {check} line in:\n{stdout}");
    }
    // The same checks as JSON, for scripts.
    let out = Command::new(STORPROF)
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), stdout.lines().count() - 1, "{v}\n{stdout}");
    assert!(
        checks
            .iter()
            .all(|c| c["ok"] == true && c["name"].is_string())
    );
}

#[test]
#[ignore = "needs root"]
fn the_command_starts_with_default_signal_state() {
    assert_root();
    // Rust ignores SIGPIPE in storprof itself; the traced command must not
    // inherit that (an ignored signal stays ignored across exec).
    let tmp = tempfile::tempdir().unwrap();
    let out = record_with(
        tmp.path(),
        &[],
        ["/bin/sh", "-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status"],
    );
    let status = String::from_utf8_lossy(&out.stdout);
    let mask = |name: &str| -> u64 {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {status}"));
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    assert_eq!(mask("SigIgn:") & (1 << (libc::SIGPIPE - 1)), 0, "{status}");
    assert_eq!(mask("SigBlk:"), 0, "{status}");
}

/// Futex wake-ups between the non-main threads of one process in a
/// recording of `command`: (marked as lock wakes, all).
fn wakes_between_pool_threads(session: &Path, command: &[&str]) -> (u64, u64) {
    let out = record(session, command);
    assert!(out.status.success(), "{out:?}");
    let graph: WaitGraph = read_json(session, "waits.json");
    let (mut lock, mut all) = (0u64, 0u64);
    for e in &graph.edges {
        let between_pool_threads = e.waker_kind == "task"
            && e.syscall.as_deref() == Some("futex")
            && e.waker_pid == e.wakee_pid
            && e.waker_tid != e.waker_pid
            && e.wakee_tid != e.wakee_pid;
        if between_pool_threads {
            all += e.count;
            if e.futex_shared {
                lock += e.count;
            }
        }
    }
    (lock, all)
}

#[test]
#[ignore = "needs root"]
fn wakes_at_a_lock_of_sixteen_contenders_are_lock_wakes() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let workload = support::build_workload(tmp.path());
    // 16 threads at one glibc mutex: the holder re-takes it after each
    // release and seldom waits, and may never have waited at all.
    let glibc = wakes_between_pool_threads(
        &tmp.path().join("glibc"),
        &[workload.to_str().unwrap(), "lock", "16", "2"],
    );
    // 16 Python threads at one threading.Lock (a semaphore: no glibc lock
    // wait), known as a lock by its waiters waking each other: 16
    // contenders must fit the kernel's memory of each word's waiters.
    let script = support::repo().join("tests/python/lock_pool.py");
    let python = wakes_between_pool_threads(
        &tmp.path().join("python"),
        &["python3", script.to_str().unwrap(), "16", "2"],
    );
    for (what, (lock, all)) in [("glibc mutex", glibc), ("threading.Lock", python)] {
        assert!(
            all >= 200,
            "{what}: only {all} futex wake-ups between its threads"
        );
        assert!(
            lock as f64 >= 0.95 * all as f64,
            "{what}: {lock} of {all} wake-ups between the contenders marked as lock wakes"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn a_pid_reused_by_an_untraced_process_is_not_traced() {
    assert_root();
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("child.pid");
    // A program with a name of its own, started by this test (not traced).
    let untraced = tmp.path().join("untraced-nap");
    std::fs::copy("/bin/sleep", &untraced).unwrap();
    let session = tmp.path().join("session");
    let script = format!(
        "sleep 0.2 & echo $! > {}; wait; sleep 4",
        pid_file.display()
    );
    let recording = std::thread::spawn({
        let session = session.clone();
        move || record(&session, ["sh", "-c", &script])
    });
    // The traced child's pid, once it has exited.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let child: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break pid;
        }
        assert!(std::time::Instant::now() < deadline, "no child pid");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    std::thread::sleep(std::time::Duration::from_millis(600));
    // The kernel hands out the pid after ns_last_pid next.
    let mut reused = None;
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (child - 1).to_string()).unwrap();
        let mut nap = Command::new(&untraced).arg("1").spawn().unwrap();
        if nap.id() == child {
            reused = Some(nap);
            break;
        }
        nap.kill().unwrap();
        nap.wait().unwrap();
    }
    let mut nap = reused.unwrap_or_else(|| panic!("pid {child} was not handed out again"));
    assert!(nap.wait().unwrap().success());
    let out = recording.join().unwrap();
    assert!(out.status.success(), "{out:?}");
    let threads: Vec<ThreadStats> = read_json(&session, "threads.json");
    let foreign: Vec<_> = threads
        .iter()
        .filter(|t| t.comm == "untraced-nap")
        .collect();
    assert!(
        foreign.is_empty(),
        "an untraced process recorded: {foreign:?}"
    );
    let info: SessionInfo = read_json(&session, "session.json");
    let listed = info.processes.iter().find(|p| p.pid == child).unwrap();
    assert_eq!(listed.comm, "sleep", "{listed:?}");
}
