//! The session writer: the recorder's state at the end of a recording
//! becomes the session directory.
//!
//! Data flow: one last full snapshot of the maps gives the per-thread
//! figures ([`aggregate::thread_stats`]), the block completions the device
//! figures, the per-second cumulative snapshots the time series; the
//! folding step ([`fold::fold_stacks`]) gives the folded stacks, the
//! wake-up edges the wait graph; then session.json, threads.json, io.json,
//! timeseries.json, the folded files and waits.json are written, and the
//! directory is given to the sudo user.
//!
//! [`build_session`] does all of that but the writing, so a live view can
//! analyse the recording so far ([`SessionParts::to_session`]) without a
//! file; [`write_parts`] writes what it built.
use std::{collections::BTreeMap, path::Path};

use super::session_parts::{
    frame_modules, io_stats, kernel_ips, page_size, process_infos, session_features, session_notes,
    threads_seen, time_series,
};
use super::{
    RecordError, RecordOptions, aggregate,
    dwarf_samples::DwarfSamples,
    fold,
    kernel::{Kernel, KernelFacts},
    launch, procfs,
    recorder::Recorder,
    run_loop::Ending,
    select,
};
use crate::probes;
use storprof_session::{
    load::{FoldedStacks, Session},
    model::{
        self, IoStats, SESSION_FORMAT_VERSION, SessionInfo, ThreadStats, TimeSeries, WaitGraph,
    },
};

/// A session built in memory: what [`write_parts`] writes.
#[derive(Clone, Debug)]
pub struct SessionParts {
    pub info: SessionInfo,
    pub threads: Vec<ThreadStats>,
    pub io: IoStats,
    pub timeseries: TimeSeries,
    pub folded: fold::Folded,
    /// None when the wake-up probe did not attach.
    pub waits: Option<WaitGraph>,
    pub frame_modules: model::FrameModules,
}

impl SessionParts {
    /// The session as `session::load::load` would read it back from `dir`
    /// (without a bench summary, which the benchmark writes at its end).
    pub fn to_session(&self, dir: &Path) -> Session {
        let parse = |text: &str, name: &str, warnings: &mut Vec<String>| {
            let (stacks, w) = FoldedStacks::parse(text, name);
            warnings.extend(w);
            stacks
        };
        let mut warnings = Vec::new();
        use model::files;
        Session {
            dir: dir.to_path_buf(),
            info: self.info.clone(),
            threads: self.threads.clone(),
            io: self.io.clone(),
            timeseries: Some(self.timeseries.clone()),
            oncpu: parse(&self.folded.oncpu, files::ONCPU_FOLDED, &mut warnings),
            offcpu: parse(&self.folded.offcpu, files::OFFCPU_FOLDED, &mut warnings),
            oncpu_threads: parse(
                &self.folded.oncpu_threads,
                files::ONCPU_THREADS_FOLDED,
                &mut warnings,
            ),
            offcpu_threads: parse(
                &self.folded.offcpu_threads,
                files::OFFCPU_THREADS_FOLDED,
                &mut warnings,
            ),
            bench: None,
            waits: self.waits.clone(),
            frame_modules: self.frame_modules.clone(),
            missing: Vec::new(),
            warnings,
        }
    }
}

/// How a recording ended, or "live" for a snapshot of one still running.
#[derive(Clone, Copy, Debug)]
pub(super) struct EndState<'a> {
    pub reason: &'a str,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub early: Option<&'a super::live::Reached>,
    /// `session.json` `ended_by` and `grace_s`.
    pub ended_by: Option<&'static str>,
    pub grace_s: Option<f64>,
}

impl<'a> From<&'a Ending> for EndState<'a> {
    fn from(ending: &'a Ending) -> Self {
        Self {
            reason: ending.reason.name(),
            exit_code: ending.exit_code,
            exit_signal: ending.exit_signal,
            early: ending.early.as_ref(),
            ended_by: ending.ended_by.map(|e| e.name()),
            grace_s: ending.grace.map(|g| g.as_secs_f64()),
        }
    }
}

pub(super) fn write_json<T: serde::Serialize>(
    dir: &Path,
    name: &str,
    value: &T,
) -> Result<(), RecordError> {
    let path = dir.join(name);
    let text = serde_json::to_string_pretty(value).map_err(|e| RecordError::Write {
        path: path.clone(),
        source: std::io::Error::other(e),
    })?;
    replace_file(&path, (text + "\n").as_bytes())
}

