//! Storage backends: where bytes live (local files, O_DIRECT files, S3, or
//! an in-memory object store for tests). The bottom layer of the crate: it
//! depends on [`crate::error`] only. Formats (`crate::format`) and readers
//! (`crate::reader`) only see these traits, so every format works over every
//! backend.
//!
//! ```text
//!  --data-dir URL + StorageOptions ──► open() ──► LocalStorage (plain path, file://)
//!                                            └──► S3Storage    (s3://BUCKET/PREFIX)
//!  S3Storage::in_memory(url) ──► the S3 code path over object_store's InMemory
//!
//!  reader ──read_bytes(off, len, ReadKind)──► RandomAccess ──pread / O_DIRECT pread / ranged GETs
//!  datagen ──create(path)──► ObjectWriter ──write_all──► file (tmp name, renamed on finish)
//! ```
//!
//! Every read names its [`ReadKind`] (a footer or header is metadata, a row
//! group or array is data): backends that count requests (S3) count the two
//! apart, the others ignore it.
use std::sync::Arc;

use bytes::Bytes;

use crate::error::BenchError;

mod aligned;
pub mod checkpoint_write;
mod local;
mod pool;
mod s3;

pub use aligned::AlignedBuf;
pub use local::{LocalStorage, dio_alignment};
pub use pool::{BufferPool, DEFAULT_POOL_BYTES, PoolStats, PooledBuf, reserve_plan};
pub use s3::{RequestCounts, S3Counters, S3Options, S3Storage, S3Url, is_loopback_endpoint};

/// What a read is for. Backends that count requests (S3) count metadata
/// and data reads apart (`summary.json` `measured.requests_by_kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadKind {
    /// Footers, headers, central directories: small reads that locate data.
    Metadata,
    /// Row groups, arrays: the sample bytes themselves.
    Data,
}

/// One opened object/file that can be read at any offset from many threads.
pub trait RandomAccess: Send + Sync {
    /// Size in bytes.
    fn len(&self) -> u64;
    /// True when the object is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fill `buf` from `offset`; errors (naming the path) on a short read.
    fn read_into(&self, buf: &mut [u8], offset: u64, kind: ReadKind) -> Result<(), BenchError>;
    /// Read `len` bytes at `offset` into a new buffer. Backends override this
    /// to read straight into an aligned / reused buffer without an extra copy.
    fn read_bytes(&self, offset: u64, len: usize, kind: ReadKind) -> Result<Bytes, BenchError> {
        let mut v = vec![0u8; len];
        self.read_into(&mut v, offset, kind)?;
        Ok(Bytes::from(v))
    }
    /// Read data ranges `(offset, len)`, in order. Backends may place them
    /// in one buffer (one allocation for a row group's selected column
    /// chunks instead of one each).
    fn read_ranges(&self, ranges: &[(u64, usize)]) -> Result<Vec<Bytes>, BenchError> {
        ranges
            .iter()
            .map(|&(offset, len)| self.read_range(offset, len))
            .collect()
    }
    /// Read data ranges `(offset, len)` and drop the bytes, as `dd` and
    /// `fio` do: for readers that measure the storage and keep nothing.
    /// Returns the bytes read. Backends read into a reused buffer small
    /// enough to stay in the CPU cache.
    fn read_and_discard(&self, ranges: &[(u64, usize)]) -> Result<u64, BenchError> {
        Ok(discard_ranges(self.read_ranges(ranges)?))
    }
    /// [`RandomAccess::read_into`] of data bytes.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), BenchError> {
        self.read_into(buf, offset, ReadKind::Data)
    }
    /// [`RandomAccess::read_bytes`] of data bytes.
    fn read_range(&self, offset: u64, len: usize) -> Result<Bytes, BenchError> {
        self.read_bytes(offset, len, ReadKind::Data)
    }
    /// Path for messages.
    fn path(&self) -> &std::path::Path {
        std::path::Path::new("<object>")
    }
}

