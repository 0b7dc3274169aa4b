//! Layouts shared by the readers: each file's footer / central directory is
//! read once (metadata reads, [`ReadKind::Metadata`]) and cached, and the
//! byte ranges of row groups come from it. `raw`, `decode` and
//! `dlio-legacy` use this module; none of them imports another reader.
//!
//! ```text
//!  reader ─► LayoutCache::get(file) ─► parquet::read_layout / npz::read_layout (once per file)
//!         ─► row_groups_range(layout, rgs) ─► load_row_groups: one data read
//!         ─► (column subset) selected_leaves ─► selected_ranges: one read per run of
//!            adjacent selected column chunks
//! ```
//!
//! [`ReadKind::Metadata`]: crate::storage::ReadKind::Metadata
use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex},
};

use bytes::Bytes;

use super::{ReadStats, group_rows};
use crate::{
    error::BenchError,
    format::{npz, parquet},
    storage::{RandomAccess, Storage},
};

/// Per-file footer cache: the footer is read and parsed once per file, also
/// when several read threads ask for it at once (the others wait for it).
pub(crate) struct LayoutCache<L> {
    map: Mutex<HashMap<String, LayoutSlot<L>>>,
}

/// One file's layout once loaded; locked while it loads.
type LayoutSlot<L> = Arc<Mutex<Option<Arc<L>>>>;

impl<L> LayoutCache<L> {
    pub(crate) fn new() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The cached layout, or `load()`'s (whose bytes read are added to `stats`).
    pub(crate) fn get(
        &self,
        file: &str,
        stats: &mut ReadStats,
        load: impl FnOnce() -> Result<(L, u64), BenchError>,
    ) -> Result<Arc<L>, BenchError> {
        let slot = self
            .map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(file.to_owned())
            .or_default()
            .clone();
        // Held while loading: other threads asking for this file wait here.
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = slot.as_ref() {
            return Ok(l.clone());
        }
        let (l, read) = load()?;
        stats.bytes_read += read;
        stats.requests += 1;
        let l = Arc::new(l);
        *slot = Some(l.clone());
        Ok(l)
    }
}

/// Footer of `file`, via `layouts`.
pub(crate) fn parquet_layout(
    storage: &dyn Storage,
    layouts: &LayoutCache<parquet::ParquetLayout>,
    file: &str,
    stats: &mut ReadStats,
) -> Result<Arc<parquet::ParquetLayout>, BenchError> {
    layouts.get(file, stats, || {
        let ra = storage.open(file)?;
        parquet::read_layout(&*ra, file)
    })
}

/// Byte range `[start, end)` of row groups `rgs` (consecutive groups are contiguous).
pub fn row_groups_range(
    layout: &parquet::ParquetLayout,
    rgs: std::ops::Range<usize>,
) -> (u64, u64) {
    let mut start = u64::MAX;
    let mut end = 0;
    for g in &layout.row_groups[rgs] {
        let (s, e) = g.byte_range();
        start = start.min(s);
        end = end.max(e);
    }
    (start.min(end), end)
}

/// Read row groups `rgs` of the opened file `ra` in one storage read.
pub(crate) fn load_row_groups(
    ra: &dyn RandomAccess,
    layout: &parquet::ParquetLayout,
    rgs: std::ops::Range<usize>,
) -> Result<(Bytes, u64), BenchError> {
    let (start, end) = row_groups_range(layout, rgs);
    let b = ra.read_range(start, (end - start) as usize)?;
    Ok((b, end - start))
}

