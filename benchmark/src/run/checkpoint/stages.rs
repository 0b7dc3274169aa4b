//! The stages `run_checkpoint` goes through: the save and load phases
//! over every checkpoint, the page-cache decision between them, and the
//! report built from every rank's gathered timings.
use std::path::PathBuf;

use chrono::{DateTime, Local};

use super::io::{BlockSource, CacheDrop, WriteMode};
use super::layout::Layout;
use super::phases::{self, Target};
use super::plan::mem_total;
use super::results::number;
use super::summary::{PhaseStats, RankIo, aggregate, phase_means};
use super::{
    CheckpointDetails, CheckpointOptions, CheckpointRanks, CheckpointReport, CheckpointSummary,
    GIB, GeneratorFigures, MeasuredBytes, Metrics, PlannedFile, empty_cache_for_read,
    print_phase_end, s3io, timestamp,
};
use crate::error::BenchError;

/// How the shards are made durable: an object store's upload, or
/// (not) fsyncing the files and their directory.
pub(super) fn durability_of(s3: bool, fsync: bool) -> &'static str {
    match (s3, fsync) {
        (true, _) => s3io::S3_DURABILITY,
        (false, true) => "each shard file fsynced, then its directory",
        (false, false) => "--no-fsync: shards left as dirty pages for the kernel's writeback",
    }
}

/// What the timed phases of a run share: where the checkpoints go, the
/// ranks this process runs and their files, and whether it prints.
pub(super) struct PhaseRun<'a> {
    pub(super) ranks: &'a dyn CheckpointRanks,
    pub(super) target: Target<'a>,
    /// Per rank, its shard files.
    pub(super) plans: &'a [Vec<PlannedFile>],
    /// The ranks this process runs.
    pub(super) local: &'a [usize],
    /// Every rank of the layout.
    pub(super) all_ranks: usize,
    pub(super) print: bool,
}

/// Writes checkpoints 1..=`count`, each between barriers; every
/// checkpoint's rank timings.
pub(super) fn save_checkpoints(
    run: &PhaseRun<'_>,
    count: u32,
    sources: &mut [BlockSource],
    mode: WriteMode,
) -> Result<Vec<Vec<RankIo>>, BenchError> {
    let mut saves = Vec::new();
    for k in 1..=count {
        run.target.create(k)?;
        run.ranks.barrier();
        if run.print {
            println!("[OUTPUT] {} Starting saving checkpoint {k}", timestamp());
        }
        let saved = phases::save(run.target, k, run.plans, run.local, sources, mode)?;
        run.target.sync_folder(mode)?;
        run.ranks.barrier();
        if run.print {
            print_phase_end("saving", k, &saved, run.local.len(), run.all_ranks);
        }
        saves.push(saved);
    }
    Ok(saves)
}

