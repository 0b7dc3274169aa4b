//! The fuzz targets' bodies and seeds, one module per parser of outside
//! input, outside the cargo-fuzz workspace so that they build on stable:
//!
//! ```text
//! TARGET::seeds() ──► valid inputs from the project's own writers and fixtures
//!        │                 │
//!        │                 ├──► fuzz/ (cargo-fuzz, scripts/fuzz.sh): libFuzzer's seed corpus
//!        │                 └──► `replay` tests: every seed, its truncations and bit flips
//! TARGET::run(&[u8]) ◄── each input (must not panic, overflow or hang)
//! ```
//!
//! [`TARGETS`] lists them; `scripts/fuzz.sh` fuzzes each for a while, the
//! tests replay the seeds (and any crash or corpus file libFuzzer left in
//! `fuzz/artifacts/TARGET` or `fuzz/corpus/TARGET`) on every CI run.
use std::path::{Path, PathBuf};

use storprof_bench::{
    error::BenchError,
    storage::{RandomAccess, ReadKind},
};
use storprof_session::load::{LoadError, Session, load_from};

pub mod config;
pub mod elf;
pub mod jpeg;
pub mod npz;
pub mod parquet;
pub mod python;
pub mod session_dir;
pub mod session_files;
pub mod tfrecord;
pub mod thresholds;

#[cfg(test)]
mod replay;

/// Named inputs: (file name, bytes).
pub type Seeds = Vec<(String, Vec<u8>)>;

/// One fuzz target: its name (fuzz/fuzz_targets/NAME.rs), seeds and body.
pub struct Target {
    pub name: &'static str,
    pub seeds: fn() -> Seeds,
    pub run: fn(&[u8]),
}

/// Every target, in the order scripts/fuzz.sh runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "parquet",
        seeds: parquet::seeds,
        run: parquet::run,
    },
    Target {
        name: "npz",
        seeds: npz::seeds,
        run: npz::run,
    },
    Target {
        name: "jpeg",
        seeds: jpeg::seeds,
        run: jpeg::run,
    },
    Target {
        name: "tfrecord",
        seeds: tfrecord::seeds,
        run: tfrecord::run,
    },
    Target {
        name: "session_files",
        seeds: session_files::seeds,
        run: session_files::run,
    },
    Target {
        name: "session_dir",
        seeds: session_dir::seeds,
        run: session_dir::run,
    },
    Target {
        name: "config",
        seeds: config::seeds,
        run: config::run,
    },
    Target {
        name: "thresholds",
        seeds: thresholds::seeds,
        run: thresholds::run,
    },
    Target {
        name: "elf",
        seeds: elf::seeds,
        run: elf::run,
    },
    Target {
        name: "python",
        seeds: python::seeds,
        run: python::run,
    },
];

/// Writes files with `write` into a scratch directory and returns them as
/// seeds (the bench's writers take a storage, not a buffer).
pub fn written_seeds(write: impl FnOnce(&Path)) -> Seeds {
    let Ok(dir) = tempfile::tempdir() else {
        eprintln!("fuzz seeds: no scratch directory");
        return Vec::new();
    };
    write(dir.path());
    let Ok(entries) = std::fs::read_dir(dir.path()) else {
        return Vec::new();
    };
    let mut out: Seeds = entries
        .flatten()
        .filter_map(|e| {
            let bytes = std::fs::read(e.path()).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), bytes))
        })
        .collect();
    out.sort();
    out
}

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

/// The repository root (tests/data holds the session fixtures).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Session files in the order the `session_dir` target's framing uses.
pub const SESSION_FILES: &[&str] = &[
    storprof_session::model::files::SESSION,
    storprof_session::model::files::THREADS,
    storprof_session::model::files::IO,
    storprof_session::model::files::TIMESERIES,
    storprof_session::model::files::ONCPU_FOLDED,
    storprof_session::model::files::OFFCPU_FOLDED,
    storprof_session::model::files::WAITS,
    storprof_session::model::files::ONCPU_THREADS_FOLDED,
    storprof_session::model::files::OFFCPU_THREADS_FOLDED,
    storprof_session::model::files::BENCH_SUMMARY,
    // Added after the others, so earlier inputs keep their meaning.
    storprof_session::model::files::FRAMES,
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
