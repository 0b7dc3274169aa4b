//! The scenarios of tests/frameworks.rs: each prepares its data, runs its
//! controls, derives its truth from them and runs the workload under
//! `storprof diagnose`.
use std::{fs, path::Path, process::Command, time::Duration};

use super::*;

pub type Run = fn(&Ctx, &str) -> Outcome;

/// Every scenario, in the order they run.
pub const ALL: &[(&str, Run)] = &[
    ("torch-npy-epochs", torch_npy_epochs),
    ("torch-jpeg-spawn", torch_jpeg_spawn),
    ("torch-jpeg-forkserver", torch_jpeg_forkserver),
    ("torch-jpeg-in-process", torch_jpeg_in_process),
    (
        "torch-npy-in-process-throttled",
        torch_npy_in_process_throttled,
    ),
    ("torch-stopped-workers", torch_stopped_workers),
    ("tfdata-short-step", tfdata_short_step),
    ("tfdata-long-step", tfdata_long_step),
    ("fio-io_uring-throttled", fio_io_uring),
    ("fio-libaio-throttled", fio_libaio),
    ("fio-psync-throttled", fio_psync),
    ("http-shaped-link", network::http_shaped_link),
    ("torch-http-in-process", network::torch_http_in_process),
    ("torch-npy-fuse", fuse::torch_npy_fuse),
    ("pool-gil", pool_gil),
    ("pool-io-throttled", pool_io_throttled),
    ("arrow-workers-no-trainer", arrow_workers),
];

pub(super) fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The PyTorch dataset (both kinds), made once.
pub(super) fn torch_data(ctx: &Ctx) -> String {
    let data = ctx.work.join("torch-data");
    ctx.prep("torch_train.py", &data, &[]);
    path_str(&data)
}

/// A PyTorch scenario: controls of `loader_args` against the consumer
/// alone, then the job with `job_args`.
fn torch(ctx: &Ctx, name: &str, loader_args: &[&str], job_args: &[&str]) -> Outcome {
    let data = torch_data(ctx);
    let with = |mode: &str, extra: &[&str]| {
        let mut args = vec![mode, "--data", data.as_str()];
        args.extend(extra);
        ctx.py("torch_train.py", &args)
    };
    // Several epochs so that a fast loader runs its whole 3 s.
    let mut loader = loader_args.to_vec();
    loader.extend(["--epochs", "50", "--duration", "3"]);
    let (l, _) = ctx.control(&with("loader", &loader));
    let (c, _) = ctx.control(&with("consumer", &["--duration", "3"]));
    let truth = truth_by_rates(name, l, c, "cpu-bound-reader");
    let diagnosis = diagnose(ctx, name, &[], &with("job", job_args));
    Outcome {
        name: name.into(),
        truth,
        controls: format!("loader {} / consumer {}", fmt_rate(l), fmt_rate(c)),
        diagnosis,
    }
}

/// Cached NumPy files, one forked worker, restarted every epoch: the
/// trainer is the limit.
fn torch_npy_epochs(ctx: &Ctx, name: &str) -> Outcome {
    torch(
        ctx,
        name,
        &["--data-kind", "npy"],
        &["--data-kind", "npy", "--epochs", "3", "--duration", "12"],
    )
}

/// JPEGs decoded and augmented with Pillow by two spawned workers.
fn torch_jpeg_spawn(ctx: &Ctx, name: &str) -> Outcome {
    torch(
        ctx,
        name,
        &["--data-kind", "jpeg", "--start", "spawn"],
        &["--data-kind", "jpeg", "--start", "spawn", "--epochs", "3"],
    )
}

/// The same with forkserver workers (Python 3.14's default start method).
fn torch_jpeg_forkserver(ctx: &Ctx, name: &str) -> Outcome {
    torch(
        ctx,
        name,
        &["--data-kind", "jpeg", "--start", "forkserver"],
        &[
            "--data-kind",
            "jpeg",
            "--start",
            "forkserver",
            "--persistent-workers",
            "--epochs",
            "3",
        ],
    )
}

/// The same JPEGs loaded by the trainer's own thread (`num_workers=0`,
/// PyTorch's default): no worker and no data wait, the fetching is the
/// trainer's own CPU inside the DataLoader's `next()`.
fn torch_jpeg_in_process(ctx: &Ctx, name: &str) -> Outcome {
    torch(
        ctx,
        name,
        &["--data-kind", "jpeg", "--workers", "0"],
        &["--data-kind", "jpeg", "--workers", "0", "--epochs", "3"],
    )
}

