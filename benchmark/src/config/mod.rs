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
pub mod keys;
pub mod rules;

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

/// A workload configuration as a YAML tree, before typing.
#[derive(Clone, Debug)]
pub struct RawConfig {
    root: Mapping,
    /// Where the tree came from, for messages ("flux_b200 (embedded)", a file path).
    pub source: String,
}

impl RawConfig {
    /// The embedded configuration for a workload and accelerator.
    pub fn embedded(workload: Workload, acc: Accelerator) -> Result<Self, BenchError> {
        let text = embedded_workload_yaml(workload, acc)?;
        Self::parse(text, &format!("{workload}_{acc} (embedded)"))
    }

    /// Load a DLIO workload YAML file.
    pub fn from_file(path: &Path) -> Result<Self, BenchError> {
        let text = std::fs::read_to_string(path).map_err(|source| BenchError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parse YAML text; `source` names it in errors. Every key is validated.
    pub fn parse(text: &str, source: &str) -> Result<Self, BenchError> {
        let value: Value = serde_yaml::from_str(text)
            .map_err(|e| BenchError::Config(format!("{source}: not valid YAML: {e}")))?;
        let root = match value {
            Value::Mapping(m) => m,
            Value::Null => Mapping::new(),
            _ => {
                return Err(BenchError::Config(format!(
                    "{source}: a DLIO workload YAML must be a mapping"
                )));
            }
        };
        // Hydra configs nest the workload under `workload:`; accept both.
        let root = match root.get("workload") {
            Some(Value::Mapping(inner)) if root.len() == 1 => inner.clone(),
            _ => root,
        };
        let cfg = RawConfig {
            root,
            source: source.to_string(),
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Apply one `KEY=VALUE` override (DLIO dotted key, YAML value).
    pub fn apply_param(&mut self, param: &str) -> Result<(), BenchError> {
        let Some((key, value)) = param.split_once('=') else {
            return Err(BenchError::BadParam {
                key: param.to_string(),
                reason: "expected KEY=VALUE, e.g. dataset.num_files_train=64".into(),
            });
        };
        let key = normalize_key(key.trim());
        let value: Value = if value.trim().is_empty() {
            Value::Null
        } else {
            serde_yaml::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()))
        };
        self.set(&key, value)
    }

    /// Set a dotted key, checking it and its value.
    pub fn set(&mut self, key: &str, value: Value) -> Result<(), BenchError> {
        let key = normalize_key(key);
        if keys::spec(&key).is_none() {
            return Err(unknown_key(&key));
        }
        check_value(&key, &value)?;
        // An alias is stored under its DLIO key so there is one place to read.
        let key = if key == "dataset.parquet_row_group_size" {
            "dataset.parquet.row_group_size".to_string()
        } else {
            key
        };
        let parts: Vec<&str> = key.split('.').collect();
        let mut node = &mut self.root;
        for part in &parts[..parts.len() - 1] {
            let k = Value::String((*part).to_string());
            let entry = node
                .entry(k)
                .or_insert_with(|| Value::Mapping(Mapping::new()));
            if !entry.is_mapping() {
                // A scalar time spec (`computation_time: 1.35`) becomes `{mean: 1.35}`
                // when a sub-key (`.stdev`) is set, as DLIO itself converts it.
                let old = std::mem::replace(entry, Value::Mapping(Mapping::new()));
                if let (Value::Mapping(m), false) = (&mut *entry, old.is_null()) {
                    m.insert(Value::String("mean".into()), old);
                }
            }
            let Value::Mapping(m) = entry else {
                return Err(BenchError::Config(format!("cannot set '{key}'")));
            };
            node = m;
        }
        node.insert(Value::String(parts[parts.len() - 1].to_string()), value);
        Ok(())
    }

    /// Value at a dotted key, if set.
    pub fn get(&self, key: &str) -> Option<&Value> {
        let mut node = &self.root;
        let parts: Vec<&str> = key.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            let v = node.get(*part)?;
            if i + 1 == parts.len() {
                return Some(v);
            }
            node = v.as_mapping()?;
        }
        None
    }

    /// The tree as YAML text (written to the results dir as the effective config).
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(&self.root).unwrap_or_default()
    }

    /// The tree as hydra's composed `config.yaml` holds it, under `workload:`
    /// (what DLIO writes to `<run>/dlio_config/config.yaml` and mlpstorage's
    /// report generator reads back).
    pub fn to_hydra_yaml(&self) -> String {
        let mut top = Mapping::new();
        top.insert(
            Value::String("workload".into()),
            Value::Mapping(self.root.clone()),
        );
        serde_yaml::to_string(&top).unwrap_or_default()
    }

