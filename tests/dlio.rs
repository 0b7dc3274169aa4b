//! The real DLIO benchmark under `storprof diagnose` (root): PyPI's
//! dlio-benchmark 2.0.0 with a real PyTorch `torch.utils.data.DataLoader`
//! (forked `pt_data_worker` processes, their queue feeder threads, the
//! pin-memory thread, mpi4py's singleton MPI start), installed into its own
//! venv by scripts/setup-dlio.sh. Nothing here was written for storprof:
//! the datasets come from DLIO's own generator, and its AU is read from its
//! own summary.json.
//!
//! Three runs, each labelled with the verdict it must get, and the kernel's
//! AU within 3 points of DLIO's:
//! - compute-bound: 1 MiB NPZ samples, one a step, 64 steps of 0.25 s of
//!   emulated compute;
//! - cpu-bound-reader: 8,192 small NPZ files, where DLIO's reader formats
//!   its whole index map into a debug string for every sample (the
//!   `logging.debug(f"{self.global_index_map}")` of storage #330), so the
//!   workers' CPU goes to CPython string formatting;
//! - storage-bound: the 8 MiB files evicted from the page cache and read
//!   through a 24 MiB/s blkio throttle;
//! - retinanet-shaped: one ~320 KB JPEG per sample decoded by PIL, workers
//!   started by spawn (each re-imports DLIO, TensorFlow and PyTorch for
//!   seconds while the trainer waits), recorded from the interpreter's
//!   start: cpu-bound-reader over a window that leaves the start-up out.
//!
//! A checkpointing run: DLIO's PyTorch checkpointing saves a 500 MB model
//! from the trainer's own thread after every epoch; DLIO's AU counts only
//! its steps (above 80%), the trainer's window includes the saves:
//! checkpoint-bound, with both AUs in a note.
//!
//! A further run stops early (`--until-verdict 10`) on the cpu-bound-reader
//! settings: the verdict must be about the DataLoader's training, not
//! about DLIO's start-up.
//!
//! storprof finds DLIO's summary.json through `++hydra.run.dir` and puts it
//! in the session, so the verdict carries DLIO's AU beside the kernel's.
//!
//! Without the venv the test says so and passes outside CI; under CI=true
//! it fails (scripts/test.sh installs it).
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use crate::support;
use crate::support::{STORPROF, Throttle, assert_root, dlio_venv, read_json, run_within};

/// DLIO's unet3d_a100 workload (NPZ, PyTorch loader) with `overrides`
/// (`++workload.KEY=VALUE` hydra overrides), its outputs in `run_dir`.
fn dlio_command(venv: &Path, data: &Path, run_dir: &Path, overrides: &[String]) -> Vec<String> {
    let checkpoint = "++workload.workflow.checkpoint=";
    let mut cmd = vec![
        venv.join("bin/dlio_benchmark")
            .to_string_lossy()
            .into_owned(),
        "workload=unet3d_a100".into(),
    ];
    if !overrides.iter().any(|o| o.starts_with(checkpoint)) {
        cmd.push(format!("{checkpoint}False"));
    }
    cmd.extend([
        format!("++workload.dataset.data_folder={}", data.display()),
        "++workload.dataset.record_length_stdev=0".into(),
        format!("++hydra.run.dir={}", run_dir.display()),
    ]);
    cmd.extend(overrides.iter().cloned());
    cmd
}

