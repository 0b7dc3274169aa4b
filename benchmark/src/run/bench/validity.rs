//! MLPerf Storage's run rules on a prepared run: the dataset-size rule
//! and the checks `rules::assess` makes, and the lines a run prints
//! about them.
use super::*;

/// The run rules' verdict on a prepared run (dataset-size rule for the
/// client memory and hosts of `opts`, or this host's memory; read-thread cap).
pub fn run_validity(opts: &BenchOptions, p: &Prepared) -> rules::RunValidity {
    let memory_gb = opts
        .client_memory_gb
        .unwrap_or_else(|| HostFacts::read().memory_gb);
    let rule = config::dataset_size_rule(
        memory_gb,
        opts.num_client_hosts.max(1),
        p.plan.comm_size as u64,
        p.cfg.batch_size,
        p.cfg.num_samples_per_file,
        p.cfg.record_size_real(),
    );
    rules::assess(&p.cfg, rule, opts.division)
}

/// The lines a run prints about the run rules: the rule's figures and
/// mlpstorage's `RESULT:` line, then INVALID with each reason (the run goes on).
pub fn validity_messages(v: &rules::RunValidity) -> Vec<String> {
    let r = &v.size_rule;
    let mut out = vec![
        format!(
            "Dataset size rule: max(ceil(5 × memory / record) = {}, ceil(500 × accelerators × batch / samples per file) = {}) = {} files",
            r.min_files_bytes, r.min_files_samples, r.num_files_train
        ),
        r.result_line().to_string(),
    ];
    if v.valid {
        out.push(match v.division {
            Some(d) => format!("Run rules ({d} division): checks before the run passed"),
            None => "Run rules: checks before the run passed".to_string(),
        });
    } else {
        for reason in &v.reasons {
            out.push(format!("INVALID for a submission: {reason}"));
        }
    }
    out
}
