//! Subcommands of the analysis side (`report`, `flamegraph`, `bundle`,
//! `diagnose`, and the embedded demo `diagnose` runs without a command): clap `Args` mapped onto the library options, and `run`
//! functions returning the process exit code (see [`crate::cli::exit`]).
pub mod bundle;
pub mod demo;
pub mod diagnose;
pub mod flamegraph;
pub mod report;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::analysis::Thresholds;

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

/// `--thresholds FILE`, shared by report and diagnose.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ThresholdArgs {
    /// JSON file overriding verdict thresholds (see THRESHOLDS.md), e.g. {"compute_bound_au_percentage": 70}.
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
}
