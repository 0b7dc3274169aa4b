//! Real-framework scenario suite (root): training-data pipelines written
//! with the frameworks people train with, not by this project's
//! benchmark: PyTorch's DataLoader (workers by fork, spawn and forkserver,
//! restarted every epoch, stopped mid-training, or none: the trainer
//! loading its own batches, decoding JPEGs, reading NumPy files from a
//! throttled disk with a cold cache or fetching them over HTTP through a
//! shaped link; workers reading from a FUSE mount), tf.data, fio with its
//! sync, libaio and io_uring engines behind a blkio throttle, an HTTP
//! loader behind a shaped link between network namespaces, Python thread
//! pools (GIL-bound, and I/O-bound behind a throttle) and forked pyarrow
//! workers whose results are collected only at the end. The workloads are
//! tests/frameworks/*.py (each documents its scenario).
//!
//! The truth of each scenario is set by control runs inside this test,
//! never by storprof's answer (DS-Analyzer's differential method): the
//! loader alone at zero compute against the consumer alone on in-memory
//! data, or the same loader without its throttle or shaping. A margin
//! below 1.5x is a broken scenario, and fails as such. Each scenario then
//! runs under `storprof diagnose`; the verdict must be the truth, and the
//! kernel's AU within 5 points of the workload's own where it reports one
//! (or the verdict must say why the workload's own counts GIL waits as
//! compute). The suite prints, per scenario, the control figures, the
//! verdict, both AUs and the consumer.
//!
//! `STORPROF_CONTROL_RUNS=N` takes each control's median of N runs (1 by
//! default: CI time); `STORPROF_FRAMEWORKS=a,b` runs only the scenarios
//! whose names start with one of those. Needs the venv of
//! scripts/setup-dlio.sh (torch, tensorflow-cpu, pyarrow) and fio; under
//! CI=true their absence fails the test.
use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use crate::support;
use crate::support::{STORPROF, Throttle, assert_root, dlio_venv, read_json, run_within};

/// What one run of a scenario script reported (`SCENARIO_RESULT {json}`).
#[derive(Clone, Debug)]
struct Measured {
    items_per_s: f64,
    /// The whole process's CPU, start-up included.
    cpu_s: f64,
    /// Its CPU over the timed `seconds` only, when the script reports it.
    cpu_s_timed: Option<f64>,
    seconds: f64,
    au: Option<f64>,
    bytes_per_s: Option<f64>,
}

/// The scenario scripts' place and the interpreter that runs them.
struct Ctx {
    python: PathBuf,
    scripts: PathBuf,
    work: PathBuf,
    control_runs: usize,
}

impl Ctx {
    fn script(&self, name: &str) -> String {
        self.scripts.join(name).to_string_lossy().into_owned()
    }

    /// `python SCRIPT ARGS` as argv.
    fn py(&self, script: &str, args: &[&str]) -> Vec<String> {
        let mut v = vec![
            self.python.to_string_lossy().into_owned(),
            self.script(script),
        ];
        v.extend(args.iter().map(|s| s.to_string()));
        v
    }

    /// Runs `argv` to its end; its result line.
    fn measure(&self, argv: &[String]) -> Measured {
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]).current_dir(&self.work);
        let out = run_within(c, Duration::from_secs(240), &argv.join(" "));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{} failed: {}\n{stdout}\n{}",
            argv.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        result_line(&stdout).unwrap_or_else(|| panic!("no SCENARIO_RESULT from {argv:?}: {stdout}"))
    }

    /// The median rate of `self.control_runs` runs of `argv`, and the runs.
    fn control(&self, argv: &[String]) -> (f64, Vec<Measured>) {
        let runs: Vec<Measured> = (0..self.control_runs).map(|_| self.measure(argv)).collect();
        let mut rates: Vec<f64> = runs.iter().map(|m| m.items_per_s).collect();
        rates.sort_by(f64::total_cmp);
        (rates[rates.len() / 2], runs)
    }

    /// Prepares a script's dataset under `data`.
    fn prep(&self, script: &str, data: &Path, extra: &[&str]) {
        let mut args = vec!["prep", "--data", data.to_str().expect("utf-8 path")];
        args.extend(extra);
        let argv = self.py(script, &args);
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]);
        let out = run_within(c, Duration::from_secs(300), &format!("{script} prep"));
        assert!(
            out.status.success(),
            "{script} prep failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The `SCENARIO_RESULT {json}` line of a script's output.
fn result_line(stdout: &str) -> Option<Measured> {
    let json: serde_json::Value = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("SCENARIO_RESULT "))
        .and_then(|j| serde_json::from_str(j).ok())?;
    Some(Measured {
        items_per_s: json["items_per_s"].as_f64()?,
        cpu_s: json["cpu_s"].as_f64().unwrap_or(0.0),
        cpu_s_timed: json["cpu_s_timed"].as_f64(),
        seconds: json["seconds"].as_f64().unwrap_or(0.0),
        au: json["au_percentage"].as_f64(),
        bytes_per_s: json["bytes_per_s"].as_f64(),
    })
}

/// The truth a scenario's controls set.
fn truth_by_rates(
    name: &str,
    loader: f64,
    consumer: f64,
    reader_kind: &'static str,
) -> &'static str {
    let (hi, lo) = (loader.max(consumer), loader.min(consumer));
    assert!(
        lo > 0.0 && hi / lo >= 1.5,
        "{name}: broken scenario: loader alone {loader:.2}/s against consumer alone \
         {consumer:.2}/s is no 1.5x margin either way"
    );
    if loader > consumer {
        "compute-bound"
    } else {
        reader_kind
    }
}

/// What storprof said about one scenario.
struct Diagnosis {
    verdict: serde_json::Value,
    workload: Option<Measured>,
}

