//! S3-compatible object storage through `object_store` (aws feature), or
//! the same code over object_store's `InMemory` ([`S3Storage::in_memory`],
//! for tests without a server).
//!
//! ```text
//!  s3://BUCKET/PREFIX ─► S3Storage { store, prefix, runtime }
//!    open(path)   ─► size from the listing cache (else one HEAD) ─► S3Object
//!    read_bytes   ─► ≤ part_size: one ranged GET
//!                    larger: parts of part_size, `parallel_gets` ranged GETs in
//!                    flight, each streamed straight into its slice of one
//!                    pooled buffer (no reassembly copy)
//!    create(path) ─► multipart upload, part_size parts, up to 4 in flight
//!    list(dir)    ─► LIST with delimiter (also fills the size cache)
//! ```
//!
//! The sync [`Storage`] seam is kept: calls block on a small tokio runtime
//! owned by the storage, so formats and readers work unchanged over S3.
//! Every request is counted by kind ([`S3Storage::counters`],
//! [`Storage::request_counts`]): metadata GETs (reads of
//! [`ReadKind::Metadata`]: footers, headers), data reads
//! and the part GETs they were split into, HEAD, LIST, PUT; `storprof bench`
//! reports them in `summary.json` `measured.requests_by_kind`.
use std::{
    collections::HashMap,
    ops::Range,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, WriteMultipart, aws::AmazonS3Builder,
    memory::InMemory, path::Path as ObjPath,
};

use super::{BufferPool, ObjectWriter, PoolStats, RandomAccess, ReadKind, Storage, reserve_plan};
use crate::error::BenchError;

/// Options of the S3 backend (documented defaults in [`Default`]). Unset
/// fields fall back to the standard AWS environment variables
/// (`AWS_ENDPOINT_URL`/`AWS_ENDPOINT`, `AWS_REGION`/`AWS_DEFAULT_REGION`,
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
/// `AWS_ALLOW_HTTP`, `AWS_VIRTUAL_HOSTED_STYLE_REQUEST`).
#[derive(Clone, Debug)]
pub struct S3Options {
    /// Endpoint URL, e.g. `http://127.0.0.1:9000`. Default: env / AWS.
    pub endpoint: Option<String>,
    /// Region. Default: env, else `us-east-1`.
    pub region: Option<String>,
    /// Access key id. Default: env.
    pub access_key_id: Option<String>,
    /// Secret access key. Default: env.
    pub secret_access_key: Option<String>,
    /// Allow plain `http://` endpoints. Default: only for loopback endpoints
    /// (127.0.0.0/8, ::1, localhost), or when `AWS_ALLOW_HTTP=true`.
    pub allow_http: Option<bool>,
    /// Virtual-hosted-style requests (bucket in the host name). Default false
    /// (path style, what S3-compatible servers expect).
    pub virtual_hosted: bool,
    /// Whole-request timeout, body included. Default 600 s: object_store's
    /// 30 s default cuts multi-hundred-MiB GETs from slow servers.
    pub request_timeout: Duration,
    /// Connect timeout. Default 5 s.
    pub connect_timeout: Duration,
    /// Retries of failed requests (5xx, connection errors, bodies cut
    /// short: resumed from where they stopped). Default 4.
    pub max_retries: usize,
    /// Give up retrying after this long. Default 60 s.
    pub retry_timeout: Duration,
    /// Reads larger than this are split into parts of this size. Default
    /// 64 MiB: a 99 MiB flux row group is two GETs in parallel. Measured on
    /// loopback s3rver (scripts/bench-s3.sh): 64 MiB × 4 reach 114 % of
    /// curl's best ranged GETs, 128 MiB × 4 102 %. moto copies the whole
    /// object for every GET, so there fewer GETs win (256 MiB × 1: 44 % of
    /// curl; the footer GET alone costs one copy).
    pub part_size: usize,
    /// Part GETs in flight per storage read. Default 4.
    pub parallel_gets: usize,
    /// Advise transparent huge pages (`MADV_HUGEPAGE`) on the read buffers.
    /// Default false: the buffers are reserved and faulted in before the
    /// run, so huge pages could only save TLB misses in the body copies,
    /// and on loopback s3rver they did not (scripts/bench-s3.sh, first
    /// epoch: 990 MiB/s with them, 1,036 without), while faulting in 2 MiB
    /// pages zeroes each whole and needs contiguous memory.
    pub huge_pages: bool,
}

