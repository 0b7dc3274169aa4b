//! Checkpoints saved during `storprof bench` training (DLIO's
//! `workflow.checkpoint`), written with the same file writer as
//! `storprof checkpoint` ([`crate::storage::checkpoint_write::write_file`]).
//!
//! When (DLIO `main.py`): with `checkpoint.steps_between_checkpoints` N > 0,
//! after every step whose number within the epoch is a multiple of N (the
//! count restarts each epoch); otherwise after the epochs
//! `checkpoint_after_epoch`, `+ epochs_between_checkpoints`, ... What
//! (DLIO `base_checkpointing.py` for a model without transformer layers):
//! one model-state file of `model.model_size` bytes per writing rank,
//! `<checkpoint_folder>/global_epoch<e>_step<s>/model_states-<rank>.pt`;
//! `checkpoint.type` `rank_zero` (DLIO's default) writes rank 0's only,
//! `all_ranks` every rank's.
use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::storage::checkpoint_write::{self as io, BlockSource, IoBytes, WriteMode};

/// When checkpoints are saved during training.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointSchedule {
    /// After epochs `after_epoch`, `after_epoch + between`, ...
    Epochs { after_epoch: u32, between: u32 },
    /// After steps `every`, `2 × every`, ... of each epoch.
    Steps { every: u64 },
}

impl CheckpointSchedule {
    /// From DLIO's keys. DLIO takes any negative `steps_between_checkpoints`
    /// as "by epochs" (its default is -1); 0 would never match a step (DLIO
    /// then silently saves nothing), and 0 for either epoch key would never
    /// match an epoch or repeat one: those are refused here.
    pub fn from_keys(
        checkpoint_after_epoch: u64,
        epochs_between_checkpoints: u64,
        steps_between_checkpoints: i64,
    ) -> Result<Self, BenchError> {
        let bad = |key: &str, reason: String| BenchError::BadParam {
            key: key.into(),
            reason,
        };
        if steps_between_checkpoints == 0 {
            return Err(bad(
                "checkpoint.steps_between_checkpoints",
                "0 never matches a step (no checkpoint would be saved); use N ≥ 1, or -1 to \
                 checkpoint by epochs"
                    .into(),
            ));
        }
        if steps_between_checkpoints > 0 {
            return Ok(CheckpointSchedule::Steps {
                every: steps_between_checkpoints.unsigned_abs(),
            });
        }
        let after_epoch = u32::try_from(checkpoint_after_epoch)
            .ok()
            .filter(|&e| e >= 1)
            .ok_or_else(|| {
                bad(
                    "checkpoint.checkpoint_after_epoch",
                    format!("{checkpoint_after_epoch}: epochs are numbered from 1"),
                )
            })?;
        let between = u32::try_from(epochs_between_checkpoints)
            .ok()
            .filter(|&e| e >= 1)
            .ok_or_else(|| {
                bad(
                    "checkpoint.epochs_between_checkpoints",
                    format!("{epochs_between_checkpoints}: must be at least 1"),
                )
            })?;
        Ok(CheckpointSchedule::Epochs {
            after_epoch,
            between,
        })
    }

    /// A checkpoint follows step `step` (1-based within its epoch).
    pub fn after_step(&self, step: u64) -> bool {
        match *self {
            CheckpointSchedule::Steps { every } => step > 0 && step.is_multiple_of(every),
            CheckpointSchedule::Epochs { .. } => false,
        }
    }

    /// A checkpoint follows epoch `epoch` (1-based).
    pub fn after_epoch(&self, epoch: u32) -> bool {
        match *self {
            CheckpointSchedule::Epochs {
                after_epoch,
                between,
            } => epoch >= after_epoch && (epoch - after_epoch).is_multiple_of(between),
            CheckpointSchedule::Steps { .. } => false,
        }
    }
}

/// Which ranks write (`checkpoint.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointWriters {
    /// Rank 0 only (DLIO's default).
    RankZero,
    /// Every rank.
    AllRanks,
}

impl CheckpointWriters {
    pub fn from_key(value: &str) -> Result<Self, BenchError> {
        match value.to_ascii_lowercase().as_str() {
            "rank_zero" => Ok(CheckpointWriters::RankZero),
            "all_ranks" => Ok(CheckpointWriters::AllRanks),
            other => Err(BenchError::BadParam {
                key: "checkpoint.type".into(),
                reason: format!("'{other}': expected rank_zero or all_ranks"),
            }),
        }
    }
}

/// Checkpointing during training; options with their defaults in brackets.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TrainingCheckpoints {
    /// `checkpoint.checkpoint_folder` [./checkpoints].
    pub folder: PathBuf,
    pub schedule: CheckpointSchedule,
    /// Bytes of one rank's model state (`model.model_size_bytes`, else
    /// `model.model_size`) [10240, DLIO's default].
    pub model_bytes: u64,
    pub writers: CheckpointWriters,
    /// `checkpoint.fsync` [true]: fsync each file and its directory.
    pub fsync: bool,
    /// Bytes per write call [32 MiB, as `storprof checkpoint`].
    pub block_size: usize,
}

impl TrainingCheckpoints {
    /// Whether `rank` writes files.
    pub fn writes(&self, rank: usize) -> bool {
        rank == 0 || self.writers == CheckpointWriters::AllRanks
    }

    /// Bytes one checkpoint is, over `comm_size` ranks.
    pub fn checkpoint_bytes(&self, comm_size: usize) -> u64 {
        match self.writers {
            CheckpointWriters::RankZero => self.model_bytes,
            CheckpointWriters::AllRanks => self.model_bytes.saturating_mul(comm_size as u64),
        }
    }

