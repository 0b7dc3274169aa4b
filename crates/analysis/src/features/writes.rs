//! Write features: the writers, their time split, dirty pages.
use super::*;

/// The writers' figures: threads that returned at least
/// `writer_write_fraction` of all write-syscall bytes. Shares are of the
/// writers' summed thread time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriteFeatures {
    /// Write-syscall bytes ≥ `writer_min_write_bytes` and ≥
    /// `write_dominated_factor` × read bytes: the write rules apply.
    pub write_dominated: bool,
    pub writer_threads: usize,
    pub writer_comms: Vec<String>,
    /// Sum of writer thread time (s).
    pub writer_thread_s: f64,
    /// Bytes returned by write-family syscalls of all traced threads.
    pub write_syscall_bytes: u64,
    pub write_syscall_mib_per_s: f64,
    /// fsync/fdatasync/sync_file_range/msync calls of the writers.
    pub writer_sync_calls: u64,
    /// Time inside those calls / writer time.
    pub writer_sync_share: f64,
    /// Off-CPU time in [`WRITEBACK_WAIT_FRAMES`] outside fsync-family calls
    /// / writer time: throttled for dirtying pages, or waiting for pages
    /// under writeback.
    pub writer_writeback_wait_share: f64,
    /// The [`DIRTY_THROTTLE_FRAMES`] part of it.
    pub writer_dirty_throttle_share: f64,
    pub writer_on_cpu_share: f64,
    /// Uninterruptible (D) sleep / writer time.
    pub writer_blocked_io_share: f64,
    /// Of writer CPU samples, the share in user space (None: no samples).
    pub writer_user_share: Option<f64>,
    /// Of writer CPU samples, the share in the kernel write path
    /// ([`WRITE_PATH_FRAMES`]); the rest is making the data.
    pub writer_write_path_share: f64,
    /// Bytes the block devices wrote during the recording, stacked
    /// devices' bytes once (a disk's beyond those of a loop or dm device
    /// on it).
    pub device_write_bytes: u64,
    /// device_write_bytes / write_syscall_bytes (None: nothing written).
    pub device_over_written: Option<f64>,
    /// The device that wrote the most of its own: a disk that only wrote
    /// a loop device's image (or a dm device's blocks) gives way to that
    /// device.
    pub top_write_device: Option<DeviceFeature>,
    /// No fsync-family call, and devices wrote less than
    /// `write_memory_only_device_ratio` of the bytes: the data only reached
    /// memory (the page cache) while recording.
    pub only_in_memory: bool,
    /// Off-CPU time under [`WRITE_SYSCALL_FRAMES`] outside fsync-family
    /// calls and outside [`WRITEBACK_WAIT_FRAMES`] / writer time: blocked
    /// in a write call for another reason (locks, allocation, the device
    /// for a direct write).
    #[serde(default)]
    pub writer_write_other_wait_share: f64,
    /// The writers' time split, from the shares above.
    #[serde(default)]
    pub time_split: WriterTimeSplit,
    /// Each writer thread's own split (sessions with per-thread stacks),
    /// most bytes first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writers: Vec<WriterRow>,
    /// The system's dirty page cache over the recording (None: the session
    /// has no /proc/vmstat series).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dirty: Option<DirtyPages>,
}

/// Where writer time went, as shares of writer thread time. On-CPU time
/// is split by the CPU samples (user space, the kernel write path, the rest
/// of the kernel); blocked time by the off-CPU stacks and syscall times
/// the write rules use. `other_off_cpu` is what is left (sleeping outside
/// these, waiting for a CPU); fsync-family time is the calls' whole time,
/// so the parts can overlap by the CPU time spent inside them and
/// `other_off_cpu` is clamped at 0.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriterTimeSplit {
    pub on_cpu_user: f64,
    /// In the kernel write path (copying data into the page cache).
    pub on_cpu_write_path: f64,
    pub on_cpu_other_kernel: f64,
    /// `writer_write_other_wait_share`.
    pub write_blocked: f64,
    /// `writer_sync_share`.
    pub fsync_blocked: f64,
    /// `writer_writeback_wait_share`: throttled in balance_dirty_pages or
    /// waiting for pages under writeback.
    pub writeback_wait: f64,
    /// `writer_dirty_throttle_share`, the balance_dirty_pages part of it.
    pub dirty_throttle: f64,
    pub other_off_cpu: f64,
}

