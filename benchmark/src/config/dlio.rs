//! The typed configuration: DLIO's defaults filled in, time specs,
//! Parquet columns and the training's checkpoints, checked as a whole.
use super::*;

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

pub(super) fn time_spec(key: &str, value: &Value) -> Result<TimeSpec, BenchError> {
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
pub(super) fn training_checkpoints(raw: &RawConfig) -> Result<TrainingCheckpoints, BenchError> {
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
    pub(super) fn from_raw(raw: &RawConfig) -> Result<Self, BenchError> {
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

pub(super) fn parse_column(i: usize, v: &Value) -> Result<ParquetColumn, BenchError> {
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
