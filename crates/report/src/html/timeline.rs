//! The timeline's data for report.html: the 1-second series, downsampled
//! to at most `max_points`, per panel.
use super::*;

/// Groups `values` `factor` at a time: (means, mins, maxes); min and max
/// are empty when `factor` is 1 (they equal the mean).
pub fn downsample(values: &[f64], factor: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let factor = factor.max(1);
    let round = |x: f64| (x * 100.0).round() / 100.0;
    if factor == 1 {
        return (
            values.iter().map(|&v| round(v)).collect(),
            Vec::new(),
            Vec::new(),
        );
    }
    let (mut mean, mut min, mut max) = (Vec::new(), Vec::new(), Vec::new());
    for group in values.chunks(factor) {
        let sum: f64 = group.iter().sum();
        mean.push(round(sum / group.len() as f64));
        min.push(round(group.iter().copied().fold(f64::INFINITY, f64::min)));
        max.push(round(
            group.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ));
    }
    (mean, min, max)
}

/// Buckets per point so that `buckets` fit in `max_points`.
pub fn downsample_factor(buckets: usize, max_points: usize) -> usize {
    buckets.div_ceil(max_points.max(1)).max(1)
}

/// The timeline's panels: CPU % of the busiest threads (the rest summed),
/// read-syscall MiB/s of all traced threads, device read MiB/s.
pub fn timeline(ts: &TimeSeries, analysis: &Diagnosis, options: &HtmlOptions) -> Timeline {
    let bucket_s = if ts.bucket_ns > 0 {
        ts.bucket_ns as f64 / 1e9
    } else {
        1.0
    };
    let buckets = ts.bucket_count();
    let factor = downsample_factor(buckets, options.max_timeline_points);
    let (cpu, omitted_series) = cpu_series(ts, bucket_s, factor);
    let mib = (1u64 << 20) as f64 * bucket_s;
    let reads = vec![read_syscall_series(ts, mib, factor)];
    let devices = ts
        .devices
        .iter()
        .map(|d| {
            bucket_series(
                format!("{} read", d.name),
                &d.read_bytes,
                buckets,
                mib,
                factor,
            )
        })
        .collect();
    let writes: Vec<Series> = ts
        .devices
        .iter()
        .filter(|d| d.write_bytes.iter().any(|&b| b > 0))
        .map(|d| {
            bucket_series(
                format!("{} write", d.name),
                &d.write_bytes,
                buckets,
                mib,
                factor,
            )
        })
        .collect();
    let page_cache: Vec<Series> = ts
        .vmstat
        .iter()
        .flat_map(|vm| {
            [
                ("dirty", &vm.dirty_bytes),
                ("writeback", &vm.writeback_bytes),
            ]
        })
        .map(|(label, values)| bucket_series(label.to_string(), values, buckets, MIB, factor))
        .collect();
    let panels = timeline_panels(cpu, reads, devices, writes, page_cache);
    let window = analysis.wait.as_ref().and_then(|w| w.window.as_ref());
    Timeline {
        point_s: bucket_s * factor as f64,
        buckets,
        factor,
        points: buckets.div_ceil(factor),
        panels,
        window: window.map(|w| (w.start_s, w.end_s)),
        window_source: window.map(|w| w.source.clone()),
        omitted_series,
    }
}

/// A series labelled `label` from `values` downsampled `factor` buckets a
/// point.
fn downsampled_series(label: String, values: &[f64], factor: usize) -> Series {
    let (mean, min, max) = downsample(values, factor);
    Series {
        label,
        mean,
        min,
        max,
    }
}

/// A series of `buckets` points from per-bucket `values` (missing buckets
/// are 0) divided by `scale`, downsampled `factor` buckets a point.
fn bucket_series(
    label: String,
    values: &[u64],
    buckets: usize,
    scale: f64,
    factor: usize,
) -> Series {
    let values: Vec<f64> = (0..buckets)
        .map(|i| values.get(i).copied().unwrap_or(0) as f64 / scale)
        .collect();
    downsampled_series(label, &values, factor)
}

