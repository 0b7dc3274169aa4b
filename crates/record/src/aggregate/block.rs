//! Per-device figures from the block completions: bytes and requests by
//! direction, latency histograms (issue → complete, and a read's creation →
//! issue: its time in the plug and the I/O scheduler), busy time (the union of in-flight
//! intervals), bytes per process, and the same per time bucket.
use std::collections::{BTreeMap, BTreeSet};

use storprof_common::{BlockEvent, LOG2_BUCKETS, log2_bucket};

use super::{comm_string, trim_histogram};
use storprof_session::model::{DeviceSeries, DeviceStats};

/// Length of the union of `[start, end)` intervals.
pub fn union_ns(intervals: &[(u64, u64)]) -> u64 {
    merged(intervals.to_vec()).iter().map(|(s, e)| e - s).sum()
}

/// Direction of a block request from its `rwbs` flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
    Other,
}

pub fn direction(rwbs: &[u8]) -> Direction {
    let text = comm_string(rwbs);
    let op = text.trim_start_matches('F');
    match op.chars().next() {
        Some('R') => Direction::Read,
        Some('W') => Direction::Write,
        _ => Direction::Other,
    }
}

/// Kernel-internal dev_t → (major, minor).
pub fn dev_major_minor(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & 0xfffff)
}

/// A device's name when nothing better is known: "MAJ:MIN".
pub fn dev_fallback_name(dev: u32) -> String {
    let (major, minor) = dev_major_minor(dev);
    format!("{major}:{minor}")
}

/// "MAJ:MIN" → kernel-internal dev_t (None: not that form, or out of range).
pub fn dev_from_major_minor(text: &str) -> Option<u32> {
    let (major, minor) = text.split_once(':')?;
    let (major, minor): (u32, u32) = (major.parse().ok()?, minor.parse().ok()?);
    (major < 1 << 12 && minor < 1 << 20).then_some((major << 20) | minor)
}

/// How long a merged in-flight interval stays open to later completions
/// that overlap it; older ones are closed into the per-bucket busy time.
/// The part of a request issued before that (one in flight this long, a
/// hang) is added bucket by bucket, each bucket at most full: exact when
/// the device was idle or busy throughout each of those seconds.
const OPEN_HORIZON_NS: u64 = 10_000_000_000;

/// Open intervals past which a completion sorts and merges them.
const MERGE_EVERY: usize = 4096;

/// The block completions of a recording, aggregated as they arrive: memory
/// follows devices, processes and seconds, not requests (a day of a
/// storage-bound job is billions of them).
#[derive(Clone, Debug)]
pub struct BlockAggregate {
    start_ns: u64,
    bucket_ns: u64,
    devices: BTreeMap<u32, DeviceAcc>,
}

#[derive(Clone, Debug, Default)]
struct DeviceAcc {
    read_bytes: u64,
    write_bytes: u64,
    read_requests: u64,
    write_requests: u64,
    /// Bytes per issuing pid (all directions), and reads alone.
    by_pid: BTreeMap<u32, u64>,
    read_by_pid: BTreeMap<u32, u64>,
    /// Latency: every request, reads, writes.
    histograms: [Vec<u64>; 3],
    /// Reads' creation → issue (those whose creation was seen).
    read_queue_histogram: Vec<u64>,
    /// Per bucket from `start_ns`: read and written bytes, closed busy time.
    read_series: Vec<u64>,
    write_series: Vec<u64>,
    busy_series: Vec<u64>,
    /// Busy time of the closed intervals.
    busy_ns: u64,
    /// In-flight intervals that may still merge with later completions.
    open: Vec<(u64, u64)>,
    /// Everything before this is closed.
    closed_until: u64,
    /// The latest completion seen.
    newest_ns: u64,
    /// `open`'s length after its last merge.
    merged_len: usize,
}

impl BlockAggregate {
    /// An empty aggregate whose series buckets are `bucket_ns` long from
    /// `start_ns` (the probes' monotonic clock).
    pub fn new(start_ns: u64, bucket_ns: u64) -> Self {
        Self {
            start_ns,
            bucket_ns: bucket_ns.max(1),
            devices: BTreeMap::new(),
        }
    }

