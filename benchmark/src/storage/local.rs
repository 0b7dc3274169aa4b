//! Local files: buffered `pread` with large reads, or O_DIRECT `pread` into
//! aligned buffers (selected by [`LocalStorage::with_odirect`]).
use std::{
    ffi::CString,
    fs::{File, OpenOptions},
    io::Write,
    os::unix::{ffi::OsStrExt, fs::FileExt, fs::OpenOptionsExt},
    path::{Path, PathBuf},
    sync::Arc,
};

use bytes::Bytes;

use super::{AlignedBuf, ObjectWriter, RandomAccess, Storage};
use crate::error::BenchError;

/// Largest single `pread` we issue (Linux caps one read at ~2 GiB anyway).
const MAX_READ: usize = 256 << 20;
/// O_DIRECT alignment used when `statx(STATX_DIOALIGN)` does not answer.
pub const DEFAULT_DIO_ALIGN: u64 = 4096;

/// Files under a root directory.
#[derive(Clone, Debug)]
pub struct LocalStorage {
    root: PathBuf,
    odirect: bool,
}

impl LocalStorage {
    /// Buffered (page-cache) reads of files under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            odirect: false,
        }
    }

    /// Like [`LocalStorage::new`], reading with O_DIRECT when `odirect` is true.
    pub fn with_odirect(root: impl Into<PathBuf>, odirect: bool) -> Self {
        Self {
            root: root.into(),
            odirect,
        }
    }

    /// Whether reads bypass the page cache.
    pub fn odirect(&self) -> bool {
        self.odirect
    }

    /// Absolute path of `path` (absolute paths are kept).
    pub fn resolve(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.root.join(p)
        }
    }
}

fn io_err(path: &Path, source: std::io::Error) -> BenchError {
    BenchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// `(memory alignment, offset alignment)` for O_DIRECT on `path`, from
/// `statx(STATX_DIOALIGN)`; `None` when the kernel/filesystem does not say.
pub fn dio_alignment(path: &Path) -> Option<(u64, u64)> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statx is plain-old-data; zeroed is a valid initial value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: valid NUL-terminated path and a valid out-pointer.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            0,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return None;
    }
    Some((
        u64::from(stx.stx_dio_mem_align.max(1)),
        u64::from(stx.stx_dio_offset_align),
    ))
}

impl Storage for LocalStorage {
    fn open(&self, path: &str) -> Result<Arc<dyn RandomAccess>, BenchError> {
        let full = self.resolve(path);
        let mut opts = OpenOptions::new();
        opts.read(true);
        if self.odirect {
            opts.custom_flags(libc::O_DIRECT);
        }
        let file = opts.open(&full).map_err(|e| {
            if self.odirect && e.raw_os_error() == Some(libc::EINVAL) {
                io_err(
                    &full,
                    std::io::Error::new(e.kind(), "this filesystem does not support O_DIRECT"),
                )
            } else {
                io_err(&full, e)
            }
        })?;
        let len = file.metadata().map_err(|e| io_err(&full, e))?.len();
        let align = if self.odirect {
            // Memory and offset alignment: the larger of both, at least 512.
            dio_alignment(&full)
                .map(|(m, o)| m.max(o).max(512))
                .unwrap_or(DEFAULT_DIO_ALIGN)
        } else {
            0
        };
        Ok(Arc::new(LocalFile {
            file,
            len,
            path: full,
            dio_align: align,
        }))
    }

    fn list(&self, dir: &str) -> Result<Vec<String>, BenchError> {
        let full = self.resolve(dir);
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&full).map_err(|e| io_err(&full, e))? {
            let entry = entry.map_err(|e| io_err(&full, e))?;
            if entry.file_type().map_err(|e| io_err(&full, e))?.is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    fn put(&self, path: &str, data: &[u8]) -> Result<(), BenchError> {
        let mut w = self.create(path)?;
        w.write_all(data)?;
        w.finish()
    }

    fn exists(&self, path: &str) -> Result<bool, BenchError> {
        let full = self.resolve(path);
        full.try_exists().map_err(|e| io_err(&full, e))
    }

    fn describe(&self) -> String {
        format!(
            "local files under {}{}",
            self.root.display(),
            if self.odirect { " (O_DIRECT)" } else { "" }
        )
    }

    fn create(&self, path: &str) -> Result<Box<dyn ObjectWriter + '_>, BenchError> {
        let full = self.resolve(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
        }
        let mut tmp = full.clone().into_os_string();
        tmp.push(".partial");
        let tmp = PathBuf::from(tmp);
        let file = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
        Ok(Box::new(LocalWriter {
            file,
            tmp,
            path: full,
        }))
    }
}

