//! Every request an S3 storage issued, by kind, for `summary.json`.
use super::*;

/// Request counters of one storage (shared by its clones and objects).
#[derive(Debug, Default)]
pub struct S3Counters {
    /// GET requests issued (ranged or whole), retries not included.
    pub gets: AtomicU64,
    /// Body bytes received by GETs.
    pub get_bytes: AtomicU64,
    /// GETs of metadata reads ([`ReadKind::Metadata`]: footers, headers).
    pub metadata_gets: AtomicU64,
    /// Body bytes of those GETs.
    pub metadata_get_bytes: AtomicU64,
    /// Other reads (row groups, arrays); each is one or more part GETs.
    pub data_reads: AtomicU64,
    /// Part GETs of data reads.
    pub data_gets: AtomicU64,
    /// Body bytes of those GETs.
    pub data_get_bytes: AtomicU64,
    /// HEAD and LIST requests.
    pub metadata_requests: AtomicU64,
    /// HEAD requests.
    pub heads: AtomicU64,
    /// LIST requests.
    pub lists: AtomicU64,
    /// Objects uploaded (PUT or completed multipart upload).
    pub puts: AtomicU64,
    /// Bytes uploaded.
    pub put_bytes: AtomicU64,
}

impl S3Counters {
    /// A plain snapshot of the counters.
    pub fn snapshot(&self) -> RequestCounts {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RequestCounts {
            get_requests: l(&self.gets),
            get_bytes: l(&self.get_bytes),
            metadata_get_requests: l(&self.metadata_gets),
            metadata_get_bytes: l(&self.metadata_get_bytes),
            data_reads: l(&self.data_reads),
            data_get_requests: l(&self.data_gets),
            data_get_bytes: l(&self.data_get_bytes),
            head_requests: l(&self.heads),
            list_requests: l(&self.lists),
            put_objects: l(&self.puts),
            put_bytes: l(&self.put_bytes),
        }
    }
}

/// Requests a storage issued, per kind (`summary.json` `measured.requests_by_kind`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RequestCounts {
    /// All GETs (metadata + data), retries not included.
    pub get_requests: u64,
    pub get_bytes: u64,
    /// GETs of small reads (footers, NPZ headers).
    pub metadata_get_requests: u64,
    pub metadata_get_bytes: u64,
    /// Data reads (row groups / coalesced row groups / arrays) ...
    pub data_reads: u64,
    /// ... and the part GETs they were split into.
    pub data_get_requests: u64,
    pub data_get_bytes: u64,
    pub head_requests: u64,
    pub list_requests: u64,
    pub put_objects: u64,
    pub put_bytes: u64,
}

impl RequestCounts {
    /// `self − earlier`, field by field (saturating).
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        RequestCounts {
            get_requests: self.get_requests.saturating_sub(earlier.get_requests),
            get_bytes: self.get_bytes.saturating_sub(earlier.get_bytes),
            metadata_get_requests: self
                .metadata_get_requests
                .saturating_sub(earlier.metadata_get_requests),
            metadata_get_bytes: self
                .metadata_get_bytes
                .saturating_sub(earlier.metadata_get_bytes),
            data_reads: self.data_reads.saturating_sub(earlier.data_reads),
            data_get_requests: self
                .data_get_requests
                .saturating_sub(earlier.data_get_requests),
            data_get_bytes: self.data_get_bytes.saturating_sub(earlier.data_get_bytes),
            head_requests: self.head_requests.saturating_sub(earlier.head_requests),
            list_requests: self.list_requests.saturating_sub(earlier.list_requests),
            put_objects: self.put_objects.saturating_sub(earlier.put_objects),
            put_bytes: self.put_bytes.saturating_sub(earlier.put_bytes),
        }
    }
}
