//! `storprof record --netns NAME|PATH`: one test host's processes on a
//! shared kernel (hosts made as network namespaces, containers).
//!
//! Data flow: [`NetnsSelector::open`] resolves the namespace (a name under
//! `/run/netns`, as `ip netns` makes them, or any nsfs path such as
//! `/proc/PID/ns/net`) to its identity, the (device, inode) of its nsfs
//! file. [`NetnsSelector::scan`] walks `/proc` (at start and then every
//! [`RESCAN_INTERVAL`] from the recording loop), reads each process's
//! `/proc/PID/ns/net` identity and `stat`, and the pure [`new_members`]
//! picks the processes in the namespace not seen before (kernel threads and
//! storprof itself left out). The recorder adds them to the kernel's traced
//! set; their later children are followed by the probes' fork tracking.
//!
//! The session is named after the host ([`choose_host_name`]): `$STORPROF_HOST`
//! (the bench's host label), else the host name of the namespace's own UTS
//! namespace when it has one, else the `ip netns` name, else this machine's
//! host name. The matching and naming are pure and unit-tested without root.
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often the recording loop looks for new processes in the namespace.
/// Processes entering it (e.g. `ip netns exec`, an MPI daemon started by
/// the launch agent) are traced within this delay; their children are
/// traced from their fork on.
pub const RESCAN_INTERVAL: Duration = Duration::from_millis(100);

/// Where `ip netns add NAME` binds its namespaces.
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// `PF_KTHREAD` in `/proc/PID/stat` flags.
const PF_KTHREAD: u64 = 0x0020_0000;

/// Errors of opening a selection.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error(
        "no network namespace '{spec}' ({path}: {source}); give a name from `ip netns list` or a path such as /proc/PID/ns/net"
    )]
    NoSuchNetns {
        spec: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a network namespace file (nsfs)")]
    NotANamespace { path: PathBuf },
}

/// A namespace's identity: the device and inode of its nsfs file (what
/// `readlink /proc/PID/ns/net` shows as `net:[INODE]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NsId {
    pub dev: u64,
    pub ino: u64,
}

impl NsId {
    /// The identity of the namespace file at `path` (symlinks followed).
    pub fn of(path: &Path) -> std::io::Result<NsId> {
        let m = std::fs::metadata(path)?;
        Ok(NsId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// The namespace as the user named it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetnsSpec {
    /// A name from `ip netns list`: `/run/netns/NAME`.
    Named(String),
    /// Any nsfs path (`/proc/PID/ns/net`, a bind mount).
    Path(PathBuf),
}

impl NetnsSpec {
    /// A spec with a `/` is a path, anything else an `ip netns` name.
    pub fn parse(spec: &str) -> NetnsSpec {
        if spec.contains('/') {
            NetnsSpec::Path(PathBuf::from(spec))
        } else {
            NetnsSpec::Named(spec.to_string())
        }
    }

    /// The nsfs file to compare against.
    pub fn path(&self) -> PathBuf {
        match self {
            NetnsSpec::Named(name) => Path::new(NETNS_RUN_DIR).join(name),
            NetnsSpec::Path(p) => p.clone(),
        }
    }

    /// The `ip netns` name, also for a path under `/run/netns`.
    pub fn name(&self) -> Option<String> {
        match self {
            NetnsSpec::Named(name) => Some(name.clone()),
            NetnsSpec::Path(p) => (p.parent() == Some(Path::new(NETNS_RUN_DIR)))
                .then(|| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .flatten(),
        }
    }
}

/// One process as seen in `/proc` by a scan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcEntry {
    pub pid: u32,
    /// Start time in clock ticks since boot (`stat` field 22): with the pid,
    /// it tells a reused pid from the process seen before.
    pub start_ticks: u64,
    /// None when the process went away or its namespace is unreadable.
    pub net: Option<NsId>,
    pub kernel_thread: bool,
}

/// `(flags, start_ticks)` from the text of `/proc/PID/stat`. The command
/// name may hold spaces and parentheses, so fields are counted after the
/// last `)`.
pub fn parse_stat(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the comm: state(3) ppid pgrp session tty_nr tpgid flags(9) ... starttime(22).
    let flags = fields.get(6)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((flags, start))
}

/// The processes of `entries` in namespace `target` that are not in
/// `seen` (keyed by pid and start time), nor kernel threads, nor `exclude`.
pub fn new_members(
    entries: &[ProcEntry],
    target: NsId,
    seen: &BTreeSet<(u32, u64)>,
    exclude: &[u32],
) -> Vec<ProcEntry> {
    entries
        .iter()
        .filter(|e| e.net == Some(target))
        .filter(|e| !e.kernel_thread && !exclude.contains(&e.pid))
        .filter(|e| !seen.contains(&(e.pid, e.start_ticks)))
        .cloned()
        .collect()
}

/// The session's host name, in order of preference: `$STORPROF_HOST` (the
/// name the bench gives this host in summary.json), the host name of the
/// selected processes' own UTS namespace (a container's), the `ip netns`
/// name, this machine's host name.
pub fn choose_host_name(
    env_host: Option<&str>,
    uts_host: Option<&str>,
    netns_name: Option<&str>,
    kernel_host: &str,
) -> String {
    [env_host, uts_host, netns_name]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|s| !s.is_empty())
        .unwrap_or(kernel_host.trim())
        .to_string()
}

/// The variable naming this host, the one `storprof bench` reads too (a
/// test in the binary keeps the two the same).
pub const HOST_LABEL_ENV: &str = "STORPROF_HOST";

/// `$STORPROF_HOST` when set and non-empty.
pub fn env_host() -> Option<String> {
    std::env::var(HOST_LABEL_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
}

/// This machine's (this UTS namespace's) host name.
pub fn kernel_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The session host name of a recording without a selection:
/// `$STORPROF_HOST`, else the machine's `kernel_host`.
pub fn default_host_name(kernel_host: &str) -> String {
    choose_host_name(env_host().as_deref(), None, None, kernel_host)
}

/// Every process in `/proc` with its network namespace.
fn scan_proc() -> Vec<ProcEntry> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (flags, start_ticks) = parse_stat(&stat)?;
            Some(ProcEntry {
                pid,
                start_ticks,
                net: NsId::of(Path::new(&format!("/proc/{pid}/ns/net"))).ok(),
                kernel_thread: flags & PF_KTHREAD != 0,
            })
        })
        .collect()
}

