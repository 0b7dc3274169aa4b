//! `storprof diagnose` with no command: the embedded demo, the README's main
//! job. The storage #330 story, found and fixed, in one command:
//!
//! ```text
//! cached flux dataset (generated once, real row size)
//!   ├─► record `storprof bench --reader dlio-legacy` ─► report ─► bundle
//!   ├─► record `storprof bench --reader raw`         ─► report ─► bundle
//!   └─► side-by-side verdicts (terminal + comparison.md)
//!       and the differential on-CPU flamegraph (legacy vs raw)
//! ```
//!
//! The bench runs as the same binary (`std::env::current_exe()`), so the
//! demo needs nothing but storprof and root.
use std::{
    fmt::Write as _,
    fs,
    io::{BufWriter, IsTerminal},
    path::{Path, PathBuf},
};
use storprof_report::diagnosis::Diagnosis;

use anyhow::Context;
use storprof_bench::{
    config::Workload,
    run::datagen::{self, DatagenOptions},
    storage::LocalStorage,
};

use storprof_analysis::Thresholds;
use storprof_record::RecordOptions;
use storprof_report::{
    self, BundleSessionOptions, ReportOptions,
    flamegraph::{self, FlamegraphOptions, Kind},
};
use storprof_session::safe_path::give_to_invoking_user;

/// How much data and work the demo uses.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DemoScale {
    /// 16 files × 8 rows of 2,164,832 B (≈ 277 MB); well under a minute on 2 cores.
    #[default]
    Default,
    /// 4 files × 8 rows (≈ 69 MB); for tests.
    Small,
}

impl DemoScale {
    fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Small => "small",
        }
    }

    /// DLIO keys of the dataset (datagen and bench must agree).
    fn dataset_params(self) -> Vec<String> {
        let (files, rows) = match self {
            // One row group per file, as DLIO's datagen writes it: the legacy
            // reader decodes the whole group for every sample.
            // Larger row groups shift the legacy reader's time into page
            // faults and kernel copies of its fresh decode buffers; 8-row
            // groups keep it a decode (user-space) pathology like #330's.
            Self::Default => (16, 8),
            Self::Small => (4, 8),
        };
        vec![
            format!("dataset.num_files_train={files}"),
            format!("dataset.num_samples_per_file={rows}"),
            format!("dataset.parquet.row_group_size={rows}"),
        ]
    }

    /// Bench keys besides the dataset: small batches so a run has enough
    /// steps to measure AU, and one computation time for both readers so the
    /// comparison is fair.
    fn bench_params() -> Vec<String> {
        vec![
            "reader.batch_size=4".to_string(),
            "train.epochs=1".to_string(),
        ]
    }
}

/// Seconds of simulated accelerator compute per step of 4 samples: the raw
/// reader delivers a batch from the page cache in a few ms, while the
/// dlio-legacy reader decodes a whole row group per sample (≈ 30 ms per
/// sample at the small scale even on an idle machine), so it cannot keep up.
pub const DEMO_COMPUTATION_TIME_S: f64 = 0.02;
/// Reader threads per accelerator in the demo (the machine may have 2 cores).
pub const DEMO_READ_THREADS: u32 = 2;
/// The two readers compared: the storage #330 reader and the fixed one.
pub const DEMO_READERS: [&str; 2] = ["dlio-legacy", "raw"];
/// Name of the differential flamegraph in the results directory.
pub const DEMO_DIFF_SVG: &str = "flamegraph-oncpu-diff-dlio-legacy-vs-raw.svg";
/// Name of the side-by-side table in the results directory.
pub const DEMO_COMPARISON: &str = "comparison.md";
/// Marker written into a generated dataset directory once it is complete.
const DATASET_MARKER: &str = ".storprof-demo-dataset.json";

/// Options of the demo. Defaults: cached data dir (see [`default_data_dir`]),
/// `storprof-demo-<time>` results, default scale, 99 Hz, default thresholds.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Dataset root; `None`: [`default_data_dir`].
    pub data_dir: Option<PathBuf>,
    /// Where sessions, bench results, the diff flamegraph and comparison.md go.
    pub results_dir: PathBuf,
    pub scale: DemoScale,
    pub freq_hz: u64,
    pub thresholds: Thresholds,
    /// Run the benches as root even under sudo.
    pub as_root: bool,
    /// The benches' standard output goes to standard error (`demo
    /// --json`: stdout is the JSON alone). Default false.
    pub command_stdout_to_stderr: bool,
}

