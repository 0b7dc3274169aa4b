//! `decode`: a real loader. Parquet row groups become arrow `RecordBatch`es
//! (fast path for PLAIN uncompressed float fixed-size lists without nulls,
//! else arrow-rs's generic reader, which with a column subset decodes only
//! the `read: true` columns) and each sample is handed out as per-column
//! arrays; NPZ `x` is CRC-checked and materialized.
use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    sync::Mutex,
};

use ::parquet::arrow::{
    ProjectionMask,
    arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder},
};
use arrow_array::{Array, ArrayRef, FixedSizeListArray, Float32Array, RecordBatch};
use arrow_buffer::{Buffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;

use super::{
    LoadCache, LoadedRanges, ReadStats, ReaderOptions, SampleReader, StorageChunkReader,
    group_rows,
    layout::{
        LayoutCache, load_ranges, npz_layout_for, parquet_layout, selected_leaves, selected_ranges,
    },
    sample_value_bytes,
};
use crate::{
    error::BenchError,
    format::{
        npz,
        parquet::{self, FastPathError, ParquetLayout},
    },
    storage::Storage,
};

fn corrupt(file: &str, format: &'static str, reason: impl Into<String>) -> BenchError {
    BenchError::Corrupt {
        path: file.into(),
        format,
        reason: reason.into(),
    }
}

/// Decode row group `rg` of `file` from its bytes `data` (which start at the
/// group's first column chunk). `Ok(None)`: not fast-path eligible.
pub fn decode_row_group(
    file: &str,
    layout: &ParquetLayout,
    rg: usize,
    data: &Bytes,
) -> Result<Option<RecordBatch>, BenchError> {
    let g = &layout.row_groups[rg];
    let (base, _) = g.byte_range();
    let mut fields = Vec::with_capacity(g.chunks.len());
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(g.chunks.len());
    for (leaf, chunk) in layout.leaves.iter().zip(&g.chunks) {
        if g.num_rows == 0 || chunk.num_values % g.num_rows != 0 {
            return Ok(None);
        }
        let n = (chunk.num_values / g.num_rows) as usize;
        let Ok(n_i32) = i32::try_from(n) else {
            return Ok(None);
        };
        let at = (chunk.offset - base) as usize;
        let bytes = &data[at..at + chunk.len as usize];
        let mut out: Vec<u8> = Vec::new();
        match parquet::decode_fixed_list_chunk(bytes, leaf, chunk, g.num_rows, n, &mut out) {
            Ok(()) => {}
            Err(FastPathError::Unsupported(_)) => return Ok(None),
            Err(FastPathError::Corrupt(m)) => {
                return Err(corrupt(
                    file,
                    "Parquet",
                    format!("row group {rg} column {}: {m}", leaf.path),
                ));
            }
        }
        let values = Float32Array::new(ScalarBuffer::from(Buffer::from_vec(out)), None);
        let item = Arc::new(Field::new("element", DataType::Float32, true));
        let list = FixedSizeListArray::try_new(item.clone(), n_i32, Arc::new(values), None)
            .map_err(|e| corrupt(file, "Parquet", e.to_string()))?;
        fields.push(Field::new(
            &leaf.top,
            DataType::FixedSizeList(item, n_i32),
            true,
        ));
        cols.push(Arc::new(list));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
        .map(Some)
        .map_err(|e| corrupt(file, "Parquet", e.to_string()))
}

/// Decoding Parquet reader.
pub struct DecodeParquet {
    storage: Arc<dyn Storage>,
    layouts: LayoutCache<ParquetLayout>,
    arrow_meta: Mutex<HashMap<String, ArrowReaderMetadata>>,
    cache: LoadCache<Arc<RecordBatch>>,
    columns: Option<HashSet<String>>,
}

impl DecodeParquet {
    pub fn new(storage: Arc<dyn Storage>, options: &ReaderOptions) -> Self {
        Self {
            storage,
            layouts: LayoutCache::new(),
            arrow_meta: Mutex::new(HashMap::new()),
            cache: LoadCache::new(options.cache_bytes),
            columns: options
                .read_columns
                .as_ref()
                .map(|c| c.iter().cloned().collect()),
        }
    }

    /// arrow-rs's metadata of `file`, loaded (and its bytes counted) once.
    fn arrow_meta(
        &self,
        file: &str,
        stats: &mut ReadStats,
    ) -> Result<ArrowReaderMetadata, BenchError> {
        let cached = self
            .arrow_meta
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(file)
            .cloned();
        if let Some(m) = cached {
            return Ok(m);
        }
        let reader = StorageChunkReader::new(self.storage.open(file)?);
        let m = ArrowReaderMetadata::load(&reader, ArrowReaderOptions::new())
            .map_err(|e| corrupt(file, "Parquet", e.to_string()))?;
        let (b, n) = reader.counters();
        stats.bytes_read += b;
        stats.requests += n;
        self.arrow_meta
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(file.to_owned(), m.clone());
        Ok(m)
    }

    /// arrow-rs's generic reader for row group `rg` (fallback path) over its
    /// already loaded column chunks `data`, decoding only `leaves` when given.
    fn generic(
        &self,
        file: &str,
        rg: usize,
        leaves: Option<&[usize]>,
        data: LoadedRanges,
        stats: &mut ReadStats,
    ) -> Result<RecordBatch, BenchError> {
        let meta = self.arrow_meta(file, stats)?;
        let pq_err = |e: ::parquet::errors::ParquetError| corrupt(file, "Parquet", e.to_string());
        let rows = meta.metadata().row_group(rg).num_rows().max(1) as usize;
        let mask = leaves.map(|l| {
            ProjectionMask::leaves(
                meta.metadata().file_metadata().schema_descr(),
                l.iter().copied(),
            )
        });
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(data, meta)
            .with_row_groups(vec![rg])
            .with_batch_size(rows);
        if let Some(mask) = mask {
            builder = builder.with_projection(mask);
        }
        let r = builder.build().map_err(pq_err)?;
        let mut batches = Vec::new();
        for b in r {
            batches.push(b.map_err(|e| corrupt(file, "Parquet", e.to_string()))?);
        }
        let schema = batches
            .first()
            .map(|b| b.schema())
            .unwrap_or_else(|| Arc::new(Schema::empty()));
        arrow_select_concat(&schema, &batches).map_err(|e| corrupt(file, "Parquet", e))
    }
}

fn arrow_select_concat(
    schema: &Arc<Schema>,
    batches: &[RecordBatch],
) -> Result<RecordBatch, String> {
    match batches {
        [one] => Ok(one.clone()),
        [] => Ok(RecordBatch::new_empty(schema.clone())),
        _ => Err("row group decoded into several batches".into()),
    }
}

impl SampleReader for DecodeParquet {
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError> {
        let mut stats = ReadStats::default();
        let layout = parquet_layout(&*self.storage, &self.layouts, file, &mut stats)?;
        let leaves = match &self.columns {
            Some(names) => Some(selected_leaves(&layout, names, file)?),
            None => None,
        };
        let all: Vec<usize> = (0..layout.leaves.len()).collect();
        for (rg, rs) in group_rows(rows, |r| layout.row_group_of(r), file, layout.num_rows)? {
            let mut load_stats = ReadStats::default();
            let (batch, _) = self.cache.get_or_load((file, rg), || {
                let g = &layout.row_groups[rg];
                // The group's (selected) column chunks, one read per run of
                // adjacent ones: the whole group when every column is read.
                let ranges =
                    selected_ranges(&layout, rg..rg + 1, leaves.as_deref().unwrap_or(&all), 0);
                let (data, n) = load_ranges(&*self.storage, file, &ranges)?;
                load_stats.bytes_read += n;
                load_stats.requests += data.len() as u64;
                // Whole groups of float lists take the fast path.
                let fast = leaves.is_none()
                    && layout
                        .leaves
                        .iter()
                        .zip(&g.chunks)
                        .all(|(l, c)| parquet::is_fast_list(l, c));
                let batch = match (fast, data.as_slice()) {
                    (true, [(_, bytes)]) => decode_row_group(file, &layout, rg, bytes)?,
                    _ => None,
                };
                let batch = match batch {
                    Some(b) => b,
                    None => self.generic(
                        file,
                        rg,
                        leaves.as_deref(),
                        LoadedRanges::new(layout.file_len, data.into()),
                        &mut load_stats,
                    )?,
                };
                let size = batch.get_array_memory_size() as u64;
                Ok((Arc::new(batch), size))
            })?;
            stats += load_stats;
            let g = &layout.row_groups[rg];
            for &r in rs {
                let i = (r - g.first_row) as usize;
                if i >= batch.num_rows() {
                    return Err(corrupt(
                        file,
                        "Parquet",
                        format!("row {r} missing after decode"),
                    ));
                }
                // One sample = one row of every column, as arrays.
                let sample: Vec<ArrayRef> = batch.columns().iter().map(|c| c.slice(i, 1)).collect();
                for a in &sample {
                    stats.sample_bytes += sample_value_bytes(a.as_ref());
                }
                std::hint::black_box(&sample);
            }
            stats.samples += rs.len() as u64;
        }
        Ok(stats)
    }

    fn start_epoch(&self, _epoch: u32) {
        self.cache.clear();
    }
}

/// A materialized NPZ `x` array.
pub struct NpzArray {
    pub shape: Vec<usize>,
    pub data: Vec<u8>,
}

/// Decoding NPZ reader.
pub struct DecodeNpz {
    storage: Arc<dyn Storage>,
    layouts: LayoutCache<npz::NpzLayout>,
    cache: LoadCache<Arc<NpzArray>>,
    verify_crc: bool,
}

impl DecodeNpz {
    pub fn new(storage: Arc<dyn Storage>, options: &ReaderOptions) -> Self {
        Self {
            storage,
            layouts: LayoutCache::new(),
            cache: LoadCache::new(options.cache_bytes),
            verify_crc: options.verify_crc,
        }
    }
}

impl SampleReader for DecodeNpz {
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError> {
        let mut stats = ReadStats::default();
        let (layout, n) = npz_layout_for(&*self.storage, &self.layouts, file, rows, &mut stats)?;
        let mut load_read = 0;
        let (arr, _) = self.cache.get_or_load((file, 0), || {
            let m = &layout.x_member;
            let ra = self.storage.open(file)?;
            let member = ra.read_range(m.data_offset, m.size as usize)?;
            load_read = m.size;
            if self.verify_crc && crc32fast::hash(&member) != m.crc {
                return Err(corrupt(file, "NPZ", "x.npy: CRC-32 mismatch"));
            }
            let hdr = (layout.x.data_offset - m.data_offset) as usize;
            let data = member[hdr..].to_vec();
            let size = data.len() as u64;
            Ok((
                Arc::new(NpzArray {
                    shape: layout.x.shape.clone(),
                    data,
                }),
                size,
            ))
        })?;
        if load_read > 0 {
            stats.bytes_read += load_read;
            stats.requests += 1;
        }
        // Sample i is x[..., i]: a strided gather in C order.
        let s = n as usize;
        for &r in rows {
            let sample: Vec<u8> = if s == 1 {
                arr.data.clone()
            } else {
                arr.data
                    .iter()
                    .skip(r as usize)
                    .step_by(s)
                    .copied()
                    .collect()
            };
            stats.sample_bytes += sample.len() as u64;
            std::hint::black_box(&sample);
        }
        stats.samples += rows.len() as u64;
        Ok(stats)
    }

    fn start_epoch(&self, _epoch: u32) {
        self.cache.clear();
    }
}
