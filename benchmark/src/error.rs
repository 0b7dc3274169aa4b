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
    #[error("{0}")]
    Config(String),
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
}
