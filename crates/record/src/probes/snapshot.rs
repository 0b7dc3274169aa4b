//! Reading the maps back at one instant: per-thread accumulators, syscall
//! and stack counts, the wake-up edges, the slots of threads on a CPU;
//! and retiring the entries of threads that ended.
use super::*;

/// Everything read back from the maps at one instant.
#[derive(Clone, Debug, Default)]
pub struct MapSnapshot {
    pub threads: Vec<ThreadAcc>,
    pub syscalls: Vec<(SyscallKey, SyscallAcc)>,
    pub samples: Vec<(StackKey, u64)>,
    pub offcpu: Vec<(StackKey, u64)>,
    /// tid → (switch-in time, off-CPU slot) for threads possibly on a CPU
    /// now, read so that they and `threads` agree ([`consistent_slots`]).
    pub oncpu_start: BTreeMap<u32, (u64, OffCpuStart)>,
    /// CLOCK_MONOTONIC just before `oncpu_start` was read (0: unknown). A
    /// thread it shows on a CPU was there from its switch-in until at
    /// least this instant, so its slice in progress is counted up to here.
    pub slots_read_ns: u64,
}

/// Tries at reading a thread's slots and accumulator between two of its
/// context switches.
const SLOT_READ_TRIES: usize = 3;

/// Threads' accumulators, their on-CPU slots by tid, and when the slots
/// were read ([`MapSnapshot`]'s fields of the same names).
type ThreadsWithSlots = (Vec<ThreadAcc>, BTreeMap<u32, (u64, OffCpuStart)>, u64);

/// A thread's switch-in time, off-CPU slot and accumulator as one
/// consistent triple. They are separate map reads. A thread switched in
/// between them (a sleeper woken) would pair its switch-in time from
/// before the sleep with the cleared off-CPU slot of the new slice: "on a
/// CPU since before the sleep". A thread switched out between them (an
/// exiting thread's last switch) would show its slot closed and an
/// accumulator read before that slice was added: the slice counted
/// nowhere. So the accumulator is read between two reads of the slots,
/// and when a slot moved the three are read again; a thread that keeps
/// switching gets no switch-in time (0): its slice is not counted as in
/// progress, only later at its switch-out, which never counts a sleep as
/// time on a CPU.
pub fn consistent_slots<A>(
    mut read_on: impl FnMut() -> Option<u64>,
    mut read_off: impl FnMut() -> Option<OffCpuStart>,
    mut read_acc: impl FnMut() -> Option<A>,
) -> Option<(u64, OffCpuStart, Option<A>)> {
    for _ in 0..SLOT_READ_TRIES {
        let on = read_on()?;
        let off = read_off()?;
        let acc = read_acc();
        if read_on()? == on && read_off()?.ts == off.ts {
            return Some((on, off, acc));
        }
    }
    let off = read_off()?;
    Some((0, off, read_acc()))
}

/// The accumulators read with the slots replace those of the map's walk
/// (same tids), which may be older than the slots.
fn with_fresh_accs(
    threads: Vec<ThreadAcc>,
    fresh: impl IntoIterator<Item = ThreadAcc>,
) -> Vec<ThreadAcc> {
    let mut by_tid: BTreeMap<u32, ThreadAcc> = threads.into_iter().map(|t| (t.tid, t)).collect();
    by_tid.extend(fresh.into_iter().map(|t| (t.tid, t)));
    by_tid.into_values().collect()
}

impl ProbeSet {
    /// Reads the accumulating maps. `tids_of_interest` selects which per-tid
    /// on-CPU slots to read (threads that may be running right now).
    /// The per-thread maps only (threads, syscalls, and the on-CPU slots of
    /// their tids and of `more_tids`): what the time series needs each
    /// second, without walking the stack maps.
    pub fn thread_snapshot(&self, more_tids: &[u32]) -> Result<MapSnapshot, ProbeError> {
        let threads_map: HashMap<_, u32, ThreadAcc> = self.hash("THREADS")?;
        let threads: Vec<ThreadAcc> = self.thread_accs()?;
        let syscalls = self.syscall_stats()?;
        let tids: std::collections::BTreeSet<u32> = threads
            .iter()
            .map(|t| t.tid)
            .chain(syscalls.iter().map(|(k, _)| k.tid))
            .chain(more_tids.iter().copied())
            .collect();
        let (threads, oncpu_start, slots_read_ns) =
            self.threads_with_slots(&threads_map, threads, tids)?;
        Ok(MapSnapshot {
            threads,
            syscalls,
            oncpu_start,
            slots_read_ns,
            ..MapSnapshot::default()
        })
    }

