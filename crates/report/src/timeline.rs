//! `timeline.svg`: stacked panels over the recording, from
//! timeseries.json: per-thread CPU %, read-syscall MiB/s, device read (and
//! write) MiB/s, and the system's dirty/writeback page cache when sampled.
//! Hand-written SVG (polylines, axes, legends); no dependencies.
//!
//! ```text
//! TimeSeries ──► panels (series of points per second) ──► SVG text
//! ```
use std::fmt::Write as _;

use storprof_session::model::{self, TimeSeries};

/// Threads drawn individually; the rest are summed into "other threads".
pub const MAX_THREAD_LINES: usize = 8;

const WIDTH: f64 = 1000.0;
const PANEL_HEIGHT: f64 = 160.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 220.0;
const TOP: f64 = 40.0;
const GAP: f64 = 50.0;
const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#7f7f7f", "#bcbd22",
];

struct Series {
    label: String,
    values: Vec<f64>,
}

struct Panel {
    title: &'static str,
    unit: &'static str,
    series: Vec<Series>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A "nice" axis maximum ≥ `max` (1, 2 or 5 × 10^n).
fn nice_max(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let exp = max.log10().floor();
    let base = 10f64.powf(exp);
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * base >= max {
            return m * base;
        }
    }
    10.0 * base
}

fn panels(ts: &TimeSeries) -> (Vec<Panel>, usize) {
    let bucket_s = if ts.bucket_ns > 0 {
        ts.bucket_ns as f64 / 1e9
    } else {
        1.0
    };
    let buckets = ts.bucket_count();
    let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0) as f64;

    // CPU %: busiest threads individually, the rest summed.
    let mut threads: Vec<_> = ts.threads.iter().collect();
    threads.sort_by(|a, b| {
        let sa = a.on_cpu().total();
        let sb = b.on_cpu().total();
        sb.cmp(&sa).then_with(|| a.tid.cmp(&b.tid))
    });
    let mut cpu = Vec::new();
    for t in threads.iter().take(MAX_THREAD_LINES) {
        cpu.push(Series {
            label: model::thread_label(&t.comm, t.pid, t.tid),
            values: (0..buckets)
                .map(|i| t.on_cpu().at(i) as f64 / (bucket_s * 1e9) * 100.0)
                .collect(),
        });
    }
    if threads.len() > MAX_THREAD_LINES {
        let rest = &threads[MAX_THREAD_LINES..];
        cpu.push(Series {
            label: format!("{} other threads (sum)", rest.len()),
            values: (0..buckets)
                .map(|i| {
                    rest.iter().map(|t| t.on_cpu().at(i) as f64).sum::<f64>() / (bucket_s * 1e9)
                        * 100.0
                })
                .collect(),
        });
    }
    let mib = (1u64 << 20) as f64 * bucket_s;
    let reads = vec![Series {
        label: "all traced threads".to_string(),
        values: (0..buckets)
            .map(|i| {
                ts.threads
                    .iter()
                    .map(|t| t.read().at(i) as f64)
                    .sum::<f64>()
                    / mib
            })
            .collect(),
    }];
    let mut devices: Vec<Series> = ts
        .devices
        .iter()
        .map(|d| Series {
            label: format!("{} read", d.name),
            values: (0..buckets).map(|i| at(&d.read_bytes, i) / mib).collect(),
        })
        .collect();
    // Writes only for devices that wrote: read-only sessions keep their lines.
    devices.extend(
        ts.devices
            .iter()
            .filter(|d| d.write_bytes.iter().any(|&b| b > 0))
            .map(|d| Series {
                label: format!("{} write", d.name),
                values: (0..buckets).map(|i| at(&d.write_bytes, i) / mib).collect(),
            }),
    );
    let page_cache = page_cache_series(ts, buckets);
    let mut panels = vec![
        Panel {
            title: "CPU per thread",
            unit: "% of one CPU",
            series: cpu,
        },
        Panel {
            title: "Read syscalls",
            unit: "MiB/s",
            series: reads,
        },
        Panel {
            title: "Block devices",
            unit: "MiB/s",
            series: devices,
        },
    ];
    if !page_cache.is_empty() {
        panels.push(Panel {
            title: "Dirty page cache, system-wide",
            unit: "MiB",
            series: page_cache,
        });
    }
    (panels, buckets)
}

/// Dirty and under-writeback MiB at each bucket's end (empty without
/// /proc/vmstat readings).
fn page_cache_series(ts: &TimeSeries, buckets: usize) -> Vec<Series> {
    let Some(vm) = &ts.vmstat else {
        return Vec::new();
    };
    let mib = (1u64 << 20) as f64;
    let line = |label: &str, values: &[u64]| Series {
        label: label.to_string(),
        values: (0..buckets)
            .map(|i| values.get(i).copied().unwrap_or(0) as f64 / mib)
            .collect(),
    };
    vec![
        line("dirty", &vm.dirty_bytes),
        line("writeback", &vm.writeback_bytes),
    ]
}