impl Default for S3Options {
    fn default() -> Self {
        Self {
            endpoint: None,
            region: None,
            access_key_id: None,
            secret_access_key: None,
            allow_http: None,
            virtual_hosted: false,
            request_timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(5),
            max_retries: 4,
            retry_timeout: Duration::from_secs(60),
            part_size: 64 << 20,
            parallel_gets: 4,
            huge_pages: false,
        }
    }
}

/// A parsed `s3://BUCKET[/PREFIX]` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Url {
    pub bucket: String,
    /// Key prefix without leading/trailing slashes ("" for the bucket root).
    pub prefix: String,
}

impl S3Url {
    /// Parse `s3://BUCKET[/PREFIX]`; `None` if `url` is not an s3 URL.
    pub fn parse(url: &str) -> Option<Result<Self, BenchError>> {
        let rest = url.strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Some(Err(BenchError::Config(format!(
                "{url}: an S3 data dir needs a bucket: s3://BUCKET/PREFIX"
            ))));
        }
        Some(Ok(Self {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
        }))
    }

    /// `s3://bucket/prefix` (no trailing slash).
    pub fn url(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// Whether `endpoint`'s host is a loopback address.
pub fn is_loopback_endpoint(endpoint: &str) -> bool {
    let rest = endpoint
        .split_once("://")
        .map(|(_, r)| r)
        .unwrap_or(endpoint);
    let authority = rest.split('/').next().unwrap_or("");
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Reads below this size go into one buffer without the read-buffer pool.
const SMALL_READ_BYTES: usize = 1 << 20;

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

/// Objects under `s3://bucket/prefix`.
#[derive(Clone)]
pub struct S3Storage {
    url: S3Url,
    endpoint: String,
    /// AWS S3, or `InMemory` for tests.
    store: Arc<dyn ObjectStore>,
    runtime: Arc<tokio::runtime::Runtime>,
    sizes: Arc<Mutex<HashMap<String, u64>>>,
    counters: Arc<S3Counters>,
    pool: BufferPool,
    part_size: usize,
    parallel_gets: usize,
}

impl std::fmt::Debug for S3Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Storage")
            .field("url", &self.url.url())
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

fn io_other(what: impl std::fmt::Display, path: &str) -> BenchError {
    BenchError::Io {
        path: path.into(),
        source: std::io::Error::other(what.to_string()),
    }
}

/// Map an object_store error to ours, naming the object URL.
fn os_err(url: &str, e: object_store::Error) -> BenchError {
    let hint = match &e {
        object_store::Error::NotFound { .. } => String::new(),
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => {
            " (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)".into()
        }
        _ if e.to_string().contains("403 Forbidden") => {
            " (403: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and the bucket policy)".into()
        }
        _ => String::new(),
    };
    let kind = match &e {
        object_store::Error::NotFound { .. } => std::io::ErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => std::io::ErrorKind::PermissionDenied,
        _ => std::io::ErrorKind::Other,
    };
    BenchError::Io {
        path: url.into(),
        source: std::io::Error::new(kind, format!("{e}{hint}")),
    }
}

impl S3Storage {
    /// Connect to `url` (no request is made until first use).
    pub fn new(url: S3Url, opts: &S3Options) -> Result<Self, BenchError> {
        let mut b = AmazonS3Builder::from_env().with_bucket_name(&url.bucket);
        if let Some(e) = &opts.endpoint {
            b = b.with_endpoint(e);
        }
        let endpoint = opts
            .endpoint
            .clone()
            .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
            .or_else(|| std::env::var("AWS_ENDPOINT").ok())
            .unwrap_or_else(|| "AWS".into());
        if let Some(r) = &opts.region {
            b = b.with_region(r);
        } else if std::env::var("AWS_REGION").is_err()
            && std::env::var("AWS_DEFAULT_REGION").is_err()
        {
            b = b.with_region("us-east-1");
        }
        if let Some(k) = &opts.access_key_id {
            b = b.with_access_key_id(k);
        }
        if let Some(s) = &opts.secret_access_key {
            b = b.with_secret_access_key(s);
        }
        let env_http =
            std::env::var("AWS_ALLOW_HTTP").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
        let allow_http = opts
            .allow_http
            .unwrap_or(env_http || is_loopback_endpoint(&endpoint));
        b = b
            .with_allow_http(allow_http)
            .with_virtual_hosted_style_request(opts.virtual_hosted)
            .with_client_options(
                object_store::ClientOptions::new()
                    .with_timeout(opts.request_timeout)
                    .with_connect_timeout(opts.connect_timeout)
                    .with_allow_http(allow_http),
            )
            .with_retry(object_store::RetryConfig {
                max_retries: opts.max_retries,
                retry_timeout: opts.retry_timeout,
                ..Default::default()
            });
        let store = b
            .build()
            .map_err(|e| BenchError::Config(format!("{}: {e}", url.url())))?;
        Self::with_store(url, endpoint, Arc::new(store), opts)
    }

    /// An empty in-memory bucket for `url` (object_store's `InMemory`): the
    /// S3 code path (keys, ranged and part GETs, multipart uploads, request
    /// counts) without a server. Only `part_size` and `parallel_gets` of
    /// `opts` apply.
    pub fn in_memory(url: S3Url, opts: &S3Options) -> Result<Self, BenchError> {
        Self::with_store(url, "memory".into(), Arc::new(InMemory::new()), opts)
    }

    fn with_store(
        url: S3Url,
        endpoint: String,
        store: Arc<dyn ObjectStore>,
        opts: &S3Options,
    ) -> Result<Self, BenchError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("storprof-s3")
            .enable_all()
            .build()
            .map_err(|e| io_other(format!("cannot start the S3 I/O runtime: {e}"), &url.url()))?;
        Ok(Self {
            url,
            endpoint,
            store,
            runtime: Arc::new(runtime),
            sizes: Arc::new(Mutex::new(HashMap::new())),
            counters: Arc::new(S3Counters::default()),
            pool: BufferPool::default().with_huge_pages(opts.huge_pages),
            part_size: opts.part_size.max(1 << 20),
            parallel_gets: opts.parallel_gets.max(1),
        })
    }

    /// The storage's request/byte counters.
    pub fn counters(&self) -> &S3Counters {
        &self.counters
    }

    fn count_meta(&self, kind: &AtomicU64) {
        kind.fetch_add(1, Ordering::Relaxed);
        self.counters
            .metadata_requests
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The data-dir URL.
    pub fn url(&self) -> &S3Url {
        &self.url
    }

    /// Object key of `path`: a full `s3://bucket/...` URL, or a path relative
    /// to the prefix (leading `./` and `/` ignored).
    /// Delete the object `path` (a missing one is not an error).
    pub fn delete(&self, path: &str) -> Result<(), BenchError> {
        let key = self.key(path);
        match self
            .runtime
            .block_on(self.store.delete(&ObjPath::from(key.as_str())))
        {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(os_err(&self.obj_url(&key), e)),
        }
        self.sizes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        Ok(())
    }

    pub fn key(&self, path: &str) -> String {
        let bucket_url = format!("s3://{}/", self.url.bucket);
        if let Some(k) = path.strip_prefix(&bucket_url) {
            return k.trim_matches('/').to_owned();
        }
        let rel = path.trim_start_matches("./").trim_matches('/');
        match (self.url.prefix.is_empty(), rel.is_empty()) {
            (true, _) => rel.to_owned(),
            (false, true) => self.url.prefix.clone(),
            (false, false) => format!("{}/{rel}", self.url.prefix),
        }
    }

    fn obj_url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.url.bucket)
    }

    fn size_of(&self, key: &str) -> Result<u64, BenchError> {
        if let Some(s) = self
            .sizes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
        {
            return Ok(*s);
        }
        self.count_meta(&self.counters.heads);
        let meta = self
            .runtime
            .block_on(self.store.head(&ObjPath::from(key)))
            .map_err(|e| os_err(&self.obj_url(key), e))?;
        self.sizes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_owned(), meta.size);
        Ok(meta.size)
    }
}

