//! Pure functions that turn drained map contents and events into the session
//! model: threads, devices, time series, folded stacks. No kernel access, no
//! files: unit-tested without root.
use std::collections::{BTreeMap, BTreeSet};

use storprof_common::{
    BlockEvent, LOG2_BUCKETS, StackKey, SyscallAcc, SyscallKey, ThreadAcc, WAKE_NO_SYSCALL,
    WakeAcc, WakeKey, is_read_family, is_write_family, log2_bucket, offcpu_state, waker_kind,
};

use crate::session::model::{
    DeviceSeries, DeviceStats, OffCpuNs, ProcessUnwind, SyscallStats, ThreadSeries, ThreadStats,
    WaitGraph, WakeEdge,
};

/// Name of an x86_64 syscall number ("sys_<nr>" when not in the table).
pub fn syscall_name(nr: u32) -> String {
    const NAMES: &[(u32, &str)] = &[
        (0, "read"),
        (1, "write"),
        (2, "open"),
        (3, "close"),
        (4, "stat"),
        (5, "fstat"),
        (6, "lstat"),
        (7, "poll"),
        (8, "lseek"),
        (9, "mmap"),
        (10, "mprotect"),
        (11, "munmap"),
        (12, "brk"),
        (13, "rt_sigaction"),
        (14, "rt_sigprocmask"),
        (15, "rt_sigreturn"),
        (16, "ioctl"),
        (17, "pread64"),
        (18, "pwrite64"),
        (19, "readv"),
        (20, "writev"),
        (21, "access"),
        (22, "pipe"),
        (23, "select"),
        (24, "sched_yield"),
        (25, "mremap"),
        (26, "msync"),
        (28, "madvise"),
        (32, "dup"),
        (33, "dup2"),
        (35, "nanosleep"),
        (39, "getpid"),
        (40, "sendfile"),
        (41, "socket"),
        (42, "connect"),
        (43, "accept"),
        (44, "sendto"),
        (45, "recvfrom"),
        (46, "sendmsg"),
        (47, "recvmsg"),
        (56, "clone"),
        (57, "fork"),
        (58, "vfork"),
        (59, "execve"),
        (60, "exit"),
        (61, "wait4"),
        (62, "kill"),
        (63, "uname"),
        (72, "fcntl"),
        (74, "fsync"),
        (75, "fdatasync"),
        (77, "ftruncate"),
        (78, "getdents"),
        (79, "getcwd"),
        (80, "chdir"),
        (82, "rename"),
        (83, "mkdir"),
        (87, "unlink"),
        (89, "readlink"),
        (96, "gettimeofday"),
        (102, "getuid"),
        (104, "getgid"),
        (110, "getppid"),
        (157, "prctl"),
        (158, "arch_prctl"),
        (186, "gettid"),
        (202, "futex"),
        (217, "getdents64"),
        (218, "set_tid_address"),
        (221, "fadvise64"),
        (228, "clock_gettime"),
        (230, "clock_nanosleep"),
        (231, "exit_group"),
        (232, "epoll_wait"),
        (233, "epoll_ctl"),
        (257, "openat"),
        (262, "newfstatat"),
        (270, "pselect6"),
        (271, "ppoll"),
        (273, "set_robust_list"),
        (281, "epoll_pwait"),
        (284, "eventfd"),
        (290, "eventfd2"),
        (291, "epoll_create1"),
        (293, "pipe2"),
        (295, "preadv"),
        (296, "pwritev"),
        (302, "prlimit64"),
        (318, "getrandom"),
        (319, "memfd_create"),
        (326, "copy_file_range"),
        (327, "preadv2"),
        (328, "pwritev2"),
        (332, "statx"),
        (334, "rseq"),
        (425, "io_uring_setup"),
        (426, "io_uring_enter"),
        (435, "clone3"),
        (437, "openat2"),
        (439, "faccessat2"),
    ];
    match NAMES.binary_search_by_key(&nr, |&(n, _)| n) {
        Ok(i) => NAMES[i].1.to_string(),
        Err(_) => format!("sys_{nr}"),
    }
}

/// `comm` bytes → string.
pub fn comm_string(comm: &[u8]) -> String {
    let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end]).into_owned()
}

fn trim_histogram(hist: &[u64]) -> Vec<u64> {
    let len = hist.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    hist[..len].to_vec()
}

