//! `storprof checkpoint`: MLPerf Storage's checkpointing benchmark (DLIO's
//! llama3 checkpoint workloads). Every rank writes its shards of each
//! checkpoint, fsynced, then reads them back after the page cache was
//! emptied; the run reports per-rank and per-checkpoint durations and
//! throughputs and the bytes written, fsynced and read.
//!
//! ```text
//!  CheckpointOptions ─► layout::Layout (TP×PP×DP, ZeRO) ─► per-rank shard files (÷ --scale)
//!     prepare folder: foreign files? manifest of an earlier run (--force)? statvfs free space
//!     generator probe (one thread)       rank sources: io::BlockSource per rank
//!     for each checkpoint k: barrier ─► every local rank: write its files (+fsync file, dir) ─► barrier
//!     drop caches (root: drop_caches; else fadvise DONTNEED) when data per client < 3× memory
//!     for each checkpoint k ≤ read: barrier ─► every local rank: read its files back ─► barrier
//!     gather rank results ─► summary (max duration, min throughput) ─► [METRIC], summary.json
//! ```
//! Ranks are threads of this process ([`Threads`]) or, under mpirun, the
//! MPI world's processes (the same [`crate::run::mpi::MpiWorld`] `bench` uses).
pub mod io;
pub mod layout;
pub mod s3io;
pub mod summary;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Local};

use crate::error::BenchError;
use io::{BlockSource, CacheDrop, IoBytes, Manifest, WriteMode};
use layout::{Layout, LlamaModel, scaled};
use summary::{PhaseMeans, PhaseStats, RankIo, aggregate, phase_means};

const GIB: f64 = (1u64 << 30) as f64;

/// Options of a checkpoint run; the CLI maps onto these.
#[derive(Clone, Debug)]
pub struct CheckpointOptions {
    pub model: LlamaModel,
    /// MLPerf's subset mode: 8 processes of the full layout on one host.
    pub subset: bool,
    /// Checkpoints written [default: 10, as the workload YAMLs].
    pub num_checkpoints_write: u32,
    /// Checkpoints read back, the first ones written [default: 10].
    pub num_checkpoints_read: u32,
    /// Folder the checkpoints go to: a local path, or `s3://BUCKET/PREFIX`
    /// (each shard one object; see [`s3io`]).
    pub folder: PathBuf,
    /// Connection settings of an `s3://` folder [default: `S3Options::default`,
    /// i.e. the AWS environment variables].
    pub s3: crate::storage::S3Options,
    /// Divide every shard's size by this (≥ 1) [default: 1].
    pub scale: f64,
    /// Write and read with O_DIRECT (aligned buffers) [default: false].
    pub odirect: bool,
    /// fsync every file and checkpoint directory [default: true]; off
    /// leaves dirty pages for the kernel to write back.
    pub fsync: bool,
    /// Processes (default: the layout's, or 8 in subset mode).
    pub ranks: Option<usize>,
    /// Remove an earlier storprof run's files from the folder first [default: false].
    pub force: bool,
    /// Bytes per write/read call, a multiple of 4096 [default: 32 MiB, DLIO's chunk].
    pub block_size: usize,
    /// Where summary.json goes (default `results/checkpointing/<model>/<YYYYMMDD_HHMMSS>`).
    pub results_dir: Option<PathBuf>,
    /// Client memory for the 3× rule (default: this host's MemTotal).
    pub client_memory_bytes: Option<u64>,
    /// Print the `[OUTPUT]`/`[METRIC]` lines [default: true].
    pub print: bool,
    /// How long the generator probe runs [default: 300 ms].
    pub generator_probe: Duration,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        Self {
            model: LlamaModel::Llama3_8b,
            subset: false,
            num_checkpoints_write: 10,
            num_checkpoints_read: 10,
            folder: PathBuf::from("checkpoints"),
            s3: crate::storage::S3Options::default(),
            scale: 1.0,
            odirect: false,
            fsync: true,
            ranks: None,
            force: false,
            block_size: 32 << 20,
            results_dir: None,
            client_memory_bytes: None,
            print: true,
            generator_probe: Duration::from_millis(300),
        }
    }
}