    /// Adds one completed request.
    pub fn add(&mut self, e: &BlockEvent) {
        let device = self.devices.entry(e.dev).or_insert_with(|| DeviceAcc {
            histograms: std::array::from_fn(|_| vec![0; LOG2_BUCKETS]),
            read_queue_histogram: vec![0; LOG2_BUCKETS],
            ..DeviceAcc::default()
        });
        let bytes = u64::from(e.bytes);
        let bucket = (e.complete_ns.saturating_sub(self.start_ns) / self.bucket_ns) as usize;
        let latency_bucket = log2_bucket(e.complete_ns.saturating_sub(e.issue_ns));
        device.histograms[0][latency_bucket] += 1;
        match direction(&e.rwbs) {
            Direction::Read => {
                device.read_bytes += bytes;
                device.read_requests += 1;
                device.histograms[1][latency_bucket] += 1;
                if e.created_ns != 0 && e.created_ns <= e.issue_ns {
                    device.read_queue_histogram[log2_bucket(e.issue_ns - e.created_ns)] += 1;
                }
                add_at(&mut device.read_series, bucket, bytes);
                if e.tgid != 0 && bytes > 0 {
                    *device.read_by_pid.entry(e.tgid).or_insert(0) += bytes;
                }
            }
            Direction::Write => {
                device.write_bytes += bytes;
                device.write_requests += 1;
                device.histograms[2][latency_bucket] += 1;
                add_at(&mut device.write_series, bucket, bytes);
            }
            Direction::Other => {}
        }
        if e.tgid != 0 && bytes > 0 {
            *device.by_pid.entry(e.tgid).or_insert(0) += bytes;
        }
        device.add_interval(
            e.issue_ns,
            e.complete_ns.max(e.issue_ns),
            self.start_ns,
            self.bucket_ns,
        );
    }

    /// Per-device statistics so far; `traced` is the set of traced tgids.
    pub fn device_stats(
        &self,
        traced: &BTreeSet<u32>,
        duration_ns: u64,
        name_of: &dyn Fn(u32) -> String,
    ) -> Vec<DeviceStats> {
        self.devices
            .iter()
            .map(|(&dev, acc)| {
                let (major, minor) = dev_major_minor(dev);
                let busy_ns = acc.busy_ns + union_ns(&acc.open);
                DeviceStats {
                    name: name_of(dev),
                    dev: format!("{major}:{minor}"),
                    read_bytes: acc.read_bytes,
                    write_bytes: acc.write_bytes,
                    read_requests: acc.read_requests,
                    write_requests: acc.write_requests,
                    latency_log2_ns: trim_histogram(&acc.histograms[0]),
                    read_latency_log2_ns: trim_histogram(&acc.histograms[1]),
                    write_latency_log2_ns: trim_histogram(&acc.histograms[2]),
                    read_queue_log2_ns: trim_histogram(&acc.read_queue_histogram),
                    busy_ns,
                    utilization: if duration_ns > 0 {
                        (busy_ns as f64 / duration_ns as f64).min(1.0)
                    } else {
                        0.0
                    },
                    traced_read_bytes: acc
                        .read_by_pid
                        .iter()
                        .filter(|(pid, _)| traced.contains(pid))
                        .map(|(_, bytes)| bytes)
                        .sum(),
                    by_pid: acc.by_pid.clone(),
                    sits_on: Vec::new(),
                }
            })
            .collect()
    }

    /// Per-device bytes and busy time so far, `buckets` long: bytes of
    /// later completions go to the last bucket, busy time past it is left
    /// out.
    pub fn device_series(
        &self,
        buckets: usize,
        name_of: &dyn Fn(u32) -> String,
    ) -> Vec<DeviceSeries> {
        self.devices
            .iter()
            .map(|(&dev, acc)| {
                let fit = |values: &[u64]| {
                    let mut out = vec![0; buckets];
                    for (i, v) in values.iter().enumerate() {
                        if let Some(slot) = out.get_mut(i.min(buckets.saturating_sub(1))) {
                            *slot += v;
                        }
                    }
                    out
                };
                let mut busy = acc.busy_series.clone();
                for (start, end) in merged(acc.open.clone()) {
                    add_busy(
                        &mut busy,
                        start,
                        end,
                        self.start_ns,
                        self.bucket_ns,
                        u64::MAX,
                    );
                }
                busy.resize(buckets, 0);
                DeviceSeries {
                    name: name_of(dev),
                    read_bytes: fit(&acc.read_series),
                    write_bytes: fit(&acc.write_series),
                    busy_ns: busy,
                }
            })
            .collect()
    }
}

