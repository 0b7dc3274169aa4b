//! storprof: one root-run session that says whether a training-data pipeline
//! is held back by the storage or by the reader, and proves it.
//!
//! Data flow (crates in brackets; each imports only the ones above it):
//!
//! ```text
//!  probes (ebpf/probes, in the kernel)          benchmark (storprof-bench)
//!        │ maps / ring buffers                        │ summary.json
//!        ▼                                            ▼
//!  probes::  load + attach (the one kernel seam)      │
//!        │ raw counters, stack ids                    │
//!        ▼                                            │
//!  record::  follow the command, drain maps,          │
//!            symbolize, aggregate (pure) ──► session directory
//!                                              [storprof-session]
//!                                                     │
//!  [storprof-analysis] features, wait-for graph, ◄────┘
//!        │             rules: a Decision (data)
//!        ▼
//!  output::  the decision in words (Diagnosis), flamegraph SVGs, timeline,
//!            report.md, report.html, exports, evidence bundle
//! ```

pub mod cli;
pub mod commands;
pub mod doctor;
pub mod merge;
pub mod probes;
pub mod python;
pub mod record;
pub mod symbolize;
pub mod unwind;