/// Leaf columns of `layout` whose top-level column is one of `names`, in
/// schema order. Every name must be in the file (the error names the
/// column and the file).
pub fn selected_leaves(
    layout: &parquet::ParquetLayout,
    names: &HashSet<String>,
    file: &str,
) -> Result<Vec<usize>, BenchError> {
    let mut found: HashSet<&str> = HashSet::with_capacity(names.len());
    let mut leaves = Vec::with_capacity(names.len());
    for (i, leaf) in layout.leaves.iter().enumerate() {
        if names.contains(&leaf.top) {
            found.insert(leaf.top.as_str());
            leaves.push(i);
        }
    }
    if found.len() != names.len() {
        let mut missing: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|n| !found.contains(n))
            .collect();
        missing.sort_unstable();
        return Err(BenchError::Dataset(format!(
            "{file}: dataset.parquet.columns marks {} to be read (read: true) but the file has no such column",
            missing
                .iter()
                .map(|n| format!("'{n}'"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(leaves)
}

/// Bytes of the `leaves` column chunks of one row group.
pub fn selected_bytes(group: &parquet::RowGroupLayout, leaves: &[usize]) -> u64 {
    leaves
        .iter()
        .filter_map(|&i| group.chunks.get(i))
        .map(|c| c.len)
        .sum()
}

/// Byte ranges `[start, end)` of the `leaves` column chunks of row groups
/// `rgs`, ascending: chunks that touch are one range, and so are ranges
/// at most `max_gap` bytes apart (the gap is read too, to save a request).
pub fn selected_ranges(
    layout: &parquet::ParquetLayout,
    rgs: std::ops::Range<usize>,
    leaves: &[usize],
    max_gap: u64,
) -> Vec<(u64, u64)> {
    let mut chunks: Vec<(u64, u64)> = layout.row_groups[rgs]
        .iter()
        .flat_map(|g| leaves.iter().filter_map(|&i| g.chunks.get(i)))
        // read_layout checked offset + len against the file size.
        .map(|c| (c.offset, c.offset + c.len))
        .collect();
    chunks.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(chunks.len());
    for (s, e) in chunks {
        match out.last_mut() {
            Some(last) if s <= last.1.saturating_add(max_gap) => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// `[start, end)` ranges of `file` as `(offset, len)` spans for a read.
pub(crate) fn range_spans(
    file: &str,
    ranges: &[(u64, u64)],
) -> Result<Vec<(u64, usize)>, BenchError> {
    ranges
        .iter()
        .map(|&(s, e)| {
            let len = e
                .checked_sub(s)
                .and_then(|l| usize::try_from(l).ok())
                .ok_or_else(|| BenchError::Corrupt {
                    path: file.into(),
                    format: "Parquet",
                    reason: format!("column chunks from byte {s} to {e}"),
                })?;
            Ok((s, len))
        })
        .collect()
}

/// Read `ranges` of `file`, one storage read each. Returns `(file offset,
/// bytes)` per range and the bytes read.
pub(crate) fn load_ranges(
    storage: &dyn Storage,
    file: &str,
    ranges: &[(u64, u64)],
) -> Result<(Vec<(u64, Bytes)>, u64), BenchError> {
    let spans = range_spans(file, ranges)?;
    let total = spans.iter().map(|&(_, len)| len as u64).sum();
    let ra = storage.open(file)?;
    let out = spans
        .iter()
        .map(|&(s, _)| s)
        .zip(ra.read_ranges(&spans)?)
        .collect();
    Ok((out, total))
}

/// Samples in an NPZ file: the last dimension of `x` (DLIO's layout).
pub(crate) fn npz_samples(l: &npz::NpzLayout) -> u64 {
    l.x.shape.last().copied().unwrap_or(1).max(1) as u64
}

/// Layout of NPZ `file`, via `layouts`, and its sample count, after checking
/// that every one of `rows` is in the file.
pub(crate) fn npz_layout_for(
    storage: &dyn Storage,
    layouts: &LayoutCache<npz::NpzLayout>,
    file: &str,
    rows: &[u64],
    stats: &mut ReadStats,
) -> Result<(Arc<npz::NpzLayout>, u64), BenchError> {
    let layout = layouts.get(file, stats, || {
        let ra = storage.open(file)?;
        npz::read_layout(&*ra, file)
    })?;
    let n = npz_samples(&layout);
    group_rows(rows, |r| (r < n).then_some(0), file, n)?;
    Ok((layout, n))
}
