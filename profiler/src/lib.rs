//! storprof: one root-run session that says whether a training-data pipeline
//! is held back by the storage or by the reader, and proves it.
//!
//! Data flow:
//!
//! ```text
//!  probes (ebpf/probes, in the kernel)          benchmark (storprof-bench)
//!        │ maps / ring buffers                        │ summary.json
//!        ▼                                            ▼
//!  probes::  load + attach (the one kernel seam)      │
//!        │ raw counters, stack ids                    │
//!        ▼                                            │
//!  record::  follow the command, drain maps,          │
//!            symbolize, aggregate (pure) ──► session directory (session::model)
//!                                                     │
//!  analysis:: verdict (pure functions) ◄──────────────┘
//!        │
//!        ▼
//!  output::  flamegraph SVGs, timeline, report.md, evidence bundle
//! ```
pub mod analysis;
pub mod cli;
pub mod commands;
pub mod doctor;
pub mod merge;
pub mod output;
pub mod probes;
pub mod python;
pub mod record;
pub mod session;
pub mod symbolize;
pub mod unwind;