/// The CPU panel's series: % of one CPU of the busiest threads (most
/// on-CPU time first, then by tid), one each up to
/// [`crate::timeline::MAX_THREAD_LINES`], the rest summed into one; and
/// how many threads that sum holds.
fn cpu_series(ts: &TimeSeries, bucket_s: f64, factor: usize) -> (Vec<Series>, usize) {
    let buckets = ts.bucket_count();
    let mut threads: Vec<_> = ts.threads.iter().collect();
    threads.sort_by(|a, b| {
        b.on_cpu()
            .total()
            .cmp(&a.on_cpu().total())
            .then_with(|| a.tid.cmp(&b.tid))
    });
    let lines = crate::timeline::MAX_THREAD_LINES;
    let cpu_of = |v: u64| v as f64 / (bucket_s * 1e9) * 100.0;
    let mut cpu: Vec<Series> = threads
        .iter()
        .take(lines)
        .map(|t| {
            let values: Vec<f64> = (0..buckets).map(|i| cpu_of(t.on_cpu().at(i))).collect();
            downsampled_series(model::thread_label(&t.comm, t.pid, t.tid), &values, factor)
        })
        .collect();
    let omitted_series = threads.len().saturating_sub(lines);
    if omitted_series > 0 {
        let mut sum = vec![0u64; buckets];
        for t in &threads[lines..] {
            let on = t.on_cpu();
            for (j, v) in on.values.iter().enumerate() {
                if let Some(slot) = sum.get_mut(on.first + j) {
                    *slot = slot.saturating_add(*v);
                }
            }
        }
        let values: Vec<f64> = sum.into_iter().map(cpu_of).collect();
        cpu.push(downsampled_series(
            format!("{omitted_series} other threads (sum)"),
            &values,
            factor,
        ));
    }
    (cpu, omitted_series)
}

/// The read-syscall panel's series: MiB/s read by all traced threads
/// (`mib` is a MiB times the bucket's seconds).
fn read_syscall_series(ts: &TimeSeries, mib: f64, factor: usize) -> Series {
    let mut read = vec![0u64; ts.bucket_count()];
    for t in &ts.threads {
        let r = t.read();
        for (j, v) in r.values.iter().enumerate() {
            if let Some(slot) = read.get_mut(r.first + j) {
                *slot = slot.saturating_add(*v);
            }
        }
    }
    let values: Vec<f64> = read.into_iter().map(|v| v as f64 / mib).collect();
    downsampled_series("all traced threads".to_string(), &values, factor)
}

/// The timeline's panels: CPU, read syscalls and device reads always; device
/// writes and the dirty page cache only when they have series.
fn timeline_panels(
    cpu: Vec<Series>,
    reads: Vec<Series>,
    devices: Vec<Series>,
    writes: Vec<Series>,
    page_cache: Vec<Series>,
) -> Vec<Panel> {
    let mut panels = vec![
        Panel {
            title: "CPU per thread".to_string(),
            unit: "% of one CPU".to_string(),
            series: cpu,
        },
        Panel {
            title: "Read syscalls".to_string(),
            unit: "MiB/s".to_string(),
            series: reads,
        },
        Panel {
            title: "Device reads".to_string(),
            unit: "MiB/s".to_string(),
            series: devices,
        },
    ];
    // Write panels only for sessions with writes or a vmstat series:
    // read sessions keep their three panels.
    if !writes.is_empty() {
        panels.push(Panel {
            title: "Device writes".to_string(),
            unit: "MiB/s".to_string(),
            series: writes,
        });
    }
    if !page_cache.is_empty() {
        panels.push(Panel {
            title: "Dirty page cache, system-wide".to_string(),
            unit: "MiB".to_string(),
            series: page_cache,
        });
    }
    panels
}
