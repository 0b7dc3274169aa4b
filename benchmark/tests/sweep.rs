//! `storprof sweep` and the memory guard, end to end over a tiny local flux
//! dataset (4 files × 8 rows of ~33 KiB).
use crate::common;
use std::path::Path;

use crate::common::golden;
use clap::Parser;
use storprof_bench::cli::{BenchArgs, EXIT_USAGE, run_bench};
use storprof_bench::config::{Accelerator, Workload};
use storprof_bench::run::datagen::{DatagenOptions, run_datagen};
use storprof_bench::storage::LocalStorage;

fn flux_params() -> Vec<String> {
    [
        "dataset.num_files_train=4",
        "dataset.num_samples_per_file=8",
        "dataset.parquet.row_group_size=4",
        "dataset.parquet.columns=[{name: t5_encodings, dtype: float32, size: 8192}, {name: clip_encodings, dtype: float32, size: 409}, {name: timestamp, dtype: float32, size: 7}]",
        "reader.batch_size=4",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn generate(dir: &Path) {
    let opts = DatagenOptions {
        workload: Some(Workload::Flux),
        accelerator: Accelerator::B200,
        params: flux_params(),
        data_dir: dir.to_path_buf(),
        client_memory_gb: Some(1.0),
        print: false,
        ..DatagenOptions::default()
    };
    run_datagen(&opts, &LocalStorage::new(".")).unwrap();
}

#[derive(Parser)]
struct Bench {
    #[command(flatten)]
    args: BenchArgs,
}

fn bench_args(dir: &Path, results: &Path, extra: &[&str]) -> BenchArgs {
    let mut argv: Vec<String> = vec![
        "bench".into(),
        "--workload".into(),
        "flux".into(),
        "--data-dir".into(),
        dir.display().to_string(),
        "--results-dir".into(),
        results.display().to_string(),
        "--computation-time".into(),
        "0".into(),
    ];
    for p in flux_params() {
        argv.push("--param".into());
        argv.push(p);
    }
    argv.extend(extra.iter().map(|s| s.to_string()));
    Bench::try_parse_from(argv).unwrap().args
}

#[test]
fn memory_guard_refuses_too_large_settings_and_writes_nothing() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    generate(d.path());
    let results = d.path().join("results");
    // 64 read threads × 10^9 fetches in flight × one ~300 KiB unit: petabytes.
    let huge = [
        "--read-threads",
        "64",
        "--param",
        "reader.prefetch_workers=1000000000",
    ];
    let code = run_bench(&bench_args(d.path(), &results, &huge)).unwrap();
    assert_eq!(code, EXIT_USAGE, "refused as a usage error");
    assert!(!results.exists(), "nothing written");
    // The library error names the largest safe settings.
    let opts = bench_args(d.path(), &results, &huge).options();
    let e = storprof_bench::cli::run_bench_local(&opts).err().unwrap();
    let msg = format!("{e:#}");
    assert!(storprof_bench::cli::is_memory_refusal(&e), "{msg}");
    assert!(
        msg.contains("Largest safe settings: reader.prefetch_workers="),
        "{msg}"
    );
    assert!(msg.contains("--fit-memory"), "{msg}");
    assert!(!results.exists(), "nothing written");
    // --fit-memory caps the depth and runs.
    let mut fit = huge.to_vec();
    fit.push("--fit-memory");
    let code = run_bench(&bench_args(d.path(), &results, &fit)).unwrap();
    assert_eq!(code, 0);
    let cfg = std::fs::read_to_string(results.join("dlio_config/config.yaml")).unwrap();
    let depth: u64 = cfg
        .lines()
        .find_map(|l| l.trim().strip_prefix("prefetch_workers:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!((1..1_000_000_000).contains(&depth), "capped depth {depth}");
}

use storprof_bench::run::sweep::{
    self, SweepOptions,
    sched::CpuDemand,
    table::{self, CellFigures, CellRow, SweepHeader},
};

/// Seed 002's NP=1 and NP=8 cells (AU, samples/s, MiB/s as published), an OOM cell refused.
fn seed_rows() -> (SweepHeader, Vec<CellRow>) {
    let fig = |au: f64, sps: f64, mibs: f64, wall: f64, steps: u64, cpu: CpuDemand| CellFigures {
        au_percentage: au,
        samples_per_second: sps,
        io_mib_per_second: mibs,
        wall_seconds: wall,
        steps,
        io_wait_per_step: storprof_bench::run::sweep::project::io_wait_from_au(au, 0.05),
        computation_time: 0.05,
        cpu,
    };
    let calm = CpuDemand {
        runnable_wait_seconds: 1.0,
        cpu_seconds: 100.0,
        wall_seconds: 188.0,
    };
    let busy = CpuDemand {
        runnable_wait_seconds: 40.0,
        cpu_seconds: 60.0,
        wall_seconds: 58.0,
    };
    let row = |np, rt, f: Option<CellFigures>, notes: Vec<String>| CellRow {
        np,
        rt,
        figures: f,
        notes,
    };
    let f84 = fig(61.0, 4532.0, 9356.0, 58.0, 375, busy);
    let notes84 = sweep::run_notes(8, 4, 24, &f84);
    let rows = vec![
        row(
            1,
            1,
            Some(fig(96.8, 926.0, 1911.0, 188.0, 3000, calm)),
            vec![],
        ),
        row(8, 4, Some(f84), notes84),
        row(
            8,
            8,
            None,
            vec![
                "refused by the memory guard: needs ~28.40 GiB of reader memory, budget 21.60 GiB"
                    .into(),
            ],
        ),
    ];
    let header = SweepHeader {
        title: "flux over s3://bench/ds".into(),
        computation_time: 0.05,
        batch_size: 48,
        reader: "raw".into(),
        cpus: 24,
        started: "2026-05-11T12:00:00.000000".into(),
        project: vec![0.5, 1.35],
    };
    (header, rows)
}

#[test]
fn table_and_csv_golden() {
    let (h, rows) = seed_rows();
    assert_eq!(
        rows[1].notes,
        vec![
            "CPU constrained (runnable wait 40% of CPU demand, 0.69 threads waiting; NP×RT=32 on 24 CPUs)"
        ]
    );
    let md = table::markdown(&h, &rows);
    // The study's projection: NP=8 RT=4 at 0.5 s → 94.0 %, at 1.35 s → 97.7 %.
    assert!(
        md.contains("| 8 | 4 | 31.97 | 93.99 | 90.23 | 97.69 | 34.73 |"),
        "{md}"
    );
    golden("sweep_table.md", &md);
    golden("sweep.csv", &table::csv(&rows));
    golden(
        "sweep_projection.csv",
        &table::projection_csv(&rows, 48, &h.project),
    );
}

#[test]
fn sweep_runs_the_grid_over_a_tiny_dataset() {
    let d = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    generate(d.path());
    let results = d.path().join("sweep");
    let opts = SweepOptions {
        bench: storprof_bench::run::bench::BenchOptions {
            workload: Some(Workload::Flux),
            params: flux_params(),
            data_dir: d.path().to_path_buf(),
            computation_time: Some(0.002),
            print: false,
            ..Default::default()
        },
        nps: vec![1, 2],
        rts: vec![1, 2],
        project: vec![0.5],
        results_dir: Some(results.clone()),
        ..SweepOptions::default()
    };
    let report = sweep::run_sweep(&opts).unwrap();
    assert_eq!(report.rows.len(), 4);
    assert!(report.interrupted_by.is_none());
    let csv = std::fs::read_to_string(results.join(sweep::TABLE_CSV)).unwrap();
    let mut lines = csv.lines();
    // Same format as the golden file.
    let golden_csv = std::fs::read_to_string(common::data_dir().join("sweep.csv")).unwrap();
    assert_eq!(lines.next(), golden_csv.lines().next());
    let mut cells = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        assert!(f.len() >= 13, "{line}");
        let (np, rt): (usize, u64) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        let au: f64 = f[2].parse().unwrap();
        let sps: f64 = f[3].parse().unwrap();
        let per_acc: f64 = f[4].parse().unwrap();
        let steps: u64 = f[7].parse().unwrap();
        assert!(au > 0.0 && au <= 100.0, "{line}");
        assert!(
            (per_acc * np as f64 - sps).abs() < 1e-3 * sps.max(1.0),
            "{line}"
        );
        // 32 samples / batch 4 / NP steps per rank.
        assert_eq!(steps, 8 / np as u64, "{line}");
        assert!(f[5].parse::<f64>().unwrap() > 0.0, "measured MiB/s: {line}");
        cells.push((np, rt));
    }
    assert_eq!(cells, vec![(1, 1), (1, 2), (2, 1), (2, 2)]);
    for name in [
        sweep::TABLE_MD,
        sweep::PLOT_SVG,
        sweep::PROJECTION_CSV,
        sweep::CELLS_JSON,
    ] {
        assert!(results.join(name).is_file(), "{name}");
    }
    let md = std::fs::read_to_string(results.join(sweep::TABLE_MD)).unwrap();
    assert!(md.contains("| NP | RT | AU % | samples/s | samples/s per accelerator |"));
    assert!(md.contains("AU % at 0.5 s"));
    // Each cell has its own DLIO results.
    assert!(results.join("np2_rt1/summary.json").is_file());
    // A cell the memory guard refuses is a row, the others still run.
    let refused = SweepOptions {
        bench: storprof_bench::run::bench::BenchOptions {
            memory_available: Some(16 << 20),
            ..opts.bench.clone()
        },
        nps: vec![1],
        rts: vec![1],
        results_dir: Some(d.path().join("refused")),
        ..opts.clone()
    };
    let r = sweep::run_sweep(&refused).unwrap();
    assert!(r.rows[0].figures.is_none());
    assert!(
        r.rows[0].notes[0].contains("refused by the memory guard"),
        "{:?}",
        r.rows[0]
    );
    let csv = std::fs::read_to_string(d.path().join("refused").join(sweep::TABLE_CSV)).unwrap();
    assert!(csv.lines().nth(1).unwrap().starts_with("1,1,,"), "{csv}");
}