/// Reads checkpoints 1..=`num_checkpoints_read` back, each between
/// barriers, through one buffer per local rank; every checkpoint's rank
/// timings.
pub(super) fn load_checkpoints(
    run: &PhaseRun<'_>,
    opts: &CheckpointOptions,
) -> Result<Vec<Vec<RankIo>>, BenchError> {
    let mut buffers = (0..run.local.len())
        .map(|_| {
            crate::storage::AlignedBuf::new(opts.block_size).ok_or_else(|| {
                BenchError::System(format!("cannot map a {}-byte read buffer", opts.block_size))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut loads = Vec::new();
    for k in 1..=opts.num_checkpoints_read {
        run.ranks.barrier();
        if run.print {
            println!("[OUTPUT] {} Starting loading checkpoint {k}", timestamp());
        }
        let loaded = phases::load(
            run.target,
            k,
            run.plans,
            run.local,
            &mut buffers,
            opts.odirect,
        )?;
        run.ranks.barrier();
        if run.print {
            print_phase_end("loading", k, &loaded, run.local.len(), run.all_ranks);
        }
        loads.push(loaded);
    }
    Ok(loads)
}

/// How the page cache was handled before the read-back, and the figures
/// the 3× rule compared.
pub(super) struct CacheDecision {
    pub(super) cache_drop: CacheDrop,
    /// The local ranks' bytes over every checkpoint written.
    pub(super) local_bytes: u64,
    /// The client memory the rule compared against.
    pub(super) memory: u64,
}

/// MLPerf: caches are cleared between write and read when the checkpoint
/// data per client is under 3× its memory. Empties them if so (an object
/// store's reads are remote, so nothing to empty).
pub(super) fn empty_cache_if_needed(
    opts: &CheckpointOptions,
    plans: &[Vec<PlannedFile>],
    local: &[usize],
    s3: bool,
    print: bool,
) -> Result<CacheDecision, BenchError> {
    let local_bytes: u64 = local
        .iter()
        .flat_map(|&r| plans[r].iter())
        .map(|f| f.bytes)
        .sum::<u64>()
        .saturating_mul(u64::from(opts.num_checkpoints_write));
    let memory = opts.client_memory_bytes.unwrap_or_else(mem_total);
    let cache_drop = if s3 {
        CacheDrop::RemoteObjects
    } else if opts.num_checkpoints_read > 0 && local_bytes < memory.saturating_mul(3) {
        empty_cache_for_read(opts, plans, local, print)?
    } else {
        CacheDrop::NotNeeded
    };
    Ok(CacheDecision {
        cache_drop,
        local_bytes,
        memory,
    })
}

/// What the summary reports of a run beside its measured phases.
pub(super) struct RunFacts {
    pub(super) started: DateTime<Local>,
    /// `started` as the summary's `start`.
    pub(super) start: String,
    pub(super) durability: String,
    /// Whether files and directories were fsynced.
    pub(super) fsync: bool,
    /// One checkpoint's bytes, scaled.
    pub(super) checkpoint_bytes: u64,
    /// One generator thread's speed, GiB/s.
    pub(super) generator_one: f64,
    pub(super) generator_threads: usize,
}

/// The run's report from every rank's save and load timings (per
/// checkpoint): summary, per-checkpoint details and results folder.
pub(super) fn build_report(
    opts: &CheckpointOptions,
    layout: &Layout,
    facts: RunFacts,
    cache: CacheDecision,
    saves: &[Vec<RankIo>],
    loads: &[Vec<RankIo>],
) -> CheckpointReport {
    let save_phases: Vec<PhaseStats> = saves.iter().map(|r| aggregate(r)).collect();
    let load_phases: Vec<PhaseStats> = loads.iter().map(|r| aggregate(r)).collect();
    let save_means = phase_means(&save_phases);
    let load_means = phase_means(&load_phases);
    let bytes = MeasuredBytes::of(&save_phases, &load_phases);
    let generator = GeneratorFigures::new(
        facts.generator_one,
        facts.generator_threads,
        save_means.aggregate_io_mean_GB_per_second,
    );
    let summary = CheckpointSummary {
        benchmark: "checkpointing",
        model: opts.model,
        mode: if layout.subset { "subset" } else { "full" },
        start: facts.start,
        end: timestamp(),
        hostname: crate::output::host_label(),
        num_processes: layout.ranks,
        tensor_parallelism: layout.spec.tensor,
        pipeline_parallelism: layout.spec.pipeline,
        data_parallelism: layout.data,
        zero_stage: layout.spec.zero_stage,
        num_parameters: layout.spec.num_parameters(),
        checkpoint_folder: opts.folder.to_string_lossy().into_owned(),
        durability: facts.durability,
        scale: opts.scale,
        block_size: opts.block_size,
        odirect: opts.odirect,
        fsync: facts.fsync,
        num_checkpoints_write: opts.num_checkpoints_write,
        num_checkpoints_read: opts.num_checkpoints_read,
        checkpoint_size_gb: facts.checkpoint_bytes as f64 / GIB,
        unscaled_checkpoint_size_gb: layout.checkpoint_bytes() as f64 / GIB,
        data_per_client_gb: cache.local_bytes as f64 / GIB,
        client_memory_gb: cache.memory as f64 / GIB,
        cache_drop: cache.cache_drop,
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
            .join(facts.started.format("%Y%m%d_%H%M%S").to_string())
    });
    CheckpointReport {
        summary,
        details,
        results_dir,
    }
}
