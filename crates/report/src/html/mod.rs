//! `report.html`: one self-contained page a user attaches to an issue.
//! The same facts as report.md (the verdict, its evidence, who waits for
//! whom, processes, devices, system), plus interactive flamegraphs and a
//! zoomable timeline. No network: the CSS and JS are ours, inline.
//!
//! ```text
//! Session + Diagnosis ──► build_data ──► ReportData (serde) ──► JSON,
//!        escaped for a <script> element ──► template.html + report.css
//!        + report.js (include_str!) ──► report.html
//! ```
//!
//! Size: a long recording stays under a bound ([`HtmlOptions`]): the
//! timeline keeps at most `max_timeline_points` points per series (mean,
//! min and max of each group of buckets), flamegraph frames below
//! `prune_share` of the total are merged into one `[pruned N frames, x%]`
//! frame per parent, and a tree that still has more than
//! `max_flame_nodes` frames is pruned again at twice the share. The page
//! says what was downsampled and pruned.
//!
//! Differential flamegraph: on-CPU samples of the loader threads (the
//! wait-for graph's roles, from the per-thread stacks; without a wait-for
//! graph the reader threads by name, the analysis's `reader_comms`)
//! against every other traced thread, frames merged across threads (the
//! thread's name and id left out); a frame is red when the loaders hold
//! more of it than their share of all samples, blue when less.
use crate::diagnosis::Diagnosis;
use std::collections::BTreeMap;

use serde::Serialize;

use super::report::{self, ProcessRow};
use storprof_analysis::{
    HotFrames, WaitAnalysis, frames::FrameShare, verdict::Verdict, waitgraph::Role, whatif::WhatIf,
};
use storprof_session::{load::FoldedStacks, load::Session, model, model::TimeSeries};

const TEMPLATE: &str = include_str!("template.html");
const CSS: &str = include_str!("report.css");
const JS: &str = include_str!("report.js");

/// The element that carries the data; bundle redaction finds it by this.
pub const DATA_ELEMENT_OPEN: &str = r#"<script type="application/json" id="storprof-data">"#;
const SCRIPT_CLOSE: &str = "</script>";

/// Options of report.html. Defaults: 1,200 timeline points per series,
/// frames below 0.1% of a flamegraph pruned, at most 20,000 frames per
/// flamegraph, 300 table rows.
#[derive(Clone, Debug)]
pub struct HtmlOptions {
    /// Points per timeline series; more buckets are grouped (mean, min, max).
    pub max_timeline_points: usize,
    /// Frames whose value is below this share of the flamegraph's total are
    /// merged into one pruned frame per parent.
    pub prune_share: f64,
    /// A flamegraph with more frames after pruning is pruned again with
    /// twice the share, until it fits.
    pub max_flame_nodes: usize,
    /// Rows of the process and role tables; the rest are counted.
    pub max_table_rows: usize,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        Self {
            max_timeline_points: 1200,
            prune_share: 0.001,
            max_flame_nodes: 20_000,
            max_table_rows: 300,
        }
    }
}

/// Everything the page shows, as one JSON document.
#[derive(Clone, Debug, Serialize)]
pub struct ReportData {
    pub title: String,
    pub verdict: Verdict,
    /// Evidence values in the words report.md uses.
    pub evidence_values: Vec<String>,
    pub early_verdict: Option<String>,
    pub partial: Option<String>,
    pub wait: Option<WaitAnalysis>,
    /// The AU projected per lever, or why there is none.
    pub what_would_help: WhatIf,
    /// AU the workload's summary.json reported (%), beside the kernel's.
    pub bench_au_percentage: Option<f64>,
    pub hot_oncpu_readers: HotTables,
    pub hot_offcpu: HotTables,
    pub processes: Table<ProcessRow>,
    pub reader_line: String,
    /// Write-dominated sessions: the writers' time split, as report.md's
    /// table (column titles, then rows of cells; empty otherwise).
    pub writer_columns: Vec<String>,
    pub writer_rows: Vec<Vec<String>>,
    pub devices: Vec<DeviceRow>,
    pub io_line: Option<String>,
    /// Write-dominated sessions with a /proc/vmstat series: the dirty page
    /// cache's peak and mean.
    pub dirty_line: Option<String>,
    pub system: Vec<(String, String)>,
    pub system_notes: Vec<String>,
    pub command: String,
    pub command_notes: Vec<String>,
    pub flame: Flames,
    pub timeline: Timeline,
}

