//! Write scenarios: real checkpoint-shaped writes, each with the write
//! verdict `storprof diagnose` must give it. Root only:
//! `#[ignore = "needs root"]`, run with `-- --include-ignored`.
//!
//! 1. `storprof checkpoint` with fsync, its writes throttled by a blkio
//!    cgroup → writeback-bound or fsync-bound (the throttle acts on the
//!    writeback fsync issues in the writer's context, so fsync-bound is
//!    expected; either is accepted when its own feature drove it).
//! 2. tests/workloads/slow_writer.c: each block computed before it is
//!    written → write-generator-bound.
//! 3. `storprof checkpoint --no-fsync` to an unthrottled dir → the data
//!    only reached memory, and the verdict says so.
use std::{fs, path::Path, process::Command};

mod support;
use support::{STORPROF, assert_root, build_c, repo};

struct Throttle {
    dir: std::path::PathBuf,
}

impl Throttle {
    /// A blkio cgroup (v1) limiting writes to `path`'s device.
    fn writes(path: &Path, bytes_per_sec: u64) -> Throttle {
        let root = Path::new("/sys/fs/cgroup/blkio");
        let dev = std::os::unix::fs::MetadataExt::dev(&fs::metadata(path).expect("stat scratch"));
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let dir = root.join(format!("storprof-write-scenario-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("blkio cgroup v1 available");
        fs::write(
            dir.join("blkio.throttle.write_bps_device"),
            format!("{major}:{minor} {bytes_per_sec}"),
        )
        .expect("set blkio.throttle.write_bps_device");
        Throttle { dir }
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.dir);
    }
}

fn diagnose(session: &Path, cmd: &[String]) -> serde_json::Value {
    let out = Command::new(STORPROF)
        .arg("diagnose")
        .arg("--output")
        .arg(session)
        .arg("--")
        .args(cmd)
        .output()
        .expect("run storprof diagnose");
    assert!(
        out.status.success(),
        "storprof diagnose {cmd:?} failed: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = fs::read_to_string(session.join("verdict.json")).expect("verdict.json");
    serde_json::from_str(&text).expect("verdict.json is JSON")
}

/// verdict.json's write features.
fn writes(v: &serde_json::Value) -> serde_json::Value {
    v["features"]["writes"].clone()
}

fn report(name: &str, v: &serde_json::Value, w: &serde_json::Value) {
    println!(
        "WRITE_SCENARIO {name}: verdict {} (fired {}), sync {:.3}, writeback wait {:.3}, on-CPU {:.3}, \
         write path {:.3}, written {} B, device {} B, only in memory {}\n  headline: {}",
        v["verdict"],
        !v["inconclusive"].as_bool().unwrap_or(true),
        w["writer_sync_share"].as_f64().unwrap_or(-1.0),
        w["writer_writeback_wait_share"].as_f64().unwrap_or(-1.0),
        w["writer_on_cpu_share"].as_f64().unwrap_or(-1.0),
        w["writer_write_path_share"].as_f64().unwrap_or(-1.0),
        w["write_syscall_bytes"],
        w["device_write_bytes"],
        w["only_in_memory"],
        v["headline"].as_str().unwrap_or("")
    );
}

fn checkpoint_cmd(folder: &Path, results: &Path, extra: &[&str]) -> Vec<String> {
    let mut cmd: Vec<String> = [
        STORPROF,
        "checkpoint",
        "--model",
        "llama3-8b",
        "--num-checkpoints-write",
        "1",
        "--num-checkpoints-read",
        "0",
        "--scale",
        "2000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    cmd.push("--checkpoint-folder".into());
    cmd.push(folder.display().to_string());
    cmd.push("--results-dir".into());
    cmd.push(results.display().to_string());
    cmd.extend(extra.iter().map(|s| s.to_string()));
    cmd
}

#[test]
#[ignore = "needs root"]
fn throttled_checkpoint_with_fsync_waits_for_the_device() {
    assert_root();
    let dir = support::scratch("write-scenarios");
    let folder = dir.path().join("ckpt");
    fs::create_dir_all(&folder).expect("mkdir");
    let throttle = Throttle::writes(&folder, 20 << 20);
    let procs = throttle.dir.join("cgroup.procs");
    let inner = checkpoint_cmd(&folder, &dir.path().join("results"), &[]).join(" ");
    let cmd = vec![
        "sh".to_string(),
        "-c".to_string(),
        format!("echo $$ > {} && exec {inner}", procs.display()),
    ];
    let session = dir.path().join("session");
    let v = diagnose(&session, &cmd);
    drop(throttle);
    let w = writes(&v);
    report("throttled-checkpoint-fsync", &v, &w);
    let verdict = v["verdict"].as_str().unwrap_or("");
    assert!(!v["inconclusive"].as_bool().unwrap_or(true), "{v:#}");
    let share = |k: &str| w[k].as_f64().unwrap_or(0.0);
    match verdict {
        "fsync-bound" => assert!(share("writer_sync_share") >= 0.3, "{w:#}"),
        "writeback-bound" => assert!(share("writer_writeback_wait_share") >= 0.2, "{w:#}"),
        other => panic!("expected fsync-bound or writeback-bound, got {other}: {v:#}"),
    }
    assert_eq!(w["only_in_memory"], false);
}

#[test]
#[ignore = "needs root"]
fn a_writer_computing_each_block_is_write_generator_bound() {
    assert_root();
    let dir = support::scratch("write-scenarios");
    let bin = dir.path().join("slow_writer");
    build_c(
        &repo().join("tests/workloads/slow_writer.c"),
        &bin,
        &["-O2", "-static", "-fno-omit-frame-pointer"],
    );
    let out = dir.path().join("shard.bin");
    let cmd = vec![
        bin.display().to_string(),
        out.display().to_string(),
        "64".into(),
        "256".into(),
    ];
    let session = dir.path().join("session");
    let v = diagnose(&session, &cmd);
    let w = writes(&v);
    report("slow-generator", &v, &w);
    assert_eq!(v["verdict"], "write-generator-bound", "{v:#}");
    assert!(!v["inconclusive"].as_bool().unwrap_or(true));
    assert!(
        w["writer_on_cpu_share"].as_f64().unwrap_or(0.0) >= 0.5,
        "{w:#}"
    );
}

#[test]
#[ignore = "needs root"]
fn an_unsynced_checkpoint_only_reaches_memory() {
    assert_root();
    let dir = support::scratch("write-scenarios");
    let folder = dir.path().join("ckpt");
    fs::create_dir_all(&folder).expect("mkdir");
    let cmd = checkpoint_cmd(&folder, &dir.path().join("results"), &["--no-fsync"]);
    let session = dir.path().join("session");
    let v = diagnose(&session, &cmd);
    let w = writes(&v);
    report("no-fsync-page-cache", &v, &w);
    assert_eq!(w["only_in_memory"], true, "{w:#}");
    let headline = v["headline"].as_str().unwrap_or("");
    assert!(headline.contains("only reached memory"), "{headline}");
    let report_md = fs::read_to_string(session.join("report.md")).unwrap_or_default();
    assert!(report_md.contains("only reached memory"), "{report_md}");
}
