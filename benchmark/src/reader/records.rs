//! Readers of the formats whose samples are whole files or framed records:
//! retinanet's one-JPEG-per-sample files and resnet50/cosmoflow's TFRecord
//! files.
//!
//! ```text
//!  JPEG, raw:       per sample: open ─► fstat ─► one read of the whole file ─► marker walk ─► close
//!                   (the per-file cost a map-style loader pays; nothing cached)
//!  TFRecord, raw:   per file, once an epoch: one read of the whole file ─► record index from its
//!                   12-byte headers (length CRCs checked) ─► samples sliced from it (cached, shared)
//!  TFRecord, decode: raw + each delivered record's data CRC checked, as TensorFlow's reader does
//! ```
use std::sync::Arc;

use bytes::Bytes;

use super::{LoadCache, ReadStats, ReaderOptions, SampleReader};
use crate::{
    error::BenchError,
    format::{jpeg, tfrecord},
    storage::{RandomAccess, ReadKind, Storage},
};

/// Raw JPEG reader: every sample opens, reads and closes its own file, as
/// DLIO's map-style loader does with `open(f).read()`; the bytes are
/// checked to be a JPEG (markers walked, not decoded) and discarded.
pub struct RawJpeg {
    storage: Arc<dyn Storage>,
}

impl RawJpeg {
    pub fn new(storage: Arc<dyn Storage>, _options: &ReaderOptions) -> Self {
        Self { storage }
    }
}

impl SampleReader for RawJpeg {
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError> {
        let mut stats = ReadStats::default();
        for &row in rows {
            if row != 0 {
                return Err(BenchError::Corrupt {
                    path: file.into(),
                    format: "JPEG",
                    reason: format!("sample {row} requested, a JPEG file holds one"),
                });
            }
            let ra = self.storage.open(file)?;
            let len = ra.len();
            let bytes = ra.read_range(0, usize_len(len, file)?)?;
            jpeg::parse_jpeg(&bytes, file)?;
            std::hint::black_box(&bytes);
            stats.bytes_read += len;
            stats.requests += 1;
            stats.samples += 1;
            stats.sample_bytes += len;
        }
        Ok(stats)
    }
}

fn usize_len(len: u64, file: &str) -> Result<usize, BenchError> {
    usize::try_from(len).map_err(|_| BenchError::Corrupt {
        path: file.into(),
        format: "dataset",
        reason: format!("{len} bytes do not fit in memory"),
    })
}

/// A file's bytes and the places of its records.
#[derive(Clone)]
struct IndexedFile {
    bytes: Bytes,
    records: Arc<Vec<tfrecord::RecordSpan>>,
}

/// An in-memory file, so the record index is built by the same parser that
/// reads files (no second copy of the framing rules).
struct InMemory<'a> {
    bytes: &'a [u8],
    path: &'a str,
}

impl RandomAccess for InMemory<'_> {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn read_into(&self, buf: &mut [u8], offset: u64, _kind: ReadKind) -> Result<(), BenchError> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|at| Some(at..at.checked_add(buf.len())?))
            .and_then(|r| self.bytes.get(r))
            .ok_or_else(|| BenchError::Corrupt {
                path: self.path.into(),
                format: "TFRecord",
                reason: format!("read of {} bytes at {offset} past the end", buf.len()),
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// TFRecord reader: a file is read whole once an epoch (the rank's read
/// threads share it) and its records sliced out; `verify` checks each
/// delivered record's data CRC (the `decode` reader).
pub struct TfrecordReader {
    storage: Arc<dyn Storage>,
    cache: LoadCache<IndexedFile>,
    verify: bool,
}

impl TfrecordReader {
    pub fn new(storage: Arc<dyn Storage>, options: &ReaderOptions, verify: bool) -> Self {
        Self {
            storage,
            cache: LoadCache::new(options.cache_bytes),
            verify,
        }
    }
}

impl SampleReader for TfrecordReader {
    fn read_samples(&self, file: &str, rows: &[u64]) -> Result<ReadStats, BenchError> {
        let mut stats = ReadStats::default();
        let (f, loaded) = self.cache.get_or_load((file, 0), || {
            let ra = self.storage.open(file)?;
            let len = ra.len();
            let bytes = ra.read_range(0, usize_len(len, file)?)?;
            let records = tfrecord::read_index(
                &InMemory {
                    bytes: &bytes,
                    path: file,
                },
                file,
            )?;
            Ok((
                IndexedFile {
                    bytes,
                    records: Arc::new(records),
                },
                len,
            ))
        })?;
        if loaded {
            stats.bytes_read += f.bytes.len() as u64;
            stats.requests += 1;
        }
        for &row in rows {
            let span = usize::try_from(row)
                .ok()
                .and_then(|i| f.records.get(i))
                .ok_or_else(|| BenchError::Corrupt {
                    path: file.into(),
                    format: "TFRecord",
                    reason: format!(
                        "sample {row} requested, the file holds {} records",
                        f.records.len()
                    ),
                })?;
            // The record's data and its 4-byte CRC.
            let framed = usize::try_from(span.data_offset)
                .ok()
                .zip(usize::try_from(span.len).ok())
                .and_then(|(at, len)| Some(at..at.checked_add(len)?.checked_add(4)?))
                .and_then(|r| f.bytes.get(r))
                .ok_or_else(|| BenchError::Corrupt {
                    path: file.into(),
                    format: "TFRecord",
                    reason: format!("record {row} runs past the end of the file"),
                })?;
            if self.verify {
                tfrecord::verify_record(file, row as usize, framed)?;
            }
            std::hint::black_box(framed);
            stats.samples += 1;
            stats.sample_bytes += span.len;
        }
        Ok(stats)
    }

    fn start_epoch(&self, _epoch: u32) {
        // Each epoch reads from storage again, as DLIO does.
        self.cache.clear();
    }
}
