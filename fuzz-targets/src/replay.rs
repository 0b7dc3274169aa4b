//! Every target's seeds replayed as ordinary tests, with deterministic
//! damage (truncations, byte flips) so the error paths run too, and any
//! input libFuzzer kept (`fuzz/artifacts/TARGET`: crashes once found;
//! `fuzz/corpus/TARGET`), so a fixed crash stays fixed without a fuzzing
//! run. The long fuzzing is `scripts/fuzz.sh`.
use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    path::Path,
};

use super::{Seeds, TARGETS, Target, repo_root};

/// Byte flips per seed.
const FLIPS: usize = 24;
/// Files read from each of libFuzzer's directories (a long run's corpus
/// can hold tens of thousands).
const MAX_KEPT_INPUTS: usize = 500;

/// The seed cut at its start, after one byte, in thirds and before its
/// last byte.
fn truncations(seed: &[u8]) -> Vec<Vec<u8>> {
    let n = seed.len();
    let mut cuts = vec![0, 1, n / 3, n / 2, 2 * n / 3, n.saturating_sub(1)];
    cuts.sort_unstable();
    cuts.dedup();
    cuts.into_iter()
        .filter(|&c| c < n)
        .map(|c| seed[..c].to_vec())
        .collect()
}

/// The seed with one byte changed at a time, at positions and to values
/// from a fixed xorshift sequence (the same every run).
fn flips(seed: &[u8], salt: u64) -> Vec<Vec<u8>> {
    if seed.is_empty() {
        return Vec::new();
    }
    let mut x = 0x9e37_79b9_7f4a_7c15 ^ salt;
    (0..FLIPS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut damaged = seed.to_vec();
            let at = (x % seed.len() as u64) as usize;
            damaged[at] = match (x >> 32) % 4 {
                0 => 0,
                1 => 0xff,
                2 => damaged[at].wrapping_add(1),
                _ => damaged[at] ^ 0x80,
            };
            damaged
        })
        .collect()
}

/// Up to [`MAX_KEPT_INPUTS`] files of `dir`, sorted by name (absent: none).
fn kept_inputs(dir: &Path) -> Seeds {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    names.sort();
    names
        .into_iter()
        .take(MAX_KEPT_INPUTS)
        .filter_map(|p| Some((p.display().to_string(), std::fs::read(&p).ok()?)))
        .collect()
}

/// Runs `target` on `input`; a panic becomes an error naming the input.
fn run_one(target: &Target, what: &str, input: &[u8]) -> Result<(), String> {
    catch_unwind(AssertUnwindSafe(|| (target.run)(input)))
        .map_err(|_| format!("{}: {what} ({} bytes) panicked", target.name, input.len()))
}

fn replay(target: &Target) {
    let seeds = (target.seeds)();
    assert!(
        !seeds.is_empty(),
        "{}: no seeds (the writers or fixtures they come from failed)",
        target.name
    );
    let mut failures = Vec::new();
    let mut runs = 0;
    for (i, (name, seed)) in seeds.iter().enumerate() {
        let damaged = truncations(seed)
            .into_iter()
            .map(|d| ("truncated", d))
            .chain(flips(seed, i as u64).into_iter().map(|d| ("flipped", d)));
        for (how, input) in std::iter::once(("seed", seed.clone())).chain(damaged) {
            runs += 1;
            if let Err(e) = run_one(target, &format!("{name}, {how}"), &input) {
                failures.push(e);
            }
        }
    }
    let fuzz = repo_root().join("fuzz");
    for dir in ["artifacts", "corpus"] {
        for (name, input) in kept_inputs(&fuzz.join(dir).join(target.name)) {
            runs += 1;
            if let Err(e) = run_one(target, &name, &input) {
                failures.push(e);
            }
        }
    }
    eprintln!("{}: {} seeds, {runs} inputs", target.name, seeds.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn target(name: &str) -> &'static Target {
    match TARGETS.iter().find(|t| t.name == name) {
        Some(t) => t,
        None => panic!("no fuzz target {name}"),
    }
}

#[test]
fn every_target_is_replayed_here() {
    let listed: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    let dir = repo_root().join("fuzz/fuzz_targets");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| Some(e.file_name().to_str()?.strip_suffix(".rs")?.to_string()))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    assert_eq!(files, sorted, "fuzz/fuzz_targets and TARGETS differ");
}

#[test]
fn truncations_and_flips_are_fixed_and_change_the_seed() {
    let seed: Vec<u8> = (0..=99).collect();
    assert_eq!(flips(&seed, 3), flips(&seed, 3));
    assert!(flips(&seed, 3).iter().all(|f| f.len() == seed.len()));
    assert!(flips(&seed, 3).iter().any(|f| *f != seed));
    let cuts: Vec<usize> = truncations(&seed).iter().map(Vec::len).collect();
    assert_eq!(cuts, [0, 1, 33, 50, 66, 99]);
    assert!(flips(&[], 1).is_empty());
}

#[test]
fn parquet() {
    replay(target("parquet"));
}

#[test]
fn npz() {
    replay(target("npz"));
}

#[test]
fn jpeg() {
    replay(target("jpeg"));
}

#[test]
fn tfrecord() {
    replay(target("tfrecord"));
}

#[test]
fn session_files() {
    replay(target("session_files"));
}

#[test]
fn session_dir() {
    replay(target("session_dir"));
}

#[test]
fn config() {
    replay(target("config"));
}

#[test]
fn thresholds() {
    replay(target("thresholds"));
}

#[test]
fn elf() {
    replay(target("elf"));
}

#[test]
fn python() {
    replay(target("python"));
}
