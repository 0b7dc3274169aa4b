//! report.html: a golden file of its data (JSON) for a small fixture, and
//! the page in a real browser: headless Chromium (Debian's `chromium`,
//! which scripts/setup.sh installs) opens report.html from disk with the
//! `#selftest` hash, which makes the page click a flamegraph frame with a
//! dispatched MouseEvent, search for it and zoom the timeline, and write
//! what happened into the DOM; the test reads it back with --dump-dom,
//! with the page's own error log. A screenshot must not be blank, and a
//! 12-hour synthetic session's page must draw in under 3 s (the bound the
//! feature promises; the figure is printed).
//!
//! Without chromium these tests fail under CI=true and say why and pass
//! elsewhere.
//!
//! Golden files (testkit::golden): `STORPROF_BLESS=1` rewrites them.
// Tests may unwrap (the guide): a failure here is a test failure.
#![allow(clippy::expect_used)]
use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use serde_json::Value;
use storprof_analysis::{self, Thresholds};
use storprof_report::html::{self, HtmlOptions};
use storprof_session::{
    load,
    model::{
        DeviceSeries, DeviceStats, IoStats, SessionInfo, ThreadSeries, ThreadStats, TimeSeries,
    },
};

use crate::support;
use crate::support::{assert_golden, copy_dir, is_root, run_within, session_fixture, storprof};

/// The bound on the page's size for a 12-hour recording (README).
const MAX_PAGE_BYTES: usize = 5 << 20;
/// The bound on the time to draw it.
const MAX_RENDER_MS: f64 = 3000.0;

/// Debian's chromium, or None outside CI when it is missing (under CI it
/// must be there: setup installs it).
fn chromium() -> Option<PathBuf> {
    let found = Command::new("chromium")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some(PathBuf::from("chromium"));
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI needs chromium to test report.html in a browser (scripts/setup.sh installs Debian's chromium)"
    );
    eprintln!("skipping: no chromium (scripts/setup.sh installs Debian's chromium)");
    None
}

/// Headless chromium with `args` and the page at `url`; its own profile
/// directory (others may run chromium at the same time).
fn run_chromium(chromium: &Path, profile: &Path, args: &[String], url: &str) -> (String, String) {
    let mut cmd = Command::new(chromium);
    cmd.args(["--headless", "--disable-gpu", "--hide-scrollbars"])
        .arg("--enable-logging=stderr")
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--no-first-run")
        .args(args)
        .arg(url);
    if is_root() {
        // Chromium refuses to run its sandbox as root.
        cmd.arg("--no-sandbox");
    }
    let out = run_within(cmd, Duration::from_secs(120), "chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What the page's self-test wrote into `<pre id="selftest">`.
fn selftest(chromium: &Path, page: &Path, profile: &Path) -> Value {
    let url = format!("file://{}#selftest", page.display());
    let (dom, stderr) = run_chromium(
        chromium,
        profile,
        &[
            "--dump-dom".to_string(),
            "--window-size=1280,1600".to_string(),
        ],
        &url,
    );
    // The page logs nothing to the console: any message Chromium logged
    // from it (an uncaught exception, a console.error) is a failure.
    let console: Vec<&str> = stderr.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
    let start = dom
        .find("<pre id=\"selftest\">")
        .unwrap_or_else(|| panic!("no self-test result in the DOM:\n{dom}"))
        + "<pre id=\"selftest\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    // The DOM dump escapes text: undo the entities JSON text can hold.
    let text = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("self-test result {text:?}: {e}"))
}

/// Checks the self-test's result: no errors, the clicked frame zoomed,
/// the search matched it, the timeline zoomed in and drew `panels` panels.
fn check_selftest(r: &Value, panels: u64) {
    assert_eq!(r["errors"], Value::Array(vec![]), "page errors: {r}");
    assert!(r["clicked"].is_string(), "no frame was clicked: {r}");
    assert_eq!(r["zoomed"], true, "the click did not zoom: {r}");
    assert_eq!(r["reset"], true, "reset did not zoom out: {r}");
    let share = r["search_share"].as_f64().unwrap();
    let clicked = r["clicked_share"].as_f64().unwrap();
    // The search matches at least the clicked frame, and never more than all.
    assert!(
        share >= clicked - 1e-9 && share <= 1.0 + 1e-9,
        "search share {share} vs clicked {clicked}: {r}"
    );
    assert!(r["highlighted"].as_u64().unwrap() >= 1, "{r}");
    assert!(r["search_text"].as_str().unwrap().contains("match"), "{r}");
    assert_eq!(r["timeline_zoom"], 0.5, "{r}");
    assert_eq!(r["timeline_svgs"], panels, "{r}");
}

/// (distinct colours, share of pixels that are not the background white).
fn png_colours(path: &Path) -> (usize, f64) {
    let file = std::io::BufReader::new(fs::File::open(path).unwrap());
    let mut decoder = png::Decoder::new(file);
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Indexed => panic!("indexed PNG after EXPAND"),
    };
    let pixels = &buf[..info.buffer_size()];
    let mut colours = std::collections::HashSet::new();
    let mut not_white = 0usize;
    let mut total = 0usize;
    for px in pixels.chunks_exact(channels) {
        let rgb = &px[..channels.min(3)];
        colours.insert(rgb.to_vec());
        total += 1;
        if rgb.iter().any(|&c| c < 250) {
            not_white += 1;
        }
    }
    (colours.len(), not_white as f64 / total.max(1) as f64)
}