/// The top rows of one [`HotFrames`], as report.md shows them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HotTables {
    pub total: u64,
    pub categories: Vec<FrameShare>,
    pub self_functions: Vec<FrameShare>,
    pub libraries: Vec<FrameShare>,
    pub unnamed: Vec<FrameShare>,
    pub unnamed_total: u64,
}

impl HotTables {
    fn from(hot: &HotFrames) -> Self {
        let top = |rows: &[FrameShare], n: usize| rows.iter().take(n).cloned().collect();
        Self {
            total: hot.total,
            categories: top(&hot.categories, 8),
            self_functions: top(&hot.self_functions, 10),
            libraries: top(&hot.libraries, 6),
            unnamed: hot.unnamed.clone(),
            unnamed_total: hot.unnamed_total,
        }
    }
}

/// Rows of a table, at most `HtmlOptions::max_table_rows`, and how many
/// more there were.
#[derive(Clone, Debug, Serialize)]
pub struct Table<T> {
    pub rows: Vec<T>,
    pub omitted: usize,
}

impl<T> Table<T> {
    fn capped(mut rows: Vec<T>, max: usize) -> Self {
        let omitted = rows.len().saturating_sub(max);
        rows.truncate(max);
        Self { rows, omitted }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct DeviceRow {
    pub name: String,
    pub read_mib: f64,
    pub read_mib_per_s: f64,
    pub read_requests: u64,
    pub write_mib: f64,
    pub write_mib_per_s: f64,
    pub write_requests: u64,
    pub utilization: f64,
    pub latency_p50_us: Option<f64>,
    pub latency_p99_us: Option<f64>,
    /// "≤ p50 / ≤ p99 µs" of reads and of writes, as report.md shows them.
    pub read_latency: String,
    pub write_latency: String,
}

/// The flamegraphs of the page.
#[derive(Clone, Debug, Serialize)]
pub struct Flames {
    /// Frame names; nodes refer to them by index.
    pub names: Vec<String>,
    pub oncpu: Flame,
    pub offcpu: Flame,
    /// Readers vs the rest (on-CPU), or None with `diff_absent` saying why.
    pub diff: Option<Flame>,
    pub diff_absent: Option<String>,
    /// What the differential view compares, in words.
    pub diff_label: String,
}

/// One flamegraph: a tree of `[name index, value, children]` nodes (the
/// differential one `[name index, value, children, reader value]`).
#[derive(Clone, Debug, Serialize)]
pub struct Flame {
    pub unit: String,
    pub total: u64,
    pub root: Node,
    /// Frames in the tree before pruning (the root not counted).
    pub frames: usize,
    /// Frames merged into pruned frames.
    pub pruned_frames: usize,
    /// Their share of the total.
    pub pruned_share: f64,
    /// The share below which frames were pruned.
    pub prune_share: f64,
    /// Reader share of every sample (differential view).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_share: Option<f64>,
}

/// A flamegraph frame, serialized as an array to keep the page small.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: u32,
    pub value: u64,
    /// Of `value`, what the reader threads hold (differential view only).
    pub reader: Option<u64>,
    pub children: Vec<Node>,
}

impl Serialize for Node {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let len = if self.reader.is_some() { 4 } else { 3 };
        let mut t = s.serialize_tuple(len)?;
        t.serialize_element(&self.name)?;
        t.serialize_element(&self.value)?;
        t.serialize_element(&self.children)?;
        if let Some(r) = self.reader {
            t.serialize_element(&r)?;
        }
        t.end()
    }
}

