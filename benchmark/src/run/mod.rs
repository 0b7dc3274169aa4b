//! The application layer: the only code that wires configuration, storage,
//! readers, the engine and output together. `cli` maps its arguments onto
//! the options here; the profiler's `storprof bench|datagen|sweep` call it
//! through `cli`.
//!
//! ```text
//!  BenchOptions ─► bench_storage (ReaderKind::storage_options + S3 flags ─► storage::open)
//!              ─► run_bench_ranks: one reader per local rank (bench::make_local_reader)
//!              ─► bench::run_bench_on (memory guard, engine, metrics, output files)
//!  DatagenOptions ─► datagen::run_datagen (format writers over storage)
//!  SweepOptions ─► sweep::run_sweep: bench runs over the NP × RT grid
//!  CheckpointOptions ─► checkpoint::run_checkpoint: llama3 shards per rank, fsync, read-back
//!  mpirun: mpi::MpiWorld is the rank set and collective of bench and datagen
//!  interrupt: SIGINT/SIGTERM ─► the engine's stop flag
//! ```
pub mod bench;
pub mod checkpoint;
pub mod datagen;
pub mod interrupt;
pub mod memory;
pub mod mlpstorage;
pub mod mpi;
pub mod sweep;

use std::sync::Arc;

use anyhow::Context;

use crate::config::DlioConfig;
use crate::error::BenchError;
use crate::reader::ReaderKind;
use crate::storage::{self, S3Options, Storage, StorageOptions};
use bench::{BenchOptions, BenchReport, RankSet};

/// The storage a bench run with `reader` reads `data_dir` through: what
/// the reader asks for ([`ReaderKind::storage_options`]) with the S3
/// connection settings `s3`.
pub fn bench_storage(
    data_dir: &str,
    cfg: &DlioConfig,
    reader: ReaderKind,
    s3: &S3Options,
) -> Result<Arc<dyn Storage>, BenchError> {
    let options = StorageOptions {
        s3: s3.clone(),
        ..reader.storage_options(cfg)
    };
    storage::open(data_dir, &options)
}

/// Run the benchmark over `storage` with one `opts.reader` reader per local
/// rank of `ranks`; `None` on non-reporting ranks.
pub fn run_bench_over(
    opts: &BenchOptions,
    storage: &Arc<dyn Storage>,
    ranks: &dyn RankSet,
) -> Result<Option<BenchReport>, BenchError> {
    let cfg = opts.raw_config()?.to_config()?;
    let kind = opts.reader;
    let rank_samples =
        (cfg.num_files_train * cfg.num_samples_per_file).div_ceil(ranks.size().max(1) as u64);
    let factory = |cfg: &DlioConfig, _rank: usize| {
        bench::make_local_reader(cfg, kind, Arc::clone(storage), rank_samples)
    };
    bench::run_bench_on(opts, storage.as_ref(), &factory, ranks)
}

/// The benchmark over the storage `opts.data_dir` names (local path or
/// s3://BUCKET/PREFIX, the latter with `s3`) and any rank set (threads, or
/// MPI ranks); `None` on non-reporting ranks.
pub fn run_bench_ranks(
    opts: &BenchOptions,
    s3: &S3Options,
    ranks: &dyn RankSet,
) -> anyhow::Result<Option<BenchReport>> {
    let cfg = opts.raw_config()?.to_config()?;
    let storage = bench_storage(&opts.data_dir.to_string_lossy(), &cfg, opts.reader, s3)?;
    let report = run_bench_over(opts, &storage, ranks).context("bench")?;
    Ok(report)
}