/// `$XDG_CACHE_HOME/storprof/demo-data`, else `$HOME/.cache/storprof/demo-data`,
/// else `./storprof-demo-data`.
pub fn default_data_dir() -> PathBuf {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(x) = non_empty("XDG_CACHE_HOME") {
        return PathBuf::from(x).join("storprof/demo-data");
    }
    if let Some(h) = non_empty("HOME") {
        return PathBuf::from(h).join(".cache/storprof/demo-data");
    }
    PathBuf::from("storprof-demo-data")
}

/// `storprof-demo-YYYYmmdd-HHMMSS` in the current directory (local time).
pub fn default_results_dir() -> PathBuf {
    PathBuf::from(format!(
        "storprof-demo-{}",
        storprof_record::args::local_timestamp()
    ))
}

/// One reader's outcome.
pub struct DemoRun {
    pub reader: &'static str,
    pub session_dir: PathBuf,
    pub exit_code: i32,
    pub analysis: Diagnosis,
}

/// What the demo produced.
pub struct DemoOutcome {
    pub results_dir: PathBuf,
    pub runs: Vec<DemoRun>,
    pub diff_svg: PathBuf,
    pub comparison: String,
}

fn stage(msg: &str) {
    eprintln!("storprof demo: {msg}");
}

fn mkdir(dir: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    give_to_invoking_user(dir);
    Ok(())
}

/// Generates the dataset unless a complete one with the same parameters is
/// cached in `dir`. Returns whether it generated.
fn ensure_dataset(dir: &Path, scale: DemoScale) -> anyhow::Result<bool> {
    let params = scale.dataset_params();
    let marker = dir.join(DATASET_MARKER);
    let want = serde_json::json!({ "workload": "flux", "params": params });
    if let Ok(text) = fs::read_to_string(&marker)
        && serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .as_ref()
            == Some(&want)
    {
        return Ok(false);
    }
    mkdir(dir)?;
    let opts = DatagenOptions {
        workload: Some(Workload::Flux),
        params,
        data_dir: dir.to_path_buf(),
        force: true,
        progress: std::io::stderr().is_terminal(),
        print: false,
        ..DatagenOptions::default()
    };
    datagen::run_datagen(&opts, &LocalStorage::new("."))
        .with_context(|| format!("generating the demo dataset in {}", dir.display()))?;
    fs::write(&marker, want.to_string())
        .with_context(|| format!("cannot write {}", marker.display()))?;
    Ok(true)
}

fn bench_command(
    exe: &Path,
    data_dir: &Path,
    reader: &str,
    results: &Path,
    scale: DemoScale,
) -> Vec<String> {
    let mut cmd: Vec<String> = vec![
        exe.to_string_lossy().into_owned(),
        "bench".into(),
        "--workload".into(),
        "flux".into(),
        "--data-dir".into(),
        data_dir.to_string_lossy().into_owned(),
        "--reader".into(),
        reader.into(),
        "--read-threads".into(),
        DEMO_READ_THREADS.to_string(),
        "--computation-time".into(),
        DEMO_COMPUTATION_TIME_S.to_string(),
        "--results-dir".into(),
        results.to_string_lossy().into_owned(),
    ];
    for p in scale
        .dataset_params()
        .into_iter()
        .chain(DemoScale::bench_params())
    {
        cmd.push("--param".into());
        cmd.push(p);
    }
    cmd
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
}

/// The side-by-side table (markdown, readable on a terminal too).
pub fn comparison_table(runs: &[DemoRun]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| | {} |",
        runs.iter()
            .map(|r| r.reader)
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(s, "|---|{}", "---|".repeat(runs.len()));
    let row = |s: &mut String, name: &str, cell: &dyn Fn(&DemoRun) -> String| {
        let cells: Vec<String> = runs.iter().map(cell).collect();
        let _ = writeln!(s, "| {name} | {} |", cells.join(" | "));
    };
    let bench = |r: &DemoRun| r.analysis.features.bench.clone().unwrap_or_default();
    row(&mut s, "verdict", &|r| {
        format!(
            "**{}** ({})",
            r.analysis.verdict.verdict, r.analysis.verdict.confidence_label
        )
    });
    row(&mut s, "AU %", &|r| opt(bench(r).au_percentage, 1));
    row(&mut s, "samples/s", &|r| {
        opt(bench(r).throughput_samples_per_second, 1)
    });
    row(&mut s, "measured read MiB/s", &|r| {
        opt(bench(r).measured_read_mib_per_s, 1)
    });
    row(&mut s, "DLIO-derived MB/s", &|r| {
        opt(bench(r).derived_io_mib_per_s, 1)
    });
    row(&mut s, "headline", &|r| {
        r.analysis.verdict.headline.replace('|', "/")
    });
    row(&mut s, "what to try", &|r| {
        r.analysis
            .verdict
            .actions
            .first()
            .map_or_else(String::new, |a| a.replace('|', "/"))
    });
    s
}

