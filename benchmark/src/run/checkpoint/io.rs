//! The checkpoint reader's file I/O: sequential block reads, dropping the
//! page cache, free space (statvfs) and the manifest of what storprof wrote.
//! The writer (block source, block writes with fsync) is
//! [`crate::storage::checkpoint_write`], shared with `storprof bench`.
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::storage::AlignedBuf;

/// Name of the manifest listing every file a run writes.
pub const MANIFEST: &str = ".storprof-checkpoint.json";

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

pub use crate::storage::checkpoint_write::{
    BlockSource, DIRECT_ALIGN, IoBytes, WriteMode, fsync_dir, write_file,
};

/// Read `path` to its end in `buf`-sized reads; returns the bytes read.
pub fn read_file(path: &Path, buf: &mut AlignedBuf, odirect: bool) -> Result<u64, BenchError> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    if odirect {
        opts.custom_flags(libc::O_DIRECT);
    }
    let file = opts.open(path).map_err(io_err(path))?;
    let len = file.metadata().map_err(io_err(path))?.len();
    let mut offset = 0u64;
    let block = buf.capacity();
    while offset < len {
        let n = file
            .read_at(&mut buf.as_mut_full()[..block], offset)
            .map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        offset += n as u64;
        if odirect && n % DIRECT_ALIGN != 0 && offset < len {
            // A short O_DIRECT read inside the file leaves the next offset
            // unaligned: read the remainder through the page cache.
            let rest = file_rest(path, offset, len, buf)?;
            offset += rest;
            break;
        }
    }
    Ok(offset)
}

fn file_rest(path: &Path, from: u64, len: u64, buf: &mut AlignedBuf) -> Result<u64, BenchError> {
    let file = File::open(path).map_err(io_err(path))?;
    let mut offset = from;
    let block = buf.capacity();
    while offset < len {
        let n = file
            .read_at(&mut buf.as_mut_full()[..block], offset)
            .map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        offset += n as u64;
    }
    Ok(offset - from)
}

/// How the page cache was emptied before the read-back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheDrop {
    /// `sync; echo 3 > /proc/sys/vm/drop_caches` (root).
    DropCaches,
    /// `posix_fadvise(POSIX_FADV_DONTNEED)` on every checkpoint file (not
    /// root, or drop_caches refused): only clean pages of those files go.
    FadviseDontneed,
    /// Not needed: the data per client is at least 3× its memory.
    NotNeeded,
    /// None to empty: the shards are S3 objects, read back from the server.
    RemoteObjects,
}

/// Empty the page cache of `files`: the whole cache as root, else per file.
pub fn drop_caches(files: &[PathBuf]) -> Result<CacheDrop, BenchError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // SAFETY: sync has no preconditions.
        unsafe { libc::sync() };
        if std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok() {
            return Ok(CacheDrop::DropCaches);
        }
    }
    for path in files {
        let file = File::open(path).map_err(io_err(path))?;
        // Dirty pages are not dropped: write them back first.
        file.sync_all().map_err(io_err(path))?;
        // SAFETY: a valid open descriptor; offset 0, length 0 = whole file.
        let r = unsafe {
            libc::posix_fadvise(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
                0,
                libc::POSIX_FADV_DONTNEED,
            )
        };
        if r != 0 {
            return Err(BenchError::Io {
                path: path.clone(),
                source: std::io::Error::from_raw_os_error(r),
            });
        }
    }
    Ok(CacheDrop::FadviseDontneed)
}

/// Bytes available to an unprivileged writer on the file system of `path`.
pub fn free_bytes(path: &Path) -> Result<u64, BenchError> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| BenchError::System(format!("{}: path contains a NUL byte", path.display())))?;
    // SAFETY: statvfs is plain old data; zeroed is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid C string, st a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io_err(path)(std::io::Error::last_os_error()));
    }
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// What a run wrote, for `--force` to remove and nothing else.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Manifest {
    /// Always "storprof checkpoint".
    pub writer: String,
    pub model: String,
    /// Directories (relative), created by the run.
    pub dirs: Vec<String>,
    /// Files (relative to the folder).
    pub files: Vec<String>,
}

impl Manifest {
    pub const WRITER: &'static str = "storprof checkpoint";

    /// The manifest in `folder`, if it has one of ours.
    pub fn read(folder: &Path) -> Result<Option<Manifest>, BenchError> {
        let path = folder.join(MANIFEST);
        match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(&path)(e)),
            Ok(bytes) => {
                let m: Manifest =
                    serde_json::from_slice(&bytes).map_err(|e| BenchError::Corrupt {
                        path: path.clone(),
                        format: "storprof checkpoint manifest",
                        reason: e.to_string(),
                    })?;
                Ok((m.writer == Self::WRITER).then_some(m))
            }
        }
    }

    /// Write the manifest (before any shard, so an interrupted run can be cleaned).
    pub fn write(&self, folder: &Path) -> Result<(), BenchError> {
        let path = folder.join(MANIFEST);
        let text = serde_json::to_vec_pretty(self)
            .map_err(|e| BenchError::Encoding(format!("manifest: {e}")))?;
        std::fs::write(&path, text).map_err(io_err(&path))
    }

    /// Remove the listed files and then the listed directories that are
    /// empty; returns the files removed. Only names without `..` or a
    /// leading `/` are touched.
    pub fn remove_listed(&self, folder: &Path) -> Result<usize, BenchError> {
        let safe = |rel: &str| !rel.starts_with('/') && !rel.split('/').any(|c| c == "..");
        let mut removed = 0;
        for rel in self.files.iter().filter(|r| safe(r)) {
            let path = folder.join(rel);
            match std::fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(&path)(e)),
            }
        }
        for rel in self.dirs.iter().filter(|r| safe(r)) {
            // A directory with other files in it stays (they are not ours).
            let _ = std::fs::remove_dir(folder.join(rel));
        }
        let path = folder.join(MANIFEST);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&path)(e)),
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_read_counts_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.pt");
        let mut src = BlockSource::new(8192, 2, 1).unwrap();
        let mode = WriteMode {
            block: 8192,
            odirect: false,
            fsync: true,
        };
        let io = write_file(&path, 20_001, &mut src, mode).unwrap();
        assert_eq!(
            (io.bytes, io.fsynced, io.files, io.fsyncs),
            (20_001, 20_001, 1, 1)
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 20_001);
        let mut buf = AlignedBuf::new(8192).unwrap();
        assert_eq!(read_file(&path, &mut buf, false).unwrap(), 20_001);
    }

    #[test]
    fn manifest_removes_only_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("step1")).unwrap();
        std::fs::write(d.join("step1/ours.pt"), b"x").unwrap();
        std::fs::write(d.join("step1/theirs.txt"), b"y").unwrap();
        std::fs::write(d.join("other.txt"), b"z").unwrap();
        let m = Manifest {
            writer: Manifest::WRITER.into(),
            model: "llama3-8b".into(),
            dirs: vec!["step1".into()],
            files: vec!["step1/ours.pt".into(), "../other.txt".into()],
        };
        m.write(d).unwrap();
        assert_eq!(Manifest::read(d).unwrap(), Some(m.clone()));
        assert_eq!(m.remove_listed(d).unwrap(), 1);
        assert!(!d.join("step1/ours.pt").exists());
        assert!(d.join("step1/theirs.txt").exists());
        assert!(d.join("other.txt").exists());
        assert!(!d.join(MANIFEST).exists());
    }
}
