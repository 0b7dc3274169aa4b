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

use super::{BufferPool, ObjectWriter, PooledBuf, RandomAccess, ReadKind, Storage};
use crate::error::BenchError;

/// Largest single `pread` we issue (Linux caps one read at ~2 GiB anyway).
const MAX_READ: usize = 256 << 20;
/// O_DIRECT alignment used when `statx(STATX_DIOALIGN)` does not answer.
pub const DEFAULT_DIO_ALIGN: u64 = 4096;

/// Files under a root directory. Clones share the read-buffer pool.
#[derive(Clone, Debug)]
pub struct LocalStorage {
    root: PathBuf,
    odirect: bool,
    mmap: bool,
    pool: BufferPool,
}

impl LocalStorage {
    /// Buffered (page-cache) reads of files under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self::with_odirect(root, false)
    }

    /// Like [`LocalStorage::new`], reading with O_DIRECT when `odirect` is true.
    pub fn with_odirect(root: impl Into<PathBuf>, odirect: bool) -> Self {
        Self {
            root: root.into(),
            odirect,
            mmap: false,
            pool: BufferPool::default(),
        }
    }

    /// Serve large (≥ 1 MiB) buffered `read_range`s by mapping the file
    /// range and populating it (zero-copy, like pyarrow's `memory_map=True`,
    /// DLIO's default unless `reader.dont_use_mmap`) instead of `pread` into
    /// a buffer. Missing pages are read from storage in the calling thread
    /// with whole-range readahead; a truncated file or a device error is an
    /// error at read time. Caveat of any mmap loader: a file truncated
    /// *after* it was read, while its bytes are still in use, raises SIGBUS
    /// on touch. Ignored with O_DIRECT.
    pub fn with_mmap(mut self, mmap: bool) -> Self {
        self.mmap = mmap;
        self
    }

    /// Use `pool` for large reads (default: a private pool keeping up to
    /// [`super::DEFAULT_POOL_BYTES`] idle).
    pub fn with_pool(mut self, pool: BufferPool) -> Self {
        self.pool = pool;
        self
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
            mmap: self.mmap && !self.odirect,
            pool: self.pool.clone(),
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

    fn list_sized(&self, dir: &str) -> Result<Vec<(String, u64)>, BenchError> {
        let full = self.resolve(dir);
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&full).map_err(|e| io_err(&full, e))? {
            let entry = entry.map_err(|e| io_err(&full, e))?;
            // Symlinks are followed (as `open` would), so stat, not lstat.
            let path = entry.path();
            let meta = std::fs::metadata(&path).map_err(|e| io_err(&path, e))?;
            if meta.is_file() {
                out.push((entry.file_name().to_string_lossy().into_owned(), meta.len()));
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    fn put(&self, path: &str, data: &[u8]) -> Result<(), BenchError> {
        let mut w = self.create(path)?;
        w.write_all(data)?;
        w.finish()
    }

    fn create_dir(&self, path: &str) -> Result<(), BenchError> {
        let full = self.resolve(path);
        std::fs::create_dir_all(&full).map_err(|e| io_err(&full, e))
    }

    fn exists(&self, path: &str) -> Result<bool, BenchError> {
        let full = self.resolve(path);
        full.try_exists().map_err(|e| io_err(&full, e))
    }

    fn describe(&self) -> String {
        format!(
            "local files under {}{}",
            self.root.display(),
            if self.odirect {
                " (O_DIRECT)"
            } else if self.mmap {
                " (mmap)"
            } else {
                ""
            }
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
    mmap: bool,
    pool: BufferPool,
}

impl LocalFile {
    /// Map `[offset, offset+len)` (len > 0, in bounds) read-only and
    /// populate it: `MADV_WILLNEED` first starts readahead of the whole range
    /// in large requests (a plain fault-in would read missing pages in
    /// `read_ahead_kb` pieces), then `MADV_POPULATE_READ` waits for every page
    /// and maps it. Populating reports a truncated file or a device error as
    /// an error here instead of a SIGBUS on first touch.
    fn map_range(&self, offset: u64, len: usize) -> Result<MappedRange, BenchError> {
        let page = 4096u64;
        let map_off = offset - offset % page;
        let lead = (offset - map_off) as usize;
        let map_len = lead + len;
        if offset + len as u64 > self.len {
            return Err(self.short_read(offset, len));
        }
        let off = libc::off_t::try_from(map_off).map_err(|_| self.short_read(offset, len))?;
        // SAFETY: a fresh read-only shared mapping of our open file; the
        // kernel picks the address; the fd stays valid for the call.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&self.file),
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io_err(&self.path, std::io::Error::last_os_error()));
        }
        let ptr = std::ptr::NonNull::new(p.cast::<u8>())
            .ok_or_else(|| io_err(&self.path, std::io::Error::other("mmap returned null")))?;
        // Owned from here: dropped (unmapped) on any error below.
        let range = MappedRange {
            ptr,
            map_len,
            lead,
            len,
        };
        // SAFETY: advising our own fresh mapping of exactly map_len bytes;
        // WILLNEED is only a hint, so its result is not needed.
        unsafe { libc::madvise(p, map_len, libc::MADV_WILLNEED) };
        // SAFETY: as above; POPULATE_READ only faults pages in for reading.
        if unsafe { libc::madvise(p, map_len, libc::MADV_POPULATE_READ) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(io_err(
                &self.path,
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "reading {len} bytes at offset {offset} through a file mapping failed \
                         (file truncated or device error?): {e}"
                    ),
                ),
            ));
        }
        Ok(range)
    }

    fn take_buf(&self, len: usize) -> Result<PooledBuf, BenchError> {
        self.pool.take(len).ok_or_else(|| {
            io_err(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::OutOfMemory, "mmap failed"),
            )
        })
    }

    /// `[offset, offset + len)` within the file, else the short-read error.
    fn check_range(&self, offset: u64, len: usize) -> Result<(), BenchError> {
        if offset.checked_add(len as u64).is_none_or(|e| e > self.len) {
            return Err(self.short_read(offset, len));
        }
        Ok(())
    }

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

    /// Read `ranges` piece by piece into `buf`, dropping each piece; the
    /// bytes read.
    fn discard_into(&self, ranges: &[(u64, usize)], buf: &mut [u8]) -> Result<u64, BenchError> {
        let mut total = 0u64;
        for &(offset, len) in ranges {
            self.check_range(offset, len)?;
            let mut done = 0;
            while done < len {
                let piece = (len - done).min(buf.len());
                let at = offset + done as u64;
                if self.pread_full(&mut buf[..piece], at)? < piece {
                    return Err(self.short_read(at, piece));
                }
                std::hint::black_box(&buf[..piece]);
                done += piece;
            }
            total += len as u64;
        }
        Ok(total)
    }

    /// O_DIRECT read of `[offset, offset+len)` into an aligned buffer whose
    /// visible window is exactly the requested range.
    fn read_direct(&self, offset: u64, len: usize) -> Result<PooledBuf, BenchError> {
        let a = self.dio_align;
        let start = offset - offset % a;
        let end = (offset + len as u64).next_multiple_of(a);
        let span = usize::try_from(end - start).map_err(|_| self.short_read(offset, len))?;
        let mut buf = self.take_buf(span)?;
        let got = self.pread_full(&mut buf.as_mut_full()[..span], start)?;
        let lead = (offset - start) as usize;
        if got < lead + len {
            return Err(self.short_read(offset, len));
        }
        buf.set_window(lead, len);
        Ok(buf)
    }
}