    /// The tree as JSON (mlpstorage's metadata `parameters`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.root).unwrap_or_default()
    }

    /// Keys set in this config that storprof accepts but does not act on.
    pub fn ignored_keys(&self) -> Vec<String> {
        let mut leaves = Vec::new();
        flatten(&self.root, "", &mut leaves);
        leaves
            .into_iter()
            .filter(|(k, _)| keys::spec(k).is_some_and(|s| s.effect == Effect::Ignored))
            .map(|(k, _)| k)
            .collect()
    }

    fn validate(&self) -> Result<(), BenchError> {
        let mut leaves = Vec::new();
        flatten(&self.root, "", &mut leaves);
        for (key, value) in leaves {
            if keys::spec(&key).is_none() {
                let mut err = unknown_key(&key);
                if let BenchError::UnknownParam { hint, .. } = &mut err {
                    hint.push_str(&format!(" (in {})", self.source));
                }
                return Err(err);
            }
            check_value(&key, value)?;
        }
        Ok(())
    }

    /// Type the configuration, filling DLIO's defaults.
    pub fn to_config(&self) -> Result<DlioConfig, BenchError> {
        DlioConfig::from_raw(self)
    }
}

/// A key as `RawConfig` stores it: without hydra's `+`/`++` and `workload.`.
pub(crate) fn normalize_key(key: &str) -> String {
    let key = key.trim_start_matches('+');
    key.strip_prefix("workload.").unwrap_or(key).to_string()
}

fn unknown_key(key: &str) -> BenchError {
    let near = keys::suggestions(key);
    let hint = if near.is_empty() {
        String::new()
    } else {
        format!(
            "; did you mean {}?",
            near.iter()
                .map(|k| format!("'{k}'"))
                .collect::<Vec<_>>()
                .join(" or ")
        )
    };
    BenchError::UnknownParam {
        key: key.to_string(),
        hint,
    }
}

fn flatten<'a>(map: &'a Mapping, prefix: &str, out: &mut Vec<(String, &'a Value)>) {
    for (k, v) in map {
        let name = match k {
            Value::String(s) => s.clone(),
            other => serde_yaml::to_string(other)
                .unwrap_or_default()
                .trim()
                .to_string(),
        };
        let key = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}.{name}")
        };
        match v {
            Value::Mapping(m)
                if !keys::is_whole_value(&key)
                    && (keys::is_section(&key) || keys::spec(&key).is_none()) =>
            {
                flatten(m, &key, out)
            }
            _ => out.push((key, v)),
        }
    }
}

fn bad(key: &str, reason: impl Into<String>) -> BenchError {
    BenchError::BadParam {
        key: key.to_string(),
        reason: reason.into(),
    }
}

fn describe(v: &Value) -> String {
    serde_yaml::to_string(v)
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn check_value(key: &str, value: &Value) -> Result<(), BenchError> {
    let Some(spec) = keys::spec(key) else {
        return Err(unknown_key(key));
    };
    if value.is_null() {
        return Err(bad(key, "a value is required"));
    }
    match spec.ty {
        KeyType::UInt => match value.as_u64() {
            Some(_) => Ok(()),
            None => Err(bad(
                key,
                format!("expected a non-negative integer, got '{}'", describe(value)),
            )),
        },
        KeyType::Int => match value.as_i64() {
            Some(_) => Ok(()),
            None => Err(bad(
                key,
                format!("expected an integer, got '{}'", describe(value)),
            )),
        },
        KeyType::Float => match value.as_f64() {
            Some(f) if f.is_finite() => Ok(()),
            _ => Err(bad(
                key,
                format!("expected a number, got '{}'", describe(value)),
            )),
        },
        KeyType::Bool => match value.as_bool() {
            Some(_) => Ok(()),
            None => Err(bad(
                key,
                format!("expected True or False, got '{}'", describe(value)),
            )),
        },
        KeyType::Str => match value {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(()),
            _ => Err(bad(
                key,
                format!("expected a string, got '{}'", describe(value)),
            )),
        },
        KeyType::Enum(choices) => match value.as_str() {
            Some(s) if choices.contains(&s.to_ascii_lowercase().as_str()) => Ok(()),
            _ => Err(bad(
                key,
                format!(
                    "expected one of {}, got '{}'",
                    choices.join(", "),
                    describe(value)
                ),
            )),
        },
        KeyType::TimeSpec => time_spec(key, value).map(|_| ()),
        KeyType::List => match value {
            Value::Sequence(_) => Ok(()),
            _ => Err(bad(
                key,
                format!("expected a list, got '{}'", describe(value)),
            )),
        },
        KeyType::Any => Ok(()),
    }
}

/// DLIO's time spec: a fixed number of seconds or a normal distribution.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct TimeSpec {
    /// Mean seconds.
    pub mean: f64,
    /// Standard deviation in seconds; 0 = fixed.
    pub stdev: f64,
}

impl TimeSpec {
    pub const ZERO: TimeSpec = TimeSpec {
        mean: 0.0,
        stdev: 0.0,
    };

    /// DLIO's "(set value: {...})" rendering of the spec.
    pub fn dlio_repr(&self) -> String {
        if self.stdev > 0.0 {
            format!(
                "{{'mean': {}, 'stdev': {}}}",
                py_float(self.mean),
                py_float(self.stdev)
            )
        } else {
            format!("{{'mean': {}}}", py_float(self.mean))
        }
    }
}

