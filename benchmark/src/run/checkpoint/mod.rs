//! `storprof checkpoint`: MLPerf Storage's checkpointing benchmark (DLIO's
//! llama3 checkpoint workloads). Every rank writes its shards of each
//! checkpoint, fsynced, then reads them back after the page cache was
//! emptied; the run reports per-rank and per-checkpoint durations and
//! throughputs and the bytes written, fsynced and read.
//!
//! ```text
//!  plan:    CheckpointOptions ─► layout::Layout (TP×PP×DP, ZeRO) ─► per-rank shard files (÷ --scale)
//!           prepare folder: foreign files? manifest of an earlier run (--force)? statvfs free space
//!  here:    generator probe (one thread)       rank sources: io::BlockSource per rank
//!  phases:  for each checkpoint k: barrier ─► every local rank: write its files (+fsync file, dir) ─► barrier
//!  here:    drop caches (root: drop_caches; else fadvise DONTNEED) when data per client < 3× memory
//!  phases:  for each checkpoint k ≤ read: barrier ─► every local rank: read its files back ─► barrier
//!  results: gather rank results ─► summary (max duration, min throughput) ─► [METRIC], summary.json
//! ```
//! A local folder and an object-store prefix are one `phases::Target`.
//! Ranks are threads of this process ([`Threads`]) or, under mpirun, the
//! MPI world's processes (the same [`crate::run::mpi::MpiWorld`] `bench` uses).
pub mod io;
pub mod layout;
mod phases;
mod plan;
mod results;
pub mod s3io;
mod stages;
pub mod summary;

pub use results::{
    CheckpointDetails, CheckpointReport, CheckpointSummary, GeneratorFigures, MeasuredBytes,
    Metrics, NumberedPhase,
};

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Local};

use crate::error::BenchError;
use io::{BlockSource, CacheDrop, WriteMode};
use layout::{Layout, LlamaModel};
use phases::Target;
use plan::{Plan, prepare_folder};
use stages::{
    PhaseRun, RunFacts, build_report, durability_of, empty_cache_if_needed, load_checkpoints,
    save_checkpoints,
};
use summary::{RankIo, aggregate};

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

/// Run the checkpoint benchmark over `ranks`; `Some` on the reporter.
pub fn run_checkpoint(
    opts: &CheckpointOptions,
    ranks: &dyn CheckpointRanks,
) -> Result<Option<CheckpointReport>, BenchError> {
    let Plan {
        layout,
        files: plans,
        checkpoint_bytes,
        needed,
        manifest,
    } = Plan::new(opts, ranks.size())?;
    let started: DateTime<Local> = Local::now();
    let start = timestamp();
    let print = opts.print && ranks.is_reporter();
    let local = ranks.local_ranks();
    let s3 = s3io::S3Folder::parse(&opts.folder.to_string_lossy(), &opts.s3)?;
    if ranks.is_reporter() {
        match &s3 {
            Some(s3) => s3.prepare(opts.force, &manifest)?,
            None => prepare_folder(&opts.folder, opts.force, needed, &manifest)?,
        }
    }
    let durability = durability_of(s3.is_some(), opts.fsync).to_string();
    ranks.barrier();
    if print {
        print_start(
            &layout,
            opts.scale,
            checkpoint_bytes,
            s3.as_ref(),
            &durability,
        );
    }

    // The generator alone, then one source per local rank.
    let generator_one =
        BlockSource::measure(opts.block_size, opts.generator_probe, opts.odirect)? / GIB;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let generator_threads = local.len().clamp(1, cores);
    let mut sources = rank_sources(opts, &local)?;
    let mode = WriteMode {
        block: opts.block_size,
        odirect: opts.odirect,
        // An object store has nothing to fsync (see s3io::S3_DURABILITY).
        fsync: opts.fsync && s3.is_none(),
    };

    let phases = PhaseRun {
        ranks,
        target: match &s3 {
            Some(s3) => Target::Objects(s3),
            None => Target::Folder(&opts.folder),
        },
        plans: &plans,
        local: &local,
        all_ranks: layout.ranks,
        print,
    };
    let mut results = ProcessResults {
        saves: save_checkpoints(&phases, opts.num_checkpoints_write, &mut sources, mode)?,
        ..ProcessResults::default()
    };
    let cache = empty_cache_if_needed(opts, &plans, &local, s3.is_some(), print)?;
    results.cache_drop = Some(format!("{:?}", cache.cache_drop));
    results.loads = load_checkpoints(&phases, opts)?;

    let Some((saves, loads)) = gather(ranks, &results, opts)? else {
        return Ok(None);
    };
    let facts = RunFacts {
        started,
        start,
        durability,
        fsync: mode.fsync,
        checkpoint_bytes,
        generator_one,
        generator_threads,
    };
    let report = build_report(opts, &layout, facts, cache, &saves, &loads);
    report.write(print)?;
    Ok(Some(report))
}

