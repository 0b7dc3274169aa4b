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
    HotFrames, WaitAnalysis, frames::FrameShare, verdict::Verdict, waitgraph::Role,
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

/// Interns frame names for the flamegraphs.
#[derive(Default)]
struct Names {
    index: BTreeMap<String, u32>,
    list: Vec<String>,
}

impl Names {
    fn get(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        self.index.insert(name.to_string(), i);
        self.list.push(name.to_string());
        i
    }
}

/// The unpruned tree while it is built: children by name.
#[derive(Default)]
struct Building {
    value: u64,
    reader: u64,
    children: BTreeMap<String, Building>,
}

impl Building {
    fn add(&mut self, frames: &[&str], value: u64, reader: u64) {
        self.value = self.value.saturating_add(value);
        self.reader = self.reader.saturating_add(reader);
        if let Some((first, rest)) = frames.split_first() {
            self.children
                .entry((*first).to_string())
                .or_default()
                .add(rest, value, reader);
        }
    }

    fn count(&self) -> usize {
        self.children.values().map(|c| 1 + c.count()).sum()
    }
}

/// Which stacks the differential view counts as the reader side.
enum ReaderSide<'a> {
    /// None (the plain flamegraphs).
    Nobody,
    /// Threads by name (`comm;...` stacks, the comm left out).
    Comms(&'a dyn Fn(&str) -> bool),
    /// Threads by id (`comm;[pid/tid];...` stacks, both left out).
    Threads(&'a dyn Fn(u32, u32) -> bool),
}

/// `[pid/tid]`, the second frame of per-thread folded stacks.
fn thread_frame(frame: &str) -> Option<(u32, u32)> {
    let (pid, tid) = frame
        .strip_prefix('[')?
        .strip_suffix(']')?
        .split_once('/')?;
    Some((pid.parse().ok()?, tid.parse().ok()?))
}

/// Builds the tree of `stacks`; for the differential view, `side` says
/// which stacks are the reader side and which leading frames (the thread's
/// name and id) are left out, so that frames merge across threads.
fn build_tree(stacks: &FoldedStacks, side: &ReaderSide) -> Building {
    let mut root = Building::default();
    for (stack, count) in &stacks.stacks {
        let frames: Vec<&str> = stack.split(';').filter(|f| !f.is_empty()).collect();
        let (reader, rest) = match side {
            ReaderSide::Nobody => (false, frames.as_slice()),
            ReaderSide::Comms(is_reader) => match frames.split_first() {
                Some((comm, rest)) => (is_reader(comm), rest),
                None => continue,
            },
            ReaderSide::Threads(is_reader) => match frames.get(1).and_then(|f| thread_frame(f)) {
                Some((pid, tid)) => (is_reader(pid, tid), &frames[2..]),
                None => continue,
            },
        };
        root.add(rest, *count, if reader { *count } else { 0 });
    }
    root
}

/// Prunes `tree` at `share` of its total into a [`Node`] tree; returns it
/// with the number of frames merged and their value.
fn prune(tree: &Building, share: f64, names: &mut Names, diff: bool) -> (Node, usize, u64) {
    let threshold = (tree.value as f64 * share).ceil() as u64;
    let mut pruned_frames = 0;
    let mut pruned_value = 0;
    let root = prune_node(
        tree,
        0,
        threshold.max(1),
        tree.value,
        names,
        diff,
        &mut pruned_frames,
        &mut pruned_value,
    );
    (root, pruned_frames, pruned_value)
}

#[allow(clippy::too_many_arguments)]
fn prune_node(
    b: &Building,
    name: u32,
    threshold: u64,
    total: u64,
    names: &mut Names,
    diff: bool,
    pruned_frames: &mut usize,
    pruned_value: &mut u64,
) -> Node {
    let mut children = Vec::new();
    let (mut merged, mut merged_value, mut merged_reader) = (0usize, 0u64, 0u64);
    for (child_name, child) in &b.children {
        if child.value < threshold {
            merged += 1 + child.count();
            merged_value = merged_value.saturating_add(child.value);
            merged_reader = merged_reader.saturating_add(child.reader);
        } else {
            let idx = names.get(child_name);
            children.push(prune_node(
                child,
                idx,
                threshold,
                total,
                names,
                diff,
                pruned_frames,
                pruned_value,
            ));
        }
    }
    if merged > 0 {
        *pruned_frames += merged;
        *pruned_value = pruned_value.saturating_add(merged_value);
        let label = format!(
            "[pruned {merged} frames, {:.2}%]",
            merged_value as f64 / total.max(1) as f64 * 100.0
        );
        children.push(Node {
            name: names.get(&label),
            value: merged_value,
            reader: diff.then_some(merged_reader),
            children: Vec::new(),
        });
    }
    Node {
        name,
        value: b.value,
        reader: diff.then_some(b.reader),
        children,
    }
}

fn node_count(n: &Node) -> usize {
    n.children.iter().map(|c| 1 + node_count(c)).sum()
}

/// One flamegraph from a built tree, pruned to fit the options.
fn flame(
    tree: &Building,
    unit: &str,
    names: &mut Names,
    options: &HtmlOptions,
    diff: bool,
) -> Flame {
    let mut share = options.prune_share.max(0.0);
    loop {
        // A fresh table per attempt would renumber the names: prune into a
        // scratch table and copy the winner's names in.
        let mut scratch = Names::default();
        scratch.get(ROOT_NAME);
        let (root, pruned_frames, pruned_value) = prune(tree, share, &mut scratch, diff);
        if node_count(&root) <= options.max_flame_nodes || share >= 1.0 {
            let root = renumber(&root, &scratch, names);
            return Flame {
                unit: unit.to_string(),
                total: tree.value,
                root,
                frames: tree.count(),
                pruned_frames,
                pruned_share: pruned_value as f64 / tree.value.max(1) as f64,
                prune_share: share,
                base_share: diff.then(|| tree.reader as f64 / tree.value.max(1) as f64),
            };
        }
        share = if share <= 0.0 { 1e-4 } else { share * 2.0 };
    }
}

fn renumber(n: &Node, from: &Names, to: &mut Names) -> Node {
    let name = from.list.get(n.name as usize).map_or(0, |s| to.get(s));
    Node {
        name,
        value: n.value,
        reader: n.reader,
        children: n.children.iter().map(|c| renumber(c, from, to)).collect(),
    }
}

/// The three flamegraphs (on-CPU, off-CPU, readers vs the rest).
pub fn flames(session: &Session, analysis: &Diagnosis, options: &HtmlOptions) -> Flames {
    let mut names = Names::default();
    // Index 0 is the root's name, in every table.
    names.get(ROOT_NAME);
    let oncpu = flame(
        &build_tree(&session.oncpu, &ReaderSide::Nobody),
        "samples",
        &mut names,
        options,
        false,
    );
    let offcpu = flame(
        &build_tree(&session.offcpu, &ReaderSide::Nobody),
        "us",
        &mut names,
        options,
        false,
    );
    // The reader side: the wait-for graph's loader threads when it found
    // any (per-thread stacks), else the reader threads by name.
    let loaders: Vec<(u32, u32, &str)> = analysis
        .wait
        .as_ref()
        .map(|w| {
            w.roles
                .iter()
                .filter(|r| r.role == Role::Loader)
                .map(|r| (r.pid, r.tid, r.comm.as_str()))
                .collect()
        })
        .unwrap_or_default();
    let readers = &analysis.features.reader_comms;
    let is_loader = |pid: u32, tid: u32| loaders.iter().any(|l| l.0 == pid && l.1 == tid);
    let is_reader = |comm: &str| readers.iter().any(|r| r == comm);
    let (diff_tree, diff_label, side_name) =
        if !loaders.is_empty() && !session.oncpu_threads.is_empty() {
            let mut shown: Vec<String> = loaders
                .iter()
                .take(6)
                .map(|(pid, tid, comm)| model::thread_label(comm, *pid, *tid))
                .collect();
            if loaders.len() > shown.len() {
                shown.push(format!("{} more", loaders.len() - shown.len()));
            }
            (
                build_tree(&session.oncpu_threads, &ReaderSide::Threads(&is_loader)),
                format!(
                    "on-CPU samples of the loader threads of the wait-for graph ({}) against \
                     every other traced thread",
                    shown.join(", ")
                ),
                "loader threads",
            )
        } else {
            (
                build_tree(&session.oncpu, &ReaderSide::Comms(&is_reader)),
                format!(
                    "on-CPU samples of the reader threads by name ({}) against every other \
                     traced thread",
                    readers.join(", ")
                ),
                "reader threads",
            )
        };
    let (diff, diff_absent) = if loaders.is_empty() && readers.is_empty() {
        (None, Some("no reader threads were found".to_string()))
    } else if diff_tree.value == 0 {
        (None, Some("no on-CPU samples".to_string()))
    } else if diff_tree.reader == 0 {
        (
            None,
            Some(format!("the {side_name} have no on-CPU samples")),
        )
    } else if diff_tree.reader == diff_tree.value {
        (
            None,
            Some(format!(
                "every on-CPU sample belongs to the {side_name}: nothing to compare with"
            )),
        )
    } else {
        (
            Some(flame(&diff_tree, "samples", &mut names, options, true)),
            None,
        )
    };
    Flames {
        names: names.list,
        oncpu,
        offcpu,
        diff,
        diff_absent,
        diff_label,
    }
}

/// Groups `values` `factor` at a time: (means, mins, maxes); min and max
/// are empty when `factor` is 1 (they equal the mean).
pub fn downsample(values: &[f64], factor: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let factor = factor.max(1);
    let round = |x: f64| (x * 100.0).round() / 100.0;
    if factor == 1 {
        return (
            values.iter().map(|&v| round(v)).collect(),
            Vec::new(),
            Vec::new(),
        );
    }
    let (mut mean, mut min, mut max) = (Vec::new(), Vec::new(), Vec::new());
    for group in values.chunks(factor) {
        let sum: f64 = group.iter().sum();
        mean.push(round(sum / group.len() as f64));
        min.push(round(group.iter().copied().fold(f64::INFINITY, f64::min)));
        max.push(round(
            group.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ));
    }
    (mean, min, max)
}

/// Buckets per point so that `buckets` fit in `max_points`.
pub fn downsample_factor(buckets: usize, max_points: usize) -> usize {
    buckets.div_ceil(max_points.max(1)).max(1)
}

/// The timeline's panels: CPU % of the busiest threads (the rest summed),
/// read-syscall MiB/s of all traced threads, device read MiB/s.
pub fn timeline(ts: &TimeSeries, analysis: &Diagnosis, options: &HtmlOptions) -> Timeline {
    let bucket_s = if ts.bucket_ns > 0 {
        ts.bucket_ns as f64 / 1e9
    } else {
        1.0
    };
    let buckets = ts.bucket_count();
    let factor = downsample_factor(buckets, options.max_timeline_points);
    let series = |label: String, values: Vec<f64>| {
        let (mean, min, max) = downsample(&values, factor);
        Series {
            label,
            mean,
            min,
            max,
        }
    };
    let mut threads: Vec<_> = ts.threads.iter().collect();
    threads.sort_by(|a, b| {
        b.on_cpu()
            .total()
            .cmp(&a.on_cpu().total())
            .then_with(|| a.tid.cmp(&b.tid))
    });
    let lines = super::timeline::MAX_THREAD_LINES;
    let cpu_of = |v: u64| v as f64 / (bucket_s * 1e9) * 100.0;
    let mut cpu: Vec<Series> = threads
        .iter()
        .take(lines)
        .map(|t| {
            series(
                model::thread_label(&t.comm, t.pid, t.tid),
                (0..buckets).map(|i| cpu_of(t.on_cpu().at(i))).collect(),
            )
        })
        .collect();
    let omitted_series = threads.len().saturating_sub(lines);
    if omitted_series > 0 {
        let mut sum = vec![0u64; buckets];
        for t in &threads[lines..] {
            let on = t.on_cpu();
            for (j, v) in on.values.iter().enumerate() {
                if let Some(slot) = sum.get_mut(on.first + j) {
                    *slot = slot.saturating_add(*v);
                }
            }
        }
        cpu.push(series(
            format!("{omitted_series} other threads (sum)"),
            sum.into_iter().map(cpu_of).collect(),
        ));
    }
    let mib = (1u64 << 20) as f64 * bucket_s;
    let mut read = vec![0u64; buckets];
    for t in &ts.threads {
        let r = t.read();
        for (j, v) in r.values.iter().enumerate() {
            if let Some(slot) = read.get_mut(r.first + j) {
                *slot = slot.saturating_add(*v);
            }
        }
    }
    let reads = vec![series(
        "all traced threads".to_string(),
        read.into_iter().map(|v| v as f64 / mib).collect(),
    )];
    let devices = ts
        .devices
        .iter()
        .map(|d| {
            series(
                format!("{} read", d.name),
                (0..buckets)
                    .map(|i| d.read_bytes.get(i).copied().unwrap_or(0) as f64 / mib)
                    .collect(),
            )
        })
        .collect();
    let writes: Vec<Series> = ts
        .devices
        .iter()
        .filter(|d| d.write_bytes.iter().any(|&b| b > 0))
        .map(|d| {
            series(
                format!("{} write", d.name),
                (0..buckets)
                    .map(|i| d.write_bytes.get(i).copied().unwrap_or(0) as f64 / mib)
                    .collect(),
            )
        })
        .collect();
    let page_cache: Vec<Series> = ts
        .vmstat
        .iter()
        .flat_map(|vm| {
            [
                ("dirty", &vm.dirty_bytes),
                ("writeback", &vm.writeback_bytes),
            ]
        })
        .map(|(label, values)| {
            series(
                label.to_string(),
                (0..buckets)
                    .map(|i| values.get(i).copied().unwrap_or(0) as f64 / MIB)
                    .collect(),
            )
        })
        .collect();
    let mut panels = vec![
        Panel {
            title: "CPU per thread".to_string(),
            unit: "% of one CPU".to_string(),
            series: cpu,
        },
        Panel {
            title: "Read syscalls".to_string(),
            unit: "MiB/s".to_string(),
            series: reads,
        },
        Panel {
            title: "Device reads".to_string(),
            unit: "MiB/s".to_string(),
            series: devices,
        },
    ];
    // Write panels only for sessions with writes or a vmstat series:
    // read sessions keep their three panels.
    if !writes.is_empty() {
        panels.push(Panel {
            title: "Device writes".to_string(),
            unit: "MiB/s".to_string(),
            series: writes,
        });
    }
    if !page_cache.is_empty() {
        panels.push(Panel {
            title: "Dirty page cache, system-wide".to_string(),
            unit: "MiB".to_string(),
            series: page_cache,
        });
    }
    let window = analysis.wait.as_ref().and_then(|w| w.window.as_ref());
    Timeline {
        point_s: bucket_s * factor as f64,
        buckets,
        factor,
        points: buckets.div_ceil(factor),
        panels,
        window: window.map(|w| (w.start_s, w.end_s)),
        window_source: window.map(|w| w.source.clone()),
        omitted_series,
    }
}

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
        title: format!("storprof report: {}", v.verdict),
        verdict: v.clone(),
        evidence_values: v.evidence.iter().map(report::evidence_value).collect(),
        early_verdict,
        partial,
        wait,
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
