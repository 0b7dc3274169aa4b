//! Golden tests for the `[METRIC]` block and `summary.json`.
//! Re-bless with `STORPROF_BLESS=1 cargo test -p storprof-bench --test integration -- golden::`
//! (outside CI missing golden files are created; under `CI=true` they fail).
use std::collections::BTreeMap;

use crate::common::golden;

use storprof_bench::metrics::{
    BlockTimings, ExcludeSteps, block_metrics, epoch_metrics, run_metrics,
};
use storprof_bench::output::{HostFacts, Measured, SummaryFacts, metric_block, summary_json};
use storprof_bench::reader::ReadStats;
use storprof_bench::storage::RequestCounts;

/// A flux-like run: 2 ranks, 2 epochs, deterministic step timings.
fn fixture() -> (storprof_bench::metrics::RunMetrics, Measured) {
    let block = |load: f64, compute: f64, steps: usize| {
        let mut b = BlockTimings::default();
        let mut t = 0.0;
        for i in 0..steps {
            let l = if i == 0 { 2.0 } else { load };
            b.load.push(l);
            b.proc.push(l + compute);
            b.compute.push(compute);
            t += l + compute;
        }
        b.end = t;
        b
    };
    let per_rank: Vec<Vec<_>> = [(0.25, 1.35), (0.5, 1.35)]
        .iter()
        .map(|&(load, compute)| {
            [10, 12]
                .iter()
                .map(|&steps| {
                    epoch_metrics(&[block_metrics(
                        &block(load, compute, steps),
                        48,
                        ExcludeSteps::default(),
                    )])
                })
                .collect()
        })
        .collect();
    let m = run_metrics(&per_rank, 65536.0, 0.90);
    let read = ReadStats {
        bytes_read: 48 * 20 * 2 * 2_164_832 * 3,
        requests: 4000,
        samples: 48 * 20 * 2,
        sample_bytes: 48 * 20 * 2 * 2_164_832,
    };
    // As over S3: 80 row groups of 99 MiB in 16 MiB parts, one footer GET per file.
    let requests = RequestCounts {
        get_requests: 80 * 7 + 4,
        get_bytes: 80 * 103_906_944 + 4 * 2_000,
        metadata_get_requests: 4,
        metadata_get_bytes: 4 * 2_000,
        data_reads: 80,
        data_get_requests: 80 * 7,
        data_get_bytes: 80 * 103_906_944,
        head_requests: 4,
        list_requests: 1,
        put_objects: 0,
        put_bytes: 0,
    };
    let measured = Measured::new("raw".into(), false, read, 40.0, 65536.0, 2_164_832.0, &m)
        .with_requests(Some(requests));
    (m, measured)
}

#[test]
fn metric_block_golden() {
    let (m, measured) = fixture();
    let text = metric_block(2, &m, Some(&measured), "2026-04-09T12:00:00.000000");
    // DLIO's exact wording, trailing space after the accelerator count.
    assert!(text.contains("[METRIC] Number of Simulated Accelerators: 2 \n"));
    assert!(text.contains("[METRIC] Training I/O Throughput (MB/second): "));
    assert!(
        text.contains("[STORPROF] WARNING"),
        "65536 vs real reads must disagree:\n{text}"
    );
    assert!(
        text.contains("[STORPROF] Requests: 564 GETs"),
        "per-kind requests line:\n{text}"
    );
    golden("metric_block.txt", &text);
}

fn keys(v: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    if let serde_json::Value::Object(m) = v {
        for (k, v) in m {
            let key = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            out.push(key.clone());
            // host_cpuinfo / host_meminfo contents are host facts, not schema.
            if !k.starts_with("host_") {
                keys(v, &key, out);
            }
        }
    }
}

#[test]
fn summary_json_golden() {
    let (m, measured) = fixture();
    let host = HostFacts {
        hostname: "testhost".into(),
        cpu_count: 2,
        processor_name: "Test CPU".into(),
        cpuinfo: BTreeMap::from([("model name".into(), "Test CPU".into())]),
        meminfo: BTreeMap::from([("MemTotal".into(), "25165824 kB".into())]),
        memory_gb: 24.0,
    };
    let facts = SummaryFacts {
        start: "2026-04-09T12:00:00.000000".into(),
        end: "2026-04-09T12:00:40.000000".into(),
        num_accelerators: 2,
        num_files_train: 4,
        num_files_eval: 0,
        num_samples_per_file: 288,
        epochs: 2,
        dataset_bytes: 4 * 626_240_692,
        hosts: vec![host],
        interrupted: None,
    };
    let v = summary_json(&facts, &m, &measured);
    let mut k = Vec::new();
    keys(&v, "", &mut k);
    k.sort();
    for want in [
        "start",
        "end",
        "num_accelerators",
        "num_hosts",
        "hostname",
        "num_files_train",
        "num_files_eval",
        "num_samples_per_file",
        "host_cpu_count",
        "host_processor_name",
        "potential_caching",
        "host_cpuinfo",
        "host_meminfo",
        "host_memory_GB",
        "data_size_per_host_GB",
        "epochs",
        "metric.train_au_percentage",
        "metric.train_au_mean_percentage",
        "metric.train_au_meet_expectation",
        "metric.train_au_stdev_percentage",
        "metric.train_throughput_samples_per_second",
        "metric.train_throughput_mean_samples_per_second",
        "metric.train_throughput_stdev_samples_per_second",
        "metric.train_io_mean_MB_per_second",
        "metric.train_io_stdev_MB_per_second",
        "measured.read_bytes",
        "measured.read_MiB_per_second",
        "measured.requests",
        "measured.read_amplification",
        "measured.record_size_bytes_real",
        "measured.requests_by_kind.get_requests",
        "measured.requests_by_kind.data_get_requests",
        "measured.requests_by_kind.metadata_get_requests",
    ] {
        assert!(k.iter().any(|x| x == want), "summary.json lacks {want}");
    }
    golden("summary_keys.txt", &(k.join("\n") + "\n"));
    golden(
        "summary.json",
        &(serde_json::to_string_pretty(&v).unwrap() + "\n"),
    );
}
