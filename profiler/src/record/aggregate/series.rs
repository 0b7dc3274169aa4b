//! The per-thread time series: cumulative snapshots taken once a second,
//! differenced into per-bucket figures.
use std::collections::BTreeMap;

use storprof_common::{SyscallAcc, SyscallKey, ThreadAcc, is_read_family, offcpu_state};

use crate::session::model::ThreadSeries;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