impl Diagnosis {
    fn id(&self) -> &str {
        self.verdict["verdict"].as_str().unwrap_or("?")
    }
    fn kernel_au(&self) -> Option<f64> {
        self.verdict["kernel_au_percentage"].as_f64()
    }
    fn consumer(&self) -> String {
        self.verdict["consumers"]
            .as_array()
            .and_then(|c| c.first())
            .map_or_else(
                || "none".to_string(),
                |c| format!("{}/{}", c["comm"].as_str().unwrap_or("?"), c["tid"]),
            )
    }
    fn notes(&self) -> Vec<String> {
        self.verdict["notes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect()
    }
}

/// `storprof diagnose --live off OPTIONS --output WORK/NAME -- argv`.
fn diagnose(ctx: &Ctx, name: &str, options: &[&str], argv: &[String]) -> Diagnosis {
    let session = ctx.work.join(name);
    let mut c = Command::new(STORPROF);
    c.args(["diagnose", "--live", "off"])
        .args(options)
        .arg("--output")
        .arg(&session)
        .arg("--")
        .args(argv)
        .current_dir(&ctx.work);
    let out = run_within(c, Duration::from_secs(300), name);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "storprof diagnose ({name}) failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Diagnosis {
        verdict: read_json(&session.join("verdict.json")),
        workload: result_line(&stdout),
    }
}

/// One scenario's figures and answer.
struct Outcome {
    name: String,
    truth: &'static str,
    controls: String,
    diagnosis: Diagnosis,
}

impl Outcome {
    /// What is wrong with it, if anything.
    fn problems(&self) -> Vec<String> {
        let d = &self.diagnosis;
        let mut out = Vec::new();
        if d.id() != self.truth {
            out.push(format!(
                "{}: truth {}, storprof says {} ({})",
                self.name,
                self.truth,
                d.id(),
                d.verdict["headline"].as_str().unwrap_or("")
            ));
        }
        if let (Some(k), Some(w)) = (d.kernel_au(), d.workload.as_ref().and_then(|m| m.au))
            && (k - w).abs() > 5.0
            && !d.notes().iter().any(|n| n.contains("GIL"))
        {
            out.push(format!(
                "{}: kernel AU {k:.1}% is more than 5 points from the workload's {w:.1}%",
                self.name
            ));
        }
        out
    }
}

/// Whether scenario `name` is selected by `STORPROF_FRAMEWORKS`.
fn selected(name: &str) -> bool {
    std::env::var("STORPROF_FRAMEWORKS").map_or(true, |list| {
        list.split(',')
            .any(|p| !p.is_empty() && name.starts_with(p.trim()))
    })
}

fn fmt_rate(x: f64) -> String {
    format!("{x:.1}/s")
}

mod fuse;
mod network;
mod scenarios;

#[test]
#[ignore = "needs root"]
fn real_framework_scenarios() {
    assert_root();
    let Some(venv) = dlio_venv() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs target/dlio-venv (scripts/setup-dlio.sh)"
        );
        eprintln!("skipping: no venv with torch and tensorflow (run scripts/setup-dlio.sh)");
        return;
    };
    let tmp = support::scratch("frameworks");
    let ctx = Ctx {
        python: venv.join("bin/python"),
        scripts: support::repo().join("tests/frameworks"),
        work: tmp.path().to_path_buf(),
        control_runs: std::env::var("STORPROF_CONTROL_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n >= 1)
            .unwrap_or(1),
    };
    let mut outcomes: Vec<Outcome> = Vec::new();
    for (name, run) in scenarios::ALL {
        if !selected(name) {
            continue;
        }
        let started = Instant::now();
        let outcome = run(&ctx, name);
        if !outcome.problems().is_empty() {
            support::keep_failed_session("frameworks", &ctx.work.join(name), name);
        }
        eprintln!(
            "{name}: {} ({:.0} s)",
            outcome.diagnosis.id(),
            started.elapsed().as_secs_f64()
        );
        outcomes.push(outcome);
    }
    println!(
        "\n{:<24} {:<18} {:<18} {:>6} {:>8} {:>8}  {:<22} controls",
        "scenario", "truth", "storprof", "conf", "AU kern", "AU own", "consumer"
    );
    let mut wrong = Vec::new();
    for o in &outcomes {
        let d = &o.diagnosis;
        let au = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |a| format!("{a:.1}%"));
        println!(
            "{:<24} {:<18} {:<18} {:>6.2} {:>8} {:>8}  {:<22} {}",
            o.name,
            o.truth,
            d.id(),
            d.verdict["confidence"].as_f64().unwrap_or(0.0),
            au(d.kernel_au()),
            au(d.workload.as_ref().and_then(|m| m.au)),
            d.consumer(),
            o.controls
        );
        wrong.extend(o.problems());
    }
    let right = outcomes.iter().filter(|o| o.problems().is_empty()).count();
    println!(
        "\nreal-framework scenarios: {right}/{} right ({:.0}%)",
        outcomes.len(),
        100.0 * right as f64 / outcomes.len().max(1) as f64
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A blkio throttle of `bps` on the device of `path`, and the cgroup's
/// `cgroup.procs`: a command run as `sh -c 'echo $$ > PROCS && exec ...'`
/// reads through it.
fn throttle(path: &Path, bps: u64) -> (Throttle, PathBuf) {
    let t = Throttle::new(path, bps).expect("blkio cgroup v1 throttling available");
    let procs = t.dir.join("cgroup.procs");
    (t, procs)
}

/// `sh -c 'echo $$ > PROCS && exec ARGV'`.
fn in_cgroup(procs: &Path, argv: &[String]) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!("echo $$ > {} && exec {}", procs.display(), argv.join(" ")),
    ]
}
