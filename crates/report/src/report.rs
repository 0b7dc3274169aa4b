//! `report.md` (GitHub-flavoured markdown a user pastes into an issue) and
//! `verdict.json`, rendered from a session and its analysis. Pure: strings
//! out; the command writes them.
//!
//! ```text
//! Session + Diagnosis ──► render_markdown ──► report.md
//!                    ──► verdict_json     ──► verdict.json
//! ```
//! The recorded command is redacted (see [`super::bundle::redact_args`]):
//! reports travel with bundles.
use crate::diagnosis::Diagnosis;
use std::{collections::BTreeMap, fmt::Write as _};

use serde::Serialize;

use super::bundle::redact_args;
use storprof_analysis::{
    Features, HotFrames, Verdict,
    features::{DeviceFeature, WriterTimeSplit},
    frames::FrameShare,
};
use storprof_session::{
    load::Session,
    model::{self, Stacking, ThreadStats},
};

const MIB: f64 = (1u64 << 20) as f64;

/// `verdict.json`: the verdict plus the features it was computed from.
#[derive(Serialize)]
struct VerdictFile<'a> {
    #[serde(flatten)]
    verdict: &'a Verdict,
    hot_oncpu_readers: &'a [FrameShare],
    hot_offcpu: &'a [FrameShare],
    features: &'a Features,
}

/// Pretty JSON of `verdict.json`.
pub fn verdict_json(analysis: &Diagnosis) -> serde_json::Result<String> {
    let file = VerdictFile {
        verdict: &analysis.verdict,
        hot_oncpu_readers: &analysis.hot_oncpu_readers.categories,
        hot_offcpu: &analysis.hot_offcpu.categories,
        features: &analysis.features,
    };
    serde_json::to_string_pretty(&file).map(|mut s| {
        s.push('\n');
        s
    })
}

/// A markdown table cell: pipes escaped, newlines flattened.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A frame name as inline code (no HTML interpretation of `<T>`).
fn code(s: &str) -> String {
    format!("`{}`", s.replace('`', "'").replace('|', "\\|"))
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn thread_total(t: &ThreadStats) -> u64 {
    t.on_cpu_ns + t.off_cpu_ns.total()
}

fn frames_table(out: &mut String, rows: &[FrameShare], unit: &str, limit: usize) {
    if rows.is_empty() {
        out.push_str("_No stacks recorded._\n\n");
        return;
    }
    let _ = writeln!(out, "| share | {unit} | frame |\n|---:|---:|---|");
    for r in rows.iter().take(limit) {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            pct(r.share),
            r.count,
            code(&r.name)
        );
    }
    out.push('\n');
}

fn hot_section(out: &mut String, title: &str, hot: &HotFrames, unit: &str) {
    let _ = writeln!(out, "## {title}\n");
    if hot.total == 0 {
        out.push_str("_No stacks recorded._\n\n");
        return;
    }
    if hot.path_weighted {
        let _ = writeln!(
            out,
            "Weighted by the critical path: each reader thread's samples are scaled to its \
             share of the consumer's data wait ({} = the whole path); shares are of that \
             weight. The flamegraphs and exports count raw samples.\n",
            hot.total
        );
    } else {
        let _ = writeln!(out, "Total: {} {unit}.\n", hot.total);
    }
    out.push_str("**By category**\n\n");
    frames_table(out, &hot.categories, unit, 8);
    out.push_str("**Hottest functions (self)**\n\n");
    frames_table(out, &hot.self_functions, unit, 10);
    out.push_str("**Hottest libraries (self)**\n\n");
    frames_table(out, &hot.libraries, unit, 6);
    unnamed_line(out, hot, unit);
}

/// How much of `hot` ends in a frame without a name, and why.
fn unnamed_line(out: &mut String, hot: &HotFrames, unit: &str) {
    let count = hot.unnamed_total;
    if count == 0 {
        let _ = writeln!(out, "Every stack ends in a named frame.\n");
        return;
    }
    // One clause per reason, its frames in the order of their counts.
    let mut by_reason: Vec<(&str, Vec<String>)> = Vec::new();
    for r in &hot.unnamed {
        let why = storprof_analysis::frames::why_unnamed(&r.name);
        let frame = format!("`{}` {}", r.name, pct(r.share));
        match by_reason.iter_mut().find(|(w, _)| *w == why) {
            Some((_, frames)) => frames.push(frame),
            None => by_reason.push((why, vec![frame])),
        }
    }
    let parts: Vec<String> = by_reason
        .into_iter()
        .map(|(why, frames)| format!("{}: {why}", frames.join(", ")))
        .collect();
    let _ = writeln!(
        out,
        "Frames without a name: {} {unit} ({}) end in one: {}.\n",
        count,
        pct(count as f64 / hot.total.max(1) as f64),
        parts.join("; ")
    );
}

/// An evidence figure's value in words: a fraction as a percentage, a
/// percentage with two decimals, anything else with its unit.
pub fn evidence_value(e: &storprof_analysis::verdict::Evidence) -> String {
    match e.unit.as_str() {
        "fraction" => pct(e.value),
        "%" => format!("{:.2}%", e.value),
        unit => format!("{:.2} {unit}", e.value),
    }
}

