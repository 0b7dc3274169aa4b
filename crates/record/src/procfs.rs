//! What the recorder reads from /proc and /sys: clocks, process trees,
//! thread ids, parents and block device names. Small readers, each
//! returning an empty or `None` answer for a process that is gone.
use std::{
    collections::{BTreeSet, VecDeque},
    os::unix::fs::MetadataExt,
    path::Path,
};

use super::aggregate;
use storprof_session::model::{LowerDevice, Stacking};

pub(super) use crate::probes::monotonic_ns;

/// Wall-clock time in ns since the epoch.
pub(super) fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Descendant processes of `pid` (from /proc/PID/task/*/children).
pub(super) fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut stack = vec![pid];
    while let Some(p) = stack.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !out.contains(&c) {
                    out.push(c);
                    stack.push(c);
                }
            }
        }
    }
    out
}

/// The thread ids of process `pid` (empty when it is gone).
pub(super) fn task_ids(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Tgid of a task, from /proc (None when gone).
pub(super) fn tgid_of(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Parent pid of a live process (/proc/PID/stat field 4).
pub(super) fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The comm (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The system's dirty/writeback page counters (None: /proc/vmstat unreadable).
pub(super) fn vmstat() -> Option<aggregate::VmstatCounters> {
    aggregate::parse_vmstat(&std::fs::read_to_string("/proc/vmstat").ok()?)
}

/// The machine's CPU time counters (None: /proc/stat unreadable).
pub(super) fn host_cpu() -> Option<aggregate::HostCpuTicks> {
    aggregate::parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Clock ticks a second, the unit of /proc/stat (USER_HZ).
pub(super) fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf reads a constant of the C library; no memory is
    // passed.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

/// A thread's name (None when it is gone). `/proc/TGID/task/TID`: a
/// reused tid in another process does not answer for it.
pub(super) fn thread_comm(tgid: u32, tid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Whether thread `tid` of process `tgid` exists.
pub(super) fn thread_alive(tgid: u32, tid: u32) -> bool {
    Path::new(&format!("/proc/{tgid}/task/{tid}")).exists()
}

/// The executable of process `tgid` (None when it is gone).
pub(super) fn exe(tgid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{tgid}/exe")).ok()
}

/// The running kernel's release, and whether it describes itself in BTF.
pub(super) fn kernel_facts() -> super::kernel::KernelFacts {
    super::kernel::KernelFacts {
        release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        btf: Path::new("/sys/kernel/btf/vmlinux").exists(),
        host_name: super::select::kernel_host(),
        num_cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
    }
}

/// Process `tgid`'s `/proc/PID/maps` and perf map (None: gone).
pub(super) fn process_layout(tgid: u32) -> Option<super::kernel::ProcessLayout> {
    let maps = std::fs::read_to_string(format!("/proc/{tgid}/maps")).ok()?;
    Some(super::kernel::ProcessLayout {
        maps,
        perf_map: std::fs::read_to_string(format!("/tmp/perf-{tgid}.map")).ok(),
    })
}

/// Process `tgid`'s code footprint from `/proc/PID/status` (a few dozen
/// lines, where its maps run to thousands) and its perf map's length.
pub(super) fn code_footprint(tgid: u32) -> Option<super::kernel::CodeFootprint> {
    let status = std::fs::read_to_string(format!("/proc/{tgid}/status")).ok()?;
    let exec_kib = exec_kib(&status)?;
    Some(super::kernel::CodeFootprint {
        exec_kib,
        perf_map_bytes: std::fs::metadata(format!("/tmp/perf-{tgid}.map"))
            .ok()
            .map(|m| m.len()),
    })
}

/// `VmExe` + `VmLib` (KiB) of a `/proc/PID/status` text; None without
/// them (a kernel thread, a zombie).
fn exec_kib(status: &str) -> Option<u64> {
    let field = |name: &str| {
        status.lines().find_map(|l| {
            l.strip_prefix(name)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse::<u64>()
                .ok()
        })
    };
    Some(field("VmExe:")? + field("VmLib:")?)
}

/// Kernel name of a block device from its kernel-internal dev_t.
pub(super) fn device_name(dev: u32) -> String {
    let (major, minor) = aggregate::dev_major_minor(dev);
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent"));
    uevent
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("DEVNAME="))
                .map(str::to_string)
        })
        .unwrap_or_else(|| aggregate::dev_fallback_name(dev))
}

/// The devices block device `dev` (kernel-internal dev_t) sits on, nearest
/// first (see [`DeviceStats::sits_on`](storprof_session::model::DeviceStats)).
pub(super) fn lower_devices(dev: u32) -> Vec<LowerDevice> {
    let (major, minor) = aggregate::dev_major_minor(dev);
    lower_devices_in(Path::new("/sys"), (major, minor), &|path| {
        std::fs::metadata(path)
            .ok()
            .map(|m| user_dev_major_minor(m.dev()))
    })
}

/// (major, minor) of a user-space `dev_t` (`st_dev`), glibc's encoding.
fn user_dev_major_minor(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

/// Upper bound on the devices listed under one device: stacks are a few
/// deep; a striped md over many disks is cut short rather than walked.
const MAX_LOWER_DEVICES: usize = 64;

/// [`lower_devices`] over the sysfs tree at `sys`, with `file_dev` giving
/// the (major, minor) of the device a path lives on. Walks down, breadth
/// first: a loop device's `loop/backing_file`, a dm/md device's `slaves/`,
/// a partition's whole disk. Each device is listed once, with the way the
/// top device reached the first step.
fn lower_devices_in(
    sys: &Path,
    top: (u32, u32),
    file_dev: &dyn Fn(&Path) -> Option<(u32, u32)>,
) -> Vec<LowerDevice> {
    let dir_of = |(major, minor): (u32, u32)| sys.join(format!("dev/block/{major}:{minor}"));
    let mut seen = BTreeSet::from([top]);
    let mut out = Vec::new();
    let mut queue = VecDeque::from([(top, None::<Stacking>)]);
    while let Some((dev, via)) = queue.pop_front() {
        let dir = dir_of(dev);
        let mut below: Vec<((u32, u32), Stacking)> = Vec::new();
        if let Ok(backing) = std::fs::read_to_string(dir.join("loop/backing_file")) {
            let path = backing.trim_end_matches('\n');
            // A deleted image keeps its device, but the path no longer
            // resolves: nothing is listed then.
            if let Some(lower) = file_dev(Path::new(path)).filter(|d| d.0 != 0) {
                below.push((lower, Stacking::LoopImage));
            }
        }
        if let Ok(slaves) = std::fs::read_dir(dir.join("slaves")) {
            let mut members: Vec<(u32, u32)> = slaves
                .flatten()
                .filter_map(|e| read_major_minor(&e.path().join("dev")))
                .collect();
            members.sort_unstable();
            below.extend(members.into_iter().map(|m| (m, Stacking::Member)));
        }
        if dir.join("partition").exists()
            && let Some(disk) = read_major_minor(&dir.join("../dev"))
        {
            below.push((disk, via.unwrap_or(Stacking::Other)));
        }
        for (lower, how) in below {
            if out.len() >= MAX_LOWER_DEVICES || !seen.insert(lower) {
                continue;
            }
            // Every device below keeps the way the top device reached the
            // first one: loop0's image on dm-0 on vda makes vda carry
            // loop0's image too.
            let via = via.unwrap_or(how);
            out.push(LowerDevice {
                name: devname(&dir_of(lower)).unwrap_or_else(|| format!("{}:{}", lower.0, lower.1)),
                dev: format!("{}:{}", lower.0, lower.1),
                via,
            });
            queue.push_back((lower, Some(via)));
        }
    }
    out
}

/// A sysfs `dev` file's "MAJ:MIN".
fn read_major_minor(path: &Path) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(path).ok()?;
    let (major, minor) = text.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// DEVNAME from a sysfs block device directory's `uevent`.
fn devname(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("uevent")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(str::to_string)
}

/// CPU seconds (user + system) this process used so far, all its threads.
pub(super) fn own_cpu_s() -> Option<f64> {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer to one rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(usage.ru_utime) + secs(usage.ru_stime))
}

#[cfg(test)]
mod tests {
    use std::{fs, os::unix::fs::symlink};

    use super::*;

    #[test]
    fn exec_kib_adds_the_executable_and_its_libraries() {
        let status = "Name:\tpython3\nVmData:\t  81920 kB\nVmExe:\t    2880 kB\n\
                      VmLib:\t  164476 kB\nVmPTE:\t 1024 kB\n";
        assert_eq!(exec_kib(status), Some(167_356));
        // A kernel thread's status has neither.
        assert_eq!(exec_kib("Name:\tkworker/0:1\nState:\tI (idle)\n"), None);
    }

    #[test]
    fn this_process_has_a_code_footprint() {
        let own = code_footprint(std::process::id()).unwrap();
        assert!(own.exec_kib > 0);
    }

    /// A sysfs tree: `devices/<path>` directories with `dev` and `uevent`,
    /// and `dev/block/MAJ:MIN` links to them, as the kernel lays it out.
    struct FakeSys(tempfile::TempDir);

    impl FakeSys {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            fs::create_dir_all(dir.path().join("dev/block")).unwrap();
            FakeSys(dir)
        }
        fn root(&self) -> &Path {
            self.0.path()
        }
        /// Adds a device at `devices/<path>` (a partition's path lies in
        /// its disk's directory) and returns its directory.
        fn device(&self, path: &str, name: &str, dev: (u32, u32)) -> std::path::PathBuf {
            let dir = self.root().join("devices").join(path);
            fs::create_dir_all(&dir).unwrap();
            fs::write(dir.join("dev"), format!("{}:{}\n", dev.0, dev.1)).unwrap();
            fs::write(
                dir.join("uevent"),
                format!("MAJOR={}\nDEVNAME={name}\n", dev.0),
            )
            .unwrap();
            symlink(
                &dir,
                self.root().join(format!("dev/block/{}:{}", dev.0, dev.1)),
            )
            .unwrap();
            dir
        }
    }

    #[test]
    fn a_loop_image_on_a_partition_reaches_the_whole_disk() {
        let sys = FakeSys::new();
        sys.device("virtual/block/vda", "vda", (254, 0));
        let part = sys.device("virtual/block/vda/vda1", "vda1", (254, 1));
        fs::write(part.join("partition"), "1\n").unwrap();
        let lo = sys.device("virtual/block/loop0", "loop0", (7, 0));
        fs::create_dir_all(lo.join("loop")).unwrap();
        fs::write(lo.join("loop/backing_file"), "/data/disk.img\n").unwrap();
        let file_dev = |p: &Path| (p == Path::new("/data/disk.img")).then_some((254, 1));
        let lower = lower_devices_in(sys.root(), (7, 0), &file_dev);
        let names: Vec<(&str, &str, Stacking)> = lower
            .iter()
            .map(|l| (l.name.as_str(), l.dev.as_str(), l.via))
            .collect();
        assert_eq!(
            names,
            [
                ("vda1", "254:1", Stacking::LoopImage),
                ("vda", "254:0", Stacking::LoopImage)
            ]
        );
        // The disk itself sits on nothing; an image on a file system
        // without a block device (tmpfs: major 0) is not followed.
        assert!(lower_devices_in(sys.root(), (254, 0), &file_dev).is_empty());
        assert!(lower_devices_in(sys.root(), (7, 0), &|_| Some((0, 42))).is_empty());
    }

    #[test]
    fn dm_members_are_followed_down_and_listed_once() {
        let sys = FakeSys::new();
        sys.device("virtual/block/vda", "vda", (254, 0));
        sys.device("virtual/block/vdb", "vdb", (254, 16));
        let md = sys.device("virtual/block/md0", "md0", (9, 0));
        let dm = sys.device("virtual/block/dm-0", "dm-0", (253, 0));
        for (upper, members) in [(&md, &["vda", "vdb"][..]), (&dm, &["md0", "vda"][..])] {
            for m in members {
                let slot = upper.join("slaves").join(m);
                fs::create_dir_all(&slot).unwrap();
                let dev = fs::read_to_string(
                    sys.root().join("devices/virtual/block").join(m).join("dev"),
                );
                fs::write(slot.join("dev"), dev.unwrap()).unwrap();
            }
        }
        let lower = lower_devices_in(sys.root(), (253, 0), &|_| None);
        let names: Vec<&str> = lower.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["md0", "vda", "vdb"]);
        assert!(lower.iter().all(|l| l.via == Stacking::Member));
        // A loop (a device listed as its own member) ends.
        let slot = md.join("slaves/dm-0");
        fs::create_dir_all(&slot).unwrap();
        fs::write(slot.join("dev"), "253:0\n").unwrap();
        assert_eq!(lower_devices_in(sys.root(), (253, 0), &|_| None).len(), 3);
    }

    #[test]
    fn user_dev_t_splits_into_major_and_minor() {
        assert_eq!(user_dev_major_minor(0xfe01), (254, 1));
        // Large minors spill into the high bits.
        assert_eq!(
            user_dev_major_minor((259 << 8) | (0x12 << 20) | 0x34),
            (259, 0x1234)
        );
    }
}
