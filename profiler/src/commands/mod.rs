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

use std::path::Path;

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
