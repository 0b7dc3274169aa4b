//! `report.md` of a merged diagnosis: the cluster verdict, stragglers, and
//! every host's verdict and figures side by side. Pure rendering.
use std::fmt::Write as _;

use super::{HostRow, Merged};

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn opt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "–".to_string(), f)
}

/// One row of the side-by-side table: its name and how a host's cell reads.
type Column<'a> = (&'a str, &'a dyn Fn(&HostRow) -> String);

/// The merged report as Markdown.
pub fn render_markdown(m: &Merged) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# storprof merged diagnosis ({} hosts)\n", m.hosts.len());
    let _ = writeln!(
        s,
        "**Cluster verdict: {}** — {}\n",
        m.cluster_verdict, m.cluster_headline
    );
    for w in &m.warnings {
        let _ = writeln!(s, "> [!WARNING]\n> {w}.\n");
    }
    if m.stragglers.is_empty() {
        let _ = writeln!(
            s,
            "No straggler: the hosts' reader I/O-wait shares differ by {:.0}% (threshold {:.0}%, \
             Drishti's imbalance_stragglers).\n",
            m.io_wait_imbalance * 100.0,
            m.thresholds.straggler_imbalance * 100.0
        );
    } else {
        let _ = writeln!(s, "## Stragglers\n");
        for st in &m.stragglers {
            let _ = writeln!(s, "- **{}**: {}", st.host, st.text);
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Hosts side by side\n");
    let cols: [Column<'_>; 13] = [
        ("verdict", &|h| h.verdict.to_string()),
        ("confidence", &|h| format!("{:.2}", h.confidence)),
        ("recorded (s)", &|h| format!("{:.1}", h.duration_s)),
        ("readers waiting on I/O (D)", &|h| {
            pct(h.reader_io_wait_share)
        }),
        ("readers on CPU", &|h| pct(h.reader_on_cpu_share)),
        ("readers idle (sleeping)", &|h| pct(h.reader_sleeping_share)),
        ("consumer asleep in compute", &|h| {
            opt(h.consumer_sleep_share, pct)
        }),
        ("bench AU", &|h| {
            opt(h.bench_au_percentage, |x| format!("{x:.2}%"))
        }),
        ("read() MiB/s", &|h| {
            format!("{:.1}", h.read_syscall_mib_per_s)
        }),
        ("device MiB/s", &|h| {
            opt(h.device_read_mib_per_s, |x| format!("{x:.1}"))
        }),
        ("device busy", &|h| opt(h.device_utilization, pct)),
        ("device p50 latency (µs)", &|h| {
            opt(h.device_latency_p50_us, |x| format!("{x:.0}"))
        }),
        ("CPUs used", &|h| format!("{:.2}", h.cpus_used)),
    ];
    let _ = write!(s, "| |");
    for h in &m.hosts {
        let star = if m.stragglers.iter().any(|st| st.host == h.host) {
            " (straggler)"
        } else {
            ""
        };
        let _ = write!(s, " {}{star} |", h.host);
    }
    let _ = write!(s, "\n|---|");
    for _ in &m.hosts {
        let _ = write!(s, "---|");
    }
    let _ = writeln!(s);
    for (name, f) in cols {
        let _ = write!(s, "| {name} |");
        for h in &m.hosts {
            let _ = write!(s, " {} |", f(h));
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "\n## Per-host verdicts\n");
    for h in &m.hosts {
        let _ = writeln!(
            s,
            "- **{}** ({}, session `{}`{}): {}",
            h.host,
            h.hostname,
            h.session_dir,
            if h.complete { "" } else { ", partial" },
            h.headline
        );
    }
    let _ = writeln!(
        s,
        "\nThresholds: straggler when (max − min) / max of the reader I/O-wait share exceeds {:.2} and the \
         largest wait is at least {:.2}; hosts within {:.2} of the largest are stragglers too. \
         Each host's own report: `storprof report <session>`; every host's data is in the bundle under `hosts/`.",
        m.thresholds.straggler_imbalance,
        m.thresholds.straggler_min_io_wait_share,
        m.thresholds.straggler_near_max
    );
    s
}
