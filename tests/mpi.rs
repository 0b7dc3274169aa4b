//! `storprof bench`/`datagen` under `mpirun` on this host: 2 and 4 ranks
//! with exact per-rank shards and DLIO's metrics, and a hung or dead rank
//! ending the job with a message instead of a hang. Skipped (with the
//! reason printed) when mpirun is missing; ignored when storprof is built
//! without `--features storprof/mpi`.
#![allow(clippy::expect_used)]
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support;
use crate::support::{STORPROF as BIN, param_args, read_json, run_within};

const FILES: u64 = 8;
const SPF: u64 = 8;
const BATCH: u64 = 4;

fn skip_reason() -> Option<String> {
    if !cfg!(feature = "mpi") {
        return Some("storprof built without the mpi feature (--features storprof/mpi)".into());
    }
    let ok = Command::new("mpirun")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (!ok).then(|| "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)".into())
}

macro_rules! skip_unless_mpi {
    () => {
        if let Some(why) = skip_reason() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

fn params() -> Vec<String> {
    param_args(&[
        format!("dataset.num_files_train={FILES}"),
        format!("dataset.num_samples_per_file={SPF}"),
        "dataset.parquet.row_group_size=4".into(),
        "dataset.parquet.columns=[{name: t5_encodings, dtype: float32, size: 4096}, {name: timestamp, dtype: float32, size: 7}]".into(),
        format!("reader.batch_size={BATCH}"),
        "reader.read_threads=1".into(),
        "train.epochs=2".into(),
    ])
}

/// `mpirun -n N` on this host, the environment passed to every rank.
fn mpirun(n: usize, timeout_s: &str) -> Command {
    let mut c = Command::new("mpirun");
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        &n.to_string(),
    ])
    .args([
        "--mca",
        "btl",
        "self,tcp",
        "--mca",
        "btl_tcp_if_include",
        "lo",
    ])
    .args(["--mca", "oob_tcp_if_include", "lo"])
    .args(["-x", "STORPROF_MPI_TIMEOUT"])
    .env("STORPROF_MPI_TIMEOUT", timeout_s)
    .env_remove("STORPROF_HOST")
    .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    support::isolate_mpirun(&mut c);
    c
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

fn mpi_datagen(data: &Path, n: usize) {
    let mut c = mpirun(n, "60");
    c.args([
        BIN,
        "datagen",
        "--workload",
        "flux",
        "--client-memory-gb",
        "1",
        "--data-dir",
    ])
    .arg(data)
    .args(params())
    .arg("--results-dir")
    .arg(data.join("datagen-record"));
    let out = run_within(c, Duration::from_secs(120), "mpirun");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("All {n} ranks: {FILES} files")),
        "{stdout}"
    );
}

fn bench_cmd(n: usize, data: &Path, results: &Path, timeout_s: &str) -> Command {
    let mut c = mpirun(n, timeout_s);
    c.args([
        BIN,
        "bench",
        "--workload",
        "flux",
        "--computation-time",
        "0.01",
        "--data-dir",
    ])
    .arg(data)
    .arg("--results-dir")
    .arg(results)
    .args(params());
    c
}

