//! storprof: one root-run session that says whether a training-data pipeline
//! is held back by the storage or by the reader, and proves it.
//!
//! The binary's library: the command line and the commands, which wire
//! the crates together. Each crate imports only the ones above it:
//!
//! ```text
//!  [storprof-common]   kernel/user types (no_std)      [storprof-bench]
//!        │                                              benchmark, DLIO
//!  [storprof-session]  the session directory: model, load, safe writes
//!        │
//!  [storprof-record]   probes, follow, drain, stacks ──► session directory
//!  [storprof-analysis] features, wait-for graph, rules: a Decision (data)
//!        │
//!  [storprof-report]   the decision in words, SVGs, report.md/html,
//!                      exports, evidence bundle
//!        │
//!  storprof (here)     cli ─► commands; live_verdict wires the analysis
//!                      into the recorder's live view; merge of hosts
//! ```

pub mod cli;
pub mod commands;
pub mod doctor;
pub mod live_verdict;
pub mod merge;

#[cfg(test)]
mod tests {
    #[test]
    fn the_recorder_and_the_benchmark_name_a_host_by_one_variable() {
        assert_eq!(
            storprof_record::select::HOST_LABEL_ENV,
            storprof_bench::output::HOST_LABEL_ENV
        );
    }
}
