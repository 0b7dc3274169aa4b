//! What a finished run's ranks did, in DLIO's metrics: per-epoch blocks,
//! the epochs the aggregation counts, where a signal stopped it, and the
//! checkpoints it saved.
use super::*;

/// DLIO's metrics of a run: per rank its blocks (one per epoch), the
/// epochs the metrics count, and the run's.
pub(super) fn dlio_metrics(
    p: &Prepared,
    result: &TrainResult,
    exclude: ExcludeSteps,
) -> (Vec<Vec<BlockMetrics>>, usize, RunMetrics) {
    let per_rank_blocks: Vec<Vec<BlockMetrics>> = result
        .ranks
        .iter()
        .map(|r| {
            r.epochs
                .iter()
                .map(|e| block_metrics(&e.block, p.plan.batch_size, exclude))
                .collect()
        })
        .collect();
    let counted = epochs_in_metrics(result, p.plan.steps_per_epoch);
    let per_rank_epochs: Vec<_> = per_rank_blocks
        .iter()
        .map(|bs| {
            bs.iter()
                .take(counted)
                .map(|b| epoch_metrics(std::slice::from_ref(b)))
                .collect()
        })
        .collect();
    let metrics = run_metrics(&per_rank_epochs, p.cfg.record_size_dlio(), p.cfg.au);
    (per_rank_blocks, counted, metrics)
}

/// Where signal `sig` stopped the run (rank 0's last epoch).
pub(super) fn interruption_at(
    p: &Prepared,
    result: &TrainResult,
    sig: i32,
    counted: usize,
) -> Interruption {
    let last = result.ranks.first().and_then(|r| r.epochs.last());
    Interruption {
        signal: interrupt::signal_name(sig),
        epoch: last.map_or(1, |e| e.epoch),
        steps_completed_in_epoch: last.map_or(0, |e| e.block.compute.len()),
        steps_per_epoch: p.plan.steps_per_epoch,
        epochs_in_metrics: counted,
    }
}

/// The checkpoints' metrics when the run saved any; DLIO's summary reads
/// rank 0's per-epoch stats.
pub(super) fn checkpoint_metrics_of(
    p: &Prepared,
    result: &TrainResult,
    checkpoint_bytes: u64,
) -> Option<TrainingCheckpointMetrics> {
    p.plan.checkpoints.as_ref().map(|_| {
        let saves: Vec<CheckpointSave> = result
            .ranks
            .iter()
            .filter(|r| r.rank == 0)
            .flat_map(|r| r.epochs.iter().flat_map(|e| e.checkpoints.iter().cloned()))
            .collect();
        training_checkpoint_metrics(&saves, checkpoint_bytes)
    })
}

/// How many epochs (from the first) DLIO's aggregation covers. A complete
/// run: all. An interrupted one: the completed epochs, plus the interrupted
/// epoch when it completed at least 3 steps (DLIO's throughput needs
/// `len − 2 > 0`) or when nothing else would be left.
pub fn epochs_in_metrics(result: &TrainResult, steps_per_epoch: u64) -> usize {
    let epochs = result
        .ranks
        .iter()
        .map(|r| r.epochs.len())
        .min()
        .unwrap_or(0);
    if !result.interrupted || epochs == 0 {
        return epochs;
    }
    let last_steps = result
        .ranks
        .iter()
        .filter_map(|r| r.epochs.get(epochs - 1))
        .map(|e| e.block.compute.len())
        .min()
        .unwrap_or(0);
    let partial = (last_steps as u64) < steps_per_epoch;
    if partial && last_steps < 3 && epochs > 1 {
        epochs - 1
    } else {
        epochs
    }
}
