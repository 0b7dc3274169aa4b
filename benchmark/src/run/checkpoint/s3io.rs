//! `storprof checkpoint --checkpoint-folder s3://BUCKET/PREFIX`: each shard
//! file is one object, written with the storage layer's multipart upload
//! (parts of `--s3-part-mib`, 64 MiB by default, up to 4 in flight per
//! writer; an object of one part is still one multipart upload) and read
//! back with ranged GETs.
//!
//! S3 has no fsync: a shard counts as saved when its
//! CompleteMultipartUpload returned success, which is the point the server
//! promises the object durable and visible ([`S3_DURABILITY`]). There is no
//! client page cache to empty before the read-back either: every byte read
//! comes from the server.
use std::sync::Arc;

use super::io::{BlockSource, IoBytes, MANIFEST, Manifest};
use crate::error::BenchError;
use crate::storage::{AlignedBuf, S3Options, S3Storage, S3Url, Storage};

/// What "saved" means for an object, printed and kept in summary.json.
pub const S3_DURABILITY: &str = "S3 has no fsync: a shard counts as saved when its multipart upload \
    completed (CompleteMultipartUpload returned success), from then on the server's durability \
    applies; bytes are counted as uploaded, none as fsynced";

/// The checkpoint folder as objects under `s3://bucket/prefix`.
pub struct S3Folder {
    pub storage: Arc<S3Storage>,
    pub url: S3Url,
}

impl S3Folder {
    /// `None` for a local folder; an error for a malformed URL.
    pub fn parse(folder: &str, opts: &S3Options) -> Result<Option<Self>, BenchError> {
        let Some(url) = S3Url::parse(folder) else {
            return Ok(None);
        };
        let url = url?;
        let storage = Arc::new(S3Storage::new(url.clone(), opts)?);
        Ok(Some(S3Folder { storage, url }))
    }

    /// Upload `len` bytes of `src`'s content as the object `rel` (relative to the prefix).
    pub fn write_object(
        &self,
        rel: &str,
        len: u64,
        src: &mut BlockSource,
        block: usize,
    ) -> Result<IoBytes, BenchError> {
        let mut w = self.storage.create(rel)?;
        let mut left = len;
        while left > 0 {
            let n = usize::try_from(left.min(block as u64)).unwrap_or(block);
            let b = src.next_block();
            w.write_all(&b[..n])?;
            left -= n as u64;
        }
        w.finish()?;
        Ok(IoBytes {
            bytes: len,
            files: 1,
            ..IoBytes::default()
        })
    }

    /// Read the object `rel` to its end in `buf`-sized ranged reads; its bytes.
    pub fn read_object(&self, rel: &str, buf: &mut AlignedBuf) -> Result<u64, BenchError> {
        let obj = self.storage.open(rel)?;
        let len = obj.len();
        let block = buf.capacity().max(1) as u64;
        let mut offset = 0u64;
        while offset < len {
            let n = usize::try_from((len - offset).min(block)).unwrap_or(0);
            obj.read_exact_at(&mut buf.as_mut_full()[..n], offset)?;
            offset += n as u64;
        }
        Ok(offset)
    }

    /// The manifest object of an earlier run, if there is one of ours.
    pub fn read_manifest(&self) -> Result<Option<Manifest>, BenchError> {
        if !self.storage.exists(MANIFEST)? {
            return Ok(None);
        }
        let obj = self.storage.open(MANIFEST)?;
        let len = usize::try_from(obj.len()).unwrap_or(usize::MAX);
        let bytes = obj.read_bytes(0, len, crate::storage::ReadKind::Metadata)?;
        let m: Manifest = serde_json::from_slice(&bytes).map_err(|e| BenchError::Corrupt {
            path: format!("{}/{MANIFEST}", self.url.url()).into(),
            format: "storprof checkpoint manifest",
            reason: e.to_string(),
        })?;
        Ok((m.writer == Manifest::WRITER).then_some(m))
    }

    /// Make the prefix ready, as `prepare_folder` does for a local
    /// folder: an earlier run needs `force` (its listed objects are then
    /// deleted); objects at a key this run writes that no manifest lists are
    /// refused even with `force`. Other objects under the prefix are left
    /// alone (object keys cannot collide with them). No free-space check:
    /// a bucket has no statvfs. Writes the new manifest.
    pub fn prepare(&self, force: bool, manifest: &Manifest) -> Result<(), BenchError> {
        let folder_url = || std::path::PathBuf::from(self.url.url());
        if let Some(old) = self.read_manifest()? {
            if !force {
                return Err(BenchError::ExistingCheckpoint {
                    path: folder_url(),
                    files: old.files.len(),
                });
            }
            for rel in &old.files {
                self.storage.delete(rel)?;
            }
        }
        let mut foreign = Vec::new();
        for dir in &manifest.dirs {
            foreign.extend(
                self.storage
                    .list(dir)?
                    .into_iter()
                    .map(|n| format!("{dir}/{n}")),
            );
        }
        if let Some(first) = foreign.first() {
            return Err(BenchError::ForeignFiles {
                path: folder_url(),
                count: foreign.len(),
                example: first.clone(),
            });
        }
        let text = serde_json::to_vec_pretty(manifest)
            .map_err(|e| BenchError::Encoding(format!("manifest: {e}")))?;
        self.storage.put(MANIFEST, &text)
    }
}