/// One writer thread and its time split.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriterRow {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub write_bytes: u64,
    /// Thread time (s).
    pub thread_s: f64,
    pub split: WriterTimeSplit,
}

/// Dirty and under-writeback page cache, system-wide, from the session's
/// /proc/vmstat series (MiB).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DirtyPages {
    pub dirty_peak_mib: f64,
    pub dirty_mean_mib: f64,
    pub writeback_peak_mib: f64,
    pub writeback_mean_mib: f64,
    /// Made dirty / written back during the recording.
    pub dirtied_mib: f64,
    pub written_mib: f64,
}

impl DirtyPages {
    /// The figures of a series (None: no buckets).
    pub fn from_series(vm: &storprof_session::model::VmstatSeries) -> Option<Self> {
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let peak = |v: &[u64]| mib(v.iter().copied().max().unwrap_or(0));
        let mean = |v: &[u64]| mib(v.iter().sum::<u64>()) / v.len().max(1) as f64;
        (!vm.dirty_bytes.is_empty()).then(|| Self {
            dirty_peak_mib: peak(&vm.dirty_bytes),
            dirty_mean_mib: mean(&vm.dirty_bytes),
            writeback_peak_mib: peak(&vm.writeback_bytes),
            writeback_mean_mib: mean(&vm.writeback_bytes),
            dirtied_mib: mib(vm.dirtied_bytes.iter().sum()),
            written_mib: mib(vm.written_bytes.iter().sum()),
        })
    }
}

impl WriteFeatures {
    /// Of writer CPU, the share that is not the kernel write path.
    pub fn own_work_share(&self) -> f64 {
        (1.0 - self.writer_write_path_share).clamp(0.0, 1.0)
    }
}

/// Off-CPU time (ns) of `stacks` (µs weights) matching `patterns` but not
/// under any of `outside` frames; kernel frames only.
pub(crate) fn offcpu_ns_outside(stacks: &FoldedStacks, patterns: &[&str], outside: &[&str]) -> f64 {
    let has = |stack: &str, names: &[&str]| {
        stack
            .split(';')
            .skip(1)
            .any(|f| frames::is_kernel_frame(f) && names.iter().any(|p| f.contains(p)))
    };
    stacks
        .stacks
        .iter()
        .filter(|(s, _)| has(s, patterns) && !has(s, outside))
        .map(|(_, n)| *n as f64 * 1e3)
        .sum::<f64>()
        // An empty f64 sum is -0.0; written as "-0.0" in verdict.json.
        + 0.0
}

/// The time figures of a group of writer threads, from their statistics
/// and their stacks (on-CPU samples; off-CPU µs): one computation for the
/// writers together (the write rules' features) and for each writer.
pub(crate) struct WriterTime {
    pub(crate) life_ns: f64,
    pub(crate) sync_calls: u64,
    pub(crate) sync_share: f64,
    pub(crate) writeback_wait_share: f64,
    pub(crate) dirty_throttle_share: f64,
    pub(crate) write_other_wait_share: f64,
    pub(crate) on_cpu_share: f64,
    pub(crate) blocked_io_share: f64,
    pub(crate) user_share: Option<f64>,
    pub(crate) write_path_share: f64,
}