fn write_text(dir: &Path, name: &str, text: &str) -> Result<(), RecordError> {
    replace_file(&dir.join(name), text.as_bytes())
}

/// Writes `bytes` to a new file beside `path` (created exclusively, no
/// link followed) and renames it over `path`: a storprof killed at any
/// moment leaves the old file or the new one, never half of one (a
/// checkpoint is replaced while the recording goes on).
fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), RecordError> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let partial = path.with_file_name(format!(".{name}.partial"));
    storprof_session::safe_path::write_file(&partial, bytes)
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|source| RecordError::Write {
            path: path.to_path_buf(),
            source,
        })
}

/// Builds the session and writes it to `dir`.
pub(super) fn write_session(
    recorder: &mut Recorder,
    options: &RecordOptions,
    dir: &Path,
    ending: &Ending,
    times: (u64, u64, u64),
    tracefs_line: &str,
) -> Result<(), RecordError> {
    let parts = build_session(recorder, options, ending.into(), times, tracefs_line)?;
    write_parts(dir, &parts)
}

/// Writes a built session to `dir` and gives it to the sudo user.
pub(super) fn write_parts(dir: &Path, parts: &SessionParts) -> Result<(), RecordError> {
    use model::files;
    write_json(dir, files::THREADS, &parts.threads)?;
    write_json(dir, files::IO, &parts.io)?;
    write_json(dir, files::TIMESERIES, &parts.timeseries)?;
    write_text(dir, files::ONCPU_FOLDED, &parts.folded.oncpu)?;
    write_text(dir, files::OFFCPU_FOLDED, &parts.folded.offcpu)?;
    write_text(
        dir,
        files::ONCPU_THREADS_FOLDED,
        &parts.folded.oncpu_threads,
    )?;
    write_text(
        dir,
        files::OFFCPU_THREADS_FOLDED,
        &parts.folded.offcpu_threads,
    )?;
    if let Some(waits) = &parts.waits {
        write_json(dir, files::WAITS, waits)?;
    }
    write_json(dir, files::FRAMES, &parts.frame_modules)?;
    // Last: a session.json says the files beside it are complete.
    write_json(dir, files::SESSION, &parts.info)?;
    chown_session(dir);
    Ok(())
}

/// The time series so far, without the rest of a session (a live view's
/// refresh between analyses): threads named by `comm_of`.
pub(super) fn timeseries_so_far(
    recorder: &Recorder,
    start_unix: u64,
    comm_of: &dyn Fn(u32) -> String,
) -> TimeSeries {
    let page_size = {
        // SAFETY: sysconf has no preconditions.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if size > 0 { size as u64 } else { 4096 }
    };
    let buckets = recorder.series.buckets();
    TimeSeries {
        bucket_ns: aggregate::BUCKET_NS,
        start_unix_ns: start_unix,
        buckets,
        threads: recorder.series.series(comm_of),
        devices: recorder
            .blocks
            .device_series(buckets as usize, &|d| recorder.probes.device_name(d)),
        vmstat: recorder.vmstat.series(page_size),
        host_cpu: recorder.host_cpu.series(),
    }
}

/// A thread's name: from the maps, else as the machine names it now,
/// else `tid-TID`.
pub(super) fn comm_or_kernel(
    comms: &BTreeMap<u32, String>,
    kernel: &dyn Kernel,
    tgid: u32,
    tid: u32,
) -> String {
    comms.get(&tid).cloned().unwrap_or_else(|| {
        kernel
            .thread_comm(tgid, tid)
            .unwrap_or_else(|| format!("tid-{tid}"))
    })
}

