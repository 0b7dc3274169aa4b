//! The session directory: what `storprof record` writes and every later
//! step reads. No I/O beyond reading the directory back; no kernel access.
//!
//! ```text
//! record ──► DIR/{session,threads,io,timeseries,waits,frames}.json, *.folded
//!                 │ model:  one serde struct per file (format-versioned)
//!                 ▼
//!            load::load(DIR) ──► load::Session ──► analysis, reports, merge
//! ```
//!
//! [`safe_path`] is how every file of a session directory (and every
//! report or bundle beside it) is written as root: no symbolic link of
//! another user followed, nothing replaced without `--force`.
pub mod load;
pub mod model;
pub mod safe_path;
