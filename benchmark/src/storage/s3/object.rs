//! One object as the storage seam sees it: a multipart upload being
//! written ([`S3Writer`]), or an object read by ranged GETs ([`S3Object`]).
use super::*;

/// Streaming multipart upload; aborted if dropped before `finish`.
pub(super) struct S3Writer<'a> {
    pub(super) upload: Option<WriteMultipart>,
    pub(super) storage: &'a S3Storage,
    pub(super) key: String,
    pub(super) url: String,
    pub(super) written: u64,
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
pub(super) struct S3Object {
    pub(super) url: String,
    pub(super) path: std::path::PathBuf,
    pub(super) location: ObjPath,
    pub(super) len: u64,
    pub(super) storage: S3Storage,
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
