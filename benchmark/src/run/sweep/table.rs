//! The sweep's table: one row per (NP, RT) cell, rendered as markdown and
//! CSV (pure functions, golden-tested), with the AU projection.
//!
//! ```text
//!  [CellRow] + SweepHeader ─► markdown(): header, results table, projection table
//!                          ─► csv():            one row per cell
//!                          ─► projection_csv(): one row per cell × projected computation time
//! ```
use std::fmt::Write as _;

use super::project::{Projection, project};
use super::sched::CpuDemand;

/// What one cell measured.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CellFigures {
    /// DLIO's AU (%), mean over ranks and epochs.
    pub au_percentage: f64,
    /// DLIO's throughput, all ranks.
    pub samples_per_second: f64,
    /// Read bytes / wall time, measured (MiB/s).
    pub io_mib_per_second: f64,
    /// Training wall time, seconds.
    pub wall_seconds: f64,
    /// Steps rank 0 completed (all epochs).
    pub steps: u64,
    /// Measured I/O wait per counted step, seconds (None without counted steps).
    pub io_wait_per_step: Option<f64>,
    /// Mean measured computation time per counted step, seconds.
    pub computation_time: f64,
    /// The cell's runnable wait and CPU time.
    pub cpu: CpuDemand,
}

/// One cell of the grid.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CellRow {
    /// Simulated accelerators.
    pub np: usize,
    /// Read threads per accelerator.
    pub rt: u64,
    /// None when the cell did not run (refused, failed).
    pub figures: Option<CellFigures>,
    /// Notes column ("CPU constrained (...)", "refused by the memory guard ...").
    pub notes: Vec<String>,
}

impl CellRow {
    /// samples/s ÷ NP.
    pub fn per_accelerator(&self) -> Option<f64> {
        self.figures
            .as_ref()
            .map(|f| f.samples_per_second / self.np.max(1) as f64)
    }

    /// The projections of this cell at `times`.
    pub fn projections(&self, batch: u64, times: &[f64]) -> Vec<Option<Projection>> {
        let w = self.figures.as_ref().and_then(|f| f.io_wait_per_step);
        times
            .iter()
            .map(|&c| w.and_then(|w| project(w, batch, c)))
            .collect()
    }
}

/// The context printed above the table.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepHeader {
    /// e.g. "flux over s3://bench/ds".
    pub title: String,
    /// Configured computation time per step, seconds.
    pub computation_time: f64,
    pub batch_size: u64,
    pub reader: String,
    pub cpus: usize,
    /// When the sweep started (free text).
    pub started: String,
    /// Computation times to project to.
    pub project: Vec<f64>,
}

fn f(x: f64, decimals: usize) -> String {
    format!("{x:.decimals$}")
}

/// `0.5` → "0.5", `1.35` → "1.35" (shortest form for column names).
fn secs(x: f64) -> String {
    let s = format!("{x}");
    if s.contains('.') { s } else { format!("{s}.0") }
}

