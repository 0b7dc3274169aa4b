//! `system.json`: facts about the machine and the storage behind the data
//! paths the recorded command used, for the evidence bundle.
//!
//! ```text
//! /proc/{cpuinfo,meminfo,sys/kernel/osrelease}, uname ──► cpu, memory, kernel
//! command line (--data-dir, data_folder=, paths) + cwd ──► data paths
//!   ──► /proc/self/mountinfo (longest mount prefix) ──► filesystem, source, MAJ:MIN
//!   ──► /sys/dev/block/MAJ:MIN (+ parent disk) ──► device, scheduler, rotational
//! ```
//! Parsing is pure (unit-tested); [`collect`] does the reads and never
//! fails: what cannot be read is `null`.
use std::{
    fs,
    path::{Path, PathBuf},
};

use serde::Serialize;

use super::bundle::redact_args;

/// One line of /proc/self/mountinfo that matters here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mount {
    pub mount_point: String,
    pub fs_type: String,
    pub source: String,
    /// "MAJ:MIN" of the filesystem's device.
    pub dev: String,
    pub options: String,
}

/// Parses /proc/self/mountinfo (see proc(5)): fields 3 (MAJ:MIN), 5 (mount
/// point), 6 (options), then after " - ": fs type, source.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            Some(Mount {
                dev: pre.get(2)?.to_string(),
                mount_point: unescape_octal(pre.get(4)?),
                options: pre.get(5)?.to_string(),
                fs_type: post.first()?.to_string(),
                source: post.get(1).map_or(String::new(), |s| s.to_string()),
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && let Some(v) = b
                .get(i + 1..i + 4)
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount holding `path` (longest mount-point prefix, last mounted wins).
pub fn mount_for<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| path.starts_with(&m.mount_point))
        .max_by_key(|(i, m)| (m.mount_point.len(), *i))
        .map(|(_, m)| m)
}

/// The active scheduler in /sys/block/X/queue/scheduler ("none [mq-deadline]").
pub fn parse_scheduler(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = text[start..].find(']')?;
    Some(text[start + 1..start + end].to_string())
}

/// Paths the command line names: values of options whose name says dir,
/// folder, path or file, `key=value` with such keys, and absolute paths.
pub fn data_paths_from_command(command: &[String]) -> Vec<String> {
    let looks_like = |name: &str| {
        let n = name.to_ascii_lowercase();
        ["dir", "folder", "path", "file", "root", "mount"]
            .iter()
            .any(|k| n.contains(k))
    };
    let mut out: Vec<String> = Vec::new();
    let mut take_next = false;
    for arg in command {
        if take_next {
            take_next = false;
            if !arg.starts_with('-') {
                out.push(arg.clone());
                continue;
            }
        }
        if let Some((k, v)) = arg.split_once('=') {
            if looks_like(k) && !v.is_empty() {
                out.push(v.to_string());
            }
        } else if arg.starts_with("--") && looks_like(arg) {
            take_next = true;
        } else if arg.starts_with('/') {
            out.push(arg.clone());
        }
    }
    out.dedup();
    out
}

/// Storage facts behind one path.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PathFacts {
    pub path: String,
    /// The path as resolved (or its nearest existing ancestor).
    pub resolved: Option<String>,
    pub mount: Option<Mount>,
    /// Block device name (partition) and the whole disk.
    pub device: Option<String>,
    pub disk: Option<String>,
    pub scheduler: Option<String>,
    pub rotational: Option<bool>,
    pub disk_size_bytes: Option<u64>,
}

/// `system.json`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SystemFacts {
    pub storprof_version: String,
    pub kernel: Option<String>,
    pub kernel_version: Option<String>,
    pub cpu_model: Option<String>,
    pub cpu_count: Option<usize>,
    pub memory_total_bytes: Option<u64>,
    pub command: Vec<String>,
    pub cwd: Option<String>,
    pub data_paths: Vec<PathFacts>,
}

