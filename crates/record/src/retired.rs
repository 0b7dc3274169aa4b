//! What the maps held for threads that exited: a tick moves their entries
//! out of the kernel maps (so the maps hold live threads only and never
//! fill up under churn) into [`Retired`], kept one by one up to
//! [`RETIRED_THREADS_KEPT`], then folded per name; a snapshot for the
//! session merges them back with the live maps.
use std::collections::BTreeMap;

use storprof_common::{COMM_LEN, StackKey, SyscallAcc, SyscallKey, ThreadAcc, WakeAcc, WakeKey};

use super::aggregate;
use crate::probes::{self, MapSnapshot, RetiredThreads};
use storprof_session::model;

/// What the maps held for threads that exited, merged as they retire.
#[derive(Debug)]
pub(super) struct Retired {
    pub(super) threads: Vec<ThreadAcc>,
    /// Kept compact: a statistic is 368 bytes in the maps, mostly an empty
    /// latency histogram, and a churning workload retires thousands.
    syscalls: Vec<CompactSyscall>,
    pub(super) samples: BTreeMap<StackKey, u64>,
    pub(super) offcpu: BTreeMap<StackKey, u64>,
    pub(super) wake_edges: BTreeMap<WakeKey, WakeAcc>,
    /// Threads retired after the first `kept` are folded into one entry
    /// per name (`comm`), so memory, sessions and each live update stay
    /// bounded however many threads a workload churns through: name →
    /// (the group's tgid: its first member's, synthetic tid).
    groups: BTreeMap<[u8; COMM_LEN], (u32, u32)>,
    group_threads: BTreeMap<u32, ThreadAcc>,
    group_syscalls: BTreeMap<SyscallKey, SyscallAcc>,
    /// Threads folded into groups.
    pub(super) folded: u64,
    /// How many retired threads keep entries of their own.
    kept: usize,
}

impl Default for Retired {
    fn default() -> Self {
        Self::keeping(RETIRED_THREADS_KEPT)
    }
}

impl Retired {
    /// Keeps `kept` retired threads one by one, folds later ones.
    pub(super) fn keeping(kept: usize) -> Self {
        Self {
            threads: Vec::new(),
            syscalls: Vec::new(),
            samples: BTreeMap::new(),
            offcpu: BTreeMap::new(),
            wake_edges: BTreeMap::new(),
            groups: BTreeMap::new(),
            group_threads: BTreeMap::new(),
            group_syscalls: BTreeMap::new(),
            folded: 0,
            kept,
        }
    }

    /// Adds what the maps held for threads just retired; returns the
    /// threads folded into groups: tid → (group tgid, group tid).
    pub(super) fn add(&mut self, moved: RetiredThreads) -> BTreeMap<u32, (u32, u32)> {
        let mut into: BTreeMap<u32, (u32, u32)> = BTreeMap::new();
        for t in moved.threads {
            if self.threads.len() < self.kept {
                self.threads.push(t);
                continue;
            }
            let next_tid = FOLDED_TID_TOP - self.groups.len() as u32;
            let (tgid, tid) = *self.groups.entry(t.comm).or_insert((t.tgid, next_tid));
            into.insert(t.tid, (tgid, tid));
            self.folded += 1;
            let group = self.group_threads.entry(tid).or_insert(ThreadAcc {
                tgid,
                tid,
                comm: t.comm,
                ..ThreadAcc::default()
            });
            group.on_cpu_ns += t.on_cpu_ns;
            for (sum, v) in group.off_cpu_ns.iter_mut().zip(t.off_cpu_ns) {
                *sum += v;
            }
            group.page_cache_pages += t.page_cache_pages;
            group.page_cache_write_pages += t.page_cache_write_pages;
        }
        let folded = |tgid: u32, tid: u32| into.get(&tid).copied().unwrap_or((tgid, tid));
        for (key, acc) in &moved.syscalls {
            match into.get(&key.tid) {
                None => self.syscalls.push(CompactSyscall::from_map(&(*key, *acc))),
                Some(&(tgid, tid)) => {
                    let key = SyscallKey { tgid, tid, ..*key };
                    let merged = probes::merge_syscall_stats(
                        [(key, *acc)]
                            .into_iter()
                            .chain(self.group_syscalls.remove(&key).map(|sum| (key, sum))),
                    );
                    self.group_syscalls.extend(merged);
                }
            }
        }
        let restack = |k: StackKey| {
            let (tgid, tid) = folded(k.tgid, k.tid);
            StackKey { tgid, tid, ..k }
        };
        for (key, n) in moved.samples {
            *self.samples.entry(restack(key)).or_default() += n;
        }
        for (key, ns) in moved.offcpu {
            *self.offcpu.entry(restack(key)).or_default() += ns;
        }
        for (key, acc) in moved.wake_edges {
            let (waker_tgid, waker_tid) = folded(key.waker_tgid, key.waker_tid);
            let (wakee_tgid, wakee_tid) = folded(key.wakee_tgid, key.wakee_tid);
            let key = WakeKey {
                waker_tgid,
                waker_tid,
                wakee_tgid,
                wakee_tid,
                ..key
            };
            aggregate::add_wake_edge(&mut self.wake_edges, key, acc);
        }
        into
    }

