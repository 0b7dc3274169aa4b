//! Outputs of the analysis, one module each: flamegraph SVGs (inferno),
//! the timeline SVG, report.md (+ verdict.json), `system.json` facts and the
//! evidence bundle (tar.gz, secrets redacted).
//!
//! ```text
//! Session + Analysis ──► flamegraph::write_*   ─► flamegraph-{oncpu,offcpu}.svg
//!                    ──► timeline::render      ─► timeline.svg
//!                    ──► report::render        ─► report.md, verdict.json
//! system::collect ─────► system.json ──► bundle::write ─► storprof-….tar.gz
//! ```
pub mod flamegraph;