/// Renders the timeline SVG. Empty series give empty panels that say so.
pub fn render(ts: &TimeSeries) -> String {
    let (panels, buckets) = panels(ts);
    let bucket_s = if ts.bucket_ns > 0 {
        ts.bucket_ns as f64 / 1e9
    } else {
        1.0
    };
    let plot_w = WIDTH - LEFT - RIGHT;
    let height = TOP + panels.len() as f64 * (PANEL_HEIGHT + GAP);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" xmlns=\"http://www.w3.org/2000/svg\" font-family=\"Verdana\" font-size=\"11\">\n\
         <rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"16\">storprof timeline ({:.0} s, {} s buckets)</text>",
        WIDTH / 2.0,
        buckets as f64 * bucket_s,
        bucket_s
    );
    for (p, panel) in panels.iter().enumerate() {
        let y0 = TOP + p as f64 * (PANEL_HEIGHT + GAP) + 20.0;
        let max = nice_max(
            panel
                .series
                .iter()
                .flat_map(|x| x.values.iter().copied())
                .fold(0.0, f64::max),
        );
        let _ = writeln!(
            s,
            "<text x=\"{LEFT}\" y=\"{:.1}\" font-size=\"13\">{} ({})</text>\n\
             <rect x=\"{LEFT}\" y=\"{y0:.1}\" width=\"{plot_w:.1}\" height=\"{PANEL_HEIGHT}\" fill=\"none\" stroke=\"#999\"/>",
            y0 - 6.0,
            esc(panel.title),
            esc(panel.unit)
        );
        // Y ticks: 0, max/2, max.
        for frac in [0.0, 0.5, 1.0] {
            let y = y0 + PANEL_HEIGHT * (1.0 - frac);
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n\
                 <line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/>",
                LEFT - 5.0,
                y + 4.0,
                format_tick(max * frac),
                LEFT + plot_w
            );
        }
        // X ticks: about 5.
        let duration = buckets as f64 * bucket_s;
        let step = nice_max(duration / 5.0).max(bucket_s);
        let mut t = 0.0;
        while t <= duration + 1e-9 && duration > 0.0 {
            let x = LEFT + plot_w * t / duration;
            let _ = writeln!(
                s,
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}s</text>",
                y0 + PANEL_HEIGHT + 14.0,
                format_tick(t)
            );
            t += step;
        }
        if panel.series.is_empty() || buckets == 0 {
            let _ = writeln!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#666\">no data recorded</text>",
                LEFT + plot_w / 2.0,
                y0 + PANEL_HEIGHT / 2.0
            );
            continue;
        }
        for (i, series) in panel.series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<String> = series
                .values
                .iter()
                .enumerate()
                .map(|(b, v)| {
                    // Each bucket's value drawn at the bucket's middle.
                    let x = LEFT + plot_w * (b as f64 + 0.5) / buckets as f64;
                    let y = y0 + PANEL_HEIGHT * (1.0 - v / max);
                    format!("{x:.1},{y:.1}")
                })
                .collect();
            let _ = writeln!(
                s,
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"><title>{}</title></polyline>\n\
                 <rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{color}\"/>\n\
                 <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                points.join(" "),
                esc(&series.label),
                LEFT + plot_w + 10.0,
                y0 + i as f64 * 15.0,
                LEFT + plot_w + 25.0,
                y0 + i as f64 * 15.0 + 9.0,
                esc(&series.label)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

fn format_tick(v: f64) -> String {
    if v == v.round() || v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storprof_session::model::{DeviceSeries, ThreadSeries, VmstatSeries};

    #[test]
    fn draws_threads_reads_and_devices() {
        let ts = TimeSeries {
            bucket_ns: 1_000_000_000,
            start_unix_ns: 0,
            buckets: 2,
            threads: (0..10)
                .map(|i| ThreadSeries {
                    pid: 1,
                    tid: i,
                    comm: format!("w<{i}>"),
                    on_cpu_ns: vec![500_000_000, 1_000_000_000],
                    read_bytes: vec![1 << 20, 0],
                    ..ThreadSeries::default()
                })
                .collect(),
            devices: vec![DeviceSeries {
                name: "vda".into(),
                read_bytes: vec![0, 2 << 20],
                ..Default::default()
            }],
            host_cpu: None,
            vmstat: None,
        };
        let svg = render(&ts);
        assert!(svg.contains("w&lt;0&gt; 1/0"));
        assert!(svg.contains("2 other threads (sum)"));
        assert!(svg.contains("vda read"));
        assert_eq!(
            svg.matches("<polyline").count(),
            MAX_THREAD_LINES + 1 + 1 + 1
        );
        assert!(svg.ends_with("</svg>\n"));
    }

    #[test]
    fn device_writes_and_dirty_pages_get_their_lines() {
        let ts = TimeSeries {
            bucket_ns: 1_000_000_000,
            buckets: 2,
            devices: vec![DeviceSeries {
                name: "loop0".into(),
                read_bytes: vec![0, 0],
                write_bytes: vec![8 << 20, 8 << 20],
                ..Default::default()
            }],
            host_cpu: None,
            vmstat: Some(VmstatSeries {
                dirty_bytes: vec![16 << 20, 15 << 20],
                writeback_bytes: vec![1 << 20, 2 << 20],
                dirtied_bytes: vec![24 << 20, 8 << 20],
                written_bytes: vec![8 << 20, 8 << 20],
            }),
            ..TimeSeries::default()
        };
        let svg = render(&ts);
        assert!(svg.contains("loop0 write"), "{svg}");
        assert!(svg.contains("Dirty page cache, system-wide (MiB)"), "{svg}");
        assert!(svg.contains("<title>dirty</title>") && svg.contains("<title>writeback</title>"));
        // 16 MiB is the dirty panel's largest value: its axis ends at 20.
        assert!(svg.contains(">20</text>"), "{svg}");
        // Four panels; only the threads panel is empty.
        assert_eq!(svg.matches("no data recorded").count(), 1);
    }

    #[test]
    fn empty_series_say_so() {
        let svg = render(&TimeSeries::default());
        assert_eq!(svg.matches("no data recorded").count(), 3);
    }

    #[test]
    fn nice_axis() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(73.0), 100.0);
        assert_eq!(nice_max(101.0), 200.0);
        assert_eq!(nice_max(0.3), 0.5);
    }
}