impl Storage for S3Storage {
    fn open(&self, path: &str) -> Result<Arc<dyn RandomAccess>, BenchError> {
        let key = self.key(path);
        let len = self.size_of(&key)?;
        Ok(Arc::new(S3Object {
            url: self.obj_url(&key),
            path: std::path::PathBuf::from(self.obj_url(&key)),
            location: ObjPath::from(key),
            len,
            storage: self.clone(),
        }))
    }

    fn list(&self, dir: &str) -> Result<Vec<String>, BenchError> {
        Ok(self.list_sized(dir)?.into_iter().map(|(n, _)| n).collect())
    }

    fn list_sized(&self, dir: &str) -> Result<Vec<(String, u64)>, BenchError> {
        let key = self.key(dir);
        let prefix = ObjPath::from(key.as_str());
        self.count_meta(&self.counters.lists);
        let res = self
            .runtime
            .block_on(self.store.list_with_delimiter(Some(&prefix)))
            .map_err(|e| os_err(&self.obj_url(&key), e))?;
        let mut out = Vec::with_capacity(res.objects.len());
        let mut sizes = self.sizes.lock().unwrap_or_else(|e| e.into_inner());
        for o in res.objects {
            if let Some(name) = o.location.filename() {
                out.push((name.to_owned(), o.size));
            }
            sizes.insert(o.location.to_string(), o.size);
        }
        out.sort_unstable();
        Ok(out)
    }