/// The ranks of a checkpoint run and how they meet.
pub trait CheckpointRanks: Sync {
    /// Every rank of the run.
    fn size(&self) -> usize;
    /// The ranks this process runs (as threads).
    fn local_ranks(&self) -> Vec<usize>;
    /// This process prints and writes the results.
    fn is_reporter(&self) -> bool;
    /// Wait for every process (threads of one process meet by joining).
    fn barrier(&self);
    /// The reporter gets every process's bytes, its own first.
    fn gather(&self, mine: Vec<u8>) -> Option<Vec<Vec<u8>>>;
}

/// Every rank a thread of this process.
#[derive(Clone, Copy, Debug)]
pub struct Threads(pub usize);

impl CheckpointRanks for Threads {
    fn size(&self) -> usize {
        self.0
    }
    fn local_ranks(&self) -> Vec<usize> {
        (0..self.0).collect()
    }
    fn is_reporter(&self) -> bool {
        true
    }
    fn barrier(&self) {}
    fn gather(&self, mine: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        Some(vec![mine])
    }
}

#[cfg(feature = "mpi")]
impl CheckpointRanks for crate::run::mpi::MpiWorld {
    fn size(&self) -> usize {
        crate::run::mpi::MpiWorld::size(self)
    }
    fn local_ranks(&self) -> Vec<usize> {
        vec![self.rank()]
    }
    fn is_reporter(&self) -> bool {
        self.rank() == 0
    }
    fn barrier(&self) {
        self.agree(false);
    }
    fn gather(&self, mine: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        crate::run::mpi::MpiWorld::gather(self, mine)
    }
}

/// One shard file of one rank, scaled.
#[derive(Clone, Debug)]
struct PlannedFile {
    name: String,
    bytes: u64,
}

/// Name of checkpoint `k`'s directory (DLIO's `global_epoch<e>_step<s>`).
pub fn checkpoint_dir_name(k: u32) -> String {
    format!("global_epoch1_step{k}")
}

/// The whole run's result, on the reporting process.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CheckpointSummary {
    pub benchmark: &'static str,
    pub model: LlamaModel,
    pub mode: &'static str,
    pub start: String,
    pub end: String,
    pub hostname: String,
    pub num_processes: usize,
    pub tensor_parallelism: usize,
    pub pipeline_parallelism: usize,
    pub data_parallelism: usize,
    pub zero_stage: u8,
    pub num_parameters: u64,
    pub checkpoint_folder: String,
    /// When a shard counts as saved: after its fsync, or (S3) after its upload completed.
    pub durability: String,
    pub scale: f64,
    pub block_size: usize,
    pub odirect: bool,
    pub fsync: bool,
    pub num_checkpoints_write: u32,
    pub num_checkpoints_read: u32,
    /// One checkpoint's bytes as written (after --scale), GiB.
    #[serde(rename = "checkpoint_size_GB")]
    pub checkpoint_size_gb: f64,
    /// One checkpoint's bytes at full size, GiB.
    #[serde(rename = "unscaled_checkpoint_size_GB")]
    pub unscaled_checkpoint_size_gb: f64,
    /// Bytes this host's ranks wrote over the run, GiB.
    #[serde(rename = "data_per_client_GB")]
    pub data_per_client_gb: f64,
    #[serde(rename = "client_memory_GB")]
    pub client_memory_gb: f64,
    pub cache_drop: CacheDrop,
    pub generator: GeneratorFigures,
    pub metric: Metrics,
    pub bytes: MeasuredBytes,
}

/// The data generator's speed beside the writers'.
#[derive(Clone, Copy, Debug, serde::Serialize)]
// DLIO's key names (`..._GB_per_second`) are kept as field names.
#[allow(non_snake_case)]
pub struct GeneratorFigures {
    /// One thread alone, GiB/s.
    pub one_thread_GB_per_second: f64,
    /// Threads the writers generate on (one per local rank, at most the cores).
    pub threads: usize,
    /// one_thread × threads, GiB/s.
    pub capacity_GB_per_second: f64,
    /// Mean aggregate save throughput, GiB/s.
    pub write_GB_per_second: f64,
    /// capacity / write (the goal is ≥ 2).
    pub ratio_to_write: f64,
}