/// The run's opening lines: processes, sizes, and where an object store
/// puts the checkpoints.
fn print_start(
    layout: &Layout,
    scale: f64,
    checkpoint_bytes: u64,
    s3: Option<&s3io::S3Folder>,
    durability: &str,
) {
    let mode = if layout.subset { " (subset)" } else { "" };
    println!(
        "[OUTPUT] {} Running DLIO [Checkpointing] with {} process(es)",
        timestamp(),
        layout.ranks
    );
    println!(
        "[OUTPUT] {} Total checkpoint size: {:.6} GB{mode}; written at 1/{scale} scale: {:.6} GB",
        timestamp(),
        layout.checkpoint_bytes() as f64 / GIB,
        checkpoint_bytes as f64 / GIB
    );
    if let Some(s3) = s3 {
        println!(
            "[OUTPUT] {} Checkpoints go to {}: {durability}",
            timestamp(),
            crate::storage::Storage::describe(s3.storage.as_ref())
        );
    }
}

/// One data source per local rank, each with its own seed.
fn rank_sources(opts: &CheckpointOptions, local: &[usize]) -> Result<Vec<BlockSource>, BenchError> {
    local
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
        .collect()
}

/// Empties the page cache of the local ranks' files of the checkpoints
/// to be read back, and says how.
fn empty_cache_for_read(
    opts: &CheckpointOptions,
    plans: &[Vec<PlannedFile>],
    local: &[usize],
    print: bool,
) -> Result<CacheDrop, BenchError> {
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
    let cache_drop = io::drop_caches(&files)?;
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
    Ok(cache_drop)
}

/// Every process's rank results, per checkpoint, on the reporter (None
/// elsewhere).
#[allow(clippy::type_complexity)]
fn gather(
    ranks: &dyn CheckpointRanks,
    results: &ProcessResults,
    opts: &CheckpointOptions,
) -> Result<Option<(Vec<Vec<RankIo>>, Vec<Vec<RankIo>>)>, BenchError> {
    let mine = serde_json::to_vec(results)
        .map_err(|e| BenchError::Encoding(format!("rank results: {e}")))?;
    let Some(all) = ranks.gather(mine) else {
        return Ok(None);
    };
    let mut saves: Vec<Vec<RankIo>> = vec![Vec::new(); opts.num_checkpoints_write as usize];
    let mut loads: Vec<Vec<RankIo>> = vec![Vec::new(); opts.num_checkpoints_read as usize];
    for bytes in &all {
        let p: ProcessResults = serde_json::from_slice(bytes)
            .map_err(|e| BenchError::Encoding(format!("gather: {e}")))?;
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
    Ok(Some((saves, loads)))
}

/// `Finished saving (loading) checkpoint k in ...` over these ranks.
fn print_phase_end(what: &str, k: u32, ranks: &[RankIo], local: usize, all: usize) {
    let p = aggregate(ranks);
    println!(
        "[OUTPUT] {} Finished {what} checkpoint {k} in {:.4} s; Throughput: {:.4} GiB/s{}",
        timestamp(),
        p.duration_seconds,
        p.aggregate_GB_per_second,
        scope_note(local, all)
    );
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

#[cfg(test)]
mod tests;