/// Format a float as Python's `repr` would for the common cases (`1.35`, `0.0`, `2.0`).
pub fn py_float(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

fn time_spec(key: &str, value: &Value) -> Result<TimeSpec, BenchError> {
    let num = |v: &Value, what: &str| -> Result<f64, BenchError> {
        match v.as_f64() {
            Some(f) if f.is_finite() && f >= 0.0 => Ok(f),
            _ => Err(bad(
                &format!("{key}{what}"),
                format!(
                    "expected a non-negative number of seconds, got '{}'",
                    describe(v)
                ),
            )),
        }
    };
    match value {
        Value::Mapping(m) => {
            for k in m.keys() {
                if !matches!(k.as_str(), Some("mean" | "stdev")) {
                    return Err(bad(
                        key,
                        format!(
                            "only 'mean' and 'stdev' are supported in a time spec, got '{}'",
                            describe(k)
                        ),
                    ));
                }
            }
            let mean = m
                .get("mean")
                .map(|v| num(v, ".mean"))
                .transpose()?
                .unwrap_or(0.0);
            let stdev = m
                .get("stdev")
                .map(|v| num(v, ".stdev"))
                .transpose()?
                .unwrap_or(0.0);
            Ok(TimeSpec { mean, stdev })
        }
        v => Ok(TimeSpec {
            mean: num(v, "")?,
            stdev: 0.0,
        }),
    }
}

/// DLIO's sample shuffle setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shuffle {
    Off,
    Seed,
    Random,
}

/// One Parquet column of `dataset.parquet.columns`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ParquetColumn {
    pub name: String,
    /// `dtype`, default float32.
    pub dtype: String,
    /// Elements per row (`size`, default 1: a scalar column; more: a FixedSizeList).
    pub size: usize,
    /// `read`: whether the reader loads the column (DLIO's column subset).
    /// Default true.
    pub read: bool,
}

impl ParquetColumn {
    /// Bytes per element of the dtype itself (numpy's itemsize; 4 when unknown).
    pub fn element_bytes(&self) -> usize {
        match self.dtype.as_str() {
            "float64" | "int64" | "uint64" | "double" => 8,
            "uint8" | "int8" | "bool" => 1,
            "float16" | "int16" | "uint16" => 2,
            _ => 4,
        }
    }

    /// Bytes per element as mlpstorage's `calculate_training_data_size`
    /// counts them: 8 for float64/int64, 1 for uint8/bool, else 4 (so
    /// float16 and int8 count 4).
    pub fn mlpstorage_element_bytes(&self) -> usize {
        match self.dtype.as_str() {
            "float64" | "int64" => 8,
            "uint8" | "bool" => 1,
            _ => 4,
        }
    }
}

/// The typed workload configuration, DLIO defaults filled in.
///
/// Defaults (DLIO `ConfigArguments`): `num_files_eval` 0, `record_length_bytes`
/// 65536, `parquet.row_group_size` 1024, `prefetch_size` 2, `seed` 123,
/// `seed_change_epoch` True, `sample_shuffle` off, `odirect` False,
/// `coalesce_rgs` 1, `prefetch_workers` 1 (s3dlio reader knobs, storprof's defaults),
/// `file_prefix` "img", `metric.au` 0.90, `exclude_start_steps` 1,
/// `exclude_end_steps` 0, `epochs` 1, `computation_time` 0.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DlioConfig {
    pub model: String,
    pub format: FormatKind,
    pub data_folder: String,
    pub compression: String,
    pub num_files_train: u64,
    pub num_files_eval: u64,
    pub num_samples_per_file: u64,
    pub num_subfolders_train: u64,
    pub num_subfolders_eval: u64,
    /// DLIO's `record_length` (from `record_length_bytes`, default 65536): what DLIO's I/O metric uses.
    pub record_length: f64,
    pub record_length_stdev: f64,
    pub record_length_resize: f64,
    /// Whether `record_length_bytes` was set (flux sets only the ignored `record_length`).
    pub record_length_set: bool,
    pub parquet_columns: Vec<ParquetColumn>,
    pub parquet_row_group_size: u64,
    pub file_prefix: String,
    pub batch_size: u64,
    pub read_threads: u64,
    pub prefetch_size: u64,
    /// `reader.coalesce_rgs`: Parquet row groups per storage read (raw reader). Default 1.
    pub coalesce_rgs: u64,
    /// `reader.prefetch_workers`: storage reads in flight per read thread, the
    /// needed ones plus read-ahead of the file's next units (raw reader,
    /// Parquet). Default 1 (no read-ahead).
    pub prefetch_workers: u64,
    pub sample_shuffle: Shuffle,
    pub odirect: bool,
    /// `reader.dont_use_mmap`: read local files with `pread` into buffers
    /// instead of mapping them (DLIO's default is to map). Default false.
    pub dont_use_mmap: bool,
    pub epochs: u32,
    pub total_training_steps: i64,
    pub computation_time: TimeSpec,
    pub seed: u64,
    pub seed_change_epoch: bool,
    pub au: f64,
    pub exclude_start_steps: usize,
    pub exclude_end_steps: usize,
    pub checkpoint: bool,
    /// What `workflow.checkpoint` saves during training, and when (`None` when it is off).
    pub checkpoints: Option<TrainingCheckpoints>,
}