/// DLIO-named means over checkpoints.
#[derive(Clone, Copy, Debug, serde::Serialize)]
#[allow(non_snake_case)]
pub struct Metrics {
    pub save_checkpoint_duration_mean_seconds: f64,
    pub save_checkpoint_duration_stdev_seconds: f64,
    pub save_checkpoint_io_mean_GB_per_second: f64,
    pub save_checkpoint_io_stdev_GB_per_second: f64,
    pub save_checkpoint_aggregate_io_mean_GB_per_second: f64,
    pub load_checkpoint_duration_mean_seconds: f64,
    pub load_checkpoint_duration_stdev_seconds: f64,
    pub load_checkpoint_io_mean_GB_per_second: f64,
    pub load_checkpoint_io_stdev_GB_per_second: f64,
    pub load_checkpoint_aggregate_io_mean_GB_per_second: f64,
}

impl Metrics {
    fn from(save: &PhaseMeans, load: &PhaseMeans) -> Self {
        Metrics {
            save_checkpoint_duration_mean_seconds: save.duration_mean_seconds,
            save_checkpoint_duration_stdev_seconds: save.duration_stdev_seconds,
            save_checkpoint_io_mean_GB_per_second: save.io_mean_GB_per_second,
            save_checkpoint_io_stdev_GB_per_second: save.io_stdev_GB_per_second,
            save_checkpoint_aggregate_io_mean_GB_per_second: save.aggregate_io_mean_GB_per_second,
            load_checkpoint_duration_mean_seconds: load.duration_mean_seconds,
            load_checkpoint_duration_stdev_seconds: load.duration_stdev_seconds,
            load_checkpoint_io_mean_GB_per_second: load.io_mean_GB_per_second,
            load_checkpoint_io_stdev_GB_per_second: load.io_stdev_GB_per_second,
            load_checkpoint_aggregate_io_mean_GB_per_second: load.aggregate_io_mean_GB_per_second,
        }
    }
}

/// Bytes measured at the system calls.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct MeasuredBytes {
    pub written: u64,
    pub fsynced: u64,
    pub read: u64,
    pub files_written: u64,
    pub fsyncs: u64,
    pub files_read: u64,
}

/// Per-checkpoint details (per_checkpoint.json).
#[derive(Clone, Debug, serde::Serialize)]
pub struct CheckpointDetails {
    pub save: Vec<NumberedPhase>,
    pub load: Vec<NumberedPhase>,
}

/// One checkpoint's phase with its number.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NumberedPhase {
    pub checkpoint: u32,
    #[serde(flatten)]
    pub stats: PhaseStats,
}

/// What the reporting process returns.
#[derive(Clone, Debug)]
pub struct CheckpointReport {
    pub summary: CheckpointSummary,
    pub details: CheckpointDetails,
    pub results_dir: PathBuf,
}

/// One process's rank results: `saves[k][i]`, `loads[k][i]`.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct ProcessResults {
    saves: Vec<Vec<RankIo>>,
    loads: Vec<Vec<RankIo>>,
    cache_drop: Option<String>,
}

fn timestamp() -> String {
    Local::now().format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `MemTotal` of /proc/meminfo, bytes.
fn mem_total() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb.saturating_mul(1024))
}

/// Check the options that do not depend on the file system.
fn validate(opts: &CheckpointOptions) -> Result<(), BenchError> {
    if !opts.scale.is_finite() || opts.scale < 1.0 {
        return Err(BenchError::BadParam {
            key: "--scale".into(),
            reason: format!(
                "{} is not a number ≥ 1 (sizes are divided by it)",
                opts.scale
            ),
        });
    }
    if opts.block_size == 0 || !opts.block_size.is_multiple_of(io::DIRECT_ALIGN) {
        return Err(BenchError::BadParam {
            key: "--block-size".into(),
            reason: format!(
                "{} bytes is not a positive multiple of {}",
                opts.block_size,
                io::DIRECT_ALIGN
            ),
        });
    }
    if opts.odirect && is_s3(&opts.folder) {
        return Err(BenchError::BadParam {
            key: "--odirect".into(),
            reason: "O_DIRECT applies to local files, not to an s3:// checkpoint folder".into(),
        });
    }
    if opts.num_checkpoints_read > opts.num_checkpoints_write {
        return Err(BenchError::BadParam {
            key: "--num-checkpoints-read".into(),
            reason: format!(
                "{} checkpoints cannot be read back when {} are written",
                opts.num_checkpoints_read, opts.num_checkpoints_write
            ),
        });
    }
    Ok(())
}

