//! arrow-rs `ChunkReader` over our [`RandomAccess`], counting bytes and
//! requests so generic-reader paths report real I/O. Its reads are all
//! [`ReadKind::Data`], footers included (dlio-legacy rereads them for every
//! sample, as pyarrow does; decode's generic fallback loads arrow's metadata
//! through it once per file).
use std::{
    io::{BufReader, Read},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use bytes::Bytes;
use parquet::{
    errors::ParquetError,
    file::reader::{ChunkReader, Length},
};

use crate::storage::{RandomAccess, ReadKind};

/// A `ChunkReader` reading through a storage handle (clones share counters).
#[derive(Clone)]
pub struct StorageChunkReader {
    ra: Arc<dyn RandomAccess>,
    counters: Arc<(AtomicU64, AtomicU64)>,
}

impl StorageChunkReader {
    pub fn new(ra: Arc<dyn RandomAccess>) -> Self {
        Self {
            ra,
            counters: Arc::new((AtomicU64::new(0), AtomicU64::new(0))),
        }
    }

    /// (bytes read, read requests) so far.
    pub fn counters(&self) -> (u64, u64) {
        (
            self.counters.0.load(Ordering::Relaxed),
            self.counters.1.load(Ordering::Relaxed),
        )
    }
}

impl Length for StorageChunkReader {
    fn len(&self) -> u64 {
        self.ra.len()
    }
}

/// Sequential reader from an offset (used for page headers and footers).
pub struct StorageRead {
    ra: Arc<dyn RandomAccess>,
    pos: u64,
    counters: Arc<(AtomicU64, AtomicU64)>,
}

impl Read for StorageRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.ra.len().saturating_sub(self.pos)).min(buf.len() as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        self.ra
            .read_into(&mut buf[..n], self.pos, ReadKind::Data)
            .map_err(std::io::Error::other)?;
        self.pos += n as u64;
        self.counters.0.fetch_add(n as u64, Ordering::Relaxed);
        self.counters.1.fetch_add(1, Ordering::Relaxed);
        Ok(n)
    }
}

impl ChunkReader for StorageChunkReader {
    type T = BufReader<StorageRead>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(BufReader::with_capacity(
            64 << 10,
            StorageRead {
                ra: self.ra.clone(),
                pos: start,
                counters: self.counters.clone(),
            },
        ))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let b = self
            .ra
            .read_bytes(start, length, ReadKind::Data)
            .map_err(|e| ParquetError::External(Box::new(e)))?;
        self.counters.0.fetch_add(length as u64, Ordering::Relaxed);
        self.counters.1.fetch_add(1, Ordering::Relaxed);
        Ok(b)
    }
}

/// A `ChunkReader` over byte ranges already loaded (`(file offset, bytes)`,
/// ascending): arrow-rs then decodes from memory, so the bytes read are
/// exactly the ranges we loaded (one read per column-chunk run, as pyarrow
/// reads a chunk), not its page-by-page buffered reads. Asking for bytes
/// outside the ranges is an error.
#[derive(Clone)]
pub struct LoadedRanges {
    file_len: u64,
    ranges: Arc<[(u64, Bytes)]>,
}

impl LoadedRanges {
    pub fn new(file_len: u64, ranges: Arc<[(u64, Bytes)]>) -> Self {
        Self { file_len, ranges }
    }

    /// The loaded bytes from `start` to the end of its range.
    fn from(&self, start: u64) -> parquet::errors::Result<Bytes> {
        let i = self.ranges.partition_point(|(o, _)| *o <= start);
        i.checked_sub(1)
            .and_then(|i| self.ranges.get(i))
            .and_then(|(o, b)| {
                let at = usize::try_from(start - o).ok()?;
                (at < b.len()).then(|| b.slice(at..))
            })
            .ok_or_else(|| ParquetError::General(format!("byte {start} was not loaded")))
    }
}

impl Length for LoadedRanges {
    fn len(&self) -> u64 {
        self.file_len
    }
}

impl ChunkReader for LoadedRanges {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(bytes::Buf::reader(self.from(start)?))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let b = self.from(start)?;
        if length > b.len() {
            return Err(ParquetError::General(format!(
                "bytes {start}..+{length} were not loaded"
            )));
        }
        Ok(b.slice(..length))
    }
}