/// DLIO's `checkpoint.*` keys (and the model size) as a training checkpoint
/// plan. DLIO's defaults: folder `./checkpoints/`, after epoch 1, every
/// epoch, steps -1 (by epochs), `model_size` 10240 bytes, `type` rank_zero.
fn training_checkpoints(raw: &RawConfig) -> Result<TrainingCheckpoints, BenchError> {
    let u = |k: &str, d: u64| raw.get(k).and_then(Value::as_u64).unwrap_or(d);
    let schedule = CheckpointSchedule::from_keys(
        u("checkpoint.checkpoint_after_epoch", 1),
        u("checkpoint.epochs_between_checkpoints", 1),
        raw.get("checkpoint.steps_between_checkpoints")
            .and_then(Value::as_i64)
            .unwrap_or(-1),
    )?;
    let size_key = ["model.model_size_bytes", "model.model_size"]
        .into_iter()
        .find(|k| raw.get(k).is_some());
    let model_bytes = match size_key {
        None => 10240,
        Some(k) => {
            let v = raw.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
            if !(v.is_finite() && v >= 1.0 && v <= u64::MAX as f64) || v.fract() != 0.0 {
                return Err(bad(
                    k,
                    format!("{v}: a checkpoint's model state needs a whole number of bytes ≥ 1"),
                ));
            }
            v as u64
        }
    };
    let writers = match raw.get("checkpoint.type").and_then(Value::as_str) {
        Some(t) => CheckpointWriters::from_key(t)?,
        None => CheckpointWriters::RankZero,
    };
    let folder = raw
        .get("checkpoint.checkpoint_folder")
        .and_then(Value::as_str)
        .unwrap_or("./checkpoints/")
        .trim_end_matches('/')
        .to_string();
    if folder.is_empty() {
        return Err(bad("checkpoint.checkpoint_folder", "empty"));
    }
    if folder.contains("://") {
        return Err(bad(
            "checkpoint.checkpoint_folder",
            format!("{folder}: checkpoints during bench go to a local folder"),
        ));
    }
    Ok(TrainingCheckpoints {
        folder: folder.into(),
        schedule,
        model_bytes,
        writers,
        fsync: raw
            .get("checkpoint.fsync")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        block_size: 32 << 20,
    })
}

/// DLIO's default `record_length` (64 KiB), what flux ends up with.
pub const DLIO_DEFAULT_RECORD_LENGTH: f64 = 65536.0;

