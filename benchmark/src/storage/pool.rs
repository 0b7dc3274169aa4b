//! A pool of large read buffers. Reading a 100 MiB row group into fresh
//! anonymous memory costs a page fault and a kernel zero-fill per page, which
//! on page-cached files or loopback S3 takes longer than the copy itself.
//! Buffers handed out by [`BufferPool::take`] go back to the pool when the
//! last `Bytes` that refers to them is dropped, so later reads land in memory
//! that is already mapped (and never zeroed again). [`BufferPool::reserve`]
//! maps and faults in the buffers a run will need before it starts, so even
//! its first reads land in touched memory.
//!
//! ```text
//!  reserve(n, len) ─► n buffers mapped + touched ─► idle
//!  read_range ─► pool.take(len) ─► pread / GET body into it ─► Bytes::from_owner(PooledBuf)
//!                    ▲                                        │ last clone dropped
//!                    └────────────── PooledBuf::drop ◄────────┘
//! ```
use std::sync::{
    Arc, Mutex,
    atomic::{AtomicU64, Ordering},
};

use bytes::Bytes;

use super::AlignedBuf;

/// Default bytes of idle buffers a pool keeps (more are unmapped on return).
pub const DEFAULT_POOL_BYTES: u64 = 1 << 30;

struct Idle {
    bufs: Vec<AlignedBuf>,
    bytes: u64,
    /// Idle bytes kept at most; [`BufferPool::reserve`] raises it to hold
    /// what it reserved.
    max_bytes: u64,
}

/// What a pool did so far ([`BufferPool::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers mapped, by `take` (none idle fitted) or by `reserve`.
    pub mapped_buffers: u64,
    /// Bytes of those mappings.
    pub mapped_bytes: u64,
    /// Of those, buffers `reserve` mapped and faulted in ahead of use.
    pub reserved_buffers: u64,
    /// `take` calls served by an idle buffer (no mapping, no page fault).
    pub reused_buffers: u64,
}

#[derive(Default)]
struct Counters {
    mapped_buffers: AtomicU64,
    mapped_bytes: AtomicU64,
    reserved_buffers: AtomicU64,
    reused_buffers: AtomicU64,
}

/// Shared pool of [`AlignedBuf`]s (clones share the pool).
#[derive(Clone)]
pub struct BufferPool {
    idle: Arc<Mutex<Idle>>,
    counters: Arc<Counters>,
    huge_pages: bool,
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = self.lock();
        f.debug_struct("BufferPool")
            .field("idle_buffers", &g.bufs.len())
            .field("idle_bytes", &g.bytes)
            .field("max_idle_bytes", &g.max_bytes)
            .field("huge_pages", &self.huge_pages)
            .finish()
    }
}

impl Default for BufferPool {
    fn default() -> Self {
        Self::new(DEFAULT_POOL_BYTES)
    }
}

/// How many buffers of what size a run's reads need at once: one per fetch
/// in flight (`in_flight` = ranks × read threads × fetches per thread), each
/// as large as the largest fetch. Reads below `min_pooled` bytes do not use
/// the pool, so they need none. Pure: the sizing rule, tested apart.
pub fn reserve_plan(in_flight: u64, bytes_per_fetch: u64, min_pooled: u64) -> (usize, usize) {
    if bytes_per_fetch < min_pooled.max(1) {
        return (0, 0);
    }
    match (usize::try_from(in_flight), usize::try_from(bytes_per_fetch)) {
        (Ok(n), Ok(len)) => (n, len),
        _ => (0, 0),
    }
}

impl BufferPool {
    /// A pool keeping at most `max_idle_bytes` of idle buffers, huge pages
    /// advised on its buffers.
    pub fn new(max_idle_bytes: u64) -> Self {
        Self {
            idle: Arc::new(Mutex::new(Idle {
                bufs: Vec::new(),
                bytes: 0,
                max_bytes: max_idle_bytes,
            })),
            counters: Arc::new(Counters::default()),
            huge_pages: true,
        }
    }