    pub fn snapshot(&self, tids_of_interest: &[u32]) -> Result<MapSnapshot, ProbeError> {
        let threads_map: HashMap<_, u32, ThreadAcc> = self.hash("THREADS")?;
        let threads = self.thread_accs()?;
        let syscalls = self.syscall_stats()?;
        let samples = self.hash_entries("SAMPLES")?;
        let offcpu = self.hash_entries("OFFCPU_STACKS")?;
        let (threads, oncpu_start, slots_read_ns) =
            self.threads_with_slots(&threads_map, threads, tids_of_interest.iter().copied())?;
        Ok(MapSnapshot {
            threads,
            syscalls,
            samples,
            offcpu,
            oncpu_start,
            slots_read_ns,
        })
    }

    /// The on-CPU slots of `tids`, each read with its accumulator
    /// ([`consistent_slots`]); `walked` (the walk of `THREADS`) with those
    /// accumulators in place of its own, which may be older than the
    /// slots; and the instant just before the reads.
    fn threads_with_slots(
        &self,
        threads_map: &HashMap<&MapData, u32, ThreadAcc>,
        walked: Vec<ThreadAcc>,
        tids: impl IntoIterator<Item = u32>,
    ) -> Result<ThreadsWithSlots, ProbeError> {
        let oncpu: Array<_, u64> = self.array("ONCPU_START")?;
        let offstart: Array<_, OffCpuStart> = self.array("OFFCPU_START")?;
        let slots_read_ns = monotonic_ns();
        let mut oncpu_start = BTreeMap::new();
        let mut fresh = Vec::new();
        for tid in tids {
            if let Some((on, off, acc)) = consistent_slots(
                || oncpu.get(&tid, 0).ok(),
                || offstart.get(&tid, 0).ok(),
                || threads_map.get(&tid, 0).ok(),
            ) {
                oncpu_start.insert(tid, (on, off));
                fresh.extend(acc);
            }
        }
        Ok((with_fresh_accs(walked, fresh), oncpu_start, slots_read_ns))
    }

    /// Moves everything the maps hold for `tids` (threads that exited a
    /// while ago: nothing writes their entries any more) out of the maps:
    /// thread accumulators, syscall statistics (the thread slot is freed
    /// for a later thread), stack counts, and the wake-up edges they are
    /// either end of. Without this the maps fill up under process churn
    /// and later threads go uncounted.
    pub fn retire_threads(&mut self, tids: &BTreeSet<u32>) -> Result<RetiredThreads, ProbeError> {
        let mut out = RetiredThreads::default();
        if tids.is_empty() {
            return Ok(out);
        }
        let mut threads: HashMap<_, u32, ThreadAcc> = self.hash_mut("THREADS")?;
        for &tid in tids {
            if let Ok(acc) = threads.get(&tid, 0) {
                out.threads.push(acc);
                let _ = threads.remove(&tid);
            }
        }
        self.retire_syscall_slots(tids, &mut out.syscalls)?;
        self.take_matching(
            "SYSCALLS",
            |k: &SyscallKey| tids.contains(&k.tid),
            &mut out.syscalls,
        )?;
        self.take_matching(
            "SAMPLES",
            |k: &StackKey| tids.contains(&k.tid),
            &mut out.samples,
        )?;
        self.take_matching(
            "OFFCPU_STACKS",
            |k: &StackKey| tids.contains(&k.tid),
            &mut out.offcpu,
        )?;
        if self.attached(family::WAKEUPS) {
            self.take_matching(
                "WAKE_EDGES",
                |k: &WakeKey| tids.contains(&k.waker_tid) || tids.contains(&k.wakee_tid),
                &mut out.wake_edges,
            )?;
        }
        Ok(out)
    }

