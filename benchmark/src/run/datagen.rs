//! `storprof datagen` as a library call: DLIO's dataset layout, written by
//! several threads through the format writers.
//!
//! ```text
//!  DatagenOptions ─► config::load ─► DlioConfig
//!     plan(): DIR/<model>/{train,valid}/img_<i>_of_<N>.<ext>, and an empty test/ (refuses existing data without force)
//!     N threads pull file indices from a shared counter:
//!        parquet: format::write_parquet_file(schema from dataset.parquet.columns, rows, row group size)
//!        npz:     format::write_npz_file(npz_dims(record_length, stdev, seed_i), samples)
//!     ─► DatagenReport (files, bytes, seconds, GB/s)
//! ```
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::mlpstorage::RecordDir;
use crate::config::rules::{Division, check_overrides};
use crate::config::{self, Accelerator, DatasetSizeRule, DlioConfig, Workload, dataset_size_rule};
use crate::error::BenchError;
use crate::format::{self, ColumnSpec, ElemType, FluxSchema, FormatKind};
use crate::storage::Storage;

/// Options of a data generation run. Defaults: accelerator b200, 2 writer
/// threads, no overwrite, no progress bar, the rule computed for this host's
/// memory and 1 host and 1 accelerator.
#[derive(Clone, Debug)]
pub struct DatagenOptions {
    pub workload: Option<Workload>,
    pub accelerator: Accelerator,
    pub config_file: Option<PathBuf>,
    pub params: Vec<String>,
    pub data_dir: PathBuf,
    /// Overwrite existing files.
    pub force: bool,
    /// Writer threads.
    pub threads: usize,
    pub progress: bool,
    /// Client host memory for the dataset-size rule (GiB); None = this host's MemTotal.
    pub client_memory_gb: Option<f64>,
    pub num_client_hosts: u64,
    /// Accelerators per the rule's `num_processes`.
    pub accelerators: u64,
    /// Print messages to stdout.
    pub print: bool,
    /// Check the overrides against an MLPerf Storage division's rules.
    pub division: Option<Division>,
    /// Where rank 0 records the run as mlpstorage does
    /// (`training/<model>/datagen/<ts>/`). Default [`RecordDir::Off`].
    pub record: RecordDir,
}

impl Default for DatagenOptions {
    fn default() -> Self {
        DatagenOptions {
            workload: None,
            accelerator: Accelerator::B200,
            config_file: None,
            params: Vec::new(),
            data_dir: PathBuf::from("data"),
            force: false,
            threads: 2,
            progress: false,
            client_memory_gb: None,
            num_client_hosts: 1,
            accelerators: 1,
            print: true,
            division: None,
            record: RecordDir::Off,
        }
    }
}

/// One file to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileJob {
    pub path: String,
    /// Index within its split (train/valid).
    pub index: u64,
    /// Seed for this file's data.
    pub seed: u64,
}

/// Everything datagen will do, checked; nothing written yet.
#[derive(Clone, Debug)]
pub struct DatagenPlan {
    pub cfg: DlioConfig,
    pub model_dir: PathBuf,
    pub jobs: Vec<FileJob>,
    /// Estimated bytes (samples × real record size).
    pub estimated_bytes: u64,
    pub size_rule: DatasetSizeRule,
    pub memory_gb: f64,
}

/// What a run wrote.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct DatagenReport {
    pub files: usize,
    pub bytes: u64,
    pub seconds: f64,
    /// bytes / seconds / 1e9.
    pub gb_per_second: f64,
}

/// The split directories DLIO creates under `<data>/<model>/`.
pub const DATASET_SPLITS: [&str; 3] = ["train", "valid", "test"];

/// DLIO's file name: `<prefix>_<i zero-padded to len(str(n))>_of_<n>.<ext>`.
pub fn file_name(prefix: &str, i: u64, n: u64, ext: &str) -> String {
    let width = n.to_string().len();
    format!("{prefix}_{i:0width$}_of_{n}.{ext}")
}

/// DLIO's subfolder of file `i` when a split is spread over `subfolders`
/// directories (more than one): round robin, zero-padded to the width of
/// the folder count (`train/07/img_…`). `None` without subfolders.
pub fn subfolder_of(i: u64, subfolders: u64) -> Option<String> {
    (subfolders > 1).then(|| {
        let width = subfolders.to_string().len();
        format!("{:0width$}", i % subfolders)
    })
}