/// The host name of `pid`'s UTS namespace when it is not ours (read by a
/// short-lived thread that joins it; the namespace change dies with it).
fn foreign_uts_host(pid: u32) -> Option<String> {
    let theirs = format!("/proc/{pid}/ns/uts");
    if NsId::of(Path::new(&theirs)).ok()? == NsId::of(Path::new("/proc/self/ns/uts")).ok()? {
        return None;
    }
    let file = std::fs::File::open(&theirs).ok()?;
    std::thread::spawn(move || {
        use std::os::fd::AsRawFd;
        // SAFETY: setns on a valid namespace fd; it changes only this
        // thread's UTS namespace, and the thread ends right after.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWUTS) } != 0 {
            return None;
        }
        // SAFETY: uname fills the zeroed utsname it is given.
        let name = unsafe {
            let mut uts: libc::utsname = std::mem::zeroed();
            if libc::uname(&mut uts) != 0 {
                return None;
            }
            std::ffi::CStr::from_ptr(uts.nodename.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        Some(name)
    })
    .join()
    .ok()
    .flatten()
}

/// A running selection of one network namespace's processes.
#[derive(Debug)]
pub struct NetnsSelector {
    spec: NetnsSpec,
    target: NsId,
    seen: BTreeSet<(u32, u64)>,
    exclude: Vec<u32>,
    uts_host: Option<String>,
}

impl NetnsSelector {
    /// Resolves `spec` (an `ip netns` name or an nsfs path).
    pub fn open(spec: &str) -> Result<NetnsSelector, SelectError> {
        let parsed = NetnsSpec::parse(spec);
        let path = parsed.path();
        let target = NsId::of(&path).map_err(|source| SelectError::NoSuchNetns {
            spec: spec.to_string(),
            path: path.clone(),
            source,
        })?;
        // A plain file or directory is not a namespace: nsfs inodes are
        // what /proc/self/ns/net is made of.
        let nsfs_dev = NsId::of(Path::new("/proc/self/ns/net")).map(|n| n.dev).ok();
        if nsfs_dev.is_some_and(|d| d != target.dev) {
            return Err(SelectError::NotANamespace { path });
        }
        Ok(NetnsSelector {
            spec: parsed,
            target,
            seen: BTreeSet::new(),
            exclude: vec![std::process::id()],
            uts_host: None,
        })
    }

    /// Processes that entered the namespace since the last scan.
    pub fn scan(&mut self) -> Vec<u32> {
        let fresh = new_members(&scan_proc(), self.target, &self.seen, &self.exclude);
        for e in &fresh {
            self.seen.insert((e.pid, e.start_ticks));
            if self.uts_host.is_none() {
                self.uts_host = foreign_uts_host(e.pid);
            }
        }
        fresh.into_iter().map(|e| e.pid).collect()
    }

    /// Processes selected so far.
    pub fn selected(&self) -> usize {
        self.seen.len()
    }

    /// The session's host name (see [`choose_host_name`]).
    pub fn host_name(&self) -> String {
        choose_host_name(
            env_host().as_deref(),
            self.uts_host.as_deref(),
            self.spec.name().as_deref(),
            &kernel_host(),
        )
    }

    /// How the selection reads in session notes and messages.
    pub fn describe(&self) -> String {
        format!(
            "network namespace {} (net:[{}])",
            self.spec.path().display(),
            self.target.ino
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: NsId = NsId {
        dev: 4,
        ino: 4026532300,
    };
    const OTHER: NsId = NsId {
        dev: 4,
        ino: 4026531840,
    };

    fn entry(pid: u32, start: u64, net: Option<NsId>, kernel_thread: bool) -> ProcEntry {
        ProcEntry {
            pid,
            start_ticks: start,
            net,
            kernel_thread,
        }
    }

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let stat =
            "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 120 0 0 0 3 1 0 0 20 0 1 0 98765 1000 100";
        assert_eq!(parse_stat(stat), Some((4194560, 98765)));
        let kthread = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0";
        let (flags, start) = parse_stat(kthread).unwrap();
        assert!(flags & PF_KTHREAD != 0);
        assert_eq!(start, 5);
        assert_eq!(parse_stat("12 (x) S 1"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn members_are_new_processes_of_the_namespace_only() {
        let entries = vec![
            entry(1, 10, Some(OTHER), false),
            entry(2, 11, Some(OTHER), true),
            entry(100, 50, Some(NS), false),
            entry(101, 51, Some(NS), false),
            entry(102, 52, None, false),
            entry(103, 53, Some(NS), true),
            entry(200, 60, Some(NS), false),
        ];
        let mut seen = BTreeSet::new();
        let first: Vec<u32> = new_members(&entries, NS, &seen, &[200])
            .iter()
            .map(|e| e.pid)
            .collect();
        assert_eq!(first, vec![100, 101]);
        seen.insert((100, 50));
        seen.insert((101, 51));
        assert!(new_members(&entries, NS, &seen, &[200]).is_empty());
        // Pid 101 exited and was reused by a new process: selected again.
        let reused = vec![entry(101, 90, Some(NS), false)];
        assert_eq!(new_members(&reused, NS, &seen, &[])[0].pid, 101);
    }

    #[test]
    fn specs_with_a_slash_are_paths() {
        assert_eq!(NetnsSpec::parse("h1"), NetnsSpec::Named("h1".into()));
        assert_eq!(
            NetnsSpec::parse("h1").path(),
            PathBuf::from("/run/netns/h1")
        );
        assert_eq!(NetnsSpec::parse("h1").name().as_deref(), Some("h1"));
        let p = NetnsSpec::parse("/proc/42/ns/net");
        assert_eq!(p, NetnsSpec::Path("/proc/42/ns/net".into()));
        assert_eq!(p.name(), None);
        assert_eq!(
            NetnsSpec::parse("/run/netns/h2").name().as_deref(),
            Some("h2")
        );
    }

    #[test]
    fn host_name_prefers_env_then_uts_then_netns_name() {
        assert_eq!(
            choose_host_name(Some("rack1"), Some("ctr"), Some("h1"), "vm"),
            "rack1"
        );
        assert_eq!(choose_host_name(None, Some("ctr"), Some("h1"), "vm"), "ctr");
        assert_eq!(choose_host_name(Some(" "), None, Some("h1"), "vm"), "h1");
        assert_eq!(choose_host_name(None, None, None, "vm\n"), "vm");
    }

    #[test]
    fn a_missing_namespace_is_a_clear_error() {
        let err = NetnsSelector::open("storprof-no-such-netns").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("storprof-no-such-netns"), "{text}");
        assert!(text.contains("/run/netns/storprof-no-such-netns"), "{text}");
    }

    #[test]
    fn own_namespace_selects_this_test_process_but_not_storprof_itself() {
        // Without root: /proc/self/ns/net is readable for our own processes.
        let mut sel = NetnsSelector::open("/proc/self/ns/net").unwrap();
        let pids = sel.scan();
        assert!(!pids.contains(&std::process::id()), "storprof excluded");
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let more = sel.scan();
        assert!(more.contains(&child.id()), "{more:?} lacks {}", child.id());
        assert!(!sel.scan().contains(&child.id()), "selected once");
        let _ = child.kill();
        let _ = child.wait();
        assert!(sel.describe().contains("/proc/self/ns/net"));
        let tmp = tempfile::NamedTempFile::new().unwrap();
        assert!(matches!(
            NetnsSelector::open(tmp.path().to_str().unwrap()),
            Err(SelectError::NotANamespace { .. })
        ));
    }
}