/// Per-thread statistics. `running_ns` is on-CPU time of slices still in
/// progress (not yet accounted by a switch-out); `comm_of` names threads
/// without a switch-out record.
pub fn thread_stats(
    threads: &[ThreadAcc],
    syscalls: &[(SyscallKey, SyscallAcc)],
    samples: &[(StackKey, u64)],
    running_ns: &BTreeMap<u32, u64>,
    comm_of: &dyn Fn(u32, u32) -> String,
) -> Vec<ThreadStats> {
    let mut out: BTreeMap<u32, ThreadStats> = BTreeMap::new();
    fn entry(out: &mut BTreeMap<u32, ThreadStats>, tgid: u32, tid: u32) -> &mut ThreadStats {
        out.entry(tid).or_insert_with(|| ThreadStats {
            pid: tgid,
            tid,
            ..ThreadStats::default()
        })
    }
    for t in threads {
        let s = entry(&mut out, t.tgid, t.tid);
        s.comm = comm_string(&t.comm);
        s.on_cpu_ns = t.on_cpu_ns;
        s.off_cpu_ns = OffCpuNs {
            runnable: t.off_cpu_ns[0],
            sleeping: t.off_cpu_ns[1],
            uninterruptible: t.off_cpu_ns[2],
            other: t.off_cpu_ns[3],
        };
        s.page_cache_misses = t.page_cache_pages;
    }
    let mut sorted: Vec<&(SyscallKey, SyscallAcc)> = syscalls.iter().collect();
    sorted.sort_by_key(|(k, _)| (k.tid, k.nr));
    for (key, acc) in sorted {
        let s = entry(&mut out, key.tgid, key.tid);
        let nr = u64::from(key.nr);
        if is_read_family(nr) {
            s.read_bytes += acc.bytes;
        } else if is_write_family(nr) {
            s.write_bytes += acc.bytes;
        }
        s.syscalls.push(SyscallStats {
            nr: key.nr,
            name: syscall_name(key.nr),
            count: acc.count,
            errors: acc.errors,
            total_ns: acc.total_ns,
            bytes: acc.bytes,
            latency_log2_ns: trim_histogram(&acc.latency_log2_ns),
        });
    }
    for (key, count) in samples {
        let s = entry(&mut out, key.tgid, key.tid);
        if key.kernel_stack >= 0 {
            s.samples_kernel += count;
        } else {
            s.samples_user += count;
        }
    }
    for (tid, extra) in running_ns {
        if let Some(s) = out.get_mut(tid) {
            s.on_cpu_ns += extra;
        }
    }
    for s in out.values_mut() {
        if s.comm.is_empty() {
            s.comm = comm_of(s.pid, s.tid);
        }
        s.syscalls
            .sort_by(|a, b| b.count.cmp(&a.count).then(a.nr.cmp(&b.nr)));
    }
    out.into_values().collect()
}

/// Length of the union of `[start, end)` intervals.
pub fn union_ns(intervals: &mut [(u64, u64)]) -> u64 {
    intervals.sort_unstable();
    let mut total = 0;
    let mut current: Option<(u64, u64)> = None;
    for &(start, end) in intervals.iter() {
        let end = end.max(start);
        match current {
            Some((cs, ce)) if start <= ce => current = Some((cs, ce.max(end))),
            Some((cs, ce)) => {
                total += ce - cs;
                current = Some((start, end));
            }
            None => current = Some((start, end)),
        }
    }
    if let Some((cs, ce)) = current {
        total += ce - cs;
    }
    total
}

/// Direction of a block request from its `rwbs` flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
    Other,
}

pub fn direction(rwbs: &[u8]) -> Direction {
    let text = comm_string(rwbs);
    let op = text.trim_start_matches('F');
    match op.chars().next() {
        Some('R') => Direction::Read,
        Some('W') => Direction::Write,
        _ => Direction::Other,
    }
}

/// Kernel-internal dev_t → (major, minor).
pub fn dev_major_minor(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & 0xfffff)
}

