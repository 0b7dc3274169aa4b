//! The timed phases of a checkpoint run: every local rank writes (or reads
//! back) its shard files of one checkpoint in a thread of its own, to a
//! local folder or under an object-store prefix ([`Target`]).
use std::path::Path;
use std::time::Instant;

use super::io::{self, BlockSource, IoBytes, WriteMode};
use super::s3io::S3Folder;
use super::summary::RankIo;
use super::{PlannedFile, checkpoint_dir_name, io_err};
use crate::error::BenchError;
use crate::storage::AlignedBuf;

/// Where the checkpoints go: each is a directory of the folder, or a
/// prefix of the object store's.
#[derive(Clone, Copy)]
pub(super) enum Target<'a> {
    Folder(&'a Path),
    Objects(&'a S3Folder),
}

impl Target<'_> {
    /// Makes checkpoint `k`'s directory (an object store needs none).
    pub(super) fn create(&self, k: u32) -> Result<(), BenchError> {
        if let Target::Folder(folder) = self {
            let dir = folder.join(checkpoint_dir_name(k));
            std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        }
        Ok(())
    }

    /// Writes `file` of checkpoint `k` from `src`.
    fn write(
        &self,
        k: u32,
        file: &PlannedFile,
        src: &mut BlockSource,
        mode: WriteMode,
    ) -> Result<IoBytes, BenchError> {
        match self {
            Target::Folder(folder) => {
                let path = folder.join(checkpoint_dir_name(k)).join(&file.name);
                io::write_file(&path, file.bytes, src, mode)
            }
            Target::Objects(s3) => s3.write_object(
                &format!("{}/{}", checkpoint_dir_name(k), file.name),
                file.bytes,
                src,
                mode.block,
            ),
        }
    }

    /// Reads `file` of checkpoint `k` to its end through `buf`; its bytes.
    fn read(
        &self,
        k: u32,
        file: &PlannedFile,
        buf: &mut AlignedBuf,
        odirect: bool,
    ) -> Result<u64, BenchError> {
        match self {
            Target::Folder(folder) => {
                let path = folder.join(checkpoint_dir_name(k)).join(&file.name);
                io::read_file(&path, buf, odirect)
            }
            Target::Objects(s3) => {
                s3.read_object(&format!("{}/{}", checkpoint_dir_name(k), file.name), buf)
            }
        }
    }

    /// With `mode.fsync`, makes checkpoint `k`'s directory entries durable
    /// (an object store has nothing to fsync: `mode.fsync` is off there).
    fn sync_dir(&self, k: u32, mode: WriteMode) -> Result<u64, BenchError> {
        match self {
            Target::Folder(folder) if mode.fsync => {
                io::fsync_dir(&folder.join(checkpoint_dir_name(k)))?;
                Ok(1)
            }
            _ => Ok(0),
        }
    }

    /// With `mode.fsync`, makes the new checkpoint directories' own
    /// entries in the folder durable.
    pub(super) fn sync_folder(&self, mode: WriteMode) -> Result<(), BenchError> {
        match self {
            Target::Folder(folder) if mode.fsync => io::fsync_dir(folder),
            _ => Ok(()),
        }
    }
}

/// Every local rank (`local`, with its source in `sources`) writes its
/// files of checkpoint `k` (`plans[rank]`), each in a thread; their
/// timings.
pub(super) fn save(
    target: Target<'_>,
    k: u32,
    plans: &[Vec<PlannedFile>],
    local: &[usize],
    sources: &mut [BlockSource],
    mode: WriteMode,
) -> Result<Vec<RankIo>, BenchError> {
    on_every_rank(local, sources, |rank, src| {
        let mut total = IoBytes::default();
        for f in &plans[rank] {
            total.add(target.write(k, f, src, mode)?);
        }
        total.fsyncs += target.sync_dir(k, mode)?;
        Ok(total)
    })
}

/// Every local rank reads its files of checkpoint `k` back through its
/// buffer in `buffers`, each in a thread; their timings.
pub(super) fn load(
    target: Target<'_>,
    k: u32,
    plans: &[Vec<PlannedFile>],
    local: &[usize],
    buffers: &mut [AlignedBuf],
    odirect: bool,
) -> Result<Vec<RankIo>, BenchError> {
    on_every_rank(local, buffers, |rank, buf| {
        let mut total = IoBytes::default();
        for f in &plans[rank] {
            total.add(IoBytes {
                bytes: target.read(k, f, buf, odirect)?,
                files: 1,
                ..IoBytes::default()
            });
        }
        Ok(total)
    })
}

/// Runs `work` for every local rank in a thread of its own, with the
/// rank's own state from `states` (in `local`'s order), and times it; the
/// first error (a panicked rank's too) ends the phase.
fn on_every_rank<S: Send>(
    local: &[usize],
    states: &mut [S],
    work: impl Fn(usize, &mut S) -> Result<IoBytes, BenchError> + Sync,
) -> Result<Vec<RankIo>, BenchError> {
    let work = &work;
    std::thread::scope(|s| {
        let handles: Vec<_> = local
            .iter()
            .zip(states.iter_mut())
            .map(|(&rank, state)| {
                s.spawn(move || -> Result<RankIo, BenchError> {
                    let t = Instant::now();
                    let io = work(rank, state)?;
                    Ok(RankIo {
                        rank,
                        seconds: t.elapsed().as_secs_f64(),
                        io,
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| BenchError::RankPanicked { rank: 0 })?)
            .collect()
    })
}
