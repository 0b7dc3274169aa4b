//! The figures a finding rests on: their keys, values and units (the words
//! are the report crate's).

/// A figure a finding rests on: its key, value and unit are fixed here, its
/// words come from `output::wording`. Values are unrounded (verdict.json
/// rounds them to 4 decimals).
#[derive(Clone, Debug, PartialEq)]
pub enum Figure {
    ReaderOnCpu {
        threads: usize,
        share: f64,
    },
    /// On CPU, plus runnable when the command does not oversubscribe the CPUs.
    ReaderCpuDemand {
        share: f64,
    },
    ReaderUser {
        share: f64,
    },
    /// Own work of reader CPU; `read_amplification` from the bench, when any.
    ReaderOwnWork {
        share: f64,
        read_amplification: Option<f64>,
    },
    /// A hot category of reader CPU samples.
    HotCategory {
        name: String,
        share: f64,
    },
    DeviceReadRate {
        device: String,
        mib_per_s: f64,
    },
    DeviceUtilization {
        device: String,
        utilization: f64,
    },
    DeviceLatencyP50 {
        device: String,
        us: f64,
    },
    /// Reads' median time from creation to dispatch (plug, I/O scheduler)
    /// beside their median time on the device.
    DeviceReadSplit {
        device: String,
        queue_us: f64,
        device_us: f64,
    },
    ReaderBlockedIo {
        share: f64,
    },
    ReaderReadSyscall {
        share: f64,
    },
    /// The share of storage waits a FUSE daemon's replies ended, and the
    /// daemon that answered most.
    FsDaemonReplies {
        comm: String,
        pid: u32,
        share: f64,
    },
    PageCacheHitRatio {
        hit: f64,
        read_mib: f64,
        storage_mib: f64,
    },
    ReaderCacheCopyCpu {
        share: f64,
    },
    BenchAu {
        percentage: f64,
        expected: f64,
    },
    ConsumerSleep {
        comm: String,
        share: f64,
    },
    ReaderSleeping {
        share: f64,
    },
    ReaderRunnable {
        share: f64,
    },
    BusyThreads(u32),
    NumCpus(u32),
    CpuDemandThreads(f64),
    CpusUsed(f64),
    ReaderFutex {
        share: f64,
    },
    ReaderReclaim {
        share: f64,
    },
    OomKilled,
    ReaderSocketRecv {
        share: f64,
    },
    /// Readers waiting for CPython's GIL.
    ReaderGil {
        share: f64,
    },
    /// A Python function running in the interpreter (holding the GIL): its
    /// share of reader CPU samples.
    GilHolder {
        function: String,
        share: f64,
    },
    /// Seconds without a read or a hand-off, up to the end of the data.
    NoProgress {
        seconds: f64,
        /// No hand-off between traced threads either (a blocked stall).
        handoffs_too: bool,
    },
    /// A thread a stall is stuck on.
    StalledThread {
        comm: String,
        tid: u32,
        state: String,
        seconds: f64,
    },
    WriterOnCpu {
        threads: usize,
        share: f64,
    },
    /// Of writer CPU, the share outside the kernel write path.
    WriterOwnWork {
        share: f64,
    },
    WriterSync {
        share: f64,
        calls: u64,
    },
    WriterWritebackWait {
        share: f64,
    },
    WriterDirtyThrottle {
        share: f64,
    },
    WriterBlockedIo {
        share: f64,
    },
    /// Device write bytes / write-syscall bytes.
    WrittenReachedDevice {
        ratio: f64,
        written_mib: f64,
        device_mib: f64,
    },
    DeviceWriteRate {
        device: String,
        mib_per_s: f64,
    },
    /// The consumer's own time in its window (neither compute nor data
    /// wait) and what it wrote.
    ConsumerOwnTime {
        comm: String,
        share: f64,
        written_mib: f64,
    },
    /// Of that own time, the share in uninterruptible (D) waits.
    ConsumerOwnIo {
        share: f64,
    },
    /// The consumer's data wait, as a share of its window.
    ConsumerDataWaitShare {
        share: f64,
    },
}