/// Per-device statistics from completed requests. `name_of` maps a dev_t to
/// its kernel name; `traced` is the set of traced tgids.
pub fn device_stats(
    events: &[BlockEvent],
    traced: &BTreeSet<u32>,
    duration_ns: u64,
    name_of: &dyn Fn(u32) -> String,
) -> Vec<DeviceStats> {
    /// Per device: its stats, latency histogram, in-flight intervals.
    type DeviceAcc = (DeviceStats, Vec<u64>, Vec<(u64, u64)>);
    let mut per_dev: BTreeMap<u32, DeviceAcc> = BTreeMap::new();
    for e in events {
        let (stats, hist, intervals) = per_dev.entry(e.dev).or_insert_with(|| {
            let (major, minor) = dev_major_minor(e.dev);
            (
                DeviceStats {
                    name: name_of(e.dev),
                    dev: format!("{major}:{minor}"),
                    ..DeviceStats::default()
                },
                vec![0; LOG2_BUCKETS],
                Vec::new(),
            )
        });
        let bytes = u64::from(e.bytes);
        match direction(&e.rwbs) {
            Direction::Read => {
                stats.read_bytes += bytes;
                stats.read_requests += 1;
                if traced.contains(&e.tgid) {
                    stats.traced_read_bytes += bytes;
                }
            }
            Direction::Write => {
                stats.write_bytes += bytes;
                stats.write_requests += 1;
            }
            Direction::Other => {}
        }
        if e.tgid != 0 && bytes > 0 {
            *stats.by_pid.entry(e.tgid).or_insert(0) += bytes;
        }
        let latency = e.complete_ns.saturating_sub(e.issue_ns);
        hist[log2_bucket(latency)] += 1;
        intervals.push((e.issue_ns, e.complete_ns.max(e.issue_ns)));
    }
    per_dev
        .into_values()
        .map(|(mut stats, hist, mut intervals)| {
            stats.latency_log2_ns = trim_histogram(&hist);
            stats.busy_ns = union_ns(&mut intervals);
            stats.utilization = if duration_ns > 0 {
                (stats.busy_ns as f64 / duration_ns as f64).min(1.0)
            } else {
                0.0
            };
            stats
        })
        .collect()
}

/// Per-device bytes and busy time in buckets of `bucket_ns` from `start_ns`
/// (monotonic clock), `buckets` long.
pub fn device_series(
    events: &[BlockEvent],
    start_ns: u64,
    bucket_ns: u64,
    buckets: usize,
    name_of: &dyn Fn(u32) -> String,
) -> Vec<DeviceSeries> {
    let mut per_dev: BTreeMap<u32, (DeviceSeries, Vec<(u64, u64)>)> = BTreeMap::new();
    for e in events {
        let (series, intervals) = per_dev.entry(e.dev).or_insert_with(|| {
            (
                DeviceSeries {
                    name: name_of(e.dev),
                    read_bytes: vec![0; buckets],
                    write_bytes: vec![0; buckets],
                    busy_ns: vec![0; buckets],
                },
                Vec::new(),
            )
        });
        let bucket = (e.complete_ns.saturating_sub(start_ns) / bucket_ns) as usize;
        let bucket = bucket.min(buckets.saturating_sub(1));
        if buckets > 0 {
            match direction(&e.rwbs) {
                Direction::Read => series.read_bytes[bucket] += u64::from(e.bytes),
                Direction::Write => series.write_bytes[bucket] += u64::from(e.bytes),
                Direction::Other => {}
            }
        }
        intervals.push((e.issue_ns.max(start_ns), e.complete_ns.max(start_ns)));
    }
    per_dev
        .into_values()
        .map(|(mut series, mut intervals)| {
            // Merge, then split each busy interval over the buckets it spans.
            intervals.sort_unstable();
            let mut merged: Vec<(u64, u64)> = Vec::new();
            for (s, e) in intervals {
                match merged.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => merged.push((s, e)),
                }
            }
            for (s, e) in merged {
                let mut t = s;
                while t < e {
                    let b = ((t - start_ns) / bucket_ns) as usize;
                    if b >= buckets {
                        break;
                    }
                    let bucket_end = start_ns + (b as u64 + 1) * bucket_ns;
                    let piece_end = e.min(bucket_end);
                    series.busy_ns[b] += piece_end - t;
                    t = piece_end;
                }
            }
            series
        })
        .collect()
}

/// Cumulative counters of one thread at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CumulativeThread {
    pub tgid: u32,
    pub on_cpu_ns: u64,
    pub read_bytes: u64,
    /// `ThreadAcc::off_cpu_ns`: runnable, sleeping, uninterruptible, other.
    pub off_cpu_ns: [u64; 4],
}

/// Cumulative per-thread counters at one instant, by tid.
pub type ThreadCumulative = BTreeMap<u32, CumulativeThread>;