/// Drop buffers that were read only to be measured; their total length.
pub(crate) fn discard_ranges(read: Vec<Bytes>) -> u64 {
    read.iter()
        .map(|b| std::hint::black_box(b).len() as u64)
        .sum()
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
    /// [`Storage::list`] with each file's size in bytes. The default opens
    /// every file; backends that learn sizes from the listing itself (a
    /// directory's metadata, an object listing) override it, which matters
    /// for datasets of a million files.
    fn list_sized(&self, dir: &str) -> Result<Vec<(String, u64)>, BenchError> {
        let base = dir.trim_end_matches('/');
        self.list(dir)?
            .into_iter()
            .map(|name| {
                let len = self.open(&format!("{base}/{name}"))?.len();
                Ok((name, len))
            })
            .collect()
    }
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
    /// Before a run: map and fault in the read buffers its fetches need at
    /// once (`in_flight` fetches of up to `bytes_per_fetch` bytes), so the
    /// first epoch's reads land in touched memory as later ones do. Returns
    /// the buffers mapped. Default: nothing (backends that read into fresh
    /// buffers per read).
    fn reserve_read_buffers(
        &self,
        _in_flight: u64,
        _bytes_per_fetch: u64,
    ) -> Result<usize, BenchError> {
        Ok(0)
    }
    /// What the read-buffer pool did so far, for backends that report it (S3).
    fn read_buffer_stats(&self) -> Option<PoolStats> {
        None
    }
    /// Whether paths name objects of a remote store rather than local files
    /// (callers then check directories by listing, not with the file system).
    /// Default false.
    fn is_remote(&self) -> bool {
        false
    }
    /// Make directory `path` and its parents (DLIO's readers expect the
    /// dataset's split directories to exist, even empty ones). Object stores
    /// have no directories: the default does nothing.
    fn create_dir(&self, _path: &str) -> Result<(), BenchError> {
        Ok(())
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

/// How [`open`] sets up a backend (documented defaults in [`Default`]).
#[derive(Clone, Debug, Default)]
pub struct StorageOptions {
    /// Read local files with O_DIRECT. Asking for it over S3 is an error.
    /// Default false.
    pub odirect: bool,
    /// Serve large buffered local reads by mapping the file
    /// ([`LocalStorage::with_mmap`]); ignored with O_DIRECT and over S3.
    /// Default false.
    pub mmap: bool,
    /// Connection settings of `s3://` data dirs. Default [`S3Options::default`].
    pub s3: S3Options,
}

/// The storage behind a `--data-dir` value, the one place an `s3://` URL is
/// recognised: `s3://BUCKET/PREFIX` is an [`S3Storage`] (paths may then be
/// full `s3://` URLs or relative to the prefix); a plain path or
/// `file://PATH` is [`LocalStorage`] rooted at "." (paths stay as the
/// engine builds them).
pub fn open(data_dir: &str, options: &StorageOptions) -> Result<Arc<dyn Storage>, BenchError> {
    if let Some(url) = S3Url::parse(data_dir) {
        if options.odirect {
            return Err(BenchError::usage(
                "--odirect",
                format!("{data_dir}: --odirect applies to local files, not to S3"),
            ));
        }
        return Ok(Arc::new(S3Storage::new(url?, &options.s3)?));
    }
    Ok(Arc::new(
        LocalStorage::with_odirect(".", options.odirect)
            .with_mmap(options.mmap && !options.odirect),
    ))
}

/// [`open`] with O_DIRECT or, without it, mapped local reads (what datagen
/// and the data-dir checks use).
pub fn storage_for_data_dir(
    data_dir: &str,
    odirect: bool,
    s3: &S3Options,
) -> Result<Arc<dyn Storage>, BenchError> {
    open(
        data_dir,
        &StorageOptions {
            odirect,
            mmap: !odirect,
            s3: s3.clone(),
        },
    )
}

/// `data_dir` without a `file://` scheme (other values unchanged).
pub fn strip_file_scheme(data_dir: &str) -> &str {
    data_dir.strip_prefix("file://").unwrap_or(data_dir)
}
