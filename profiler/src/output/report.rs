//! `report.md` (GitHub-flavoured markdown a user pastes into an issue) and
//! `verdict.json`, rendered from a session and its analysis. Pure: strings
//! out; the command writes them.
//!
//! ```text
//! Session + Analysis ──► render_markdown ──► report.md
//!                    ──► verdict_json     ──► verdict.json
//! ```
//! The recorded command is redacted (see [`super::bundle::redact_args`]):
//! reports travel with bundles.
use std::{collections::BTreeMap, fmt::Write as _};

use serde::Serialize;

use super::bundle::redact_args;
use crate::{
    analysis::{Analysis, Features, HotFrames, Verdict, frames::FrameShare},
    session::{load::Session, model::ThreadStats},
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
pub fn verdict_json(analysis: &Analysis) -> serde_json::Result<String> {
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
    let _ = writeln!(out, "Total: {} {unit}.\n", hot.total);
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
        let why = crate::analysis::frames::why_unnamed(&r.name);
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
pub fn evidence_value(e: &crate::analysis::verdict::Evidence) -> String {
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
        ("lost events", lost.to_string()),
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
pub fn render_markdown(session: &Session, analysis: &Analysis) -> String {
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

    out.push_str("## Devices\n\n");
    if f.devices.is_empty() {
        out.push_str("_No block-device activity recorded (io.json missing or no devices)._\n\n");
    } else {
        out.push_str(
            "| device | read (MiB) | read MiB/s | read requests | write (MiB) | busy | p50 latency | p99 latency |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for (d, raw) in f.devices.iter().zip(&session.io.devices) {
            let lat = |x: Option<f64>| x.map_or("n/a".to_string(), |us| format!("≤ {us:.0} µs"));
            let _ = writeln!(
                out,
                "| {} | {:.1} | {:.2} | {} | {:.1} | {} | {} | {} |",
                code(&d.name),
                d.read_bytes as f64 / MIB,
                d.read_mib_per_s,
                d.read_requests,
                raw.write_bytes as f64 / MIB,
                pct(d.utilization),
                lat(d.latency_p50_us),
                lat(d.latency_p99_us)
            );
        }
        let _ = writeln!(
            out,
            "\nRead syscalls returned {:.1} MiB ({:.2} MiB/s); storage supplied {:.1} MiB; page-cache hit ratio {}.\n",
            f.read_syscall_bytes as f64 / MIB,
            f.read_syscall_mib_per_s,
            f.device_read_bytes.max(f.page_cache_miss_bytes) as f64 / MIB,
            f.page_cache_hit_ratio.map_or("n/a".to_string(), pct)
        );
    }

    hot_section(
        &mut out,
        "Top on-CPU frames (reader threads)",
        &analysis.hot_oncpu_readers,
        "samples",
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
    out.push_str(
        "Flamegraphs: [on-CPU](flamegraph-oncpu.svg), [off-CPU](flamegraph-offcpu.svg); \
         timeline: [timeline.svg](timeline.svg); figures: `verdict.json`.\n",
    );
    out
}

/// For a session that storprof wrote while recording and never replaced
/// with the final one (it was killed, or the machine stopped): says so.
pub fn checkpoint_note(i: &crate::session::model::SessionInfo) -> Option<String> {
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
pub fn command_ending(i: &crate::session::model::SessionInfo) -> Option<String> {
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
fn stall_section(out: &mut String, stall: Option<&crate::analysis::stall::Stall>) {
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

fn wait_section(out: &mut String, analysis: &Analysis) {
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
                .map(|(pid, tid, comm, share)| format!("{comm} {pid}/{tid} {}", pct(*share)))
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
        use crate::analysis::waitgraph::Role;
        out.push_str("| thread | role | on CPU | why |\n|---|---|---:|---|\n");
        let idle: Vec<_> = w.roles.iter().filter(|r| r.role == Role::Idle).collect();
        for r in w.roles.iter().filter(|r| r.role != Role::Idle) {
            let _ = writeln!(
                out,
                "| {} {}/{} | {:?} | {} | {} |",
                cell(&r.comm),
                r.pid,
                r.tid,
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
pub fn render_terminal(analysis: &Analysis) -> String {
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
    out
}

#[cfg(test)]
mod tests {
    use super::{checkpoint_note, command_ending};
    use crate::session::model::SessionInfo;

    #[test]
    fn a_checkpoint_says_it_is_partial() {
        let mut i = crate::session::model::SessionInfo {
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