/// Cumulative counters from map contents (`running_ns`: slices in progress).
pub fn thread_cumulative(
    threads: &[ThreadAcc],
    syscalls: &[(SyscallKey, SyscallAcc)],
    running_ns: &BTreeMap<u32, u64>,
) -> ThreadCumulative {
    let mut out = ThreadCumulative::new();
    let blank = |tgid| CumulativeThread {
        tgid,
        ..CumulativeThread::default()
    };
    for t in threads {
        let e = out.entry(t.tid).or_insert_with(|| blank(t.tgid));
        e.on_cpu_ns += t.on_cpu_ns + running_ns.get(&t.tid).copied().unwrap_or(0);
        for (sum, v) in e.off_cpu_ns.iter_mut().zip(t.off_cpu_ns) {
            *sum += v;
        }
    }
    for (k, acc) in syscalls {
        if is_read_family(u64::from(k.nr)) {
            out.entry(k.tid).or_insert_with(|| blank(k.tgid)).read_bytes += acc.bytes;
        }
    }
    out
}

/// Per-thread series from cumulative snapshots taken at bucket boundaries
/// (snapshot 0 at the start): bucket i = snapshot i+1 − snapshot i.
pub fn thread_series(
    snapshots: &[ThreadCumulative],
    comm_of: &dyn Fn(u32) -> String,
) -> Vec<ThreadSeries> {
    let buckets = snapshots.len().saturating_sub(1);
    let mut tids: BTreeMap<u32, u32> = BTreeMap::new();
    for snap in snapshots {
        for (&tid, c) in snap {
            tids.insert(tid, c.tgid);
        }
    }
    tids.into_iter()
        .map(|(tid, tgid)| {
            let value = |i: usize| snapshots[i].get(&tid).copied().unwrap_or_default();
            let mut series = ThreadSeries {
                pid: tgid,
                tid,
                comm: comm_of(tid),
                ..ThreadSeries::default()
            };
            for i in 0..buckets {
                let (a, b) = (value(i), value(i + 1));
                series
                    .on_cpu_ns
                    .push(b.on_cpu_ns.saturating_sub(a.on_cpu_ns));
                series
                    .read_bytes
                    .push(b.read_bytes.saturating_sub(a.read_bytes));
                let off = |state: usize| b.off_cpu_ns[state].saturating_sub(a.off_cpu_ns[state]);
                series.runnable_ns.push(off(offcpu_state::RUNNABLE));
                series.sleeping_ns.push(off(offcpu_state::SLEEPING));
                series
                    .blocked_io_ns
                    .push(off(offcpu_state::UNINTERRUPTIBLE));
            }
            series
        })
        .collect()
}

/// Cumulative (blocked ns, wake-ups) per wake-up edge at one instant.
pub type WakeCumulative = BTreeMap<WakeKey, (u64, u64)>;

/// Wake-up edges as they are at one instant.
pub fn wake_cumulative(edges: &[(WakeKey, WakeAcc)]) -> WakeCumulative {
    edges
        .iter()
        .map(|(k, acc)| (*k, (acc.blocked_ns, acc.count)))
        .collect()
}

/// Per edge, the buckets in which it grew: (bucket, blocked ns, wake-ups).
pub type WakeSeries = BTreeMap<WakeKey, Vec<(u32, u64, u64)>>;

/// Adds bucket `bucket` (= `now` − `prev`, two cumulative snapshots taken
/// at its boundaries, as for [`thread_series`]) to `series`: only edges
/// with wake-ups in it, so a long recording keeps what changed.
pub fn add_wake_bucket(
    series: &mut WakeSeries,
    prev: &WakeCumulative,
    now: &WakeCumulative,
    bucket: u32,
) {
    for (key, &(ns, n)) in now {
        let (ns0, n0) = prev.get(key).copied().unwrap_or((0, 0));
        if n > n0 {
            series
                .entry(*key)
                .or_default()
                .push((bucket, ns.saturating_sub(ns0), n - n0));
        }
    }
}

/// Name of a `waker_kind`.
pub fn waker_kind_name(kind: u8) -> &'static str {
    match kind {
        waker_kind::TASK => "task",
        waker_kind::HARDIRQ => "hardirq",
        waker_kind::SOFTIRQ => "softirq",
        waker_kind::TIMER => "timer",
        waker_kind::IDLE => "idle",
        _ => "unknown",
    }
}

