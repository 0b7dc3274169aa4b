//! The live view's and the checkpoints' turns of the loop: the session
//! so far built from the recorder, analysed through the caller's
//! `LiveAnalysis`, shown, acted on once its verdict has held; written as a
//! checkpoint when one is due.
use std::{
    collections::HashMap,
    path::Path,
    time::{Duration, Instant},
};

use super::super::{
    RecordError, RecordOptions, launch,
    live::{self, LiveStatus, Reached, ThenAction},
    procfs,
    recorder::Recorder,
    session_writer::{self, EndState, SessionParts},
};
use super::{CommandEnd, EndReason, Ending};

/// What a live update (and a checkpoint) needs besides the recorder.
#[derive(Clone, Copy)]
pub(crate) struct LiveContext<'a> {
    pub dir: &'a Path,
    pub tracefs_line: &'a str,
    pub start_unix: u64,
}

/// The live view's state across updates.
pub(super) struct Live<'a> {
    pub(super) ctx: LiveContext<'a>,
    /// The caller's analysis (a live view runs only with one).
    pub(super) analysis: &'a live::LiveAnalysis,
    pub(super) screen: live::Screen,
    pub(super) hold: live::VerdictHold,
    pub(super) smoother: live::VerdictSmoother,
    /// The next analysis, seconds since the recording began.
    pub(super) next_s: f64,
    /// CPU seconds the analyses took so far.
    pub(super) spent_s: f64,
    /// The last analysis's status, refreshed from the time series every
    /// interval until the next analysis; and the names of the threads it
    /// knew.
    pub(super) last: Option<(LiveStatus, HashMap<u32, String>)>,
    /// The next refresh of `last`.
    pub(super) refresh: Instant,
}

impl Live<'_> {
    /// Between analyses: the last status with its clock, rates and
    /// busiest threads brought up to now, shown.
    /// Before the first, a status from the time series alone.
    pub(super) fn refresh(&mut self, recorder: &Recorder, options: &RecordOptions) {
        let no_names = HashMap::new();
        let comms = self.last.as_ref().map_or(&no_names, |(_, comms)| comms);
        let comm_of = |tid: u32| {
            comms
                .get(&tid)
                .cloned()
                .unwrap_or_else(|| recorder.probes.thread_comm(tid, tid).unwrap_or_default())
        };
        let ts = session_writer::timeseries_so_far(recorder, self.ctx.start_unix, &comm_of);
        let elapsed_s = elapsed_s(recorder);
        let recent_s = options.live.interval.as_secs_f64().max(5.0);
        match self.last.as_mut() {
            Some((status, _)) => {
                live::refresh(status, &ts, elapsed_s, recent_s);
                self.screen.show(status);
            }
            None => {
                let status = live::before_analysis(&ts, elapsed_s, recent_s, self.next_s);
                self.screen.show(&status);
            }
        }
    }
}

/// Seconds since the recording began.
pub(super) fn elapsed_s(recorder: &Recorder) -> f64 {
    procfs::monotonic_ns().saturating_sub(recorder.start_mono) as f64 / 1e9
}

impl Live<'_> {
    /// Whether the next analysis is due.
    pub(super) fn analysis_due(&self, recorder: &Recorder) -> bool {
        elapsed_s(recorder) >= self.next_s
    }
}

/// When the next checkpoint is due, and where it goes.
pub(super) struct Checkpoints<'a> {
    pub(super) ctx: LiveContext<'a>,
    pub(super) every: Duration,
    /// Seconds since the recording began.
    pub(super) next_s: f64,
    /// CPU seconds the checkpoints took so far.
    pub(super) spent_s: f64,
}

impl Checkpoints<'_> {
    pub(super) fn due(&self, recorder: &Recorder) -> bool {
        elapsed_s(recorder) >= self.next_s
    }

    /// Counts a checkpoint that cost `cost_s` of CPU (None: unknown) and
    /// schedules the next.
    pub(super) fn written(&mut self, recorder: &Recorder, cost_s: Option<f64>) {
        let elapsed = elapsed_s(recorder);
        self.spent_s += cost_s.unwrap_or(0.0).max(0.0);
        self.next_s =
            super::super::next_checkpoint_s(elapsed, self.every.as_secs_f64(), self.spent_s);
        log::debug!(
            "checkpoint at {elapsed:.1} s cost {:.3} s of CPU ({:.3} s so far); the next at {:.1} s",
            cost_s.unwrap_or(0.0),
            self.spent_s,
            self.next_s
        );
    }
}

