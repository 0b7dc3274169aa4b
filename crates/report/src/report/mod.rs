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
    features::{BenchFeature, DeviceFeature, WriterTimeSplit},
    frames::FrameShare,
    whatif::WhatIf,
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
    what_would_help: &'a WhatIf,
}

/// Pretty JSON of `verdict.json`.
pub fn verdict_json(analysis: &Diagnosis) -> serde_json::Result<String> {
    let file = VerdictFile {
        verdict: &analysis.verdict,
        hot_oncpu_readers: &analysis.hot_oncpu_readers.categories,
        hot_offcpu: &analysis.hot_offcpu.categories,
        features: &analysis.features,
        what_would_help: &analysis.what_would_help,
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

mod sections;
mod tables;
#[cfg(test)]
mod tests;

pub use sections::*;
pub use tables::*;

/// Renders report.md.
pub fn render_markdown(session: &Session, analysis: &Diagnosis) -> String {
    let v = &analysis.verdict;
    let f = &analysis.features;
    let mut out = String::new();
    verdict_header(&mut out, v);
    session_callouts(&mut out, session);
    evidence_section(&mut out, v);
    stall_section(&mut out, v.stall.as_ref());
    wait_section(&mut out, analysis);
    what_would_help_section(&mut out, &analysis.what_would_help);
    findings_section(&mut out, v);
    runners_up_section(&mut out, v);
    if let Some(b) = &f.bench {
        bench_section(&mut out, b, f);
    }
    processes_section(&mut out, session, f);
    writers_section(&mut out, f);
    devices_section(&mut out, session, f);
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
    system_section(&mut out, session, f);
    command_section(&mut out, &session.info);
    figure_links(&mut out);
    out
}

/// Writes the title, the headline, the verdict with its confidence, any
/// overridden thresholds and the "What to try" list.
fn verdict_header(out: &mut String, v: &Verdict) {
    let (title, named) = if v.inconclusive {
        (
            "inconclusive".to_string(),
            format!("**inconclusive** (the closest match is `{}`)", v.verdict),
        )
    } else {
        (format!("`{}`", v.verdict), format!("**`{}`**", v.verdict))
    };
    let _ = writeln!(out, "# storprof report: {title}\n");
    let _ = writeln!(out, "> **{}**\n", v.headline);
    let _ = writeln!(
        out,
        "Verdict {named}, confidence {} ({:.2}).\n",
        v.confidence_label, v.confidence,
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
}

/// Writes the callouts about the recording itself: a verdict reached early
/// (`--until-verdict`) and a partial session.
fn session_callouts(out: &mut String, session: &Session) {
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
}

/// Writes the "Evidence" table: the verdict's figures and their values.
fn evidence_section(out: &mut String, v: &Verdict) {
    out.push_str("## Evidence\n\n| figure | value |\n|---|---:|\n");
    for e in &v.evidence {
        let _ = writeln!(out, "| {} | {} |", cell(&e.text), evidence_value(e));
    }
    out.push('\n');
}

/// Writes the "Findings and caveats" list of the verdict's notes, if any.
fn findings_section(out: &mut String, v: &Verdict) {
    if !v.notes.is_empty() {
        out.push_str("## Findings and caveats\n\n");
        for n in &v.notes {
            let _ = writeln!(out, "- {}", n.replace('\n', " "));
        }
        out.push('\n');
    }
}

/// Writes the "Runners-up" table: the other verdicts, whether their
/// conditions hold, their scores and findings.
fn runners_up_section(out: &mut String, v: &Verdict) {
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
}

/// Writes the "Benchmark (storprof bench)" table: the bench's own figures
/// next to the read-syscall rate storprof measured.
fn bench_section(out: &mut String, b: &BenchFeature, f: &Features) {
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

/// Writes the "Processes" table (CPU, thread states, reads per process)
/// and the line naming the reader threads.
fn processes_section(out: &mut String, session: &Session, f: &Features) {
    let procs = process_rows(session, f);
    out.push_str("## Processes\n\n");
    if procs.is_empty() {
        out.push_str("_No thread statistics (threads.json missing or empty)._\n\n");
        return;
    }
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

/// Writes the "Writers" table (where the writer threads' time went), if
/// the session has writers.
fn writers_section(out: &mut String, f: &Features) {
    let writer_rows = writer_split_rows(f);
    if writer_rows.is_empty() {
        return;
    }
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

/// Writes the "Devices" table (bytes, rates, requests, latencies, busy
/// share per block device) and the lines about read supply, stacked
/// devices and dirty pages.
fn devices_section(out: &mut String, session: &Session, f: &Features) {
    out.push_str("## Devices\n\n");
    if f.devices.is_empty() {
        out.push_str("_No block-device activity recorded (io.json missing or no devices)._\n\n");
        return;
    }
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

/// Writes the "System" table and the session's notes and warnings.
fn system_section(out: &mut String, session: &Session, f: &Features) {
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
}

/// Writes the "Command" section: the recorded command (redacted) or the
/// attached pids, then how checkpoints and the command ended.
fn command_section(out: &mut String, i: &model::SessionInfo) {
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
}

/// Writes the closing links to report.html, verdict.json and the SVG
/// figures.
fn figure_links(out: &mut String) {
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
}

/// The verdict as printed on a terminal: headline, evidence, other findings.
pub fn render_terminal(analysis: &Diagnosis) -> String {
    let v = &analysis.verdict;
    let mut out = String::new();
    if v.inconclusive {
        let _ = writeln!(
            out,
            "verdict: inconclusive (closest match {}, confidence {} {:.2})",
            v.verdict, v.confidence_label, v.confidence
        );
    } else {
        let _ = writeln!(
            out,
            "verdict: {} (confidence {} {:.2})",
            v.verdict, v.confidence_label, v.confidence
        );
    }
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
    let w = &analysis.what_would_help;
    let helps = w.helps();
    for p in helps.iter().take(2) {
        let _ = writeln!(out, "  would help: {}", p.summary());
    }
    if helps.is_empty() && w.today.is_some() {
        let _ = writeln!(
            out,
            "  would help: nothing on the data side projects {:.0}% more steps/s (`storprof whatif` shows the table)",
            100.0 * storprof_analysis::whatif::HELPS_MIN_GAIN
        );
    }
    out
}
