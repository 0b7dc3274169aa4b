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
