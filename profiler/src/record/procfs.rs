//! What the recorder reads from /proc and /sys: clocks, process trees,
//! thread ids, parents and block device names. Small readers, each
//! returning an empty or `None` answer for a process that is gone.
use super::aggregate;

/// CLOCK_MONOTONIC in ns: the probes' clock (`bpf_ktime_get_ns`).
pub(super) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid timespec out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

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
        .unwrap_or_else(|| format!("{major}:{minor}"))
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