/// The recorder's state as a session: one full snapshot of the maps,
/// aggregated, folded and symbolized. Repeatable: a live view calls it
/// while the recording goes on.
pub(super) fn build_session(
    recorder: &mut Recorder,
    options: &RecordOptions,
    ending: EndState,
    (start_unix, end_unix, end_mono): (u64, u64, u64),
    tracefs_line: &str,
) -> Result<SessionParts, RecordError> {
    let snapshot = recorder.full_snapshot()?;
    let duration_ns = end_mono.saturating_sub(recorder.start_mono);

    let (comms, threads) = threads_seen(recorder, &snapshot, end_mono);

    let page_size = page_size();
    let io = io_stats(recorder, &threads, duration_ns, page_size);

    let bucket_ns = aggregate::BUCKET_NS;
    let timeseries = time_series(recorder, &comms, start_unix, page_size);

    let tracked_pids: Vec<u32> = recorder.tracked.iter().copied().collect();
    let wake_edges = recorder.wake_edges()?;
    let folded_threads = recorder.retired.folded;
    let unlisted_decisions = recorder.unlisted_inherited_decisions;
    // Folded stacks, symbolized.
    let probes: &dyn Kernel = &*recorder.probes;
    let comm_of = |tgid: u32, tid: u32| comm_or_kernel(&comms, probes, tgid, tid);
    let Recorder {
        symbolizer,
        dwarf,
        dwarf_offcpu,
        unwinder,
        python: python_resolver,
        python_offcpu,
        python_fp,
        selector,
        unwind_decisions,
        wake_series,
        tracked: recorder_tracked,
        live,
        parents,
        start_mono,
        ..
    } = recorder;
    let start_mono = *start_mono;
    let dwarf_mode = unwinder.is_some();
    // Every kernel address named in one batch (per stack it cost ~5 ms
    // each from kallsyms).
    fold::kernel_frames(
        symbolizer,
        probes,
        &kernel_ips(&snapshot, dwarf_offcpu, &wake_edges, probes),
    );
    let folded = {
        let input = fold::FoldInput {
            mode: options.unwind,
            samples: &snapshot.samples,
            offcpu: &snapshot.offcpu,
            dwarf,
            dwarf_offcpu,
            python_fp,
            python_offcpu,
            python_offcpu_lost: probes.python_offcpu_lost(),
        };
        let mut symbols = fold::Symbols {
            symbolizer,
            kernel: probes,
        };
        fold::fold_stacks(&input, &mut symbols, &comm_of)
    };
    let tracked = &recorder_tracked;
    // A waker's or a blocked thread's stack: user frames, then kernel
    // frames, outermost first.
    let mut stack_frames = |tgid: u32, user: i32, kernel: i32| -> Vec<String> {
        let mut frames: Vec<String> = symbolizer
            .user_frames(tgid, &probes.stack(user))
            .into_iter()
            .rev()
            .collect();
        frames.extend(
            symbolizer
                .kernel_frames(&probes.stack(kernel))
                .into_iter()
                .rev(),
        );
        frames
    };
    let mut waits = aggregate::wait_graph(
        &wake_edges,
        wake_series,
        start_mono,
        bucket_ns,
        &|pid| tracked.contains(&pid),
        &mut stack_frames,
    );
    let marked = recorder.stop_mark.is_some();
    let pending_of = aggregate::PendingFilter {
        traced: &|tgid| tracked.contains(&tgid),
        // A thread gone since: its last switch-out was its exit (a stop
        // mark kept only the threads alive then).
        alive: &|tgid, tid| marked || probes.thread_alive(tgid, tid),
        comm_of: &comm_of,
    };
    // A stopped command's waits as they were at the stop request: its
    // signal handlers and tear-down wake the threads a hang holds.
    let (pending_slots, pending_at) = match &recorder.stop_mark {
        Some(mark) => (&mark.slots, mark.at_mono),
        None => (&snapshot.oncpu_start, end_mono),
    };
    waits.pending = aggregate::pending_waits(pending_slots, pending_at, &pending_of)
        .into_iter()
        .map(|(mut wait, user, kernel)| {
            wait.stack = stack_frames(wait.pid, user, kernel);
            wait
        })
        .collect();
    let frame_modules = frame_modules(&folded, symbolizer.frame_modules());
    let unwind = model::UnwindStats {
        mode: options.unwind.name().to_string(),
        stack_bytes: if dwarf_mode { options.stack_bytes } else { 0 },
        processes: aggregate::process_unwind(&folded.unwind_entries),
        decisions: unwind_decisions.values().cloned().collect(),
        offcpu: offcpu_unwind_stats(probes, dwarf_offcpu),
    };

    let kernel_facts = probes.kernel_facts();
    let features = session_features(kernel_facts.btf, options, tracefs_line);
    let notes = session_notes(
        python_resolver.notes(),
        &folded,
        (folded_threads, unlisted_decisions),
        selector.as_ref(),
        probes,
    );
    let processes = process_infos(recorder_tracked, live, parents, probes, &threads);
    let gathered = InfoParts {
        tracked_pids,
        kernel: kernel_facts,
        features,
        notes,
        unwind,
        processes,
    };
    let info = session_info(recorder, options, ending, (start_unix, end_unix), gathered);
    Ok(SessionParts {
        info,
        threads,
        io,
        timeseries,
        folded,
        waits: probes.attached(probes::family::WAKEUPS).then_some(waits),
        frame_modules,
    })
}