    /// `live` (a snapshot of the maps) with the retired threads added;
    /// entries with one key (a tid reused) are summed.
    pub(super) fn merged_with(&self, live: MapSnapshot) -> MapSnapshot {
        let sum = |retired: &BTreeMap<StackKey, u64>, live: Vec<(StackKey, u64)>| {
            let mut all = retired.clone();
            for (key, n) in live {
                *all.entry(key).or_default() += n;
            }
            all.into_iter().collect()
        };
        let mut threads = self.threads.clone();
        threads.extend(self.group_threads.values().copied());
        threads.extend(live.threads);
        MapSnapshot {
            threads,
            syscalls: probes::merge_syscall_stats(
                self.syscalls
                    .iter()
                    .map(CompactSyscall::to_map)
                    .chain(self.group_syscalls.iter().map(|(k, v)| (*k, *v)))
                    .chain(live.syscalls),
            ),
            samples: sum(&self.samples, live.samples),
            offcpu: sum(&self.offcpu, live.offcpu),
            oncpu_start: live.oncpu_start,
            slots_read_ns: live.slots_read_ns,
        }
    }
}

/// A syscall statistic with only the non-empty buckets of its histogram.
#[derive(Debug)]
struct CompactSyscall {
    key: SyscallKey,
    count: u64,
    errors: u64,
    total_ns: u64,
    bytes: u64,
    /// (bucket, calls) of the buckets with calls.
    latency: Box<[(u8, u64)]>,
}

impl CompactSyscall {
    fn from_map((key, acc): &(SyscallKey, SyscallAcc)) -> Self {
        Self {
            key: *key,
            count: acc.count,
            errors: acc.errors,
            total_ns: acc.total_ns,
            bytes: acc.bytes,
            latency: acc
                .latency_log2_ns
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .filter_map(|(b, n)| Some((u8::try_from(b).ok()?, *n)))
                .collect(),
        }
    }

    fn to_map(&self) -> (SyscallKey, SyscallAcc) {
        let mut acc = SyscallAcc {
            count: self.count,
            errors: self.errors,
            total_ns: self.total_ns,
            bytes: self.bytes,
            ..SyscallAcc::ZERO
        };
        for &(bucket, n) in self.latency.iter() {
            if let Some(slot) = acc.latency_log2_ns.get_mut(usize::from(bucket)) {
                *slot = n;
            }
        }
        (self.key, acc)
    }
}