    /// Whether new buffers are advised `MADV_HUGEPAGE` (see
    /// `S3Options::huge_pages` for when that pays).
    pub fn with_huge_pages(mut self, huge_pages: bool) -> Self {
        self.huge_pages = huge_pages;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        // Only Vec push/pop under the lock: never poisoned mid-update.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes of idle buffers currently held.
    pub fn idle_bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// What the pool did so far.
    pub fn stats(&self) -> PoolStats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let c = &self.counters;
        PoolStats {
            mapped_buffers: l(&c.mapped_buffers),
            mapped_bytes: l(&c.mapped_bytes),
            reserved_buffers: l(&c.reserved_buffers),
            reused_buffers: l(&c.reused_buffers),
        }
    }

    fn map(&self, len: usize) -> Option<AlignedBuf> {
        let b = AlignedBuf::with_huge_pages(len, self.huge_pages)?;
        self.counters.mapped_buffers.fetch_add(1, Ordering::Relaxed);
        self.counters
            .mapped_bytes
            .fetch_add(b.capacity() as u64, Ordering::Relaxed);
        Some(b)
    }

    /// Make sure `count` idle buffers of at least `len` bytes are ready:
    /// map the missing ones and fault in every page now, so the reads that
    /// use them take no page fault and no kernel zero-fill. The idle cap is
    /// raised to keep them. Returns the buffers mapped; `None` if mmap fails.
    pub fn reserve(&self, count: usize, len: usize) -> Option<usize> {
        let have = {
            let g = self.lock();
            g.bufs.iter().filter(|b| fits(b, len)).count()
        };
        let missing = count.saturating_sub(have);
        let mut fresh = Vec::with_capacity(missing);
        for _ in 0..missing {
            let mut b = self.map(len)?;
            b.populate();
            fresh.push(b);
        }
        self.counters
            .reserved_buffers
            .fetch_add(missing as u64, Ordering::Relaxed);
        let mut g = self.lock();
        for b in fresh {
            g.bytes += b.capacity() as u64;
            g.bufs.push(b);
        }
        g.max_bytes = g.max_bytes.max(g.bytes);
        Some(missing)
    }

    /// A buffer of at least `len` bytes (window = the whole `len`): the
    /// smallest idle one that fits without wasting more than half of it, else
    /// a new mapping. `None` if mmap fails.
    pub fn take(&self, len: usize) -> Option<PooledBuf> {
        let reused = {
            let mut g = self.lock();
            let best = g
                .bufs
                .iter()
                .enumerate()
                .filter(|(_, b)| fits(b, len))
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            best.map(|i| {
                let b = g.bufs.swap_remove(i);
                g.bytes -= b.capacity() as u64;
                b
            })
        };
        let mut buf = match reused {
            Some(b) => {
                self.counters.reused_buffers.fetch_add(1, Ordering::Relaxed);
                b
            }
            None => self.map(len)?,
        };
        buf.set_window(0, len);
        Some(PooledBuf {
            buf: Some(buf),
            pool: self.clone(),
        })
    }

    fn give_back(&self, buf: AlignedBuf) {
        let cap = buf.capacity() as u64;
        let mut g = self.lock();
        if g.bytes + cap <= g.max_bytes {
            g.bytes += cap;
            g.bufs.push(buf);
        }
        // else: dropped here, which unmaps it.
    }
}

/// Whether idle buffer `b` serves a `len`-byte read: large enough, and
/// not more than twice as large (a small read must not pin a big buffer).
fn fits(b: &AlignedBuf, len: usize) -> bool {
    b.capacity() >= len && b.capacity() / 2 <= len
}

/// A buffer borrowed from a [`BufferPool`]; returns itself on drop.
pub struct PooledBuf {
    buf: Option<AlignedBuf>,
    pool: BufferPool,
}

impl PooledBuf {
    /// Start of the underlying mapping (tests check where data landed).
    pub fn base_addr(&self) -> usize {
        self.buf.as_ref().map_or(0, AlignedBuf::base_addr)
    }

    /// The whole mapping, for reading into. Its memory is always initialised
    /// (mmap zero-fills, later uses hold old data), so no `MaybeUninit`.
    pub fn as_mut_full(&mut self) -> &mut [u8] {
        match self.buf.as_mut() {
            Some(b) => b.as_mut_full(),
            None => &mut [],
        }
    }