/// One row of the per-process table (report.md and report.html).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessRow {
    pub pid: u32,
    pub comm: String,
    pub threads: usize,
    /// On-CPU time over the recording, % of one CPU.
    pub cpu_percent: f64,
    /// Shares (0..1) of the process's thread time.
    pub runnable_share: f64,
    pub sleeping_share: f64,
    pub uninterruptible_share: f64,
    pub read_mib: f64,
    pub read_mib_per_s: f64,
    pub page_cache_miss_mib: f64,
}

/// A device's name, with the devices stacked on it ("`vda` (carries
/// `loop0`'s image file)").
fn device_cell(d: &DeviceFeature) -> String {
    let mut cell = code(&d.name);
    let carried: Vec<String> = d
        .carries
        .iter()
        .map(|c| match c.via {
            Stacking::LoopImage => format!("{}'s image file", code(&c.name)),
            Stacking::Member => format!("{}'s blocks (member)", code(&c.name)),
            Stacking::Other => format!("{}'s blocks", code(&c.name)),
        })
        .collect();
    if !carried.is_empty() {
        let _ = write!(cell, " (carries {})", carried.join(", "));
    }
    cell
}

/// What reads returned and what storage supplied for them: device reads,
/// or the read misses of the page cache when more (files on a file system
/// without a block device). New pages of buffered writes are named apart:
/// no device supplied them.
pub fn read_supply_line(f: &Features) -> String {
    let mut line = format!(
        "Read syscalls returned {:.1} MiB ({:.2} MiB/s); storage supplied {:.1} MiB; page-cache hit ratio {}.",
        f.read_syscall_bytes as f64 / MIB,
        f.read_syscall_mib_per_s,
        f.device_read_bytes.max(f.page_cache_miss_bytes) as f64 / MIB,
        f.page_cache_hit_ratio.map_or("n/a".to_string(), pct)
    );
    if f.page_cache_write_bytes > 0 {
        let _ = write!(
            line,
            " Buffered writes added {:.1} MiB of new pages to the page cache (not counted as supplied by storage).",
            f.page_cache_write_bytes as f64 / MIB
        );
    }
    line
}

/// The per-process rows from threads.json, by pid.
pub fn process_rows(session: &Session, f: &Features) -> Vec<ProcessRow> {
    let duration_ns = (f.duration_s * 1e9).max(1.0);
    let mut procs: BTreeMap<u32, Vec<&ThreadStats>> = BTreeMap::new();
    for t in &session.threads {
        procs.entry(t.pid).or_default().push(t);
    }
    let page = session.io.page_cache.page_size.max(1);
    procs
        .iter()
        .map(|(pid, ts)| {
            let comm = ts
                .iter()
                .find(|t| t.tid == *pid)
                .or(ts.first())
                .map_or("?", |t| t.comm.as_str());
            let life: u64 = ts.iter().map(|t| thread_total(t)).sum();
            let on: u64 = ts.iter().map(|t| t.on_cpu_ns).sum();
            let runnable: u64 = ts.iter().map(|t| t.off_cpu_ns.runnable).sum();
            let sleeping: u64 = ts.iter().map(|t| t.off_cpu_ns.sleeping).sum();
            let d: u64 = ts.iter().map(|t| t.off_cpu_ns.uninterruptible).sum();
            let read: u64 = ts.iter().map(|t| t.read_bytes).sum();
            let misses: u64 = ts.iter().map(|t| t.page_cache_misses).sum();
            ProcessRow {
                pid: *pid,
                comm: comm.to_string(),
                threads: ts.len(),
                cpu_percent: on as f64 / duration_ns * 100.0,
                runnable_share: share(runnable, life),
                sleeping_share: share(sleeping, life),
                uninterruptible_share: share(d, life),
                read_mib: read as f64 / MIB,
                read_mib_per_s: read as f64 / MIB / f.duration_s.max(1e-9),
                page_cache_miss_mib: misses.saturating_mul(page) as f64 / MIB,
            }
        })
        .collect()
}

/// One row of the writers' time split: the writers together, then each
/// writer (shares of thread time, from the write features).
#[derive(Clone, Debug, Serialize)]
pub struct WriterSplitRow {
    pub label: String,
    pub write_mib: f64,
    pub thread_s: f64,
    pub split: WriterTimeSplit,
}

/// The writers' time split rows of a write-dominated session (empty
/// otherwise): all writers first, then each writer when there are several.
pub fn writer_split_rows(f: &Features) -> Vec<WriterSplitRow> {
    let Some(w) = f.writes.as_ref().filter(|w| w.write_dominated) else {
        return Vec::new();
    };
    // Without per-writer rows (no per-thread stacks) the writers' own
    // bytes are not summed anywhere: all traced threads' bytes stand in.
    let writer_bytes = if w.writers.is_empty() {
        w.write_syscall_bytes
    } else {
        w.writers.iter().map(|r| r.write_bytes).sum()
    };
    let mut rows = vec![WriterSplitRow {
        label: format!(
            "all writers ({} thread(s): {})",
            w.writer_threads,
            w.writer_comms.join(", ")
        ),
        write_mib: writer_bytes as f64 / MIB,
        thread_s: w.writer_thread_s,
        split: w.time_split.clone(),
    }];
    if w.writers.len() > 1 {
        rows.extend(w.writers.iter().map(|r| WriterSplitRow {
            label: model::thread_label(&r.comm, r.pid, r.tid),
            write_mib: r.write_bytes as f64 / MIB,
            thread_s: r.thread_s,
            split: r.split.clone(),
        }));
    }
    rows
}

