//! Sample readers: how a training data loader turns sample indices into bytes.
//! `raw` reads the needed byte ranges without decoding, `decode` is a real
//! loader that materializes arrays, `dlio-legacy` reproduces DLIO's per-sample
//! reopen + full decode (mlcommons/storage#330).
//!
//! ```text
//!  engine ─► SampleReader::read_samples(file, rows)
//!     raw:         footer (cached per file) ─► row-group byte range ─► LoadCache (shared, deduped)
//!     decode:      same bytes ─► fast FixedSizeList<f32> decoder (or arrow-rs generic) ─► RecordBatch cache
//!     dlio-legacy: per sample: format index map, reopen, reread footer, generic decode of the whole group
//! ```
//!
//! OWNER: formats/readers engineer. Interface agreed with the engine.
use std::sync::Arc;

use crate::{error::BenchError, format::FormatKind, storage::Storage};

mod cache;
mod chunk;
mod decode;
mod legacy;
mod raw;

pub use cache::LoadCache;
pub use chunk::StorageChunkReader;
pub use decode::{DecodeNpz, DecodeParquet, NpzArray, decode_row_group};
pub use legacy::{LegacyNpz, LegacyParquet, format_global_index_map};
pub use raw::{RawNpz, RawParquet, row_groups_range};

/// Which reader strategy to use (`--reader`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ReaderKind {
    /// Read each needed row group / array member byte range, no decoding.
    Raw,
    /// Decode into Arrow arrays / materialized NPZ arrays.
    Decode,
    /// DLIO's pathological on-demand reader: reopen, reread footer, decode whole row group, per sample.
    DlioLegacy,
}

/// What one `read_samples` call did, for measured I/O figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Bytes read from storage (what a block/syscall tracer would see).
    pub bytes_read: u64,
    /// Number of read requests issued to storage.
    pub requests: u64,
    /// Samples delivered.
    pub samples: u64,
    /// Bytes of sample data delivered to the consumer (decoded or raw).
    pub sample_bytes: u64,
}

impl std::ops::AddAssign for ReadStats {
    fn add_assign(&mut self, o: Self) {
        self.bytes_read += o.bytes_read;
        self.requests += o.requests;
        self.samples += o.samples;
        self.sample_bytes += o.sample_bytes;
    }
}

/// Reads samples of dataset files. One instance is shared by all read threads
/// of one simulated accelerator (rank), so it may hold a shared cache.
pub trait SampleReader: Send + Sync {
    /// Read samples `rows` (indices within the file, ascending) of `file`
    /// (path as given to `Storage::open`).
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError>;
    /// Called at the start of each epoch (readers may drop epoch caches).
    fn start_epoch(&self, _epoch: u32) {}
}

/// Reader construction options (documented defaults in [`Default`]).
#[derive(Clone, Debug)]
pub struct ReaderOptions {
    /// The storage reads with O_DIRECT (open it with
    /// `LocalStorage::with_odirect`); readers then avoid extra small reads.
    /// Default false.
    pub odirect: bool,
    /// Bytes of row groups / arrays the rank's read threads may keep cached.
    /// Default 2 GiB (three 595 MiB single-row-group flux files).
    pub cache_bytes: u64,
    /// Samples in the rank's shard; dlio-legacy formats an index map of this
    /// many entries per sample, as DLIO's `logger.debug(f"{global_index_map}")`.
    /// Default 0 (no map).
    pub total_rank_samples: u64,
    /// `decode` checks NPZ member CRC32s (numpy's zipfile does). Default true.
    pub verify_crc: bool,
    /// `raw` Parquet: row groups per storage read (`reader.coalesce_rgs`). Default 1.
    pub coalesce_rgs: usize,
    /// `raw` Parquet: storage reads in flight per `read_samples` call, the
    /// needed units first, then read-ahead of the file's next units
    /// (`reader.prefetch_workers`). Default 1 (no read-ahead).
    pub prefetch_workers: usize,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        Self {
            odirect: false,
            cache_bytes: 2 << 30,
            total_rank_samples: 0,
            verify_crc: true,
            coalesce_rgs: 1,
            prefetch_workers: 1,
        }
    }
}

/// Build the reader for `format` × `kind` over `storage`. One reader serves
/// all read threads of one rank (it holds that rank's cache).
pub fn make_reader(
    format: FormatKind,
    kind: ReaderKind,
    storage: Arc<dyn Storage>,
    options: ReaderOptions,
) -> Result<Arc<dyn SampleReader>, BenchError> {
    Ok(match (format, kind) {
        (FormatKind::Parquet, ReaderKind::Raw) => Arc::new(RawParquet::new(storage, &options)),
        (FormatKind::Parquet, ReaderKind::Decode) => {
            Arc::new(DecodeParquet::new(storage, &options))
        }
        (FormatKind::Parquet, ReaderKind::DlioLegacy) => {
            Arc::new(LegacyParquet::new(storage, &options))
        }
        (FormatKind::Npz, ReaderKind::Raw) => Arc::new(RawNpz::new(storage, &options)),
        (FormatKind::Npz, ReaderKind::Decode) => Arc::new(DecodeNpz::new(storage, &options)),
        (FormatKind::Npz, ReaderKind::DlioLegacy) => Arc::new(LegacyNpz::new(storage, &options)),
    })
}

/// `rows` grouped by unit (row group), preserving order: `(unit, rows)`.
pub(crate) fn group_rows(
    rows: &[u64],
    unit_of: impl Fn(u64) -> Option<usize>,
    file: &str,
    num_rows: u64,
) -> Result<Vec<(usize, Vec<u64>)>, BenchError> {
    let mut out: Vec<(usize, Vec<u64>)> = Vec::new();
    for &r in rows {
        let u = unit_of(r).ok_or_else(|| BenchError::Corrupt {
            path: file.into(),
            format: "dataset",
            reason: format!("sample {r} requested, file holds {num_rows}"),
        })?;
        match out.last_mut() {
            Some((lu, v)) if *lu == u => v.push(r),
            _ => out.push((u, vec![r])),
        }
    }
    Ok(out)
}
