//! The block-I/O limits of a process's cgroup: cgroup v1's blkio throttle
//! (`blkio.throttle.{read,write}_{bps,iops}_device`) and cgroup v2's
//! `io.max`, of its cgroup and every ancestor (a parent's limit holds the
//! children too). A throttled bio waits in `blk_throtl_bio` before any
//! block tracepoint sees it, so the device looks idle while the reader
//! waits: the limits name what held it.
//!
//! Pure parsing over a root directory (the tests use a temporary tree);
//! [`limits_of`] reads the real /proc and /sys/fs/cgroup.
use std::{collections::BTreeMap, path::Path};

use storprof_session::model::IoLimit;

/// Where cgroup v1's blkio controller and cgroup v2 are mounted here.
const V1_BLKIO: &str = "/sys/fs/cgroup/blkio";
const V2_ROOTS: &[&str] = &["/sys/fs/cgroup/unified", "/sys/fs/cgroup"];

/// The limits on `pid`'s block I/O, read from the running system.
pub fn limits_of(pid: u32) -> Vec<IoLimit> {
    let Ok(cgroups) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let (v1, v2) = cgroup_paths(&cgroups);
    if let Some(path) = v1 {
        out.extend(v1_limits(Path::new(V1_BLKIO), &path));
    }
    if let Some(path) = v2 {
        for root in V2_ROOTS {
            let found = v2_limits(Path::new(root), &path);
            if !found.is_empty() {
                out.extend(found);
                break;
            }
        }
    }
    out
}

/// The blkio (v1) and unified (v2) cgroup paths of a `/proc/PID/cgroup`.
fn cgroup_paths(text: &str) -> (Option<String>, Option<String>) {
    let mut v1 = None;
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_string());
        } else if controllers.split(',').any(|c| c == "blkio") {
            v1 = Some(path.to_string());
        }
    }
    (v1, v2)
}

/// `path` and its ancestors, nearest first, as directories under `root`.
fn ancestry(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut p = path.trim_end_matches('/').to_string();
    while !p.is_empty() && p != "/" {
        out.push(p.clone());
        match p.rfind('/') {
            Some(0) | None => break,
            Some(i) => p.truncate(i),
        }
    }
    out
}

/// `MAJ:MIN VALUE` lines of a v1 throttle file.
fn v1_file(root: &Path, cgroup: &str, file: &str) -> Vec<(String, u64)> {
    let dir = root.join(cgroup.trim_start_matches('/'));
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (dev, v) = l.split_once(' ')?;
            Some((dev.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// Sets one limit of an [`IoLimit`].
type SetLimit = fn(&mut IoLimit, u64);

fn v1_limits(root: &Path, path: &str) -> Vec<IoLimit> {
    let mut out = Vec::new();
    for cgroup in ancestry(path) {
        let mut by_dev: BTreeMap<String, IoLimit> = BTreeMap::new();
        let files: [(&str, SetLimit); 4] = [
            ("blkio.throttle.read_bps_device", |l, v| {
                l.read_bps = Some(v)
            }),
            ("blkio.throttle.write_bps_device", |l, v| {
                l.write_bps = Some(v)
            }),
            ("blkio.throttle.read_iops_device", |l, v| {
                l.read_iops = Some(v)
            }),
            ("blkio.throttle.write_iops_device", |l, v| {
                l.write_iops = Some(v)
            }),
        ];
        for (file, set) in files {
            for (dev, v) in v1_file(root, &cgroup, file) {
                let limit = by_dev.entry(dev.clone()).or_insert_with(|| IoLimit {
                    cgroup: cgroup.clone(),
                    kind: "blkio".into(),
                    device: dev,
                    ..IoLimit::default()
                });
                set(limit, v);
            }
        }
        out.extend(by_dev.into_values());
    }
    out
}

fn v2_limits(root: &Path, path: &str) -> Vec<IoLimit> {
    let mut out = Vec::new();
    for cgroup in ancestry(path) {
        let dir = root.join(cgroup.trim_start_matches('/'));
        let Ok(text) = std::fs::read_to_string(dir.join("io.max")) else {
            continue;
        };
        out.extend(parse_io_max(&text, &cgroup));
    }
    out
}

/// `io.max` lines: `MAJ:MIN rbps=N wbps=max riops=max wiops=max`.
fn parse_io_max(text: &str, cgroup: &str) -> Vec<IoLimit> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let dev = words.next()?;
            let mut limit = IoLimit {
                cgroup: cgroup.to_string(),
                kind: "io.max".into(),
                device: dev.to_string(),
                ..IoLimit::default()
            };
            for w in words {
                let (key, value) = w.split_once('=')?;
                let value = value.parse().ok();
                match key {
                    "rbps" => limit.read_bps = value,
                    "wbps" => limit.write_bps = value,
                    "riops" => limit.read_iops = value,
                    "wiops" => limit.write_iops = value,
                    _ => {}
                }
            }
            limit.is_limited().then_some(limit)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_cgroup_names_the_blkio_and_unified_paths() {
        let text = "12:pids:/\n7:blkio:/storprof-scenario-42\n1:name=systemd:/x\n0::/user.slice\n";
        assert_eq!(
            cgroup_paths(text),
            (
                Some("/storprof-scenario-42".into()),
                Some("/user.slice".into())
            )
        );
        assert_eq!(ancestry("/a/b/c"), ["/a/b/c", "/a/b", "/a"]);
        assert!(ancestry("/").is_empty());
    }

    #[test]
    fn v1_throttles_of_a_cgroup_and_its_parents() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        let b = a.join("b");
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(b.join("blkio.throttle.read_bps_device"), "254:0 20971520\n").unwrap();
        std::fs::write(b.join("blkio.throttle.write_bps_device"), "").unwrap();
        std::fs::write(a.join("blkio.throttle.read_iops_device"), "254:0 100\n").unwrap();
        let limits = v1_limits(root.path(), "/a/b");
        assert_eq!(limits.len(), 2, "{limits:?}");
        assert_eq!(limits[0].cgroup, "/a/b");
        assert_eq!(limits[0].read_bps, Some(20 << 20));
        assert_eq!(limits[0].device, "254:0");
        assert_eq!(limits[1].cgroup, "/a");
        assert_eq!(limits[1].read_iops, Some(100));
    }

    #[test]
    fn io_max_keeps_the_limited_devices() {
        let limits = parse_io_max(
            "254:0 rbps=31457280 wbps=max riops=max wiops=max\n8:0 rbps=max wbps=max riops=max wiops=max\n",
            "/job",
        );
        assert_eq!(limits.len(), 1);
        assert_eq!(limits[0].read_bps, Some(30 << 20));
        assert_eq!(limits[0].write_bps, None);
    }
}