#[test]
fn report_html_opens_in_chromium_and_its_flamegraph_zooms_on_a_click() {
    let Some(chromium) = chromium() else { return };
    let tmp = support::scratch("html");
    let s = tmp.path().join("session");
    copy_dir(&session_fixture("real-pool-storage-bound"), &s);
    let out = storprof(["report", s.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = s.join("report.html");
    let r = selftest(&chromium, &page, &tmp.path().join("profile"));
    eprintln!("self-test: {r}");
    // CPU, read syscalls, device reads, and device writes: its vda wrote.
    check_selftest(&r, 4);
    // This session has loader threads and others: the differential view.
    assert_eq!(r["diff_shown"], true, "{r}");
    assert!(r["diff_frames"].as_u64().unwrap() > 10, "{r}");

    let shot = tmp.path().join("shot.png");
    run_chromium(
        &chromium,
        &tmp.path().join("profile"),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,2400".to_string(),
        ],
        &format!("file://{}", page.display()),
    );
    let (colours, drawn) = png_colours(&shot);
    eprintln!(
        "screenshot: {colours} colours, {:.1}% of pixels not white",
        drawn * 100.0
    );
    // A blank or unstyled page has a handful of colours and little ink; the
    // flamegraph alone brings hundreds.
    assert!(colours >= 100, "{colours} colours: blank page?");
    assert!(drawn >= 0.10, "{:.1}% drawn: blank page?", drawn * 100.0);
}

/// A deterministic pseudo-random sequence.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

fn write_json<T: serde::Serialize>(dir: &Path, name: &str, value: &T) {
    fs::write(dir.join(name), serde_json::to_vec(value).unwrap()).unwrap();
}

/// A 12-hour session directory: 48 threads with a value in every 1-second
/// bucket, two devices, 40,000 distinct stacks of up to 40 frames each for
/// on-CPU and off-CPU.
fn write_long_session(dir: &Path) {
    fs::create_dir_all(dir).unwrap();
    let buckets = 12 * 3600;
    let mut rng = Lcg(11);
    let comms = ["python3", "pt_data_worker", "reader", "trainer", "gc", "io"];
    let (mut threads, mut series) = (Vec::new(), Vec::new());
    for t in 0..48u32 {
        let comm = comms[(t % 6) as usize].to_string();
        let on: Vec<u64> = (0..buckets).map(|_| rng.below(1_000_000_000)).collect();
        let read: Vec<u64> = (0..buckets).map(|_| rng.below(64 << 20)).collect();
        threads.push(ThreadStats {
            pid: 100 + t / 8,
            tid: 1000 + t,
            comm: comm.clone(),
            on_cpu_ns: on.iter().sum(),
            read_bytes: read.iter().sum(),
            ..ThreadStats::default()
        });
        series.push(ThreadSeries {
            pid: 100 + t / 8,
            tid: 1000 + t,
            comm,
            on_cpu_ns: on,
            read_bytes: read,
            ..ThreadSeries::default()
        });
    }
    let devices: Vec<DeviceSeries> = ["vda", "nvme0n1"]
        .iter()
        .map(|name| DeviceSeries {
            name: name.to_string(),
            read_bytes: (0..buckets).map(|_| rng.below(512 << 20)).collect(),
            write_bytes: vec![0; buckets],
            busy_ns: Vec::new(),
        })
        .collect();
    for file in ["oncpu.folded", "offcpu.folded"] {
        let mut text = Vec::new();
        for _ in 0..40_000 {
            let depth = 3 + rng.below(38);
            let mut frames = vec![comms[rng.below(6) as usize].to_string()];
            for d in 0..depth {
                frames.push(if rng.below(10) < 9 {
                    format!("hot_{d}_{}", rng.below(2))
                } else {
                    format!("func_{}", rng.below(3000))
                });
            }
            writeln!(text, "{} {}", frames.join(";"), 1 + rng.below(1000)).unwrap();
        }
        fs::write(dir.join(file), text).unwrap();
    }
    let info = SessionInfo {
        format_version: 2,
        storprof_version: "synthetic".into(),
        command: vec!["python3".into(), "train.py".into()],
        hostname: "synthetic".into(),
        kernel: "6.18".into(),
        num_cpus: 2,
        start_unix_ns: 1,
        end_unix_ns: 1 + buckets as u64 * 1_000_000_000,
        duration_s: buckets as f64,
        freq_hz: 99,
        end_reason: "exited".into(),
        ..SessionInfo::default()
    };
    write_json(dir, "session.json", &info);
    write_json(dir, "threads.json", &threads);
    write_json(
        dir,
        "io.json",
        &IoStats {
            devices: devices
                .iter()
                .map(|d| DeviceStats {
                    name: d.name.clone(),
                    dev: "254:0".into(),
                    read_bytes: d.read_bytes.iter().sum(),
                    ..DeviceStats::default()
                })
                .collect(),
            ..IoStats::default()
        },
    );
    write_json(
        dir,
        "timeseries.json",
        &TimeSeries {
            bucket_ns: 1_000_000_000,
            start_unix_ns: 1,
            buckets: buckets as u32,
            threads: series,
            devices,
            host_cpu: None,
            vmstat: None,
        },
    );
}

#[test]
fn a_twelve_hour_session_gives_a_page_under_5_mib_that_draws_in_under_3_s() {
    let tmp = support::scratch("html");
    let s = tmp.path().join("long");
    write_long_session(&s);
    let out = storprof(["report", s.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = s.join("report.html");
    let bytes = fs::metadata(&page).unwrap().len() as usize;
    eprintln!("12-hour synthetic session: report.html is {bytes} bytes");
    assert!(bytes < MAX_PAGE_BYTES, "report.html is {bytes} bytes");
    let text = fs::read_to_string(&page).unwrap();
    let (_, data, _) = html::split_page(&text).unwrap();
    let data: Value = serde_json::from_str(data).unwrap();
    assert_eq!(
        data["timeline"]["factor"], 36,
        "43,200 buckets in 1,200 points"
    );
    assert!(data["flame"]["oncpu"]["pruned_frames"].as_u64().unwrap() > 0);

    let Some(chromium) = chromium() else { return };
    let r = selftest(&chromium, &page, &tmp.path().join("profile"));
    let ms = r["render_ms"].as_f64().unwrap();
    eprintln!("12-hour synthetic session: report.html drawn {ms:.0} ms after it started loading");
    // No device writes, no vmstat series: the three read panels.
    check_selftest(&r, 3);
    assert!(ms < MAX_RENDER_MS, "drawn in {ms:.0} ms");
}

#[test]
fn html_data_golden_of_a_small_session() {
    let name = "lock-contention";
    let session = load::load(&session_fixture(name)).unwrap();
    let analysis = storprof_report::diagnosis::diagnose(&session, &Thresholds::default());
    let data = html::build_data(&session, &analysis, &HtmlOptions::default());
    let mut json = serde_json::to_string_pretty(&data).unwrap();
    json.push('\n');
    assert_golden(format!("html/{name}.json"), &json);
}
