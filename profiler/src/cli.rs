//! Command-line arguments of every subcommand, mapped onto the library
//! options of each module. Exit codes are documented in [`exit`].

/// Exit codes of `storprof`.
pub mod exit {
    /// Success (for `record`/`diagnose`: the command's own status is passed through).
    pub const OK: i32 = 0;
    /// A runtime error (I/O, bad data, a probe that failed to load).
    pub const ERROR: i32 = 1;
    /// Usage error, or a command that needs root run without it.
    pub const USAGE: i32 = 2;
}
