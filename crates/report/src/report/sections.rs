//! report.md's sections about the run: how it ended, the stall, who waits
//! for whom.
use super::*;

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
pub(crate) fn stall_section(out: &mut String, stall: Option<&storprof_analysis::stall::Stall>) {
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
pub(crate) fn consumer_time_split(
    c: &storprof_analysis::waitgraph::ConsumerTime,
) -> Option<String> {
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
    if c.fetch_io_ns > 0 {
        parts.push(format!(
            "blocked on the device inside its loader (reading samples itself) {:.1}%",
            pct(c.fetch_io_ns)
        ));
    }
    if c.fetch_net_ns > 0 {
        parts.push(format!(
            "receiving from a socket inside its loader {:.1}%",
            pct(c.fetch_net_ns)
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

pub(crate) fn wait_section(out: &mut String, analysis: &Diagnosis) {
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

/// "What would help": the projected AU per lever, or why there is none.
pub(crate) fn what_would_help_section(out: &mut String, w: &WhatIf) {
    out.push_str("## What would help (projected)\n\n");
    let Some(today) = &w.today else {
        if let Some(why) = &w.none {
            let _ = writeln!(out, "{}.\n", cell(why));
        }
        return;
    };
    let _ = writeln!(
        out,
        "A model fitted to this recording (docs/src/whatif.md), one lever at a time; \
         `storprof whatif` projects others. Today a step takes {:.3} s: compute {:.3} s, \
         the consumer's own {:.3} s, data wait {:.3} s; AU {:.1}%, {:.2} steps/s.\n",
        today.step_s,
        today.compute_s,
        today.overhead_s,
        today.wait_s,
        today.au_percentage,
        today.steps_per_s
    );
    out.push_str("| lever | AU | range | steps/s | why |\n|---|---:|---:|---:|---|\n");
    for p in &w.projections {
        let (au, rate) = match (p.projected_au_percentage, p.projected_steps_per_s) {
            (Some(au), Some(rate)) => (format!("{au:.1}%"), format!("{rate:.2}")),
            _ => ("—".to_string(), "—".to_string()),
        };
        let _ = writeln!(
            out,
            "| {} | {au} | {} | {rate} | {} |",
            cell(&p.label()),
            p.range_text(),
            cell(&p.reason)
        );
    }
    out.push('\n');
}
