//! A pool of large read buffers. Reading a 100 MiB row group into fresh
//! anonymous memory costs a page fault and a kernel zero-fill per page, which
//! on page-cached files takes longer than the copy itself. Buffers handed out
//! by [`BufferPool::take`] go back to the pool when the last `Bytes` that
//! refers to them is dropped, so steady-state reads land in memory that is
//! already mapped (and never zeroed again).
//!
//! ```text
//!  read_range ─► pool.take(len) ─► pread into it ─► Bytes::from_owner(PooledBuf)
//!                    ▲                                        │ last clone dropped
//!                    └────────────── PooledBuf::drop ◄────────┘
//! ```
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::AlignedBuf;

/// Default bytes of idle buffers a pool keeps (more are unmapped on return).
pub const DEFAULT_POOL_BYTES: u64 = 1 << 30;

struct Idle {
    bufs: Vec<AlignedBuf>,
    bytes: u64,
}

/// Shared pool of [`AlignedBuf`]s (clones share the pool).
#[derive(Clone)]
pub struct BufferPool {
    idle: Arc<Mutex<Idle>>,
    max_idle_bytes: u64,
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = self.lock();
        f.debug_struct("BufferPool")
            .field("idle_buffers", &g.bufs.len())
            .field("idle_bytes", &g.bytes)
            .field("max_idle_bytes", &self.max_idle_bytes)
            .finish()
    }
}

impl Default for BufferPool {
    fn default() -> Self {
        Self::new(DEFAULT_POOL_BYTES)
    }
}

impl BufferPool {
    /// A pool keeping at most `max_idle_bytes` of idle buffers.
    pub fn new(max_idle_bytes: u64) -> Self {
        Self {
            idle: Arc::new(Mutex::new(Idle {
                bufs: Vec::new(),
                bytes: 0,
            })),
            max_idle_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        // Only Vec push/pop under the lock: never poisoned mid-update.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes of idle buffers currently held.
    pub fn idle_bytes(&self) -> u64 {
        self.lock().bytes
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
                .filter(|(_, b)| b.capacity() >= len && b.capacity() / 2 <= len)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            best.map(|i| {
                let b = g.bufs.swap_remove(i);
                g.bytes -= b.capacity() as u64;
                b
            })
        };
        let mut buf = match reused {
            Some(b) => b,
            None => AlignedBuf::new(len)?,
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
        if g.bytes + cap <= self.max_idle_bytes {
            g.bytes += cap;
            g.bufs.push(buf);
        }
        // else: dropped here, which unmaps it.
    }
}

/// A buffer borrowed from a [`BufferPool`]; returns itself on drop.
pub struct PooledBuf {
    buf: Option<AlignedBuf>,
    pool: BufferPool,
}

impl PooledBuf {
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
#[allow(clippy::unwrap_used)]
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
}
