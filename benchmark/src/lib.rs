//! DLIO-compatible data generation and training emulation.
//!
//! ```text
//!  config (DLIO workload YAML + --param overrides)
//!     │
//!     ├─► datagen ──► format::{parquet,npz} writers ──► storage::Storage::put
//!     │
//!     └─► engine (ranks × read threads × prefetch, consumer sleeps computation_time)
//!            │ sample indices
//!            ▼
//!         reader::SampleReader (raw | decode | dlio-legacy) over format × storage
//!            │ step timings, ReadStats
//!            ▼
//!         metrics (DLIO formulas, pure) ──► output ([OUTPUT]/[METRIC], summary.json)
//!
//!  sweep: the NP × RT grid of bench runs ──► table (markdown, CSV), AU projection, SVG plot
//! ```
pub mod cli;
pub mod config;
pub mod datagen;
pub mod engine;
pub mod error;
pub mod format;
pub mod metrics;
pub mod output;
pub mod reader;
pub mod storage;
pub mod sweep;

pub use error::BenchError;