    fn block(&self) -> usize {
        let model = usize::try_from(self.model_bytes).unwrap_or(usize::MAX);
        self.block_size
            .min(model.max(1))
            .next_multiple_of(io::DIRECT_ALIGN)
    }

    /// The content source of `rank`, made (and its memory touched) before
    /// training so no checkpoint pays for it; `None` for a rank that does not write.
    pub fn source(&self, rank: usize) -> Result<Option<BlockSource>, BenchError> {
        if !self.writes(rank) {
            return Ok(None);
        }
        BlockSource::new(self.block(), 2, 0x7a1_c4e0 ^ ((rank as u64) << 20)).map(Some)
    }

    /// Directory name of the checkpoint after `step` of `epoch` (DLIO's).
    pub fn dir_name(epoch: u32, step: u64) -> String {
        format!("global_epoch{epoch}_step{step}")
    }

    /// The file `rank` writes for that checkpoint.
    pub fn file_path(&self, rank: usize, epoch: u32, step: u64) -> PathBuf {
        self.folder
            .join(Self::dir_name(epoch, step))
            .join(format!("model_states-{rank}.pt"))
    }

    /// Save `rank`'s part of the checkpoint after `step` of `epoch`.
    pub fn save(
        &self,
        rank: usize,
        epoch: u32,
        step: u64,
        source: Option<&mut BlockSource>,
    ) -> Result<IoBytes, BenchError> {
        let Some(src) = source else {
            return Ok(IoBytes::default());
        };
        let path = self.file_path(rank, epoch, step);
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(|source| BenchError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let mode = WriteMode {
            block: self.block(),
            odirect: false,
            fsync: self.fsync,
        };
        let mut written = io::write_file(&path, self.model_bytes, src, mode)?;
        if self.fsync {
            io::fsync_dir(dir)?;
            written.fsyncs += 1;
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_schedule_matches_dlio() {
        // unet3d: checkpoint_after_epoch 5, epochs_between_checkpoints 2, 5 epochs → epoch 5 only.
        let s = CheckpointSchedule::from_keys(5, 2, -1).unwrap();
        let hits: Vec<u32> = (1..=9).filter(|&e| s.after_epoch(e)).collect();
        assert_eq!(hits, vec![5, 7, 9]);
        assert!(!s.after_step(1));
        // DLIO's defaults (1, 1): every epoch.
        let every = CheckpointSchedule::from_keys(1, 1, -1).unwrap();
        assert!((1..=4).all(|e| every.after_epoch(e)));
        let s = CheckpointSchedule::from_keys(2, 3, -7).unwrap();
        let hits: Vec<u32> = (1..=10).filter(|&e| s.after_epoch(e)).collect();
        assert_eq!(hits, vec![2, 5, 8]);
    }

    #[test]
    fn step_schedule_restarts_each_epoch() {
        let s = CheckpointSchedule::from_keys(5, 2, 3).unwrap();
        assert_eq!(s, CheckpointSchedule::Steps { every: 3 });
        let hits: Vec<u64> = (1..=10).filter(|&st| s.after_step(st)).collect();
        assert_eq!(hits, vec![3, 6, 9]);
        // Step mode never checkpoints at an epoch's end.
        assert!(!(1..=10).any(|e| s.after_epoch(e)));
    }

    #[test]
    fn nonsense_is_refused() {
        for (a, b, s, key) in [
            (1, 1, 0, "checkpoint.steps_between_checkpoints"),
            (0, 1, -1, "checkpoint.checkpoint_after_epoch"),
            (1, 0, -1, "checkpoint.epochs_between_checkpoints"),
            (u64::MAX, 1, -1, "checkpoint.checkpoint_after_epoch"),
        ] {
            match CheckpointSchedule::from_keys(a, b, s) {
                Err(BenchError::BadParam { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{a} {b} {s}: {other:?}"),
            }
        }
        assert!(CheckpointWriters::from_key("everyone").is_err());
        assert_eq!(
            CheckpointWriters::from_key("ALL_RANKS").unwrap(),
            CheckpointWriters::AllRanks
        );
    }

    #[test]
    fn rank_zero_writes_one_file_of_the_model_size() {
        let dir = tempfile::tempdir().unwrap();
        let c = TrainingCheckpoints {
            folder: dir.path().join("ck"),
            schedule: CheckpointSchedule::Epochs {
                after_epoch: 1,
                between: 1,
            },
            model_bytes: 100_001,
            writers: CheckpointWriters::RankZero,
            fsync: true,
            block_size: 32 << 20,
        };
        let mut s0 = c.source(0).unwrap();
        assert!(c.source(1).unwrap().is_none());
        let w = c.save(0, 2, 7, s0.as_mut()).unwrap();
        assert_eq!((w.bytes, w.files, w.fsyncs), (100_001, 1, 2));
        assert_eq!(c.save(1, 2, 7, None).unwrap(), IoBytes::default());
        let f = dir.path().join("ck/global_epoch2_step7/model_states-0.pt");
        assert_eq!(std::fs::metadata(f).unwrap().len(), 100_001);
        assert_eq!(c.checkpoint_bytes(8), 100_001);
        let all = TrainingCheckpoints {
            writers: CheckpointWriters::AllRanks,
            ..c
        };
        assert_eq!(all.checkpoint_bytes(8), 800_008);
    }
}
