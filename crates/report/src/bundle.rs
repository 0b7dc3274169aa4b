//! The evidence bundle: one tar.gz a user attaches to a bug report, with the
//! whole session, the report, the SVGs, `system.json` and the bench results;
//! secrets redacted on the way in.
//!
//! ```text
//! session dir ──► each file: JSON and report.html's data → redact keys,
//!                 argv, strings; SVG and folded stacks → as is; other
//!                 text → redact lines
//! system.json ──►                                    ──► tar ──► gzip ──► FILE.tar.gz
//! bench results dir (from the command line) ──► *.json, *.log, *.yaml
//! ```
//!
//! Redaction: see [`super::redact`] (secret-looking names in argument,
//! command-line, config and JSON forms, and credentials in URLs).
use std::{
    fs::{self, File},
    io::{self, Write},
    path::{Path, PathBuf},
};

use flate2::{Compression, write::GzEncoder};

pub use super::redact::{
    REDACTED, is_secret_name, redact_args, redact_command_line, redact_json, redact_text,
    redact_url_password,
};

/// Errors writing a bundle.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write bundle {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    UnsafeOutput(#[from] storprof_session::safe_path::UnsafeOutput),
}

/// What goes into a bundle.
#[derive(Clone, Debug, Default)]
pub struct BundleOptions {
    /// The session directory (with report.md, verdict.json and SVGs when
    /// `storprof report` ran).
    pub session_dir: PathBuf,
    /// Output file. Default: `<session dir>.tar.gz` next to the session.
    pub output: Option<PathBuf>,
    /// `system.json` content (see [`super::system`]).
    pub system_json: Option<serde_json::Value>,
    /// The bench's own result directory, when the command was `storprof bench`.
    pub bench_results_dir: Option<PathBuf>,
    /// Replace an existing file at `output` (`--force`). The default
    /// output, storprof's own earlier bundle, is always replaced.
    pub force: bool,
}

impl BundleOptions {
    pub fn new(session_dir: impl Into<PathBuf>) -> Self {
        Self {
            session_dir: session_dir.into(),
            ..Self::default()
        }
    }

    /// The output path: the given one, or `<session dir>.tar.gz`.
    pub fn output_path(&self) -> PathBuf {
        self.output.clone().unwrap_or_else(|| {
            let mut p = self.session_dir.clone().into_os_string();
            p.push(".tar.gz");
            PathBuf::from(p)
        })
    }
}

/// Largest file copied from a bench results directory (logs can be huge).
const MAX_BENCH_FILE_BYTES: u64 = 16 << 20;

pub fn redacted_bytes(path: &Path, bytes: Vec<u8>) -> Vec<u8> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "json" => match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(mut v) => {
                redact_json(&mut v);
                // Never the raw bytes: they hold the secrets.
                let mut s = serde_json::to_vec_pretty(&v)
                    .unwrap_or_else(|_| redact_text(&String::from_utf8_lossy(&bytes)).into_bytes());
                s.push(b'\n');
                s
            }
            // Not JSON after all: treat as text.
            Err(_) => redact_text(&String::from_utf8_lossy(&bytes)).into_bytes(),
        },
        // report.html: its data (JSON) redacted as JSON; the page around
        // it is storprof's template. Another HTML file: as text.
        "html" => {
            let text = String::from_utf8_lossy(&bytes);
            super::html::redact_page(&text, redact_json)
                .unwrap_or_else(|| redact_text(&text))
                .into_bytes()
        }
        // SVGs carry frame names and the (already redacted) report text;
        // folded stacks carry frame names only.
        "svg" | "folded" => bytes,
        // Everything else that is text (report.md, logs, YAML, INI, .env,
        // files the user left in the session): line by line.
        _ => match String::from_utf8(bytes) {
            Ok(text) => redact_text(&text).into_bytes(),
            Err(e) => e.into_bytes(),
        },
    }
}

