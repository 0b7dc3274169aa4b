//! Helpers shared by the fuzz targets: an in-memory file for the format
//! readers, in-memory sessions, and the seed corpora, written at start-up by the project's own
//! writers (no binary seeds in git).
//!
//! Seeds: `scripts/fuzz.sh` sets `STORPROF_FUZZ_SEEDS=DIR`; each target's
//! `init` writes its valid inputs there once, and libFuzzer reads DIR as a
//! second corpus directory.
use std::path::{Path, PathBuf};

use storprof::session::load::{LoadError, Session, load_from};

use storprof_bench::{
    error::BenchError,
    storage::{RandomAccess, ReadKind},
};

/// The fuzz input as a file, for readers that take a [`RandomAccess`].
pub struct Mem<'a>(pub &'a [u8]);

impl RandomAccess for Mem<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }

    fn read_into(&self, buf: &mut [u8], offset: u64, _kind: ReadKind) -> Result<(), BenchError> {
        // A read past the end is the short read a real file gives: an error.
        let src = usize::try_from(offset)
            .ok()
            .and_then(|at| self.0.get(at..at.checked_add(buf.len())?))
            .ok_or_else(|| BenchError::Corrupt {
                path: "fuzz".into(),
                format: "fuzz",
                reason: format!("read of {} bytes at {offset} past the end", buf.len()),
            })?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// The seed directory, when the script asked for seeds.
pub fn seed_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("STORPROF_FUZZ_SEEDS")?);
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// Writes `seeds` (name, bytes) into the seed directory, if any. Failures
/// are reported, not fatal: the fuzzer still runs from its own corpus.
pub fn write_seeds(seeds: impl IntoIterator<Item = (String, Vec<u8>)>) {
    let Some(dir) = seed_dir() else {
        return;
    };
    for (name, bytes) in seeds {
        if let Err(e) = std::fs::write(dir.join(&name), bytes) {
            eprintln!("fuzz seeds: cannot write {name}: {e}");
        }
    }
}

/// The repository root (tests/data holds the session fixtures).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Session files in the order the `session_dir` target's framing uses.
pub const SESSION_FILES: &[&str] = &[
    storprof::session::model::files::SESSION,
    storprof::session::model::files::THREADS,
    storprof::session::model::files::IO,
    storprof::session::model::files::TIMESERIES,
    storprof::session::model::files::ONCPU_FOLDED,
    storprof::session::model::files::OFFCPU_FOLDED,
    storprof::session::model::files::WAITS,
    storprof::session::model::files::ONCPU_THREADS_FOLDED,
    storprof::session::model::files::OFFCPU_THREADS_FOLDED,
    storprof::session::model::files::BENCH_SUMMARY,
    // Added after the others, so earlier inputs keep their meaning.
    storprof::session::model::files::FRAMES,
];

/// Separator of the session files in one fuzz input (absent from JSON and
/// folded text).
pub const FILE_SEP: u8 = 0;

/// Largest session fixture used as a seed (bytes).
const MAX_SESSION_SEED: usize = 160 * 1024;

/// The session fixtures of tests/data/sessions as framed inputs: every
/// file of [`SESSION_FILES`] in order, separated by [`FILE_SEP`], an empty
/// piece for an absent file.
pub fn session_fixture_inputs() -> Vec<(String, Vec<u8>)> {
    let dir = repo_root().join("tests/data/sessions");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let mut input = Vec::new();
        for (i, name) in SESSION_FILES.iter().enumerate() {
            if i > 0 {
                input.push(FILE_SEP);
            }
            if let Ok(bytes) = std::fs::read(path.join(name)) {
                input.extend(bytes.into_iter().filter(|&b| b != FILE_SEP));
            }
        }
        // The large real recordings would make every mutation slow.
        if input.len() > MAX_SESSION_SEED {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        out.push((format!("session-{name}"), input));
    }
    out
}

/// The session in a framed input ([`SESSION_FILES`] separated by
/// [`FILE_SEP`], an empty piece for an absent file), parsed in memory by
/// `session::load::load_from`, the parser `load` runs on a directory. A
/// piece that is not UTF-8 is the error `load` gives for such a file.
pub fn session_from_framed(data: &[u8]) -> Result<Session, LoadError> {
    let mut pieces: Vec<&[u8]> = data.split(|&b| b == FILE_SEP).collect();
    pieces.resize(SESSION_FILES.len(), &[]);
    load_from(Path::new("fuzz"), |name| {
        let Some(i) = SESSION_FILES.iter().position(|&f| f == name) else {
            return Ok(None);
        };
        let piece = pieces[i];
        if piece.is_empty() {
            return Ok(None);
        }
        match std::str::from_utf8(piece) {
            Ok(text) => Ok(Some(text.to_string())),
            Err(e) => Err(LoadError::Io {
                path: Path::new("fuzz").join(name),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            }),
        }
    })
}
