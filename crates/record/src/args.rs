//! Default names of session directories, from the local time. (The
//! `record`/`doctor` arguments live in the binary's `cli`, their runs in
//! `commands::{record, doctor}`.)
use std::path::PathBuf;

/// The local time as `YYYYmmdd-HHMMSS`, for default output names.
pub fn local_timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as libc::time_t);
    // SAFETY: localtime_r with valid pointers to a time_t and a zeroed tm.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&now, &mut tm);
        tm
    };
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// A default session directory name from the local time.
pub fn default_output() -> PathBuf {
    PathBuf::from(format!("storprof-{}", local_timestamp()))
}
