//! What `run_bench_on` does once training ended: DLIO's metrics and the
//! measured figures, the results directory's files, the `[METRIC]` block
//! and `dlio.log`.
use super::*;
use crate::storage::RequestCounts;

/// DLIO's metrics of a finished run and what was measured beside them.
pub(super) struct RunOutcome {
    /// Each rank's block metrics.
    pub(super) per_rank_blocks: Vec<Vec<BlockMetrics>>,
    /// Epochs (from the first) the metrics cover.
    pub(super) counted: usize,
    pub(super) metrics: RunMetrics,
    /// The signal that stopped the run early, if one did.
    pub(super) interrupted_by: Option<i32>,
    pub(super) interruption: Option<Interruption>,
    pub(super) measured: Measured,
}

/// Computes DLIO's metrics from every rank's timings, and the measured
/// figures (with the storage's requests since `requests_before`).
pub(super) fn measure_outcome(
    opts: &BenchOptions,
    storage: &dyn Storage,
    p: &Prepared,
    result: &TrainResult,
    exclude: ExcludeSteps,
    requests_before: Option<RequestCounts>,
) -> RunOutcome {
    let (per_rank_blocks, counted, metrics) = dlio_metrics(p, result, exclude);
    let interrupted_by = result
        .interrupted
        .then(|| interrupt::received().unwrap_or(libc::SIGINT));
    let interruption = interrupted_by.map(|sig| interruption_at(p, result, sig, counted));
    let measured = Measured::new(
        opts.reader.name().to_string(),
        p.cfg.odirect,
        result.read_total(),
        result.elapsed,
        p.cfg.record_size_dlio(),
        p.cfg.record_size_real(),
        &metrics,
    )
    .with_requests(
        storage
            .request_counts()
            .map(|now| requests_before.map_or(now, |b| now.since(&b))),
    );
    RunOutcome {
        per_rank_blocks,
        counted,
        metrics,
        interrupted_by,
        interruption,
        measured,
    }
}

/// Writes the results directory: every rank's files, `summary.json` and
/// mlpstorage's run record. Returns the summary and the checkpoint
/// metrics (if the run saved checkpoints).
pub(super) fn write_result_files(
    opts: &BenchOptions,
    p: &Prepared,
    results_dir: &Path,
    trained: &Trained,
    outcome: &RunOutcome,
    validity: &rules::RunValidity,
    end: &DateTime<Local>,
) -> Result<(serde_json::Value, Option<TrainingCheckpointMetrics>), BenchError> {
    let result = &trained.result;
    std::fs::create_dir_all(results_dir).map_err(io(results_dir))?;
    let started = result.started;
    let wall = move |secs: f64| {
        let t: DateTime<Local> = started + chrono::Duration::microseconds((secs * 1e6) as i64);
        output::ts(&t)
    };
    let checkpoint_bytes = p
        .plan
        .checkpoints
        .as_ref()
        .map_or(0, |c| c.checkpoint_bytes(p.plan.comm_size));
    let checkpoint_metrics = checkpoint_metrics_of(p, result, checkpoint_bytes);
    let host_of_rank = |rank: usize| {
        trained
            .rank_hosts
            .get(rank)
            .and_then(|&h| trained.hosts.get(h))
            .map(|h| h.hostname.clone())
            .unwrap_or_default()
    };
    write_rank_files(
        results_dir,
        &p.plan,
        result,
        &outcome.per_rank_blocks,
        &host_of_rank,
        checkpoint_bytes,
        &wall,
    )?;
    let facts = SummaryFacts {
        start: output::ts(&started),
        end: output::ts(end),
        num_accelerators: p.plan.comm_size,
        num_files_train: p.cfg.num_files_train,
        num_files_eval: p.cfg.num_files_eval,
        num_samples_per_file: p.cfg.num_samples_per_file,
        epochs: p.cfg.epochs,
        dataset_bytes: p.dataset_bytes,
        hosts: trained.hosts.clone(),
        interrupted: outcome.interruption.clone(),
    };
    let mut summary = output::summary_json(&facts, &outcome.metrics, &outcome.measured);
    if let serde_json::Value::Object(o) = &mut summary {
        o.insert(
            "run_rules".into(),
            serde_json::to_value(validity).unwrap_or_default(),
        );
        if let (Some(c), Some(cm)) = (&p.plan.checkpoints, &checkpoint_metrics) {
            add_checkpoint_summary(o, c, cm, result);
        }
    }
    write_json(&results_dir.join("summary.json"), &summary)?;
    write_mlpstorage_files(opts, p, results_dir, &started, &summary)?;
    Ok((summary, checkpoint_metrics))
}

/// Says where the outputs went, prints the `[METRIC]` block (and the
/// interruption line) through the console, then writes its log to
/// `dlio.log`.
pub(super) fn print_metrics_and_log(
    console: &ConsoleObserver,
    p: &Prepared,
    results_dir: &Path,
    outcome: &RunOutcome,
    checkpoint_metrics: Option<&TrainingCheckpointMetrics>,
) -> Result<(), BenchError> {
    let now = Local::now();
    console.say(&now, &format!("Saved outputs in {}", results_dir.display()));
    let block = output::metric_block_with_checkpoints(
        p.plan.comm_size,
        &outcome.metrics,
        checkpoint_metrics,
        Some(&outcome.measured),
        &output::ts(&Local::now()),
    );
    console.raw(&block);
    if let Some(i) = &outcome.interruption {
        console.raw(&output::interruption_line(i));
    }
    let log_path = results_dir.join("dlio.log");
    std::fs::write(&log_path, console.log_text()).map_err(io(&log_path))
}

/// Copies the summary into the profiling session's folder when run under
/// one (`STORPROF_SESSION_DIR`).
pub(super) fn copy_summary_to_session(summary: &serde_json::Value) -> Result<(), BenchError> {
    if let Some(session) = std::env::var_os("STORPROF_SESSION_DIR") {
        let dst = PathBuf::from(session).join("bench-summary.json");
        write_json(&dst, summary)?;
    }
    Ok(())
}
