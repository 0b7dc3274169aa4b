//! timeseries.json: per-bucket series of each thread, device, the host's
//! CPU and the page cache's dirty pages.
use super::*;

/// `timeseries.json`: 1-second buckets from `start_unix_ns`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TimeSeries {
    pub bucket_ns: u64,
    pub start_unix_ns: u64,
    /// Buckets in the recording (0 in sessions written before thread
    /// series were stored sparse: the longest series gives it).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub buckets: u32,
    /// One series per thread: on-CPU ns and read-syscall bytes per bucket.
    pub threads: Vec<ThreadSeries>,
    /// One series per device: bytes per bucket.
    pub devices: Vec<DeviceSeries>,
    /// System-wide dirty and writeback page cache per bucket (absent in
    /// sessions recorded before it was sampled, or where /proc/vmstat
    /// could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmstat: Option<VmstatSeries>,
    /// The machine's CPU time per bucket, every process's and the
    /// kernel's (absent in sessions recorded before it was sampled, or
    /// where /proc/stat could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu: Option<HostCpuSeries>,
}

/// `/proc/stat`'s first line once per bucket: CPU time summed over the
/// machine's CPUs during the bucket, ns. Traced threads are part of
/// `busy_ns`; what is left of it is untraced (other processes, storprof
/// itself, kernel threads, interrupts).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostCpuSeries {
    /// user + nice + system + irq + softirq.
    pub busy_ns: Vec<u64>,
    /// Time a hypervisor ran something else while a CPU of this machine
    /// wanted to run: CPU the job could not have.
    pub steal_ns: Vec<u64>,
    /// idle + iowait.
    pub idle_ns: Vec<u64>,
}

/// `/proc/vmstat` once per bucket, system-wide (the page cache is shared:
/// writeback of other processes' files counts too). Gauges are read at
/// each bucket's end; counters are the bucket's increase. Bytes are pages
/// × the page size.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct VmstatSeries {
    /// `nr_dirty`: page cache waiting to be written back.
    pub dirty_bytes: Vec<u64>,
    /// `nr_writeback`: page cache being written back (I/O in flight).
    pub writeback_bytes: Vec<u64>,
    /// Increase of `nr_dirtied`: pages made dirty during the bucket.
    pub dirtied_bytes: Vec<u64>,
    /// Increase of `nr_written`: pages written back during the bucket.
    pub written_bytes: Vec<u64>,
}

impl TimeSeries {
    /// Buckets in the recording: the stored count, or where the longest
    /// series ends.
    pub fn bucket_count(&self) -> usize {
        self.threads
            .iter()
            .map(ThreadSeries::end_bucket)
            .chain(self.devices.iter().map(|d| d.read_bytes.len()))
            .chain(std::iter::once(self.buckets as usize))
            .max()
            .unwrap_or(0)
    }
}

/// One thread's counters per bucket. Stored sparse: the vectors cover
/// buckets `first_bucket ..` up to the thread's last active bucket (a
/// thread that lived two seconds of a twelve-hour recording stores two
/// values, not 43,200); read them through [`Buckets`].
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ThreadSeries {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// The bucket of each vector's first value.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub first_bucket: u32,
    pub on_cpu_ns: Vec<u64>,
    pub read_bytes: Vec<u64>,
    /// Off-CPU time per bucket by state, accounted when the thread comes
    /// back on a CPU (format 2 on; empty before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runnable_ns: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sleeping_ns: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_io_ns: Vec<u64>,
}

impl ThreadSeries {
    fn view<'a>(&self, values: &'a [u64]) -> Buckets<'a> {
        Buckets {
            first: self.first_bucket as usize,
            values,
        }
    }
    pub fn on_cpu(&self) -> Buckets<'_> {
        self.view(&self.on_cpu_ns)
    }
    pub fn read(&self) -> Buckets<'_> {
        self.view(&self.read_bytes)
    }
    pub fn runnable(&self) -> Buckets<'_> {
        self.view(&self.runnable_ns)
    }
    pub fn sleeping(&self) -> Buckets<'_> {
        self.view(&self.sleeping_ns)
    }
    pub fn blocked_io(&self) -> Buckets<'_> {
        self.view(&self.blocked_io_ns)
    }
    /// One past the last bucket any of its vectors covers.
    pub fn end_bucket(&self) -> usize {
        let longest = [
            &self.on_cpu_ns,
            &self.read_bytes,
            &self.runnable_ns,
            &self.sleeping_ns,
            &self.blocked_io_ns,
        ]
        .iter()
        .map(|v| v.len())
        .max()
        .unwrap_or(0);
        self.first_bucket as usize + longest
    }
}

/// One counter of a [`ThreadSeries`] by absolute bucket index: buckets
/// outside the stored range are 0.
#[derive(Clone, Copy, Debug)]
pub struct Buckets<'a> {
    pub first: usize,
    pub values: &'a [u64],
}

impl Buckets<'_> {
    /// The value of bucket `i`.
    pub fn at(&self, i: usize) -> u64 {
        i.checked_sub(self.first)
            .and_then(|j| self.values.get(j))
            .copied()
            .unwrap_or(0)
    }
    /// The sum over buckets `b0..b1`.
    pub fn sum(&self, b0: usize, b1: usize) -> u64 {
        let lo = b0.saturating_sub(self.first).min(self.values.len());
        let hi = b1.saturating_sub(self.first).min(self.values.len());
        self.values[lo..hi.max(lo)].iter().sum()
    }
    /// The sum over every bucket.
    pub fn total(&self) -> u64 {
        self.values.iter().sum()
    }
    /// The first bucket with a non-zero value.
    pub fn first_nonzero(&self) -> Option<usize> {
        self.values
            .iter()
            .position(|&v| v > 0)
            .map(|j| j + self.first)
    }
    /// The last bucket with a non-zero value.
    pub fn last_nonzero(&self) -> Option<usize> {
        self.values
            .iter()
            .rposition(|&v| v > 0)
            .map(|j| j + self.first)
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceSeries {
    pub name: String,
    pub read_bytes: Vec<u64>,
    pub write_bytes: Vec<u64>,
    #[serde(default)]
    pub busy_ns: Vec<u64>,
}
