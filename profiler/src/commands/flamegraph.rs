//! `storprof flamegraph DIR [--kind oncpu|offcpu] [--diff OTHER_DIR] [-o FILE [--force]]`.
use std::io::BufWriter;

use anyhow::Context;

use crate::cli::{FlamegraphArgs, KindArg, exit};
use storprof_report::flamegraph::{self, FlamegraphOptions, Kind};
use storprof_session::{
    model::files,
    safe_path::{self, give_to_invoking_user},
};

/// Runs `storprof flamegraph`.
pub fn run(args: &FlamegraphArgs) -> anyhow::Result<i32> {
    let kind = match args.kind {
        KindArg::Oncpu => Kind::OnCpu,
        KindArg::Offcpu => Kind::OffCpu,
    };
    let folded_name = match kind {
        Kind::OnCpu => files::ONCPU_FOLDED,
        Kind::OffCpu => files::OFFCPU_FOLDED,
    };
    let this = match super::load_session_dir(&args.dir) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    if this.missing.contains(&folded_name) {
        eprintln!(
            "storprof: warning: {} has no {folded_name}; the flamegraph is empty",
            args.dir.display()
        );
    }
    let mut options = FlamegraphOptions::new(kind);
    options.deterministic = args.deterministic;
    let stacks = match kind {
        Kind::OnCpu => &this.oncpu,
        Kind::OffCpu => &this.offcpu,
    };
    let default_name = match &args.diff {
        None => format!("flamegraph-{}.svg", kind.file_stem()),
        Some(_) => format!("flamegraph-{}-diff.svg", kind.file_stem()),
    };
    let out = match super::session_output_file(
        &args.dir,
        args.output.as_deref(),
        &default_name,
        args.force,
    ) {
        Ok(out) => out,
        Err(err) => {
            eprintln!("storprof: error: {err}");
            return Ok(exit::USAGE);
        }
    };
    // The other session is loaded before the file is made: a bad one
    // leaves nothing behind.
    let other = match &args.diff {
        None => None,
        Some(other_dir) => match super::load_session_dir(other_dir) {
            Ok(s) => Some((other_dir, s)),
            Err(code) => return Ok(code),
        },
    };
    let file =
        safe_path::create_file(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let w = BufWriter::new(file);
    match &other {
        None => flamegraph::write(stacks, &options, w),
        Some((other_dir, other)) => {
            let other_stacks = match kind {
                Kind::OnCpu => &other.oncpu,
                Kind::OffCpu => &other.offcpu,
            };
            options.title = Some(format!(
                "{} vs {}: red = more in {}, blue = less",
                args.dir.display(),
                other_dir.display(),
                args.dir.display()
            ));
            flamegraph::write_diff(other_stacks, stacks, &options, w)
        }
    }
    .with_context(|| format!("cannot write {}", out.display()))?;
    give_to_invoking_user(&out);
    eprintln!("storprof: flamegraph written to {}", out.display());
    Ok(exit::OK)
}
