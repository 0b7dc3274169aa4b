//! io.json: block devices (reads, writes, latency, what they sit on), the
//! cgroup's read limit and the page cache.
use super::*;

/// `io.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct IoStats {
    pub devices: Vec<DeviceStats>,
    pub page_cache: PageCacheStats,
}

/// One block device, whole-system (the block layer does not know the process
/// reliably); `by_pid` attributes each request to the process that created it
/// (`block_io_start`), or to the issuing one when the creation was not seen.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceStats {
    /// Kernel name ("vda", "nvme0n1", "loop3").
    pub name: String,
    /// "MAJ:MIN".
    pub dev: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_requests: u64,
    pub write_requests: u64,
    /// Issue → complete latency, log2 ns buckets (every request: reads,
    /// writes, flushes, discards).
    #[serde(default)]
    pub latency_log2_ns: Vec<u64>,
    /// The same for reads and for writes only (empty in sessions recorded
    /// before they were split).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_latency_log2_ns: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_latency_log2_ns: Vec<u64>,
    /// Reads' creation → issue, log2 ns buckets: time in the plug and the
    /// I/O scheduler's queue, after any cgroup throttle (which holds bios
    /// before a request exists). Empty before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_queue_log2_ns: Vec<u64>,
    /// Time with at least one request in flight, ns.
    pub busy_ns: u64,
    /// busy_ns / recording duration (0..1).
    #[serde(default)]
    pub utilization: f64,
    /// Bytes read by request issued in a traced process's context.
    #[serde(default)]
    pub traced_read_bytes: u64,
    /// pid → bytes (read + write) for requests issued in that pid's context.
    #[serde(default)]
    pub by_pid: BTreeMap<u32, u64>,
    /// The devices this one sits on, nearest first, read from sysfs at the
    /// end of the recording: a loop device's image file's device (and that
    /// partition's whole disk, and on down), a dm/md device's members
    /// (`slaves/`). Their requests carry this device's bytes again. Empty
    /// for a disk, and in sessions recorded before it was read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sits_on: Vec<LowerDevice>,
}

/// A device under another one ([`DeviceStats::sits_on`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LowerDevice {
    /// Kernel name ("vda", "nvme0n1p2"), or "MAJ:MIN" when it has none.
    pub name: String,
    /// "MAJ:MIN".
    pub dev: String,
    /// How the upper device reaches it (the first step down from it).
    pub via: Stacking,
}

/// How a device sits on the devices under it.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Stacking {
    /// A loop device: its image file lives on the lower device.
    LoopImage,
    /// A dm or md device: the lower device is one of its members.
    Member,
    /// A kind a newer storprof recorded.
    #[default]
    #[serde(other)]
    Other,
}

/// Page-cache activity of the traced processes.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PageCacheStats {
    /// Pages added to the page cache by traced processes outside
    /// write-family syscalls (read misses). Sessions recorded before
    /// buffered writes' pages were counted apart include those here.
    pub misses_pages: u64,
    /// Pages traced processes' buffered writes added to the page cache
    /// (absent: none, or a session recorded before they were counted apart).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub write_pages: u64,
    /// Page size used to turn pages into bytes.
    pub page_size: u64,
}