    fn put(&self, path: &str, data: &[u8]) -> Result<(), BenchError> {
        let key = self.key(path);
        let payload = object_store::PutPayload::from(Bytes::copy_from_slice(data));
        self.runtime
            .block_on(self.store.put(&ObjPath::from(key.as_str()), payload))
            .map_err(|e| os_err(&self.obj_url(&key), e))?;
        self.counters
            .put_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        self.counters.puts.fetch_add(1, Ordering::Relaxed);
        self.sizes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, data.len() as u64);
        Ok(())
    }

    fn exists(&self, path: &str) -> Result<bool, BenchError> {
        let key = self.key(path);
        self.count_meta(&self.counters.heads);
        match self
            .runtime
            .block_on(self.store.head(&ObjPath::from(key.as_str())))
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => {
                // A "directory": any object under key/.
                let prefix = ObjPath::from(key.as_str());
                self.count_meta(&self.counters.lists);
                let res = self
                    .runtime
                    .block_on(self.store.list_with_delimiter(Some(&prefix)))
                    .map_err(|e| os_err(&self.obj_url(&key), e))?;
                Ok(!res.objects.is_empty() || !res.common_prefixes.is_empty())
            }
            Err(e) => Err(os_err(&self.obj_url(&key), e)),
        }
    }

    fn request_counts(&self) -> Option<RequestCounts> {
        Some(self.counters.snapshot())
    }

    fn reserve_read_buffers(
        &self,
        in_flight: u64,
        bytes_per_fetch: u64,
    ) -> Result<usize, BenchError> {
        let (count, len) = reserve_plan(in_flight, bytes_per_fetch, SMALL_READ_BYTES as u64);
        self.pool.reserve(count, len).ok_or_else(|| {
            io_other(
                format!("cannot map {count} read buffers of {len} bytes"),
                &self.url.url(),
            )
        })
    }

    fn read_buffer_stats(&self) -> Option<PoolStats> {
        Some(self.pool.stats())
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        format!(
            "S3 objects under {} (endpoint {})",
            self.url.url(),
            self.endpoint
        )
    }

    fn create(&self, path: &str) -> Result<Box<dyn ObjectWriter + '_>, BenchError> {
        let key = self.key(path);
        let url = self.obj_url(&key);
        let upload = self
            .runtime
            .block_on(self.store.put_multipart(&ObjPath::from(key.as_str())))
            .map_err(|e| os_err(&url, e))?;
        Ok(Box::new(S3Writer {
            upload: Some(WriteMultipart::new_with_chunk_size(
                upload,
                self.part_size.max(5 << 20),
            )),
            storage: self,
            key,
            url,
            written: 0,
        }))
    }
}

/// Streaming multipart upload; aborted if dropped before `finish`.
struct S3Writer<'a> {
    upload: Option<WriteMultipart>,
    storage: &'a S3Storage,
    key: String,
    url: String,
    written: u64,
}

/// Parts uploading at once per writer.
const UPLOAD_CONCURRENCY: usize = 4;

impl ObjectWriter for S3Writer<'_> {
    fn write_all(&mut self, data: &[u8]) -> Result<(), BenchError> {
        let Some(up) = self.upload.as_mut() else {
            return Err(io_other("upload already finished", &self.url));
        };
        self.storage
            .runtime
            .block_on(up.wait_for_capacity(UPLOAD_CONCURRENCY))
            .map_err(|e| os_err(&self.url, e))?;
        // `write` spawns part uploads: it needs the runtime's context.
        let _ctx = self.storage.runtime.enter();
        up.write(data);
        self.written += data.len() as u64;
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<(), BenchError> {
        let Some(up) = self.upload.take() else {
            return Err(io_other("upload already finished", &self.url));
        };
        self.storage
            .runtime
            .block_on(up.finish())
            .map_err(|e| os_err(&self.url, e))?;
        self.storage
            .counters
            .put_bytes
            .fetch_add(self.written, Ordering::Relaxed);
        self.storage.counters.puts.fetch_add(1, Ordering::Relaxed);
        self.storage
            .sizes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.key.clone(), self.written);
        Ok(())
    }
}