/// Piece size of [`RandomAccess::read_and_discard`]: every piece lands in
/// the same buffer, which stays in L2 (2 MiB per core here).
const DISCARD_PIECE: usize = 512 << 10;

/// Buffers that discarded reads land in, kept between reads and between
/// read threads (which live one epoch): a fresh buffer's first touches cost
/// more than the reads into it, on a VM whose host reclaims freed memory.
static DISCARD_BUFS: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// Buffered reads from this size on land in pooled buffers.
const POOLED_READ_MIN: usize = 64 << 10;
/// With mapping on, reads from this size on are mapped instead of copied.
const MMAP_READ_MIN: usize = 1 << 20;

impl RandomAccess for LocalFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }

    // Local reads cost the same whatever they are for: `ReadKind` is not used.
    fn read_into(&self, buf: &mut [u8], offset: u64, _: ReadKind) -> Result<(), BenchError> {
        self.check_range(offset, buf.len())?;
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

    fn read_ranges(&self, ranges: &[(u64, usize)]) -> Result<Vec<Bytes>, BenchError> {
        let total = ranges
            .iter()
            .try_fold(0usize, |t, &(_, len)| t.checked_add(len))
            .ok_or_else(|| self.short_read(0, usize::MAX))?;
        if self.dio_align != 0 || total < POOLED_READ_MIN {
            return ranges
                .iter()
                .map(|&(offset, len)| self.read_bytes(offset, len, ReadKind::Data))
                .collect();
        }
        // One pooled buffer for all the ranges, sliced per range.
        let mut buf = self.take_buf(total)?;
        let mut at = 0;
        for &(offset, len) in ranges {
            self.check_range(offset, len)?;
            if self.pread_full(&mut buf.as_mut_full()[at..at + len], offset)? < len {
                return Err(self.short_read(offset, len));
            }
            at += len;
        }
        buf.set_window(0, total);
        let all = buf.into_bytes();
        let mut at = 0;
        Ok(ranges
            .iter()
            .map(|&(_, len)| {
                let b = all.slice(at..at + len);
                at += len;
                b
            })
            .collect())
    }

    fn read_and_discard(&self, ranges: &[(u64, usize)]) -> Result<u64, BenchError> {
        if self.dio_align != 0 {
            // O_DIRECT needs aligned memory: read_ranges' pooled buffers,
            // reused once dropped.
            return Ok(super::discard_ranges(self.read_ranges(ranges)?));
        }
        let mut buf = DISCARD_BUFS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_else(|| vec![0u8; DISCARD_PIECE]);
        let read = self.discard_into(ranges, &mut buf);
        DISCARD_BUFS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(buf);
        read
    }

    fn read_bytes(&self, offset: u64, len: usize, _: ReadKind) -> Result<Bytes, BenchError> {
        self.check_range(offset, len)?;
        if self.dio_align != 0 {
            return Ok(self.read_direct(offset, len)?.into_bytes());
        }
        if len < POOLED_READ_MIN {
            let mut v = vec![0u8; len];
            if self.pread_full(&mut v, offset)? < len {
                return Err(self.short_read(offset, len));
            }
            return Ok(Bytes::from(v));
        }
        if self.mmap && len >= MMAP_READ_MIN {
            return Ok(Bytes::from_owner(self.map_range(offset, len)?));
        }
        // Larger reads go into a pooled, already-mapped buffer: no page
        // faults or zero-fill in steady state. For a whole 323 KB JPEG a
        // fresh zeroed vector costs as much as the copy itself.
        let mut buf = self.take_buf(len)?;
        if self.pread_full(&mut buf.as_mut_full()[..len], offset)? < len {
            return Err(self.short_read(offset, len));
        }
        buf.set_window(0, len);
        Ok(buf.into_bytes())
    }
}

/// A populated read-only file mapping; unmapped when the last `Bytes` drops.
struct MappedRange {
    ptr: std::ptr::NonNull<u8>,
    map_len: usize,
    lead: usize,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value; sharing `&[u8]`
// views across threads is sound.
unsafe impl Send for MappedRange {}
// SAFETY: as above, only shared read access is handed out.
unsafe impl Sync for MappedRange {}

impl AsRef<[u8]> for MappedRange {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: lead + len == map_len bytes are mapped readable for the
        // lifetime of self (see `LocalStorage::with_mmap` for the SIGBUS caveat).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(self.lead), self.len) }
    }
}

impl Drop for MappedRange {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping created in `map_range`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.map_len) };
    }
}
