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
//! 4. tests/workloads/slow_writer.c without its slowness, writing to a
//!    small ext4 on a loop device whose writes are throttled in the root
//!    blkio group (which the flusher's writeback is in: cgroup v1 does
//!    not charge writeback to the writer's group, so scenario 1's group
//!    cannot throttle it) and whose bdi allows only a few MiB of dirty
//!    pages (`strict_limit`, `max_bytes`) → writeback-bound, driven by
//!    the time in balance_dirty_pages.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use crate::support;
use crate::support::{STORPROF, assert_root, build_c, repo};

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

/// A small ext4 file system on a loop device (its image in a scratch dir)
/// with slow writeback and a small dirty-page allowance: each setting is
/// recorded as it is made, and dropping the guard undoes all of them in
/// reverse (throttle off first, so the unmount's flush is quick), also
/// when a test fails halfway. Nothing of vda or the global vm sysctls is
/// touched.
struct SlowLoopFs {
    loop_dev: Option<String>,
    /// "MAJ:MIN" of the loop device: its bdi and its throttle rule.
    maj_min: Option<String>,
    mount: Option<PathBuf>,
    throttled: bool,
    /// The bdi's `max_ratio` and `strict_limit` before the test.
    bdi_saved: Option<(String, String)>,
}

const ROOT_WRITE_BPS: &str = "/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device";

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl SlowLoopFs {
    /// `image_mib` of ext4 mounted at `dir/mnt`, device writes limited to
    /// `write_bps` for everyone, at most `dirty_bytes` dirty pages on it.
    fn new(dir: &Path, image_mib: u64, write_bps: u64, dirty_bytes: u64) -> SlowLoopFs {
        let mut fs_guard = SlowLoopFs {
            loop_dev: None,
            maj_min: None,
            mount: None,
            throttled: false,
            bdi_saved: None,
        };
        let image = dir.join("fs.img");
        let file = fs::File::create(&image).expect("create image");
        file.set_len(image_mib << 20).expect("size image");
        drop(file);
        let dev = run(
            "losetup",
            &["--find", "--show", image.to_str().expect("utf-8 path")],
        );
        fs_guard.loop_dev = Some(dev.clone());
        let name = dev.trim_start_matches("/dev/");
        let maj_min = fs::read_to_string(format!("/sys/block/{name}/dev"))
            .expect("loop device's MAJ:MIN")
            .trim()
            .to_string();
        fs_guard.maj_min = Some(maj_min.clone());
        run("mkfs.ext4", &["-q", "-F", &dev]);
        let mnt = dir.join("mnt");
        fs::create_dir_all(&mnt).expect("mkdir mnt");
        run(
            "mount",
            &["-t", "ext4", &dev, mnt.to_str().expect("utf-8 path")],
        );
        fs_guard.mount = Some(mnt);
        // The root group's rule: writeback runs in the flusher, which is
        // in the root group whoever dirtied the pages.
        fs::write(ROOT_WRITE_BPS, format!("{maj_min} {write_bps}")).expect("set root write_bps");
        fs_guard.throttled = true;
        let bdi = Path::new("/sys/class/bdi").join(&maj_min);
        let read = |knob: &str| {
            fs::read_to_string(bdi.join(knob))
                .unwrap_or_else(|e| panic!("read bdi {knob}: {e}"))
                .trim()
                .to_string()
        };
        fs_guard.bdi_saved = Some((read("max_ratio"), read("strict_limit")));
        // strict_limit: the bdi's own share of the dirty limit holds even
        // while the system is far below its global limits.
        fs::write(bdi.join("strict_limit"), "1").expect("set strict_limit");
        fs::write(bdi.join("max_bytes"), dirty_bytes.to_string()).expect("set max_bytes");
        fs_guard
    }

    fn dir(&self) -> &Path {
        self.mount.as_deref().expect("mounted")
    }

    /// The loop device's kernel name ("loop3").
    fn name(&self) -> String {
        let dev = self.loop_dev.as_deref().expect("attached");
        dev.trim_start_matches("/dev/").to_string()
    }
}

impl Drop for SlowLoopFs {
    fn drop(&mut self) {
        if let Some(maj_min) = &self.maj_min {
            if self.throttled {
                let _ = fs::write(ROOT_WRITE_BPS, format!("{maj_min} 0"));
            }
            if let Some((max_ratio, strict_limit)) = &self.bdi_saved {
                let bdi = Path::new("/sys/class/bdi").join(maj_min);
                // max_ratio rewrites max_bytes too.
                let _ = fs::write(bdi.join("max_ratio"), max_ratio);
                let _ = fs::write(bdi.join("strict_limit"), strict_limit);
            }
        }
        if let Some(mnt) = &self.mount {
            let status = Command::new("umount").arg(mnt).status();
            if !status.is_ok_and(|s| s.success()) {
                let _ = Command::new("umount").arg("-l").arg(mnt).status();
            }
        }
        if let Some(dev) = &self.loop_dev {
            let _ = Command::new("losetup").arg("-d").arg(dev).status();
        }
    }
}