impl DeviceAcc {
    fn add_interval(&mut self, issue: u64, complete: u64, start_ns: u64, bucket_ns: u64) {
        self.newest_ns = self.newest_ns.max(complete);
        if issue < self.closed_until {
            // Closed buckets' other busy time may overlap it: each is filled
            // at most to its length. Before `start_ns` there are no buckets.
            let end = complete.min(self.closed_until);
            self.busy_ns += end.min(start_ns).saturating_sub(issue)
                + add_busy(
                    &mut self.busy_series,
                    issue,
                    end,
                    start_ns,
                    bucket_ns,
                    bucket_ns,
                );
        }
        let issue = issue.max(self.closed_until);
        if issue < complete {
            self.open.push((issue, complete));
        }
        if self.open.len() < self.merged_len.saturating_mul(2) + MERGE_EVERY {
            return;
        }
        // Closed at a bucket's start: a long request's time before it fills
        // whole buckets.
        let horizon = self.newest_ns.saturating_sub(OPEN_HORIZON_NS);
        let cut = start_ns
            .saturating_add(horizon.saturating_sub(start_ns) / bucket_ns * bucket_ns)
            .max(self.closed_until);
        let mut still_open = Vec::new();
        for (s, e) in merged(std::mem::take(&mut self.open)) {
            if e < cut {
                self.busy_ns += e - s;
                add_busy(&mut self.busy_series, s, e, start_ns, bucket_ns, u64::MAX);
            } else {
                still_open.push((s, e));
            }
        }
        self.closed_until = self.closed_until.max(cut);
        self.merged_len = still_open.len();
        self.open = still_open;
    }
}

