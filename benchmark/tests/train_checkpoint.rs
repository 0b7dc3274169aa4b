//! `workflow.checkpoint` in `storprof bench`: a tiny unet3d run saves its
//! checkpoints where and when DLIO would, and reports them in DLIO's
//! summary.json metric keys, per-epoch stats, log lines and [METRIC] block.
use std::path::Path;

use storprof_bench::config::{Accelerator, Workload};
use storprof_bench::error::BenchError;
use storprof_bench::run::bench::{BenchOptions, prepare};
use storprof_bench::run::datagen::{DatagenOptions, run_datagen};
use storprof_bench::storage::LocalStorage;

/// 16 files of ~64 KiB: with batch 2 and 2 ranks, 4 steps per epoch.
fn dataset_params() -> Vec<String> {
    [
        "dataset.num_files_train=16",
        "dataset.record_length_bytes=65536",
        "dataset.record_length_bytes_stdev=0",
        "reader.batch_size=2",
        "reader.read_threads=1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn generate(dir: &Path) {
    let opts = DatagenOptions {
        workload: Some(Workload::Unet3d),
        accelerator: Accelerator::H100,
        params: dataset_params(),
        data_dir: dir.to_path_buf(),
        client_memory_gb: Some(1.0),
        print: false,
        ..DatagenOptions::default()
    };
    run_datagen(&opts, &LocalStorage::new(".")).unwrap();
}

fn opts(dir: &Path, extra: &[&str]) -> BenchOptions {
    let mut params = dataset_params();
    params.extend(extra.iter().map(|s| s.to_string()));
    BenchOptions {
        workload: Some(Workload::Unet3d),
        accelerator: Accelerator::H100,
        params,
        data_dir: dir.to_path_buf(),
        computation_time: Some(0.001),
        results_dir: Some(dir.join("results")),
        accelerators: 2,
        print: false,
        ..BenchOptions::default()
    }
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn dirs(folder: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn epoch_checkpoints_are_saved_timed_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path());
    let ck = tmp.path().join("ck");
    let folder = format!("checkpoint.checkpoint_folder={}", ck.display());
    let o = opts(
        tmp.path(),
        &[
            "train.epochs=3",
            "workflow.checkpoint=True",
            &folder,
            "checkpoint.checkpoint_after_epoch=2",
            "checkpoint.epochs_between_checkpoints=1",
            "model.model_size=300001",
        ],
    );
    let report = storprof_bench::cli::run_bench_local(&o).unwrap();
    // DLIO names a by-epoch checkpoint with the step after the epoch's last (4 + 1).
    assert_eq!(
        dirs(&ck),
        vec!["global_epoch2_step5", "global_epoch3_step5"]
    );
    for d in dirs(&ck) {
        // checkpoint.type defaults to rank_zero: rank 1 writes nothing.
        assert_eq!(dirs(&ck.join(&d)), vec!["model_states-0.pt"]);
        let len = std::fs::metadata(ck.join(&d).join("model_states-0.pt"))
            .unwrap()
            .len();
        assert_eq!(len, 300_001);
    }
    let dir = &report.results_dir;
    let summary = json(&dir.join("summary.json"));
    let m = &summary["metric"];
    let mean = m["save_checkpoint_duration_mean_seconds"].as_f64().unwrap();
    assert!(mean > 0.0, "{m}");
    assert!(
        m["save_checkpoint_duration_stdev_seconds"]
            .as_f64()
            .unwrap()
            >= 0.0
    );
    assert!(m["save_checkpoint_io_mean_GB_per_second"].as_f64().unwrap() > 0.0);
    let size = m["checkpoint_size_GB"].as_f64().unwrap();
    assert!(
        (size - 300_001.0 / (1u64 << 30) as f64).abs() < 1e-12,
        "{size}"
    );
    assert_eq!(summary["checkpoint"]["saved"], 2);
    assert_eq!(summary["checkpoint"]["bytes_written_all_ranks"], 600_002);
    // Training AU still covers both... all three epochs.
    assert_eq!(m["train_au_percentage"].as_array().unwrap().len(), 3, "{m}");

    let stats = json(&dir.join("0_per_epoch_stats.json"));
    assert!(stats["1"].get("save_ckpt1").is_none(), "{stats}");
    for e in ["2", "3"] {
        let c = &stats[e]["save_ckpt1"];
        assert_eq!(c["step"], 5, "{stats}");
        assert_eq!(c["bytes_written"], 300_001);
        assert!(c["duration"].as_f64().unwrap() > 0.0);
    }
    // Rank 1 saved (nothing) at the same points.
    let stats1 = json(&dir.join("1_per_epoch_stats.json"));
    assert_eq!(stats1["2"]["save_ckpt1"]["bytes_written"], 0);

    let log = std::fs::read_to_string(dir.join("dlio.log")).unwrap();
    for line in [
        "Starting saving checkpoint 1 after total step 5 for epoch 2",
        "Finished saving checkpoint 1 for epoch 3 in ",
        "[METRIC] Checkpoint save duration (seconds): ",
        "[METRIC] Checkpoint save I/O Throughput (GB/second): ",
    ] {
        assert!(log.contains(line), "missing {line:?} in\n{log}");
    }
}

#[test]
fn step_checkpoints_split_by_step_count_on_every_rank() {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path());
    let ck = tmp.path().join("steps");
    let folder = format!("checkpoint.checkpoint_folder={}", ck.display());
    let o = opts(
        tmp.path(),
        &[
            "train.epochs=2",
            "workflow.checkpoint=True",
            &folder,
            "checkpoint.steps_between_checkpoints=2",
            "checkpoint.type=all_ranks",
            "model.model_size=4096",
        ],
    );
    let report = storprof_bench::cli::run_bench_local(&o).unwrap();
    assert_eq!(
        dirs(&ck),
        vec![
            "global_epoch1_step2",
            "global_epoch1_step4",
            "global_epoch2_step2",
            "global_epoch2_step4"
        ]
    );
    for d in dirs(&ck) {
        assert_eq!(
            dirs(&ck.join(&d)),
            vec!["model_states-0.pt", "model_states-1.pt"]
        );
    }
    let stats = json(&report.results_dir.join("0_per_epoch_stats.json"));
    for e in ["1", "2"] {
        assert_eq!(stats[e]["save_ckpt1"]["step"], 2, "{stats}");
        assert_eq!(stats[e]["save_ckpt2"]["step"], 4, "{stats}");
    }
    let summary = json(&report.results_dir.join("summary.json"));
    assert_eq!(summary["checkpoint"]["saved"], 4);
    assert_eq!(summary["checkpoint"]["bytes_written_all_ranks"], 8 * 4096);
    // All ranks' bytes / rank 0's time.
    let size = summary["metric"]["checkpoint_size_GB"].as_f64().unwrap();
    assert!((size - 8192.0 / (1u64 << 30) as f64).abs() < 1e-12);
}

