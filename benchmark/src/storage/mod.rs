//! Storage backends: where bytes live (local files, O_DIRECT files, later S3).
//! Formats (`crate::format`) and readers (`crate::reader`) only see these
//! traits, so every format works over every backend.
//!
//! OWNER: formats/readers engineer. Interface agreed with the engine; extend,
//! do not break.
use std::sync::Arc;

use crate::error::BenchError;

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
}
