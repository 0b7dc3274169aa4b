//! `storprof sweep` and the memory guard, end to end over a tiny local flux
//! dataset (4 files × 8 rows of ~33 KiB).
#![allow(clippy::unwrap_used)]
use std::path::Path;

use clap::Parser;
use storprof_bench::cli::{BenchArgs, EXIT_USAGE, run_bench};
use storprof_bench::config::{Accelerator, Workload};
use storprof_bench::datagen::{DatagenOptions, run_datagen};
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
    let huge = ["--read-threads", "64", "--param", "reader.prefetch_workers=1000000000"];
    let code = run_bench(&bench_args(d.path(), &results, &huge)).unwrap();
    assert_eq!(code, EXIT_USAGE, "refused as a usage error");
    assert!(!results.exists(), "nothing written");
    // The library error names the largest safe settings.
    let opts = bench_args(d.path(), &results, &huge).options();
    let e = storprof_bench::cli::run_bench_local(&opts).err().unwrap();
    let msg = format!("{e:#}");
    assert!(storprof_bench::cli::is_memory_refusal(&e), "{msg}");
    assert!(msg.contains("Largest safe settings: reader.prefetch_workers="), "{msg}");
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
