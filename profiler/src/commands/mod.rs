//! Subcommands of the analysis side (`report`, `flamegraph`, `bundle`,
//! `diagnose`): clap `Args` mapped onto the library options, and `run`
//! functions returning the process exit code.