/// Column titles of the writers' time split, and a row's cells.
pub const WRITER_SPLIT_COLUMNS: [&str; 10] = [
    "writer",
    "write syscalls (MiB)",
    "thread time (s)",
    "on CPU: user",
    "on CPU: kernel write path",
    "on CPU: other kernel",
    "blocked in write",
    "fsync family",
    "writeback waits (of which dirty throttling)",
    "other off-CPU",
];

pub fn writer_split_cells(r: &WriterSplitRow) -> [String; 10] {
    let s = &r.split;
    [
        r.label.clone(),
        format!("{:.1}", r.write_mib),
        format!("{:.1}", r.thread_s),
        pct(s.on_cpu_user),
        pct(s.on_cpu_write_path),
        pct(s.on_cpu_other_kernel),
        pct(s.write_blocked),
        pct(s.fsync_blocked),
        format!("{} ({})", pct(s.writeback_wait), pct(s.dirty_throttle)),
        pct(s.other_off_cpu),
    ]
}

/// The system's dirty page cache over a write-dominated recording, in words.
pub fn dirty_pages_line(f: &Features) -> Option<String> {
    let w = f.writes.as_ref().filter(|w| w.write_dominated)?;
    let d = w.dirty.as_ref()?;
    Some(format!(
        "Dirty page cache (system-wide, /proc/vmstat each second): peak {:.1} MiB, mean {:.1} MiB; \
         under writeback: peak {:.1} MiB, mean {:.1} MiB; {:.1} MiB dirtied and {:.1} MiB written \
         back during the recording.",
        d.dirty_peak_mib,
        d.dirty_mean_mib,
        d.writeback_peak_mib,
        d.writeback_mean_mib,
        d.dirtied_mib,
        d.written_mib
    ))
}

/// A latency pair, "≤ p50 / ≤ p99 µs" ("n/a" without requests).
pub fn latency_pair(p50: Option<f64>, p99: Option<f64>) -> String {
    match (p50, p99) {
        (Some(a), Some(b)) => format!("≤ {a:.0} / ≤ {b:.0} µs"),
        _ => "n/a".to_string(),
    }
}

/// How the reader threads were chosen, in words ("n/a" when none were).
pub fn reader_selection_name(f: &Features) -> String {
    f.reader_selection.map_or("n/a".to_string(), |s| {
        serde_json::to_value(s)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    })
}

/// The system facts of the session: (fact, value) rows.
pub fn system_rows(session: &Session, f: &Features) -> Vec<(&'static str, String)> {
    let i = &session.info;
    let probes: Vec<String> = i
        .probes
        .iter()
        .map(|p| {
            format!(
                "{}{}",
                p.name,
                if p.attached { "" } else { " (not attached)" }
            )
        })
        .collect();
    let lost: u64 = i.lost_events.values().sum();
    vec![
        ("host", i.hostname.clone()),
        ("kernel", i.kernel.clone()),
        ("CPUs", i.num_cpus.to_string()),
        (
            "recording",
            format!(
                "{:.1} s, ended: {}",
                f.duration_s,
                if i.end_reason.is_empty() {
                    "unknown"
                } else {
                    &i.end_reason
                }
            ),
        ),
        ("sampling", format!("{} Hz", i.freq_hz)),
        ("storprof", i.storprof_version.clone()),
        (
            "probes",
            if probes.is_empty() {
                "unknown".to_string()
            } else {
                probes.join(", ")
            },
        ),
        (
            "lost events",
            if i.missed_switch_ins == 0 {
                lost.to_string()
            } else {
                format!(
                    "{lost}; {} switch-ins had no scheduler event and were put at the \
                     thread's wake-up",
                    i.missed_switch_ins
                )
            },
        ),
        (
            "exit",
            match (i.exit_code, i.exit_signal) {
                (Some(c), _) => format!("code {c}"),
                (None, Some(s)) => format!("signal {s}"),
                _ => "n/a".to_string(),
            },
        ),
    ]
}

