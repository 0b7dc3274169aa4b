//! The evidence bundle: one tar.gz a user attaches to a bug report, with the
//! whole session, the report, the SVGs, `system.json` and the bench results;
//! secrets redacted on the way in.
//!
//! ```text
//! session dir ──► each file: JSON → redact keys + command; text → as is
//! system.json ──►                                    ──► tar ──► gzip ──► FILE.tar.gz
//! bench results dir (from the command line) ──► *.json, *.log, *.yaml
//! ```
//!
//! Redaction: names that look like KEY, SECRET, TOKEN, PASSWORD or
//! credentials, in `NAME=VALUE`, `--name VALUE` and `--name=VALUE` argument
//! forms, as JSON object keys at any depth, and passwords inside URLs.
use std::{
    fs::{self, File},
    io::{self, Write},
    path::{Path, PathBuf},
};

use flate2::{Compression, write::GzEncoder};

/// What replaces a secret value.
pub const REDACTED: &str = "<redacted>";

/// Fragments of names whose values are secrets (compared upper-case, with
/// `-` and `.` read as `_`).
const SECRET_NAME_PARTS: &[&str] = &[
    "KEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTHORIZATION",
    "SIGNATURE",
];

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
}

/// True when a variable/option/key name looks like it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper: String = name
        .trim_start_matches(['-', '+'])
        .chars()
        .map(|c| match c {
            '-' | '.' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect();
    SECRET_NAME_PARTS.iter().any(|p| upper.contains(p))
}

/// Replaces `user:password@` in URLs with `user:<redacted>@`.
pub fn redact_url_password(s: &str) -> String {
    let Some(scheme_end) = s.find("://") else {
        return s.to_string();
    };
    let rest = &s[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return s.to_string();
    };
    let userinfo = &authority[..at];
    let Some(colon) = userinfo.find(':') else {
        return s.to_string();
    };
    format!(
        "{}{}:{REDACTED}{}",
        &s[..scheme_end + 3],
        &userinfo[..colon],
        &rest[at..]
    )
}

/// Redacts secrets in an argv (see the module docs for the forms).
pub fn redact_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut redact_next = false;
    for arg in args {
        if redact_next {
            redact_next = false;
            // `--token --other` : the next word is an option, not a value.
            if !arg.starts_with('-') {
                out.push(REDACTED.to_string());
                continue;
            }
        }
        if let Some((name, _)) = arg.split_once('=')
            && is_secret_name(name)
        {
            out.push(format!("{name}={REDACTED}"));
            continue;
        }
        if arg.starts_with('-') && !arg.contains('=') && is_secret_name(arg) {
            redact_next = true;
        }
        out.push(redact_url_password(arg));
    }
    out
}

/// Redacts a JSON document: values under secret-looking keys, `command`
/// arrays of strings as argv, and URL passwords in every string.
pub fn redact_json(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if is_secret_name(k) && !matches!(v, Value::Object(_) | Value::Array(_)) {
                    *v = Value::String(REDACTED.to_string());
                } else if k == "command"
                    && let Value::Array(items) = v
                    && items.iter().all(Value::is_string)
                {
                    let argv: Vec<String> = items
                        .iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect();
                    *items = redact_args(&argv).into_iter().map(Value::String).collect();
                } else {
                    redact_json(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_json),
        Value::String(s) => *s = redact_url_password(s),
        _ => {}
    }
}

/// Redacts `NAME=VALUE` words and URL passwords in free text (logs, YAML
/// lines `key: value` with secret-looking keys).
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        // YAML-ish `key: value`.
        if let Some((k, _)) = body.split_once(": ")
            && !k.trim().contains(' ')
            && is_secret_name(k.trim())
        {
            out.push_str(&format!("{k}: {REDACTED}{nl}"));
            continue;
        }
        let words: Vec<String> = body.split(' ').map(str::to_string).collect();
        out.push_str(&redact_args(&words).join(" "));
        out.push_str(nl);
    }
    out
}

/// What goes into a bundle.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
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

pub(crate) fn redacted_bytes(path: &Path, bytes: Vec<u8>) -> Vec<u8> {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext {
        "json" => match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(mut v) => {
                redact_json(&mut v);
                let mut s = serde_json::to_vec_pretty(&v).unwrap_or(bytes);
                s.push(b'\n');
                s
            }
            // Not JSON after all: treat as text.
            Err(_) => redact_text(&String::from_utf8_lossy(&bytes)).into_bytes(),
        },
        "md" | "log" | "txt" | "yaml" | "yml" | "conf" | "cfg" | "toml" => {
            redact_text(&String::from_utf8_lossy(&bytes)).into_bytes()
        }
        // SVGs carry frame names and the (already redacted) report text;
        // folded stacks carry frame names only.
        _ => bytes,
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

pub(crate) fn append(
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
    let file = File::create(&out).map_err(|source| BundleError::Write {
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn secret_names() {
        for n in [
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SESSION_TOKEN",
            "--password",
            "--s3-secret-key",
            "++workload.storage.storage_options.secret_access_key",
            "db.passwd",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["--data-dir", "dataset.num_files_train", "--reader", "PATH"] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn redacts_all_argument_forms() {
        let got = redact_args(&args(&[
            "env",
            "AWS_SECRET_ACCESS_KEY=abc123",
            "storprof",
            "bench",
            "--s3-secret-key",
            "hunter2",
            "--token=xyz",
            "--api-key",
            "--verbose",
            "++workload.storage.storage_options.access_key_id=AKIA123",
            "--endpoint",
            "http://user:pa55@minio:9000/bucket",
            "--data-dir",
            "/data/flux",
        ]));
        let joined = got.join(" ");
        for secret in ["abc123", "hunter2", "xyz", "AKIA123", "pa55"] {
            assert!(!joined.contains(secret), "{secret} leaked: {joined}");
        }
        assert_eq!(got[1], "AWS_SECRET_ACCESS_KEY=<redacted>");
        assert_eq!(got[5], REDACTED);
        assert_eq!(got[6], "--token=<redacted>");
        // `--api-key --verbose`: the option after is kept.
        assert_eq!(got[8], "--verbose");
        assert_eq!(got[11], "http://user:<redacted>@minio:9000/bucket");
        assert_eq!(got[13], "/data/flux");
    }

    #[test]
    fn redacts_json_and_text() {
        let mut v = serde_json::json!({
            "command": ["storprof", "--password", "p"],
            "storage": {"secret_key": "s", "endpoint": "s3://a:b@host/x", "bucket": "data"},
            "list": [{"token": 5}]
        });
        redact_json(&mut v);
        let s = v.to_string();
        assert!(
            !s.contains("\"p\"") && !s.contains("\"s\"") && !s.contains(":b@") && !s.contains(":5"),
            "{s}"
        );
        assert!(s.contains("\"bucket\":\"data\""));
        let t = redact_text("secret_key: abc\nrun FOO_TOKEN=zzz ok\nplain: value\n");
        assert_eq!(
            t,
            "secret_key: <redacted>\nrun FOO_TOKEN=<redacted> ok\nplain: value\n"
        );
    }
}
