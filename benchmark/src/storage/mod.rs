//! Storage backends: where bytes live (local files, O_DIRECT files, S3).
//! Formats (`crate::format`) and readers (`crate::reader`) only see these
//! traits, so every format works over every backend.
//!
//! ```text
//!  reader ──read_range(off,len)──► RandomAccess ──pread / O_DIRECT pread──► file
//!  datagen ──create(path)──► ObjectWriter ──write_all──► file (tmp name, renamed on finish)
//! ```
//!
//! OWNER: formats/readers engineer. Interface agreed with the engine; extend,
//! do not break.
use std::sync::Arc;

use bytes::Bytes;

use crate::error::BenchError;

mod aligned;
mod local;
mod pool;
mod s3;

pub use aligned::AlignedBuf;
pub use local::{LocalStorage, dio_alignment};
pub use pool::{BufferPool, DEFAULT_POOL_BYTES, PooledBuf};
pub use s3::{
    RequestCounts, S3Counters, S3Options, S3Storage, S3Url, is_loopback_endpoint, metadata_reads,
};

/// One opened object/file that can be read at any offset from many threads.
pub trait RandomAccess: Send + Sync {
    /// Size in bytes.
    fn len(&self) -> u64;
    /// True when the object is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` from `offset`; errors (naming the path) on a short read.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), BenchError>;
    /// Read `len` bytes at `offset` into a new buffer. Backends override this
    /// to read straight into an aligned / reused buffer without an extra copy.
    fn read_range(&self, offset: u64, len: usize) -> Result<Bytes, BenchError> {
        let mut v = vec![0u8; len];
        self.read_exact_at(&mut v, offset)?;
        Ok(Bytes::from(v))
    }
    /// Path for messages.
    fn path(&self) -> &std::path::Path {
        std::path::Path::new("<object>")
    }
}

/// A streaming writer for one new object (datagen).
pub trait ObjectWriter: Send {
    /// Append bytes.
    fn write_all(&mut self, data: &[u8]) -> Result<(), BenchError>;
    /// Make the object visible under its final name.
    fn finish(self: Box<Self>) -> Result<(), BenchError>;
}

/// A place datasets are stored.
pub trait Storage: Send + Sync {
    /// Open for random reads. `path` is relative to the backend's root or absolute.
    fn open(&self, path: &str) -> Result<Arc<dyn RandomAccess>, BenchError>;
    /// Sorted names of the files directly inside `dir`.
    fn list(&self, dir: &str) -> Result<Vec<String>, BenchError>;
    /// Write a whole object (datagen). Creates parent directories.
    fn put(&self, path: &str, data: &[u8]) -> Result<(), BenchError>;
    /// Whether `path` exists.
    fn exists(&self, path: &str) -> Result<bool, BenchError>;
    /// Human-readable description for messages ("local files under /data").
    fn describe(&self) -> String;
    /// Requests issued so far, per kind, for backends that count them (S3).
    /// Default `None`.
    fn request_counts(&self) -> Option<RequestCounts> {
        None
    }
    /// Stream a new object. The default buffers in memory and calls `put`.
    fn create(&self, path: &str) -> Result<Box<dyn ObjectWriter + '_>, BenchError> {
        Ok(Box::new(BufferedPut {
            storage: self,
            path: path.to_owned(),
            buf: Vec::new(),
        }))
    }
}

struct BufferedPut<'a, S: Storage + ?Sized> {
    storage: &'a S,
    path: String,
    buf: Vec<u8>,
}

impl<S: Storage + ?Sized> ObjectWriter for BufferedPut<'_, S> {
    fn write_all(&mut self, data: &[u8]) -> Result<(), BenchError> {
        self.buf.extend_from_slice(data);
        Ok(())
    }
    fn finish(self: Box<Self>) -> Result<(), BenchError> {
        self.storage.put(&self.path, &self.buf)
    }
}

/// The storage behind a `--data-dir` value: `s3://BUCKET/PREFIX` is an
/// [`S3Storage`] (paths may then be full `s3://` URLs or relative to the
/// prefix); a plain path or `file://PATH` is [`LocalStorage`] rooted at "."
/// (paths stay as the engine builds them). `odirect` applies to local files
/// only; asking for it over S3 is an error.
pub fn storage_for_data_dir(
    data_dir: &str,
    odirect: bool,
    s3: &S3Options,
) -> Result<Arc<dyn Storage>, BenchError> {
    if let Some(url) = S3Url::parse(data_dir) {
        if odirect {
            return Err(BenchError::Config(format!(
                "{data_dir}: --odirect applies to local files, not to S3"
            )));
        }
        return Ok(Arc::new(S3Storage::new(url?, s3)?));
    }
    Ok(Arc::new(
        LocalStorage::with_odirect(".", odirect).with_mmap(!odirect),
    ))
}

/// The storage a bench run reads: [`storage_for_data_dir`] with the
/// workload's `reader.odirect` and `reader.dont_use_mmap`. Local buffered
/// reads are mapped (DLIO's readers map unless `dont_use_mmap`), except for
/// `dlio-legacy`, which reproduces pyarrow's `read_table` and so `pread`s
/// (its `memory_map` defaults to false).
pub fn storage_for_workload(
    data_dir: &str,
    cfg: &crate::config::DlioConfig,
    reader: crate::reader::ReaderKind,
    s3: &S3Options,
) -> Result<Arc<dyn Storage>, BenchError> {
    if S3Url::parse(data_dir).is_some() {
        return storage_for_data_dir(data_dir, cfg.odirect, s3);
    }
    let mmap =
        !cfg.odirect && !cfg.dont_use_mmap && reader != crate::reader::ReaderKind::DlioLegacy;
    Ok(Arc::new(
        LocalStorage::with_odirect(".", cfg.odirect).with_mmap(mmap),
    ))
}

/// `data_dir` without a `file://` scheme (other values unchanged).
pub fn strip_file_scheme(data_dir: &str) -> &str {
    data_dir.strip_prefix("file://").unwrap_or(data_dir)
}