impl DlioConfig {
    fn from_raw(raw: &RawConfig) -> Result<Self, BenchError> {
        let u = |k: &str, d: u64| raw.get(k).and_then(Value::as_u64).unwrap_or(d);
        let f = |k: &str, d: f64| raw.get(k).and_then(Value::as_f64).unwrap_or(d);
        let b = |k: &str, d: bool| raw.get(k).and_then(Value::as_bool).unwrap_or(d);
        let s = |k: &str, d: &str| {
            raw.get(k)
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => describe(other),
                })
                .unwrap_or_else(|| d.to_string())
        };
        let format = match raw.get("dataset.format").and_then(Value::as_str) {
            Some(name) => FormatKind::from_dlio_name(name)
                .ok_or_else(|| bad("dataset.format", format!("unsupported format '{name}'")))?,
            None => return Err(bad("dataset.format", format!("missing in {}", raw.source))),
        };
        let shuffle = |k: &str| match raw
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("seed") => Shuffle::Seed,
            Some("random") => Shuffle::Random,
            _ => Shuffle::Off,
        };
        let mut computation_time = match raw.get("train.computation_time") {
            Some(v) => time_spec("train.computation_time", v)?,
            None => TimeSpec::ZERO,
        };
        if let Some(sd) = raw
            .get("train.computation_time_stdev")
            .and_then(Value::as_f64)
        {
            computation_time.stdev = sd;
        }
        let parquet_columns = match raw.get("dataset.parquet.columns") {
            Some(Value::Sequence(cols)) => cols
                .iter()
                .enumerate()
                .map(|(i, c)| parse_column(i, c))
                .collect::<Result<Vec<_>, _>>()?,
            _ => Vec::new(),
        };
        let record_length_set = raw.get("dataset.record_length_bytes").is_some();
        let cfg = DlioConfig {
            model: s("model.name", "default"),
            format,
            data_folder: s("dataset.data_folder", "./data")
                .trim_end_matches('/')
                .to_string(),
            compression: s("dataset.compression", "none"),
            num_files_train: u("dataset.num_files_train", 8),
            num_files_eval: u("dataset.num_files_eval", 0),
            num_samples_per_file: u("dataset.num_samples_per_file", 1),
            num_subfolders_train: u("dataset.num_subfolders_train", 0),
            num_subfolders_eval: u("dataset.num_subfolders_eval", 0),
            record_length: f("dataset.record_length_bytes", DLIO_DEFAULT_RECORD_LENGTH),
            record_length_stdev: f("dataset.record_length_bytes_stdev", 0.0),
            record_length_resize: f("dataset.record_length_bytes_resize", 0.0),
            record_length_set,
            parquet_columns,
            parquet_row_group_size: u("dataset.parquet.row_group_size", 1024),
            file_prefix: s("dataset.file_prefix", "img"),
            batch_size: u("reader.batch_size", 1),
            read_threads: u("reader.read_threads", 1),
            prefetch_size: u("reader.prefetch_size", 2),
            coalesce_rgs: u("reader.coalesce_rgs", 1).max(1),
            prefetch_workers: u("reader.prefetch_workers", 1).max(1),
            sample_shuffle: shuffle("reader.sample_shuffle"),
            odirect: b("reader.odirect", false),
            dont_use_mmap: b("reader.dont_use_mmap", false),
            epochs: u32::try_from(u("train.epochs", 1))
                .map_err(|_| bad("train.epochs", "too large"))?,
            total_training_steps: raw
                .get("train.total_training_steps")
                .and_then(Value::as_i64)
                .unwrap_or(-1),
            computation_time,
            seed: u("train.seed", 123),
            seed_change_epoch: b("train.seed_change_epoch", true),
            au: f("metric.au", 0.90),
            exclude_start_steps: usize::try_from(u("output.metric.exclude_start_steps", 1))
                .unwrap_or(usize::MAX),
            exclude_end_steps: usize::try_from(u("output.metric.exclude_end_steps", 0))
                .unwrap_or(usize::MAX),
            checkpoint: b("workflow.checkpoint", false),
            checkpoints: None,
        };
        let cfg = DlioConfig {
            checkpoints: if cfg.checkpoint {
                Some(training_checkpoints(raw)?)
            } else {
                None
            },
            ..cfg
        };
        cfg.check()?;
        Ok(cfg)
    }

    fn check(&self) -> Result<(), BenchError> {
        if self.batch_size == 0 {
            return Err(bad("reader.batch_size", "must be at least 1"));
        }
        if self.num_samples_per_file == 0 {
            return Err(bad("dataset.num_samples_per_file", "must be at least 1"));
        }
        if self.num_files_train == 0 {
            return Err(bad("dataset.num_files_train", "must be at least 1"));
        }
        if self.epochs == 0 {
            return Err(bad("train.epochs", "must be at least 1"));
        }
        for (key, folders, files) in [
            (
                "dataset.num_subfolders_train",
                self.num_subfolders_train,
                self.num_files_train,
            ),
            (
                "dataset.num_subfolders_eval",
                self.num_subfolders_eval,
                self.num_files_eval,
            ),
        ] {
            if folders > 1 && folders > files {
                return Err(bad(
                    key,
                    format!("{folders} subfolders for {files} files would leave some empty"),
                ));
            }
        }
        if self.parquet_row_group_size == 0 {
            return Err(bad("dataset.parquet.row_group_size", "must be at least 1"));
        }
        if self.format == FormatKind::Parquet && self.compression != "none" {
            return Err(bad(
                "dataset.compression",
                "only uncompressed Parquet ('none') is supported",
            ));
        }
        if self.format != FormatKind::Parquet && self.compression != "none" {
            return Err(bad(
                "dataset.compression",
                format!(
                    "only uncompressed {} files ('none') are supported",
                    self.format.extension()
                ),
            ));
        }
        if self.record_length <= 0.0 {
            return Err(bad("dataset.record_length_bytes", "must be positive"));
        }
        Ok(())
    }

    /// DLIO's record size for its I/O metric (`args.record_length`, upstream).
    pub fn record_size_dlio(&self) -> f64 {
        self.record_length
    }

    /// The record length mlpstorage's dataset-size rule uses, which is the
    /// real bytes per sample: `record_length_bytes` when set (dlrm: 761, its
    /// 200 columns' own widths), else for Parquet with a column schema
    /// Σ column size × [`ParquetColumn::mlpstorage_element_bytes`] (flux:
    /// 2,164,832), else the record length.
    pub fn record_size_real(&self) -> f64 {
        if self.format == FormatKind::Parquet
            && !self.parquet_columns.is_empty()
            && !self.record_length_set
        {
            self.parquet_columns
                .iter()
                .map(|c| (c.size * c.mlpstorage_element_bytes()) as f64)
                .sum()
        } else {
            self.record_length
        }
    }

    /// Names of the Parquet columns the reader loads when the schema marks
    /// some `read: false`; `None` when every column is read.
    pub fn parquet_read_columns(&self) -> Option<Vec<String>> {
        self.parquet_columns.iter().any(|c| !c.read).then(|| {
            self.parquet_columns
                .iter()
                .filter(|c| c.read)
                .map(|c| c.name.clone())
                .collect()
        })
    }

    /// `floor(spf × files / batch / comm_size)`, DLIO's max steps per epoch.
    pub fn steps_per_epoch(&self, comm_size: u64) -> u64 {
        let total = self.num_samples_per_file * self.num_files_train;
        let steps = total / self.batch_size / comm_size.max(1);
        if self.total_training_steps > 0 {
            steps.min(self.total_training_steps as u64)
        } else {
            steps
        }
    }

    /// DLIO's `prefetch_factor = ceil(prefetch_size / read_threads)` (0 threads: no prefetch).
    pub fn prefetch_factor(&self) -> u64 {
        if self.read_threads == 0 {
            0
        } else {
            self.prefetch_size.div_ceil(self.read_threads).max(1)
        }
    }
}