/// The timeline: panels of series over the recording.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timeline {
    /// Seconds per point (bucket width × `factor`).
    pub point_s: f64,
    /// Buckets in the recording, and how many went into one point.
    pub buckets: usize,
    pub factor: usize,
    pub points: usize,
    pub panels: Vec<Panel>,
    /// The training window (from the wait-for graph), seconds.
    pub window: Option<(f64, f64)>,
    pub window_source: Option<String>,
    pub omitted_series: usize,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Panel {
    pub title: String,
    pub unit: String,
    pub series: Vec<Series>,
}

/// One series: the mean of each point's buckets, and their min and max
/// when a point holds more than one bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Series {
    pub label: String,
    pub mean: Vec<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub min: Vec<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub max: Vec<f64>,
}

mod flame;
mod timeline;

pub use flame::flames;
pub use timeline::{downsample, downsample_factor, timeline};

/// The page's data from the session and the analysis report.md uses.
pub fn build_data(session: &Session, analysis: &Diagnosis, options: &HtmlOptions) -> ReportData {
    let v = &analysis.verdict;
    let f = &analysis.features;
    let i = &session.info;
    let early_verdict = i.early_verdict.as_ref().map(|e| {
        let held = if e.held_to_s > e.held_from_s {
            format!(
                "held from {:.1} s to {:.1} s of the recording",
                e.held_from_s, e.held_to_s
            )
        } else {
            format!("was found at {:.1} s", e.held_to_s)
        };
        format!(
            "Verdict reached early (--until-verdict): {} ({}) {held}, and the recording stopped \
             at {:.1} s; the figures are over that recording, not the whole job.",
            e.verdict, e.confidence_label, i.duration_s
        )
    });
    let partial = (!session.is_complete()).then(|| {
        format!(
            "Partial session: {} missing (the recording stopped before writing them). Figures \
             that need them are absent or zero.",
            session.missing.join(", ")
        )
    });
    let devices = f
        .devices
        .iter()
        .zip(&session.io.devices)
        .map(|(d, raw)| DeviceRow {
            name: d.name.clone(),
            read_mib: d.read_bytes as f64 / MIB,
            read_mib_per_s: d.read_mib_per_s,
            read_requests: d.read_requests,
            write_mib: raw.write_bytes as f64 / MIB,
            write_mib_per_s: d.write_mib_per_s,
            write_requests: raw.write_requests,
            utilization: d.utilization,
            latency_p50_us: d.latency_p50_us,
            latency_p99_us: d.latency_p99_us,
            read_latency: report::latency_pair(d.read_latency_p50_us, d.read_latency_p99_us),
            write_latency: report::latency_pair(d.write_latency_p50_us, d.write_latency_p99_us),
        })
        .collect::<Vec<_>>();
    let io_line = (!devices.is_empty()).then(|| report::read_supply_line(f));
    let writer_rows = report::writer_split_rows(f);
    let command = if i.command.is_empty() {
        let pids: Vec<String> = i.attached_pids.iter().map(ToString::to_string).collect();
        format!("# attached to pid(s) {}", pids.join(" "))
    } else {
        report::shell_join(&super::bundle::redact_args(&i.command))
    };
    let command_notes = [report::checkpoint_note(i), report::command_ending(i)]
        .into_iter()
        .flatten()
        .collect();
    let mut wait = analysis.wait.clone();
    if let Some(w) = &mut wait {
        let max = options.max_table_rows;
        w.roles.truncate(max);
        w.path_cpu_threads.clear();
    }
    ReportData {
        title: if v.inconclusive {
            "storprof report: inconclusive".to_string()
        } else {
            format!("storprof report: {}", v.verdict)
        },
        verdict: v.clone(),
        evidence_values: v.evidence.iter().map(report::evidence_value).collect(),
        early_verdict,
        partial,
        wait,
        what_would_help: analysis.what_would_help.clone(),
        bench_au_percentage: f.bench.as_ref().and_then(|b| b.au_percentage),
        hot_oncpu_readers: HotTables::from(&analysis.hot_oncpu_readers),
        hot_offcpu: HotTables::from(&analysis.hot_offcpu),
        processes: Table::capped(report::process_rows(session, f), options.max_table_rows),
        reader_line: format!(
            "Thread-state shares are of each process's thread time; readers (by {}): {} \
             thread(s), {}.",
            report::reader_selection_name(f),
            f.reader_threads,
            f.reader_comms.join(", ")
        ),
        writer_columns: if writer_rows.is_empty() {
            Vec::new()
        } else {
            report::WRITER_SPLIT_COLUMNS
                .iter()
                .map(|c| c.to_string())
                .collect()
        },
        writer_rows: writer_rows
            .iter()
            .map(|r| report::writer_split_cells(r).to_vec())
            .collect(),
        devices,
        io_line,
        dirty_line: report::dirty_pages_line(f),
        system: report::system_rows(session, f)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        system_notes: i.notes.iter().chain(&session.warnings).cloned().collect(),
        command,
        command_notes,
        flame: flames(session, analysis, options),
        timeline: timeline(
            &session.timeseries.clone().unwrap_or_default(),
            analysis,
            options,
        ),
    }
}