/// The markdown report: header, results table, projection table.
pub fn markdown(h: &SweepHeader, rows: &[CellRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# storprof sweep: {}\n", h.title);
    let ceiling = if h.computation_time > 0.0 {
        format!(
            "{:.2} samples/s per accelerator",
            h.batch_size as f64 / h.computation_time
        )
    } else {
        "none (computation_time 0)".into()
    };
    let _ = writeln!(
        s,
        "computation_time {} s · batch {} · ceiling batch/computation_time: {ceiling} · reader {} · {} CPUs · started {}\n",
        secs(h.computation_time),
        h.batch_size,
        h.reader,
        h.cpus,
        h.started
    );
    let _ = writeln!(
        s,
        "| NP | RT | AU % | samples/s | samples/s per accelerator | I/O MiB/s (measured) | Wall (s) | Steps | Notes |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in rows {
        let notes = r.notes.join("; ");
        match &r.figures {
            Some(x) => {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.np,
                    r.rt,
                    f(x.au_percentage, 2),
                    f(x.samples_per_second, 2),
                    f(r.per_accelerator().unwrap_or(0.0), 2),
                    f(x.io_mib_per_second, 1),
                    f(x.wall_seconds, 1),
                    x.steps,
                    notes
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "| {} | {} | — | — | — | — | — | — | {notes} |",
                    r.np, r.rt
                );
            }
        }
    }
    let _ = writeln!(
        s,
        "\nNP: simulated accelerators. RT: reader.read_threads per accelerator. AU and samples/s: DLIO's formulas. \
         I/O MiB/s: bytes the readers read ÷ wall time (measured, not DLIO's samples/s × record size). \
         Notes: \"CPU constrained\" when the run's threads waited ≥ 20 % of their CPU demand for a CPU \
         (runnable time in /proc/self/task/*/schedstat) and ≥ 0.1 threads waited on average."
    );
    if !h.project.is_empty() {
        let _ = writeln!(s, "\n## AU projection to other computation times\n");
        let _ = writeln!(
            s,
            "Each cell's measured I/O wait per step w held fixed: AU(c) = c / (c + w), samples/s per accelerator = \
             batch / (c + w) = AU × batch / c, never above the ceiling batch / c (samples/s does depend on the \
             computation time). Conservative: a longer computation lets prefetch hide more of the wait.\n"
        );
        let mut head = String::from("| NP | RT | I/O wait/step (ms) |");
        let mut rule = String::from("|---:|---:|---:|");
        for &c in &h.project {
            let _ = write!(
                head,
                " AU % at {} s | samples/s per accelerator at {} s (ceiling {}) |",
                secs(c),
                secs(c),
                if c > 0.0 {
                    f(h.batch_size as f64 / c, 2)
                } else {
                    "∞".into()
                }
            );
            rule.push_str("---:|---:|");
        }
        let _ = writeln!(s, "{head}\n{rule}");
        for r in rows {
            let w = r.figures.as_ref().and_then(|x| x.io_wait_per_step);
            let _ = write!(
                s,
                "| {} | {} | {} |",
                r.np,
                r.rt,
                w.map_or("—".into(), |w| f(w * 1e3, 2))
            );
            for p in r.projections(h.batch_size, &h.project) {
                match p {
                    Some(p) => {
                        let _ = write!(
                            s,
                            " {} | {} |",
                            f(p.au_percentage, 2),
                            f(p.samples_per_second_per_accelerator, 2)
                        );
                    }
                    None => s.push_str(" — | — |"),
                }
            }
            s.push('\n');
        }
    }
    s
}

fn csv_text(t: &str) -> String {
    if t.contains([',', '"', '\n']) {
        format!("\"{}\"", t.replace('"', "\"\""))
    } else {
        t.to_string()
    }
}

/// The CSV header of [`csv`].
pub const CSV_HEADER: &str = "np,rt,au_percent,samples_per_second,samples_per_second_per_accelerator,\
io_mib_per_second_measured,wall_seconds,steps,io_wait_per_step_ms,computation_time_per_step_s,\
runnable_wait_seconds,cpu_seconds,notes";

/// One line per cell; empty fields for cells that did not run.
pub fn csv(rows: &[CellRow]) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for r in rows {
        let notes = csv_text(&r.notes.join("; "));
        match &r.figures {
            Some(x) => {
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    r.np,
                    r.rt,
                    f(x.au_percentage, 4),
                    f(x.samples_per_second, 4),
                    f(r.per_accelerator().unwrap_or(0.0), 4),
                    f(x.io_mib_per_second, 4),
                    f(x.wall_seconds, 3),
                    x.steps,
                    x.io_wait_per_step.map_or(String::new(), |w| f(w * 1e3, 4)),
                    f(x.computation_time, 6),
                    f(x.cpu.runnable_wait_seconds, 3),
                    f(x.cpu.cpu_seconds, 3),
                    notes
                );
            }
            None => {
                let _ = writeln!(s, "{},{},,,,,,,,,,,{notes}", r.np, r.rt);
            }
        }
    }
    s
}

/// The CSV header of [`projection_csv`].
pub const PROJECTION_CSV_HEADER: &str = "np,rt,io_wait_per_step_ms,computation_time_s,au_percent,\
samples_per_second_per_accelerator,ceiling_samples_per_second";

/// One line per cell × projected computation time (cells without a measured wait are left out).
pub fn projection_csv(rows: &[CellRow], batch: u64, times: &[f64]) -> String {
    let mut s = String::from(PROJECTION_CSV_HEADER);
    s.push('\n');
    for r in rows {
        let Some(w) = r.figures.as_ref().and_then(|x| x.io_wait_per_step) else {
            continue;
        };
        for p in r.projections(batch, times).into_iter().flatten() {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{}",
                r.np,
                r.rt,
                f(w * 1e3, 4),
                p.computation_time,
                f(p.au_percentage, 4),
                f(p.samples_per_second_per_accelerator, 4),
                if p.ceiling_samples_per_second.is_finite() {
                    f(p.ceiling_samples_per_second, 4)
                } else {
                    String::new()
                }
            );
        }
    }
    s
}