impl WriterTime {
    pub(crate) fn of(
        session: &Session,
        writers: &[&ThreadStats],
        oncpu: &FoldedStacks,
        offcpu: &FoldedStacks,
    ) -> Self {
        let sum =
            |f: &dyn Fn(&ThreadStats) -> u64| writers.iter().map(|w| f(w)).sum::<u64>() as f64;
        let life = sum(&thread_ns);
        let freq = session.info.freq_hz.max(1) as f64;
        let sync_calls = writers
            .iter()
            .flat_map(|w| w.syscalls.iter())
            .filter(|s| is_syscall(s, SYNC_NAMES, SYNC_NRS))
            .map(|s| s.count)
            .sum();
        // Blocked-time sessions add the calls' CPU time (samples inside them).
        let sync_ns = sum(&|w| syscall_ns(w, SYNC_NAMES, SYNC_NRS))
            + if syscall_times_are_blocked_time(session) {
                frames::share_matching(oncpu, SYNC_FRAMES, true) * oncpu.total() as f64 / freq * 1e9
            } else {
                0.0
            };
        let samples_user = sum(&|w| w.samples_user);
        let samples_kernel = sum(&|w| w.samples_kernel);
        let user_share = if samples_user + samples_kernel > 0.0 {
            Some(samples_user / (samples_user + samples_kernel))
        } else {
            frames::kernel_leaf_share(oncpu).map(|k| 1.0 - k)
        };
        let not_write_other: Vec<&str> = SYNC_FRAMES
            .iter()
            .chain(WRITEBACK_WAIT_FRAMES)
            .copied()
            .collect();
        Self {
            life_ns: life,
            sync_calls,
            sync_share: ratio(sync_ns, life),
            writeback_wait_share: ratio(
                offcpu_ns_outside(offcpu, WRITEBACK_WAIT_FRAMES, SYNC_FRAMES),
                life,
            ),
            dirty_throttle_share: ratio(
                offcpu_ns_outside(offcpu, DIRTY_THROTTLE_FRAMES, SYNC_FRAMES),
                life,
            ),
            write_other_wait_share: ratio(
                offcpu_ns_outside(offcpu, WRITE_SYSCALL_FRAMES, &not_write_other),
                life,
            ),
            on_cpu_share: ratio(sum(&|w| w.on_cpu_ns), life),
            blocked_io_share: ratio(sum(&|w| w.off_cpu_ns.uninterruptible), life),
            user_share,
            write_path_share: frames::share_matching(oncpu, WRITE_PATH_FRAMES, true),
        }
    }

    pub(crate) fn split(&self) -> WriterTimeSplit {
        let on_cpu = self.on_cpu_share;
        // No samples: no user share, the on-CPU time stays "other kernel"
        // but for the write path the stacks saw.
        let user = on_cpu * self.user_share.unwrap_or(0.0);
        let write_path = (on_cpu * self.write_path_share).min(on_cpu - user);
        let blocked = self.write_other_wait_share + self.sync_share + self.writeback_wait_share;
        WriterTimeSplit {
            on_cpu_user: user,
            on_cpu_write_path: write_path,
            on_cpu_other_kernel: on_cpu - user - write_path,
            write_blocked: self.write_other_wait_share,
            fsync_blocked: self.sync_share,
            writeback_wait: self.writeback_wait_share,
            dirty_throttle: self.dirty_throttle_share,
            other_off_cpu: (1.0 - on_cpu - blocked).max(0.0),
        }
    }
}

/// Stacks whose first frame (the comm) is one of `comms`.
pub(crate) fn stacks_of_comms(stacks: &FoldedStacks, comms: &BTreeSet<String>) -> FoldedStacks {
    FoldedStacks {
        stacks: stacks
            .stacks
            .iter()
            .filter(|(s, _)| comms.contains(s.split(';').next().unwrap_or("")))
            .cloned()
            .collect(),
    }
}

