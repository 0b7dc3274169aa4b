//! Devices: their figures, the stacking of one on another (loop, dm, md), and
//! a cgroup's read limit on them.
use super::*;

/// One block device's figures over the recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceFeature {
    pub name: String,
    pub read_bytes: u64,
    pub read_mib_per_s: f64,
    pub read_requests: u64,
    /// Bytes the device wrote (whole device: writeback runs in kernel
    /// threads, not in the writer).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub write_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub write_mib_per_s: f64,
    /// Busy time / duration (0..1).
    pub utilization: f64,
    /// Median issue→complete latency, upper bound of its log2 bucket (µs).
    pub latency_p50_us: Option<f64>,
    pub latency_p99_us: Option<f64>,
    /// The same for reads and for writes alone (None: no such request, or
    /// a session recorded before latency was split by direction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_latency_p99_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_latency_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_latency_p99_us: Option<f64>,
    /// Median creation → issue time of reads (plug, I/O scheduler queue),
    /// upper bound of its log2 bucket (µs); None when not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_queue_p50_us: Option<f64>,
    /// The session's devices stacked right on this one (a loop device
    /// whose image file lives on it, a dm/md device it is a member of):
    /// its requests carry their bytes again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carries: Vec<CarriedDevice>,
}

/// A device stacked on another one ([`DeviceFeature::carries`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CarriedDevice {
    pub name: String,
    pub via: Stacking,
}

/// The session's devices with their stacking: which devices sit right on
/// which, and each device's bytes beyond those of the devices on it (a
/// lower device's own traffic), so totals count stacked bytes once and the
/// device named is the one the files are on, not the one carrying it.
pub(crate) struct DeviceStack<'a> {
    pub(crate) devices: &'a [DeviceStats],
    /// Per device: the indices of the devices directly on it, and how.
    pub(crate) uppers: Vec<Vec<(usize, Stacking)>>,
}

impl<'a> DeviceStack<'a> {
    pub(crate) fn new(devices: &'a [DeviceStats]) -> Self {
        let is = |lower: &storprof_session::model::LowerDevice, d: &DeviceStats| {
            if lower.dev.is_empty() || d.dev.is_empty() {
                lower.name == d.name
            } else {
                lower.dev == d.dev
            }
        };
        let on = |upper: usize, lower: usize| -> Option<Stacking> {
            devices[upper]
                .sits_on
                .iter()
                .find(|l| is(l, &devices[lower]))
                .map(|l| l.via)
        };
        let uppers = (0..devices.len())
            .map(|lower| {
                let all: Vec<(usize, Stacking)> = (0..devices.len())
                    .filter(|&u| u != lower)
                    .filter_map(|u| on(u, lower).map(|via| (u, via)))
                    .collect();
                // Directly on it: not on top of another of them (loop0 on
                // dm-0 on vda: dm-0's bytes already hold loop0's).
                all.iter()
                    .filter(|&&(u, _)| !all.iter().any(|&(o, _)| o != u && on(u, o).is_some()))
                    .copied()
                    .collect()
            })
            .collect();
        DeviceStack { devices, uppers }
    }

    /// Device `i`'s bytes (`bytes` of it) beyond those of the devices
    /// directly on it.
    pub(crate) fn own(&self, i: usize, bytes: fn(&DeviceStats) -> u64) -> u64 {
        let carried: u64 = self.uppers[i]
            .iter()
            .map(|&(u, _)| bytes(&self.devices[u]))
            .fold(0, u64::saturating_add);
        bytes(&self.devices[i]).saturating_sub(carried)
    }

    /// The sum of every device's own `bytes`: stacked bytes once.
    pub(crate) fn total(&self, bytes: fn(&DeviceStats) -> u64) -> u64 {
        (0..self.devices.len())
            .map(|i| self.own(i, bytes))
            .fold(0, u64::saturating_add)
    }

    /// The device with the most own `bytes` (a disk only carrying a loop
    /// device's image gives way to the loop device), ties to a real disk,
    /// then to `tie` (larger first), then by name; None when no device
    /// has any.
    pub(crate) fn top(
        &self,
        bytes: fn(&DeviceStats) -> u64,
        tie: &dyn Fn(usize) -> u64,
    ) -> Option<usize> {
        (0..self.devices.len())
            .filter(|&i| bytes(&self.devices[i]) > 0)
            .max_by(|&a, &b| {
                let key = |i: usize| {
                    (
                        self.own(i, bytes),
                        !is_virtual_device(&self.devices[i].name),
                        tie(i),
                    )
                };
                key(a)
                    .cmp(&key(b))
                    .then_with(|| self.devices[b].name.cmp(&self.devices[a].name))
            })
    }

