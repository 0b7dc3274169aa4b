//! What the readers will hold in memory, checked against the host's
//! before training (refused, or capped with --fit-memory), and the read
//! buffers reserved up front.
use super::*;

/// The reader memory model of a prepared run (see [`memory`]):
/// bytes per fetch from the first training file's footer.
pub fn reader_memory(
    p: &Prepared,
    storage: &dyn Storage,
    reader: ReaderKind,
    local_ranks: u64,
) -> Result<memory::ReaderMemory, BenchError> {
    let first = p
        .plan
        .files
        .first()
        .ok_or_else(|| BenchError::Dataset("no training files".into()))?;
    let ra = storage.open(first)?;
    let coalesce = usize::try_from(p.cfg.coalesce_rgs.max(1)).unwrap_or(1);
    let bytes_per_fetch = match p.cfg.format {
        FormatKind::Parquet => {
            let (l, _) = parquet::read_layout(&*ra, first)?;
            let n = l.row_groups.len();
            (0..n.div_ceil(coalesce))
                .map(|u| {
                    let (s, e) =
                        reader::row_groups_range(&l, u * coalesce..((u + 1) * coalesce).min(n));
                    e - s
                })
                .max()
                .unwrap_or(0)
        }
        FormatKind::Npz => npz::read_layout(&*ra, first)?.0.x.data_len,
        // One whole file per sample / per file's records.
        FormatKind::Jpeg | FormatKind::Tfrecord => ra.len(),
    };
    let comm = p.plan.comm_size.max(1) as u64;
    let shard = p.dataset_bytes.div_ceil(comm);
    Ok(memory::ReaderMemory {
        accelerators: local_ranks,
        read_threads: p.cfg.read_threads,
        prefetch_depth: p.cfg.prefetch_workers.max(1),
        bytes_per_fetch,
        copies_per_fetch: if reader == ReaderKind::Raw { 1 } else { 2 },
        cache_bytes_per_rank: ReaderOptions::default().cache_bytes.min(shard),
        per_rank_overhead: memory::PER_RANK_OVERHEAD,
        shared_bytes: DEFAULT_POOL_BYTES.min(p.dataset_bytes),
    })
}

/// Map and fault in the read buffers the guard's plan has in flight at
/// once, before the training loop: without it every first-epoch read lands
/// in fresh memory and pays a page fault and a kernel zero-fill per page
/// (on loopback S3 that took most of the first epoch's CPU time), while
/// later epochs reuse the pool's buffers. The time is logged, not counted.
pub(super) fn reserve_read_buffers(
    storage: &dyn Storage,
    m: &memory::ReaderMemory,
    reporter: bool,
) -> Result<(), BenchError> {
    let start = std::time::Instant::now();
    let mapped = storage.reserve_read_buffers(m.fetches_in_flight(), m.bytes_per_fetch)?;
    if reporter && mapped > 0 {
        log::info!(
            "read buffers: {mapped} × {:.1} MiB mapped and faulted in before the run in {:.3} s",
            m.bytes_per_fetch as f64 / f64::from(1u32 << 20),
            start.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// The memory guard before a run: refuse, or with `fit_memory` lower
/// `reader.prefetch_workers` in `p` so the estimate fits. Returns the plan
/// the run goes with.
pub(super) fn guard_memory(
    opts: &BenchOptions,
    storage: &dyn Storage,
    p: &mut Prepared,
    local_ranks: u64,
    reporter: bool,
) -> Result<memory::ReaderMemory, BenchError> {
    let mut m = reader_memory(p, storage, opts.reader, local_ranks)?;
    let available = match opts.memory_available {
        Some(b) => b,
        None => memory::mem_available()?,
    };
    match memory::check(&m, available, opts.fit_memory)? {
        memory::MemoryDecision::Fits { .. } => {}
        memory::MemoryDecision::Capped {
            depth,
            estimate,
            budget,
        } => {
            if reporter {
                log::warn!(
                    "memory guard (--fit-memory): reader.prefetch_workers lowered from {} to {depth} \
                     (estimate {:.2} GiB within the {:.2} GiB budget)",
                    m.prefetch_depth,
                    estimate as f64 / f64::from(1u32 << 30),
                    budget as f64 / f64::from(1u32 << 30)
                );
            }
            p.cfg.prefetch_workers = depth;
            p.raw
                .set("reader.prefetch_workers", serde_yaml::Value::from(depth))?;
            m.prefetch_depth = depth;
        }
    }
    Ok(m)
}