fn parse_column(i: usize, v: &Value) -> Result<ParquetColumn, BenchError> {
    let key = format!("dataset.parquet.columns[{i}]");
    let m = v
        .as_mapping()
        .ok_or_else(|| bad(&key, "expected a mapping with name, dtype, size, read"))?;
    for k in m.keys() {
        if !matches!(k.as_str(), Some("name" | "dtype" | "size" | "read")) {
            return Err(bad(
                &key,
                format!(
                    "unknown column field '{}' (expected name, dtype, size, read)",
                    describe(k)
                ),
            ));
        }
    }
    let name = m
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(&format!("{key}.name"), "missing"))?
        .to_string();
    let dtype = m
        .get("dtype")
        .and_then(Value::as_str)
        .unwrap_or("float32")
        .to_string();
    let size = m
        .get("size")
        .map(|s| {
            s.as_u64()
                .ok_or_else(|| bad(&format!("{key}.size"), "expected a positive integer"))
        })
        .transpose()?
        .unwrap_or(1);
    if size == 0 {
        return Err(bad(&format!("{key}.size"), "must be at least 1"));
    }
    let read = m
        .get("read")
        .map(|r| {
            r.as_bool()
                .ok_or_else(|| bad(&format!("{key}.read"), "expected true or false"))
        })
        .transpose()?
        .unwrap_or(true);
    Ok(ParquetColumn {
        name,
        dtype,
        size: usize::try_from(size).map_err(|_| bad(&format!("{key}.size"), "too large"))?,
        read,
    })
}

/// mlpstorage's dataset-size rule (`calculate_training_data_size`, Rules 3.1.2).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct DatasetSizeRule {
    /// client_host_memory_in_gb × 2³⁰ × num_client_hosts.
    pub total_mem_bytes: f64,
    /// ceil(5 × total_mem / (spf × record_length_bytes)).
    pub min_files_bytes: u64,
    /// ceil(500 × num_processes × batch / spf).
    pub min_files_samples: u64,
    /// max of the two.
    pub num_files_train: u64,
}

impl DatasetSizeRule {
    /// Which term decided, in mlpstorage's words: "memory" (the dataset-size
    /// to memory-size ratio) or "steps" (the 500-step requirement).
    pub fn deciding_term(&self) -> &'static str {
        if self.min_files_bytes >= self.min_files_samples {
            "memory"
        } else {
            "steps"
        }
    }

    /// mlpstorage's `RESULT:` line for the deciding term.
    pub fn result_line(&self) -> &'static str {
        match self.deciding_term() {
            "memory" => "RESULT: Minimum file count dictated by dataset size to memory size ratio.",
            _ => {
                "RESULT: Minimum file count dictated by 500 step requirement of given accelerator count and batch size."
            }
        }
    }
}

