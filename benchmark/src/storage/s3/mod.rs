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
//!
//! Here the storage itself; `options` (options, URLs), `counters` (the
//! request counts) and `object` (an upload, an object read) beside it.
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

mod counters;
mod object;
mod options;

pub use counters::{RequestCounts, S3Counters};
use object::{S3Object, S3Writer};
pub use options::{S3Options, S3Url, is_loopback_endpoint};

/// Reads below this size go into one buffer without the read-buffer pool.
const SMALL_READ_BYTES: usize = 1 << 20;

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
            .map_err(|e| BenchError::usage("--data-dir", format!("{}: {e}", url.url())))?;
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

#[cfg(test)]
mod tests;
