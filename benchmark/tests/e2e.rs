//! End-to-end: datagen writes a tiny DLIO dataset, bench runs over it with
//! every reader; bad input fails cleanly without writing anything.
use std::path::Path;

use storprof_bench::config::{Accelerator, Workload};
use storprof_bench::reader::ReaderKind;
use storprof_bench::run::bench::{BenchOptions, prepare};
use storprof_bench::run::datagen::{DatagenOptions, run_datagen};
use storprof_bench::storage::LocalStorage;

/// A flux dataset of 4 files × 8 rows with small columns (~33 KiB per row).
fn flux_params() -> Vec<String> {
    [
        "dataset.num_files_train=4",
        "dataset.num_samples_per_file=8",
        "dataset.parquet.row_group_size=4",
        "dataset.parquet.columns=[{name: t5_encodings, dtype: float32, size: 8192}, {name: clip_encodings, dtype: float32, size: 409}, {name: timestamp, dtype: float32, size: 7}]",
        "reader.batch_size=4",
        "reader.read_threads=2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A unet3d dataset of 16 files of ~256 KiB (4 steps per rank with 2 ranks).
fn unet3d_params() -> Vec<String> {
    [
        "dataset.num_files_train=16",
        "dataset.record_length_bytes=262144",
        "dataset.record_length_bytes_stdev=65536",
        "reader.batch_size=2",
        "reader.read_threads=2",
        "train.epochs=2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn generate(dir: &Path, workload: Workload, acc: Accelerator, params: Vec<String>) {
    let opts = DatagenOptions {
        workload: Some(workload),
        accelerator: acc,
        params,
        data_dir: dir.to_path_buf(),
        client_memory_gb: Some(1.0),
        print: false,
        ..DatagenOptions::default()
    };
    run_datagen(&opts, &LocalStorage::new(".")).unwrap();
}

fn list(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn datagen_writes_dlio_layout_and_refuses_overwrite() {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path(), Workload::Flux, Accelerator::B200, flux_params());
    let train = tmp.path().join("flux/train");
    assert_eq!(
        list(&train),
        vec![
            "img_0_of_4.parquet",
            "img_1_of_4.parquet",
            "img_2_of_4.parquet",
            "img_3_of_4.parquet"
        ]
    );
    let before = std::fs::metadata(train.join("img_0_of_4.parquet"))
        .unwrap()
        .modified()
        .unwrap();
    let opts = DatagenOptions {
        workload: Some(Workload::Flux),
        params: flux_params(),
        data_dir: tmp.path().to_path_buf(),
        print: false,
        ..DatagenOptions::default()
    };
    let e = run_datagen(&opts, &LocalStorage::new("."))
        .unwrap_err()
        .to_string();
    assert!(e.contains("--force") && e.contains("flux/train"), "{e}");
    let after = std::fs::metadata(train.join("img_0_of_4.parquet"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after, "nothing rewritten");
    let forced = DatagenOptions {
        force: true,
        ..opts
    };
    run_datagen(&forced, &LocalStorage::new(".")).unwrap();

    // valid/ when num_files_eval > 0, unet3d with zero-padded names
    let mut p = unet3d_params();
    p.push("dataset.num_files_train=10".into());
    p.push("dataset.num_files_eval=2".into());
    generate(tmp.path(), Workload::Unet3d, Accelerator::H100, p);
    let names = list(&tmp.path().join("unet3d/train"));
    assert_eq!(names.len(), 10);
    assert_eq!(names[0], "img_00_of_10.npz");
    assert_eq!(
        list(&tmp.path().join("unet3d/valid")),
        vec!["img_0_of_2.npz", "img_1_of_2.npz"]
    );
}

#[test]
fn datagen_refuses_a_dataset_larger_than_the_free_space_before_writing() {
    let tmp = tempfile::tempdir().unwrap();
    // A million 128 MiB unet3d files: 128 TiB, more than any test disk.
    let opts = DatagenOptions {
        workload: Some(Workload::Unet3d),
        accelerator: Accelerator::H100,
        params: vec![
            "dataset.num_files_train=1000000".into(),
            "dataset.record_length_bytes=134217728".into(),
        ],
        data_dir: tmp.path().to_path_buf(),
        client_memory_gb: Some(1.0),
        print: false,
        ..DatagenOptions::default()
    };
    let e = run_datagen(&opts, &LocalStorage::new("."))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not enough free space") && e.contains("dataset.num_files_train=N"),
        "{e}"
    );
    assert!(
        list(tmp.path()).is_empty(),
        "nothing written: {:?}",
        list(tmp.path())
    );
}

fn bench_opts(
    dir: &Path,
    workload: Workload,
    acc: Accelerator,
    params: Vec<String>,
) -> BenchOptions {
    BenchOptions {
        workload: Some(workload),
        accelerator: acc,
        params,
        data_dir: dir.to_path_buf(),
        computation_time: Some(0.002),
        results_dir: Some(dir.join("results")),
        print: false,
        ..BenchOptions::default()
    }
}

#[test]
fn bench_bad_input_fails_cleanly_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let storage = LocalStorage::new(".");
    let err = |o: &BenchOptions| {
        prepare(o, &storage)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };

    // missing data dir
    let o = bench_opts(
        &tmp.path().join("nope"),
        Workload::Flux,
        Accelerator::B200,
        flux_params(),
    );
    let e = err(&o);
    assert!(e.contains("nope") && e.contains("does not exist"), "{e}");

    // empty train dir
    std::fs::create_dir_all(tmp.path().join("flux/train")).unwrap();
    let o = bench_opts(tmp.path(), Workload::Flux, Accelerator::B200, flux_params());
    let e = err(&o);
    assert!(
        e.contains("no .parquet files") && e.contains("flux/train"),
        "{e}"
    );

    generate(tmp.path(), Workload::Flux, Accelerator::B200, flux_params());
    // default num_files_train (4296) with 4 files on disk
    let o = bench_opts(tmp.path(), Workload::Flux, Accelerator::B200, vec![]);
    let e = err(&o);
    assert!(
        e.contains("dataset.num_files_train") && e.contains("4296"),
        "{e}"
    );

    // zero steps
    let mut p = flux_params();
    p.push("reader.batch_size=64".into());
    let e = err(&bench_opts(
        tmp.path(),
        Workload::Flux,
        Accelerator::B200,
        p,
    ));
    assert!(e.contains("zero steps"), "{e}");

    // unknown key, wrong type
    let mut p = flux_params();
    p.push("reader.bach_size=4".into());
    let e = err(&bench_opts(
        tmp.path(),
        Workload::Flux,
        Accelerator::B200,
        p,
    ));
    assert!(
        e.contains("'reader.bach_size'") && e.contains("reader.batch_size"),
        "{e}"
    );
    let mut p = flux_params();
    p.push("train.epochs=two".into());
    let e = err(&bench_opts(
        tmp.path(),
        Workload::Flux,
        Accelerator::B200,
        p,
    ));
    assert!(e.contains("train.epochs"), "{e}");

    // unknown workload/accelerator combination
    let e = err(&bench_opts(
        tmp.path(),
        Workload::Flux,
        Accelerator::H100,
        flux_params(),
    ));
    assert!(e.contains("flux_h100"), "{e}");

    assert!(
        !tmp.path().join("results").exists(),
        "bad input must not write results"
    );
    let _ = ReaderKind::Raw;
}

fn run_all_readers(
    workload: Workload,
    acc: Accelerator,
    params: Vec<String>,
) -> Vec<(ReaderKind, serde_json::Value)> {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path(), workload, acc, params.clone());
    let mut out = Vec::new();
    for kind in [ReaderKind::Raw, ReaderKind::Decode, ReaderKind::DlioLegacy] {
        let mut o = bench_opts(tmp.path(), workload, acc, params.clone());
        o.reader = kind;
        o.accelerators = 2;
        o.results_dir = Some(tmp.path().join(format!("results-{kind:?}")));
        let report = storprof_bench::cli::run_bench_local(&o).unwrap();
        let dir = report.results_dir.clone();
        for f in [
            "summary.json",
            "0_per_epoch_stats.json",
            "1_output.json",
            "dlio.log",
            "dlio_config/config.yaml",
        ] {
            assert!(dir.join(f).exists(), "{kind:?}: missing {f}");
        }
        let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["num_accelerators"], 2);
        let m = &v["metric"];
        assert!(
            m["train_au_mean_percentage"].as_f64().unwrap() > 0.0,
            "{kind:?}: {m}"
        );
        assert!(
            m["train_throughput_mean_samples_per_second"]
                .as_f64()
                .unwrap()
                > 0.0
        );
        assert!(
            v["measured"]["read_bytes"].as_u64().unwrap() > 0,
            "{kind:?}"
        );
        let log = std::fs::read_to_string(dir.join("dlio.log")).unwrap();
        assert!(
            log.contains("[METRIC] Number of Simulated Accelerators: 2 \n"),
            "{log}"
        );
        out.push((kind, v));
    }
    out
}

