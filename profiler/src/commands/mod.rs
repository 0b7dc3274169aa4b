//! The subcommands' runs (`record`, `doctor`, `report`, `flamegraph`,
//! `export`, `bundle`, `diagnose`, and the embedded demo `diagnose` runs without a
//! command): each `run` takes its parsed args from [`crate::cli`], maps them
//! onto the library options and returns the process exit code (see
//! [`crate::cli::exit`]).
pub mod bundle;
pub mod demo;
pub mod diagnose;
pub mod doctor;
pub mod export;
pub mod flamegraph;
pub mod record;
pub mod report;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::analysis::Thresholds;

/// The file a command writes for the session in `dir`: `output`, or
/// `default_name` in the session. The default file is storprof's own
/// output, replaced like `storprof report` replaces it; a named one is
/// replaced only with `force`. Err: why the path is refused.
pub fn session_output_file(
    dir: &Path,
    output: Option<&Path>,
    default_name: &str,
    force: bool,
) -> Result<PathBuf, crate::output::safe_path::UnsafeOutput> {
    let out = output.map_or_else(|| dir.join(default_name), Path::to_path_buf);
    crate::output::safe_path::check_output_file(
        &out,
        force || output.is_none(),
        crate::output::safe_path::invoking_uid(),
    )?;
    Ok(out)
}

/// Reads a thresholds override file (JSON; absent fields keep their defaults).
pub fn load_thresholds(path: Option<&Path>) -> anyhow::Result<Thresholds> {
    match path {
        None => Ok(Thresholds::default()),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read thresholds file {}", p.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{}: not a valid thresholds JSON object", p.display()))
        }
    }
}
