//! Per-device figures from the block completions: bytes and requests by
//! direction, latency histogram, busy time (the union of in-flight
//! intervals), bytes per process, and the same per time bucket.
use std::collections::{BTreeMap, BTreeSet};

use storprof_common::{BlockEvent, LOG2_BUCKETS, log2_bucket};

use super::{comm_string, trim_histogram};
use crate::session::model::{DeviceSeries, DeviceStats};

/// Length of the union of `[start, end)` intervals.
pub fn union_ns(intervals: &mut [(u64, u64)]) -> u64 {
    intervals.sort_unstable();
    let mut total = 0;
    let mut current: Option<(u64, u64)> = None;
    for &(start, end) in intervals.iter() {
        let end = end.max(start);
        match current {
            Some((cs, ce)) if start <= ce => current = Some((cs, ce.max(end))),
            Some((cs, ce)) => {
                total += ce - cs;
                current = Some((start, end));
            }
            None => current = Some((start, end)),
        }
    }
    if let Some((cs, ce)) = current {
        total += ce - cs;
    }
    total
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

/// "MAJ:MIN" → kernel-internal dev_t (None: not that form, or out of range).
pub fn dev_from_major_minor(text: &str) -> Option<u32> {
    let (major, minor) = text.split_once(':')?;
    let (major, minor): (u32, u32) = (major.parse().ok()?, minor.parse().ok()?);
    (major < 1 << 12 && minor < 1 << 20).then_some((major << 20) | minor)
}

/// Per-device statistics from completed requests. `name_of` maps a dev_t to
/// its kernel name; `traced` is the set of traced tgids.
pub fn device_stats(
    events: &[BlockEvent],
    traced: &BTreeSet<u32>,
    duration_ns: u64,
    name_of: &dyn Fn(u32) -> String,
) -> Vec<DeviceStats> {
    /// Per device: its stats, latency histograms (all, reads, writes),
    /// in-flight intervals.
    type DeviceAcc = (DeviceStats, [Vec<u64>; 3], Vec<(u64, u64)>);
    let mut per_dev: BTreeMap<u32, DeviceAcc> = BTreeMap::new();
    for e in events {
        let (stats, hists, intervals) = per_dev.entry(e.dev).or_insert_with(|| {
            let (major, minor) = dev_major_minor(e.dev);
            (
                DeviceStats {
                    name: name_of(e.dev),
                    dev: format!("{major}:{minor}"),
                    ..DeviceStats::default()
                },
                std::array::from_fn(|_| vec![0; LOG2_BUCKETS]),
                Vec::new(),
            )
        });
        let bytes = u64::from(e.bytes);
        let latency_bucket = log2_bucket(e.complete_ns.saturating_sub(e.issue_ns));
        let direction = direction(&e.rwbs);
        match direction {
            Direction::Read => {
                stats.read_bytes += bytes;
                stats.read_requests += 1;
                if traced.contains(&e.tgid) {
                    stats.traced_read_bytes += bytes;
                }
            }
            Direction::Write => {
                stats.write_bytes += bytes;
                stats.write_requests += 1;
            }
            Direction::Other => {}
        }
        if e.tgid != 0 && bytes > 0 {
            *stats.by_pid.entry(e.tgid).or_insert(0) += bytes;
        }
        hists[0][latency_bucket] += 1;
        match direction {
            Direction::Read => hists[1][latency_bucket] += 1,
            Direction::Write => hists[2][latency_bucket] += 1,
            Direction::Other => {}
        }
        intervals.push((e.issue_ns, e.complete_ns.max(e.issue_ns)));
    }
    per_dev
        .into_values()
        .map(|(mut stats, [all, reads, writes], mut intervals)| {
            stats.latency_log2_ns = trim_histogram(&all);
            stats.read_latency_log2_ns = trim_histogram(&reads);
            stats.write_latency_log2_ns = trim_histogram(&writes);
            stats.busy_ns = union_ns(&mut intervals);
            stats.utilization = if duration_ns > 0 {
                (stats.busy_ns as f64 / duration_ns as f64).min(1.0)
            } else {
                0.0
            };
            stats
        })
        .collect()
}

/// Per-device bytes and busy time in buckets of `bucket_ns` from `start_ns`
/// (monotonic clock), `buckets` long.
pub fn device_series(
    events: &[BlockEvent],
    start_ns: u64,
    bucket_ns: u64,
    buckets: usize,
    name_of: &dyn Fn(u32) -> String,
) -> Vec<DeviceSeries> {
    let mut per_dev: BTreeMap<u32, (DeviceSeries, Vec<(u64, u64)>)> = BTreeMap::new();
    for e in events {
        let (series, intervals) = per_dev.entry(e.dev).or_insert_with(|| {
            (
                DeviceSeries {
                    name: name_of(e.dev),
                    read_bytes: vec![0; buckets],
                    write_bytes: vec![0; buckets],
                    busy_ns: vec![0; buckets],
                },
                Vec::new(),
            )
        });
        let bucket = (e.complete_ns.saturating_sub(start_ns) / bucket_ns) as usize;
        let bucket = bucket.min(buckets.saturating_sub(1));
        if buckets > 0 {
            match direction(&e.rwbs) {
                Direction::Read => series.read_bytes[bucket] += u64::from(e.bytes),
                Direction::Write => series.write_bytes[bucket] += u64::from(e.bytes),
                Direction::Other => {}
            }
        }
        intervals.push((e.issue_ns.max(start_ns), e.complete_ns.max(start_ns)));
    }
    per_dev
        .into_values()
        .map(|(mut series, mut intervals)| {
            // Merge, then split each busy interval over the buckets it spans.
            intervals.sort_unstable();
            let mut merged: Vec<(u64, u64)> = Vec::new();
            for (s, e) in intervals {
                match merged.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => merged.push((s, e)),
                }
            }
            for (s, e) in merged {
                let mut t = s;
                while t < e {
                    let b = ((t - start_ns) / bucket_ns) as usize;
                    if b >= buckets {
                        break;
                    }
                    let bucket_end = start_ns + (b as u64 + 1) * bucket_ns;
                    let piece_end = e.min(bucket_end);
                    series.busy_ns[b] += piece_end - t;
                    t = piece_end;
                }
            }
            series
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn union_of_intervals() {
        assert_eq!(union_ns(&mut []), 0);
        assert_eq!(union_ns(&mut [(0, 10), (5, 15), (20, 30)]), 25);
        assert_eq!(union_ns(&mut [(20, 30), (0, 100)]), 100);
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

    #[test]
    fn major_minor_round_trips_to_a_kernel_dev_t() {
        let dev = dev_from_major_minor("254:16").unwrap();
        assert_eq!(dev_major_minor(dev), (254, 16));
        assert_eq!(dev_from_major_minor("4096:0"), None);
        assert_eq!(dev_from_major_minor("vda"), None);
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