/// Renders report.md.
pub fn render_markdown(session: &Session, analysis: &Diagnosis) -> String {
    let v = &analysis.verdict;
    let f = &analysis.features;
    let mut out = String::new();
    let _ = writeln!(out, "# storprof report: `{}`\n", v.verdict);
    let _ = writeln!(out, "> **{}**\n", v.headline);
    let _ = writeln!(
        out,
        "Verdict **`{}`**, confidence {} ({:.2}){}.\n",
        v.verdict,
        v.confidence_label,
        v.confidence,
        if v.inconclusive {
            ", inconclusive: no rule's conditions all held"
        } else {
            ""
        }
    );
    if !v.threshold_overrides.is_empty() {
        let list: Vec<String> = v
            .threshold_overrides
            .iter()
            .map(|o| format!("`{}` = {} (default {})", o.key, o.value, o.default))
            .collect();
        let _ = writeln!(out, "Thresholds overridden: {}.\n", list.join(", "));
    }
    if !v.actions.is_empty() {
        let _ = writeln!(out, "**What to try**\n");
        for a in &v.actions {
            let _ = writeln!(out, "- {a}");
        }
        let _ = writeln!(out);
    }
    if let Some(early) = &session.info.early_verdict {
        let held = if early.held_to_s > early.held_from_s {
            format!(
                "held from {:.1} s to {:.1} s of the recording",
                early.held_from_s, early.held_to_s
            )
        } else {
            format!("was found at {:.1} s", early.held_to_s)
        };
        let _ = writeln!(
            out,
            "> [!NOTE]\n> Verdict reached early (`--until-verdict`): `{}` ({}) {held}, and the \
             recording stopped at {:.1} s; the figures are over that recording, not the whole job.\n",
            early.verdict, early.confidence_label, session.info.duration_s
        );
    }
    if !session.is_complete() {
        let _ = writeln!(
            out,
            "> [!WARNING]\n> Partial session: {} missing (the recording stopped before writing them). \
             Figures that need them are absent or zero.\n",
            session.missing.join(", ")
        );
    }

    out.push_str("## Evidence\n\n| figure | value |\n|---|---:|\n");
    for e in &v.evidence {
        let _ = writeln!(out, "| {} | {} |", cell(&e.text), evidence_value(e));
    }
    out.push('\n');

    stall_section(&mut out, v.stall.as_ref());
    wait_section(&mut out, analysis);

    if !v.notes.is_empty() {
        out.push_str("## Findings and caveats\n\n");
        for n in &v.notes {
            let _ = writeln!(out, "- {}", n.replace('\n', " "));
        }
        out.push('\n');
    }
    out.push_str(
        "## Runners-up\n\n| verdict | conditions hold | score | finding |\n|---|---|---:|---|\n",
    );
    for r in &v.runners_up {
        let _ = writeln!(
            out,
            "| `{}` | {} | {:.2} | {} |",
            r.verdict,
            if r.fired { "yes" } else { "no" },
            r.score,
            cell(&r.summary)
        );
    }
    out.push('\n');

    if let Some(b) = &f.bench {
        out.push_str("## Benchmark (storprof bench)\n\n| metric | value |\n|---|---:|\n");
        let opt = |x: Option<f64>, fmt: &dyn Fn(f64) -> String| x.map_or("n/a".to_string(), fmt);
        let rows = [
            ("AU (%)", opt(b.au_percentage, &|x| format!("{x:.4}"))),
            (
                "expected AU (%)",
                opt(b.au_expected_percentage, &|x| format!("{x:.0}")),
            ),
            (
                "computation time per step (s)",
                opt(b.computation_time_s, &|x| format!("{x:.4}")),
            ),
            (
                "throughput (samples/s)",
                opt(b.throughput_samples_per_second, &|x| format!("{x:.4}")),
            ),
            (
                "I/O, DLIO derived (MiB/s)",
                opt(b.derived_io_mib_per_s, &|x| format!("{x:.4}")),
            ),
            (
                "I/O, measured by the bench (MiB/s)",
                opt(b.measured_read_mib_per_s, &|x| format!("{x:.4}")),
            ),
            (
                "measured / derived",
                opt(b.measured_over_derived, &|x| format!("{x:.2}×")),
            ),
            (
                "read amplification",
                opt(b.read_amplification, &|x| format!("{x:.2}×")),
            ),
        ];
        for (k, val) in rows {
            let _ = writeln!(out, "| {k} | {val} |");
        }
        let _ = writeln!(
            out,
            "| read syscalls, measured by storprof (MiB/s) | {:.4} |\n",
            f.read_syscall_mib_per_s
        );
    }

    // Per process.
    let procs = process_rows(session, f);
    out.push_str("## Processes\n\n");
    if procs.is_empty() {
        out.push_str("_No thread statistics (threads.json missing or empty)._\n\n");
    } else {
        out.push_str(
            "| pid | comm | threads | CPU (% of one CPU) | runnable | sleeping | D (I/O) | read syscalls (MiB) | read MiB/s | page-cache misses (MiB) |\n\
             |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for p in &procs {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.1}% | {} | {} | {} | {:.1} | {:.2} | {:.1} |",
                p.pid,
                code(&p.comm),
                p.threads,
                p.cpu_percent,
                pct(p.runnable_share),
                pct(p.sleeping_share),
                pct(p.uninterruptible_share),
                p.read_mib,
                p.read_mib_per_s,
                p.page_cache_miss_mib,
            );
        }
        let _ = writeln!(
            out,
            "\nThread-state shares are of each process's thread time; readers (by {}) : {} thread(s), {}.\n",
            reader_selection_name(f),
            f.reader_threads,
            f.reader_comms
                .iter()
                .map(|c| code(c))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }

    let writer_rows = writer_split_rows(f);
    if !writer_rows.is_empty() {
        out.push_str(
            "## Writers\n\nWhere the writer threads' time went (shares of their thread time; \
             on-CPU time split by their CPU samples, blocked time by their off-CPU stacks and \
             syscall times, as the write verdicts count it):\n\n",
        );
        let _ = writeln!(out, "| {} |", WRITER_SPLIT_COLUMNS.join(" | "));
        let _ = writeln!(
            out,
            "|---|{}",
            "---:|".repeat(WRITER_SPLIT_COLUMNS.len() - 1)
        );
        for r in &writer_rows {
            let cells = writer_split_cells(r);
            let _ = writeln!(out, "| {} | {} |", cell(&cells[0]), cells[1..].join(" | "));
        }
        out.push('\n');
    }

    out.push_str("## Devices\n\n");
    if f.devices.is_empty() {
        out.push_str("_No block-device activity recorded (io.json missing or no devices)._\n\n");
    } else {
        out.push_str(
            "| device | read (MiB) | read MiB/s | read requests | read latency p50 / p99 | write (MiB) | write MiB/s | write requests | write latency p50 / p99 | busy | all requests p50 / p99 |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for (d, raw) in f.devices.iter().zip(&session.io.devices) {
            let _ = writeln!(
                out,
                "| {} | {:.1} | {:.2} | {} | {} | {:.1} | {:.2} | {} | {} | {} | {} |",
                device_cell(d),
                d.read_bytes as f64 / MIB,
                d.read_mib_per_s,
                d.read_requests,
                latency_pair(d.read_latency_p50_us, d.read_latency_p99_us),
                raw.write_bytes as f64 / MIB,
                d.write_mib_per_s,
                raw.write_requests,
                latency_pair(d.write_latency_p50_us, d.write_latency_p99_us),
                pct(d.utilization),
                latency_pair(d.latency_p50_us, d.latency_p99_us)
            );
        }
        let _ = writeln!(out, "\n{}\n", read_supply_line(f));
        if f.devices.iter().any(|d| !d.carries.is_empty()) {
            out.push_str(
                "A device that carries another one's (a loop device's image file, a dm/md device's members) moves its bytes again: device totals count them once, and a verdict names the upper device unless the lower one moved more bytes of its own.\n\n",
            );
        }
        if let Some(line) = dirty_pages_line(f) {
            let _ = writeln!(out, "{line}\n");
        }
    }

    hot_section(
        &mut out,
        "Top on-CPU frames (reader threads)",
        &analysis.hot_oncpu_readers,
        if analysis.hot_oncpu_readers.path_weighted {
            "weight"
        } else {
            "samples"
        },
    );
    hot_section(
        &mut out,
        "Top off-CPU frames (all threads, blocked time)",
        &analysis.hot_offcpu,
        "us",
    );

    let i = &session.info;
    out.push_str("## System\n\n| fact | value |\n|---|---|\n");
    let rows = system_rows(session, f);
    for (k, val) in rows {
        let _ = writeln!(out, "| {k} | {} |", cell(&val));
    }
    out.push('\n');
    for n in i.notes.iter().chain(&session.warnings) {
        let _ = writeln!(out, "- {}", n.replace('\n', " "));
    }
    if !i.notes.is_empty() || !session.warnings.is_empty() {
        out.push('\n');
    }

    out.push_str("## Command\n\n```sh\n");
    if i.command.is_empty() {
        let pids: Vec<String> = i.attached_pids.iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "# attached to pid(s) {}", pids.join(" "));
    } else {
        let _ = writeln!(out, "{}", shell_join(&redact_args(&i.command)));
    }
    out.push_str("```\n\n");
    if let Some(sentence) = checkpoint_note(i) {
        let _ = writeln!(out, "{sentence}\n");
    }
    if let Some(sentence) = command_ending(i) {
        let _ = writeln!(out, "{sentence}\n");
    }
    // Relative image references: GitHub shows SVGs next to the markdown
    // (a bundle unpacked into a repository or gist); report.html is the
    // interactive page for everything else.
    out.push_str(
        "Interactive report (zoom, search, differential flamegraph): [report.html](report.html); \
         figures: `verdict.json`.\n\n\
         ![Timeline](timeline.svg)\n\n\
         ![On-CPU flamegraph](flamegraph-oncpu.svg)\n\n\
         Off-CPU flamegraph: [flamegraph-offcpu.svg](flamegraph-offcpu.svg).\n",
    );
    out
}

