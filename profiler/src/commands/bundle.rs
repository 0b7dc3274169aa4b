//! `storprof bundle DIR [-o FILE.tar.gz] [--force]`: the evidence bundle.
use crate::cli::{BundleArgs, exit};
use storprof_report::{BundleSessionOptions, OutputError, bundle::BundleError};
use storprof_session::load::LoadError;

/// Runs `storprof bundle`.
pub fn run(args: &BundleArgs) -> anyhow::Result<i32> {
    let options = BundleSessionOptions {
        output: args.output.clone(),
        force: args.force,
        ..BundleSessionOptions::default()
    };
    match storprof_report::bundle_session(&args.dir, &options) {
        Ok((path, names)) => {
            println!(
                "bundle: {} ({} files, secrets redacted)",
                path.display(),
                names.len()
            );
            Ok(exit::OK)
        }
        Err(OutputError::Load(
            e @ (LoadError::MissingDir(_) | LoadError::NotADir(_) | LoadError::NotASession { .. }),
        )) => {
            eprintln!("storprof: error: {e}");
            Ok(exit::USAGE)
        }
        Err(OutputError::Bundle(e @ BundleError::UnsafeOutput(_))) => {
            eprintln!("storprof: error: {e}");
            Ok(exit::USAGE)
        }
        Err(e) => Err(e.into()),
    }
}