const MIB: f64 = (1u64 << 20) as f64;

/// The name of every flamegraph's root frame (index 0 of the names).
const ROOT_NAME: &str = "all";

/// JSON that is safe inside a `<script>` element: `<`, `>` and `&` (and
/// the JavaScript line separators) as `\u` escapes, which can only occur
/// inside JSON strings, where they mean the same characters.
pub fn script_safe_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The page around a data document (already JSON).
pub fn page_from_json(json: &str) -> String {
    // Split once at each slot: text put into one slot is never searched
    // for the next one.
    let (head, rest) = TEMPLATE.split_once(CSS_SLOT).unwrap_or((TEMPLATE, ""));
    let (middle, rest) = rest.split_once(DATA_SLOT).unwrap_or((rest, ""));
    let (before_js, tail) = rest.split_once(JS_SLOT).unwrap_or((rest, ""));
    let data = script_safe_json(json);
    let mut page = String::with_capacity(TEMPLATE.len() + CSS.len() + JS.len() + data.len() + 64);
    for part in [
        head,
        CSS,
        middle,
        DATA_ELEMENT_OPEN,
        &data,
        SCRIPT_CLOSE,
        before_js,
        JS,
        tail,
    ] {
        page.push_str(part);
    }
    page
}

const CSS_SLOT: &str = "/*STORPROF_CSS*/";
const DATA_SLOT: &str = "<!--STORPROF_DATA-->";
const JS_SLOT: &str = "/*STORPROF_JS*/";

/// report.html of a session and its analysis.
pub fn render(session: &Session, analysis: &Diagnosis, options: &HtmlOptions) -> String {
    let data = build_data(session, analysis, options);
    // Serializing plain data cannot fail; an empty document still renders.
    let json = serde_json::to_string(&data).unwrap_or_else(|_| "{}".to_string());
    page_from_json(&json)
}

/// The data document of a page written by [`render`] (None: not one of
/// ours), and the text before and after it.
pub fn split_page(page: &str) -> Option<(&str, &str, &str)> {
    let start = page.find(DATA_ELEMENT_OPEN)? + DATA_ELEMENT_OPEN.len();
    let len = page[start..].find(SCRIPT_CLOSE)?;
    Some((
        &page[..start],
        &page[start..start + len],
        &page[start + len..],
    ))
}

/// A page with its data document passed through `redact` (the bundle's
/// JSON redaction); None when the page is not one of ours or its data does
/// not parse. The template around the data is ours and holds no secrets.
pub fn redact_page(page: &str, redact: impl Fn(&mut serde_json::Value)) -> Option<String> {
    let (before, data, after) = split_page(page)?;
    let mut value: serde_json::Value = serde_json::from_str(data).ok()?;
    redact(&mut value);
    let json = serde_json::to_string(&value).ok()?;
    Some(format!("{before}{}{after}", script_safe_json(&json)))
}

#[cfg(test)]
mod tests;