fn is_s3(folder: &Path) -> bool {
    folder.to_string_lossy().starts_with("s3://")
}

/// Make `folder` ready: created if missing; refused if it holds files
/// storprof did not write, or an earlier run without `force` (which then
/// removes only that run's listed files); refused if the file system lacks
/// `needed` bytes. Writes the new run's manifest.
fn prepare_folder(
    folder: &Path,
    force: bool,
    needed: u64,
    manifest: &Manifest,
) -> Result<(), BenchError> {
    std::fs::create_dir_all(folder).map_err(io_err(folder))?;
    if let Some(old) = Manifest::read(folder)? {
        if !force {
            return Err(BenchError::ExistingCheckpoint {
                path: folder.to_path_buf(),
                files: old.files.len(),
            });
        }
        old.remove_listed(folder)?;
    }
    let mut entries: Vec<String> = std::fs::read_dir(folder)
        .map_err(io_err(folder))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    // Foreign entries are never removed; without --force any refuses the
    // run, with it only those a checkpoint would write into do.
    let colliding: Vec<&String> = entries
        .iter()
        .filter(|e| !force || manifest.dirs.contains(e))
        .collect();
    if let Some(first) = colliding.first() {
        return Err(BenchError::ForeignFiles {
            path: folder.to_path_buf(),
            count: colliding.len(),
            example: (*first).clone(),
        });
    }
    let available = io::free_bytes(folder)?;
    if needed > available {
        return Err(BenchError::NoSpace {
            path: folder.to_path_buf(),
            what: "the checkpoints",
            needed,
            available,
            hint: "lower --num-checkpoints-write or raise --scale".to_string(),
        });
    }
    manifest.write(folder)
}