    /// Empties the syscall thread slots that `tids` own, into `out`: the
    /// statistics are zeroed and the (slot, nr) index cleared before the
    /// owner entry goes, so the next thread to claim the slot starts clean.
    fn retire_syscall_slots(
        &mut self,
        tids: &BTreeSet<u32>,
        out: &mut Vec<(SyscallKey, SyscallAcc)>,
    ) -> Result<(), ProbeError> {
        let owned: Vec<(u32, u32)> = {
            let owners: HashMap<_, u32, u32> = self.hash("SYSCALL_SLOT_OWNER")?;
            tids.iter()
                .map(|&tid| (tid, tid % SYSCALL_THREAD_SLOTS))
                .filter(|&(tid, slot)| owners.get(&slot, 0).ok() == Some(tid))
                .map(|(_, slot)| slot)
                .filter_map(|slot| {
                    let used = self
                        .array::<u32>("SYSCALL_SLOT_USED")
                        .ok()?
                        .get(&slot, 0)
                        .ok()?;
                    Some((slot, used.min(SYSCALL_SLOT_ENTRIES)))
                })
                .collect()
        };
        for (slot, used) in owned {
            let base = slot * SYSCALL_SLOT_ENTRIES;
            let keys: Vec<SyscallKey> = self.array_values("SYSCALL_POOL_KEY", base, used)?;
            let accs: Vec<SyscallAcc> = self.array_values("SYSCALL_POOL", base, used)?;
            let zeroed: Vec<(u32, SyscallAcc)> = (base..)
                .zip(&accs)
                .map(|(entry, _)| (entry, SyscallAcc::ZERO))
                .collect();
            let unindexed: Vec<(u32, u32)> = keys
                .iter()
                .filter(|key| key.nr < SYSCALL_NR_SLOTS)
                .map(|key| (slot * SYSCALL_NR_SLOTS + key.nr, 0))
                .collect();
            out.extend(keys.into_iter().zip(accs));
            self.array_set("SYSCALL_POOL", &zeroed)?;
            let _ = self.array_set("SYSCALL_INDEX", &unindexed);
            let mut used_map: Array<_, u32> = self.array_mut("SYSCALL_SLOT_USED")?;
            let _ = used_map.set(slot, 0, 0);
            let mut owners: HashMap<_, u32, u32> = self.hash_mut("SYSCALL_SLOT_OWNER")?;
            let _ = owners.remove(&slot);
        }
        Ok(())
    }

    /// Every thread's accumulator in `THREADS`.
    fn thread_accs(&self) -> Result<Vec<ThreadAcc>, ProbeError> {
        let entries: Vec<(u32, ThreadAcc)> = self.hash_entries("THREADS")?;
        Ok(entries.into_iter().map(|(_, acc)| acc).collect())
    }

    /// Moves the entries of the hash map `name` whose key matches into
    /// `out`. Keys are listed first (deleting while walking would restart
    /// the walk), and each value is read again as it is deleted.
    fn take_matching<K: aya::Pod + Ord, V: aya::Pod>(
        &mut self,
        name: &'static str,
        matches: impl Fn(&K) -> bool,
        out: &mut Vec<(K, V)>,
    ) -> Result<(), ProbeError> {
        let keys: Vec<K> = self
            .hash_entries::<K, V>(name)?
            .into_iter()
            .map(|(key, _)| key)
            .filter(|key| matches(key))
            .collect();
        let mut map: HashMap<_, K, V> = self.hash_mut(name)?;
        for key in keys {
            if let Ok(value) = map.get(&key, 0) {
                out.push((key, value));
            }
            let _ = map.remove(&key);
        }
        Ok(())
    }

    /// Per-thread per-syscall statistics: the array regions of the claimed
    /// thread slots merged with the hash-map fallback.
    fn syscall_stats(&self) -> Result<Vec<(SyscallKey, SyscallAcc)>, ProbeError> {
        let owners: Vec<(u32, u32)> = self.hash_entries("SYSCALL_SLOT_OWNER")?;
        let used: Array<_, u32> = self.array("SYSCALL_SLOT_USED")?;
        let mut pooled = Vec::new();
        for (slot, _) in owners {
            let in_use = used.get(&slot, 0).unwrap_or(0).min(SYSCALL_SLOT_ENTRIES);
            let first = slot * SYSCALL_SLOT_ENTRIES;
            let keys: Vec<SyscallKey> = self.array_values("SYSCALL_POOL_KEY", first, in_use)?;
            let accs: Vec<SyscallAcc> = self.array_values("SYSCALL_POOL", first, in_use)?;
            pooled.extend(keys.into_iter().zip(accs));
        }
        let hashed: Vec<(SyscallKey, SyscallAcc)> = self.hash_entries("SYSCALLS")?;
        Ok(merge_syscall_stats(pooled.into_iter().chain(hashed)))
    }

    /// The wake-up edges summed so far (empty when the family did not attach).
    pub fn wake_edges(&self) -> Result<Vec<(WakeKey, WakeAcc)>, ProbeError> {
        if !self.attached(family::WAKEUPS) {
            return Ok(Vec::new());
        }
        self.hash_entries("WAKE_EDGES")
    }