/// Name of an `offcpu_state` index.
pub fn offcpu_state_name(state: u8) -> &'static str {
    match state as usize {
        offcpu_state::RUNNABLE => "runnable",
        offcpu_state::SLEEPING => "sleeping",
        offcpu_state::UNINTERRUPTIBLE => "uninterruptible",
        _ => "other",
    }
}

/// The wake-up graph from the final edge map. `start_mono_ns` is the
/// recording's start on the probes' clock; `stack_of` gives a waker's
/// frames (outermost first) for its tgid, user and kernel stack ids;
/// `is_traced` tells traced processes.
pub fn wait_graph(
    edges: &[(WakeKey, WakeAcc)],
    series: &WakeSeries,
    start_mono_ns: u64,
    bucket_ns: u64,
    is_traced: &dyn Fn(u32) -> bool,
    stack_of: &mut dyn FnMut(u32, i32, i32) -> Vec<String>,
) -> WaitGraph {
    let seconds = |t: u64| t.saturating_sub(start_mono_ns) as f64 / 1e9;
    let mut out: Vec<WakeEdge> = edges
        .iter()
        .map(|(k, acc)| {
            let task = k.waker_kind == waker_kind::TASK;
            WakeEdge {
                waker_kind: waker_kind_name(k.waker_kind).to_string(),
                waker_pid: k.waker_tgid,
                waker_tid: k.waker_tid,
                waker_comm: comm_string(&acc.waker_comm),
                waker_traced: task && is_traced(k.waker_tgid),
                wakee_pid: k.wakee_tgid,
                wakee_tid: k.wakee_tid,
                wakee_state: offcpu_state_name(k.wakee_state).to_string(),
                syscall: (k.syscall != WAKE_NO_SYSCALL).then(|| syscall_name(u32::from(k.syscall))),
                futex_shared: k.futex_shared != 0,
                blocked_ns: acc.blocked_ns,
                count: acc.count,
                first_s: seconds(acc.first_ns),
                last_s: seconds(acc.last_ns),
                first_blocked_ns: acc.first_blocked_ns,
                waker_stack: stack_of(
                    k.waker_tgid,
                    if task { acc.waker_user_stack } else { -1 },
                    acc.waker_kernel_stack,
                ),
                series: series.get(k).cloned().unwrap_or_default(),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.blocked_ns
            .cmp(&a.blocked_ns)
            .then_with(|| (a.wakee_tid, a.waker_tid).cmp(&(b.wakee_tid, b.waker_tid)))
    });
    WaitGraph {
        bucket_ns,
        edges: out,
    }
}

/// Splits folded stacks whose first frame is `comm` + [`THREAD_MARK`] +
/// `pid/tid` into the per-comm form (`comm;...`) and the per-thread form
/// (`comm;[pid/tid];...`), each sorted with identical stacks merged.
pub fn split_thread_folded(folded: &str) -> (String, String) {
    let mut by_comm: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_thread: BTreeMap<String, u64> = BTreeMap::new();
    for line in folded.lines() {
        let Some((stack, n)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else {
            continue;
        };
        let (first, rest) = stack.split_once(';').unwrap_or((stack, ""));
        let (comm, ids) = first.split_once(THREAD_MARK).unwrap_or((first, "?"));
        let join = |head: String| {
            if rest.is_empty() {
                head
            } else {
                format!("{head};{rest}")
            }
        };
        *by_comm.entry(join(comm.to_string())).or_insert(0) += n;
        *by_thread
            .entry(join(format!("{comm};[{ids}]")))
            .or_insert(0) += n;
    }
    let text = |m: BTreeMap<String, u64>| -> String {
        m.into_iter().map(|(s, n)| format!("{s} {n}\n")).collect()
    };
    (text(by_comm), text(by_thread))
}

/// Separates a thread's comm from its `pid/tid` in the first frame of
/// folded stacks before [`split_thread_folded`].
pub const THREAD_MARK: char = '\u{1f}';

/// Folded stacks (`comm;outer;...;leaf VALUE`), sorted, identical stacks
/// merged. `frames` returns the frames of a key outermost first; values are
/// divided by `divisor` (1 for samples, 1000 for ns → µs) and zero lines dropped.
pub fn fold(
    entries: &[(StackKey, u64)],
    divisor: u64,
    comm_of: &dyn Fn(&StackKey) -> String,
    frames: &mut dyn FnMut(&StackKey) -> Vec<String>,
) -> String {
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for (key, value) in entries {
        let mut parts = vec![comm_of(key).replace([';', ' '], "_")];
        let stack = frames(key);
        if stack.is_empty() {
            parts.push("[no stack]".to_string());
        }
        parts.extend(stack);
        *lines.entry(parts.join(";")).or_insert(0) += value;
    }
    let mut out = String::new();
    for (stack, value) in lines {
        let value = value / divisor.max(1);
        if value > 0 {
            out.push_str(&stack);
            out.push(' ');
            out.push_str(&value.to_string());
            out.push('\n');
        }
    }
    out
}

/// Stack depth distribution per process from (tgid, user depth, stopped
/// early (None: unknown, fp mode), samples) entries.
pub fn process_unwind(entries: &[(u32, u32, Option<bool>, u64)]) -> Vec<ProcessUnwind> {
    let mut per: BTreeMap<u32, ProcessUnwind> = BTreeMap::new();
    for &(tgid, depth, early, n) in entries {
        let p = per.entry(tgid).or_insert_with(|| ProcessUnwind {
            pid: tgid,
            ..ProcessUnwind::default()
        });
        p.samples += n;
        *p.depth_samples.entry(depth).or_insert(0) += n;
        if let Some(early) = early {
            *p.early_stop_samples.get_or_insert(0) += if early { n } else { 0 };
        }
    }
    for p in per.values_mut() {
        let half = p.samples.div_ceil(2);
        let mut seen = 0;
        for (&depth, &n) in &p.depth_samples {
            seen += n;
            if seen >= half {
                p.median_depth = depth;
                break;
            }
        }
        p.early_stop_share = p
            .early_stop_samples
            .filter(|_| p.samples > 0)
            .map(|e| e as f64 / p.samples as f64);
    }
    per.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(tgid: u32, tid: u32, comm: &str, on: u64) -> ThreadAcc {
        let mut c = [0u8; 16];
        c[..comm.len()].copy_from_slice(comm.as_bytes());
        ThreadAcc {
            tgid,
            tid,
            on_cpu_ns: on,
            off_cpu_ns: [1, 2, 3, 4],
            page_cache_pages: 5,
            comm: c,
        }
    }

    fn sys(tgid: u32, tid: u32, nr: u32, count: u64, bytes: u64) -> (SyscallKey, SyscallAcc) {
        let mut acc = SyscallAcc {
            count,
            bytes,
            total_ns: count * 100,
            ..SyscallAcc::ZERO
        };
        acc.latency_log2_ns[6] = count;
        (
            SyscallKey {
                tgid,
                tid,
                nr,
                _pad: 0,
            },
            acc,
        )
    }

    #[test]
    fn threads_join_maps() {
        let threads = [thread(10, 11, "reader", 1000)];
        let syscalls = [
            sys(10, 11, 17, 100, 409600),
            sys(10, 11, 1, 2, 10),
            sys(10, 12, 0, 1, 7),
        ];
        let samples = [(
            StackKey {
                tgid: 10,
                tid: 11,
                user_stack: 1,
                kernel_stack: -1,
            },
            3,
        )];
        let running = BTreeMap::from([(11, 500)]);
        let stats = thread_stats(&threads, &syscalls, &samples, &running, &|_, tid| {
            format!("t{tid}")
        });
        assert_eq!(stats.len(), 2);
        let t = &stats[0];
        assert_eq!((t.pid, t.tid, t.comm.as_str()), (10, 11, "reader"));
        assert_eq!(t.on_cpu_ns, 1500);
        assert_eq!(t.off_cpu_ns.total(), 10);
        assert_eq!(t.read_bytes, 409600);
        assert_eq!(t.write_bytes, 10);
        assert_eq!(t.samples_user, 3);
        assert_eq!(t.page_cache_misses, 5);
        assert_eq!(t.syscalls[0].name, "pread64");
        assert_eq!(t.syscalls[0].count, 100);
        assert_eq!(t.syscalls[0].latency_log2_ns.len(), 7);
        assert_eq!(stats[1].comm, "t12");
        assert_eq!(stats[1].read_bytes, 7);
    }

    #[test]
    fn union_of_intervals() {
        assert_eq!(union_ns(&mut []), 0);
        assert_eq!(union_ns(&mut [(0, 10), (5, 15), (20, 30)]), 25);
        assert_eq!(union_ns(&mut [(20, 30), (0, 100)]), 100);
    }

    fn block(dev: u32, bytes: u32, issue: u64, done: u64, rwbs: &str, tgid: u32) -> BlockEvent {
        let mut r = [0u8; 8];
        r[..rwbs.len()].copy_from_slice(rwbs.as_bytes());
        BlockEvent {
            dev,
            bytes,
            issue_ns: issue,
            complete_ns: done,
            tgid,
            error: 0,
            rwbs: r,
        }
    }

    #[test]
    fn devices_from_events() {
        let vda = 254 << 20;
        let events = [
            block(vda, 4096, 0, 1000, "R", 7),
            block(vda, 8192, 500, 1500, "RA", 8),
            block(vda, 512, 3000, 4000, "WS", 7),
            block(vda, 0, 5000, 5001, "FN", 0),
        ];
        let traced = BTreeSet::from([7]);
        let devs = device_stats(&events, &traced, 10_000, &|_| "vda".into());
        assert_eq!(devs.len(), 1);
        let d = &devs[0];
        assert_eq!(d.dev, "254:0");
        assert_eq!((d.read_bytes, d.read_requests), (12288, 2));
        assert_eq!((d.write_bytes, d.write_requests), (512, 1));
        assert_eq!(d.traced_read_bytes, 4096);
        assert_eq!(d.busy_ns, 1500 + 1000 + 1);
        assert_eq!(d.by_pid.get(&7), Some(&4608));
        assert_eq!(d.latency_log2_ns.iter().sum::<u64>(), 4);
        assert!((d.utilization - 0.2501).abs() < 1e-9);
    }

    #[test]
    fn device_series_splits_busy_time() {
        let events = [
            block(1, 100, 900, 1200, "R", 1),
            block(1, 50, 2100, 2200, "W", 1),
        ];
        let series = device_series(&events, 0, 1000, 3, &|_| "x".into());
        assert_eq!(series[0].read_bytes, vec![0, 100, 0]);
        assert_eq!(series[0].write_bytes, vec![0, 0, 50]);
        assert_eq!(series[0].busy_ns, vec![100, 200, 100]);
    }

    #[test]
    fn thread_series_diffs_snapshots() {
        let c = |on_cpu_ns, read_bytes, sleeping| CumulativeThread {
            tgid: 10,
            on_cpu_ns,
            read_bytes,
            off_cpu_ns: [0, sleeping, 0, 0],
        };
        let s0 = ThreadCumulative::from([(11, c(0, 0, 0))]);
        let s1 = ThreadCumulative::from([(11, c(400, 4096, 100)), (12, c(5, 0, 0))]);
        let s2 = ThreadCumulative::from([(11, c(900, 4096, 700)), (12, c(5, 1, 0))]);
        let series = thread_series(&[s0, s1, s2], &|tid| format!("t{tid}"));
        assert_eq!(series.len(), 2);
        assert_eq!(series[0].on_cpu_ns, vec![400, 500]);
        assert_eq!(series[0].read_bytes, vec![4096, 0]);
        assert_eq!(series[0].sleeping_ns, vec![100, 600]);
        assert_eq!(series[1].on_cpu_ns, vec![5, 0]);
        assert_eq!(series[1].read_bytes, vec![0, 1]);
    }

    fn wake_key(waker_tid: u32, wakee_tid: u32) -> WakeKey {
        WakeKey {
            waker_tgid: 1,
            waker_tid,
            wakee_tgid: 1,
            wakee_tid,
            wakee_state: offcpu_state::SLEEPING as u8,
            waker_kind: waker_kind::TASK,
            syscall: 202,
            futex_shared: 1,
            _pad: [0; 3],
        }
    }

    #[test]
    fn wake_series_keeps_buckets_with_wake_ups() {
        let a = wake_key(2, 3);
        let b = wake_key(3, 2);
        let s0 = WakeCumulative::new();
        let s1 = WakeCumulative::from([(a, (500, 2))]);
        let s2 = WakeCumulative::from([(a, (500, 2)), (b, (70, 1))]);
        let s3 = WakeCumulative::from([(a, (900, 3)), (b, (70, 1))]);
        let mut series = WakeSeries::new();
        for (i, pair) in [s0, s1, s2, s3].windows(2).enumerate() {
            add_wake_bucket(&mut series, &pair[0], &pair[1], i as u32);
        }
        assert_eq!(series[&a], vec![(0, 500, 2), (2, 400, 1)]);
        assert_eq!(series[&b], vec![(1, 70, 1)]);
    }

    #[test]
    fn wait_graph_names_kinds_and_orders_by_blocked_time() {
        let task = wake_key(2, 3);
        let timer = WakeKey {
            waker_tgid: 0,
            waker_tid: 1,
            waker_kind: waker_kind::TIMER,
            syscall: WAKE_NO_SYSCALL,
            futex_shared: 0,
            ..wake_key(0, 3)
        };
        let acc = |blocked_ns, first_ns| WakeAcc {
            blocked_ns,
            count: 4,
            first_ns,
            last_ns: first_ns + 2_000_000_000,
            first_blocked_ns: 10,
            waker_user_stack: 5,
            waker_kernel_stack: 6,
            waker_comm: *b"worker\0\0\0\0\0\0\0\0\0\0",
        };
        let mut asked = Vec::new();
        let graph = wait_graph(
            &[
                (task, acc(100, 1_500_000_000)),
                (timer, acc(900, 1_000_000_000)),
            ],
            &WakeSeries::new(),
            1_000_000_000,
            1_000_000_000,
            &|pid| pid == 1,
            &mut |_, user, kernel| {
                asked.push((user, kernel));
                vec![format!("u{user}"), format!("k{kernel}")]
            },
        );
        assert_eq!(graph.edges.len(), 2);
        let first = &graph.edges[0];
        assert_eq!(first.waker_kind, "timer");
        assert!(!first.waker_traced);
        assert_eq!(first.syscall, None);
        assert_eq!(first.first_s, 0.0);
        let second = &graph.edges[1];
        assert_eq!(second.waker_kind, "task");
        assert!(second.waker_traced);
        assert_eq!(second.syscall.as_deref(), Some("futex"));
        assert!(second.futex_shared);
        assert!(!first.futex_shared);
        assert_eq!(second.waker_comm, "worker");
        assert!((second.first_s - 0.5).abs() < 1e-9);
        assert!((second.last_s - 2.5).abs() < 1e-9);
        // An interrupt's user stack belongs to the task it interrupted.
        assert!(asked.contains(&(-1, 6)), "{asked:?}");
        assert!(asked.contains(&(5, 6)), "{asked:?}");
    }

    #[test]
    fn thread_folded_splits_into_comm_and_thread_forms() {
        let m = THREAD_MARK;
        let folded = format!("w{m}1/2;a;b 3\nw{m}1/3;a;b 4\nw{m}1/3 1\n");
        let (by_comm, by_thread) = split_thread_folded(&folded);
        assert_eq!(by_comm, "w 1\nw;a;b 7\n");
        assert_eq!(by_thread, "w;[1/2];a;b 3\nw;[1/3] 1\nw;[1/3];a;b 4\n");
    }

    #[test]
    fn folds_and_merges() {
        let k = |tid, u| StackKey {
            tgid: 1,
            tid,
            user_stack: u,
            kernel_stack: -1,
        };
        let entries = [(k(1, 1), 2500), (k(2, 1), 600), (k(1, 2), 999)];
        let folded = fold(&entries, 1000, &|_| "my comm".to_string(), &mut |key| {
            if key.user_stack == 1 {
                vec!["main".into(), "leaf".into()]
            } else {
                vec![]
            }
        });
        assert_eq!(folded, "my_comm;main;leaf 3\n");
    }

    #[test]
    fn names_and_directions() {
        assert_eq!(syscall_name(17), "pread64");
        assert_eq!(syscall_name(439), "faccessat2");
        assert_eq!(syscall_name(9999), "sys_9999");
        assert_eq!(direction(b"FWS\0\0\0\0\0"), Direction::Write);
        assert_eq!(direction(b"RM\0\0\0\0\0\0"), Direction::Read);
        assert_eq!(direction(b"D\0\0\0\0\0\0\0"), Direction::Other);
    }

    #[test]
    fn process_unwind_gives_depths_median_and_early_share() {
        let entries = [
            (7, 2, Some(true), 1),
            (7, 5, Some(false), 2),
            (7, 6, Some(false), 1),
            (9, 1, None, 4),
        ];
        let out = process_unwind(&entries);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].pid, 7);
        assert_eq!(out[0].samples, 4);
        assert_eq!(out[0].median_depth, 5);
        assert_eq!(out[0].early_stop_samples, Some(1));
        assert_eq!(out[0].early_stop_share, Some(0.25));
        assert_eq!(out[0].depth_samples.get(&5), Some(&2));
        assert_eq!(out[1].median_depth, 1);
        assert_eq!(out[1].early_stop_samples, None);
        assert_eq!(out[1].early_stop_share, None);
    }
}