/// Apply the rule. `record_bytes` is the real record length (Parquet: from the columns).
pub fn dataset_size_rule(
    client_memory_gb: f64,
    num_client_hosts: u64,
    num_processes: u64,
    batch_size: u64,
    samples_per_file: u64,
    record_bytes: f64,
) -> DatasetSizeRule {
    let total_mem = client_memory_gb * 1024f64.powi(3) * num_client_hosts as f64;
    let min_files_bytes =
        (5.0 * total_mem / (samples_per_file as f64 * record_bytes)).ceil() as u64;
    let min_files_samples = (500 * num_processes * batch_size).div_ceil(samples_per_file.max(1));
    DatasetSizeRule {
        total_mem_bytes: total_mem,
        min_files_bytes,
        min_files_samples,
        num_files_train: min_files_bytes.max(min_files_samples),
    }
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
        (None, None) => return Err(BenchError::Config("give --workload or --config".into())),
    };
    if let (Some(_), Some(w)) = (config_file, workload) {
        let model = raw.get("model.name").and_then(Value::as_str).unwrap_or("");
        if model != w.model_name() {
            return Err(BenchError::Config(format!(
                "{}: model.name is '{model}' but --workload is {w}",
                raw.source
            )));
        }
    }
    for p in params {
        raw.apply_param(p)?;
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(w: Workload, a: Accelerator, params: &[&str]) -> Result<DlioConfig, BenchError> {
        let params: Vec<String> = params.iter().map(|s| s.to_string()).collect();
        load(Some(w), a, None, &params)?.to_config()
    }

    #[test]
    fn embedded_values_match_dlio_configs() {
        let f = cfg(Workload::Flux, Accelerator::B200, &[]).unwrap();
        assert_eq!(f.model, "flux");
        assert_eq!(f.format, FormatKind::Parquet);
        assert_eq!(
            (
                f.num_files_train,
                f.num_samples_per_file,
                f.batch_size,
                f.read_threads
            ),
            (4296, 288, 48, 8)
        );
        assert_eq!(
            f.computation_time,
            TimeSpec {
                mean: 1.35,
                stdev: 0.0
            }
        );
        assert_eq!(
            f.record_size_dlio(),
            65536.0,
            "flux's record_length key is ignored by DLIO"
        );
        assert_eq!(f.record_size_real(), 2_164_832.0);
        assert_eq!(f.parquet_row_group_size, 1024);
        assert_eq!(f.sample_shuffle, Shuffle::Off);
        assert_eq!((f.au, f.seed, f.prefetch_size, f.epochs), (0.90, 123, 2, 1));
        assert_eq!((f.exclude_start_steps, f.exclude_end_steps), (1, 0));
        assert_eq!(f.data_folder, "data/flux");

        let m = cfg(Workload::Flux, Accelerator::Mi355, &[]).unwrap();
        assert_eq!((m.batch_size, m.computation_time.mean), (72, 2.025));

        for (acc, ct, files, ckpt) in [
            (Accelerator::A100, 0.636, 168, true),
            (Accelerator::H100, 0.323, 168, false),
            (Accelerator::B200, 0.162, 7200, false),
        ] {
            let u = cfg(Workload::Unet3d, acc, &[]).unwrap();
            assert_eq!(u.format, FormatKind::Npz);
            assert_eq!(
                (
                    u.num_files_train,
                    u.num_samples_per_file,
                    u.batch_size,
                    u.read_threads
                ),
                (files, 1, 7, 4)
            );
            assert_eq!(u.computation_time.mean, ct);
            assert_eq!(u.checkpoint, ckpt);
            assert_eq!(u.record_length, 146_600_628.0);
            assert_eq!(u.record_length_stdev, 68_341_808.0);
            assert_eq!(u.record_length_resize, 2_097_152.0);
            assert_eq!(u.sample_shuffle, Shuffle::Seed);
            assert_eq!(u.epochs, 5);
        }
    }

    #[test]
    fn dlrm_embedded_values() {
        for (acc, ct) in [
            (Accelerator::B200, 0.000375),
            (Accelerator::Mi355, 0.0005625),
        ] {
            let d = cfg(Workload::Dlrm, acc, &[]).unwrap();
            assert_eq!((d.model.as_str(), d.format), ("dlrm", FormatKind::Parquet));
            assert_eq!(
                (
                    d.num_files_train,
                    d.num_samples_per_file,
                    d.batch_size,
                    d.read_threads,
                    d.prefetch_size
                ),
                (1024, 4_718_592, 16384, 4, 2)
            );
            assert_eq!(d.computation_time.mean, ct);
            assert_eq!((d.parquet_row_group_size, d.au, d.epochs), (6144, 0.70, 1));
            assert_eq!(d.parquet_columns.len(), 200);
            // mlpstorage takes record_length_bytes (761) before the columns;
            // it is also the columns' own widths (f16 2, f32 4, f64 8, int8 1).
            assert_eq!((d.record_size_dlio(), d.record_size_real()), (761.0, 761.0));
            let own: usize = d.parquet_columns.iter().map(|c| c.element_bytes()).sum();
            assert_eq!(own, 761);
            let read = d.parquet_read_columns().unwrap();
            assert_eq!(read.len(), 40);
            assert_eq!(read[0], "feature_011");
            assert_eq!(read.last().map(String::as_str), Some("feature_195"));
            assert!(d.parquet_columns.iter().all(|c| c.size == 1));
        }
        // Flux reads every column.
        assert_eq!(
            cfg(Workload::Flux, Accelerator::B200, &[])
                .unwrap()
                .parquet_read_columns(),
            None
        );
        assert!(cfg(Workload::Dlrm, Accelerator::H100, &[]).is_err());
    }

    #[test]
    fn parquet_columns_read_flag_and_mlpstorage_widths() {
        let text = "model:\n  name: dlrm\ndataset:\n  format: parquet\n  parquet:\n    read_mode: row_group\n    columns:\n\
                    \x20     - {name: a, dtype: float16}\n\
                    \x20     - {name: b, dtype: int8, read: false}\n\
                    \x20     - {name: c, dtype: float64, size: 2, read: true}\n\
                    \x20     - {name: d, dtype: uint8, size: 3}\n";
        let c = RawConfig::parse(text, "t.yaml")
            .unwrap()
            .to_config()
            .unwrap();
        assert_eq!(
            c.parquet_columns.iter().map(|c| c.read).collect::<Vec<_>>(),
            [true, false, true, true]
        );
        // No record_length_bytes: mlpstorage counts float16 and int8 as 4 B.
        assert_eq!(c.record_size_real(), (4 + 4 + 2 * 8 + 3) as f64);
        assert_eq!(
            c.parquet_read_columns().unwrap(),
            ["a", "c", "d"].map(String::from)
        );
        let bad = text.replace("read: false", "read: perhaps");
        let e = RawConfig::parse(&bad, "t.yaml")
            .unwrap()
            .to_config()
            .unwrap_err()
            .to_string();
        assert!(e.contains("dataset.parquet.columns[1].read"), "{e}");
        let e = RawConfig::parse(&text.replace("row_group", "row"), "t.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("dataset.parquet.read_mode"), "{e}");
    }

    #[test]
    fn unsupported_combination_is_an_error() {
        let e = cfg(Workload::Flux, Accelerator::A100, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("flux_a100"), "{e}");
        assert!(cfg(Workload::Unet3d, Accelerator::Mi355, &[]).is_err());
    }

    #[test]
    fn params_override_with_dlio_keys() {
        let c = cfg(
            Workload::Flux,
            Accelerator::B200,
            &[
                "dataset.num_files_train=64",
                "reader.batch_size=4",
                "train.computation_time=0.05",
                "++workload.reader.read_threads=2",
                "dataset.parquet_row_group_size=48",
                "reader.odirect=True",
            ],
        )
        .unwrap();
        assert_eq!(
            (c.num_files_train, c.batch_size, c.read_threads),
            (64, 4, 2)
        );
        assert_eq!(c.computation_time.mean, 0.05);
        assert_eq!(c.parquet_row_group_size, 48);
        assert!(c.odirect);
    }

    #[test]
    fn time_spec_forms() {
        let c = cfg(
            Workload::Flux,
            Accelerator::B200,
            &["train.computation_time={mean: 1.0, stdev: 0.1}"],
        )
        .unwrap();
        assert_eq!(
            c.computation_time,
            TimeSpec {
                mean: 1.0,
                stdev: 0.1
            }
        );
        let c = cfg(
            Workload::Flux,
            Accelerator::B200,
            &["train.computation_time.stdev=0.2"],
        )
        .unwrap();
        assert_eq!(
            c.computation_time,
            TimeSpec {
                mean: 1.35,
                stdev: 0.2
            }
        );
        let c = cfg(
            Workload::Flux,
            Accelerator::B200,
            &["train.computation_time=0"],
        )
        .unwrap();
        assert_eq!(c.computation_time, TimeSpec::ZERO);
        assert_eq!(c.computation_time.dlio_repr(), "{'mean': 0.0}");
    }

    #[test]
    fn unknown_key_is_rejected_with_hint() {
        let e = cfg(
            Workload::Flux,
            Accelerator::B200,
            &["dataset.num_file_train=3"],
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("'dataset.num_file_train'"), "{msg}");
        assert!(
            msg.contains("did you mean 'dataset.num_files_train'"),
            "{msg}"
        );
        let e = cfg(Workload::Flux, Accelerator::B200, &["bogus=1"]).unwrap_err();
        assert!(matches!(e, BenchError::UnknownParam { .. }));
    }

    #[test]
    fn wrong_value_type_names_the_key() {
        for (p, key) in [
            ("dataset.num_files_train=many", "dataset.num_files_train"),
            ("reader.batch_size=-3", "reader.batch_size"),
            ("train.computation_time=abc", "train.computation_time"),
            ("reader.odirect=perhaps", "reader.odirect"),
            ("reader.sample_shuffle=sometimes", "reader.sample_shuffle"),
            ("dataset.num_files_train", "dataset.num_files_train"),
        ] {
            let e = cfg(Workload::Flux, Accelerator::B200, &[p])
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{p}: {e}");
        }
        let e = cfg(Workload::Flux, Accelerator::B200, &["reader.batch_size=0"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("reader.batch_size"), "{e}");
    }

    #[test]
    fn config_file_unknown_key_names_file_and_key() {
        let text = "model:\n  name: flux\ndataset:\n  format: parquet\n  num_files_trian: 3\n";
        let e = RawConfig::parse(text, "my.yaml").unwrap_err().to_string();
        assert!(
            e.contains("dataset.num_files_trian") && e.contains("my.yaml"),
            "{e}"
        );
    }

    #[test]
    fn config_file_loads_with_dlio_defaults() {
        let text = "model:\n  name: flux\ndataset:\n  format: parquet\n  num_files_train: 3\n  num_samples_per_file: 8\n\
                    reader:\n  batch_size: 4\ntrain:\n  computation_time: 0.01\n";
        let c = RawConfig::parse(text, "t.yaml")
            .unwrap()
            .to_config()
            .unwrap();
        assert_eq!(
            (
                c.num_files_train,
                c.num_samples_per_file,
                c.batch_size,
                c.read_threads
            ),
            (3, 8, 4, 1)
        );
        assert_eq!(c.record_size_real(), 65536.0);
        assert_eq!(c.steps_per_epoch(1), 6);
        assert_eq!(c.steps_per_epoch(4), 1);
        assert_eq!(c.prefetch_factor(), 2);
    }

    #[test]
    fn prefetch_factor_is_ceil() {
        let c = cfg(Workload::Flux, Accelerator::B200, &[]).unwrap();
        assert_eq!(c.prefetch_factor(), 1);
        let c = cfg(
            Workload::Flux,
            Accelerator::B200,
            &["reader.read_threads=1", "reader.prefetch_size=3"],
        )
        .unwrap();
        assert_eq!(c.prefetch_factor(), 3);
    }

    #[test]
    fn size_rule_matches_330() {
        let f = cfg(Workload::Flux, Accelerator::B200, &[]).unwrap();
        let r = dataset_size_rule(
            247.0,
            1,
            1,
            f.batch_size,
            f.num_samples_per_file,
            f.record_size_real(),
        );
        // 5 × 247 GiB / (288 × 2,164,832 B) = 2126.9 → 2127 (ceil; #330 used floor 2126).
        assert_eq!(r.min_files_bytes, 2127);
        assert_eq!(r.num_files_train, 2127);
        let u = cfg(Workload::Unet3d, Accelerator::A100, &[]).unwrap();
        let r = dataset_size_rule(
            247.0,
            1,
            1,
            u.batch_size,
            u.num_samples_per_file,
            u.record_size_real(),
        );
        assert_eq!(r.min_files_bytes, 9046);
        assert_eq!(r.min_files_samples, 3500);
    }
}
