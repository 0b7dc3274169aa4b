//! DLIO-compatible data generation and training emulation.
//!
//! The crate is a one-direction stack: each layer imports only from layers
//! below it (`layers` checks this in a unit test).
//!
//! ```text
//!  cli        clap arguments ─► run's options
//!  run        bench, datagen, sweep, MPI wiring, memory guard, signals:
//!             the only code that wires config, storage, readers, engine and output
//!  engine     ranks × read threads × prefetch, consumer sleeps computation_time
//!  output     [OUTPUT]/[METRIC] lines, summary.json (renders metrics' records)
//!  reader     SampleReader (raw | decode | dlio-legacy), shared `layout`;
//!             ReaderKind::storage_options says what storage a reader wants
//!  config     DLIO workload YAML + --param overrides ─► DlioConfig   (plain data)
//!  metrics    DLIO's formulas, pure; RankEpoch, ReadStats, BlockTimings (plain data)
//!  format     Parquet (flux) | NPZ (unet3d): writers, layout parsers; FormatKind
//!  storage    open(url, StorageOptions): local | O_DIRECT | S3 | in-memory; ReadKind
//!  error      BenchError
//! ```
//!
//! Data flow of a bench run:
//!
//! ```text
//!  config ─► run::bench ─► storage::open ─► reader::make_reader (per rank)
//!              │                                  ▲ sample indices
//!              └─► engine::run_training ──────────┘
//!                     │ RankEpoch (step timings, ReadStats)
//!                     ▼
//!              metrics (DLIO formulas) ──► output ([OUTPUT]/[METRIC], summary.json)
//!
//!  datagen: format::{parquet,npz} writers ──► Storage::create
//!  sweep:   the NP × RT grid of bench runs ──► table (markdown, CSV), AU projection, SVG plot
//! ```
pub mod cli;
pub mod config;
pub mod engine;
pub mod error;
pub mod format;
#[cfg(test)]
mod layers;
pub mod metrics;
pub mod output;
pub mod reader;
pub mod run;
pub mod storage;

pub use error::BenchError;