    pub(crate) fn feature(&self, i: usize, duration_s: f64) -> DeviceFeature {
        DeviceFeature {
            carries: self.uppers[i]
                .iter()
                .map(|&(u, via)| CarriedDevice {
                    name: self.devices[u].name.clone(),
                    via,
                })
                .collect(),
            ..device_feature(&self.devices[i], duration_s)
        }
    }
}

/// A cgroup's read limit on a device, as the verdict names it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IoLimitFeature {
    pub cgroup: String,
    /// "blkio" or "io.max".
    pub kind: String,
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_mib_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_iops: Option<u64>,
}

/// The tightest read limit (bytes first) of `limits` on the device named
/// `device`.
pub(crate) fn read_limit_on(
    limits: &[storprof_session::model::IoLimit],
    devices: &[DeviceStats],
    device: &str,
) -> Option<IoLimitFeature> {
    let dev = devices.iter().find(|d| d.name == device)?.dev.clone();
    limits
        .iter()
        .filter(|l| l.device == dev && (l.read_bps.is_some() || l.read_iops.is_some()))
        .min_by_key(|l| {
            (
                l.read_bps.unwrap_or(u64::MAX),
                l.read_iops.unwrap_or(u64::MAX),
            )
        })
        .map(|l| IoLimitFeature {
            cgroup: l.cgroup.clone(),
            kind: l.kind.clone(),
            device: device.to_string(),
            read_mib_per_s: l.read_bps.map(|b| b as f64 / (1 << 20) as f64),
            read_iops: l.read_iops,
        })
}

pub(crate) fn device_feature(d: &DeviceStats, duration_s: f64) -> DeviceFeature {
    let utilization = if d.utilization > 0.0 {
        d.utilization
    } else {
        ratio(d.busy_ns as f64, duration_s * 1e9)
    };
    DeviceFeature {
        name: d.name.clone(),
        read_bytes: d.read_bytes,
        read_mib_per_s: if duration_s > 0.0 {
            d.read_bytes as f64 / (1 << 20) as f64 / duration_s
        } else {
            0.0
        },
        read_requests: d.read_requests,
        write_bytes: d.write_bytes,
        write_mib_per_s: mib_per_s(d.write_bytes, duration_s),
        utilization,
        latency_p50_us: log2_quantile_us(&d.latency_log2_ns, 0.5),
        latency_p99_us: log2_quantile_us(&d.latency_log2_ns, 0.99),
        read_latency_p50_us: log2_quantile_us(&d.read_latency_log2_ns, 0.5),
        read_latency_p99_us: log2_quantile_us(&d.read_latency_log2_ns, 0.99),
        write_latency_p50_us: log2_quantile_us(&d.write_latency_log2_ns, 0.5),
        write_latency_p99_us: log2_quantile_us(&d.write_latency_log2_ns, 0.99),
        read_queue_p50_us: log2_quantile_us(&d.read_queue_log2_ns, 0.5),
        carries: Vec::new(),
    }
}

pub(crate) fn is_virtual_device(name: &str) -> bool {
    ["loop", "ram", "zram", "nbd"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// The user-space file system (FUSE) daemon that answered most of the
/// traced threads' storage waits, when its replies ended at least half of
/// them: the reads were served by that process, not by a local device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FsDaemonFeature {
    pub comm: String,
    pub pid: u32,
    /// Of the storage waits (ns) of the traced threads, the share FUSE
    /// replies ended (any daemon's).
    pub share: f64,
}

/// [`FsDaemonFeature`] of a session's wake-up graph (None: no graph, no
/// storage waits, or FUSE replies ended under half of them). A traced
/// daemon's replies are hand-offs, followed into its own waits: the
/// daemon named here is never one of the job's.
pub(crate) fn fs_daemon(session: &Session) -> Option<FsDaemonFeature> {
    use crate::waitgraph::{EdgeKind, classify, is_fuse_reply};
    let edges = &session.waits.as_ref()?.edges;
    let mut storage_ns = 0u64;
    let mut fuse_ns = 0u64;
    let mut daemons: std::collections::BTreeMap<(u32, &str), u64> = Default::default();
    for e in edges.iter().filter(|e| classify(e) == EdgeKind::Storage) {
        storage_ns += e.blocked_ns;
        if is_fuse_reply(e) {
            fuse_ns += e.blocked_ns;
            *daemons
                .entry((e.waker_pid, e.waker_comm.as_str()))
                .or_default() += e.blocked_ns;
        }
    }
    if storage_ns == 0 || 2 * fuse_ns < storage_ns {
        return None;
    }
    let ((pid, comm), _) = daemons.into_iter().max_by_key(|(_, ns)| *ns)?;
    Some(FsDaemonFeature {
        comm: comm.to_string(),
        pid,
        share: fuse_ns as f64 / storage_ns as f64,
    })
}