/// The Parquet schema of a config: its `dataset.parquet.columns` (float16,
/// float32, float64 or int8), or DLIO's legacy single column when none are given.
pub fn parquet_schema(cfg: &DlioConfig) -> Result<FluxSchema, BenchError> {
    if cfg.parquet_columns.is_empty() {
        // DLIO's legacy mode writes one uint8 column of record_length bytes;
        // we write the same byte count as float32.
        let n = ((cfg.record_length / 4.0).ceil() as usize).max(1);
        return Ok(FluxSchema::float32(&[("data", n)]));
    }
    cfg.parquet_columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let elem = ElemType::from_dtype(&c.dtype).ok_or_else(|| BenchError::BadParam {
                key: format!("dataset.parquet.columns[{i}].dtype"),
                reason: format!(
                    "only float16, float32, float64 and int8 columns are generated, got '{}'",
                    c.dtype
                ),
            })?;
            Ok(ColumnSpec {
                name: c.name.clone(),
                elem,
                size: c.size,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(|columns| FluxSchema { columns })
}

fn has_data(dir: &Path, ext: &str) -> bool {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .any(|e| e.file_name().to_string_lossy().ends_with(ext))
        })
        .unwrap_or(false)
}

/// Check options and build the file list; errors name the key or path.
pub fn plan(opts: &DatagenOptions) -> Result<DatagenPlan, BenchError> {
    if let Some(division) = opts.division {
        check_overrides(
            division,
            opts.workload,
            opts.accelerator,
            opts.config_file.is_some(),
            &opts.params,
        )?;
    }
    let raw = config::load(
        opts.workload,
        opts.accelerator,
        opts.config_file.as_deref(),
        &opts.params,
    )?;
    let cfg = raw.to_config()?;
    if opts.threads == 0 {
        return Err(BenchError::usage(
            "--threads",
            "datagen needs at least 1 writer thread".into(),
        ));
    }
    if cfg.format == FormatKind::Parquet {
        parquet_schema(&cfg)?;
    }
    let model_dir = opts.data_dir.join(&cfg.model);
    let ext = cfg.format.extension();
    let mut jobs = Vec::new();
    for (split, n, subfolders) in [
        ("train", cfg.num_files_train, cfg.num_subfolders_train),
        ("valid", cfg.num_files_eval, cfg.num_subfolders_eval),
    ] {
        if n == 0 {
            continue;
        }
        let dir = model_dir.join(split);
        let first_dir = match subfolder_of(0, subfolders) {
            Some(sub) => dir.join(sub),
            None => dir.clone(),
        };
        if has_data(&first_dir, &format!(".{ext}")) && !opts.force {
            return Err(BenchError::Dataset(format!(
                "{} already holds .{ext} files; refusing to overwrite them without --force",
                first_dir.display()
            )));
        }
        let salt = if split == "train" { 0 } else { 1 << 40 };
        for i in 0..n {
            let parent = match subfolder_of(i, subfolders) {
                Some(sub) => dir.join(sub),
                None => dir.clone(),
            };
            jobs.push(FileJob {
                path: parent
                    .join(file_name(&cfg.file_prefix, i, n, ext))
                    .to_string_lossy()
                    .to_string(),
                index: i,
                seed: cfg.seed.wrapping_mul(0x9E37_79B9).wrapping_add(salt + i),
            });
        }
    }
    let host_gb = crate::output::HostFacts::read().memory_gb;
    let memory_gb = opts.client_memory_gb.unwrap_or(host_gb);
    if !(memory_gb.is_finite() && memory_gb > 0.0) {
        return Err(BenchError::usage(
            "--client-memory-gb",
            "--client-memory-gb must be a positive number".into(),
        ));
    }
    let size_rule = dataset_size_rule(
        memory_gb,
        opts.num_client_hosts.max(1),
        opts.accelerators.max(1),
        cfg.batch_size,
        cfg.num_samples_per_file,
        cfg.record_size_real(),
    );
    let estimated_bytes =
        (jobs.len() as f64 * cfg.num_samples_per_file as f64 * cfg.record_size_real()) as u64;
    Ok(DatagenPlan {
        cfg,
        model_dir,
        jobs,
        estimated_bytes,
        size_rule,
        memory_gb,
    })
}

