//! The scenario whose files come from a FUSE file system: a remote object
//! store's latency behind a user-space daemon (tests/frameworks/
//! fuse_remote.py speaks the kernel's FUSE protocol itself), read by a
//! PyTorch DataLoader's workers, as over s3fs, gcsfuse or Mountpoint.
use std::process::{Child, Command, Stdio};

use super::{
    scenarios::{path_str, torch_data},
    *,
};

/// `source` mounted read-only at a directory of the work tree by
/// fuse_remote.py, each read waiting `latency_ms`; unmounted when dropped.
struct FuseMount {
    daemon: Child,
    mountpoint: std::path::PathBuf,
}

impl FuseMount {
    fn start(ctx: &Ctx, source: &str, latency_ms: u32) -> FuseMount {
        let mountpoint = ctx.work.join("fuse-mount");
        // A mount a killed run left behind answers nothing: detach it.
        let _ = Command::new("umount")
            .args(["-l", &path_str(&mountpoint)])
            .stderr(Stdio::null())
            .status();
        std::fs::create_dir_all(&mountpoint).expect("make the mount point");
        let argv = ctx.py(
            "fuse_remote.py",
            &[
                source,
                &path_str(&mountpoint),
                "--latency-ms",
                &latency_ms.to_string(),
            ],
        );
        let mut daemon = Command::new(&argv[0])
            .args(&argv[1..])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start fuse_remote.py");
        // It prints "mounted" once the kernel has the mount.
        let mut line = String::new();
        let stdout = daemon.stdout.take().expect("daemon stdout");
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)
            .expect("read fuse_remote.py's first line");
        assert_eq!(line.trim(), "mounted", "fuse_remote.py did not mount");
        FuseMount { daemon, mountpoint }
    }

    fn path(&self) -> String {
        path_str(&self.mountpoint)
    }
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        // SIGTERM: the daemon unmounts (lazily) and exits.
        let _ = Command::new("kill")
            .args(["-TERM", &self.daemon.id().to_string()])
            .status();
        let _ = self.daemon.wait();
    }
}

/// A DataLoader with two workers over NumPy files on a FUSE mount whose
/// daemon answers each read after 10 ms (an object store's first-byte
/// latency): the workers wait in `read()` for the daemon, which is not
/// part of the job. Storage-bound when the consumer alone and the same
/// loader over the files themselves are both far faster.
pub(super) fn torch_npy_fuse(ctx: &Ctx, name: &str) -> Outcome {
    let data = torch_data(ctx);
    let with = |root: &str, mode: &str, extra: &[&str]| {
        let mut args = vec![mode, "--data", root, "--data-kind", "npy", "--workers", "2"];
        args.extend(extra);
        ctx.py("torch_train.py", &args)
    };
    let loader = ["--epochs", "50", "--duration", "3"];
    let (free, _) = ctx.control(&with(&data, "loader", &loader));
    let mount = FuseMount::start(ctx, &data, 10);
    let root = mount.path();
    let (l, _) = ctx.control(&with(&root, "loader", &loader));
    let (c, _) = ctx.control(&with(&root, "consumer", &["--duration", "3"]));
    let truth = truth_by_rates(name, l, c, "storage-bound");
    assert!(
        free / l >= 1.5,
        "{name}: broken scenario: {free:.1}/s from the files against {l:.1}/s through FUSE"
    );
    let diagnosis = diagnose(ctx, name, &[], &with(&root, "job", &[]));
    drop(mount);
    Outcome {
        name: name.into(),
        truth,
        controls: format!(
            "loader {} (files themselves {}) / consumer {}",
            fmt_rate(l),
            fmt_rate(free),
            fmt_rate(c)
        ),
        diagnosis,
    }
}