/// Writes the session as it stands (`end_reason` "checkpoint"), for a
/// storprof that never gets to write the final one.
pub(super) fn write_checkpoint(
    recorder: &mut Recorder,
    options: &RecordOptions,
    ctx: &LiveContext,
) -> Result<(), RecordError> {
    let parts = parts_so_far(recorder, options, ctx, CHECKPOINT_REASON, None)?;
    session_writer::write_parts(ctx.dir, &parts)
}

/// Writes a live update's `parts` as the checkpoint: built moments ago,
/// they are the session as it stands, and building it again would double
/// the recorder's work in that turn.
pub(super) fn write_checkpoint_from_live(
    mut parts: SessionParts,
    ctx: &LiveContext,
) -> Result<(), RecordError> {
    parts.info.end_reason = CHECKPOINT_REASON.to_string();
    session_writer::write_parts(ctx.dir, &parts)
}

/// The session as it stands now, while the recording goes on, ended for
/// `reason` (and an early verdict, when that is the reason).
pub(super) fn parts_so_far(
    recorder: &mut Recorder,
    options: &RecordOptions,
    ctx: &LiveContext,
    reason: &'static str,
    early: Option<&Reached>,
) -> Result<SessionParts, RecordError> {
    let state = EndState {
        reason,
        exit_code: None,
        exit_signal: None,
        early,
        ended_by: None,
        grace_s: None,
    };
    session_writer::build_session(
        recorder,
        options,
        state,
        (ctx.start_unix, procfs::unix_ns(), procfs::monotonic_ns()),
        ctx.tracefs_line,
    )
}

/// `end_reason` of a session written while recording.
pub const CHECKPOINT_REASON: &str = "checkpoint";

/// The session as it stands at an early verdict, built before the
/// workload is stopped (its threads' waits and stacks are the evidence).
pub(super) fn verdict_parts(
    recorder: &mut Recorder,
    options: &RecordOptions,
    ctx: &LiveContext,
    reached: &Reached,
) -> Result<SessionParts, RecordError> {
    parts_so_far(
        recorder,
        options,
        ctx,
        EndReason::Verdict.name(),
        Some(reached),
    )
}

/// Builds the recording so far and analyses it with `analysis`; the
/// status and the parts it was built from.
pub(super) fn live_status(
    recorder: &mut Recorder,
    options: &RecordOptions,
    ctx: &LiveContext,
    analysis: &live::LiveAnalysis,
) -> Result<(LiveStatus, SessionParts), RecordError> {
    let built = Instant::now();
    let now_mono = procfs::monotonic_ns();
    let parts = parts_so_far(recorder, options, ctx, "live", None)?;
    let session = parts.to_session(ctx.dir);
    let build_s = built.elapsed().as_secs_f64();
    let elapsed_s = now_mono.saturating_sub(recorder.start_mono) as f64 / 1e9;
    let recent_s = options.live.interval.as_secs_f64().max(5.0);
    let status = (analysis.0)(&session, elapsed_s, recent_s);
    log::debug!(
        "live update at {elapsed_s:.1} s: build {build_s:.3} s, analysis {:.3} s",
        built.elapsed().as_secs_f64() - build_s
    );
    Ok((status, parts))
}

/// Writes the due checkpoint `c` from a fresh build of the session and
/// schedules the next by the CPU it cost; a failure costs the partial
/// session only.
pub(super) fn write_due_checkpoint(
    recorder: &mut Recorder,
    options: &RecordOptions,
    c: &mut Checkpoints,
) {
    let cpu_before = procfs::own_cpu_s();
    // A failed checkpoint costs the partial session only.
    if let Err(err) = write_checkpoint(recorder, options, &c.ctx) {
        log::warn!("checkpoint of the session failed: {err}");
    }
    let cost_s = cpu_before
        .zip(procfs::own_cpu_s())
        .map(|(before, after)| after - before);
    c.written(recorder, cost_s);
    super::super::recorder::return_freed_memory();
}