/// The lines explaining mlpstorage's dataset-size rule for this plan.
pub fn size_rule_text(p: &DatagenPlan, opts: &DatagenOptions) -> String {
    let r = &p.size_rule;
    let c = &p.cfg;
    format!(
        "Dataset size rule (mlpstorage calculate_training_data_size, Rules 3.1.2) for {mem} GiB × {hosts} host(s){src}, \
         {procs} accelerator(s):\n  \
         min_files_bytes   = ceil(5 × {total:.0} B / ({spf} × {rec:.0} B)) = {mfb}\n  \
         min_files_samples = ceil(500 × {procs} × {bs} / {spf}) = {mfs}\n  \
         => dataset.num_files_train ≥ {need}; generating {have}{verdict}",
        mem = p.memory_gb,
        hosts = opts.num_client_hosts.max(1),
        src = if opts.client_memory_gb.is_none() {
            " (this host's memory)"
        } else {
            ""
        },
        procs = opts.accelerators.max(1),
        total = r.total_mem_bytes,
        spf = c.num_samples_per_file,
        rec = c.record_size_real(),
        mfb = r.min_files_bytes,
        bs = c.batch_size,
        mfs = r.min_files_samples,
        need = r.num_files_train,
        have = c.num_files_train,
        verdict = if c.num_files_train >= r.num_files_train {
            ""
        } else {
            " (below the rule: fine for testing, not for a submission)"
        },
    )
}

/// Write one file of the plan in the config's format; returns its size.
fn write_file(
    cfg: &DlioConfig,
    schema: Option<&FluxSchema>,
    storage: &dyn Storage,
    job: &FileJob,
) -> Result<u64, BenchError> {
    let spf = cfg.num_samples_per_file;
    match cfg.format {
        FormatKind::Parquet => {
            let schema = schema
                .ok_or_else(|| BenchError::Internal("Parquet datagen without a schema".into()))?;
            format::write_parquet_file(
                storage,
                &job.path,
                schema,
                spf,
                cfg.parquet_row_group_size,
                job.seed,
            )
        }
        FormatKind::Npz => {
            let dims = format::npz_dims(cfg.record_length, cfg.record_length_stdev, job.seed);
            let spf = usize::try_from(spf).unwrap_or(usize::MAX);
            format::write_npz_file(storage, &job.path, dims, spf, job.seed)
        }
        FormatKind::Jpeg => {
            let target = jpeg_file_bytes(cfg.record_length, cfg.record_length_stdev, job.seed);
            format::jpeg::write_jpeg_file(storage, &job.path, target, job.seed)
        }
        FormatKind::Tfrecord => format::tfrecord::write_tfrecord_file(
            storage,
            &job.path,
            spf,
            cfg.record_length,
            cfg.record_length_stdev,
            job.seed,
        ),
    }
}

/// The size of one JPEG file: the record length, or with a stdev a draw from
/// Normal(record length, stdev) (as DLIO sizes its images), at least 1 byte
/// (the writer raises it to the smallest valid JPEG).
pub fn jpeg_file_bytes(mean: f64, stdev: f64, seed: u64) -> u64 {
    if stdev <= 0.0 {
        return mean.max(1.0) as u64;
    }
    let (z, _) = format::r#gen::normal_pair(seed ^ 0x4A50_4547);
    (mean + stdev * z).max(1.0) as u64
}

/// Refuses a dataset larger than the free space of the file system it
/// goes to (its nearest existing directory), before any file is written:
/// DLIO's size rule makes the default dataset 5× the host's memory, which
/// fills a small disk and leaves a partial dataset behind.
fn check_free_space(p: &DatagenPlan, opts: &DatagenOptions) -> Result<(), BenchError> {
    let Some(existing) = p.model_dir.ancestors().find(|a| a.is_dir()) else {
        return Ok(());
    };
    // Files a --force run replaces give their space back.
    let available = super::checkpoint::io::free_bytes(existing)?.saturating_add(if opts.force {
        bytes_under(&p.model_dir)
    } else {
        0
    });
    if p.estimated_bytes <= available {
        return Ok(());
    }
    let per_file = p.estimated_bytes / (p.jobs.len().max(1) as u64);
    let fits = available / per_file.max(1);
    Err(BenchError::NoSpace {
        path: existing.to_path_buf(),
        what: "the dataset",
        needed: p.estimated_bytes,
        available,
        hint: format!(
            "about {fits} of its {} files fit: generate fewer with --param \
             dataset.num_files_train=N (below the size rule's {} the run is not a closed \
             submission), or size it for less memory with --client-host-memory-in-gb{}",
            p.jobs.len(),
            p.size_rule.num_files_train,
            if opts.client_memory_gb.is_none() {
                " (today: this host's memory)"
            } else {
                ""
            }
        ),
    })
}