/// The command of the PyTorch job in `mode` over the NumPy samples, read
/// by the trainer's own thread (`num_workers=0`), with `extra` arguments.
pub(super) fn npy_in_process(ctx: &Ctx, data: &str, mode: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![mode, "--data", data, "--data-kind", "npy", "--workers", "0"];
    args.extend(extra);
    ctx.py("torch_train.py", &args)
}

/// Cached-nowhere NumPy samples loaded by the trainer's own thread
/// (`num_workers=0`) from a throttled disk: the trainer blocks on the
/// device inside its own `next()`. Each run starts with the dataset out of
/// the page cache; an epoch (130 MB) outlasts a throttled run, so no
/// sample is read twice.
fn torch_npy_in_process_throttled(ctx: &Ctx, name: &str) -> Outcome {
    let data = torch_data(ctx);
    let npy = Path::new(&data).join("npy");
    let with = |mode: &str, extra: &[&str]| npy_in_process(ctx, &data, mode, extra);
    let loader = ["--epochs", "50", "--duration", "3"];
    support::evict(&npy);
    let (free, _) = ctx.control(&with("loader", &loader));
    let (t, procs) = throttle(&npy, 5 << 20);
    support::evict(&npy);
    let (l, _) = ctx.control(&in_cgroup(&procs, &with("loader", &loader)));
    let (c, _) = ctx.control(&with("consumer", &["--duration", "3"]));
    let truth = truth_by_rates(name, l, c, "storage-bound");
    assert!(
        free / l >= 1.5,
        "{name}: broken scenario: {free:.1}/s unthrottled against {l:.1}/s"
    );
    support::evict(&npy);
    let diagnosis = diagnose(ctx, name, &[], &in_cgroup(&procs, &with("job", &[])));
    drop(t);
    Outcome {
        name: name.into(),
        truth,
        controls: format!(
            "loader {} (uncached, unthrottled {}) / consumer {}",
            fmt_rate(l),
            fmt_rate(free),
            fmt_rate(c)
        ),
        diagnosis,
    }
}