/// Pack one file, redacted, as `<dir_in_tar>/<file name>`; returns the entry name.
fn append_file(
    tar: &mut tar::Builder<GzEncoder<File>>,
    dir_in_tar: &str,
    path: &Path,
    out: &Path,
) -> Result<String, BundleError> {
    let bytes = fs::read(path).map_err(|source| BundleError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let name = format!(
        "{dir_in_tar}/{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    );
    append(tar, &name, &redacted_bytes(path, bytes), out)?;
    Ok(name)
}

pub fn append(
    tar: &mut tar::Builder<GzEncoder<File>>,
    name: &str,
    bytes: &[u8],
    out: &Path,
) -> Result<(), BundleError> {
    let mut header = tar::Header::new_gnu();
    header.set_size(bytes.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    );
    header.set_cksum();
    tar.append_data(&mut header, name, bytes)
        .map_err(|source| BundleError::Write {
            path: out.to_path_buf(),
            source,
        })
}

fn sorted_files(dir: &Path) -> Result<Vec<PathBuf>, BundleError> {
    let read = |source| BundleError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).map_err(read)? {
        let entry = entry.map_err(read)?;
        let ft = entry.file_type().map_err(read)?;
        if ft.is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// Writes the bundle; returns its path and the names of the entries.
pub fn write(options: &BundleOptions) -> Result<(PathBuf, Vec<String>), BundleError> {
    let out = options.output_path();
    let top = options.session_dir.file_name().map_or_else(
        || "storprof-session".to_string(),
        |n| n.to_string_lossy().to_string(),
    );
    // A path through another user's link is refused; the file is created
    // afresh, never opened through a link.
    storprof_session::safe_path::check_output_file(
        &out,
        options.force || options.output.is_none(),
        storprof_session::safe_path::invoking_uid(),
    )?;
    let file =
        storprof_session::safe_path::create_file(&out).map_err(|source| BundleError::Write {
            path: out.clone(),
            source,
        })?;
    let mut tar = tar::Builder::new(GzEncoder::new(file, Compression::default()));
    let mut names = Vec::new();
    let out_canon = fs::canonicalize(&out).ok();

    for path in sorted_files(&options.session_dir)? {
        // The bundle may be written inside the session dir, and old bundles
        // may sit there: do not pack tarballs.
        if path.to_string_lossy().ends_with(".tar.gz") || fs::canonicalize(&path).ok() == out_canon
        {
            continue;
        }
        names.push(append_file(&mut tar, &top, &path, &out)?);
    }
    if let Some(system) = &options.system_json {
        let mut v = system.clone();
        redact_json(&mut v);
        let mut bytes = serde_json::to_vec_pretty(&v).unwrap_or_default();
        bytes.push(b'\n');
        let name = format!("{top}/system.json");
        append(&mut tar, &name, &bytes, &out)?;
        names.push(name);
    }
    if let Some(dir) = &options.bench_results_dir
        && dir.is_dir()
    {
        for path in sorted_files(dir)? {
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            let small = fs::metadata(&path).is_ok_and(|m| m.len() <= MAX_BENCH_FILE_BYTES);
            if !small || !matches!(ext, "json" | "log" | "yaml" | "yml" | "txt") {
                continue;
            }
            names.push(append_file(
                &mut tar,
                &format!("{top}/bench-results"),
                &path,
                &out,
            )?);
        }
    }
    let gz = tar.into_inner().map_err(|source| BundleError::Write {
        path: out.clone(),
        source,
    })?;
    let mut file = gz.finish().map_err(|source| BundleError::Write {
        path: out.clone(),
        source,
    })?;
    file.flush().map_err(|source| BundleError::Write {
        path: out.clone(),
        source,
    })?;
    Ok((out, names))
}

/// The largest session file read back from a bundle (a guard against a
/// decompression bomb posing as one).
const MAX_BUNDLED_SESSION_FILE: u64 = 1 << 30;

/// Loads the session a bundle (`storprof bundle`'s or `diagnose`'s
/// tar.gz) holds, from memory: nothing is extracted, so a read-only or
/// foreign bundle is read as it is. The session files are those directly
/// under the bundle's top directory.
pub fn load_bundle(path: &Path) -> Result<storprof_session::load::Session, BundleError> {
    use std::{collections::BTreeMap, io::Read};
    let read_err = |source| BundleError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(read_err)?;
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut top: Option<String> = None;
    for entry in archive.entries().map_err(read_err)? {
        let mut entry = entry.map_err(read_err)?;
        let name = entry
            .path()
            .map_err(read_err)?
            .to_string_lossy()
            .into_owned();
        let mut parts = name.split('/');
        let (Some(dir), Some(file), None) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if top.get_or_insert_with(|| dir.to_string()) != dir
            || entry.size() > MAX_BUNDLED_SESSION_FILE
        {
            continue;
        }
        let file = file.to_string();
        let mut text = String::new();
        if entry.read_to_string(&mut text).is_ok() {
            files.insert(file, text);
        }
    }
    let label = path.to_path_buf();
    storprof_session::load::load_from(&label, |name| Ok(files.get(name).cloned())).map_err(|e| {
        BundleError::Read {
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
        }
    })
}
