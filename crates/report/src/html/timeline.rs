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
    let series = |label: String, values: Vec<f64>| {
        let (mean, min, max) = downsample(&values, factor);
        Series {
            label,
            mean,
            min,
            max,
        }
    };
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
            series(
                model::thread_label(&t.comm, t.pid, t.tid),
                (0..buckets).map(|i| cpu_of(t.on_cpu().at(i))).collect(),
            )
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
        cpu.push(series(
            format!("{omitted_series} other threads (sum)"),
            sum.into_iter().map(cpu_of).collect(),
        ));
    }
    let mib = (1u64 << 20) as f64 * bucket_s;
    let mut read = vec![0u64; buckets];
    for t in &ts.threads {
        let r = t.read();
        for (j, v) in r.values.iter().enumerate() {
            if let Some(slot) = read.get_mut(r.first + j) {
                *slot = slot.saturating_add(*v);
            }
        }
    }
    let reads = vec![series(
        "all traced threads".to_string(),
        read.into_iter().map(|v| v as f64 / mib).collect(),
    )];
    let devices = ts
        .devices
        .iter()
        .map(|d| {
            series(
                format!("{} read", d.name),
                (0..buckets)
                    .map(|i| d.read_bytes.get(i).copied().unwrap_or(0) as f64 / mib)
                    .collect(),
            )
        })
        .collect();
    let writes: Vec<Series> = ts
        .devices
        .iter()
        .filter(|d| d.write_bytes.iter().any(|&b| b > 0))
        .map(|d| {
            series(
                format!("{} write", d.name),
                (0..buckets)
                    .map(|i| d.write_bytes.get(i).copied().unwrap_or(0) as f64 / mib)
                    .collect(),
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
        .map(|(label, values)| {
            series(
                label.to_string(),
                (0..buckets)
                    .map(|i| values.get(i).copied().unwrap_or(0) as f64 / MIB)
                    .collect(),
            )
        })
        .collect();
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
