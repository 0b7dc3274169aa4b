//! What a checkpoint run writes and where, settled before anything is
//! written: the options checked, the layout's shard files per rank
//! (scaled), their manifest, and the folder made ready for them.
use std::path::Path;

use super::io::{self, Manifest};
use super::layout::{Layout, scaled};
use super::{CheckpointOptions, PlannedFile, checkpoint_dir_name, io_err};
use crate::error::BenchError;

/// What a run writes, decided before anything is.
pub(super) struct Plan {
    pub(super) layout: Layout,
    /// Per rank, its shard files (scaled).
    pub(super) files: Vec<Vec<PlannedFile>>,
    /// One checkpoint's bytes, and all the checkpoints'.
    pub(super) checkpoint_bytes: u64,
    pub(super) needed: u64,
    pub(super) manifest: Manifest,
}

impl Plan {
    pub(super) fn new(opts: &CheckpointOptions, ranks: usize) -> Result<Self, BenchError> {
        validate(opts)?;
        let layout = Layout::new(opts.model, opts.subset, opts.ranks.or(Some(ranks)))?;
        if layout.ranks != ranks {
            return Err(BenchError::BadLayout {
                model: layout.spec.name,
                ranks,
                reason: format!("the layout needs {} ranks", layout.ranks),
            });
        }
        let files = plan_files(&layout, opts.scale);
        let checkpoint_bytes = files
            .iter()
            .flatten()
            .try_fold(0u64, |acc, f| acc.checked_add(f.bytes))
            .ok_or_else(|| BenchError::TooLarge("checkpoint size overflows 64 bits".into()))?;
        let needed = checkpoint_bytes
            .checked_mul(u64::from(opts.num_checkpoints_write))
            .ok_or_else(|| {
                BenchError::TooLarge("total checkpoint bytes overflow 64 bits".into())
            })?;
        let dirs: Vec<String> = (1..=opts.num_checkpoints_write)
            .map(checkpoint_dir_name)
            .collect();
        let manifest = Manifest {
            writer: Manifest::WRITER.into(),
            model: layout.spec.name.into(),
            files: dirs
                .iter()
                .flat_map(|d| {
                    files
                        .iter()
                        .flatten()
                        .map(move |f| format!("{d}/{}", f.name))
                })
                .collect(),
            dirs,
        };
        Ok(Plan {
            layout,
            files,
            checkpoint_bytes,
            needed,
            manifest,
        })
    }
}

/// `MemTotal` of /proc/meminfo, bytes.
pub(super) fn mem_total() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb.saturating_mul(1024))
}

/// Check the options that do not depend on the file system.
fn validate(opts: &CheckpointOptions) -> Result<(), BenchError> {
    if !opts.scale.is_finite() || opts.scale < 1.0 {
        return Err(BenchError::BadParam {
            key: "--scale".into(),
            reason: format!(
                "{} is not a number ≥ 1 (sizes are divided by it)",
                opts.scale
            ),
        });
    }
    if opts.block_size == 0 || !opts.block_size.is_multiple_of(io::DIRECT_ALIGN) {
        return Err(BenchError::BadParam {
            key: "--block-size".into(),
            reason: format!(
                "{} bytes is not a positive multiple of {}",
                opts.block_size,
                io::DIRECT_ALIGN
            ),
        });
    }
    if opts.odirect && is_s3(&opts.folder) {
        return Err(BenchError::BadParam {
            key: "--odirect".into(),
            reason: "O_DIRECT applies to local files, not to an s3:// checkpoint folder".into(),
        });
    }
    if opts.num_checkpoints_read > opts.num_checkpoints_write {
        return Err(BenchError::BadParam {
            key: "--num-checkpoints-read".into(),
            reason: format!(
                "{} checkpoints cannot be read back when {} are written",
                opts.num_checkpoints_read, opts.num_checkpoints_write
            ),
        });
    }
    Ok(())
}

fn is_s3(folder: &Path) -> bool {
    folder.to_string_lossy().starts_with("s3://")
}

/// Make `folder` ready: created if missing; refused if it holds files
/// storprof did not write, or an earlier run without `force` (which then
/// removes only that run's listed files); refused if the file system lacks
/// `needed` bytes. Writes the new run's manifest.
pub(super) fn prepare_folder(
    folder: &Path,
    force: bool,
    needed: u64,
    manifest: &Manifest,
) -> Result<(), BenchError> {
    std::fs::create_dir_all(folder).map_err(io_err(folder))?;
    if let Some(old) = Manifest::read(folder)? {
        if !force {
            return Err(BenchError::ExistingCheckpoint {
                path: folder.to_path_buf(),
                files: old.files.len(),
            });
        }
        old.remove_listed(folder)?;
    }
    let mut entries: Vec<String> = std::fs::read_dir(folder)
        .map_err(io_err(folder))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    // Foreign entries are never removed; without --force any refuses the
    // run, with it only those a checkpoint would write into do.
    let colliding: Vec<&String> = entries
        .iter()
        .filter(|e| !force || manifest.dirs.contains(e))
        .collect();
    if let Some(first) = colliding.first() {
        return Err(BenchError::ForeignFiles {
            path: folder.to_path_buf(),
            count: colliding.len(),
            example: (*first).clone(),
        });
    }
    let available = io::free_bytes(folder)?;
    if needed > available {
        return Err(BenchError::NoSpace {
            path: folder.to_path_buf(),
            what: "the checkpoints",
            needed,
            available,
            hint: "lower --num-checkpoints-write or raise --scale".to_string(),
        });
    }
    manifest.write(folder)
}

/// Each rank's shard files, scaled.
fn plan_files(layout: &Layout, scale: f64) -> Vec<Vec<PlannedFile>> {
    (0..layout.ranks)
        .map(|r| {
            layout
                .rank_files(r)
                .into_iter()
                .map(|f| PlannedFile {
                    bytes: scaled(f.bytes, scale),
                    name: f.name,
                })
                .collect()
        })
        .collect()
}