/// For a session that storprof wrote while recording and never replaced
/// with the final one (it was killed, or the machine stopped): says so.
pub fn checkpoint_note(i: &storprof_session::model::SessionInfo) -> Option<String> {
    (i.end_reason == "checkpoint").then(|| {
        format!(
            "**Partial session.** storprof did not finish this recording: this is the last \
             checkpoint it wrote, {:.0} s in (storprof was killed, or the machine stopped). \
             How the command ended, and anything after that moment, is not in it.",
            i.duration_s
        )
    })
}

/// How the command ended, in words, when storprof had a hand in it (its
/// SIGTERM, its SIGKILL after the grace period, or a command left
/// running); None for a command that exited on its own or an older session.
pub fn command_ending(i: &storprof_session::model::SessionInfo) -> Option<String> {
    let grace = i.grace_s.map_or_else(String::new, |g| format!(" {g:.0} s"));
    let status = match (i.exit_code, i.exit_signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => "status unknown".to_string(),
    };
    Some(match i.ended_by.as_deref()? {
        "duration-sigterm" => format!(
            "At --duration the command was sent SIGTERM and ended within the{grace} grace \
             period ({status})."
        ),
        "duration-sigkill-after-grace" => format!(
            "The command ignored SIGTERM at --duration and was killed with SIGKILL after \
             the{grace} grace period."
        ),
        "verdict-sigterm" => format!(
            "After the early verdict the command was sent SIGTERM and ended within the{grace} \
             grace period ({status})."
        ),
        "verdict-sigkill-after-grace" => format!(
            "After the early verdict the command ignored SIGTERM and was killed with SIGKILL \
             after the{grace} grace period."
        ),
        "interrupt-sigterm" => format!(
            "After Ctrl-C the command was still running, was sent SIGTERM and ended \
             ({status})."
        ),
        "interrupt-sigkill" => "After Ctrl-C the command outlived SIGINT and SIGTERM and was \
                                killed with SIGKILL."
            .to_string(),
        "left-running" => "The command was still running when the recording ended.".to_string(),
        _ => return None,
    })
}

