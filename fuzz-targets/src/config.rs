//! `--config` YAML and `--param KEY=VALUE`: the input is the YAML text,
//! then the params, separated by NUL bytes. An empty YAML part stands for
//! the embedded flux_b200 workload (what `--workload flux` loads), so the
//! params are fuzzed over a valid base too. The typed configuration is then
//! derived as `bench` and `datagen` use it.

use std::sync::OnceLock;

use crate::{Seeds, repo_root};
use storprof_bench::config::{
    Accelerator, RawConfig, Workload, dataset_size_rule,
    rules::{Division, assess, check_overrides},
};
use storprof_bench::error::BenchError;

/// Params applied per input (a long list adds nothing but time).
const MAX_PARAMS: usize = 16;

pub fn seeds() -> Seeds {
    let dir = repo_root().join("benchmark/src/config/workloads");
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            if let Ok(text) = std::fs::read(entry.path()) {
                let name = entry.file_name().to_string_lossy().into_owned();
                out.push((format!("seed-{name}"), text));
            }
        }
    }
    for (i, params) in [
        "\0dataset.num_files_train=64\0reader.batch_size=4",
        "\0dataset.num_samples_per_file=3\0dataset.record_length_bytes=1024\0train.computation_time=0.5",
        "\0train.computation_time.stdev=0.1\0reader.read_threads=0\0reader.prefetch_size=7",
        "\0dataset.parquet_row_group_size=2\0dataset.format=npz\0workflow.checkpoint=False",
    ]
    .into_iter()
    .enumerate()
    {
        out.push((format!("seed-params-{i}"), params.as_bytes().to_vec()));
    }
    out
}

/// The embedded flux_b200 workload, parsed once: the same text every time,
/// so parsing it per input would only cost time.
fn flux_b200() -> Result<RawConfig, BenchError> {
    static FLUX: OnceLock<Option<RawConfig>> = OnceLock::new();
    FLUX.get_or_init(|| RawConfig::embedded(Workload::Flux, Accelerator::B200).ok())
        .clone()
        .ok_or_else(|| {
            BenchError::Internal("the embedded flux_b200 workload does not parse".into())
        })
}

pub fn run(data: &[u8]) {
    // Files and command-line arguments reach the parser as UTF-8 strings.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.split('\0');
    let yaml = parts.next().unwrap_or("");
    let params: Vec<String> = parts.take(MAX_PARAMS).map(str::to_string).collect();
    for division in [Division::Closed, Division::Open] {
        let _ = check_overrides(
            division,
            Some(Workload::Flux),
            Accelerator::B200,
            yaml.is_empty(),
            &params,
        );
    }
    let raw = if yaml.is_empty() {
        flux_b200()
    } else {
        RawConfig::parse(yaml, "fuzz.yaml")
    };
    let Ok(mut raw) = raw else {
        return;
    };
    for param in &params {
        if raw.apply_param(param).is_err() {
            return;
        }
    }
    let _ = raw.to_yaml();
    let _ = raw.to_hydra_yaml();
    let _ = raw.to_json();
    let _ = raw.ignored_keys();
    let Ok(cfg) = raw.to_config() else {
        return;
    };
    let _ = cfg.computation_time.dlio_repr();
    let record = cfg.record_size_real();
    let _ = cfg.record_size_dlio();
    let _ = cfg.parquet_read_columns();
    let _ = cfg.prefetch_factor();
    for comm_size in [1, 8] {
        let _ = cfg.steps_per_epoch(comm_size);
    }
    for c in &cfg.parquet_columns {
        let _ = c.element_bytes();
        let _ = c.mlpstorage_element_bytes();
    }
    let rule = dataset_size_rule(64.0, 1, 8, cfg.batch_size, cfg.num_samples_per_file, record);
    let _ = rule.deciding_term();
    let _ = rule.result_line();
    let _ = assess(&cfg, rule, Some(Division::Closed));
}
