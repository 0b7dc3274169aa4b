//! `storprof whatif` against re-runs, the short form of
//! scripts/check-whatif.sh: one lever per kind of limit, each case
//! recorded once under `storprof record`, the lever projected from that
//! recording, then applied for real and the bench run plain; the truth is
//! the bench's own AU (summary.json, DLIO's formula) of the plain runs:
//! - storage-bound: O_DIRECT reads through a 16 MiB/s blkio throttle,
//!   0.25 s of compute: storage ×2 is the throttle at 32 MiB/s;
//! - compute-bound: the raw reader on cached data, 0.2 s of compute:
//!   computation ×0.25 is 0.05 s.
//!
//! One recording and one plain run per figure, not the script's
//! medians: the bound is 10 AU points (the script's goal is 5), and the
//! direction must hold (a gain of 10 points or more projected and
//! measured, or none of either). The #330 reader's read-threads ×2 is not
//! here: the model projects two CPU-bound threads on 2 CPUs to double
//! (95%) where re-runs gave 74-86%, so one run of it fails by chance;
//! scripts/check-whatif.sh reports it with medians.
//!
//! Root only.
// Tests may unwrap (a failure is a test failure).
#![allow(clippy::expect_used)]

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

use crate::support::{STORPROF, Throttle, assert_root, read_json, record_with, scratch, storprof};

/// The small flux dataset of check-whatif.sh: 8 files of 16 samples,
/// 32 steps of 4.
const SMALL: [&str; 6] = [
    "--param",
    "dataset.num_files_train=8",
    "--param",
    "dataset.num_samples_per_file=16",
    "--param",
    "dataset.parquet_row_group_size=8",
];

/// The bench's command line over `data`, its results in `results`.
fn bench(
    data: &Path,
    results: &Path,
    reader: &str,
    rt: u32,
    comp: f64,
    odirect: bool,
) -> Vec<String> {
    let mut cmd: Vec<String> = vec![
        STORPROF.into(),
        "bench".into(),
        "--workload".into(),
        "flux".into(),
        "--data-dir".into(),
        data.display().to_string(),
        "--reader".into(),
        reader.into(),
        "--read-threads".into(),
        rt.to_string(),
        "--computation-time".into(),
        comp.to_string(),
        "--results-dir".into(),
        results.display().to_string(),
    ];
    cmd.extend(SMALL.iter().map(ToString::to_string));
    for p in ["reader.batch_size=4", "train.epochs=1"] {
        cmd.extend(["--param".to_string(), p.to_string()]);
    }
    if odirect {
        cmd.push("--odirect".into());
    }
    cmd
}

/// `cmd` as a shell line that first joins `throttle`'s cgroup, if any.
fn in_cgroup(cmd: &[String], throttle: Option<&Throttle>) -> Vec<String> {
    let Some(t) = throttle else {
        return cmd.to_vec();
    };
    let quoted: Vec<String> = cmd.iter().map(|a| format!("'{a}'")).collect();
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "echo $$ > {} && exec {}",
            t.dir.join("cgroup.procs").display(),
            quoted.join(" ")
        ),
    ]
}

/// The bench's own AU from the summary.json under `results`.
fn bench_au(results: &Path) -> f64 {
    let summary: Value = read_json(&results.join("summary.json"));
    summary["metric"]["train_au_mean_percentage"]
        .as_f64()
        .expect("train_au_mean_percentage")
}

/// Runs `cmd` plain; its AU.
fn run_plain(cmd: &[String], results: &Path) -> f64 {
    let out = Command::new(&cmd[0])
        .args(&cmd[1..])
        .output()
        .expect("run the bench");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    bench_au(results)
}

/// Records `cmd` into `session` and projects `lever` from it: (today's
/// AU in the model, the projected AU).
fn record_and_project(cmd: &[String], session: &Path, lever: &str) -> (f64, f64) {
    record_with(session, &["--live", "off"], cmd);
    let session_arg = session.display().to_string();
    let out = storprof(["whatif", &session_arg, "--json", "--lever", lever]);
    assert!(
        out.status.success(),
        "whatif: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Value = serde_json::from_slice(&out.stdout).expect("whatif --json");
    let row = &rows[0];
    let projected = row["projected_au_percentage"]
        .as_f64()
        .unwrap_or_else(|| panic!("{lever}: no projection: {row}"));
    (
        row["au_percentage"].as_f64().expect("today's AU"),
        projected,
    )
}

/// The projection against the re-run: within 10 points, the same way.
fn assert_holds(case: &str, model: f64, projected: f64, plain: f64, measured: f64) {
    let (gain_p, gain_m) = (projected - model, measured - plain);
    eprintln!(
        "{case}: model {model:.1} → projected {projected:.1}; plain {plain:.1} → measured {measured:.1}"
    );
    assert!(
        (projected - measured).abs() <= 10.0,
        "{case}: projected {projected:.1}% against {measured:.1}% re-run"
    );
    assert!(
        (gain_p >= 10.0) == (gain_m >= 10.0),
        "{case}: projected a change of {gain_p:+.1} points, the re-run {gain_m:+.1}"
    );
}

fn dataset(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    let out = Command::new(STORPROF)
        .args(["-q", "datagen", "--workload", "flux", "--data-dir"])
        .arg(&data)
        .args(SMALL)
        .arg("--results-dir")
        .arg(dir.join("datagen"))
        .output()
        .expect("run storprof datagen");
    assert!(
        out.status.success(),
        "datagen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    data
}

#[test]
#[ignore = "needs root"]
fn projections_hold_against_reruns_on_storage_and_compute_limits() {
    assert_root();
    let dir = scratch("whatif");
    let d = dir.path();
    let data = dataset(d);

    // Storage-bound: storage ×2.
    let slow = Throttle::new(&data, 16 << 20).expect("blkio cgroup v1 throttling available");
    let cmd = |name: &str| bench(&data, &d.join(name), "raw", 2, 0.25, true);
    let (model, projected) = record_and_project(
        &in_cgroup(&cmd("storage-recorded"), Some(&slow)),
        &d.join("storage-session"),
        "storage=2",
    );
    let plain = run_plain(
        &in_cgroup(&cmd("storage-plain"), Some(&slow)),
        &d.join("storage-plain"),
    );
    drop(slow);
    let fast = Throttle::new(&data, 32 << 20).expect("blkio cgroup v1 throttling available");
    let measured = run_plain(
        &in_cgroup(&cmd("storage-x2"), Some(&fast)),
        &d.join("storage-x2"),
    );
    drop(fast);
    assert_holds("storage ×2", model, projected, plain, measured);

    // Cached from here on: one plain read of every file.
    for entry in fs::read_dir(data.join("flux/train")).expect("the dataset") {
        let _ = fs::read(entry.expect("a file").path());
    }

    // Compute-bound: computation ×0.25.
    let cmd = |name: &str, comp: f64| bench(&data, &d.join(name), "raw", 2, comp, false);
    let (model, projected) = record_and_project(
        &cmd("compute-recorded", 0.2),
        &d.join("compute-session"),
        "computation=0.25",
    );
    let plain = run_plain(&cmd("compute-plain", 0.2), &d.join("compute-plain"));
    let measured = run_plain(&cmd("compute-short", 0.05), &d.join("compute-short"));
    assert_holds("computation ×0.25", model, projected, plain, measured);
}
