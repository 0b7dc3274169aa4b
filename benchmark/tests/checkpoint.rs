//! A tiny `--scale`d llama3-70b subset checkpoint into a temp dir: the
//! files each rank wrote (names and sizes from the layout), summary.json
//! and per_checkpoint.json, read-back bytes equal to written bytes, and the
//! summary's key shape against a golden file.
//! Re-bless with `STORPROF_BLESS=1 cargo test -p storprof-bench --test integration -- checkpoint::`.

use std::time::Duration;

use crate::common::golden;
use serde_json::Value;
use storprof_bench::run::checkpoint::{
    CheckpointOptions, Threads, checkpoint_dir_name,
    io::MANIFEST,
    layout::{Layout, LlamaModel, scaled},
    run_checkpoint,
};

/// `value` with every leaf replaced by its JSON type (and arrays by their
/// first element's shape), so the golden file pins keys, not measurements.
fn shape(value: &Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        Value::Array(a) => Value::Array(a.first().map(shape).into_iter().collect()),
        Value::String(_) => Value::String("string".into()),
        Value::Number(_) => Value::String("number".into()),
        Value::Bool(_) => Value::String("bool".into()),
        Value::Null => Value::Null,
    }
}

#[test]
fn scaled_subset_checkpoint_writes_the_layout_and_reads_it_back() {
    let tmp = tempfile::tempdir().unwrap();
    let folder = tmp.path().join("ckpt");
    let results = tmp.path().join("results");
    let scale = 20_000.0;
    let opts = CheckpointOptions {
        model: LlamaModel::Llama3_70b,
        subset: true,
        num_checkpoints_write: 2,
        num_checkpoints_read: 2,
        folder: folder.clone(),
        scale,
        block_size: 1 << 20,
        results_dir: Some(results.clone()),
        print: false,
        generator_probe: Duration::from_millis(20),
        ..CheckpointOptions::default()
    };
    let report = run_checkpoint(&opts, &Threads(8)).unwrap().unwrap();

    // Every rank's files, at the layout's sizes ÷ scale.
    let layout = Layout::new(LlamaModel::Llama3_70b, true, None).unwrap();
    let mut expected_bytes = 0u64;
    for k in 1..=2 {
        let dir = folder.join(checkpoint_dir_name(k));
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut want: Vec<String> = Vec::new();
        for rank in 0..8 {
            for f in layout.rank_files(rank) {
                let len = std::fs::metadata(dir.join(&f.name)).unwrap().len();
                assert_eq!(len, scaled(f.bytes, scale), "{}", f.name);
                expected_bytes += len;
                want.push(f.name);
            }
        }
        want.sort();
        assert_eq!(names, want);
        assert_eq!(names.len(), 16);
        assert!(names.contains(&"zero_pp_rank_0_mp_rank_7_optim_states.pt".to_string()));
    }
    assert!(folder.join(MANIFEST).exists());

    // The summary on disk is the one returned, and the bytes add up.
    let text = std::fs::read_to_string(results.join("summary.json")).unwrap();
    let summary: Value = serde_json::from_str(&text).unwrap();
    let bytes = &summary["bytes"];
    assert_eq!(bytes["written"].as_u64().unwrap(), expected_bytes);
    assert_eq!(bytes["read"].as_u64().unwrap(), expected_bytes);
    assert_eq!(bytes["fsynced"].as_u64().unwrap(), expected_bytes);
    assert_eq!(bytes["files_written"].as_u64().unwrap(), 32);
    // One fsync per file and one per rank directory per checkpoint.
    assert_eq!(bytes["fsyncs"].as_u64().unwrap(), 32 + 16);
    assert_eq!(report.summary.bytes.read, report.summary.bytes.written);
    assert_eq!(summary["mode"], "subset");
    assert_eq!(summary["num_processes"], 8);
    assert_eq!(summary["data_parallelism"], 8);
    assert_eq!(summary["model"], "llama3-70b");
    // Data per client is far below 3× memory: the caches were emptied.
    assert_ne!(summary["cache_drop"], "not_needed");

    // Per checkpoint: duration is the slowest rank's, throughput the slowest rank's.
    let details: Value = serde_json::from_str(
        &std::fs::read_to_string(results.join("per_checkpoint.json")).unwrap(),
    )
    .unwrap();
    for phase in ["save", "load"] {
        let list = details[phase].as_array().unwrap();
        assert_eq!(list.len(), 2);
        for c in list {
            let ranks = c["ranks"].as_array().unwrap();
            assert_eq!(ranks.len(), 8);
            let max = ranks
                .iter()
                .map(|r| r["duration_seconds"].as_f64().unwrap())
                .fold(0.0, f64::max);
            let min = ranks
                .iter()
                .map(|r| r["throughput_GB_per_second"].as_f64().unwrap())
                .fold(f64::INFINITY, f64::min);
            assert_eq!(c["duration_seconds"].as_f64().unwrap(), max);
            assert_eq!(c["throughput_GB_per_second"].as_f64().unwrap(), min);
        }
    }

    golden(
        "checkpoint_summary_shape.json",
        &(serde_json::to_string_pretty(&shape(&summary)).unwrap() + "\n"),
    );
}
