//! Sample readers: how a training data loader turns sample indices into bytes.
//! `raw` reads the needed byte ranges without decoding, `decode` is a real
//! loader that materializes arrays, `dlio-legacy` reproduces DLIO's per-sample
//! reopen + full decode (mlcommons/storage#330).
//!
//! OWNER: formats/readers engineer. Interface agreed with the engine.
use crate::error::BenchError;

/// Which reader strategy to use (`--reader`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
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