fn check_run(n: usize, data: &Path, results: &Path) {
    let out = run_within(
        bench_cmd(n, data, results, "60"),
        Duration::from_secs(180),
        "mpirun",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One [METRIC] block, printed by rank 0 only.
    assert_eq!(
        stdout
            .matches(&format!(
                "[METRIC] Number of Simulated Accelerators: {n} \n"
            ))
            .count(),
        1,
        "{stdout}"
    );
    let steps = SPF * FILES / BATCH / n as u64;
    assert!(stdout.contains(&format!(
        "Max steps per epoch: {steps} = {SPF} * {FILES} / {BATCH} / {n}"
    )));

    let s = read_json::<Value>(&results.join("summary.json"));
    assert_eq!(s["num_accelerators"], n);
    assert_eq!(s["num_hosts"], 1);
    assert_eq!(s["host_names"], serde_json::json!([hostname()]));
    assert_eq!(s["host_memory_GB"].as_array().unwrap().len(), 1);
    assert!(s.get("interrupted").is_none());

    // Exact shards: rank r owns samples [r⌈T/P⌉, (r+1)⌈T/P⌉), i.e. files
    // r·F/P .. (r+1)·F/P here, and read exactly steps × batch samples per epoch.
    let total = FILES * SPF;
    let per_rank = total.div_ceil(n as u64);
    let mut per_rank_epochs = Vec::new();
    for r in 0..n as u64 {
        let o = read_json::<Value>(&results.join(format!("{r}_output.json")));
        let f = &o["storprof"];
        assert_eq!(f["rank"], r, "{f}");
        assert_eq!(f["comm_size"], n);
        assert_eq!(f["host"], hostname());
        assert_eq!(
            f["epoch1_samples"],
            serde_json::json!([r * per_rank, (r + 1) * per_rank])
        );
        let files: Vec<String> = (r * per_rank / SPF..(r + 1) * per_rank / SPF)
            .map(|i| format!("img_{i}_of_{FILES}.parquet"))
            .collect();
        assert_eq!(f["epoch1_files"], serde_json::json!(files), "rank {r}");
        assert_eq!(f["samples_read"], steps * BATCH * 2, "rank {r}");

        // Per block: DLIO's formulas over the rank's own step lists.
        let mut epochs = Vec::new();
        for e in ["1", "2"] {
            let compute: Vec<f64> =
                serde_json::from_value(o[e]["compute"]["block1"].clone()).unwrap();
            let proc_: Vec<f64> = serde_json::from_value(o[e]["proc"]["block1"].clone()).unwrap();
            assert_eq!(compute.len() as u64, steps);
            let au = o[e]["au"]["block1"].as_f64().unwrap();
            let tp = o[e]["throughput"]["block1"].as_f64().unwrap();
            let counted: f64 = compute[1..].iter().sum();
            assert!(au > 0.0 && au <= 100.0, "rank {r} epoch {e}: AU {au}");
            // AU = 100·Σcompute[1:]/total_time and throughput = (n−2)/total_time·batch
            // must describe the same total_time, which covers at least Σproc[1:].
            let total_time = 100.0 * counted / au;
            let expect_tp = (compute.len() - 2) as f64 / total_time * BATCH as f64;
            assert!(
                (tp - expect_tp).abs() <= 1e-9 * expect_tp.max(1.0),
                "{tp} vs {expect_tp}"
            );
            assert!(total_time + 1e-9 >= proc_[1..].iter().sum::<f64>());
            epochs.push(storprof_bench::metrics::EpochMetrics {
                steps: compute.len(),
                au_percentage: au,
                throughput_samples_per_second: tp,
            });
        }
        per_rank_epochs.push(epochs);
    }
    // Across ranks: AU averaged, throughput summed, then mean/stdev over epochs.
    let m = storprof_bench::metrics::run_metrics(&per_rank_epochs, 65536.0, 0.90);
    let sm = &s["metric"];
    let close = |a: f64, b: &Value| (a - b.as_f64().unwrap()).abs() <= 1e-9 * a.abs().max(1.0);
    assert!(
        close(m.train_au_mean_percentage, &sm["train_au_mean_percentage"]),
        "{sm}"
    );
    assert!(close(
        m.train_throughput_mean_samples_per_second,
        &sm["train_throughput_mean_samples_per_second"]
    ));
    assert!(close(
        m.train_au_stdev_percentage,
        &sm["train_au_stdev_percentage"]
    ));
    assert_eq!(
        sm["train_au_meet_expectation"],
        m.train_au_meet_expectation.as_str()
    );
}

#[test]
#[cfg_attr(not(feature = "mpi"), ignore = "needs --features storprof/mpi")]
fn bench_under_mpirun_2_and_4_ranks() {
    skip_unless_mpi!();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    mpi_datagen(&data, 2);
    for n in [2, 4] {
        check_run(n, &data, &tmp.path().join(format!("results-{n}")));
    }
}

#[test]
#[cfg_attr(not(feature = "mpi"), ignore = "needs --features storprof/mpi")]
fn checkpoints_during_training_under_mpirun_are_saved_by_every_rank() {
    skip_unless_mpi!();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    mpi_datagen(&data, 2);
    let results = tmp.path().join("results");
    let ck = tmp.path().join("checkpoints");
    const MODEL: u64 = 300_001;
    let mut c = bench_cmd(2, &data, &results, "60");
    c.args(param_args(&[
        "workflow.checkpoint=True".to_string(),
        format!("checkpoint.checkpoint_folder={}", ck.display()),
        "checkpoint.type=all_ranks".into(),
        format!("model.model_size={MODEL}"),
    ]));
    let out = run_within(c, Duration::from_secs(180), "mpirun");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // After each of the two epochs (DLIO's defaults 1, 1), named with the
    // step after the epoch's last, one file per rank.
    let steps = SPF * FILES / BATCH / 2;
    let mut dirs: Vec<String> = std::fs::read_dir(&ck)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    assert_eq!(
        dirs,
        vec![
            format!("global_epoch1_step{}", steps + 1),
            format!("global_epoch2_step{}", steps + 1)
        ]
    );
    for d in &dirs {
        for r in 0..2 {
            let f = ck.join(d).join(format!("model_states-{r}.pt"));
            assert_eq!(std::fs::metadata(&f).unwrap().len(), MODEL, "{f:?}");
        }
    }
    let s = read_json::<Value>(&results.join("summary.json"));
    assert_eq!(s["checkpoint"]["saved"], 2, "{s}");
    assert_eq!(s["checkpoint"]["bytes_written_all_ranks"], 4 * MODEL);
    assert!(
        s["metric"]["save_checkpoint_duration_mean_seconds"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // Each rank timed its own saves.
    for r in 0..2 {
        let stats = read_json::<Value>(&results.join(format!("{r}_per_epoch_stats.json")));
        for e in ["1", "2"] {
            let save = &stats[e]["save_ckpt1"];
            assert_eq!(save["bytes_written"], MODEL, "rank {r}: {stats}");
            assert!(save["duration"].as_f64().unwrap() > 0.0);
        }
    }
    // One [METRIC] block (rank 0's) with DLIO's checkpoint lines.
    assert_eq!(
        stdout
            .matches("[METRIC] Checkpoint save duration (seconds): ")
            .count(),
        1,
        "{stdout}"
    );
}

#[test]
#[cfg_attr(not(feature = "mpi"), ignore = "needs --features storprof/mpi")]
fn hung_or_dead_rank_ends_the_job_naming_it() {
    skip_unless_mpi!();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    mpi_datagen(&data, 2);
    for (signal, expect) in [
        (
            "STOP",
            format!("rank 1 on host {} did not reach barrier", hostname()),
        ),
        ("KILL", "rank 1".to_string()),
    ] {
        // Rank 1 is stopped (hangs) or killed (dies) half a second into the run.
        let mut c = mpirun(2, "3");
        let script = format!(
            "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then (sleep 0.5; kill -{signal} $$) & fi; exec \"$@\""
        );
        c.args([
            "sh",
            "-c",
            &script,
            "sh",
            BIN,
            "bench",
            "--workload",
            "flux",
        ])
        .args([
            "--computation-time",
            "0.05",
            "--epochs",
            "100",
            "--data-dir",
        ])
        .arg(&data)
        .arg("--results-dir")
        .arg(tmp.path().join(format!("results-{signal}")))
        // --epochs overrides the params' train.epochs.
        .args(params());
        let t0 = Instant::now();
        let out = run_within(c, Duration::from_secs(90), "mpirun");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "SIG{signal}: {stderr}");
        assert!(
            stderr.contains(&expect),
            "SIG{signal}: want '{expect}' in:\n{stderr}"
        );
        assert!(
            stderr.contains(&hostname()),
            "SIG{signal}: no host name in:\n{stderr}"
        );
        eprintln!("SIG{signal}: job ended after {:?}", t0.elapsed());
    }
}