/// Joins argv for display, single-quoting words with shell metacharacters.
pub fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// "Who waits for whom": the kernel AU beside the bench's, the phases, the
/// critical path of the consumer's data wait and the roles.
/// The threads a stall is stuck on, each with its stack (innermost last).
fn stall_section(out: &mut String, stall: Option<&storprof_analysis::stall::Stall>) {
    let Some(stall) = stall else { return };
    let _ = writeln!(
        out,
        "## Stalled ({})\n\nNo progress since {:.1} s into the recording (for {:.1} s). \
         The threads it is stuck on, innermost frame last:\n",
        stall.kind.as_str(),
        stall.since_s,
        stall.quiet_s
    );
    for th in &stall.threads {
        let _ = writeln!(
            out,
            "### `{}` (pid {}, tid {}): {}, {:.1} s\n\n```text",
            th.comm, th.pid, th.tid, th.state, th.seconds
        );
        if th.stack.is_empty() {
            out.push_str("(no stack recorded)\n");
        }
        for frame in &th.stack {
            let _ = writeln!(out, "{frame}");
        }
        out.push_str("```\n\n");
    }
}

/// A consumer's window time in words: compute, data wait, the GIL, other
/// locks, a CPU queue; None for an empty window.
fn consumer_time_split(c: &storprof_analysis::waitgraph::ConsumerTime) -> Option<String> {
    if c.window_ns == 0 {
        return None;
    }
    let pct = |ns: u64| ns as f64 / c.window_ns as f64 * 100.0;
    let mut parts = vec![format!(
        "waiting for data {:.1}% of its window",
        pct(c.data_wait_ns)
    )];
    if c.timed_out_wait_ns > 0 {
        parts[0].push_str(&format!(
            " ({:.1}% in waits that timed out and were retried)",
            pct(c.timed_out_wait_ns)
        ));
    }
    if c.gil_ns > 0 {
        parts.push(format!(
            "waiting for the GIL {:.1}% (runnable in all but name: a loader ran Python)",
            pct(c.gil_ns)
        ));
    }
    if c.lock_ns > 0 {
        parts.push(format!("waiting for other locks {:.1}%", pct(c.lock_ns)));
    }
    if c.fetch_cpu_ns > 0 {
        parts.push(format!(
            "on a CPU inside its loader (taking batches, starting workers) {:.1}%",
            pct(c.fetch_cpu_ns)
        ));
    }
    if c.queued_ns > 0 {
        parts.push(format!("waiting for a CPU {:.1}%", pct(c.queued_ns)));
    }
    if c.emulated_compute {
        parts.push(format!("in its emulated compute {:.1}%", pct(c.compute_ns)));
    }
    Some(parts.join(", "))
}

fn wait_section(out: &mut String, analysis: &Diagnosis) {
    let Some(w) = &analysis.wait else {
        return;
    };
    out.push_str("## Who waits for whom\n\n");
    if w.consumers.is_empty() {
        out.push_str("_No consumer found: the readers are the whole pipeline._\n\n");
    } else {
        out.push_str("| consumer | waited for data | window (its time) | AU, kernel |\n|---|---:|---:|---:|\n");
        for c in &w.consumers {
            let _ = writeln!(
                out,
                "| {} (pid {}, tid {}){} | {:.2} s | {:.2} s | {:.1}% |",
                cell(&c.comm),
                c.pid,
                c.tid,
                if c.emulated_compute {
                    ", compute emulated by sleeps"
                } else {
                    ""
                },
                c.data_wait_ns as f64 / 1e9,
                c.window_ns as f64 / 1e9,
                c.au_percentage
            );
        }
        for c in &w.consumers {
            if let Some(split) = consumer_time_split(c) {
                let _ = writeln!(out, "\n{} (tid {}): {split}.", cell(&c.comm), c.tid);
            }
        }
        if let (Some(k), Some(b)) = (
            w.kernel_au_percentage,
            analysis
                .features
                .bench
                .as_ref()
                .and_then(|b| b.au_percentage),
        ) {
            let _ = writeln!(
                out,
                "\nAU seen by the kernel {k:.1}%, reported by the workload's summary.json {b:.1}% ({:+.1} points).",
                k - b
            );
        }
        out.push('\n');
    }
    if let Some(win) = &w.window {
        let _ = writeln!(
            out,
            "Training window {:.2}–{:.2} s, from {}.\n",
            win.start_s, win.end_s, win.source
        );
    }
    if !w.phases.is_empty() {
        out.push_str("| phase | from (s) | to (s) | what ran |\n|---|---:|---:|---|\n");
        for p in &w.phases {
            let _ = writeln!(
                out,
                "| {} | {:.2} | {:.2} | {} |",
                p.name,
                p.start_s,
                p.end_s,
                cell(&p.activity)
            );
        }
        out.push('\n');
    }
    if !w.critical_path.is_empty() {
        out.push_str(
            "Where the consumer's data wait went (the critical path):\n\n\
             | state | share | threads |\n|---|---:|---|\n",
        );
        for p in &w.critical_path {
            let threads: Vec<String> = p
                .threads
                .iter()
                .take(4)
                .map(|(pid, tid, comm, share)| {
                    format!("{} {}", model::thread_label(comm, *pid, *tid), pct(*share))
                })
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                p.kind.as_str(),
                pct(p.share),
                cell(&threads.join(", "))
            );
        }
        out.push('\n');
    }
    if !w.roles.is_empty() {
        use storprof_analysis::waitgraph::Role;
        out.push_str("| thread | role | on CPU | why |\n|---|---|---:|---|\n");
        let idle: Vec<_> = w.roles.iter().filter(|r| r.role == Role::Idle).collect();
        for r in w.roles.iter().filter(|r| r.role != Role::Idle) {
            let _ = writeln!(
                out,
                "| {} | {:?} | {} | {} |",
                cell(&model::thread_label(&r.comm, r.pid, r.tid)),
                r.role,
                pct(r.on_cpu_share),
                cell(&r.reason)
            );
        }
        if !idle.is_empty() {
            let _ = writeln!(
                out,
                "| {} other thread(s) | Idle | ≤ {} | neither wake the data path nor are waited on; they count toward no verdict |",
                idle.len(),
                pct(idle.iter().map(|r| r.on_cpu_share).fold(0.0, f64::max))
            );
        }
        out.push('\n');
    }
}