    /// Set the visible window `[start, start+len)`.
    pub fn set_window(&mut self, start: usize, len: usize) {
        if let Some(b) = self.buf.as_mut() {
            b.set_window(start, len);
        }
    }

    /// Freeze into `Bytes`; the buffer returns to the pool when the last
    /// clone/slice is dropped.
    pub fn into_bytes(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for PooledBuf {
    fn as_ref(&self) -> &[u8] {
        match self.buf.as_ref() {
            Some(b) => b.as_ref(),
            None => &[],
        }
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.pool.give_back(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_return_when_last_bytes_drop() {
        let pool = BufferPool::new(64 << 20);
        let mut b = pool.take(5 << 20).unwrap();
        b.as_mut_full()[..3].copy_from_slice(b"abc");
        let bytes = b.into_bytes();
        let slice = bytes.slice(1..3);
        drop(bytes);
        assert_eq!(pool.idle_bytes(), 0, "a slice still holds the buffer");
        assert_eq!(&slice[..], b"bc");
        drop(slice);
        assert_eq!(pool.idle_bytes(), 5 << 20);
        // Reused for a similar size (the old contents are visible: no zeroing).
        let again = pool.take((5 << 20) - 100).unwrap();
        assert_eq!(pool.idle_bytes(), 0);
        assert_eq!(again.as_ref().len(), (5 << 20) - 100);
        assert_eq!(&again.as_ref()[..3], b"abc");
    }

    #[test]
    fn does_not_reuse_much_larger_buffers_and_caps_idle_bytes() {
        let pool = BufferPool::new(6 << 20);
        drop(pool.take(4 << 20).unwrap());
        assert_eq!(pool.idle_bytes(), 4 << 20);
        // 1 MiB would waste 3/4 of the 4 MiB buffer: a new one is mapped.
        let small = pool.take(1 << 20).unwrap();
        assert_eq!(pool.idle_bytes(), 4 << 20);
        let big = pool.take(4 << 20).unwrap();
        assert_eq!(pool.idle_bytes(), 0);
        drop(small);
        drop(big);
        // 1 MiB + 4 MiB fit under the 6 MiB cap in either order.
        assert_eq!(pool.idle_bytes(), 5 << 20);
        let extra = pool.take(3 << 20).unwrap();
        drop(extra);
        assert!(pool.idle_bytes() <= 6 << 20);
    }

    #[test]
    fn reserve_plan_is_one_buffer_per_fetch_in_flight() {
        // 1 rank × 2 read threads × 1 fetch of a 198 MiB row group.
        assert_eq!(reserve_plan(2, 198 << 20, 1 << 20), (2, 198 << 20));
        // Fetches below the pooled size use no pool buffer.
        assert_eq!(reserve_plan(8, 4096, 1 << 20), (0, 0));
        assert_eq!(reserve_plan(0, 64 << 20, 1 << 20), (0, 64 << 20));
    }

    #[test]
    fn reserved_buffers_serve_the_first_reads_without_new_mappings() {
        let pool = BufferPool::new(1 << 20).with_huge_pages(false);
        assert_eq!(pool.reserve(2, 3 << 20), Some(2));
        // The idle cap grew to keep what was reserved.
        assert_eq!(pool.idle_bytes(), 6 << 20);
        // Reserving again maps nothing: both buffers are idle and fit.
        assert_eq!(pool.reserve(2, 3 << 20), Some(0));
        let a = pool.take(3 << 20).unwrap();
        let b = pool.take((3 << 20) - 7).unwrap();
        let s = pool.stats();
        assert_eq!(s.mapped_buffers, 2, "{s:?}");
        assert_eq!(s.reserved_buffers, 2);
        assert_eq!(s.reused_buffers, 2);
        drop((a, b));
        assert_eq!(pool.idle_bytes(), 6 << 20, "both went back");
        // A third read in flight needs a third buffer.
        let (x, y, z) = (
            pool.take(3 << 20).unwrap(),
            pool.take(3 << 20).unwrap(),
            pool.take(3 << 20).unwrap(),
        );
        assert_eq!(pool.stats().mapped_buffers, 3);
        drop((x, y, z));
        assert_eq!(pool.idle_bytes(), 6 << 20, "over the cap: unmapped");
    }
}