/// The DataLoader's workers SIGSTOPped 3 s into training: the job hangs.
/// The truth is the job's own progress report (nothing trained after the
/// stop); storprof records 16 s and judges a stall from 6 s of no
/// progress (`stall_s`, a documented threshold, instead of its default
/// minute, for the test's time).
fn torch_stopped_workers(ctx: &Ctx, name: &str) -> Outcome {
    let data = torch_data(ctx);
    let thresholds = ctx.work.join("stall-thresholds.json");
    fs::write(&thresholds, r#"{"stall_s": 6}"#).expect("write thresholds");
    let job = ctx.py(
        "torch_train.py",
        &[
            "job",
            "--data",
            &data,
            "--data-kind",
            "npy",
            "--epochs",
            "100",
            "--stop-workers-after",
            "3",
        ],
    );
    let session = ctx.work.join(name);
    let mut c = Command::new(STORPROF);
    c.args([
        "diagnose",
        "--live",
        "off",
        "--duration",
        "16",
        "--thresholds",
    ])
    .arg(&thresholds)
    .arg("--output")
    .arg(&session)
    .arg("--")
    .args(&job)
    .current_dir(&ctx.work);
    let out = run_within(c, Duration::from_secs(120), name);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // storprof exits with the command's status: 143, its SIGTERM.
    assert!(
        session.join("verdict.json").exists(),
        "{name}: storprof wrote no verdict ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let progress: serde_json::Value = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("SCENARIO_PROGRESS "))
        .and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or_else(|| panic!("{name}: no progress line: {stdout}"));
    let after = progress["items_after_stop"].as_u64().unwrap_or(u64::MAX);
    let quiet = progress["seconds_after_stop"].as_f64().unwrap_or(0.0);
    let before = progress["items_before_stop"].as_u64().unwrap_or(0);
    assert!(
        before > 0 && after == 0 && quiet >= 8.0,
        "{name}: broken scenario: {progress}"
    );
    Outcome {
        name: name.into(),
        truth: "stalled",
        controls: format!("{before} trained, then none for {quiet:.0} s"),
        diagnosis: Diagnosis {
            verdict: read_json(&session.join("verdict.json")),
            workload: None,
        },
    }
}

/// A tf.data pipeline with a Python step of `step` ("short" or "long").
fn tfdata(ctx: &Ctx, name: &str, step: &str) -> Outcome {
    let data = ctx.work.join("tfdata-data");
    ctx.prep("tfdata_train.py", &data, &[]);
    let data = path_str(&data);
    let with = |mode: &str, extra: &[&str]| {
        let mut args = vec![mode, "--data", data.as_str(), "--step", step];
        args.extend(extra);
        ctx.py("tfdata_train.py", &args)
    };
    let (l, _) = ctx.control(&with("loader", &["--duration", "3"]));
    let (c, _) = ctx.control(&with("consumer", &["--duration", "3"]));
    let truth = truth_by_rates(name, l, c, "cpu-bound-reader");
    let diagnosis = diagnose(ctx, name, &[], &with("job", &[]));
    Outcome {
        name: name.into(),
        truth,
        controls: format!("loader {} / consumer {}", fmt_rate(l), fmt_rate(c)),
        diagnosis,
    }
}

fn tfdata_short_step(ctx: &Ctx, name: &str) -> Outcome {
    tfdata(ctx, name, "short")
}

fn tfdata_long_step(ctx: &Ctx, name: &str) -> Outcome {
    tfdata(ctx, name, "long")
}

/// fio's read rate (MiB/s) and CPU share (usr + sys, 0..1) from its JSON.
fn fio_figures(stdout: &str) -> (f64, f64) {
    let start = stdout.find('{').unwrap_or(0);
    let json: serde_json::Value =
        serde_json::from_str(&stdout[start..]).unwrap_or(serde_json::Value::Null);
    let job = &json["jobs"][0];
    let bw = job["read"]["bw"].as_f64().unwrap_or(0.0) / 1024.0;
    let cpu =
        (job["usr_cpu"].as_f64().unwrap_or(0.0) + job["sys_cpu"].as_f64().unwrap_or(0.0)) / 100.0;
    (bw, cpu)
}

/// Random 128 KiB O_DIRECT reads by fio's `engine` through a 20 MiB/s
/// blkio throttle: storage-bound when the same fio runs far faster
/// without the throttle while using little CPU.
fn fio(ctx: &Ctx, name: &str, engine: &str) -> Outcome {
    let file = ctx.work.join("fio.dat");
    if !file.exists() {
        let status = Command::new("fio")
            .args([
                "--name=prep",
                "--rw=write",
                "--bs=1M",
                "--size=256M",
                "--direct=1",
            ])
            .arg(format!("--filename={}", file.display()))
            .arg("--output=/dev/null")
            .status()
            .expect("run fio (apt-get install fio)");
        assert!(status.success(), "fio could not write its file");
    }
    let argv = |runtime: u32| -> Vec<String> {
        [
            "fio",
            "--name=reader",
            "--rw=randread",
            "--bs=128k",
            "--direct=1",
            "--iodepth=8",
            "--time_based",
            "--output-format=json",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            format!("--filename={}", file.display()),
            format!("--ioengine={engine}"),
            format!("--runtime={runtime}"),
        ])
        .collect()
    };
    let run = |cmd: Vec<String>| -> (f64, f64) {
        let mut c = Command::new(&cmd[0]);
        c.args(&cmd[1..]);
        let out = run_within(c, Duration::from_secs(60), name);
        assert!(out.status.success(), "{name}: {cmd:?} failed");
        fio_figures(&String::from_utf8_lossy(&out.stdout))
    };
    let (free, _) = run(argv(3));
    let (t, procs) = throttle(&file, 20 << 20);
    let (held, cpu) = run(in_cgroup(&procs, &argv(3)));
    assert!(
        held > 0.0 && free / held >= 1.5 && cpu < 0.3,
        "{name}: broken scenario: {free:.1} MiB/s unthrottled, {held:.1} MiB/s throttled at \
         {:.0}% CPU",
        cpu * 100.0
    );
    let diagnosis = diagnose(ctx, name, &[], &in_cgroup(&procs, &argv(8)));
    drop(t);
    Outcome {
        name: name.into(),
        truth: "storage-bound",
        controls: format!(
            "{free:.0} MiB/s free / {held:.1} MiB/s throttled, CPU {:.0}%",
            cpu * 100.0
        ),
        diagnosis,
    }
}

fn fio_io_uring(ctx: &Ctx, name: &str) -> Outcome {
    fio(ctx, name, "io_uring")
}

fn fio_libaio(ctx: &Ctx, name: &str) -> Outcome {
    fio(ctx, name, "libaio")
}

fn fio_psync(ctx: &Ctx, name: &str) -> Outcome {
    fio(ctx, name, "psync")
}

/// A ThreadPoolExecutor of 4 threads parsing CSV in pure Python for a
/// consumer that sleeps 2 ms a step: the GIL serializes the pool.
fn pool_gil(ctx: &Ctx, name: &str) -> Outcome {
    let data = ctx.work.join("pool-gil-data");
    ctx.prep("pool_train.py", &data, &["--kind", "gil"]);
    let data = path_str(&data);
    let with = |mode: &str, extra: &[&str]| {
        let mut args = vec![mode, "--data", data.as_str(), "--kind", "gil"];
        args.extend(extra);
        ctx.py("pool_train.py", &args)
    };
    let (l, _) = ctx.control(&with("loader", &["--duration", "3"]));
    let (one, _) = ctx.control(&with("loader", &["--duration", "3", "--threads", "1"]));
    let (c, _) = ctx.control(&with("consumer", &["--duration", "3"]));
    let truth = truth_by_rates(name, l, c, "cpu-bound-reader");
    let diagnosis = diagnose(ctx, name, &[], &with("job", &[]));
    Outcome {
        name: name.into(),
        truth,
        controls: format!(
            "loader {} (1 thread {}) / consumer {}",
            fmt_rate(l),
            fmt_rate(one),
            fmt_rate(c)
        ),
        diagnosis,
    }
}

/// The same pool reading 1-4 MiB files with O_DIRECT through a 20 MiB/s
/// throttle.
fn pool_io_throttled(ctx: &Ctx, name: &str) -> Outcome {
    let data = ctx.work.join("pool-io-data");
    ctx.prep("pool_train.py", &data, &["--kind", "io"]);
    let data = path_str(&data);
    let with = |mode: &str, extra: &[&str]| {
        let mut args = vec![mode, "--data", data.as_str(), "--kind", "io"];
        args.extend(extra);
        ctx.py("pool_train.py", &args)
    };
    let (free, _) = ctx.control(&with("loader", &["--duration", "3"]));
    let (t, procs) = throttle(Path::new(&data), 20 << 20);
    let (l, _) = ctx.control(&in_cgroup(&procs, &with("loader", &["--duration", "3"])));
    let (c, _) = ctx.control(&with("consumer", &["--duration", "3"]));
    let truth = truth_by_rates(name, l, c, "storage-bound");
    assert!(
        free / l >= 1.5,
        "{name}: broken scenario: {free:.1}/s unthrottled against {l:.1}/s"
    );
    let diagnosis = diagnose(ctx, name, &[], &in_cgroup(&procs, &with("job", &[])));
    drop(t);
    Outcome {
        name: name.into(),
        truth,
        controls: format!(
            "loader {} (unthrottled {}) / consumer {}",
            fmt_rate(l),
            fmt_rate(free),
            fmt_rate(c)
        ),
        diagnosis,
    }
}

/// Two forked workers reading Parquet with pyarrow's pools and formatting
/// a dict per sample, their results collected only at the end: the
/// readers' CPU is the limit when reading the same bytes alone is far
/// faster and the workers are on a CPU most of their time.
fn arrow_workers(ctx: &Ctx, name: &str) -> Outcome {
    let data = ctx.work.join("arrow-data");
    ctx.prep("arrow_workers.py", &data, &[]);
    let data = path_str(&data);
    let with = |mode: &str| ctx.py("arrow_workers.py", &[mode, "--data", data.as_str()]);
    let (_, raw) = ctx.control(&with("read-only"));
    let (_, job) = ctx.control(&with("job"));
    let (raw_bps, job_bps) = (
        raw[0].bytes_per_s.unwrap_or(0.0),
        job[0].bytes_per_s.unwrap_or(0.0),
    );
    let busy = job[0].cpu_s / (job[0].seconds.max(1e-9) * 2.0);
    assert!(
        job_bps > 0.0 && raw_bps / job_bps >= 1.5 && busy >= 0.5,
        "{name}: broken scenario: read-only {raw_bps:.0} B/s, job {job_bps:.0} B/s, workers \
         busy {busy:.2}"
    );
    let diagnosis = diagnose(ctx, name, &[], &with("job"));
    Outcome {
        name: name.into(),
        truth: "cpu-bound-reader",
        controls: format!(
            "read-only {:.0} MB/s / decoding {:.1} MB/s, workers busy {:.0}%",
            raw_bps / 1e6,
            job_bps / 1e6,
            busy * 100.0
        ),
        diagnosis,
    }
}
