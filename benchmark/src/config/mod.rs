//! DLIO workload configuration.
//!
//! ```text
//!  embedded <model>_<accelerator>.yaml  ─┐
//!  or --config FILE.yaml (DLIO workload) ─┴─► RawConfig (YAML tree)
//!                 --param KEY=VALUE ─────────► RawConfig::set (key checked against keys::KNOWN_KEYS)
//!                                               │ validate: every leaf known, right type
//!                                               ▼
//!                                          DlioConfig (typed, DLIO defaults filled in)
//! ```
//!
//! Keys are DLIO's dotted keys (`dataset.num_files_train`); a leading
//! `workload.` or `++workload.` (hydra override syntax) is accepted too.
//! Values in `--param` are parsed as YAML, so `64`, `0.05`, `True` and
//! `{mean: 1.0, stdev: 0.1}` all work.
pub mod checkpoint;
mod dlio;
pub mod keys;
mod raw;
pub mod rules;
mod size_rule;

pub use dlio::*;
pub use raw::*;
pub use size_rule::*;

use std::fmt;
use std::path::Path;

use serde_yaml::{Mapping, Value};

use crate::error::BenchError;
use crate::format::FormatKind;
use checkpoint::{CheckpointSchedule, CheckpointWriters, TrainingCheckpoints};
use keys::{Effect, KeyType};

/// A benchmark workload (DLIO's `model.name`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Flux (Parquet, 2,164,832 B rows).
    Flux,
    /// 3D U-Net (NPZ, ~146.6 MB per sample).
    Unet3d,
    /// RetinaNet (one 322,957 B JPEG per sample, 1.17 M files).
    Retinanet,
    /// ResNet-50 (TFRecord, 1251 records of ~114.7 KB per file).
    Resnet50,
    /// CosmoFlow (TFRecord, one ~2.8 MB record per file).
    Cosmoflow,
    /// DLRM (Parquet, 200 scalar columns of which 40 are read, 4.7 M rows per file).
    Dlrm,
}

impl Workload {
    /// The accelerator a workload runs on when none is named: b200 (MLPerf
    /// Storage v3.0's), or h100 for resnet50 and cosmoflow, which DLIO has
    /// for a100 and h100 only.
    pub fn default_accelerator(self) -> Accelerator {
        match self {
            Workload::Resnet50 | Workload::Cosmoflow => Accelerator::H100,
            _ => Accelerator::B200,
        }
    }

    /// DLIO's model name, also the dataset directory name under `--data-dir`.
    pub fn model_name(self) -> &'static str {
        match self {
            Workload::Flux => "flux",
            Workload::Unet3d => "unet3d",
            Workload::Retinanet => "retinanet",
            Workload::Resnet50 => "resnet50",
            Workload::Cosmoflow => "cosmoflow",
            Workload::Dlrm => "dlrm",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.model_name())
    }
}

/// Accelerator type (`--accelerator-type`); picks `<model>_<accelerator>.yaml`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Accelerator {
    #[default]
    B200,
    A100,
    H100,
    Mi355,
}

impl Accelerator {
    pub fn name(self) -> &'static str {
        match self {
            Accelerator::B200 => "b200",
            Accelerator::A100 => "a100",
            Accelerator::H100 => "h100",
            Accelerator::Mi355 => "mi355",
        }
    }
}

impl fmt::Display for Accelerator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

const FLUX_B200: &str = include_str!("workloads/flux_b200.yaml");
const FLUX_MI355: &str = include_str!("workloads/flux_mi355.yaml");
const UNET3D_A100: &str = include_str!("workloads/unet3d_a100.yaml");
const UNET3D_H100: &str = include_str!("workloads/unet3d_h100.yaml");
const UNET3D_B200: &str = include_str!("workloads/unet3d_b200.yaml");
const RETINANET_B200: &str = include_str!("workloads/retinanet_b200.yaml");
const RETINANET_MI355: &str = include_str!("workloads/retinanet_mi355.yaml");
const RESNET50_H100: &str = include_str!("workloads/resnet50_h100.yaml");
const RESNET50_A100: &str = include_str!("workloads/resnet50_a100.yaml");
const COSMOFLOW_H100: &str = include_str!("workloads/cosmoflow_h100.yaml");
const COSMOFLOW_A100: &str = include_str!("workloads/cosmoflow_a100.yaml");
const DLRM_B200: &str = include_str!("workloads/dlrm_b200.yaml");
const DLRM_MI355: &str = include_str!("workloads/dlrm_mi355.yaml");

