//! The tables and lines report.md and report.html share: frames,
//! processes, devices, writers, the system facts.
use super::*;

pub(crate) fn frames_table(out: &mut String, rows: &[FrameShare], unit: &str, limit: usize) {
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

pub(crate) fn hot_section(out: &mut String, title: &str, hot: &HotFrames, unit: &str) {
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
pub(crate) fn unnamed_line(out: &mut String, hot: &HotFrames, unit: &str) {
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
pub(crate) fn device_cell(d: &DeviceFeature) -> String {
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