#[test]
fn flux_bench_every_reader() {
    let runs = run_all_readers(Workload::Flux, Accelerator::B200, flux_params());
    let amp = |k: ReaderKind| {
        runs.iter().find(|(kind, _)| *kind == k).unwrap().1["measured"]["read_amplification"]
            .as_f64()
            .unwrap()
    };
    // 4 files × 8 rows, batches of 4 rows: raw reads about what it needs,
    // dlio-legacy re-reads a whole 4-row group per sample.
    assert!(
        amp(ReaderKind::Raw) < 1.5,
        "raw amplification {}",
        amp(ReaderKind::Raw)
    );
    assert!(
        amp(ReaderKind::DlioLegacy) > 2.0 * amp(ReaderKind::Raw),
        "legacy {} vs raw {}",
        amp(ReaderKind::DlioLegacy),
        amp(ReaderKind::Raw)
    );
    for (_, v) in &runs {
        assert_eq!(v["measured"]["record_size_bytes_derived"], 65536.0);
        assert_eq!(
            v["measured"]["record_size_bytes_real"],
            (8192.0 + 409.0 + 7.0) * 4.0
        );
    }
}

#[test]
fn unet3d_bench_every_reader() {
    let runs = run_all_readers(Workload::Unet3d, Accelerator::H100, unet3d_params());
    for (kind, v) in &runs {
        assert_eq!(v["epochs"], 2, "{kind:?}");
        assert_eq!(
            v["metric"]["train_au_percentage"].as_array().unwrap().len(),
            2
        );
        assert_eq!(v["measured"]["record_size_bytes_derived"], 262144.0);
    }
}
