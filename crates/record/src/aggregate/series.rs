//! The per-thread time series: cumulative snapshots taken once a second,
//! differenced into per-bucket figures.
use std::collections::BTreeMap;

use storprof_common::{SyscallAcc, SyscallKey, ThreadAcc, is_read_family, offcpu_state};

use storprof_session::model::ThreadSeries;

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

/// Per-thread series built one cumulative snapshot at a time, stored
/// sparse: each thread keeps values from its first active bucket to its
/// last, so memory follows activity rather than threads × seconds, and a
/// thread gone from the maps (retired at exit) costs nothing more.
#[derive(Debug, Default)]
pub struct SeriesBuilder {
    /// The cumulative counters at the last snapshot.
    last: ThreadCumulative,
    /// Snapshots taken so far (buckets = snapshots − 1).
    snapshots: u32,
    threads: BTreeMap<u32, SparseThread>,
    /// Series of threads gone from the maps (retired at exit): their tid
    /// may come back for a later thread (pid_max is 32,768 on many hosts,
    /// so a churning workload reuses tids within minutes), which gets a
    /// series of its own rather than one spanning the gap.
    ended: Vec<(u32, SparseThread)>,
    /// Series of threads folded into one per name (as the recorder folds
    /// their map entries past the first few thousand), by the group's
    /// synthetic tid: a workload that churns threads for hours keeps a
    /// bounded number of series.
    groups: BTreeMap<u32, SparseThread>,
}

#[derive(Debug)]
struct SparseThread {
    tgid: u32,
    first_bucket: u32,
    /// Per bucket from `first_bucket`: on-CPU, read bytes, runnable,
    /// sleeping, blocked on I/O.
    values: Vec<[u64; 5]>,
}

impl SparseThread {
    /// Adds `other`'s values bucket by bucket, widening the span to cover
    /// both.
    fn absorb(&mut self, other: &SparseThread) {
        if other.values.is_empty() {
            return;
        }
        if self.values.is_empty() {
            self.first_bucket = other.first_bucket;
        } else if other.first_bucket < self.first_bucket {
            let shift = (self.first_bucket - other.first_bucket) as usize;
            self.values.splice(0..0, std::iter::repeat_n([0; 5], shift));
            self.first_bucket = other.first_bucket;
        }
        let offset = (other.first_bucket - self.first_bucket) as usize;
        let end = offset + other.values.len();
        if self.values.len() < end {
            self.values.resize(end, [0; 5]);
        }
        for (sum, value) in self.values[offset..end].iter_mut().zip(&other.values) {
            for (s, v) in sum.iter_mut().zip(value) {
                *s += v;
            }
        }
    }
}

impl SeriesBuilder {
    /// Buckets closed so far.
    pub fn buckets(&self) -> u32 {
        self.snapshots.saturating_sub(1)
    }

    /// Closes a bucket at `now` (the first call sets the baseline). A
    /// thread missing from `now` adds nothing and its series ends; one that
    /// shows up again (a reused tid) starts a new series from zero.
    pub fn push(&mut self, now: ThreadCumulative) {
        for tid in self.last.keys() {
            if !now.contains_key(tid)
                && let Some(series) = self.threads.remove(tid)
            {
                self.ended.push((*tid, series));
            }
        }
        if self.snapshots > 0 {
            let bucket = self.snapshots - 1;
            for (&tid, b) in &now {
                let a = self.last.get(&tid).copied().unwrap_or_default();
                let off = |state: usize| b.off_cpu_ns[state].saturating_sub(a.off_cpu_ns[state]);
                let delta = [
                    b.on_cpu_ns.saturating_sub(a.on_cpu_ns),
                    b.read_bytes.saturating_sub(a.read_bytes),
                    off(offcpu_state::RUNNABLE),
                    off(offcpu_state::SLEEPING),
                    off(offcpu_state::UNINTERRUPTIBLE),
                ];
                if delta == [0; 5] {
                    continue;
                }
                let t = self.threads.entry(tid).or_insert_with(|| SparseThread {
                    tgid: b.tgid,
                    first_bucket: bucket,
                    values: Vec::new(),
                });
                t.tgid = b.tgid;
                let index = (bucket - t.first_bucket) as usize;
                if t.values.len() <= index {
                    t.values.resize(index + 1, [0; 5]);
                }
                t.values[index] = delta;
            }
        }
        self.last = now;
        self.snapshots = self.snapshots.saturating_add(1);
    }

    /// Moves the series of thread `tid` (gone from the maps: its entries
    /// were folded into group `group_tid` of process `group_tgid`) into
    /// that group's series. A tid without a series (never active) adds
    /// nothing.
    pub fn fold_thread(&mut self, tid: u32, group_tgid: u32, group_tid: u32) {
        let Some(series) = self.threads.remove(&tid) else {
            return;
        };
        self.groups
            .entry(group_tid)
            .or_insert_with(|| SparseThread {
                tgid: group_tgid,
                first_bucket: series.first_bucket,
                values: Vec::new(),
            })
            .absorb(&series);
    }

