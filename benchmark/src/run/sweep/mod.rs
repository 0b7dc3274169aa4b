//! `storprof sweep`: the NP × RT grid of seed 002's study as one command.
//!
//! ```text
//!  SweepOptions ─► for NP in --np, RT in --rt (in-process ranks, one bench run per cell):
//!      CpuMeter::start ─► run::bench::run_bench_on (memory guard first) ─► CpuMeter::stop
//!      BenchReport ─► CellRow {AU, samples/s, measured MiB/s, wall, steps, I/O wait/step, notes}
//!      after every cell: sweep.md, sweep.csv, projection.csv, sweep.svg, sweep.json rewritten
//!  cells' own DLIO results: DIR/np<N>_rt<R>/ (summary.json, [METRIC] in dlio.log, ...)
//! ```
//! Ctrl-C stops the running cell at a step boundary (its partial figures are
//! kept, marked interrupted) and ends the sweep; the finished cells' table is
//! already on disk. A cell the memory guard refuses is a row with a note.
pub mod plot;
pub mod project;
pub mod sched;
pub mod table;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use chrono::Local;
use indicatif::{ProgressBar, ProgressStyle};

use super::bench::{self, BenchOptions, BenchReport};
use super::interrupt;
use crate::error::BenchError;
use crate::storage::{S3Options, Storage};
use table::{CellFigures, CellRow, SweepHeader};

/// Options of a sweep. Defaults: NP 1,2,4, RT 1,2,4, no projection,
/// results under `results/sweep/<model>/<YYYYMMDD_HHMMSS>/`, quiet.
#[derive(Clone, Debug)]
pub struct SweepOptions {
    /// Everything a cell's bench run takes; `accelerators`, `read_threads`,
    /// `results_dir`, `print` and `progress` are set per cell.
    pub bench: BenchOptions,
    pub s3: S3Options,
    /// Simulated accelerators per cell.
    pub nps: Vec<usize>,
    /// Read threads per accelerator per cell.
    pub rts: Vec<u64>,
    /// Computation times (s) to project each cell's AU to.
    pub project: Vec<f64>,
    pub results_dir: Option<PathBuf>,
    /// A progress bar over the cells (only meaningful on a terminal).
    pub progress: bool,
    /// Print a line per cell and the table at the end.
    pub print: bool,
}

impl Default for SweepOptions {
    fn default() -> Self {
        SweepOptions {
            bench: BenchOptions::default(),
            s3: S3Options::default(),
            nps: vec![1, 2, 4],
            rts: vec![1, 2, 4],
            project: Vec::new(),
            results_dir: None,
            progress: false,
            print: false,
        }
    }
}

/// What a sweep produced.
#[derive(Clone, Debug)]
pub struct SweepReport {
    pub results_dir: PathBuf,
    pub rows: Vec<CellRow>,
    /// Cells the memory guard refused.
    pub memory_refusals: usize,
    /// The signal that stopped the sweep early, if one did.
    pub interrupted_by: Option<i32>,
}

/// The files a sweep writes in its results directory.
pub const TABLE_MD: &str = "sweep.md";
pub const TABLE_CSV: &str = "sweep.csv";
pub const PROJECTION_CSV: &str = "projection.csv";
pub const PLOT_SVG: &str = "sweep.svg";
pub const CELLS_JSON: &str = "sweep.json";

/// A cell's figures from its bench report and CPU measurement.
pub fn cell_figures(report: &BenchReport, cpu: sched::CpuDemand) -> CellFigures {
    let blocks: Vec<&crate::metrics::BlockTimings> = report
        .result
        .ranks
        .iter()
        .flat_map(|r| r.epochs.iter().take(report.epochs_in_metrics))
        .map(|e| &e.block)
        .collect();
    let (mut steps_counted, mut compute) = (0usize, 0.0);
    for b in &blocks {
        let (n, c, _) = project::counted_totals(b, report.exclude);
        steps_counted += n;
        compute += c;
    }
    CellFigures {
        au_percentage: report.metrics.train_au_mean_percentage,
        samples_per_second: report.metrics.train_throughput_mean_samples_per_second,
        io_mib_per_second: report.measured.read_mib_per_second,
        wall_seconds: report.measured.elapsed_seconds,
        steps: report.result.ranks.first().map_or(0, |r| {
            r.epochs.iter().map(|e| e.block.compute.len() as u64).sum()
        }),
        io_wait_per_step: project::io_wait_per_step(blocks.iter().copied(), report.exclude),
        computation_time: if steps_counted > 0 {
            compute / steps_counted as f64
        } else {
            0.0
        },
        cpu,
    }
}