#[test]
fn nonsense_checkpoint_keys_are_refused_before_training() {
    let tmp = tempfile::tempdir().unwrap();
    generate(tmp.path());
    let storage = LocalStorage::new(".");
    for (param, key) in [
        (
            "checkpoint.steps_between_checkpoints=0",
            "checkpoint.steps_between_checkpoints",
        ),
        (
            "checkpoint.epochs_between_checkpoints=0",
            "checkpoint.epochs_between_checkpoints",
        ),
        (
            "checkpoint.checkpoint_after_epoch=0",
            "checkpoint.checkpoint_after_epoch",
        ),
        (
            "checkpoint.checkpoint_after_epoch=-2",
            "checkpoint.checkpoint_after_epoch",
        ),
        ("model.model_size=0", "model.model_size"),
        ("model.model_size=12.5", "model.model_size"),
        ("checkpoint.type=some_ranks", "checkpoint.type"),
        (
            "checkpoint.checkpoint_folder=s3://b/ck",
            "checkpoint.checkpoint_folder",
        ),
    ] {
        let o = opts(tmp.path(), &["workflow.checkpoint=True", param]);
        let e = prepare(&o, &storage).err().unwrap();
        let text = e.to_string();
        assert!(text.contains(key), "{param}: {text}");
        assert!(
            matches!(e, BenchError::BadParam { .. } | BenchError::Usage { .. }),
            "{param}: {e:?}"
        );
    }
    // The same keys without workflow.checkpoint change nothing.
    let o = opts(
        tmp.path(),
        &[
            "checkpoint.steps_between_checkpoints=0",
            "model.model_size=0",
        ],
    );
    assert!(prepare(&o, &storage).is_ok());
    assert!(!tmp.path().join("checkpoints").exists());
}