/// What `session.json`'s info takes from the session's other parts.
struct InfoParts {
    tracked_pids: Vec<u32>,
    /// The kernel and machine, through the seam (a replay's own).
    kernel: KernelFacts,
    features: BTreeMap<String, String>,
    notes: Vec<String>,
    unwind: model::UnwindStats,
    processes: Vec<model::ProcessInfo>,
}

/// `session.json`'s info: the command, times, how it ended, the
/// recorder's own cost and state, and `parts`.
fn session_info(
    recorder: &Recorder,
    options: &RecordOptions,
    ending: EndState,
    (start_unix, end_unix): (u64, u64),
    parts: InfoParts,
) -> SessionInfo {
    let probes = &*recorder.probes;
    SessionInfo {
        format_version: SESSION_FORMAT_VERSION,
        storprof_version: env!("CARGO_PKG_VERSION").to_string(),
        command: options.command.clone(),
        cwd: std::env::current_dir()
            .ok()
            .map(|p| p.display().to_string()),
        attached_pids: options.pids.clone(),
        tracked_pids: parts.tracked_pids,
        hostname: recorder.selector.as_ref().map_or_else(
            || select::default_host_name(&parts.kernel.host_name),
            select::NetnsSelector::host_name,
        ),
        kernel: parts.kernel.release,
        num_cpus: parts.kernel.num_cpus.max(1),
        start_unix_ns: start_unix,
        end_unix_ns: end_unix,
        duration_s: (end_unix.saturating_sub(start_unix)) as f64 / 1e9,
        freq_hz: options.freq_hz,
        exit_code: ending.exit_code,
        exit_signal: ending.exit_signal,
        end_reason: ending.reason.to_string(),
        ended_by: ending.ended_by.map(str::to_string),
        grace_s: ending.grace_s,
        io_limits: recorder.io_limits.values().cloned().collect(),
        stop_requested_s: recorder
            .stop_mark
            .as_ref()
            .map(|m| m.at_mono.saturating_sub(recorder.start_mono) as f64 / 1e9),
        recorder_cpu_s: procfs::own_cpu_s(),
        recorder_cpu_recording_s: recorder.cpu_when_recording_ended,
        early_verdict: ending.early.map(|r| model::EarlyVerdict {
            verdict: r.verdict.name.to_string(),
            confidence_label: r.confidence_label.clone(),
            held_from_s: r.from_s,
            held_to_s: r.to_s,
        }),
        probes: probes.status().to_vec(),
        features: parts.features,
        lost_events: probes.lost_events(),
        missed_switch_ins: probes.missed_switch_ins(),
        notes: parts.notes,
        unwind: Some(parts.unwind),
        processes: parts.processes,
    }
}

/// How off-CPU user stacks were unwound (`session.json` `unwind.offcpu`).
fn offcpu_unwind_stats(probes: &dyn Kernel, dwarf_offcpu: &DwarfSamples) -> model::OffCpuUnwind {
    if !probes.offcpu_dwarf() {
        return model::OffCpuUnwind {
            mode: "fp".to_string(),
            ..model::OffCpuUnwind::default()
        };
    }
    let early: u64 = dwarf_offcpu
        .depths
        .iter()
        .filter(|((_, _, early), _)| *early)
        .map(|(_, n)| n)
        .sum();
    model::OffCpuUnwind {
        mode: "dwarf-at-syscall-exit".to_string(),
        quantum_us: probes.offcpu_quantum_us(),
        stacks: dwarf_offcpu.events,
        intervals: dwarf_offcpu.intervals,
        estimated_ns: dwarf_offcpu.counts.values().sum(),
        early_stop_stacks: early,
    }
}

/// Gives the session directory to the sudo user who ran storprof: its
/// entries first, the directory last (until then the user cannot swap an
/// entry for a link), and never through a symbolic link (lchown).
fn chown_session(dir: &Path) {
    let Some(creds) = launch::sudo_credentials() else {
        return;
    };
    let mut paths: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.push(dir.to_path_buf());
    for path in paths {
        if let Err(err) = std::os::unix::fs::lchown(&path, Some(creds.uid), Some(creds.gid)) {
            log::warn!("chown {}: {err}", path.display());
        }
    }
}
