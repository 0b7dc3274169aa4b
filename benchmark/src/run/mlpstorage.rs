//! What mlpstorage's report generator reads from a run directory besides
//! DLIO's own files, written by `bench` (`run/<ts>`) and `datagen`
//! (`datagen/<ts>`): hydra's `dlio_config/{config,overrides,hydra}.yaml`
//! (the composed workload under `workload:`, the
//! `workload=<model>_<accelerator>` choice and each `++workload.KEY=VALUE`
//! override) and `training_<YYYYMMDD_HHMMSS>_metadata.json` with the fields
//! its results parser takes as complete.
//!
//! ```text
//!  RunRecord (config tree, workload choice, overrides, command, ranks, metrics)
//!     ─► write_run_record(dir) ─► dir/dlio_config/*.yaml, dir/training_<ts>_metadata.json
//! ```
use std::path::{Path, PathBuf};

use chrono::{DateTime, Local};

use crate::config::rules::Division;
use crate::config::{Accelerator, RawConfig, Workload};
use crate::error::BenchError;

/// One run as mlpstorage records it.
pub struct RunRecord<'a> {
    /// The effective configuration.
    pub raw: &'a RawConfig,
    /// DLIO's `model.name`.
    pub model: &'a str,
    /// The embedded workload, `None` with a `--config` file.
    pub workload: Option<(Workload, Accelerator)>,
    /// The effective `KEY=VALUE` overrides.
    pub params: &'a [String],
    /// mlpstorage's command: "run" or "datagen".
    pub command: &'a str,
    pub started: DateTime<Local>,
    /// MPI processes (simulated accelerators).
    pub num_processes: usize,
    /// DLIO's `metric` object of a run; `None` for datagen.
    pub metrics: Option<&'a serde_json::Value>,
    pub division: Option<Division>,
}

/// The embedded workload a run's record names: `None` when a `--config`
/// file replaced the embedded configurations.
pub fn embedded_workload(
    workload: Option<Workload>,
    accelerator: Accelerator,
    config_file: Option<&std::path::Path>,
) -> Option<(Workload, Accelerator)> {
    workload
        .filter(|_| config_file.is_none())
        .map(|w| (w, accelerator))
}

/// Where a run's record goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RecordDir {
    /// No record (the library default).
    #[default]
    Off,
    /// [`default_dir`], mlpstorage's layout under `./results`.
    DefaultLayout,
    /// This directory.
    At(PathBuf),
}

/// `results/training/<model>/<command>/<YYYYMMDD_HHMMSS>`, mlpstorage's layout.
pub fn default_dir(model: &str, command: &str, started: &DateTime<Local>) -> PathBuf {
    PathBuf::from("results/training")
        .join(model)
        .join(command)
        .join(started.format("%Y%m%d_%H%M%S").to_string())
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError {
    let path = path.to_path_buf();
    move |source| BenchError::Io { path, source }
}

/// Write `r`'s hydra files and metadata into `dir` (created if needed).
pub fn write_run_record(dir: &Path, r: &RunRecord<'_>) -> Result<(), BenchError> {
    let cfg_dir = dir.join("dlio_config");
    std::fs::create_dir_all(&cfg_dir).map_err(io(&cfg_dir))?;
    let write = |path: PathBuf, text: String| std::fs::write(&path, text).map_err(io(&path));
    write(cfg_dir.join("config.yaml"), r.raw.to_hydra_yaml())?;
    let mut overrides: Vec<String> = Vec::new();
    if let Some((w, a)) = r.workload {
        overrides.push(format!("workload={w}_{a}"));
    }
    overrides.extend(r.params.iter().map(|kv| format!("++workload.{kv}")));
    write(
        cfg_dir.join("overrides.yaml"),
        serde_yaml::to_string(&overrides).unwrap_or_default(),
    )?;
    write(
        cfg_dir.join("hydra.yaml"),
        format!(
            "hydra:\n  run:\n    dir: {}\n  output_subdir: dlio_config\n  job:\n    name: storprof-{}\n",
            dir.display(),
            r.command
        ),
    )?;
    let stamp = r.started.format("%Y%m%d_%H%M%S").to_string();
    let override_parameters: serde_json::Map<String, serde_json::Value> = r
        .params
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            (
                k.trim().to_string(),
                serde_json::Value::String(v.to_string()),
            )
        })
        .collect();
    let metadata = serde_json::json!({
        "benchmark_type": "training",
        "model": r.model,
        "command": r.command,
        "run_datetime": stamp,
        "num_processes": r.num_processes,
        "accelerator": r.workload.map(|(_, a)| a.name()),
        "parameters": r.raw.to_json(),
        "override_parameters": override_parameters,
        "metrics": r.metrics,
        "division": r.division,
        "generator": format!("storprof {}", if r.command == "run" { "bench" } else { r.command }),
    });
    let path = dir.join(format!("training_{stamp}_metadata.json"));
    let text = serde_json::to_string_pretty(&metadata)
        .map_err(|e| BenchError::Encoding(format!("{}: {e}", path.display())))?;
    write(path, text + "\n")
}
