//! The session directory: what `storprof record` writes and every later
//! step reads. No I/O beyond reading the directory back; no kernel access.
//!
//! ```text
//! record ──► DIR/{session,threads,io,timeseries,waits,frames}.json, *.folded
//!                 │ model:  one serde struct per file (format-versioned)
//!                 ▼
//!            load::load(DIR) ──► load::Session ──► analysis, reports, merge
//! ```
pub mod load;
pub mod model;
