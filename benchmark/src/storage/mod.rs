//! Storage backends: where bytes live (local files, O_DIRECT files, later S3).
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

pub use aligned::AlignedBuf;
pub use local::{LocalStorage, dio_alignment};
pub use pool::{BufferPool, DEFAULT_POOL_BYTES, PooledBuf};

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
