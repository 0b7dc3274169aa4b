//! The subcommands' runs (`record`, `doctor`, `report`, `flamegraph`,
//! `export`, `bundle`, `diagnose`, `whatif`, and the embedded demo `diagnose` runs without a
//! command): each `run` takes its parsed args from [`crate::cli`], maps them
//! onto the library options and returns the process exit code (see
//! [`crate::cli::exit`]).
pub mod bundle;
pub mod demo;
pub mod diagnose;
pub mod doctor;
pub mod export;
pub mod flamegraph;
pub mod man;
pub mod record;
pub mod report;
pub mod thresholds;
pub mod whatif;

use std::path::{Path, PathBuf};

use storprof_analysis::Thresholds;

/// The file a command writes for the session in `dir`: `output`, or
/// `default_name` in the session. The default file is storprof's own
/// output, replaced like `storprof report` replaces it; a named one is
/// replaced only with `force`. Err: why the path is refused.
pub fn session_output_file(
    dir: &Path,
    output: Option<&Path>,
    default_name: &str,
    force: bool,
) -> Result<PathBuf, storprof_session::safe_path::UnsafeOutput> {
    let out = output.map_or_else(|| dir.join(default_name), Path::to_path_buf);
    storprof_session::safe_path::check_output_file(
        &out,
        force || output.is_none(),
        storprof_session::safe_path::invoking_uid(),
    )?;
    Ok(out)
}

/// Reads a thresholds override file strictly (see [`thresholds::parse`]);
/// a bad file is a usage error.
pub fn load_thresholds(path: Option<&Path>) -> anyhow::Result<Thresholds> {
    thresholds::load(path).map_err(|e| anyhow::Error::new(crate::cli::UsageError(e.to_string())))
}

/// The session directory `dir`, or the exit code for why not, already
/// said on stderr: a path that is not a session is a usage error, a
/// session that cannot be read (permissions, bad JSON) a runtime error.
pub fn load_session_dir(dir: &Path) -> Result<storprof_session::load::Session, i32> {
    use storprof_session::load::{self, LoadError};
    load::load(dir).map_err(|e| {
        eprintln!("storprof: error: {e}");
        match e {
            LoadError::MissingDir(_) | LoadError::NotADir(_) | LoadError::NotASession { .. } => {
                crate::cli::exit::USAGE
            }
            _ => crate::cli::exit::ERROR,
        }
    })
}

/// The session at `path`: a bundle read in place, or a session
/// directory. Ok(Err(code)): a path that is not a session, already said
/// on stderr, and the exit code for it (a usage error).
pub fn load_session_arg(
    path: &Path,
) -> anyhow::Result<Result<storprof_session::load::Session, i32>> {
    if path.is_file() {
        return Ok(Ok(storprof_report::bundle::load_bundle(path)?));
    }
    Ok(load_session_dir(path))
}
