//! The checkpoint writers' file output, shared by `storprof checkpoint` and
//! the checkpoints `storprof bench` saves during training: a fast block
//! source for shard content, and sequential block writes (buffered or
//! O_DIRECT) with fsync of each file and directory.
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use super::AlignedBuf;
use crate::error::BenchError;

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
    move |source| BenchError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// O_DIRECT offsets and lengths are multiples of this (the page size, which
/// every local file system here accepts).
pub const DIRECT_ALIGN: usize = 4096;

/// Shard content: a few random blocks filled once, each handed out again
/// with a fresh 8-byte stamp at the start of every 4 KiB page, so no two
/// pages written are equal (nothing for dedup or compression to find)
/// while producing a block costs one store per page.
pub struct BlockSource {
    pool: Vec<AlignedBuf>,
    next: usize,
    stamp: u64,
}

impl BlockSource {
    /// `pool_blocks` blocks of `block` bytes of xorshift output from `seed`,
    /// in base pages (see [`BlockSource::with_huge_pages`]).
    pub fn new(block: usize, pool_blocks: usize, seed: u64) -> Result<Self, BenchError> {
        Self::with_huge_pages(block, pool_blocks, seed, false)
    }

    /// [`BlockSource::new`] with the blocks in transparent huge pages when
    /// `huge_pages`. O_DIRECT writes pin the source pages (fewer with huge
    /// pages); buffered writes copy them into the page cache, and that copy
    /// ran slower from huge-page sources in a multi-threaded writer here
    /// (README, "Checkpointing against fio").
    pub fn with_huge_pages(
        block: usize,
        pool_blocks: usize,
        seed: u64,
        huge_pages: bool,
    ) -> Result<Self, BenchError> {
        let mut state = seed | 1;
        let mut pool = Vec::with_capacity(pool_blocks.max(1));
        for _ in 0..pool_blocks.max(1) {
            let mut buf = AlignedBuf::with_huge_pages(block, huge_pages).ok_or_else(|| {
                BenchError::System(format!("cannot map a {block}-byte write buffer"))
            })?;
            for chunk in buf.as_mut_full()[..block].chunks_mut(8) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let bytes = state.to_le_bytes();
                chunk.copy_from_slice(&bytes[..chunk.len()]);
            }
            pool.push(buf);
        }
        Ok(Self {
            pool,
            next: 0,
            stamp: seed.rotate_left(32),
        })
    }

    /// The next block of content (the whole block; callers take a prefix).
    pub fn next_block(&mut self) -> &[u8] {
        let i = self.next;
        self.next = (self.next + 1) % self.pool.len();
        self.stamp = self.stamp.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let stamp = self.stamp;
        let buf = &mut self.pool[i];
        let full = buf.as_mut_full();
        for (page, chunk) in full.chunks_mut(DIRECT_ALIGN).enumerate() {
            if chunk.len() >= 8 {
                chunk[..8].copy_from_slice(&(stamp ^ page as u64).to_le_bytes());
            }
        }
        self.pool[i].as_ref()
    }

    /// Bytes per second this source produces on one thread, measured for
    /// about `duration` (touching each block so nothing is optimized away).
    pub fn measure(block: usize, duration: Duration, huge_pages: bool) -> Result<f64, BenchError> {
        let mut src = BlockSource::with_huge_pages(block, 2, 0x5eed, huge_pages)?;
        let start = Instant::now();
        let mut bytes = 0u64;
        let mut check = 0u8;
        while start.elapsed() < duration {
            let b = src.next_block();
            check ^= b[b.len() / 2];
            bytes = bytes.saturating_add(b.len() as u64);
        }
        std::hint::black_box(check);
        Ok(bytes as f64 / start.elapsed().as_secs_f64().max(1e-9))
    }
}

/// How shard files are written.
#[derive(Clone, Copy, Debug)]
pub struct WriteMode {
    /// Bytes per write call (a multiple of [`DIRECT_ALIGN`]).
    pub block: usize,
    pub odirect: bool,
    /// fsync each file (and each checkpoint directory) before the save counts as done.
    pub fsync: bool,
}

/// Bytes one file (or several) took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IoBytes {
    /// Bytes handed to write(2) / returned by read(2).
    pub bytes: u64,
    /// Bytes of files fsynced.
    pub fsynced: u64,
    pub files: u64,
    pub fsyncs: u64,
}

impl IoBytes {
    pub fn add(&mut self, other: IoBytes) {
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.fsynced = self.fsynced.saturating_add(other.fsynced);
        self.files = self.files.saturating_add(other.files);
        self.fsyncs = self.fsyncs.saturating_add(other.fsyncs);
    }
}

/// Write `len` bytes of `src`'s content to a new `path` in `mode`.
pub fn write_file(
    path: &Path,
    len: u64,
    src: &mut BlockSource,
    mode: WriteMode,
) -> Result<IoBytes, BenchError> {
    let mut opts = OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    if mode.odirect {
        opts.custom_flags(libc::O_DIRECT);
    }
    let file = opts.open(path).map_err(io_err(path))?;
    // O_DIRECT writes whole aligned blocks; the unaligned tail goes through
    // the page cache (a second, buffered handle) and the fsync below.
    let direct_len = if mode.odirect {
        len - len % DIRECT_ALIGN as u64
    } else {
        len
    };
    let mut offset = 0u64;
    while offset < direct_len {
        let n = usize::try_from((direct_len - offset).min(mode.block as u64)).unwrap_or(mode.block);
        let block = src.next_block();
        file.write_all_at(&block[..n], offset)
            .map_err(io_err(path))?;
        offset += n as u64;
    }
    if direct_len < len {
        let tail = usize::try_from(len - direct_len).unwrap_or(0);
        let buffered = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io_err(path))?;
        let block = src.next_block();
        buffered
            .write_all_at(&block[..tail], direct_len)
            .map_err(io_err(path))?;
    }
    let mut io = IoBytes {
        bytes: len,
        files: 1,
        ..IoBytes::default()
    };
    if mode.fsync {
        file.sync_all().map_err(io_err(path))?;
        io.fsynced = len;
        io.fsyncs = 1;
    }
    Ok(io)
}

/// fsync a directory so the names of the files just written are durable.
pub fn fsync_dir(dir: &Path) -> Result<(), BenchError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_source_pages_differ_between_blocks() {
        let mut src = BlockSource::new(3 * DIRECT_ALIGN, 1, 7).unwrap();
        let a = src.next_block().to_vec();
        let b = src.next_block().to_vec();
        assert_eq!(a.len(), 3 * DIRECT_ALIGN);
        for page in 0..3 {
            let r = page * DIRECT_ALIGN..(page + 1) * DIRECT_ALIGN;
            assert_ne!(a[r.clone()], b[r]);
        }
        // Pages of one block differ from each other too.
        assert_ne!(a[..DIRECT_ALIGN], a[DIRECT_ALIGN..2 * DIRECT_ALIGN]);
    }
}