/// The notes of a cell that ran.
pub fn run_notes(np: usize, rt: u64, cpus: usize, f: &CellFigures) -> Vec<String> {
    let mut notes = Vec::new();
    if f.cpu.constrained() {
        notes.push(format!(
            "CPU constrained (runnable wait {:.0}% of CPU demand, {:.2} threads waiting; NP×RT={} on {cpus} CPUs)",
            f.cpu.wait_share() * 100.0,
            f.cpu.waiting_threads(),
            np as u64 * rt.max(1)
        ));
    }
    notes
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

/// Run the grid. Errors only when no cell could run (the first cell's error).
pub fn run_sweep(opts: &SweepOptions) -> Result<SweepReport, BenchError> {
    let SweepSetup {
        storage,
        results_dir,
        header,
    } = prepare_sweep(opts)?;
    let cells: Vec<(usize, u64)> = opts
        .nps
        .iter()
        .flat_map(|&np| opts.rts.iter().map(move |&rt| (np, rt)))
        .collect();
    let bar = opts.progress.then(|| cells_progress_bar(cells.len()));
    let say = |line: &str| match &bar {
        Some(b) => b.println(line),
        None if opts.print => println!("{line}"),
        None => {}
    };
    if opts.bench.handle_signals {
        interrupt::install()?;
    }
    let mut rows: Vec<CellRow> = Vec::new();
    let mut tally = SweepTally::default();
    for &(np, rt) in &cells {
        if opts.bench.handle_signals && interrupt::STOP.load(Ordering::SeqCst) {
            tally.interrupted_by = Some(interrupt::received().unwrap_or(libc::SIGINT));
            break;
        }
        if let Some(b) = &bar {
            b.set_message(format!("NP={np} RT={rt}"));
        }
        let cell_opts = BenchOptions {
            accelerators: np,
            read_threads: Some(rt),
            results_dir: Some(results_dir.join(format!("np{np}_rt{rt}"))),
            print: false,
            progress: false,
            ..opts.bench.clone()
        };
        let meter = sched::CpuMeter::start();
        let outcome = run_cell(&cell_opts, &storage);
        let cpu = meter.stop();
        rows.push(cell_row(
            (np, rt),
            header.cpus,
            outcome,
            cpu,
            &say,
            &mut tally,
        ));
        write_outputs(&results_dir, &header, &rows)?;
        if let Some(b) = &bar {
            b.inc(1);
        }
        if tally.interrupted_by.is_some() {
            break;
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if rows.iter().all(|r| r.figures.is_none())
        && let Some(e) = tally.first_error
    {
        return Err(e);
    }
    if opts.print {
        println!("{}", table::markdown(&header, &rows));
        println!("Saved the sweep in {}", results_dir.display());
    }
    Ok(SweepReport {
        results_dir,
        rows,
        memory_refusals: tally.memory_refusals,
        interrupted_by: tally.interrupted_by,
    })
}

/// What every cell of a sweep shares, checked before any cell runs.
struct SweepSetup {
    /// The dataset's storage.
    storage: Arc<dyn Storage>,
    /// Where the sweep's files and the cells' results go.
    results_dir: PathBuf,
    header: SweepHeader,
}

/// Checks the grid, the configuration and the data dir (errors that every
/// cell would hit), and opens the storage.
fn prepare_sweep(opts: &SweepOptions) -> Result<SweepSetup, BenchError> {
    if opts.nps.is_empty() || opts.rts.is_empty() || opts.nps.contains(&0) {
        return Err(BenchError::usage(
            "--np",
            "--np and --rt need at least one value each, NP ≥ 1".into(),
        ));
    }
    let cfg = opts.bench.raw_config()?.to_config()?;
    let data_dir = opts.bench.data_dir.to_string_lossy().to_string();
    let storage: Arc<dyn Storage> =
        super::bench_storage(&data_dir, &cfg, opts.bench.reader, &opts.s3)?;
    // Before any cell runs or any result is written: every cell would fail.
    super::bench::missing_data_dir(&opts.bench, storage.as_ref())?;
    let results_dir = opts.results_dir.clone().unwrap_or_else(|| {
        PathBuf::from("results/sweep")
            .join(&cfg.model)
            .join(Local::now().format("%Y%m%d_%H%M%S").to_string())
    });
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let header = SweepHeader {
        title: format!("{} over {data_dir}", cfg.model),
        computation_time: cfg.computation_time.mean,
        batch_size: cfg.batch_size,
        reader: format!("{:?}", opts.bench.reader).to_lowercase(),
        cpus,
        started: crate::output::ts(&Local::now()),
        project: opts.project.clone(),
    };
    Ok(SweepSetup {
        storage,
        results_dir,
        header,
    })
}

/// A progress bar over `cells` cells.
fn cells_progress_bar(cells: usize) -> ProgressBar {
    let b = ProgressBar::new(cells as u64);
    if let Ok(st) =
        ProgressStyle::with_template("sweep [{bar:30}] {pos}/{len} cells  {msg}  {elapsed_precise}")
    {
        b.set_style(st.progress_chars("=> "));
    }
    b
}

/// What a sweep counts across its cells.
#[derive(Default)]
struct SweepTally {
    /// The first failed cell's error.
    first_error: Option<BenchError>,
    /// The signal that stopped the sweep early, if one did.
    interrupted_by: Option<i32>,
    /// Cells the memory guard refused.
    memory_refusals: usize,
}

/// The row of cell `(np, rt)` from its bench run's outcome and CPU
/// measurement: its figures and notes, or why it has none. Says a line
/// about it and counts it in `tally`.
fn cell_row(
    (np, rt): (usize, u64),
    cpus: usize,
    outcome: Result<BenchReport, BenchError>,
    cpu: sched::CpuDemand,
    say: &dyn Fn(&str),
    tally: &mut SweepTally,
) -> CellRow {
    match outcome {
        Ok(report) => {
            let f = cell_figures(&report, cpu);
            let mut notes = run_notes(np, rt, cpus, &f);
            if let Some(sig) = report.interrupted_by {
                notes.push(format!(
                    "interrupted by {} after {} steps",
                    interrupt::signal_name(sig),
                    f.steps
                ));
                tally.interrupted_by = Some(sig);
            }
            say(&format!(
                "NP={np} RT={rt}: AU {:.2} %, {:.2} samples/s ({:.2} per accelerator), {:.1} MiB/s measured, {:.1} s{}",
                f.au_percentage,
                f.samples_per_second,
                f.samples_per_second / np as f64,
                f.io_mib_per_second,
                f.wall_seconds,
                if notes.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", notes.join("; "))
                }
            ));
            CellRow {
                np,
                rt,
                figures: Some(f),
                notes,
            }
        }
        Err(BenchError::MemoryGuard {
            estimate,
            budget,
            message,
        }) => {
            say(&format!("NP={np} RT={rt}: refused: {message}"));
            tally.memory_refusals += 1;
            CellRow {
                np,
                rt,
                figures: None,
                notes: vec![format!(
                    "refused by the memory guard: needs ~{} of reader memory, budget {}",
                    gib(estimate),
                    gib(budget)
                )],
            }
        }
        Err(e) => {
            say(&format!("NP={np} RT={rt}: failed: {e}"));
            let note = format!("failed: {e}");
            if tally.first_error.is_none() {
                tally.first_error = Some(e);
            }
            CellRow {
                np,
                rt,
                figures: None,
                notes: vec![note],
            }
        }
    }
}

/// One cell: a bench run with all ranks in this process.
fn run_cell(opts: &BenchOptions, storage: &Arc<dyn Storage>) -> Result<BenchReport, BenchError> {
    super::run_bench_over(opts, storage, &bench::InProcess(opts.accelerators))?
        .ok_or_else(|| BenchError::Internal("the in-process run produced no report".into()))
}

/// Write the table, CSVs, plot and JSON for the cells so far.
pub fn write_outputs(dir: &Path, header: &SweepHeader, rows: &[CellRow]) -> Result<(), BenchError> {
    let io = |path: PathBuf| move |source| BenchError::Io { path, source };
    std::fs::create_dir_all(dir).map_err(io(dir.to_path_buf()))?;
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io(path))
    };
    write(TABLE_MD, table::markdown(header, rows))?;
    write(TABLE_CSV, table::csv(rows))?;
    if !header.project.is_empty() {
        write(
            PROJECTION_CSV,
            table::projection_csv(rows, header.batch_size, &header.project),
        )?;
    }
    let ceiling =
        (header.computation_time > 0.0).then(|| header.batch_size as f64 / header.computation_time);
    write(PLOT_SVG, plot::svg(&header.title, rows, ceiling))?;
    write(
        CELLS_JSON,
        serde_json::to_string_pretty(rows).unwrap_or_default() + "\n",
    )?;
    Ok(())
}
