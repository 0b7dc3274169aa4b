//! `dlio-legacy`: DLIO's on-demand Parquet/NPZ reading as of storage #330.
//! For every sample: format the rank's whole global index map into a string
//! (DLIO's `logger.debug(f"{self.global_index_map}")`, evaluated even with
//! debug logging off), reopen the file, reread and reparse the footer, read
//! the sample's row group one column chunk per read (as pyarrow does) and
//! decode all of it with arrow-rs's generic reader, discard it.
//! The steps are separate `#[inline(never)]` functions so flamegraphs name them.
use std::{fmt::Write, sync::Arc};

use parquet::{
    arrow::arrow_reader::{
        ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
    },
    file::reader::{ChunkReader, Length},
};

use super::{
    LoadedRanges, ReadStats, ReaderOptions, SampleReader, StorageChunkReader, sample_value_bytes,
};
use crate::{
    error::BenchError,
    format::npz,
    storage::{ReadKind, Storage},
};

/// numpy's `zipfile` read size for a member (256 KiB − 4 KiB).
const NUMPY_READ: usize = 258_048;

fn corrupt(file: &str, format: &'static str, reason: impl Into<String>) -> BenchError {
    BenchError::Corrupt {
        path: file.into(),
        format,
        reason: reason.into(),
    }
}

/// Python's repr of DLIO's `{np.int64(i): ('path', np.int64(j)), ...}` for
/// `entries` samples of `file` (`rows_per_file` per file). Returns its length.
#[inline(never)]
pub fn format_global_index_map(entries: u64, file: &str, rows_per_file: u64) -> usize {
    if entries == 0 {
        return 0;
    }
    let mut s = String::with_capacity(entries as usize * (file.len() + 40));
    s.push('{');
    let rpf = rows_per_file.max(1);
    for i in 0..entries {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "np.int64({i}): ('{file}', np.int64({}))", i % rpf);
    }
    s.push('}');
    std::hint::black_box(&s);
    s.len()
}

/// Reopen `file` and reread + reparse its footer (pyarrow's `ParquetFile(file)`).
#[inline(never)]
fn reopen_and_read_footer(
    storage: &dyn Storage,
    file: &str,
) -> Result<(ArrowReaderMetadata, StorageChunkReader), BenchError> {
    let ra = storage.open(file)?;
    let reader = StorageChunkReader::new(ra);
    let m = ArrowReaderMetadata::load(&reader, ArrowReaderOptions::new())
        .map_err(|e| corrupt(file, "Parquet", e.to_string()))?;
    Ok((m, reader))
}

/// Read every column chunk of row group `rg` with one read each, as
/// pyarrow's `read_row_group` does (`reader` counts them).
#[inline(never)]
fn read_row_group_chunks(
    reader: &StorageChunkReader,
    meta: &ArrowReaderMetadata,
    file: &str,
    rg: usize,
) -> Result<LoadedRanges, BenchError> {
    let mut ranges: Vec<(u64, bytes::Bytes)> = Vec::new();
    for c in meta.metadata().row_group(rg).columns() {
        let (start, len) = c.byte_range();
        let n = usize::try_from(len)
            .map_err(|_| corrupt(file, "Parquet", format!("column chunk of {len} bytes")))?;
        let b = reader
            .get_bytes(start, n)
            .map_err(|e| corrupt(file, "Parquet", e.to_string()))?;
        ranges.push((start, b));
    }
    ranges.sort_unstable_by_key(|(o, _)| *o);
    Ok(LoadedRanges::new(reader.len(), ranges.into()))
}

/// Decode all of row group `rg` with the generic arrow reader and discard it
/// (pyarrow's `read_row_group(rg)` whose table DLIO drops).
#[inline(never)]
fn decode_whole_row_group(
    meta: ArrowReaderMetadata,
    data: LoadedRanges,
    file: &str,
    rg: usize,
    rows: usize,
) -> Result<u64, BenchError> {
    let r = ParquetRecordBatchReaderBuilder::new_with_metadata(data, meta)
        .with_row_groups(vec![rg])
        .with_batch_size(rows.max(1))
        .build()
        .map_err(|e| corrupt(file, "Parquet", e.to_string()))?;
    let mut decoded = 0u64;
    for b in r {
        let b = b.map_err(|e| corrupt(file, "Parquet", e.to_string()))?;
        for c in b.columns() {
            decoded += sample_value_bytes(c.as_ref());
        }
        drop(b);
    }
    Ok(decoded)
}

