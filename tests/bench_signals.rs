//! `storprof bench` and Ctrl-C: SIGINT stops the run at a step boundary and
//! the results directory still gets summary.json (marked interrupted) and the
//! `[METRIC]` block. No root needed.
#![allow(clippy::expect_used)]
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{STORPROF as BIN, param_args};

/// 4 small flux files × 8 rows (~33 KiB per row).
fn params() -> Vec<String> {
    param_args(&[
        "dataset.num_files_train=4",
        "dataset.num_samples_per_file=8",
        "dataset.parquet.row_group_size=4",
        "dataset.parquet.columns=[{name: t5_encodings, dtype: float32, size: 8192}, {name: clip_encodings, dtype: float32, size: 409}, {name: timestamp, dtype: float32, size: 7}]",
        "reader.batch_size=4",
        "reader.read_threads=2",
    ])
}

fn datagen(dir: &Path) {
    let out = Command::new(BIN)
        .args([
            "datagen",
            "--workload",
            "flux",
            "--client-memory-gb",
            "1",
            "--data-dir",
        ])
        .arg(dir)
        .args(params())
        .arg("--results-dir")
        .arg(dir.join("datagen-record"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sigint_writes_summary_over_completed_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    datagen(&data);
    let results = tmp.path().join("results");
    // 8 steps per epoch of 50 ms compute, 1000 epochs: minutes unless interrupted.
    let mut child = Command::new(BIN)
        .args(["bench", "--workload", "flux", "--computation-time", "0.05"])
        .args(["--epochs", "1000", "--data-dir"])
        .arg(&data)
        .arg("--results-dir")
        .arg(&results)
        .args(params())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // Wait until epoch 2 has started, so epoch 1 is complete and counted.
    let mut seen = String::new();
    let mut line = String::new();
    while stdout.read_line(&mut line).unwrap() > 0 {
        seen.push_str(&line);
        let started_2 = line.contains("Starting epoch 2:");
        line.clear();
        if started_2 {
            break;
        }
    }
    assert!(seen.contains("Starting epoch 2:"), "{seen}");
    std::thread::sleep(Duration::from_millis(150));
    // SAFETY: kill(2) on our own child's pid with a valid signal number.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(rc, 0);
    let t0 = Instant::now();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "stopping took {:?}",
        t0.elapsed()
    );
    assert_eq!(
        status.code(),
        Some(130),
        "exit status 128 + SIGINT; stdout:\n{rest}"
    );
    assert!(
        rest.contains("[METRIC] Training Accelerator Utilization [AU] (%):"),
        "{rest}"
    );
    assert!(
        rest.contains("[STORPROF] Interrupted by SIGINT in epoch"),
        "{rest}"
    );

    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["interrupted"], serde_json::Value::Bool(true));
    let i = &summary["interruption"];
    assert_eq!(i["signal"], "SIGINT");
    let epoch = i["epoch"].as_u64().unwrap();
    assert!((2..1000).contains(&epoch), "{i}");
    let steps = i["steps_completed_in_epoch"].as_u64().unwrap();
    assert!(steps <= 8, "{i}");
    // Metrics over the completed epochs (plus the partial one when it has ≥ 3 steps).
    let counted = i["epochs_in_metrics"].as_u64().unwrap();
    let expect = if steps >= 3 { epoch } else { epoch - 1 };
    assert_eq!(counted, expect, "{i}");
    let au = summary["metric"]["train_au_percentage"].as_array().unwrap();
    assert_eq!(au.len() as u64, counted);
    let mean = summary["metric"]["train_au_mean_percentage"]
        .as_f64()
        .unwrap();
    assert!(mean > 0.0 && mean <= 100.0, "{summary}");
    assert!(
        summary["metric"]["train_throughput_mean_samples_per_second"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // The per-rank files hold every epoch that ran, the interrupted one included.
    let out: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("0_output.json")).unwrap())
            .unwrap();
    let last = &out[epoch.to_string()]["compute"]["block1"];
    assert_eq!(last.as_array().unwrap().len() as u64, steps);
    assert!(results.join("dlio.log").exists());
}
