//! storprof-bench's integration tests, one module per area, in one test
//! binary (one link of the crate and its dependencies instead of one per
//! file). One area: `cargo test --release -p storprof-bench --test
//! integration -- AREA::`.
// Helpers outside #[test] functions may unwrap too (clippy.toml allows
// it inside them): a panic in a test's helper is that test's failure.
#![allow(clippy::unwrap_used)]

mod common;
mod moto;

mod checkpoint;
mod checkpoint_s3;
mod dlrm;
mod e2e;
mod engine;
mod formats;
mod golden;
mod s3;
mod sweep;
mod train_checkpoint;
mod v3_workloads;