/// The bytes of the files under `dir` (0 where it cannot be read).
fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => bytes_under(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Generate the dataset into `storage` (paths are `opts.data_dir`-based).
pub fn run_datagen(
    opts: &DatagenOptions,
    storage: &dyn Storage,
) -> Result<(DatagenPlan, DatagenReport), BenchError> {
    run_datagen_shard(opts, storage, 0, 1)
}

/// [`run_datagen`] for MPI rank `rank` of `ranks`: it writes files
/// `rank, rank + ranks, …` of the plan (DLIO's split); the report counts its own files.
pub fn run_datagen_shard(
    opts: &DatagenOptions,
    storage: &dyn Storage,
    rank: usize,
    ranks: usize,
) -> Result<(DatagenPlan, DatagenReport), BenchError> {
    let mut p = plan(opts)?;
    // Where each split's first file goes (checked for existing objects below).
    let mut first_dirs: Vec<String> = p
        .jobs
        .iter()
        .filter(|j| j.index == 0)
        .filter_map(|j| Path::new(&j.path).parent())
        .map(|d| d.to_string_lossy().to_string())
        .collect();
    first_dirs.dedup();
    let ranks = ranks.max(1);
    if ranks > 1 {
        let all = p.jobs.len().max(1);
        p.jobs = std::mem::take(&mut p.jobs)
            .into_iter()
            .skip(rank)
            .step_by(ranks)
            .collect();
        p.estimated_bytes = p.estimated_bytes / all as u64 * p.jobs.len() as u64;
    }
    if !storage.is_remote() {
        check_free_space(&p, opts)?;
    }
    // In an object store `plan`'s local overwrite check cannot see the objects: list them.
    if storage.is_remote() && !opts.force {
        let ext = format!(".{}", p.cfg.format.extension());
        for dir in &first_dirs {
            if storage.list(dir)?.iter().any(|n| n.ends_with(&ext)) {
                return Err(BenchError::Dataset(format!(
                    "{dir} already holds {ext} objects; refusing to overwrite them without --force"
                )));
            }
        }
    }
    if opts.print {
        println!("{}", size_rule_text(&p, opts));
        println!(
            "Generating {} {} files ({} samples each) under {} with {} threads",
            p.jobs.len(),
            p.cfg.format.extension(),
            p.cfg.num_samples_per_file,
            p.model_dir.display(),
            opts.threads
        );
    }
    // DLIO and mlpstorage list train/, valid/ and test/ whether or not they
    // hold files; a missing one stops DLIO at start (FileNotFoundError).
    if rank == 0 {
        for split in DATASET_SPLITS {
            storage.create_dir(&p.model_dir.join(split).to_string_lossy())?;
        }
    }
    let schema = match p.cfg.format {
        FormatKind::Parquet => Some(parquet_schema(&p.cfg)?),
        FormatKind::Npz | FormatKind::Jpeg | FormatKind::Tfrecord => None,
    };
    let bar = opts.progress.then(|| {
        let bar = ProgressBar::new(p.estimated_bytes.max(1));
        if let Ok(style) = ProgressStyle::with_template(
            "datagen [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} (eta {eta}) {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    });
    let next = AtomicUsize::new(0);
    let written = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<BenchError>> = Mutex::new(None);
    let files_done = AtomicUsize::new(0);
    let started = chrono::Local::now();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..opts.threads.min(p.jobs.len().max(1)) {
            s.spawn(|| {
                loop {
                    if failed.load(Ordering::Relaxed) {
                        return;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = p.jobs.get(i) else { return };
                    let r = write_file(&p.cfg, schema.as_ref(), storage, job);
                    match r {
                        Ok(bytes) => {
                            written.fetch_add(bytes, Ordering::Relaxed);
                            let done = files_done.fetch_add(1, Ordering::Relaxed) + 1;
                            if let Some(b) = &bar {
                                b.inc(bytes);
                                b.set_message(format!("{done}/{} files", p.jobs.len()));
                            }
                        }
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            if let Ok(mut slot) = first_error.lock()
                                && slot.is_none()
                            {
                                *slot = Some(e);
                            }
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(e) = first_error.lock().ok().and_then(|mut g| g.take()) {
        return Err(e);
    }
    let seconds = t0.elapsed().as_secs_f64();
    let bytes = written.load(Ordering::Relaxed);
    let report = DatagenReport {
        files: p.jobs.len(),
        bytes,
        seconds,
        gb_per_second: if seconds > 0.0 {
            bytes as f64 / seconds / 1e9
        } else {
            0.0
        },
    };
    if rank == 0 {
        record::write_record(opts, &p, &report, started, ranks)?;
    }
    if opts.print {
        println!(
            "Generated {} files, {} bytes in {:.2} s: {:.3} GB/s ({:.3} GiB/s)",
            report.files,
            report.bytes,
            report.seconds,
            report.gb_per_second,
            report.gb_per_second * 1e9 / 1024f64.powi(3)
        );
    }
    Ok((p, report))
}

mod record;
#[cfg(test)]
mod tests;