impl Figure {
    /// The stable key in verdict.json.
    pub fn key(&self) -> String {
        match self {
            Self::ReaderOnCpu { .. } => "reader_on_cpu_share",
            Self::ReaderCpuDemand { .. } => "reader_cpu_demand_share",
            Self::ReaderUser { .. } => "reader_user_share",
            Self::ReaderOwnWork { .. } => "reader_own_work_share",
            Self::HotCategory { name, .. } => return format!("hot:{name}"),
            Self::DeviceReadRate { .. } => "device_read_mib_per_s",
            Self::DeviceUtilization { .. } => "device_utilization",
            Self::DeviceLatencyP50 { .. } => "device_latency_p50_us",
            Self::DeviceReadSplit { .. } => "device_read_queue_p50_us",
            Self::ReaderBlockedIo { .. } => "reader_blocked_io_share",
            Self::ReaderReadSyscall { .. } => "reader_read_syscall_share",
            Self::FsDaemonReplies { .. } => "fuse_reply_share",
            Self::PageCacheHitRatio { .. } => "page_cache_hit_ratio",
            Self::ReaderCacheCopyCpu { .. } => "reader_cache_copy_cpu_share",
            Self::BenchAu { .. } => "bench_au_percentage",
            Self::ConsumerSleep { .. } => "consumer_sleep_share",
            Self::ReaderSleeping { .. } => "reader_sleeping_share",
            Self::ReaderRunnable { .. } => "reader_runnable_share",
            Self::BusyThreads(_) => "busy_threads",
            Self::NumCpus(_) => "num_cpus",
            Self::CpuDemandThreads(_) => "cpu_demand_threads",
            Self::CpusUsed(_) => "cpus_used",
            Self::ReaderFutex { .. } => "reader_futex_share",
            Self::ReaderReclaim { .. } => "reader_reclaim_share",
            Self::OomKilled => "oom_killed",
            Self::ReaderSocketRecv { .. } => "reader_socket_recv_share",
            Self::ReaderGil { .. } => "reader_gil_share",
            Self::GilHolder { function, .. } => return format!("gil_holder:{function}"),
            Self::NoProgress { .. } => "no_progress_s",
            Self::StalledThread { tid, .. } => return format!("stalled_thread:{tid}"),
            Self::WriterOnCpu { .. } => "writer_on_cpu_share",
            Self::WriterOwnWork { .. } => "writer_own_work_share",
            Self::WriterSync { .. } => "writer_sync_share",
            Self::WriterWritebackWait { .. } => "writer_writeback_wait_share",
            Self::WriterDirtyThrottle { .. } => "writer_dirty_throttle_share",
            Self::WriterBlockedIo { .. } => "writer_blocked_io_share",
            Self::WrittenReachedDevice { .. } => "device_over_written",
            Self::DeviceWriteRate { .. } => "device_write_mib_per_s",
            Self::ConsumerOwnTime { .. } => "consumer_own_share",
            Self::ConsumerOwnIo { .. } => "consumer_own_io_share",
            Self::ConsumerDataWaitShare { .. } => "consumer_data_wait_share",
        }
        .to_string()
    }

    pub fn value(&self) -> f64 {
        match self {
            Self::ReaderOnCpu { share, .. }
            | Self::ReaderCpuDemand { share }
            | Self::ReaderUser { share }
            | Self::ReaderOwnWork { share, .. }
            | Self::HotCategory { share, .. }
            | Self::ReaderBlockedIo { share }
            | Self::ReaderReadSyscall { share }
            | Self::FsDaemonReplies { share, .. }
            | Self::ReaderCacheCopyCpu { share }
            | Self::ConsumerSleep { share, .. }
            | Self::ReaderSleeping { share }
            | Self::ReaderRunnable { share }
            | Self::ReaderFutex { share }
            | Self::ReaderReclaim { share }
            | Self::ReaderSocketRecv { share }
            | Self::ReaderGil { share }
            | Self::GilHolder { share, .. }
            | Self::WriterOnCpu { share, .. }
            | Self::WriterOwnWork { share }
            | Self::WriterSync { share, .. }
            | Self::WriterWritebackWait { share }
            | Self::WriterDirtyThrottle { share }
            | Self::WriterBlockedIo { share }
            | Self::ConsumerOwnTime { share, .. }
            | Self::ConsumerOwnIo { share }
            | Self::ConsumerDataWaitShare { share } => *share,
            Self::WrittenReachedDevice { ratio, .. } => *ratio,
            Self::DeviceWriteRate { mib_per_s, .. } => *mib_per_s,
            Self::DeviceReadRate { mib_per_s, .. } => *mib_per_s,
            Self::DeviceUtilization { utilization, .. } => *utilization,
            Self::DeviceLatencyP50 { us, .. } => *us,
            Self::DeviceReadSplit { queue_us, .. } => *queue_us,
            Self::PageCacheHitRatio { hit, .. } => *hit,
            Self::BenchAu { percentage, .. } => *percentage,
            Self::BusyThreads(n) | Self::NumCpus(n) => f64::from(*n),
            Self::CpuDemandThreads(x) | Self::CpusUsed(x) => *x,
            Self::OomKilled => 1.0,
            Self::NoProgress { seconds, .. } | Self::StalledThread { seconds, .. } => *seconds,
        }
    }

    pub fn unit(&self) -> &'static str {
        match self {
            Self::DeviceReadRate { .. } | Self::DeviceWriteRate { .. } => "MiB/s",
            Self::DeviceLatencyP50 { .. } | Self::DeviceReadSplit { .. } => "us",
            Self::BenchAu { .. } => "%",
            Self::BusyThreads(_) | Self::CpuDemandThreads(_) => "threads",
            Self::NumCpus(_) | Self::CpusUsed(_) => "cpus",
            Self::OomKilled => "bool",
            Self::NoProgress { .. } | Self::StalledThread { .. } => "s",
            _ => "fraction",
        }
    }
}