/// DLIO-legacy Parquet reader.
pub struct LegacyParquet {
    storage: Arc<dyn Storage>,
    total_rank_samples: u64,
}

impl LegacyParquet {
    pub fn new(storage: Arc<dyn Storage>, options: &ReaderOptions) -> Self {
        Self {
            storage,
            total_rank_samples: options.total_rank_samples,
        }
    }
}

impl SampleReader for LegacyParquet {
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError> {
        let mut stats = ReadStats::default();
        for &row in rows {
            let (meta, reader) = reopen_and_read_footer(&*self.storage, file)?;
            let md = meta.metadata().clone();
            let rpf = md.file_metadata().num_rows().max(0) as u64;
            format_global_index_map(self.total_rank_samples, file, rpf);
            // Bisect cumulative row counts for the sample's row group.
            let mut first = 0u64;
            let mut found = None;
            for (i, g) in md.row_groups().iter().enumerate() {
                let n = g.num_rows().max(0) as u64;
                if row < first + n {
                    found = Some((i, n));
                    break;
                }
                first += n;
            }
            let (rg, n) = found.ok_or_else(|| {
                corrupt(
                    file,
                    "Parquet",
                    format!("sample {row} requested, file holds {first}"),
                )
            })?;
            let data = read_row_group_chunks(&reader, &meta, file, rg)?;
            let decoded = decode_whole_row_group(meta, data, file, rg, n as usize)?;
            let (b, reqs) = reader.counters();
            stats.bytes_read += b;
            stats.requests += reqs;
            stats.samples += 1;
            stats.sample_bytes += decoded / n.max(1);
        }
        Ok(stats)
    }
}

/// DLIO-legacy NPZ reader: `np.load(f)['x']` per sample, then `x[..., i]`.
pub struct LegacyNpz {
    storage: Arc<dyn Storage>,
    total_rank_samples: u64,
}

impl LegacyNpz {
    pub fn new(storage: Arc<dyn Storage>, options: &ReaderOptions) -> Self {
        Self {
            storage,
            total_rank_samples: options.total_rank_samples,
        }
    }
}

/// numpy's path: read the member in 256 KiB pieces, CRC as it goes, copy
/// into the array.
#[inline(never)]
fn numpy_load_x(storage: &dyn Storage, file: &str) -> Result<(Vec<u8>, u64, u64, u64), BenchError> {
    let ra = storage.open(file)?;
    // numpy's zipfile reads are not told apart: all count as data reads.
    let (layout, mut read) = npz::read_layout_as(&*ra, file, ReadKind::Data)?;
    let mut reqs = 3;
    let m = &layout.x_member;
    let mut hasher = crc32fast::Hasher::new();
    let mut arr = Vec::with_capacity(layout.x.data_len as usize);
    let mut buf = vec![0u8; NUMPY_READ];
    let mut off = m.data_offset;
    let end = m.data_offset + m.size;
    let hdr_end = layout.x.data_offset;
    while off < end {
        let n = ((end - off) as usize).min(NUMPY_READ);
        ra.read_exact_at(&mut buf[..n], off)?;
        hasher.update(&buf[..n]);
        let skip = hdr_end.saturating_sub(off).min(n as u64) as usize;
        arr.extend_from_slice(&buf[skip..n]);
        off += n as u64;
        read += n as u64;
        reqs += 1;
    }
    if hasher.finalize() != m.crc {
        return Err(corrupt(file, "NPZ", "x.npy: CRC-32 mismatch"));
    }
    let samples = layout.x.shape.last().copied().unwrap_or(1) as u64;
    Ok((arr, read, reqs, samples))
}

impl SampleReader for LegacyNpz {
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError> {
        let mut stats = ReadStats::default();
        for &row in rows {
            format_global_index_map(self.total_rank_samples, file, 1);
            let (arr, read, reqs, shape_samples) = numpy_load_x(&*self.storage, file)?;
            stats.bytes_read += read;
            stats.requests += reqs;
            if arr.is_empty() {
                return Err(corrupt(file, "NPZ", "x.npy is empty"));
            }
            let n = shape_samples.max(1);
            if row >= n {
                return Err(corrupt(
                    file,
                    "NPZ",
                    format!("sample {row} requested, file holds {n}"),
                ));
            }
            stats.samples += 1;
            stats.sample_bytes += arr.len() as u64 / n;
            drop(arr);
        }
        Ok(stats)
    }
}