/// `intervals` sorted and merged where they overlap or touch (an end
/// before its start counts as the start).
fn merged(mut intervals: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    intervals.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(intervals.len());
    for (s, e) in intervals {
        let e = e.max(s);
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Adds busy interval `[s, e)`, clipped to `start_ns`, to the per-bucket
/// series, split over the buckets it spans, each bucket filled at most to
/// `full`. Returns the time added.
fn add_busy(
    series: &mut Vec<u64>,
    s: u64,
    e: u64,
    start_ns: u64,
    bucket_ns: u64,
    full: u64,
) -> u64 {
    let mut added = 0;
    let mut t = s.max(start_ns);
    while t < e {
        let b = (t - start_ns) / bucket_ns;
        let bucket_end = start_ns.saturating_add((b + 1).saturating_mul(bucket_ns));
        let piece_end = e.min(bucket_end);
        let index = b as usize;
        let room = full.saturating_sub(series.get(index).copied().unwrap_or(0));
        let piece = (piece_end - t).min(room);
        add_at(series, index, piece);
        added += piece;
        t = piece_end;
    }
    added
}

/// `values[index] += v`, growing `values` as needed.
fn add_at(values: &mut Vec<u64>, index: usize, v: u64) {
    if values.len() <= index {
        values.resize(index + 1, 0);
    }
    values[index] += v;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device_stats(
        events: &[BlockEvent],
        traced: &BTreeSet<u32>,
        duration_ns: u64,
        name_of: &dyn Fn(u32) -> String,
    ) -> Vec<DeviceStats> {
        let mut aggregate = BlockAggregate::new(0, 1_000_000_000);
        events.iter().for_each(|e| aggregate.add(e));
        aggregate.device_stats(traced, duration_ns, name_of)
    }

    fn device_series(
        events: &[BlockEvent],
        start_ns: u64,
        bucket_ns: u64,
        buckets: usize,
        name_of: &dyn Fn(u32) -> String,
    ) -> Vec<DeviceSeries> {
        let mut aggregate = BlockAggregate::new(start_ns, bucket_ns);
        events.iter().for_each(|e| aggregate.add(e));
        aggregate.device_series(buckets, name_of)
    }

    #[test]
    fn union_of_intervals() {
        assert_eq!(union_ns(&[]), 0);
        assert_eq!(union_ns(&[(0, 10), (5, 15), (20, 30)]), 25);
        assert_eq!(union_ns(&[(20, 30), (0, 100)]), 100);
    }

    fn block(dev: u32, bytes: u32, issue: u64, done: u64, rwbs: &str, tgid: u32) -> BlockEvent {
        let mut r = [0u8; 8];
        r[..rwbs.len()].copy_from_slice(rwbs.as_bytes());
        BlockEvent {
            dev,
            bytes,
            issue_ns: issue,
            complete_ns: done,
            tgid,
            error: 0,
            rwbs: r,
            created_ns: 0,
        }
    }

    #[test]
    fn devices_from_events() {
        let vda = 254 << 20;
        let events = [
            block(vda, 4096, 0, 1000, "R", 7),
            block(vda, 8192, 500, 1500, "RA", 8),
            block(vda, 512, 3000, 4000, "WS", 7),
            block(vda, 0, 5000, 5001, "FN", 0),
        ];
        let traced = BTreeSet::from([7]);
        let devs = device_stats(&events, &traced, 10_000, &|_| "vda".into());
        assert_eq!(devs.len(), 1);
        let d = &devs[0];
        assert_eq!(d.dev, "254:0");
        assert_eq!((d.read_bytes, d.read_requests), (12288, 2));
        assert_eq!((d.write_bytes, d.write_requests), (512, 1));
        assert_eq!(d.traced_read_bytes, 4096);
        assert_eq!(d.busy_ns, 1500 + 1000 + 1);
        assert_eq!(d.by_pid.get(&7), Some(&4608));
        assert_eq!(d.latency_log2_ns.iter().sum::<u64>(), 4);
        // By direction: the two reads (1000 ns each: bucket 9), the write
        // (1000 ns); the flush only in the whole-device histogram.
        assert_eq!(d.read_latency_log2_ns.iter().sum::<u64>(), 2);
        assert_eq!(d.read_latency_log2_ns.get(9), Some(&2));
        assert_eq!(d.write_latency_log2_ns.iter().sum::<u64>(), 1);
        assert_eq!(d.write_latency_log2_ns.get(9), Some(&1));
        assert!((d.utilization - 0.2501).abs() < 1e-9);
    }

    /// A read's creation → issue goes to the queue histogram; a read whose
    /// creation was not seen, and writes, do not.
    #[test]
    fn reads_queue_time_from_creation_to_issue() {
        let vda = 254 << 20;
        let created = |mut e: BlockEvent, at: u64| {
            e.created_ns = at;
            e
        };
        let events = [
            created(block(vda, 4096, 10_000, 11_000, "R", 7), 10_000 - 3_000),
            created(block(vda, 4096, 20_000, 21_000, "R", 7), 20_000 - 3_000),
            block(vda, 4096, 30_000, 31_000, "R", 7),
            created(block(vda, 4096, 40_000, 41_000, "W", 7), 1),
        ];
        let devs = device_stats(&events, &BTreeSet::new(), 100_000, &|_| "vda".into());
        let queue = &devs[0].read_queue_log2_ns;
        assert_eq!(queue.iter().sum::<u64>(), 2, "{queue:?}");
        // 3,000 ns: bucket 11 ([2048, 4096)).
        assert_eq!(queue.get(11), Some(&2), "{queue:?}");
    }

    #[test]
    fn major_minor_round_trips_to_a_kernel_dev_t() {
        let dev = dev_from_major_minor("254:16").unwrap();
        assert_eq!(dev_major_minor(dev), (254, 16));
        assert_eq!(dev_from_major_minor("4096:0"), None);
        assert_eq!(dev_from_major_minor("vda"), None);
    }

    /// Many completions, added one by one with merges and closes along
    /// the way, give what one pass over all of them gives, and the open
    /// intervals stay few.
    #[test]
    fn a_long_stream_of_completions_aggregates_as_one_pass_would_in_bounded_memory() {
        const S: u64 = 1_000_000_000;
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        // 200,000 requests over 400 s on two devices: bursts that overlap
        // and idle gaps, out of completion order by up to 2 ms.
        let mut events = Vec::new();
        let mut t = 5 * S;
        for i in 0..200_000u64 {
            t += next() % 4_000_000;
            let latency = 50_000 + next() % 3_000_000;
            let issue = t.saturating_sub(next() % 2_000_000);
            let dev = if i % 3 == 0 { 2 } else { 1 };
            let rwbs = if i % 5 == 0 { "W" } else { "R" };
            events.push(block(
                dev,
                4096,
                issue,
                issue + latency,
                rwbs,
                7 + (i % 4) as u32,
            ));
        }
        let mut streamed = BlockAggregate::new(3 * S, S);
        for e in &events {
            streamed.add(e);
        }
        assert!(
            streamed
                .devices
                .values()
                .all(|d| d.open.len() < 3 * MERGE_EVERY)
        );
        let traced = BTreeSet::from([7, 8]);
        let name = |_| "d".to_string();
        let buckets = 410;
        let got = streamed.device_stats(&traced, 400 * S, &name);
        let got_series = streamed.device_series(buckets, &name);

        // One pass: every interval at once.
        for (dev, (stats, series)) in [1, 2].into_iter().zip(got.iter().zip(&got_series)) {
            let mine: Vec<&BlockEvent> = events.iter().filter(|e| e.dev == dev).collect();
            let intervals: Vec<(u64, u64)> =
                mine.iter().map(|e| (e.issue_ns, e.complete_ns)).collect();
            assert_eq!(stats.busy_ns, union_ns(&intervals));
            assert_eq!(
                stats.read_requests + stats.write_requests,
                mine.len() as u64
            );
            let traced_reads: u64 = mine
                .iter()
                .filter(|e| e.rwbs[0] == b'R' && traced.contains(&e.tgid))
                .map(|e| u64::from(e.bytes))
                .sum();
            assert_eq!(stats.traced_read_bytes, traced_reads);
            assert_eq!(series.busy_ns.iter().sum::<u64>(), stats.busy_ns);
            assert_eq!(series.read_bytes.iter().sum::<u64>(), stats.read_bytes);
            assert_eq!(series.read_bytes.len(), buckets);
        }
    }

    /// A request in flight longer than the open horizon (a hang) still
    /// counts its whole time: the seconds before the open part fill their
    /// buckets up to full.
    #[test]
    fn a_request_in_flight_past_the_horizon_counts_all_its_time() {
        const S: u64 = 1_000_000_000;
        let mut aggregate = BlockAggregate::new(0, S);
        let mut all = Vec::new();
        // Short requests every 100 ms, enough to close the first 190 s.
        for i in 0..(2 * MERGE_EVERY as u64) {
            let t = i * 100_000_000;
            all.push(block(1, 512, t, t + 1_000, "R", 1));
        }
        for e in &all {
            aggregate.add(e);
        }
        let device = &aggregate.devices[&1];
        assert!(device.closed_until > 100 * S, "{}", device.closed_until);
        // Issued at 1 s, completed now.
        let hang = block(1, 512, S, device.newest_ns + 1_000, "R", 1);
        aggregate.add(&hang);
        all.push(hang);
        let stats = &aggregate.device_stats(&BTreeSet::new(), 1, &|_| String::new())[0];
        let intervals: Vec<(u64, u64)> = all.iter().map(|e| (e.issue_ns, e.complete_ns)).collect();
        assert_eq!(stats.busy_ns, union_ns(&intervals));
        let series = &aggregate.device_series(200, &|_| String::new())[0];
        assert_eq!(series.busy_ns[0], 10 * 1_000);
        assert!(series.busy_ns[1..190].iter().all(|&ns| ns == S));
    }

    #[test]
    fn device_series_splits_busy_time() {
        let events = [
            block(1, 100, 900, 1200, "R", 1),
            block(1, 50, 2100, 2200, "W", 1),
        ];
        let series = device_series(&events, 0, 1000, 3, &|_| "x".into());
        assert_eq!(series[0].read_bytes, vec![0, 100, 0]);
        assert_eq!(series[0].write_bytes, vec![0, 0, 50]);
        assert_eq!(series[0].busy_ns, vec![100, 200, 100]);
    }
}
