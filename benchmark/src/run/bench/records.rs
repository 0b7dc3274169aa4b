//! The run's files beside DLIO's: mlpstorage's run record, each rank's
//! facts, JSON written whole.
use super::*;

/// The run's record for mlpstorage's report generator (see [`mlpstorage`]).
pub(super) fn write_mlpstorage_files(
    opts: &BenchOptions,
    p: &Prepared,
    results_dir: &Path,
    started: &DateTime<Local>,
    summary: &serde_json::Value,
) -> Result<(), BenchError> {
    let params = opts.effective_params();
    mlpstorage::write_run_record(
        results_dir,
        &mlpstorage::RunRecord {
            raw: &p.raw,
            model: &p.cfg.model,
            workload: mlpstorage::embedded_workload(
                opts.workload,
                opts.accelerator,
                opts.config_file.as_deref(),
            ),
            params: &params,
            command: "run",
            started: *started,
            num_processes: p.plan.comm_size,
            metrics: summary.get("metric"),
            division: opts.division,
        },
    )
}

/// `<rank>_output.json` `storprof{}`: the rank's host, its shard as the plan
/// assigns it (files touched in epoch 1, sample range) and what its readers
/// actually delivered.
pub(super) fn rank_facts_json(
    plan: &TrainPlan,
    rank: &RankResult,
    host: &str,
) -> serde_json::Value {
    let mut file_ids = std::collections::BTreeSet::new();
    let mut lo = u64::MAX;
    let mut hi = 0;
    let order = plan.rank_epoch_order(rank.rank, 1);
    let mut scratch = Vec::new();
    for i in 0..plan.batches_in(&order) {
        for &s in order.batch(i, plan.batch_size, &mut scratch) {
            lo = lo.min(s);
            hi = hi.max(s + 1);
            file_ids.insert(s / plan.samples_per_file.max(1));
        }
    }
    let files: Vec<&str> = file_ids
        .into_iter()
        .filter_map(|f| plan.files.get(usize::try_from(f).ok()?))
        .map(|name| name.rsplit('/').next().unwrap_or(name))
        .collect();
    let mut read = ReadStats::default();
    for e in &rank.epochs {
        read += e.read;
    }
    serde_json::json!({
        "rank": rank.rank,
        "comm_size": plan.comm_size,
        "host": host,
        "epoch1_files": files,
        "epoch1_samples": if lo == u64::MAX { serde_json::json!([]) } else { serde_json::json!([lo, hi]) },
        "samples_read": read.samples,
        "read_bytes": read.bytes_read,
    })
}

pub(super) fn write_json(path: &Path, v: &serde_json::Value) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(v)
        .map_err(|e| BenchError::Encoding(format!("{}: {e}", path.display())))?;
    std::fs::write(path, text + "\n").map_err(|source| BenchError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// DLIO's checkpoint metrics and the run's checkpoint facts, into the
/// summary object `o`.
pub(super) fn add_checkpoint_summary(
    o: &mut serde_json::Map<String, serde_json::Value>,
    c: &crate::config::checkpoint::TrainingCheckpoints,
    cm: &TrainingCheckpointMetrics,
    result: &TrainResult,
) {
    if let Some(serde_json::Value::Object(metric)) = o.get_mut("metric") {
        for (k, v) in [
            (
                "save_checkpoint_io_mean_GB_per_second",
                cm.save_checkpoint_io_mean_GB_per_second,
            ),
            (
                "save_checkpoint_io_stdev_GB_per_second",
                cm.save_checkpoint_io_stdev_GB_per_second,
            ),
            (
                "save_checkpoint_duration_mean_seconds",
                cm.save_checkpoint_duration_mean_seconds,
            ),
            (
                "save_checkpoint_duration_stdev_seconds",
                cm.save_checkpoint_duration_stdev_seconds,
            ),
            ("checkpoint_size_GB", cm.checkpoint_size_GB),
        ] {
            metric.insert(k.into(), serde_json::json!(v));
        }
    }
    let written: u64 = result
        .ranks
        .iter()
        .flat_map(|r| r.epochs.iter().flat_map(|e| e.checkpoints.iter()))
        .map(|s| s.bytes)
        .sum();
    o.insert(
        "checkpoint".into(),
        serde_json::json!({
            "folder": c.folder.to_string_lossy(),
            "schedule": c.schedule,
            "writers": c.writers,
            "model_bytes": c.model_bytes,
            "fsync": c.fsync,
            "saved": cm.count,
            "bytes_written_all_ranks": written,
        }),
    );
}

/// Each rank's `<rank>_per_epoch_stats.json` and `<rank>_output.json`
/// (with storprof's facts of the rank) under `results_dir`.
pub(super) fn write_rank_files(
    results_dir: &Path,
    plan: &TrainPlan,
    result: &TrainResult,
    per_rank_blocks: &[Vec<BlockMetrics>],
    host_of_rank: &dyn Fn(usize) -> String,
    checkpoint_bytes: u64,
    wall: &dyn Fn(f64) -> String,
) -> Result<(), BenchError> {
    for (rank, blocks) in result.ranks.iter().zip(per_rank_blocks) {
        write_json(
            &results_dir.join(format!("{}_per_epoch_stats.json", rank.rank)),
            &output::per_epoch_stats_json_with(&rank.epochs, checkpoint_bytes, &wall),
        )?;
        let mut out = output::rank_output_json(&rank.epochs, blocks);
        let host = host_of_rank(rank.rank);
        if let serde_json::Value::Object(o) = &mut out {
            o.insert("storprof".into(), rank_facts_json(plan, rank, &host));
        }
        write_json(
            &results_dir.join(format!("{}_output.json", rank.rank)),
            &out,
        )?;
    }
    Ok(())
}