/// Run the checkpoint benchmark over `ranks`; `Some` on the reporter.
pub fn run_checkpoint(
    opts: &CheckpointOptions,
    ranks: &dyn CheckpointRanks,
) -> Result<Option<CheckpointReport>, BenchError> {
    validate(opts)?;
    let layout = Layout::new(opts.model, opts.subset, opts.ranks.or(Some(ranks.size())))?;
    if layout.ranks != ranks.size() {
        return Err(BenchError::BadLayout {
            model: layout.spec.name,
            ranks: ranks.size(),
            reason: format!("the layout needs {} ranks", layout.ranks),
        });
    }
    let started: DateTime<Local> = Local::now();
    let start = timestamp();
    let plans: Vec<Vec<PlannedFile>> = (0..layout.ranks)
        .map(|r| {
            layout
                .rank_files(r)
                .into_iter()
                .map(|f| PlannedFile {
                    bytes: scaled(f.bytes, opts.scale),
                    name: f.name,
                })
                .collect()
        })
        .collect();
    let checkpoint_bytes = plans
        .iter()
        .flatten()
        .try_fold(0u64, |acc, f| acc.checked_add(f.bytes))
        .ok_or_else(|| BenchError::Config("checkpoint size overflows 64 bits".into()))?;
    let needed = checkpoint_bytes
        .checked_mul(u64::from(opts.num_checkpoints_write))
        .ok_or_else(|| BenchError::Config("total checkpoint bytes overflow 64 bits".into()))?;
    let dirs: Vec<String> = (1..=opts.num_checkpoints_write)
        .map(checkpoint_dir_name)
        .collect();
    let manifest = Manifest {
        writer: Manifest::WRITER.into(),
        model: layout.spec.name.into(),
        dirs: dirs.clone(),
        files: dirs
            .iter()
            .flat_map(|d| {
                plans
                    .iter()
                    .flatten()
                    .map(move |f| format!("{d}/{}", f.name))
            })
            .collect(),
    };
    let print = opts.print && ranks.is_reporter();
    let local = ranks.local_ranks();
    let s3 = s3io::S3Folder::parse(&opts.folder.to_string_lossy(), &opts.s3)?;
    if ranks.is_reporter() {
        match &s3 {
            Some(s3) => s3.prepare(opts.force, &manifest)?,
            None => prepare_folder(&opts.folder, opts.force, needed, &manifest)?,
        }
    }
    let durability = match (&s3, opts.fsync) {
        (Some(_), _) => s3io::S3_DURABILITY.to_string(),
        (None, true) => "each shard file fsynced, then its directory".to_string(),
        (None, false) => {
            "--no-fsync: shards left as dirty pages for the kernel's writeback".to_string()
        }
    };
    ranks.barrier();
    if print {
        let mode = if layout.subset { " (subset)" } else { "" };
        println!(
            "[OUTPUT] {} Running DLIO [Checkpointing] with {} process(es)",
            timestamp(),
            layout.ranks
        );
        println!(
            "[OUTPUT] {} Total checkpoint size: {:.6} GB{mode}; written at 1/{} scale: {:.6} GB",
            timestamp(),
            layout.checkpoint_bytes() as f64 / GIB,
            opts.scale,
            checkpoint_bytes as f64 / GIB
        );
        if let Some(s3) = &s3 {
            println!(
                "[OUTPUT] {} Checkpoints go to {}: {durability}",
                timestamp(),
                crate::storage::Storage::describe(s3.storage.as_ref())
            );
        }
    }

    // The generator alone, then one source per local rank.
    let generator_one =
        BlockSource::measure(opts.block_size, opts.generator_probe, opts.odirect)? / GIB;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let generator_threads = local.len().clamp(1, cores);
    let mut sources: Vec<BlockSource> = local
        .iter()
        .map(|&r| {
            // Huge pages only for O_DIRECT (see BlockSource::with_huge_pages).
            BlockSource::with_huge_pages(
                opts.block_size,
                2,
                0x0c4e_c4b0 ^ ((r as u64) << 20),
                opts.odirect,
            )
        })
        .collect::<Result<_, _>>()?;
    let mode = WriteMode {
        block: opts.block_size,
        odirect: opts.odirect,
        // An object store has nothing to fsync (see s3io::S3_DURABILITY).
        fsync: opts.fsync && s3.is_none(),
    };

    let mut results = ProcessResults::default();
    for k in 1..=opts.num_checkpoints_write {
        let dir_name = checkpoint_dir_name(k);
        let dir = opts.folder.join(&dir_name);
        if s3.is_none() {
            std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        }
        ranks.barrier();
        if print {
            println!("[OUTPUT] {} Starting saving checkpoint {k}", timestamp());
        }
        let saved = std::thread::scope(|s| {
            let handles: Vec<_> = local
                .iter()
                .zip(sources.iter_mut())
                .map(|(&rank, src)| {
                    let files = &plans[rank];
                    let dir = &dir;
                    let dir_name = &dir_name;
                    let s3 = s3.as_ref();
                    s.spawn(move || -> Result<RankIo, BenchError> {
                        let t = Instant::now();
                        let mut total = IoBytes::default();
                        for f in files {
                            total.add(match s3 {
                                Some(s3) => s3.write_object(
                                    &format!("{dir_name}/{}", f.name),
                                    f.bytes,
                                    src,
                                    mode.block,
                                )?,
                                None => io::write_file(&dir.join(&f.name), f.bytes, src, mode)?,
                            });
                        }
                        if mode.fsync {
                            io::fsync_dir(dir)?;
                            total.fsyncs += 1;
                        }
                        Ok(RankIo {
                            rank,
                            seconds: t.elapsed().as_secs_f64(),
                            io: total,
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| BenchError::RankPanicked { rank: 0 })?)
                .collect::<Result<Vec<RankIo>, BenchError>>()
        })?;
        if mode.fsync {
            // The new directory's own entry in the folder.
            io::fsync_dir(&opts.folder)?;
        }
        ranks.barrier();
        if print {
            let p = aggregate(&saved);
            println!(
                "[OUTPUT] {} Finished saving checkpoint {k} in {:.4} s; Throughput: {:.4} GiB/s{}",
                timestamp(),
                p.duration_seconds,
                p.aggregate_GB_per_second,
                scope_note(local.len(), layout.ranks)
            );
        }
        results.saves.push(saved);
    }

    // MLPerf: caches are cleared between write and read when the checkpoint
    // data per client is under 3× its memory.
    let local_bytes: u64 = local
        .iter()
        .flat_map(|&r| plans[r].iter())
        .map(|f| f.bytes)
        .sum::<u64>()
        .saturating_mul(u64::from(opts.num_checkpoints_write));
    let memory = opts.client_memory_bytes.unwrap_or_else(mem_total);
    let mut cache_drop = CacheDrop::NotNeeded;
    if s3.is_some() {
        cache_drop = CacheDrop::RemoteObjects;
    } else if opts.num_checkpoints_read > 0 && local_bytes < memory.saturating_mul(3) {
        let files: Vec<PathBuf> = (1..=opts.num_checkpoints_read)
            .flat_map(|k| {
                let dir = opts.folder.join(checkpoint_dir_name(k));
                local
                    .iter()
                    .flat_map(|&r| plans[r].iter())
                    .map(move |f| dir.join(&f.name))
                    .collect::<Vec<_>>()
            })
            .collect();
        cache_drop = io::drop_caches(&files)?;
        if print {
            println!(
                "[OUTPUT] {} Page cache emptied before the read-back ({})",
                timestamp(),
                match cache_drop {
                    CacheDrop::DropCaches => "echo 3 > /proc/sys/vm/drop_caches",
                    CacheDrop::FadviseDontneed => "posix_fadvise DONTNEED per file: not root",
                    CacheDrop::NotNeeded | CacheDrop::RemoteObjects => "not needed",
                }
            );
        }
    }
    results.cache_drop = Some(format!("{cache_drop:?}"));

    let mut buffers: Vec<crate::storage::AlignedBuf> = local
        .iter()
        .map(|_| {
            crate::storage::AlignedBuf::new(opts.block_size).ok_or_else(|| {
                BenchError::Config(format!("cannot map a {}-byte read buffer", opts.block_size))
            })
        })
        .collect::<Result<_, _>>()?;
    for k in 1..=opts.num_checkpoints_read {
        let dir_name = checkpoint_dir_name(k);
        let dir = opts.folder.join(&dir_name);
        ranks.barrier();
        if print {
            println!("[OUTPUT] {} Starting loading checkpoint {k}", timestamp());
        }
        let loaded = std::thread::scope(|s| {
            let handles: Vec<_> = local
                .iter()
                .zip(buffers.iter_mut())
                .map(|(&rank, buf)| {
                    let files = &plans[rank];
                    let dir = &dir;
                    let dir_name = &dir_name;
                    let s3 = s3.as_ref();
                    let odirect = opts.odirect;
                    s.spawn(move || -> Result<RankIo, BenchError> {
                        let t = Instant::now();
                        let mut total = IoBytes::default();
                        for f in files {
                            let n = match s3 {
                                Some(s3) => {
                                    s3.read_object(&format!("{dir_name}/{}", f.name), buf)?
                                }
                                None => io::read_file(&dir.join(&f.name), buf, odirect)?,
                            };
                            total.add(IoBytes {
                                bytes: n,
                                files: 1,
                                ..IoBytes::default()
                            });
                        }
                        Ok(RankIo {
                            rank,
                            seconds: t.elapsed().as_secs_f64(),
                            io: total,
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().map_err(|_| BenchError::RankPanicked { rank: 0 })?)
                .collect::<Result<Vec<RankIo>, BenchError>>()
        })?;
        ranks.barrier();
        if print {
            let p = aggregate(&loaded);
            println!(
                "[OUTPUT] {} Finished loading checkpoint {k} in {:.4} s; Throughput: {:.4} GiB/s{}",
                timestamp(),
                p.duration_seconds,
                p.aggregate_GB_per_second,
                scope_note(local.len(), layout.ranks)
            );
        }
        results.loads.push(loaded);
    }

    let mine = serde_json::to_vec(&results)
        .map_err(|e| BenchError::Config(format!("rank results: {e}")))?;
    let Some(all) = ranks.gather(mine) else {
        return Ok(None);
    };
    let mut saves: Vec<Vec<RankIo>> = vec![Vec::new(); opts.num_checkpoints_write as usize];
    let mut loads: Vec<Vec<RankIo>> = vec![Vec::new(); opts.num_checkpoints_read as usize];
    for bytes in &all {
        let p: ProcessResults = serde_json::from_slice(bytes)
            .map_err(|e| BenchError::Config(format!("gather: {e}")))?;
        for (k, v) in p.saves.into_iter().enumerate() {
            if let Some(slot) = saves.get_mut(k) {
                slot.extend(v);
            }
        }
        for (k, v) in p.loads.into_iter().enumerate() {
            if let Some(slot) = loads.get_mut(k) {
                slot.extend(v);
            }
        }
    }
    let save_phases: Vec<PhaseStats> = saves.iter().map(|r| aggregate(r)).collect();
    let load_phases: Vec<PhaseStats> = loads.iter().map(|r| aggregate(r)).collect();
    let save_means = phase_means(&save_phases);
    let load_means = phase_means(&load_phases);
    let mut bytes = MeasuredBytes::default();
    for p in &save_phases {
        bytes.written += p.io.bytes;
        bytes.fsynced += p.io.fsynced;
        bytes.files_written += p.io.files;
        bytes.fsyncs += p.io.fsyncs;
    }
    for p in &load_phases {
        bytes.read += p.io.bytes;
        bytes.files_read += p.io.files;
    }
    let capacity = generator_one * generator_threads as f64;
    let write_speed = save_means.aggregate_io_mean_GB_per_second;
    let generator = GeneratorFigures {
        one_thread_GB_per_second: generator_one,
        threads: generator_threads,
        capacity_GB_per_second: capacity,
        write_GB_per_second: write_speed,
        ratio_to_write: if write_speed > 0.0 {
            capacity / write_speed
        } else {
            0.0
        },
    };
    let summary = CheckpointSummary {
        benchmark: "checkpointing",
        model: opts.model,
        mode: if layout.subset { "subset" } else { "full" },
        start,
        end: timestamp(),
        hostname: crate::output::host_label(),
        num_processes: layout.ranks,
        tensor_parallelism: layout.spec.tensor,
        pipeline_parallelism: layout.spec.pipeline,
        data_parallelism: layout.data,
        zero_stage: layout.spec.zero_stage,
        num_parameters: layout.spec.num_parameters(),
        checkpoint_folder: opts.folder.to_string_lossy().into_owned(),
        durability,
        scale: opts.scale,
        block_size: opts.block_size,
        odirect: opts.odirect,
        fsync: mode.fsync,
        num_checkpoints_write: opts.num_checkpoints_write,
        num_checkpoints_read: opts.num_checkpoints_read,
        checkpoint_size_gb: checkpoint_bytes as f64 / GIB,
        unscaled_checkpoint_size_gb: layout.checkpoint_bytes() as f64 / GIB,
        data_per_client_gb: local_bytes as f64 / GIB,
        client_memory_gb: memory as f64 / GIB,
        cache_drop,
        generator,
        metric: Metrics::from(&save_means, &load_means),
        bytes,
    };
    let details = CheckpointDetails {
        save: number(save_phases),
        load: number(load_phases),
    };
    let results_dir = opts.results_dir.clone().unwrap_or_else(|| {
        PathBuf::from("results/checkpointing")
            .join(layout.spec.name)
            .join(started.format("%Y%m%d_%H%M%S").to_string())
    });
    write_results(&results_dir, &summary, &details)?;
    if print {
        print_metrics(&summary);
        println!(
            "[OUTPUT] {} Saved outputs in {}",
            timestamp(),
            results_dir.display()
        );
    }
    Ok(Some(CheckpointReport {
        summary,
        details,
        results_dir,
    }))
}

/// Under mpirun the per-checkpoint line only knows this process's ranks
/// (the [METRIC] block has every rank's).
fn scope_note(local: usize, all: usize) -> String {
    if local < all {
        format!(" (this process's {local} of {all} ranks)")
    } else {
        String::new()
    }
}

fn number(phases: Vec<PhaseStats>) -> Vec<NumberedPhase> {
    (1u32..)
        .zip(phases)
        .map(|(checkpoint, stats)| NumberedPhase { checkpoint, stats })
        .collect()
}

fn write_results(
    dir: &Path,
    summary: &CheckpointSummary,
    details: &CheckpointDetails,
) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    for (name, value) in [
        ("summary.json", serde_json::to_value(summary)),
        ("per_checkpoint.json", serde_json::to_value(details)),
    ] {
        let path = dir.join(name);
        let value = value.map_err(|e| BenchError::Config(format!("{name}: {e}")))?;
        let text = serde_json::to_string_pretty(&value)
            .map_err(|e| BenchError::Config(format!("{name}: {e}")))?;
        std::fs::write(&path, text + "\n").map_err(io_err(&path))?;
    }
    Ok(())
}

/// The [METRIC] block (DLIO's layout; GB are 2^30 bytes, labelled GiB).
fn print_metrics(s: &CheckpointSummary) {
    let m = &s.metric;
    let bar = "[METRIC] ==========================================================";
    println!("[OUTPUT] Averaged metric over all checkpoints");
    println!("{bar}");
    println!("[METRIC] Number of Processes: {} ", s.num_processes);
    println!(
        "[METRIC] Checkpoint size (GiB): {:.4} (unscaled {:.4})",
        s.checkpoint_size_gb, s.unscaled_checkpoint_size_gb
    );
    println!(
        "[METRIC] Checkpoint save duration (seconds): {:.4} ({:.4})",
        m.save_checkpoint_duration_mean_seconds, m.save_checkpoint_duration_stdev_seconds
    );
    println!(
        "[METRIC] Checkpoint save I/O Throughput, slowest rank (GiB/second): {:.4} ({:.4})",
        m.save_checkpoint_io_mean_GB_per_second, m.save_checkpoint_io_stdev_GB_per_second
    );
    println!(
        "[METRIC] Checkpoint save I/O Throughput, aggregate (GiB/second): {:.4}",
        m.save_checkpoint_aggregate_io_mean_GB_per_second
    );
    if s.num_checkpoints_read > 0 {
        println!(
            "[METRIC] Checkpoint load duration (seconds): {:.4} ({:.4})",
            m.load_checkpoint_duration_mean_seconds, m.load_checkpoint_duration_stdev_seconds
        );
        println!(
            "[METRIC] Checkpoint load I/O Throughput, slowest rank (GiB/second): {:.4} ({:.4})",
            m.load_checkpoint_io_mean_GB_per_second, m.load_checkpoint_io_stdev_GB_per_second
        );
        println!(
            "[METRIC] Checkpoint load I/O Throughput, aggregate (GiB/second): {:.4}",
            m.load_checkpoint_aggregate_io_mean_GB_per_second
        );
    }
    let g = &s.generator;
    println!(
        "[METRIC] Data generator (GiB/second): {:.4} on {} thread(s) ({:.4} per thread); write: {:.4}",
        g.capacity_GB_per_second, g.threads, g.one_thread_GB_per_second, g.write_GB_per_second
    );
    println!(
        "[METRIC] Bytes written: {} fsynced: {} read: {}",
        s.bytes.written, s.bytes.fsynced, s.bytes.read
    );
    println!("{bar}");
    if g.write_GB_per_second > 0.0 && g.ratio_to_write < 2.0 {
        eprintln!(
            "storprof: warning: the data generator ({:.2} GiB/s) is less than 2× the write speed \
             ({:.2} GiB/s): it may limit the writers",
            g.capacity_GB_per_second, g.write_GB_per_second
        );
    }
}

#[cfg(test)]
mod tests;