/// The embedded DLIO workload YAML for a workload and accelerator, if
/// DLIO has one.
fn template(workload: Workload, acc: Accelerator) -> Option<&'static str> {
    match (workload, acc) {
        (Workload::Flux, Accelerator::B200) => Some(FLUX_B200),
        (Workload::Flux, Accelerator::Mi355) => Some(FLUX_MI355),
        (Workload::Unet3d, Accelerator::A100) => Some(UNET3D_A100),
        (Workload::Unet3d, Accelerator::H100) => Some(UNET3D_H100),
        (Workload::Unet3d, Accelerator::B200) => Some(UNET3D_B200),
        (Workload::Retinanet, Accelerator::B200) => Some(RETINANET_B200),
        (Workload::Retinanet, Accelerator::Mi355) => Some(RETINANET_MI355),
        (Workload::Resnet50, Accelerator::H100) => Some(RESNET50_H100),
        (Workload::Resnet50, Accelerator::A100) => Some(RESNET50_A100),
        (Workload::Cosmoflow, Accelerator::H100) => Some(COSMOFLOW_H100),
        (Workload::Cosmoflow, Accelerator::A100) => Some(COSMOFLOW_A100),
        (Workload::Dlrm, Accelerator::B200) => Some(DLRM_B200),
        (Workload::Dlrm, Accelerator::Mi355) => Some(DLRM_MI355),
        _ => None,
    }
}

/// The embedded DLIO workload YAML for a workload and accelerator; a
/// usage error naming the accelerators the workload has otherwise.
pub fn embedded_workload_yaml(
    workload: Workload,
    acc: Accelerator,
) -> Result<&'static str, BenchError> {
    if let Some(yaml) = template(workload, acc) {
        return Ok(yaml);
    }
    let (w, a) = (workload, acc);
    let valid: Vec<&str> = [
        Accelerator::B200,
        Accelerator::A100,
        Accelerator::H100,
        Accelerator::Mi355,
    ]
    .into_iter()
    .filter(|x| template(w, *x).is_some())
    .map(Accelerator::name)
    .collect();
    let extra = if w == Workload::Flux {
        " (flux_a100/h100 are a different JPEG workload)"
    } else if w == Workload::Unet3d {
        " (mlcommons/storage publishes no unet3d_mi355 template)"
    } else {
        ""
    };
    Err(BenchError::BadParam {
        key: "--accelerator-type".into(),
        reason: format!(
            "DLIO has no {w}_{a} workload; {w} runs on {}{extra}: pass \
             --accelerator-type {}",
            valid.join(" or "),
            valid.first().unwrap_or(&""),
            a = a.name()
        ),
    })
}

/// Build the configuration the way both subcommands do: the embedded workload
/// (or `--config` file), then `--param` overrides in order.
pub fn load(
    workload: Option<Workload>,
    acc: Accelerator,
    config_file: Option<&Path>,
    params: &[String],
) -> Result<RawConfig, BenchError> {
    let mut raw = match (config_file, workload) {
        (Some(path), _) => RawConfig::from_file(path)?,
        (None, Some(w)) => RawConfig::embedded(w, acc)?,
        (None, None) => {
            return Err(BenchError::usage(
                "--workload",
                "give --workload or --config".into(),
            ));
        }
    };
    if let (Some(_), Some(w)) = (config_file, workload) {
        let model = raw.get("model.name").and_then(Value::as_str).unwrap_or("");
        if model != w.model_name() {
            return Err(BenchError::usage(
                "--workload",
                format!(
                    "{}: model.name is '{model}' but --workload is {w}",
                    raw.source
                ),
            ));
        }
    }
    for p in params {
        raw.apply_param(p)?;
    }
    Ok(raw)
}

#[cfg(test)]
mod tests;