/// One scenario at a time: device write bytes are system-wide, so one
/// scenario's writeback (or a loop device's image file on vda) would count
/// in another's "did the data reach the device" figures.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A failed scenario poisons the lock; the next one still runs.
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
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
        "WRITE_SCENARIO {name}: verdict {} (fired {}), sync {:.3}, writeback wait {:.3} \
         (dirty throttle {:.3}), on-CPU {:.3}, write path {:.3}, written {} B, device {} B, \
         only in memory {}, dirty pages {}\n  headline: {}",
        v["verdict"],
        !v["inconclusive"].as_bool().unwrap_or(true),
        w["writer_sync_share"].as_f64().unwrap_or(-1.0),
        w["writer_writeback_wait_share"].as_f64().unwrap_or(-1.0),
        w["writer_dirty_throttle_share"].as_f64().unwrap_or(-1.0),
        w["writer_on_cpu_share"].as_f64().unwrap_or(-1.0),
        w["writer_write_path_share"].as_f64().unwrap_or(-1.0),
        w["write_syscall_bytes"],
        w["device_write_bytes"],
        w["only_in_memory"],
        w["dirty"],
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
    let _serial = one_at_a_time();
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

/// tests/workloads/slow_writer.c, built static with frame pointers into `dir`.
fn build_slow_writer(dir: &Path) -> PathBuf {
    let bin = dir.join("slow_writer");
    build_c(
        &repo().join("tests/workloads/slow_writer.c"),
        &bin,
        &["-O2", "-static", "-fno-omit-frame-pointer"],
    );
    bin
}

#[test]
#[ignore = "needs root"]
fn a_writer_computing_each_block_is_write_generator_bound() {
    assert_root();
    let _serial = one_at_a_time();
    let dir = support::scratch("write-scenarios");
    let bin = build_slow_writer(dir.path());
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
    let _serial = one_at_a_time();
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

#[test]
#[ignore = "needs root"]
fn a_buffered_writer_on_slow_storage_is_throttled_and_writeback_bound() {
    assert_root();
    let _serial = one_at_a_time();
    let dir = support::scratch("write-scenarios");
    let bin = build_slow_writer(dir.path());
    // 64 MiB through an 8 MiB/s device with 8 MiB of dirty pages allowed:
    // about 7 s of the writer's ~8 s throttled in balance_dirty_pages,
    // the final fsync flushing at most the allowance.
    let slow = SlowLoopFs::new(dir.path(), 256, 8 << 20, 8 << 20);
    let cmd = vec![
        bin.display().to_string(),
        slow.dir().join("shard.bin").display().to_string(),
        "64".into(),
        "0".into(),
    ];
    let loop_name = slow.name();
    let session = dir.path().join("session");
    let v = diagnose(&session, &cmd);
    drop(slow);
    let w = writes(&v);
    report("loop-bdi-strict-limit", &v, &w);
    assert_eq!(v["verdict"], "writeback-bound", "{v:#}");
    assert!(!v["inconclusive"].as_bool().unwrap_or(true), "{v:#}");
    let share = |k: &str| w[k].as_f64().unwrap_or(0.0);
    // The dirty-page throttling drives it, not fsync.
    assert!(share("writer_dirty_throttle_share") >= 0.5, "{w:#}");
    assert!(
        share("writer_dirty_throttle_share") > share("writer_sync_share"),
        "{w:#}"
    );
    assert_eq!(w["only_in_memory"], false, "{w:#}");
    // The throttled loop device wrote the data, and its write latency is
    // measured.
    let devices = v["features"]["devices"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let lo = devices
        .iter()
        .find(|d| d["name"] == loop_name.as_str())
        .unwrap_or_else(|| panic!("no {loop_name} in {devices:#?}"));
    assert!(
        lo["write_bytes"].as_u64().unwrap_or(0) >= 48 << 20,
        "{lo:#}"
    );
    assert!(lo["write_latency_p99_us"].as_f64().is_some(), "{lo:#}");
    // Its image file's writes reach the disk under the scratch dir again:
    // that disk carries the loop device, which is the device named.
    assert_eq!(w["top_write_device"]["name"], loop_name.as_str(), "{w:#}");
    let headline = v["headline"].as_str().unwrap_or("");
    assert!(
        headline.contains(&format!("written by {loop_name},")),
        "{headline}"
    );
    let io: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(session.join("io.json")).expect("io.json"))
            .expect("io.json is JSON");
    let sits_on: Vec<String> = io["devices"]
        .as_array()
        .and_then(|ds| ds.iter().find(|d| d["name"] == loop_name.as_str()))
        .and_then(|d| d["sits_on"].as_array())
        .map(|lower| {
            lower
                .iter()
                .map(|l| l["name"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    assert!(!sits_on.is_empty(), "{io:#}");
    for d in &devices {
        let name = d["name"].as_str().unwrap_or("");
        if sits_on.iter().any(|s| s == name) && d["write_bytes"].as_u64().unwrap_or(0) > 0 {
            assert_eq!(d["carries"][0]["name"], loop_name.as_str(), "{d:#}");
            assert_eq!(d["carries"][0]["via"], "loop_image", "{d:#}");
        }
    }
    // Dirty pages were sampled (system-wide: at least this bdi's share
    // was dirty at some second), and the report shows the split.
    assert!(
        w["dirty"]["dirty_peak_mib"].as_f64().unwrap_or(0.0) > 0.0,
        "{w:#}"
    );
    let report_md = fs::read_to_string(session.join("report.md")).unwrap_or_default();
    assert!(report_md.contains("## Writers"), "{report_md}");
    assert!(report_md.contains("Dirty page cache"), "{report_md}");
    assert!(
        report_md.contains(&format!("(carries `{loop_name}`'s image file)")),
        "{report_md}"
    );
    let ts: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(session.join("timeseries.json")).expect("timeseries.json"),
    )
    .expect("timeseries.json is JSON");
    assert!(
        ts["vmstat"]["dirty_bytes"]
            .as_array()
            .is_some_and(|v| !v.is_empty())
    );
}