/// Writes the due checkpoint `c` from a live update's `built` parts and
/// schedules the next by the CPU the write cost.
fn write_live_checkpoint(recorder: &Recorder, c: &mut Checkpoints, built: SessionParts) {
    // The build is the analysis's: only the write is the checkpoint's.
    let cpu_before = procfs::own_cpu_s();
    if let Err(err) = write_checkpoint_from_live(built, &c.ctx) {
        log::warn!("checkpoint of the session failed: {err}");
    }
    let cost_s = cpu_before
        .zip(procfs::own_cpu_s())
        .map(|(before, after)| after - before);
    c.written(recorder, cost_s);
}

/// One live analysis: the recording so far analysed and shown, written
/// as the checkpoint when one is due, and acted on once its verdict has
/// held; then the next analysis scheduled by the CPU this one cost.
/// Some ending when the verdict ends the recording at once.
pub(super) fn live_analysis(
    recorder: &mut Recorder,
    options: &RecordOptions,
    child_pid: Option<i32>,
    l: &mut Live,
    checkpoints: &mut Option<Checkpoints>,
    (early, parts): (&mut Option<Reached>, &mut Option<SessionParts>),
    verdict_at: &mut Option<Instant>,
) -> Result<Option<Ending>, RecordError> {
    let cpu_before = procfs::own_cpu_s();
    match live_status(recorder, options, &l.ctx, l.analysis) {
        Ok((status, built)) => {
            let comms = built
                .timeseries
                .threads
                .iter()
                .map(|t| (t.tid, t.comm.clone()))
                .collect();
            if let Some(c) = checkpoints.as_mut()
                && c.due(recorder)
            {
                write_live_checkpoint(recorder, c, built);
            }
            let mut status = status;
            l.smoother.settle(&mut status);
            l.screen.show(&status);
            l.last = Some((status.clone(), comms));
            if let Some(hold) = options.live.until_verdict
                && let Some(reached) = l.hold.update(&status, hold)
                && let Some(ending) = act_on_verdict(
                    recorder,
                    options,
                    child_pid,
                    &l.ctx,
                    reached,
                    (early, parts),
                    verdict_at,
                )?
            {
                return Ok(Some(ending));
            }
        }
        Err(err) => log::warn!("live update failed: {err}"),
    }
    // The update's session (tens of MB under churn) is dropped.
    super::super::recorder::return_freed_memory();
    let cost_s = cpu_before
        .zip(procfs::own_cpu_s())
        .map_or(0.0, |(before, after)| after - before);
    l.spent_s += cost_s.max(0.0);
    l.next_s = options.live.next_analysis_s(elapsed_s(recorder), l.spent_s);
    log::debug!(
        "live analysis cost {cost_s:.3} s of CPU ({:.3} s so far); the next at {:.1} s",
        l.spent_s,
        l.next_s
    );
    l.refresh = Instant::now() + options.live.interval;
    Ok(None)
}

/// The verdict `reached` has held: the session as it stands is kept in
/// `parts`; then the workload is left running (this ending, `--then
/// continue`) or sent SIGTERM, its stop noted in `verdict_at`.
fn act_on_verdict(
    recorder: &mut Recorder,
    options: &RecordOptions,
    child_pid: Option<i32>,
    ctx: &LiveContext,
    reached: Reached,
    (early, parts): (&mut Option<Reached>, &mut Option<SessionParts>),
    verdict_at: &mut Option<Instant>,
) -> Result<Option<Ending>, RecordError> {
    let then = options.live.then.unwrap_or(if child_pid.is_some() {
        ThenAction::Stop
    } else {
        ThenAction::Continue
    });
    *parts = Some(verdict_parts(recorder, options, ctx, &reached)?);
    *early = Some(reached);
    if then == ThenAction::Continue {
        let ending = Ending::new(EndReason::Verdict, None, None);
        return Ok(Some(match child_pid {
            Some(_) => ending.with_command(CommandEnd::LeftRunning, None),
            None => ending,
        }));
    }
    recorder.mark_stop();
    match child_pid {
        Some(pid) => launch::send_signal(pid, libc::SIGTERM),
        None => {
            for &pid in &options.pids {
                launch::send_signal(pid as i32, libc::SIGTERM);
            }
        }
    }
    *verdict_at = Some(Instant::now());
    Ok(None)
}
