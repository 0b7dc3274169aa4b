//! Errors of the benchmark library. Every variant names the file or key it is about.
use std::path::PathBuf;

/// Errors of the benchmark library.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: corrupt or unsupported {format} file: {reason}")]
    Corrupt {
        path: PathBuf,
        format: &'static str,
        reason: String,
    },
    #[error("unknown parameter '{key}'{hint}")]
    UnknownParam { key: String, hint: String },
    #[error("bad value for '{key}': {reason}")]
    BadParam { key: String, reason: String },
    /// An option, or a combination of options or configuration keys, the
    /// benchmark cannot run (a usage error: exit 2 at the CLI).
    #[error("{reason}")]
    Usage {
        /// The option or key at fault (`--accelerators`, `--division`).
        option: &'static str,
        reason: String,
    },
    /// The dataset is missing or empty, does not match its configuration,
    /// or holds files the run would overwrite.
    #[error("{0}")]
    Dataset(String),
    /// A sample, file or checkpoint larger than its format (or 64 bits)
    /// can hold.
    #[error("{0}")]
    TooLarge(String),
    /// A record, manifest or rank's results that did not encode or decode.
    #[error("{0}")]
    Encoding(String),
    /// MPI cannot run the ranks as the benchmark needs.
    #[error("{0}")]
    Mpi(String),
    /// The system refused a resource: memory, a signal handler, `/proc`.
    #[error("{0}")]
    System(String),
    /// A broken invariant of the benchmark itself: a bug to report.
    #[error("internal error: {0}")]
    Internal(String),
    /// Rank `rank` stopped because another simulated accelerator failed
    /// (the collective was aborted); the failing rank's own error is the one
    /// reported when there is one.
    #[error("aborted: another simulated accelerator failed")]
    Aborted { rank: usize },
    /// The thread of rank `rank` panicked.
    #[error("a rank thread panicked")]
    RankPanicked { rank: usize },
    /// The memory guard refused the run (a usage error: exit 2 at the CLI).
    #[error("{message}")]
    MemoryGuard {
        /// Estimated reader memory, bytes.
        estimate: u64,
        /// What the run may use (a share of MemAvailable), bytes.
        budget: u64,
        /// The refusal with the largest safe settings.
        message: String,
    },
    /// A checkpoint layout that the model's TP×PP×DP cannot take.
    #[error("{model} on {ranks} ranks: {reason}")]
    BadLayout {
        model: &'static str,
        ranks: usize,
        reason: String,
    },
    /// The file system under `path` has less free space than the run
    /// writes (checked before writing anything).
    #[error(
        "{}: not enough free space: {what} need {needed} bytes ({:.2} GiB), \
         {available} bytes ({:.2} GiB) are available ({hint})",
        path.display(),
        *needed as f64 / 1073741824.0,
        *available as f64 / 1073741824.0
    )]
    NoSpace {
        path: PathBuf,
        /// What would be written: "the checkpoints", "the dataset".
        what: &'static str,
        needed: u64,
        available: u64,
        /// How to need less.
        hint: String,
    },
    /// The checkpoint folder holds files storprof did not write (nothing is removed).
    #[error(
        "{}: the folder holds {count} entries storprof did not write (e.g. {example}); \
         choose an empty or new folder (--force removes only storprof's own checkpoint files)",
        path.display()
    )]
    ForeignFiles {
        path: PathBuf,
        count: usize,
        example: String,
    },
    /// The checkpoint folder holds an earlier storprof checkpoint run.
    #[error(
        "{}: the folder holds {files} files of an earlier storprof checkpoint run; \
         pass --force to remove them first",
        path.display()
    )]
    ExistingCheckpoint { path: PathBuf, files: usize },
}

impl BenchError {
    /// A usage error about `option`.
    pub fn usage(option: &'static str, reason: String) -> Self {
        Self::Usage { option, reason }
    }

    /// A usage error: the command line or configuration asked for something
    /// the benchmark cannot do (the CLI exits 2 on these).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::UnknownParam { .. }
                | Self::BadParam { .. }
                | Self::Usage { .. }
                | Self::MemoryGuard { .. }
                | Self::BadLayout { .. }
        )
    }
}