/// Retired threads kept one by one before later ones are folded per name.
/// A training job's loaders (even workers re-forked every epoch) stay far
/// below; a workload forking 100 processes a second reaches it in a minute.
pub(super) const RETIRED_THREADS_KEPT: usize = 8192;
/// Folded groups get tids from here down: above any `pid_max` (2^22).
const FOLDED_TID_TOP: u32 = u32::MAX - 1;
const _: () = assert!(model::is_folded_group(FOLDED_TID_TOP - (1 << 20)));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_retired_past_the_kept_ones_fold_into_one_entry_per_name() {
        let thread = |tgid: u32, tid: u32, name: &str, on: u64| {
            let mut comm = [0u8; COMM_LEN];
            comm[..name.len()].copy_from_slice(name.as_bytes());
            ThreadAcc {
                tgid,
                tid,
                on_cpu_ns: on,
                comm,
                ..ThreadAcc::default()
            }
        };
        let read = |tgid: u32, tid: u32, count: u64| {
            (
                SyscallKey {
                    tgid,
                    tid,
                    nr: 0,
                    _pad: 0,
                },
                SyscallAcc {
                    count,
                    ..SyscallAcc::ZERO
                },
            )
        };
        let stack = |tgid: u32, tid: u32| StackKey {
            tgid,
            tid,
            user_stack: 3,
            kernel_stack: -1,
        };
        let edge_from = |tgid: u32, tid: u32| WakeKey {
            waker_tgid: tgid,
            waker_tid: tid,
            wakee_tgid: 1,
            wakee_tid: 1,
            ..WakeKey::default()
        };
        let wake = WakeAcc {
            count: 2,
            blocked_ns: 10,
            ..WakeAcc::default()
        };
        let mut retired = Retired::keeping(1);
        retired.add(RetiredThreads {
            threads: vec![
                thread(10, 10, "worker", 5),
                thread(11, 11, "worker", 7),
                thread(12, 12, "worker", 9),
                thread(13, 13, "reaper", 1),
            ],
            syscalls: vec![read(10, 10, 1), read(11, 11, 2), read(12, 12, 3)],
            samples: vec![(stack(11, 11), 4), (stack(12, 12), 6)],
            offcpu: Vec::new(),
            wake_edges: vec![(edge_from(11, 11), wake), (edge_from(12, 12), wake)],
        });
        // 10 is kept as it is; 11 and 12 fold into one "worker", 13 into "reaper".
        assert_eq!(retired.folded, 3);
        let merged = retired.merged_with(MapSnapshot::default());
        assert_eq!(merged.threads.len(), 3);
        assert_eq!(merged.threads[0].tid, 10);
        let worker = merged
            .threads
            .iter()
            .find(|t| t.tid > 10 && t.comm.starts_with(b"worker"))
            .copied()
            .unwrap_or_default();
        assert_eq!((worker.tgid, worker.on_cpu_ns), (11, 16));
        assert!(worker.tid > 1 << 22);
        let group_reads: Vec<u64> = merged
            .syscalls
            .iter()
            .filter(|(k, _)| k.tid == worker.tid)
            .map(|(_, a)| a.count)
            .collect();
        assert_eq!(group_reads, vec![5]);
        assert_eq!(
            merged.samples,
            vec![(stack(11, worker.tid), 10)],
            "the group's samples under its own key"
        );
        let edges: Vec<_> = retired.wake_edges.iter().collect();
        assert_eq!(edges.len(), 1);
        assert_eq!((edges[0].0.waker_tid, edges[0].1.count), (worker.tid, 4));
    }

    #[test]
    fn a_compact_syscall_statistic_gives_back_the_one_it_was_made_of() {
        let mut acc = SyscallAcc {
            count: 9,
            errors: 1,
            total_ns: 12_345,
            bytes: 4 << 20,
            ..SyscallAcc::ZERO
        };
        acc.latency_log2_ns[3] = 2;
        acc.latency_log2_ns[39] = 7;
        let key = SyscallKey {
            tgid: 5,
            tid: 6,
            nr: 17,
            _pad: 0,
        };
        let compact = CompactSyscall::from_map(&(key, acc));
        assert_eq!(compact.latency.len(), 2);
        assert_eq!(compact.to_map(), (key, acc));
    }
}
