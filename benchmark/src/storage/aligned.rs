//! Page-aligned anonymous-memory buffers: O_DIRECT needs aligned memory, and
//! large reads into fresh memory are dominated by page faults unless the
//! memory uses transparent huge pages (`MADV_HUGEPAGE`).
use std::ptr::NonNull;

/// A zero-initialised, 2 MiB-aligned-when-large, mmap'd byte buffer.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    map_len: usize,
    len: usize,
    /// Start of the useful window (e.g. O_DIRECT reads start at an aligned
    /// offset before the requested one).
    start: usize,
}

// SAFETY: the buffer is exclusively owned memory; no interior aliasing.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

const HUGE: usize = 2 << 20;

impl AlignedBuf {
    /// Allocate `len` bytes (at least one page), huge pages advised when
    /// large. Returns `None` if mmap fails.
    pub fn new(len: usize) -> Option<Self> {
        Self::with_huge_pages(len, true)
    }

    /// Allocate `len` bytes (at least one page); `huge_pages` advises
    /// `MADV_HUGEPAGE` on mappings of 2 MiB or more. Returns `None` if mmap
    /// fails.
    pub fn with_huge_pages(len: usize, huge_pages: bool) -> Option<Self> {
        let map_len = len.max(1).checked_next_multiple_of(4096)?;
        // SAFETY: anonymous private mapping, no file; arguments are valid.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        if huge_pages && map_len >= HUGE {
            // SAFETY: advising our own fresh mapping; failure is harmless.
            unsafe { libc::madvise(p, map_len, libc::MADV_HUGEPAGE) };
        }
        Some(Self {
            ptr: NonNull::new(p.cast())?,
            map_len,
            len,
            start: 0,
        })
    }

    /// Fault in every page of the mapping now (zero-filled by the kernel),
    /// so later writes into it take no page fault: one
    /// `MADV_POPULATE_WRITE` (Linux 5.14+), else a write to every page.
    pub fn populate(&mut self) {
        // SAFETY: advising our own mapping of exactly map_len bytes.
        let r = unsafe {
            libc::madvise(
                self.ptr.as_ptr().cast(),
                self.map_len,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if r != 0 {
            for off in (0..self.map_len).step_by(4096) {
                // SAFETY: off < map_len, inside our uniquely owned mapping;
                // volatile so the store of the byte already there is kept.
                unsafe {
                    let p = self.ptr.as_ptr().add(off);
                    p.write_volatile(p.read_volatile());
                }
            }
        }
    }

    /// Start of the mapping (tests check that data landed in a given buffer).
    pub fn base_addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Capacity of the mapping.
    pub fn capacity(&self) -> usize {
        self.map_len
    }

    /// Whole mapping, mutable (for reads).
    pub fn as_mut_full(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for map_len bytes and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.map_len) }
    }

    /// Set the visible window `[start, start+len)` within the mapping.
    pub fn set_window(&mut self, start: usize, len: usize) {
        let start = start.min(self.map_len);
        self.start = start;
        self.len = len.min(self.map_len - start);
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: start+len <= map_len (set_window clamps), memory is initialised (zeroed by mmap).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(self.start), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping we created.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.map_len) };
    }
}