fn read(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn nearest_existing(path: &Path) -> Option<PathBuf> {
    let mut p = path.to_path_buf();
    loop {
        if let Ok(c) = fs::canonicalize(&p) {
            return Some(c);
        }
        if !p.pop() {
            return None;
        }
    }
}

fn path_facts(path: &str, cwd: Option<&Path>, mounts: &[Mount]) -> PathFacts {
    let p = Path::new(path);
    let abs = match (p.is_absolute(), cwd) {
        (false, Some(cwd)) => cwd.join(p),
        _ => p.to_path_buf(),
    };
    let resolved = nearest_existing(&abs);
    let mount = resolved
        .as_deref()
        .and_then(|r| mount_for(mounts, r))
        .cloned();
    let mut facts = PathFacts {
        path: path.to_string(),
        resolved: resolved.map(|r| r.to_string_lossy().into_owned()),
        ..PathFacts::default()
    };
    if let Some(m) = &mount {
        let sys = PathBuf::from(format!("/sys/dev/block/{}", m.dev));
        if let Ok(real) = fs::canonicalize(&sys) {
            let dev_name = real.file_name().map(|n| n.to_string_lossy().into_owned());
            // A partition's parent directory is its disk.
            let disk_dir = if real.join("partition").exists() {
                real.parent().map(Path::to_path_buf)
            } else {
                Some(real.clone())
            };
            let disk = disk_dir
                .as_ref()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned());
            if let Some(d) = &disk_dir {
                facts.scheduler = fs::read_to_string(d.join("queue/scheduler"))
                    .ok()
                    .and_then(|s| parse_scheduler(&s));
                facts.rotational =
                    read(&d.join("queue/rotational").to_string_lossy()).map(|s| s == "1");
                facts.disk_size_bytes = read(&d.join("size").to_string_lossy())
                    .and_then(|s| s.parse::<u64>().ok())
                    .map(|sectors| sectors * 512);
            }
            facts.device = dev_name;
            facts.disk = disk;
        }
    }
    facts.mount = mount;
    facts
}

/// Collects the facts of this machine for a session recorded with
/// `command` in `cwd`. The command is redacted.
pub fn collect(command: &[String], cwd: Option<&str>) -> SystemFacts {
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string());
    let memory_total_bytes = read("/proc/meminfo").and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    let mounts = parse_mountinfo(&read("/proc/self/mountinfo").unwrap_or_default());
    let cwd_path = cwd.map(PathBuf::from);
    let mut paths = data_paths_from_command(command);
    if let Some(c) = cwd {
        paths.push(c.to_string());
    }
    let data_paths = paths
        .iter()
        .map(|p| path_facts(p, cwd_path.as_deref(), &mounts))
        .collect();
    SystemFacts {
        storprof_version: env!("CARGO_PKG_VERSION").to_string(),
        kernel: read("/proc/sys/kernel/osrelease"),
        kernel_version: read("/proc/sys/kernel/version"),
        cpu_model,
        cpu_count: std::thread::available_parallelism().ok().map(usize::from),
        memory_total_bytes,
        command: redact_args(command),
        cwd: cwd.map(str::to_string),
        data_paths,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
30 22 0:26 / /sys rw,nosuid shared:7 - sysfs sysfs rw
40 22 259:2 / /data/my\\040disk rw,noatime shared:9 - xfs /dev/nvme0n1p2 rw,attr2
";

    #[test]
    fn mountinfo_and_longest_prefix() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 3);
        assert_eq!(m[2].mount_point, "/data/my disk");
        assert_eq!(m[2].fs_type, "xfs");
        assert_eq!(m[2].source, "/dev/nvme0n1p2");
        assert_eq!(m[2].dev, "259:2");
        assert_eq!(
            mount_for(&m, Path::new("/data/my disk/flux/a.parquet"))
                .unwrap()
                .fs_type,
            "xfs"
        );
        assert_eq!(mount_for(&m, Path::new("/home/u")).unwrap().fs_type, "ext4");
        assert_eq!(
            mount_for(&m, Path::new("/data/my diskette"))
                .unwrap()
                .fs_type,
            "ext4"
        );
    }

    #[test]
    fn scheduler_and_paths() {
        assert_eq!(
            parse_scheduler("none [mq-deadline] kyber\n").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(parse_scheduler("none\n"), None);
        let cmd: Vec<String> = [
            "storprof",
            "bench",
            "--data-dir",
            "/data/flux",
            "--results-dir=out",
            "++workload.dataset.data_folder=/mnt/x",
            "--reader",
            "raw",
            "/abs/file",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            data_paths_from_command(&cmd),
            ["/data/flux", "out", "/mnt/x", "/abs/file"]
        );
    }

    #[test]
    fn collect_never_fails_and_redacts() {
        let facts = collect(
            &["x".to_string(), "--token".to_string(), "t0p".to_string()],
            Some("/"),
        );
        assert!(!serde_json::to_string(&facts).unwrap().contains("t0p"));
        assert_eq!(facts.data_paths.len(), 1);
    }
}