/// Writes to `<path>.partial`, renamed to `<path>` on finish, so an
/// interrupted datagen never leaves a truncated file under the real name.
struct LocalWriter {
    file: File,
    tmp: PathBuf,
    path: PathBuf,
}

impl ObjectWriter for LocalWriter {
    fn write_all(&mut self, data: &[u8]) -> Result<(), BenchError> {
        self.file.write_all(data).map_err(|e| io_err(&self.tmp, e))
    }
    fn finish(self: Box<Self>) -> Result<(), BenchError> {
        std::fs::rename(&self.tmp, &self.path).map_err(|e| io_err(&self.path, e))
    }
}

impl Drop for LocalWriter {
    fn drop(&mut self) {
        // After a successful finish the tmp name no longer exists; otherwise
        // remove the partial file.
        let _ = std::fs::remove_file(&self.tmp);
    }
}

struct LocalFile {
    file: File,
    len: u64,
    path: PathBuf,
    /// 0 for buffered reads, else the O_DIRECT alignment.
    dio_align: u64,
}

impl LocalFile {
    fn short_read(&self, offset: u64, want: usize) -> BenchError {
        io_err(
            &self.path,
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "short read: wanted {want} bytes at offset {offset}, file has {}",
                    self.len
                ),
            ),
        )
    }

    /// pread loop into `buf` from `offset`; returns bytes read (less than
    /// `buf.len()` only at end of file).
    fn pread_full(&self, buf: &mut [u8], offset: u64) -> Result<usize, BenchError> {
        let mut done = 0;
        while done < buf.len() {
            let end = (done + MAX_READ).min(buf.len());
            match self.file.read_at(&mut buf[done..end], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => {
                    done += n;
                    // O_DIRECT: a non-aligned short read means EOF.
                    if self.dio_align != 0 && n % self.dio_align as usize != 0 {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(&self.path, e)),
            }
        }
        Ok(done)
    }

    /// O_DIRECT read of `[offset, offset+len)` into an aligned buffer whose
    /// visible window is exactly the requested range.
    fn read_direct(&self, offset: u64, len: usize) -> Result<AlignedBuf, BenchError> {
        let a = self.dio_align;
        let start = offset - offset % a;
        let end = (offset + len as u64).next_multiple_of(a);
        let span = usize::try_from(end - start).map_err(|_| self.short_read(offset, len))?;
        let mut buf = AlignedBuf::new(span).ok_or_else(|| {
            io_err(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::OutOfMemory, "mmap failed"),
            )
        })?;
        let got = self.pread_full(&mut buf.as_mut_full()[..span], start)?;
        let lead = (offset - start) as usize;
        if got < lead + len {
            return Err(self.short_read(offset, len));
        }
        buf.set_window(lead, len);
        Ok(buf)
    }
}

impl RandomAccess for LocalFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), BenchError> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|e| e > self.len)
        {
            return Err(self.short_read(offset, buf.len()));
        }
        if self.dio_align != 0 {
            let tmp = self.read_direct(offset, buf.len())?;
            buf.copy_from_slice(tmp.as_ref());
            return Ok(());
        }
        if self.pread_full(buf, offset)? < buf.len() {
            return Err(self.short_read(offset, buf.len()));
        }
        Ok(())
    }

    fn read_range(&self, offset: u64, len: usize) -> Result<Bytes, BenchError> {
        if offset.checked_add(len as u64).is_none_or(|e| e > self.len) {
            return Err(self.short_read(offset, len));
        }
        if self.dio_align != 0 {
            return Ok(Bytes::from_owner(self.read_direct(offset, len)?));
        }
        if len < (1 << 20) {
            let mut v = vec![0u8; len];
            if self.pread_full(&mut v, offset)? < len {
                return Err(self.short_read(offset, len));
            }
            return Ok(Bytes::from(v));
        }
        let mut buf = AlignedBuf::new(len).ok_or_else(|| {
            io_err(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::OutOfMemory, "mmap failed"),
            )
        })?;
        if self.pread_full(&mut buf.as_mut_full()[..len], offset)? < len {
            return Err(self.short_read(offset, len));
        }
        buf.set_window(0, len);
        Ok(Bytes::from_owner(buf))
    }
}