impl Drop for S3Writer<'_> {
    fn drop(&mut self) {
        if let Some(up) = self.upload.take() {
            // Interrupted upload: abort so no partial object or parts remain.
            let _ = self.storage.runtime.block_on(up.abort());
        }
    }
}

/// One object opened for ranged reads.
struct S3Object {
    url: String,
    path: std::path::PathBuf,
    location: ObjPath,
    len: u64,
    storage: S3Storage,
}

impl S3Object {
    fn short(&self, offset: u64, want: usize, got: u64) -> BenchError {
        BenchError::Io {
            path: self.path.clone(),
            source: std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "short read: wanted {want} bytes at offset {offset}, got {got} (object has {} bytes)",
                    self.len
                ),
            ),
        }
    }

    /// One ranged GET streamed into `dst`; errors unless exactly `dst.len()` bytes arrive.
    async fn get_into(
        &self,
        offset: u64,
        dst: &mut [u8],
        kind: ReadKind,
    ) -> Result<(), BenchError> {
        let want = dst.len();
        let range: Range<u64> = offset..offset + want as u64;
        let st = &self.storage;
        st.counters.gets.fetch_add(1, Ordering::Relaxed);
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range)),
            ..Default::default()
        };
        let res = st
            .store
            .get_opts(&self.location, opts)
            .await
            .map_err(|e| os_err(&self.url, e))?;
        let mut stream = res.into_stream();
        let mut at = 0usize;
        while let Some(chunk) = stream.try_next().await.map_err(|e| os_err(&self.url, e))? {
            let end = at + chunk.len();
            if end > want {
                return Err(io_other(
                    format!("server sent more than the {want} bytes asked at offset {offset}"),
                    &self.url,
                ));
            }
            dst[at..end].copy_from_slice(&chunk);
            at = end;
        }
        st.counters
            .get_bytes
            .fetch_add(at as u64, Ordering::Relaxed);
        let (n, b) = match kind {
            ReadKind::Data => (&st.counters.data_gets, &st.counters.data_get_bytes),
            ReadKind::Metadata => (&st.counters.metadata_gets, &st.counters.metadata_get_bytes),
        };
        n.fetch_add(1, Ordering::Relaxed);
        b.fetch_add(at as u64, Ordering::Relaxed);
        if at != want {
            return Err(self.short(offset, want, at as u64));
        }
        Ok(())
    }

    /// Fill `dst` from `offset` with `part_size` GETs, `parallel_gets` in flight.
    fn fetch(&self, offset: u64, dst: &mut [u8], kind: ReadKind) -> Result<(), BenchError> {
        let part = self.storage.part_size;
        let parallel = self.storage.parallel_gets;
        if kind == ReadKind::Data {
            self.storage
                .counters
                .data_reads
                .fetch_add(1, Ordering::Relaxed);
        }
        self.storage.runtime.block_on(async {
            futures_util::stream::iter(dst.chunks_mut(part).enumerate().map(|(i, d)| {
                let off = offset + (i * part) as u64;
                self.get_into(off, d, kind)
            }))
            .buffer_unordered(parallel)
            .try_collect::<()>()
            .await
        })
    }

    fn check(&self, offset: u64, len: usize) -> Result<(), BenchError> {
        if offset.checked_add(len as u64).is_none_or(|e| e > self.len) {
            return Err(self.short(offset, len, 0));
        }
        Ok(())
    }
}

impl RandomAccess for S3Object {
    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn read_into(&self, buf: &mut [u8], offset: u64, kind: ReadKind) -> Result<(), BenchError> {
        self.check(offset, buf.len())?;
        if buf.is_empty() {
            return Ok(());
        }
        self.fetch(offset, buf, kind)
    }

    fn read_bytes(&self, offset: u64, len: usize, kind: ReadKind) -> Result<Bytes, BenchError> {
        self.check(offset, len)?;
        if len == 0 {
            return Ok(Bytes::new());
        }
        if len < SMALL_READ_BYTES {
            let mut v = vec![0u8; len];
            self.fetch(offset, &mut v, kind)?;
            return Ok(Bytes::from(v));
        }
        let mut buf =
            self.storage.pool.take(len).ok_or_else(|| {
                io_other(format!("cannot map a {len}-byte read buffer"), &self.url)
            })?;
        self.fetch(offset, &mut buf.as_mut_full()[..len], kind)?;
        buf.set_window(0, len);
        Ok(buf.into_bytes())
    }
}

#[cfg(test)]
mod tests;
