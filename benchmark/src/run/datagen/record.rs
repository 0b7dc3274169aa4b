//! The run's record, as mlpstorage's datagen writes it (hydra files,
//! metadata), plus `datagen.json`.
use super::{DatagenOptions, DatagenPlan, DatagenReport};
use crate::config;
use crate::error::BenchError;
use crate::run::mlpstorage::{self, RecordDir, RunRecord};

/// Record the run as mlpstorage's datagen does (hydra files, metadata) plus
/// `datagen.json`: the plan, the dataset-size rule and what this process wrote.
pub(super) fn write_record(
    opts: &DatagenOptions,
    p: &DatagenPlan,
    report: &DatagenReport,
    started: chrono::DateTime<chrono::Local>,
    ranks: usize,
) -> Result<(), BenchError> {
    let dir = match &opts.record {
        RecordDir::Off => return Ok(()),
        RecordDir::DefaultLayout => mlpstorage::default_dir(&p.cfg.model, "datagen", &started),
        RecordDir::At(d) => d.clone(),
    };
    // The workflow mlpstorage's datagen sets, so the record reads as one.
    let mut params = opts.params.clone();
    params.push("workflow.generate_data=True".into());
    params.push("workflow.train=False".into());
    let raw = config::load(
        opts.workload,
        opts.accelerator,
        opts.config_file.as_deref(),
        &params,
    )?;
    mlpstorage::write_run_record(
        &dir,
        &RunRecord {
            raw: &raw,
            model: &p.cfg.model,
            workload: mlpstorage::embedded_workload(
                opts.workload,
                opts.accelerator,
                opts.config_file.as_deref(),
            ),
            params: &params,
            command: "datagen",
            started,
            num_processes: ranks,
            metrics: None,
            division: opts.division,
        },
    )?;
    let summary = serde_json::json!({
        "model": p.cfg.model,
        "format": p.cfg.format,
        "data_dir": opts.data_dir,
        "num_files_train": p.cfg.num_files_train,
        "num_files_eval": p.cfg.num_files_eval,
        "num_subfolders_train": p.cfg.num_subfolders_train,
        "num_samples_per_file": p.cfg.num_samples_per_file,
        "estimated_bytes": p.estimated_bytes,
        "dataset_size_rule": p.size_rule,
        "size_rule_term": p.size_rule.deciding_term(),
        "client_memory_gb": p.memory_gb,
        "ranks": ranks,
        "this_process": report,
    });
    let path = dir.join("datagen.json");
    let text = serde_json::to_string_pretty(&summary)
        .map_err(|e| BenchError::Encoding(format!("{}: {e}", path.display())))?;
    std::fs::write(&path, text + "\n").map_err(|source| BenchError::Io { path, source })?;
    if opts.print {
        println!("Recorded the run in {}", dir.display());
    }
    Ok(())
}
