//! `storprof record`: attach the probes, run or attach to the workload,
//! drain and symbolize, and write the session directory.
//!
//! Placeholder: the interface the rest of the crate (e.g. `diagnose`) calls.
use std::path::PathBuf;

/// Options of one recording. Defaults are documented per field.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RecordOptions {
    /// Command to start and follow (with all its descendants). Empty: attach to `pids`.
    pub command: Vec<String>,
    /// Running processes to trace (with descendants forked after attach).
    pub pids: Vec<u32>,
    /// Stop after this long. Default: until the command exits (or Ctrl-C).
    pub duration: Option<std::time::Duration>,
    /// CPU sampling frequency. Default 99 Hz.
    pub freq_hz: u64,
    /// Session directory to write. Default: `storprof-<timestamp>` in the cwd.
    pub output: PathBuf,
    /// Run the command as root even under sudo. Default false: run it as SUDO_UID/SUDO_GID.
    pub as_root: bool,
}

impl Default for RecordOptions {
    fn default() -> Self {
        Self {
            command: Vec::new(),
            pids: Vec::new(),
            duration: None,
            freq_hz: 99,
            output: PathBuf::from("storprof-session"),
            as_root: false,
        }
    }
}

/// What a finished recording produced.
#[derive(Clone, Debug)]
pub struct RecordOutcome {
    /// The session directory written.
    pub dir: PathBuf,
    /// The exit code `storprof record` should exit with (the command's status,
    /// 128+signal when it was killed, 0 when attached to pids).
    pub exit_code: i32,
}

/// Errors of a recording.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("storprof record needs root (it loads eBPF programs); run it with sudo")]
    NotRoot,
    #[error("not implemented yet")]
    NotImplemented,
}

/// Record one session. Blocks until the command exits, the duration ends or
/// SIGINT/SIGTERM arrives; the session is written in every case.
pub fn record(_options: &RecordOptions) -> Result<RecordOutcome, RecordError> {
    Err(RecordError::NotImplemented)
}
