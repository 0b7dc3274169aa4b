//! `raw`: read the byte ranges the samples need, located from the footer
//! (Parquet: the row group's column chunks; NPZ: the `x` member's array),
//! without decoding. What the upstream DLIO fix (storage PR #378) does.
use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use bytes::Bytes;

use super::{LoadCache, ReadStats, ReaderOptions, SampleReader, group_rows};
use crate::{
    error::BenchError,
    format::{npz, parquet},
    storage::Storage,
};

/// Per-file footer cache: the footer is read and parsed once per file.
pub(crate) struct LayoutCache<L> {
    map: Mutex<HashMap<String, Arc<L>>>,
}

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
        if let Some(l) = self.map.lock().unwrap_or_else(|e| e.into_inner()).get(file) {
            return Ok(l.clone());
        }
        let (l, read) = crate::storage::metadata_reads(load)?;
        stats.bytes_read += read;
        stats.requests += 1;
        let l = Arc::new(l);
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(file.to_owned(), l.clone());
        Ok(l)
    }
}

/// Raw Parquet row-group reader.
pub struct RawParquet {
    storage: Arc<dyn Storage>,
    layouts: LayoutCache<parquet::ParquetLayout>,
    cache: LoadCache<Bytes>,
}

impl RawParquet {
    pub fn new(storage: Arc<dyn Storage>, options: &ReaderOptions) -> Self {
        Self {
            storage,
            layouts: LayoutCache::new(),
            cache: LoadCache::new(options.cache_bytes),
        }
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

/// Read row group `rg`'s column-chunk bytes (one request: the chunks of a
/// group are contiguous).
pub(crate) fn load_row_group(
    storage: &dyn Storage,
    file: &str,
    layout: &parquet::ParquetLayout,
    rg: usize,
) -> Result<(Bytes, u64), BenchError> {
    let g = &layout.row_groups[rg];
    let (start, end) = g.byte_range();
    let ra = storage.open(file)?;
    let b = ra.read_range(start, (end - start) as usize)?;
    Ok((b, end - start))
}

impl SampleReader for RawParquet {
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError> {
        let mut stats = ReadStats::default();
        let layout = parquet_layout(&*self.storage, &self.layouts, file, &mut stats)?;
        for (rg, rs) in group_rows(rows, |r| layout.row_group_of(r), file, layout.num_rows)? {
            let (bytes, loaded) = self.cache.get_or_load((file, rg), || {
                load_row_group(&*self.storage, file, &layout, rg)
            })?;
            if loaded {
                stats.bytes_read += bytes.len() as u64;
                stats.requests += 1;
            }
            // Each sample's share of the group's bytes is handed out.
            let g = &layout.row_groups[rg];
            let per_row = bytes.len() as u64 / g.num_rows.max(1);
            for r in &rs {
                let at = ((r - g.first_row) * per_row) as usize;
                let sample = bytes.slice(at..at + per_row as usize);
                std::hint::black_box(&sample);
            }
            stats.samples += rs.len() as u64;
            stats.sample_bytes += per_row * rs.len() as u64;
        }
        Ok(stats)
    }

    fn start_epoch(&self, _epoch: u32) {
        // Each epoch reads from storage again, as DLIO does.
        self.cache.clear();
    }
}

/// Raw NPZ reader: the `x` array's bytes.
pub struct RawNpz {
    storage: Arc<dyn Storage>,
    layouts: LayoutCache<npz::NpzLayout>,
    cache: LoadCache<Bytes>,
}

impl RawNpz {
    pub fn new(storage: Arc<dyn Storage>, options: &ReaderOptions) -> Self {
        Self {
            storage,
            layouts: LayoutCache::new(),
            cache: LoadCache::new(options.cache_bytes),
        }
    }
}

/// Samples in an NPZ file: the last dimension of `x` (DLIO's layout).
pub(crate) fn npz_samples(l: &npz::NpzLayout) -> u64 {
    l.x.shape.last().copied().unwrap_or(1).max(1) as u64
}

impl SampleReader for RawNpz {
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError> {
        let mut stats = ReadStats::default();
        let layout = self.layouts.get(file, &mut stats, || {
            let ra = self.storage.open(file)?;
            npz::read_layout(&*ra, file)
        })?;
        let n = npz_samples(&layout);
        group_rows(rows, |r| (r < n).then_some(0), file, n)?;
        let (bytes, loaded) = self.cache.get_or_load((file, 0), || {
            let ra = self.storage.open(file)?;
            let b = ra.read_range(layout.x.data_offset, layout.x.data_len as usize)?;
            Ok((b, layout.x.data_len))
        })?;
        if loaded {
            stats.bytes_read += bytes.len() as u64;
            stats.requests += 1;
        }
        std::hint::black_box(&bytes);
        stats.samples += rows.len() as u64;
        stats.sample_bytes += layout.x.data_len / n * rows.len() as u64;
        Ok(stats)
    }

    fn start_epoch(&self, _epoch: u32) {
        self.cache.clear();
    }
}
