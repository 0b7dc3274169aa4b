//! The cargo-fuzz side of the fuzz targets: their bodies and seeds live in
//! `storprof-fuzz-targets` (fuzz-targets/, a member of the main workspace,
//! where the tests replay the seeds); each `fuzz_targets/NAME.rs` hands
//! libFuzzer's inputs to `NAME::run` and its seeds to [`write_seeds`].
//!
//! Seeds: `scripts/fuzz.sh` sets `STORPROF_FUZZ_SEEDS=DIR`; each target's
//! `init` writes its valid inputs there once, and libFuzzer reads DIR as a
//! second corpus directory.
use std::path::PathBuf;

pub use storprof_fuzz_targets as targets;

/// The seed directory, when the script asked for seeds.
fn seed_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("STORPROF_FUZZ_SEEDS")?);
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// Writes the inputs `seeds` makes into the seed directory, if any.
/// Failures are reported, not fatal: the fuzzer still runs from its own
/// corpus.
pub fn write_seeds(seeds: fn() -> targets::Seeds) {
    let Some(dir) = seed_dir() else {
        return;
    };
    for (name, bytes) in seeds() {
        if let Err(e) = std::fs::write(dir.join(&name), bytes) {
            eprintln!("fuzz seeds: cannot write {name}: {e}");
        }
    }
}
