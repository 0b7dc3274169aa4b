//! The sweep's SVG plot: per-accelerator throughput and AU against NP, one
//! line per RT (two panels side by side; the throughput panel shows the
//! ceiling batch / computation_time as a dashed line). Plain SVG text, no
//! plotting dependency.
use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::table::CellRow;

const W: f64 = 960.0;
const H: f64 = 400.0;
const PANEL_W: f64 = 400.0;
const PANEL_H: f64 = 260.0;
const TOP: f64 = 70.0;
const LEFTS: [f64; 2] = [80.0, 560.0];
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// What a panel plots of a cell.
type CellValue = Box<dyn Fn(&CellRow) -> Option<f64>>;

fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" axis maximum ≥ `v` (1, 2, 2.5, 5 × 10^k).
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= v {
            return m * p;
        }
    }
    10.0 * p
}

/// The plot. `ceiling` is batch / computation_time (None for computation_time 0).
pub fn svg(title: &str, rows: &[CellRow], ceiling: Option<f64>) -> String {
    let nps: Vec<usize> = rows
        .iter()
        .map(|r| r.np)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let rts: Vec<u64> = rows
        .iter()
        .map(|r| r.rt)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let x_of = |left: f64, np: usize| -> f64 {
        let i = nps.iter().position(|&n| n == np).unwrap_or(0);
        if nps.len() <= 1 {
            left + PANEL_W / 2.0
        } else {
            left + 20.0 + (PANEL_W - 40.0) * i as f64 / (nps.len() - 1) as f64
        }
    };
    let max_tp = rows
        .iter()
        .filter_map(CellRow::per_accelerator)
        .chain(ceiling)
        .fold(0.0, f64::max);
    let tp_max = nice_max(max_tp * 1.05);
    let panels: [(&str, f64, CellValue); 2] = [
        (
            "samples/s per accelerator",
            tp_max,
            Box::new(CellRow::per_accelerator),
        ),
        (
            "AU %",
            100.0,
            Box::new(|r: &CellRow| r.figures.as_ref().map(|f| f.au_percentage)),
        ),
    ];
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        W / 2.0,
        esc(title)
    );
    for (p, (label, ymax, value)) in panels.iter().enumerate() {
        let left = LEFTS[p];
        let bottom = TOP + PANEL_H;
        let y_of = |v: f64| bottom - PANEL_H * (v / ymax).clamp(0.0, 1.0);
        // Frame, grid, ticks.
        let _ = writeln!(
            s,
            r##"<rect x="{left}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#444"/>"##
        );
        for k in 0..=4 {
            let v = ymax * k as f64 / 4.0;
            let y = y_of(v);
            let _ = writeln!(
                s,
                r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                left + PANEL_W,
                left - 6.0,
                y + 4.0,
                if *ymax >= 10.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.2}")
                }
            );
        }
        for &np in &nps {
            let x = x_of(left, np);
            let _ = writeln!(
                s,
                r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{np}</text>"#,
                bottom + 16.0
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">NP (simulated accelerators)</text>"#,
            left + PANEL_W / 2.0,
            bottom + 34.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{left}" y="{:.1}" font-weight="bold">{label}</text>"#,
            TOP - 8.0
        );
        if p == 0
            && let Some(c) = ceiling
        {
            let y = y_of(c);
            let _ = writeln!(
                s,
                r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#888" stroke-dasharray="6 4"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#666">batch / computation_time = {c:.2}</text>"##,
                left + PANEL_W,
                left + PANEL_W - 4.0,
                y - 4.0
            );
        }
        // One line per RT.
        for (i, &rt) in rts.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let pts: Vec<(f64, f64)> = nps
                .iter()
                .filter_map(|&np| {
                    let r = rows.iter().find(|r| r.np == np && r.rt == rt)?;
                    Some((x_of(left, np), y_of(value(r)?)))
                })
                .collect();
            if pts.len() > 1 {
                let path: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                let _ = writeln!(
                    s,
                    r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
                    path.join(" ")
                );
            }
            for (x, y) in &pts {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}"/>"#
                );
            }
        }
    }
    // Legend.
    for (i, &rt) in rts.iter().enumerate() {
        let x = LEFTS[0] + i as f64 * 90.0;
        let y = H - 14.0;
        let _ = writeln!(
            s,
            r#"<line x1="{x}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="3"/><text x="{:.1}" y="{y}">RT={rt}</text>"#,
            y - 4.0,
            x + 22.0,
            y - 4.0,
            COLORS[i % COLORS.len()],
            x + 28.0
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axis() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(926.0), 1000.0);
        assert_eq!(nice_max(36.0), 50.0);
        assert_eq!(nice_max(2.1), 2.5);
    }

    #[test]
    fn one_line_per_rt_and_escaped_title() {
        let row = |np, rt, tp: Option<f64>| CellRow {
            np,
            rt,
            figures: tp.map(|tp| super::super::table::CellFigures {
                au_percentage: 90.0,
                samples_per_second: tp,
                io_mib_per_second: 1.0,
                wall_seconds: 1.0,
                steps: 10,
                io_wait_per_step: Some(0.001),
                computation_time: 0.05,
                cpu: Default::default(),
            }),
            notes: vec![],
        };
        let rows = vec![
            row(1, 1, Some(900.0)),
            row(2, 1, Some(1800.0)),
            row(1, 2, Some(910.0)),
            row(2, 2, None),
        ];
        let s = svg("a <b> & c", &rows, Some(960.0));
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("a &lt;b&gt; &amp; c"));
        // RT=1 has 2 points (a line in each panel); RT=2 only one point.
        assert_eq!(s.matches("<polyline").count(), 2);
        assert_eq!(s.matches("<circle").count(), 6);
        assert!(s.contains("RT=1") && s.contains("RT=2"));
        assert!(s.contains("batch / computation_time = 960.00"));
    }
}