/// Per-thread stacks (`comm;[pid/tid];...`) of thread `tid`.
pub(crate) fn stacks_of_thread(stacks: &FoldedStacks, pid: u32, tid: u32) -> FoldedStacks {
    let marker = format!("[{pid}/{tid}]");
    FoldedStacks {
        stacks: stacks
            .stacks
            .iter()
            .filter(|(s, _)| s.split(';').nth(1) == Some(marker.as_str()))
            .cloned()
            .collect(),
    }
}

pub(crate) fn extract_writes(
    session: &Session,
    t: &Thresholds,
    app_read_bytes: u64,
) -> WriteFeatures {
    let duration_s = session.duration_s();
    let threads = &session.threads;
    let total_write: u64 = threads.iter().map(|t| t.write_bytes).sum();
    let floor = ((total_write as f64 * t.writer_write_fraction) as u64).max(1);
    let writers: Vec<&ThreadStats> = threads.iter().filter(|t| t.write_bytes >= floor).collect();
    let comms: BTreeSet<String> = writers.iter().map(|w| w.comm.clone()).collect();
    let all = WriterTime::of(
        session,
        &writers,
        &stacks_of_comms(&session.oncpu, &comms),
        &stacks_of_comms(&session.offcpu, &comms),
    );
    // Per writer only with per-thread stacks: the per-comm ones would
    // give every writer of a name the whole group's waits.
    let per_thread_stacks =
        !session.oncpu_threads.stacks.is_empty() || !session.offcpu_threads.stacks.is_empty();
    let mut rows: Vec<WriterRow> = if per_thread_stacks {
        writers
            .iter()
            .map(|w| {
                let time = WriterTime::of(
                    session,
                    &[*w],
                    &stacks_of_thread(&session.oncpu_threads, w.pid, w.tid),
                    &stacks_of_thread(&session.offcpu_threads, w.pid, w.tid),
                );
                WriterRow {
                    pid: w.pid,
                    tid: w.tid,
                    comm: w.comm.clone(),
                    write_bytes: w.write_bytes,
                    thread_s: time.life_ns / 1e9,
                    split: time.split(),
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    rows.sort_by(|a, b| b.write_bytes.cmp(&a.write_bytes).then(a.tid.cmp(&b.tid)));
    let stack = DeviceStack::new(&session.io.devices);
    let device_write_bytes = stack.total(|d| d.write_bytes);
    let top_write_device = stack
        .top(|d| d.write_bytes, &|_| 0)
        .map(|i| stack.feature(i, duration_s));
    let device_over_written =
        (total_write > 0).then(|| device_write_bytes as f64 / total_write as f64);
    let write_dominated = total_write >= t.writer_min_write_bytes
        && total_write as f64 >= t.write_dominated_factor * app_read_bytes as f64;
    WriteFeatures {
        write_dominated,
        writer_threads: writers.len(),
        writer_comms: comms.iter().cloned().collect(),
        writer_thread_s: all.life_ns / 1e9,
        write_syscall_bytes: total_write,
        write_syscall_mib_per_s: mib_per_s(total_write, duration_s),
        writer_sync_calls: all.sync_calls,
        writer_sync_share: all.sync_share,
        writer_writeback_wait_share: all.writeback_wait_share,
        writer_dirty_throttle_share: all.dirty_throttle_share,
        writer_on_cpu_share: all.on_cpu_share,
        writer_blocked_io_share: all.blocked_io_share,
        writer_user_share: all.user_share,
        writer_write_path_share: all.write_path_share,
        device_write_bytes,
        device_over_written,
        top_write_device,
        only_in_memory: write_dominated
            && all.sync_calls == 0
            && device_over_written.is_some_and(|r| r < t.write_memory_only_device_ratio),
        writer_write_other_wait_share: all.write_other_wait_share,
        time_split: all.split(),
        writers: rows,
        dirty: session
            .timeseries
            .as_ref()
            .and_then(|ts| ts.vmstat.as_ref())
            .and_then(DirtyPages::from_series),
    }
}