/// The verdict as printed on a terminal: headline, evidence, other findings.
pub fn render_terminal(analysis: &Diagnosis) -> String {
    let v = &analysis.verdict;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "verdict: {} (confidence {} {:.2})",
        v.verdict, v.confidence_label, v.confidence
    );
    let _ = writeln!(out, "  {}", v.headline);
    if let Some(w) = &analysis.wait
        && let Some(k) = w.kernel_au_percentage
    {
        let bench = analysis
            .features
            .bench
            .as_ref()
            .and_then(|b| b.au_percentage)
            .map_or(String::new(), |b| format!("; the bench reported {b:.1}%"));
        let window = w.window.as_ref().map_or(String::new(), |x| {
            format!(" over {:.1}–{:.1} s", x.start_s, x.end_s)
        });
        let _ = writeln!(out, "  AU seen by the kernel {k:.1}%{window}{bench}");
    }
    for e in &v.evidence {
        let _ = writeln!(out, "  - {}", e.text);
    }
    if let Some(stall) = &v.stall {
        for th in stall.threads.iter().take(4) {
            let leaf: Vec<&str> = th.stack.iter().rev().take(4).map(String::as_str).collect();
            let _ = writeln!(
                out,
                "  stuck: {} (tid {}) {}: {}",
                th.comm,
                th.tid,
                th.state,
                leaf.join(" < ")
            );
        }
    }
    for n in &v.notes {
        let _ = writeln!(out, "  * {n}");
    }
    for a in &v.actions {
        let _ = writeln!(out, "  try: {a}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{checkpoint_note, command_ending, render_markdown};
    use crate::diagnosis::diagnose;
    use storprof_analysis::Thresholds;
    use storprof_session::{
        load::Session,
        model::{
            DeviceStats, LowerDevice, OffCpuNs, SessionInfo, Stacking, ThreadStats, TimeSeries,
            VmstatSeries,
        },
    };

    /// A writer that wrote 4 GiB in 10 s, 8 s of it throttled in
    /// balance_dirty_pages, on a device whose writes took 1-2 ms, with a
    /// vmstat series, and a reader that read 64 MiB.
    fn write_session() -> Session {
        const S: u64 = 1_000_000_000;
        let mut s = Session::default();
        s.info.freq_hz = 100;
        s.info.duration_s = 10.0;
        s.info
            .features
            .insert("syscall_timing".into(), "blocked".into());
        let thread = |tid: u32, comm: &str, write: u64, read: u64| ThreadStats {
            pid: 20,
            tid,
            comm: comm.into(),
            on_cpu_ns: S,
            off_cpu_ns: OffCpuNs {
                uninterruptible: 9 * S,
                ..Default::default()
            },
            write_bytes: write,
            read_bytes: read,
            ..Default::default()
        };
        s.threads = vec![
            thread(20, "ckpt", 4 << 30, 0),
            thread(21, "log", 0, 64 << 20),
        ];
        s.offcpu.stacks = vec![(
            "ckpt;main;vfs_write_[k];balance_dirty_pages_[k];schedule_[k]".into(),
            8_000_000,
        )];
        s.io.devices = vec![DeviceStats {
            name: "loop0".into(),
            dev: "7:0".into(),
            read_bytes: 1 << 20,
            read_requests: 4,
            write_bytes: 100 << 20,
            write_requests: 100,
            latency_log2_ns: [vec![0; 16], vec![4], vec![0; 3], vec![100]].concat(),
            read_latency_log2_ns: [vec![0; 16], vec![4]].concat(),
            write_latency_log2_ns: [vec![0; 20], vec![100]].concat(),
            busy_ns: 9 * S,
            utilization: 0.9,
            ..Default::default()
        }];
        s.timeseries = Some(TimeSeries {
            bucket_ns: S,
            vmstat: Some(VmstatSeries {
                dirty_bytes: vec![8 << 20, 16 << 20],
                writeback_bytes: vec![1 << 20, 3 << 20],
                dirtied_bytes: vec![24 << 20, 8 << 20],
                written_bytes: vec![8 << 20, 8 << 20],
            }),
            ..Default::default()
        });
        s
    }

    #[test]
    fn write_sessions_show_the_writers_split_device_writes_and_dirty_pages() {
        let s = write_session();
        let md = render_markdown(&s, &diagnose(&s, &Thresholds::default()));
        assert!(md.contains("## Writers"), "{md}");
        // The writer's row: 10% on CPU (no samples: other kernel), 80%
        // throttled, the rest (D sleep outside these stacks) other.
        assert!(
            md.contains(
                "| all writers (1 thread(s): ckpt) | 4096.0 | 10.0 | 0.0% | 0.0% | 10.0% | 0.0% \
                 | 0.0% | 80.0% (80.0%) | 10.0% |"
            ),
            "{md}"
        );
        // Reads ≤ 131 µs (bucket 16), writes ≤ 2097 µs (bucket 20), both
        // in the whole-device figure.
        assert!(
            md.contains(
                "| `loop0` | 1.0 | 0.10 | 4 | ≤ 131 / ≤ 131 µs | 100.0 | 10.00 | 100 \
                 | ≤ 2097 / ≤ 2097 µs | 90.0% | ≤ 2097 / ≤ 2097 µs |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "Dirty page cache (system-wide, /proc/vmstat each second): peak 16.0 MiB, \
                 mean 12.0 MiB; under writeback: peak 3.0 MiB, mean 2.0 MiB; 32.0 MiB dirtied \
                 and 16.0 MiB written back during the recording."
            ),
            "{md}"
        );
    }

    /// loop0's image lives on vda, which wrote its bytes again: vda's row
    /// says so, and the line under the table explains the counting.
    #[test]
    fn a_disk_carrying_a_loop_image_says_so_in_the_device_table() {
        let mut s = write_session();
        s.io.devices[0].sits_on = vec![LowerDevice {
            name: "vda".into(),
            dev: "254:0".into(),
            via: Stacking::LoopImage,
        }];
        s.io.devices.push(DeviceStats {
            name: "vda".into(),
            dev: "254:0".into(),
            write_bytes: 101 << 20,
            write_requests: 50,
            ..Default::default()
        });
        let md = render_markdown(&s, &diagnose(&s, &Thresholds::default()));
        assert!(
            md.contains("| `vda` (carries `loop0`'s image file) |"),
            "{md}"
        );
        assert!(md.contains("| `loop0` |"), "{md}");
        assert!(md.contains("device totals count them once"), "{md}");
        // Without stacking read, neither.
        s.io.devices[0].sits_on.clear();
        let md = render_markdown(&s, &diagnose(&s, &Thresholds::default()));
        assert!(md.contains("| `vda` |") && !md.contains("carries"), "{md}");
    }

    #[test]
    fn read_sessions_have_no_writers_section_nor_dirty_line() {
        let mut s = write_session();
        s.threads[0].write_bytes = 0;
        s.threads[1].read_bytes = 4 << 30;
        let md = render_markdown(&s, &diagnose(&s, &Thresholds::default()));
        assert!(!md.contains("## Writers"), "{md}");
        assert!(!md.contains("Dirty page cache"), "{md}");
    }

    #[test]
    fn a_checkpoint_says_it_is_partial() {
        let mut i = storprof_session::model::SessionInfo {
            duration_s: 61.4,
            ..Default::default()
        };
        assert_eq!(checkpoint_note(&i), None);
        i.end_reason = "checkpoint".to_string();
        let note = checkpoint_note(&i).unwrap_or_default();
        assert!(note.starts_with("**Partial session.**"), "{note}");
        assert!(note.contains("61 s in"), "{note}");
    }

    #[test]
    fn how_the_command_ended_is_said_only_when_storprof_ended_it() {
        let mut i = SessionInfo::default();
        // An older session, or a command that exited by itself.
        assert_eq!(command_ending(&i), None);
        i.ended_by = Some("exit".into());
        i.exit_code = Some(0);
        assert_eq!(command_ending(&i), None);
        i.ended_by = Some("duration-sigkill-after-grace".into());
        i.grace_s = Some(5.0);
        i.exit_code = None;
        i.exit_signal = Some(9);
        assert_eq!(
            command_ending(&i).as_deref(),
            Some(
                "The command ignored SIGTERM at --duration and was killed with SIGKILL \
                 after the 5 s grace period."
            )
        );
        i.ended_by = Some("duration-sigterm".into());
        i.exit_signal = Some(15);
        assert_eq!(
            command_ending(&i).as_deref(),
            Some(
                "At --duration the command was sent SIGTERM and ended within the 5 s grace \
                 period (signal 15)."
            )
        );
    }
}