    /// Frames (instruction pointers, leaf first) of a stack id.
    pub fn stack(&self, id: i32) -> Vec<u64> {
        let Ok(id) = u32::try_from(id) else {
            return Vec::new();
        };
        // A poisoned lock only means a panic elsewhere; the cache holds
        // whole entries either way.
        let mut cache = self
            .stack_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(known) = cache.get(&id) {
            return known.to_vec();
        }
        let Some(map) = self.ebpf.map("STACK_FRAMES") else {
            return Vec::new();
        };
        let Ok(stacks) = HashMap::<_, u32, StackFrames>::try_from(map) else {
            return Vec::new();
        };
        match stacks.get(&id, 0) {
            Ok(stack) => {
                let frames = stack.frames();
                if !frames.is_empty() {
                    cache.insert(id, std::sync::Arc::from(frames));
                }
                frames.to_vec()
            }
            Err(_) => Vec::new(),
        }
    }

    /// `MISSED_SWITCH_INS` summed over CPUs.
    pub fn missed_switch_ins(&self) -> u64 {
        self.ebpf
            .map("MISSED_SWITCH_INS")
            .and_then(|map| PerCpuArray::<_, u64>::try_from(map).ok())
            .and_then(|array| array.get(&0, 0).ok())
            .map_or(0, |values| values.iter().sum())
    }

    /// Drop counters summed over CPUs, by name.
    pub fn lost_events(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        let Some(map) = self.ebpf.map("LOST") else {
            return out;
        };
        let Ok(array) = PerCpuArray::<_, u64>::try_from(map) else {
            return out;
        };
        for (i, name) in lost::NAMES.iter().enumerate() {
            let total = array
                .get(&(i as u32), 0)
                .map(|values| values.iter().sum())
                .unwrap_or(0);
            out.insert((*name).to_string(), total);
        }
        for (name, program) in self.ebpf.programs() {
            let Ok(fd) = program.fd() else { continue };
            let fd = std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(fd));
            let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"));
            if let Some(missed) = info.ok().as_deref().and_then(recursion_misses)
                && missed > 0
            {
                out.insert(format!("skipped:{name}"), missed);
            }
        }
        out
    }
}

/// `recursion_misses` of a BPF program's `/proc/self/fdinfo` text: the
/// runs the kernel skipped because the program fired while another ran on
/// the same CPU (for classic tracepoints and perf events: any other such
/// program; for raw tracepoints: itself).
fn recursion_misses(fdinfo: &str) -> Option<u64> {
    fdinfo.lines().find_map(|line| {
        line.strip_prefix("recursion_misses:")
            .and_then(|v| v.trim().parse().ok())
    })
}

/// What [`ProbeSet::retire_threads`] moved out of the maps.
#[derive(Clone, Debug, Default)]
pub struct RetiredThreads {
    pub threads: Vec<ThreadAcc>,
    pub syscalls: Vec<(SyscallKey, SyscallAcc)>,
    pub samples: Vec<(StackKey, u64)>,
    pub offcpu: Vec<(StackKey, u64)>,
    pub wake_edges: Vec<(WakeKey, WakeAcc)>,
}

/// Sums entries with the same key (a tid reused during the recording, or a
/// thread whose calls went partly to the fallback map), ordered by key.
pub fn merge_syscall_stats(
    entries: impl IntoIterator<Item = (SyscallKey, SyscallAcc)>,
) -> Vec<(SyscallKey, SyscallAcc)> {
    let mut merged: BTreeMap<SyscallKey, SyscallAcc> = BTreeMap::new();
    for (key, acc) in entries {
        let slot = merged.entry(key).or_insert(SyscallAcc::ZERO);
        slot.count += acc.count;
        slot.errors += acc.errors;
        slot.total_ns += acc.total_ns;
        slot.bytes += acc.bytes;
        for (sum, add) in slot.latency_log2_ns.iter_mut().zip(acc.latency_log2_ns) {
            *sum += add;
        }
    }
    merged.into_iter().collect()
}

#[cfg(test)]
mod tests {

    #[test]
    fn recursion_misses_from_fdinfo() {
        let text = "pos:\t0\nflags:\t02000002\nprog_type:\t5\nrun_cnt:\t0\nrecursion_misses:\t17\nverified_insns:\t99\n";
        assert_eq!(recursion_misses(text), Some(17));
        assert_eq!(recursion_misses("prog_type:\t5\n"), None);
    }

