//! `storprof merge SESSION... -o DIR`: load and analyse every host's
//! session, merge, and write `merged.json`, `report.md` and
//! `merged.tar.gz` (every host's session files, secrets redacted, under
//! `hosts/<label>/`) into DIR. Prints the cluster verdict and stragglers.
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;
use flate2::Compression;
use flate2::write::GzEncoder;

use super::{HostRow, Merged, host_labels, merge, report::render_markdown};
use crate::cli::{MergeArgs, exit};
use crate::commands::load_thresholds;
use storprof_report::bundle::{append, redacted_bytes};
use storprof_report::diagnosis::diagnose;
use storprof_session::load::{LoadError, load};
use storprof_session::{safe_path, safe_path::give_to_invoking_user};

/// Files written into the output directory.
pub mod files {
    pub const MERGED_JSON: &str = "merged.json";
    pub const REPORT: &str = "report.md";
    pub const BUNDLE: &str = "merged.tar.gz";
}

/// Load, analyse and merge `sessions` (no files written).
pub fn merge_sessions(
    sessions: &[PathBuf],
    thresholds: &storprof_analysis::Thresholds,
) -> Result<Merged, LoadError> {
    let mut loaded = Vec::with_capacity(sessions.len());
    for dir in sessions {
        loaded.push(load(dir)?);
    }
    let names: Vec<(String, String)> = loaded
        .iter()
        .zip(sessions)
        .map(|(s, dir)| (s.info.hostname.clone(), dir_name(dir)))
        .collect();
    let labels = host_labels(&names);
    let rows: Vec<HostRow> = loaded
        .iter()
        .zip(labels)
        .map(|(s, label)| {
            let a = diagnose(s, thresholds);
            HostRow::new(
                label,
                s.info.hostname.clone(),
                s.dir.display().to_string(),
                &a,
                s.is_complete(),
            )
        })
        .collect();
    Ok(merge(rows))
}

fn dir_name(dir: &Path) -> String {
    fs::canonicalize(dir)
        .unwrap_or_else(|_| dir.to_path_buf())
        .file_name()
        .map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
}

/// Runs `storprof merge`.
pub fn run(args: &MergeArgs) -> anyhow::Result<i32> {
    // Checked first: a refused output costs no analysis.
    if let Err(err) =
        safe_path::check_output_dir(&args.output, args.force, safe_path::invoking_uid())
    {
        eprintln!("storprof: error: {err}");
        return Ok(exit::USAGE);
    }
    let thresholds = load_thresholds(args.thresholds.thresholds.as_deref())?;
    let merged = match merge_sessions(&args.sessions, &thresholds) {
        Ok(m) => m,
        Err(
            e @ (LoadError::MissingDir(_) | LoadError::NotADir(_) | LoadError::NotASession { .. }),
        ) => {
            eprintln!("storprof: error: {e}");
            return Ok(exit::USAGE);
        }
        Err(e) => return Err(e.into()),
    };
    let labels: Vec<&str> = merged.hosts.iter().map(|h| h.host.as_str()).collect();
    if let Some(dup) = labels
        .iter()
        .enumerate()
        .find_map(|(i, l)| labels[..i].contains(l).then_some(*l))
    {
        eprintln!(
            "storprof: error: two sessions are both named '{dup}' (same hostname and directory name); \
             record each host into its own directory named after it"
        );
        return Ok(exit::USAGE);
    }
    write_outputs(&merged, &args.sessions, &args.output)?;
    give_outputs_to_invoking_user(&args.output);
    if args.json {
        print!("{}", serde_json::to_string_pretty(&merged)? + "\n");
    } else {
        print_table(&merged);
    }
    for w in &merged.warnings {
        eprintln!("storprof: warning: {w}");
    }
    eprintln!(
        "storprof: merged report written to {}",
        args.output.join(files::REPORT).display()
    );
    Ok(exit::OK)
}

/// The cluster verdict and one line per host.
fn print_table(merged: &Merged) {
    println!(
        "cluster verdict: {} — {}",
        merged.cluster_verdict, merged.cluster_headline
    );
    for h in &merged.hosts {
        println!(
            "  {:<16} {:<18} readers waiting on I/O {:>5.1}%  {}",
            h.host,
            h.verdict.to_string(),
            h.reader_io_wait_share * 100.0,
            if merged.stragglers.iter().any(|s| s.host == h.host) {
                "STRAGGLER"
            } else {
                ""
            }
        );
    }
}

/// Through sudo, hands the files written into `out` to the invoking user,
/// the directory last (until then they cannot swap a file for a link).
fn give_outputs_to_invoking_user(out: &Path) {
    for name in [files::MERGED_JSON, files::REPORT, files::BUNDLE] {
        give_to_invoking_user(&out.join(name));
    }
    give_to_invoking_user(out);
}

/// Write merged.json, report.md and the bundle into `out`; each file is
/// created afresh (`O_EXCL | O_NOFOLLOW`: a link in its place is replaced,
/// not followed).
pub fn write_outputs(m: &Merged, sessions: &[PathBuf], out: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let json = serde_json::to_string_pretty(m)? + "\n";
    let report = render_markdown(m);
    safe_path::write_file(&out.join(files::MERGED_JSON), json.as_bytes())
        .with_context(|| format!("cannot write {}", out.join(files::MERGED_JSON).display()))?;
    safe_path::write_file(&out.join(files::REPORT), report.as_bytes())
        .with_context(|| format!("cannot write {}", out.join(files::REPORT).display()))?;
    let bundle = out.join(files::BUNDLE);
    let file = safe_path::create_file(&bundle)
        .with_context(|| format!("cannot write {}", bundle.display()))?;
    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
    let top = "storprof-merged";
    // The same tar entries and redaction as a single-host bundle.
    append(
        &mut tar,
        &format!("{top}/{}", files::MERGED_JSON),
        &redacted_bytes(Path::new(files::MERGED_JSON), json.into_bytes()),
        &bundle,
    )?;
    append(
        &mut tar,
        &format!("{top}/{}", files::REPORT),
        &redacted_bytes(Path::new(files::REPORT), report.into_bytes()),
        &bundle,
    )?;
    for (host, dir) in m.hosts.iter().zip(sessions) {
        let mut entries: Vec<PathBuf> = fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .filter(|p| !p.to_string_lossy().ends_with(".tar.gz"))
            .collect();
        entries.sort();
        for path in entries {
            let bytes =
                fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            append(
                &mut tar,
                &format!("{top}/hosts/{}/{name}", host.host),
                &redacted_bytes(&path, bytes),
                &bundle,
            )?;
        }
    }
    tar.into_inner()
        .and_then(|gz| gz.finish())
        .with_context(|| format!("cannot finish {}", bundle.display()))?;
    Ok(())
}