/// Runs the demo: dataset, two recorded benches, reports, bundles, diff
/// flamegraph, comparison. Needs root (recording).
pub fn run_demo(options: &DemoOptions) -> anyhow::Result<DemoOutcome> {
    let exe = std::env::current_exe().context("cannot find the storprof executable")?;
    let data_dir = options
        .data_dir
        .clone()
        .unwrap_or_else(default_data_dir)
        .join(options.scale.name());
    let data_dir = std::path::absolute(&data_dir).unwrap_or(data_dir);
    let results_dir =
        std::path::absolute(&options.results_dir).unwrap_or_else(|_| options.results_dir.clone());
    stage(&format!(
        "dataset {} ({} scale)",
        data_dir.display(),
        options.scale.name()
    ));
    if ensure_dataset(&data_dir, options.scale)? {
        stage("dataset generated (cached for the next run)");
    } else {
        stage("dataset cached from an earlier run");
    }
    mkdir(&results_dir)?;
    let report = ReportOptions {
        thresholds: options.thresholds.clone(),
        ..ReportOptions::default()
    };
    let mut runs = Vec::new();
    for (i, reader) in DEMO_READERS.into_iter().enumerate() {
        let session_dir = results_dir.join(reader);
        let bench_results = results_dir.join(format!("bench-{reader}"));
        mkdir(&bench_results)?;
        stage(&format!(
            "[{}/{}] recording storprof bench --reader {reader} -> {}",
            i + 1,
            DEMO_READERS.len(),
            session_dir.display()
        ));
        let rec = RecordOptions {
            command: bench_command(&exe, &data_dir, reader, &bench_results, options.scale),
            freq_hz: options.freq_hz,
            output: session_dir.clone(),
            as_root: options.as_root,
            // The demo prints its own stages.
            live: storprof_record::live::LiveOptions {
                view: storprof_record::live::LiveView::Off,
                ..storprof_record::live::LiveOptions::default()
            },
            command_stdout_to_stderr: options.command_stdout_to_stderr,
            ..RecordOptions::default()
        };
        let outcome = storprof_record::record(&rec)?;
        if outcome.exit_code != 0 {
            anyhow::bail!(
                "storprof bench --reader {reader} exited with status {}; see {}",
                outcome.exit_code,
                outcome.dir.display()
            );
        }
        let reported = storprof_report::write_report(&outcome.dir, &report)?;
        let b = BundleSessionOptions {
            output: None,
            report: report.clone(),
            force: false,
        };
        storprof_report::bundle_session(&outcome.dir, &b)?;
        runs.push(DemoRun {
            reader,
            session_dir: outcome.dir,
            exit_code: outcome.exit_code,
            analysis: reported.analysis,
        });
    }
    // Differential flamegraph: sized by dlio-legacy, red where it spends more than raw.
    let (legacy, raw) = (&runs[0], &runs[1]);
    let legacy_session = storprof_session::load::load(&legacy.session_dir)?;
    let raw_session = storprof_session::load::load(&raw.session_dir)?;
    let diff_svg = results_dir.join(DEMO_DIFF_SVG);
    let mut o = FlamegraphOptions::new(Kind::OnCpu);
    o.title = Some("dlio-legacy vs raw reader: red = more in dlio-legacy, blue = less".to_string());
    let file = fs::File::create(&diff_svg)
        .with_context(|| format!("cannot create {}", diff_svg.display()))?;
    flamegraph::write_diff(
        &raw_session.oncpu,
        &legacy_session.oncpu,
        &o,
        BufWriter::new(file),
    )
    .with_context(|| format!("cannot write {}", diff_svg.display()))?;
    give_to_invoking_user(&diff_svg);
    let comparison = comparison_table(&runs);
    let md = results_dir.join(DEMO_COMPARISON);
    fs::write(
        &md,
        format!("# storprof demo: dlio-legacy vs raw reader\n\n{comparison}"),
    )
    .with_context(|| format!("cannot write {}", md.display()))?;
    give_to_invoking_user(&md);
    Ok(DemoOutcome {
        results_dir,
        runs,
        diff_svg,
        comparison,
    })
}