    use super::*;

    /// A reader that returns `values` one call after another (the last one
    /// again when they run out).
    fn reads<T: Copy>(values: &[T]) -> impl FnMut() -> Option<T> + '_ {
        let mut next = 0;
        move || {
            let v = values.get(next).or(values.last()).copied();
            next += 1;
            v
        }
    }

    fn off(ts: u64) -> OffCpuStart {
        OffCpuStart {
            ts,
            ..OffCpuStart::default()
        }
    }

    #[test]
    fn a_sleeper_woken_between_its_two_slot_reads_is_not_paired_with_its_old_switch_in() {
        // Switched in at 100, asleep since 200: the first switch-in read
        // sees 100; it is woken at 900 before the slot read, which sees the
        // new slice (ts 0); the second switch-in read sees 900. Taken as
        // read first, it would be on a CPU since 100, its sleep included.
        let got = consistent_slots(
            reads(&[100, 900, 900, 900]),
            reads(&[off(0)]),
            reads(&[7u64]),
        );
        assert_eq!(got, Some((900, off(0), Some(7))));
        // Asleep through both reads: its open off-CPU slot is kept.
        let got = consistent_slots(reads(&[100, 100]), reads(&[off(200)]), reads(&[7u64]));
        assert_eq!(got, Some((100, off(200), Some(7))));
    }

    #[test]
    fn a_slice_ended_between_the_reads_is_in_the_accumulator_read_with_the_slots() {
        // On a CPU since 100 (its on-CPU total 50 before that slice); it
        // switches out for good at 400, after the first slot reads and
        // the accumulator read (which still says 50): taken as read, the
        // slot says off-CPU and the accumulator lacks 100..400. Read
        // again, the accumulator has the slice.
        let got = consistent_slots(
            reads(&[100]),
            reads(&[off(0), off(400), off(400), off(400)]),
            reads(&[50u64, 350]),
        );
        assert_eq!(got, Some((100, off(400), Some(350))));
    }

    #[test]
    fn a_thread_switched_in_at_every_try_has_no_slice_in_progress() {
        let got = consistent_slots(
            reads(&[1, 2, 3, 4, 5, 6, 7]),
            reads(&[off(0)]),
            reads(&[9u64]),
        );
        assert_eq!(got, Some((0, off(0), Some(9))));
        // An unreadable slot is no triple at all; a thread without an
        // accumulator still has its slots.
        assert_eq!(
            consistent_slots(reads(&[1, 1]), || None, reads(&[9u64])),
            None
        );
        let got = consistent_slots(reads(&[1, 1]), reads(&[off(0)]), || None::<u64>);
        assert_eq!(got, Some((1, off(0), None)));
    }

    #[test]
    fn accumulators_read_with_the_slots_replace_those_of_the_walk() {
        let acc = |tid, on_cpu_ns| ThreadAcc {
            tid,
            on_cpu_ns,
            ..ThreadAcc::default()
        };
        let got = with_fresh_accs(vec![acc(3, 10), acc(1, 5)], [acc(3, 12), acc(4, 1)]);
        let got: Vec<(u32, u64)> = got.iter().map(|t| (t.tid, t.on_cpu_ns)).collect();
        assert_eq!(got, [(1, 5), (3, 12), (4, 1)]);
    }

    fn acc(count: u64, bytes: u64, bucket: usize) -> SyscallAcc {
        let mut a = SyscallAcc {
            count,
            bytes,
            total_ns: count * 10,
            ..SyscallAcc::ZERO
        };
        a.latency_log2_ns[bucket] = count;
        a
    }

    #[test]
    fn merges_pool_and_fallback_entries_of_one_key() {
        let key = |tid, nr| SyscallKey {
            tgid: 7,
            tid,
            nr,
            _pad: 0,
        };
        let merged = merge_syscall_stats([
            (key(8, 17), acc(3, 1536, 9)),
            (key(7, 0), acc(1, 10, 4)),
            (key(8, 17), acc(2, 1024, 10)),
        ]);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].0, key(7, 0));
        let (k, a) = merged[1];
        assert_eq!(k, key(8, 17));
        assert_eq!((a.count, a.bytes, a.total_ns), (5, 2560, 50));
        assert_eq!(a.latency_log2_ns[9], 3);
        assert_eq!(a.latency_log2_ns[10], 2);
    }
}