/// DLIO's own data generation: `files` files of `record_bytes` in DLIO's
/// `format` (npz, jpeg).
fn generate(venv: &Path, data: &Path, format: &str, files: u32, record_bytes: u64, work: &Path) {
    let cmd = dlio_command(
        venv,
        data,
        &work.join(format!("datagen-{format}-{files}")),
        &[
            "++workload.workflow.generate_data=True".into(),
            "++workload.workflow.train=False".into(),
            format!("++workload.dataset.format={format}"),
            format!("++workload.dataset.num_files_train={files}"),
            format!("++workload.dataset.record_length={record_bytes}"),
        ],
    );
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..]).current_dir(work);
    let out = run_within(c, Duration::from_secs(300), "DLIO data generation");
    assert!(
        out.status.success(),
        "DLIO datagen failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The training overrides of a run over `files` files of `record_bytes`.
fn training(files: u32, record_bytes: u64, extra: &[&str]) -> Vec<String> {
    let mut v = vec![
        "++workload.workflow.generate_data=False".to_string(),
        "++workload.workflow.train=True".into(),
        format!("++workload.dataset.num_files_train={files}"),
        format!("++workload.dataset.record_length={record_bytes}"),
        "++workload.reader.read_threads=2".into(),
    ];
    v.extend(extra.iter().map(|s| format!("++workload.{s}")));
    v
}

struct Run {
    name: &'static str,
    expected: &'static str,
    verdict: serde_json::Value,
    dlio_au: f64,
}

/// DLIO's own output directory of run `name` (its summary.json).
fn run_dir(work: &Path, name: &str) -> PathBuf {
    work.join(format!("dlio-{name}"))
}

/// `storprof diagnose OPTIONS --output WORK/NAME -- cmd`, which must
/// succeed: the session directory.
fn run_diagnose(work: &Path, name: &str, options: &[&str], cmd: &[String]) -> PathBuf {
    let session = work.join(name);
    let mut c = Command::new(STORPROF);
    c.arg("diagnose")
        .args(options)
        .arg("--output")
        .arg(&session)
        .arg("--")
        .args(cmd)
        .current_dir(work);
    let out = run_within(c, Duration::from_secs(300), name);
    assert!(
        out.status.success(),
        "storprof diagnose of DLIO ({name}) failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    session
}

/// The checkpointing run: checkpoint-bound by the trainer's own time, with
/// DLIO's (step-only) AU beside it in a note; what is wrong goes to `wrong`.
fn check_checkpoint_run(r: &Run, checkpoints: &Path, wrong: &mut Vec<String>) {
    let v = &r.verdict;
    let got = v["verdict"].as_str().unwrap_or("?");
    println!(
        "checkpoint: {got}, AU kernel {:?}, AU DLIO {:.1}: {}",
        v["kernel_au_percentage"].as_f64(),
        r.dlio_au,
        v["headline"].as_str().unwrap_or("")
    );
    let saved = fs::read_dir(checkpoints).map_or(0, |d| {
        d.filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("model-"))
            .count()
    });
    if saved < 2 {
        wrong.push(format!(
            "checkpoint: DLIO saved {saved} model checkpoint(s)"
        ));
    }
    if got != r.expected {
        wrong.push(format!("checkpoint: expected {}, got {got}", r.expected));
    }
    let writes = &v["features"]["consumer"]["writes"];
    let own = writes["own_share"].as_f64().unwrap_or(0.0);
    if own < 0.25 || writes["write_bytes"].as_u64().unwrap_or(0) < 500_000_000 {
        wrong.push(format!("checkpoint: the trainer's own writes: {writes}"));
    }
    if r.dlio_au < 80.0 {
        wrong.push(format!(
            "checkpoint: DLIO's AU {:.1}% (its steps should keep up)",
            r.dlio_au
        ));
    }
    let notes = v["notes"].as_array().cloned().unwrap_or_default();
    if !notes.iter().any(|n| {
        n.as_str()
            .unwrap_or("")
            .contains("leaves checkpoint time out")
    }) {
        wrong.push(format!("checkpoint: no note on DLIO's AU: {notes:?}"));
    }
}

/// `storprof diagnose -- cmd`: its verdict.json, and DLIO's AU from the
/// summary.json in [`run_dir`].
fn diagnose(work: &Path, name: &'static str, expected: &'static str, cmd: &[String]) -> Run {
    let session = run_diagnose(work, name, &["--live", "off"], cmd);
    let summary: serde_json::Value = read_json(&run_dir(work, name).join("summary.json"));
    let dlio_au = summary["metric"]["train_au_mean_percentage"]
        .as_f64()
        .expect("DLIO's summary.json has train_au_mean_percentage");
    Run {
        name,
        expected,
        verdict: read_json(&session.join("verdict.json")),
        dlio_au,
    }
}

#[test]
#[ignore = "needs root"]
fn real_dlio_benchmark_verdicts() {
    assert_root();
    let Some(venv) = dlio_venv() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs the DLIO venv (scripts/setup-dlio.sh, run by scripts/test.sh)"
        );
        eprintln!("skipping: no DLIO venv (run scripts/setup-dlio.sh)");
        return;
    };
    let tmp = support::scratch("dlio");
    let work = tmp.path();
    const LARGE: u64 = 8 << 20;
    const SMALL: u64 = 64 << 10;
    // retinanet's record length; DLIO's JPEGs of random pixels come out
    // near 180 KB.
    const JPEG: u64 = 322_957;
    let large = work.join("data-large");
    let small = work.join("data-small");
    let jpeg = work.join("data-jpeg");
    generate(&venv, &large, "npz", 24, LARGE, work);
    // The compute-bound run's 64 steps of 0.25 s: a sleep that the probes
    // now and then count as time on a CPU (see the README's known limits)
    // weighs 1.6 points of its AU, not the 5 of 24 steps.
    const MID: u64 = 1 << 20;
    let mid = work.join("data-mid");
    generate(&venv, &mid, "npz", 64, MID, work);
    generate(&venv, &small, "npz", 8192, SMALL, work);
    // One epoch of 4,096 files: 170 steps of batch 24. The training
    // window after the spawned workers' start-up is then about 14 s; with
    // 2,048 files it was 4 whole seconds, in which one slow moment moved
    // the kernel's AU 4 points from DLIO's (75.6% against 71.6%).
    const JPEG_FILES: u32 = 4096;
    generate(&venv, &jpeg, "jpeg", JPEG_FILES, JPEG, work);

    let mut runs = Vec::new();
    let cmd = |data: &Path, name: &str, overrides: Vec<String>| {
        dlio_command(&venv, data, &run_dir(work, name), &overrides)
    };
    runs.push(diagnose(
        work,
        "compute-bound",
        "compute-bound",
        &cmd(
            &mid,
            "compute-bound",
            training(
                64,
                MID,
                // One epoch: DLIO leaves each epoch's first step out of
                // its AU, the kernel's window runs across epochs.
                &[
                    "reader.batch_size=1",
                    "train.epochs=1",
                    "train.computation_time=0.25",
                ],
            ),
        ),
    ));
    runs.push(diagnose(
        work,
        "cpu-bound-reader",
        "cpu-bound-reader",
        &cmd(
            &small,
            "cpu-bound-reader",
            training(
                8192,
                SMALL,
                &[
                    "reader.batch_size=4",
                    "train.epochs=1",
                    "train.total_training_steps=500",
                    "train.computation_time=0.002",
                ],
            ),
        ),
    ));
    // retinanet's shape: batch 24 and b200's 0.04755 s of compute, JPEG
    // files decoded by PIL in spawned workers.
    runs.push(diagnose(
        work,
        "jpeg-spawn",
        "cpu-bound-reader",
        &cmd(
            &jpeg,
            "jpeg-spawn",
            training(
                JPEG_FILES,
                JPEG,
                &[
                    "dataset.format=jpeg",
                    "reader.multiprocessing_context=spawn",
                    "reader.batch_size=24",
                    // One epoch, as compute-bound: DLIO's AU is the mean of
                    // its epochs' AUs, each without its first step, which
                    // over two epochs put it 3.1 points above the kernel's
                    // one window (82.1% and 89.4% against 82.7%).
                    "train.epochs=1",
                    "train.computation_time=0.04755",
                ],
            ),
        ),
    ));
    // Cold data behind a throttle: 24 x 8 MiB at 24 MiB/s, about 8 s.
    support::evict(&large);
    let throttle = Throttle::new(&large, 24 << 20).expect("blkio cgroup v1 throttling available");
    let procs = throttle.dir.join("cgroup.procs");
    let inner = cmd(
        &large,
        "storage-bound",
        training(
            24,
            LARGE,
            &[
                "reader.batch_size=2",
                "train.epochs=1",
                "train.computation_time=0.01",
            ],
        ),
    );
    runs.push(diagnose(
        work,
        "storage-bound",
        "storage-bound",
        &[
            "sh".into(),
            "-c".into(),
            format!("echo $$ > {} && exec {}", procs.display(), inner.join(" ")),
        ],
    ));
    drop(throttle);

    // Checkpoints saved by the trainer itself: DLIO's PyTorchCheckpointing
    // torch.saves a 500 MB model after every epoch into the page cache.
    // DLIO's AU counts its steps only; the trainer's window includes the
    // saves, so the kernel's AU is far below DLIO's here on purpose.
    let checkpoints = work.join("checkpoints");
    let checkpoint_run = diagnose(
        work,
        "checkpoint",
        "checkpoint-bound",
        &cmd(
            &large,
            "checkpoint",
            training(
                24,
                LARGE,
                &[
                    "workflow.checkpoint=True",
                    &format!("checkpoint.checkpoint_folder={}", checkpoints.display()),
                    "checkpoint.checkpoint_after_epoch=1",
                    "checkpoint.epochs_between_checkpoints=1",
                    "checkpoint.model_size=500000000",
                    "reader.batch_size=2",
                    "train.epochs=3",
                    "train.computation_time=0.05",
                ],
            ),
        ),
    );

    // The answer while it runs: the #330 settings without a step limit,
    // stopped once the verdict held 10 s of training. DLIO's start-up
    // (imports reading .py files, a thread they wake) must not pass for
    // training. Two epochs: one is about 29 s of training, and in one
    // clean-clone CI run the workload ended (38 s) before the verdict had
    // held 10 s; the stop usually comes at about 27 s.
    let early = run_diagnose(
        work,
        "early-verdict",
        &["--live", "lines", "--until-verdict", "10"],
        &cmd(
            &small,
            "early-verdict",
            training(
                8192,
                SMALL,
                &[
                    "reader.batch_size=4",
                    "train.epochs=2",
                    "train.computation_time=0.002",
                ],
            ),
        ),
    );
    let early_verdict: serde_json::Value = read_json(&early.join("verdict.json"));
    let early_session: serde_json::Value = read_json(&early.join("session.json"));

    let mut wrong = Vec::new();
    check_checkpoint_run(&checkpoint_run, &checkpoints, &mut wrong);
    let early_window = early_verdict["window"]["start_s"].as_f64().unwrap_or(0.0);
    println!(
        "early-verdict: {} over {early_window:.1}-{:.1} s, AU kernel {:?}, end reason {}",
        early_verdict["verdict"],
        early_verdict["window"]["end_s"].as_f64().unwrap_or(0.0),
        early_verdict["kernel_au_percentage"].as_f64(),
        early_session["end_reason"]
    );
    if early_verdict["verdict"] != "cpu-bound-reader" || early_session["end_reason"] != "verdict" {
        wrong.push(format!(
            "early-verdict: {} (end reason {}), expected cpu-bound-reader reached early",
            early_verdict["verdict"], early_session["end_reason"]
        ));
    }
    // The DataLoader's workers feed the consumer: their window, not start-up's.
    let early_roles = early_verdict["roles"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !early_roles
        .iter()
        .any(|x| x["role"] == "loader" && x["comm"] == "pt_data_worker")
    {
        wrong.push(format!(
            "early-verdict: no pt_data_worker loader (window from {early_window:.1} s)"
        ));
    }
    println!(
        "\nreal DLIO          expected            got                 AU kernel  AU DLIO  headline"
    );
    for r in &runs {
        let got = r.verdict["verdict"].as_str().unwrap_or("?");
        let kernel_au = r.verdict["kernel_au_percentage"].as_f64();
        println!(
            "{:<18} {:<19} {:<19} {:>9}  {:>7.1}  {}",
            r.name,
            r.expected,
            got,
            kernel_au.map_or("-".into(), |a| format!("{a:.1}")),
            r.dlio_au,
            r.verdict["headline"].as_str().unwrap_or("")
        );
        if got != r.expected {
            wrong.push(format!("{}: expected {}, got {got}", r.name, r.expected));
        }
        if r.verdict["rules"] != "wait-graph" {
            wrong.push(format!("{}: not decided by the wait-for graph", r.name));
        }
        // DLIO's own summary.json is in the session, its AU in the verdict.
        let reported = r.verdict["features"]["bench"]["au_percentage"].as_f64();
        if reported.is_none_or(|a| (a - r.dlio_au).abs() > 1e-6) {
            wrong.push(format!(
                "{}: the verdict's workload AU {reported:?} is not DLIO's {:.4}",
                r.name, r.dlio_au
            ));
        }
        match kernel_au {
            Some(k) if (k - r.dlio_au).abs() > 3.0 => wrong.push(format!(
                "{}: kernel AU {k:.1}% vs DLIO's {:.1}% (more than 3 points apart)",
                r.name, r.dlio_au
            )),
            None => wrong.push(format!("{}: no consumer found", r.name)),
            _ => {}
        }
    }
    // The #330 cost is named: CPython string formatting in the workers.
    if let Some(r) = runs.iter().find(|r| r.name == "cpu-bound-reader") {
        let headline = r.verdict["headline"].as_str().unwrap_or("");
        if !headline.contains("formatting") {
            wrong.push(format!(
                "cpu-bound-reader: headline names no formatting: {headline}"
            ));
        }
    }
    // Spawned workers start for seconds: the window leaves that out.
    if let Some(r) = runs.iter().find(|r| r.name == "jpeg-spawn") {
        let start = r.verdict["window"]["start_s"].as_f64().unwrap_or(0.0);
        let first_phase = r.verdict["phases"][0]["name"].as_str().unwrap_or("");
        if start <= 0.0 || first_phase != "start-up" {
            wrong.push(format!(
                "jpeg-spawn: the window does not leave the start-up out (window from {start} s, first phase {first_phase:?})"
            ));
        }
    }
    // The consumer is DLIO's main thread, fed by the pt_data_worker processes.
    for r in &runs {
        let roles = r.verdict["roles"].as_array().cloned().unwrap_or_default();
        let consumer = roles.iter().find(|x| x["role"] == "consumer");
        let loaders = roles
            .iter()
            .filter(|x| x["role"] == "loader" && x["comm"] == "pt_data_worker")
            .count();
        match consumer {
            Some(c) if c["pid"] == c["tid"] && loaders > 0 => {}
            _ => wrong.push(format!(
                "{}: consumer {consumer:?}, {loaders} pt_data_worker loader(s)",
                r.name
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "real DLIO misdiagnosed:\n{}",
        wrong.join("\n")
    );
}
