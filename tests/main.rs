//! storprof's integration tests, one module per area, in one test binary
//! (one link of the profiler and its dependencies instead of one per file).
//! Root-only tests are `#[ignore = "needs root"]`: `--include-ignored` as
//! root runs them too. One area: `cargo test --release -p storprof --test
//! integration -- AREA::` (e.g. `frameworks::`).
// Helpers outside #[test] functions may unwrap too (clippy.toml allows
// it inside them): a panic in a test's helper is that test's failure.
#![allow(clippy::unwrap_used)]

mod support;

mod analysis;
mod bench_signals;
mod checkpoint;
mod cli;
mod dlio;
mod export;
mod frameworks;
mod html;
mod live;
mod merge;
mod mpi;
mod multihost;
mod probes;
mod python_frames;
mod root_outputs;
mod root_record;
mod scenarios;
mod whatif;
mod write_scenarios;
