//! Per-thread figures from the thread and syscall maps: CPU and off-CPU
//! time, samples, syscalls with their latency histograms, bytes.
use std::collections::BTreeMap;

use storprof_common::{
    StackKey, SyscallAcc, SyscallKey, ThreadAcc, is_read_family, is_write_family,
};

use super::{comm_string, syscall_name, trim_histogram};
use storprof_session::model::{OffCpuNs, SyscallStats, ThreadStats};

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
        // Two entries for one tid: a thread retired at its exit and a
        // later one with its tid. Their figures add up.
        s.comm = comm_string(&t.comm);
        s.on_cpu_ns += t.on_cpu_ns;
        s.off_cpu_ns = OffCpuNs {
            runnable: s.off_cpu_ns.runnable + t.off_cpu_ns[0],
            sleeping: s.off_cpu_ns.sleeping + t.off_cpu_ns[1],
            uninterruptible: s.off_cpu_ns.uninterruptible + t.off_cpu_ns[2],
            other: s.off_cpu_ns.other + t.off_cpu_ns[3],
        };
        s.page_cache_misses += t.page_cache_pages;
        s.page_cache_write_pages += t.page_cache_write_pages;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::test_data::{sys, thread};

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
        assert_eq!(t.page_cache_write_pages, 6);
        assert_eq!(t.syscalls[0].name, "pread64");
        assert_eq!(t.syscalls[0].count, 100);
        assert_eq!(t.syscalls[0].latency_log2_ns.len(), 7);
        assert_eq!(stats[1].comm, "t12");
        assert_eq!(stats[1].read_bytes, 7);
    }
}