    /// The series of every thread that was ever active, by tid (a reused
    /// tid: its earlier threads first), then the folded groups'.
    pub fn series(&self, comm_of: &dyn Fn(u32) -> String) -> Vec<ThreadSeries> {
        let mut all: Vec<(u32, &SparseThread)> = self
            .ended
            .iter()
            .map(|(tid, t)| (*tid, t))
            .chain(self.threads.iter().map(|(tid, t)| (*tid, t)))
            .chain(self.groups.iter().map(|(tid, t)| (*tid, t)))
            .collect();
        all.sort_by_key(|(tid, t)| (*tid, t.first_bucket));
        all.into_iter()
            .map(|(tid, t)| {
                let column = |i: usize| t.values.iter().map(|v| v[i]).collect::<Vec<u64>>();
                ThreadSeries {
                    pid: t.tgid,
                    tid,
                    comm: comm_of(tid),
                    first_bucket: t.first_bucket,
                    on_cpu_ns: column(0),
                    read_bytes: column(1),
                    runnable_ns: column(2),
                    sleeping_ns: column(3),
                    blocked_io_ns: column(4),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_diff_snapshots_and_store_only_active_buckets() {
        let c = |on_cpu_ns, read_bytes, sleeping| CumulativeThread {
            tgid: 10,
            on_cpu_ns,
            read_bytes,
            off_cpu_ns: [0, sleeping, 0, 0],
        };
        let s0 = ThreadCumulative::from([(11, c(0, 0, 0))]);
        let s1 = ThreadCumulative::from([(11, c(400, 4096, 100)), (12, c(5, 0, 0))]);
        let s2 = ThreadCumulative::from([(11, c(900, 4096, 700)), (12, c(5, 1, 0))]);
        // Thread 11 exits (retired: gone from the maps); 13 starts late.
        let s3 = ThreadCumulative::from([(12, c(5, 1, 0)), (13, c(7, 0, 0))]);
        let s4 = ThreadCumulative::from([(12, c(9, 1, 0)), (13, c(7, 0, 0))]);
        let mut builder = SeriesBuilder::default();
        for s in [s0, s1, s2, s3, s4] {
            builder.push(s);
        }
        assert_eq!(builder.buckets(), 4);
        let series = builder.series(&|tid| format!("t{tid}"));
        assert_eq!(series.len(), 3);
        assert_eq!((series[0].tid, series[0].first_bucket), (11, 0));
        assert_eq!(series[0].on_cpu_ns, vec![400, 500]);
        assert_eq!(series[0].read_bytes, vec![4096, 0]);
        assert_eq!(series[0].sleeping_ns, vec![100, 600]);
        // 12: active in buckets 0, 1 and 3; the idle bucket 2 is filled in.
        assert_eq!(
            (series[1].first_bucket, series[1].comm.as_str()),
            (0, "t12")
        );
        assert_eq!(series[1].on_cpu_ns, vec![5, 0, 0, 4]);
        assert_eq!(series[1].read_bytes, vec![0, 1, 0, 0]);
        // 13: one value, at bucket 2 (its first snapshot counts from zero).
        assert_eq!(
            (series[2].first_bucket, series[2].on_cpu_ns.clone()),
            (2, vec![7])
        );
        assert_eq!(series[2].on_cpu().at(2), 7);
        assert_eq!(series[2].on_cpu().at(3), 0);
        assert_eq!(series[1].on_cpu().sum(1, 4), 4);
        assert_eq!(series[1].end_bucket(), 4);
    }

    #[test]
    fn folded_threads_sum_into_one_group_series_spanning_all_of_them() {
        let c = |on_cpu_ns| CumulativeThread {
            tgid: 10,
            on_cpu_ns,
            ..CumulativeThread::default()
        };
        let mut builder = SeriesBuilder::default();
        builder.push(ThreadCumulative::new());
        // Thread 21 runs in buckets 0-1, thread 22 in 2-3, thread 23 in 1;
        // all three are in the maps until they retire, after the last tick.
        builder.push(ThreadCumulative::from([(21, c(10)), (23, c(0))]));
        builder.push(ThreadCumulative::from([(21, c(30)), (23, c(5))]));
        builder.push(ThreadCumulative::from([
            (21, c(30)),
            (22, c(7)),
            (23, c(5)),
        ]));
        builder.push(ThreadCumulative::from([
            (21, c(30)),
            (22, c(8)),
            (23, c(5)),
        ]));
        // 22 folds first; 23's and then 21's values start before the
        // group's first bucket. 24 was never active.
        builder.fold_thread(22, 10, 900);
        builder.fold_thread(23, 10, 900);
        builder.fold_thread(21, 10, 900);
        builder.fold_thread(24, 10, 900);
        let series = builder.series(&|tid| format!("t{tid}"));
        assert_eq!(series.len(), 1, "{series:?}");
        let group = &series[0];
        assert_eq!(
            (group.pid, group.tid, group.comm.as_str()),
            (10, 900, "t900")
        );
        assert_eq!(group.first_bucket, 0);
        assert_eq!(group.on_cpu_ns, vec![10, 25, 7, 1]);
    }

    #[test]
    fn a_reused_tid_gets_a_series_of_its_own() {
        let c = |tgid, on_cpu_ns| CumulativeThread {
            tgid,
            on_cpu_ns,
            ..CumulativeThread::default()
        };
        let mut builder = SeriesBuilder::default();
        builder.push(ThreadCumulative::new());
        builder.push(ThreadCumulative::from([(7, c(1, 50))]));
        // Thread 7 retired; 98 idle buckets later a new process gets tid 7.
        for _ in 0..98 {
            builder.push(ThreadCumulative::new());
        }
        builder.push(ThreadCumulative::from([(7, c(2, 30))]));
        let series = builder.series(&|_| String::new());
        assert_eq!(series.len(), 2);
        assert_eq!((series[0].pid, series[0].first_bucket), (1, 0));
        assert_eq!(series[0].on_cpu_ns, vec![50]);
        assert_eq!((series[1].pid, series[1].first_bucket), (2, 99));
        assert_eq!(
            series[1].on_cpu_ns,
            vec![30],
            "not 100 values across the gap"
        );
    }
}
