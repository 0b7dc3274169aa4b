//! The recording loop: drain the kernel side until the command exits, the
//! duration ends or a signal arrives, and say which.
//!
//! Data flow: each turn waits for process events (or 100 ms, 20 ms while a
//! process is fresh), drains them into the `Recorder`, rescans a
//! selected namespace, ticks the time series once a second, and checks the
//! command, the pending signal and the duration. A Ctrl-C (SIGINT or
//! SIGTERM to storprof) is forwarded to the command, which then has the
//! grace period (`--grace`, 5 s by default) to exit; one still running gets
//! SIGTERM and the grace period again, then SIGKILL, each step said on
//! stderr, and a further Ctrl-C takes the next step at once: a root tool
//! neither leaves a long job running unseen nor kills it silently. At
//! `--duration` the command gets SIGTERM, then SIGKILL after the grace
//! period. A SIGKILL also reaches the traced processes the command leaves,
//! and [`CommandEnd`] says how it ended in `session.json` `ended_by` and
//! the report. With a live
//! view or `--until-verdict` (`LiveContext`), the recording so far is
//! analysed every `LiveOptions::interval`, shown, and once the verdict has
//! held, the loop ends ([`EndReason::Verdict`]), after stopping the
//! workload when asked to.
use std::{
    collections::HashMap,
    path::Path,
    time::{Duration, Instant},
};

use super::{
    RecordError, RecordOptions, launch,
    live::{self, LiveStatus, Reached, ThenAction},
    procfs,
    recorder::Recorder,
    select,
    session_writer::{self, EndState, SessionParts},
};

/// Why the recording loop ended (`session.json` `end_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The command (or every attached process) exited.
    Exited,
    /// SIGINT/SIGTERM reached storprof.
    Interrupted,
    /// `--duration` ran out.
    Duration,
    /// `--until-verdict`: the verdict held long enough.
    Verdict,
}

impl EndReason {
    /// The name written to `session.json`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Exited => "exited",
            Self::Interrupted => "interrupted",
            Self::Duration => "duration",
            Self::Verdict => "verdict",
        }
    }
}

/// Why storprof sent the command SIGTERM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopCause {
    /// `--duration` ran out.
    Duration,
    /// `--until-verdict` held and `--then stop`.
    Verdict,
    /// The command outlived the grace period after a forwarded Ctrl-C,
    /// or the user pressed Ctrl-C again.
    Interrupt,
}

/// How the launched command ended (`session.json` `ended_by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandEnd {
    /// It exited with a status, on its own or after a forwarded Ctrl-C.
    Exited,
    /// A signal storprof did not send killed it.
    Signaled,
    /// storprof sent SIGTERM and it ended within the grace period.
    Sigterm(StopCause),
    /// storprof sent SIGTERM, it was still running after the grace period:
    /// SIGKILL.
    SigkillAfterGrace(StopCause),
    /// Still running when the recording ended (`--then continue`).
    LeftRunning,
}

impl CommandEnd {
    /// The name written to `session.json`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Exited => "exit",
            Self::Signaled => "signal",
            Self::Sigterm(StopCause::Duration) => "duration-sigterm",
            Self::Sigterm(StopCause::Verdict) => "verdict-sigterm",
            Self::SigkillAfterGrace(StopCause::Duration) => "duration-sigkill-after-grace",
            Self::SigkillAfterGrace(StopCause::Verdict) => "verdict-sigkill-after-grace",
            Self::Sigterm(StopCause::Interrupt) => "interrupt-sigterm",
            Self::SigkillAfterGrace(StopCause::Interrupt) => "interrupt-sigkill",
            Self::LeftRunning => "left-running",
        }
    }
}

/// How the recording loop ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Ending {
    pub reason: EndReason,
    /// The command's exit status, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed the command, when one did.
    pub exit_signal: Option<i32>,
    /// The early verdict, when `--until-verdict` reached one.
    pub early: Option<Reached>,
    /// How the launched command ended (None: no command was launched).
    pub ended_by: Option<CommandEnd>,
    /// The grace period between storprof's SIGTERM and SIGKILL, when
    /// storprof sent a SIGTERM.
    pub grace: Option<Duration>,
}

impl Ending {
    fn new(reason: EndReason, exit_code: Option<i32>, exit_signal: Option<i32>) -> Self {
        Self {
            reason,
            exit_code,
            exit_signal,
            early: None,
            ended_by: None,
            grace: None,
        }
    }

    /// The same, with how the launched command ended.
    fn with_command(mut self, ended_by: CommandEnd, grace: Option<Duration>) -> Self {
        self.ended_by = Some(ended_by);
        self.grace = grace;
        self
    }
}

/// How the command ended, from its wait status and the SIGTERM storprof
/// sent it, if any.
fn command_end(signal: Option<i32>, sigterm_for: Option<StopCause>) -> CommandEnd {
    match (sigterm_for, signal) {
        (Some(cause), _) => CommandEnd::Sigterm(cause),
        (None, Some(_)) => CommandEnd::Signaled,
        (None, None) => CommandEnd::Exited,
    }
}

/// Where the stop of the command after a Ctrl-C stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InterruptStep {
    /// The Ctrl-C reached the command (forwarded, or from the terminal).
    Forwarded,
    /// storprof sent SIGTERM after it.
    Sigterm,
}

/// The next step after a Ctrl-C: the first one is forwarded (when the
/// terminal did not already deliver it to the command); then SIGTERM; then
/// SIGKILL. Returns the new step, or None when the next step is SIGKILL
/// (the caller kills). `why` is said on stderr with the step.
fn escalate(
    pid: i32,
    step: Option<InterruptStep>,
    forward: Option<i32>,
    grace: Duration,
    why: &str,
) -> Option<InterruptStep> {
    let secs = grace.as_secs_f64();
    match step {
        None => {
            let how = match forward {
                Some(signo) => {
                    launch::send_signal(pid, signo);
                    format!("passed {} to the command (pid {pid})", signal_name(signo))
                }
                None => format!("the command (pid {pid}) got the Ctrl-C too"),
            };
            eprintln!(
                "storprof: {how}; recording until it exits; SIGTERM in {secs:.0} s if it is \
                 still running (Ctrl-C again: now)"
            );
            Some(InterruptStep::Forwarded)
        }
        Some(InterruptStep::Forwarded) => {
            launch::send_signal(pid, libc::SIGTERM);
            eprintln!(
                "storprof: {why}: sent SIGTERM to the command (pid {pid}); SIGKILL in \
                 {secs:.0} s if it is still running (Ctrl-C again: now)"
            );
            Some(InterruptStep::Sigterm)
        }
        Some(InterruptStep::Sigterm) => {
            eprintln!("storprof: {why}: killing the command (pid {pid}) with SIGKILL");
            None
        }
    }
}

fn signal_name(signo: i32) -> String {
    match signo {
        libc::SIGINT => "SIGINT".to_string(),
        libc::SIGTERM => "SIGTERM".to_string(),
        other => format!("signal {other}"),
    }
}

/// How long storprof waits for a SIGKILLed command to be reaped: a task
/// in uninterruptible sleep (a hung NFS read) dies only when the I/O
/// returns, and the session must not wait for that.
const REAP_AFTER_SIGKILL: Duration = Duration::from_secs(2);

/// SIGKILL for the command that outlived its grace period, then for the
/// traced processes it leaves (they may ignore SIGTERM too, and hold the
/// terminal or a pipe); returns its wait status (unknown when it was not
/// reaped within [`REAP_AFTER_SIGKILL`]).
fn kill_after_grace(recorder: &Recorder, pid: i32) -> (Option<i32>, Option<i32>) {
    log::info!("the command did not exit within the grace period after SIGTERM: SIGKILL");
    launch::send_signal(pid, libc::SIGKILL);
    let killed_at = Instant::now();
    let status = loop {
        if let Some(status) = launch::try_wait(pid) {
            break status;
        }
        if killed_at.elapsed() > REAP_AFTER_SIGKILL {
            log::warn!(
                "the command (pid {pid}) is not gone 2 s after SIGKILL (uninterruptible sleep?)"
            );
            break (None, None);
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    kill_leftovers(recorder, pid);
    status
}

/// What a live update (and a checkpoint) needs besides the recorder.
#[derive(Clone, Copy)]
pub(super) struct LiveContext<'a> {
    pub dir: &'a Path,
    pub tracefs_line: &'a str,
    pub start_unix: u64,
}

/// The live view's state across updates.
struct Live<'a> {
    ctx: LiveContext<'a>,
    screen: live::Screen,
    hold: live::VerdictHold,
    smoother: live::VerdictSmoother,
    /// The next analysis, seconds since the recording began.
    next_s: f64,
    /// CPU seconds the analyses took so far.
    spent_s: f64,
    /// The last analysis's status, refreshed from the time series every
    /// interval until the next analysis; and the names of the threads it
    /// knew.
    last: Option<(LiveStatus, HashMap<u32, String>)>,
    /// The next refresh of `last`.
    refresh: Instant,
}

impl Live<'_> {
    /// Between analyses: the last status with its clock, rates and
    /// busiest threads brought up to now, shown.
    /// Before the first, a status from the time series alone.
    fn refresh(&mut self, recorder: &Recorder, options: &RecordOptions) {
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
fn elapsed_s(recorder: &Recorder) -> f64 {
    procfs::monotonic_ns().saturating_sub(recorder.start_mono) as f64 / 1e9
}

impl Live<'_> {
    /// Whether the next analysis is due.
    fn analysis_due(&self, recorder: &Recorder) -> bool {
        elapsed_s(recorder) >= self.next_s
    }
}

/// When the next checkpoint is due, and where it goes.
struct Checkpoints<'a> {
    ctx: LiveContext<'a>,
    every: Duration,
    next: Instant,
}

/// Writes the session as it stands (`end_reason` "checkpoint"), for a
/// storprof that never gets to write the final one.
fn write_checkpoint(
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
fn write_checkpoint_from_live(
    mut parts: SessionParts,
    ctx: &LiveContext,
) -> Result<(), RecordError> {
    parts.info.end_reason = CHECKPOINT_REASON.to_string();
    session_writer::write_parts(ctx.dir, &parts)
}

/// The session as it stands now, while the recording goes on, ended for
/// `reason` (and an early verdict, when that is the reason).
fn parts_so_far(
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
fn verdict_parts(
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

/// Builds and analyses the recording so far; the status and the parts it
/// was built from. Only called with `options.live.analysis` set
/// ([`live::LiveOptions::active`]); without it, the status before any
/// analysis.
fn live_status(
    recorder: &mut Recorder,
    options: &RecordOptions,
    ctx: &LiveContext,
) -> Result<(LiveStatus, SessionParts), RecordError> {
    let built = Instant::now();
    let now_mono = procfs::monotonic_ns();
    let parts = parts_so_far(recorder, options, ctx, "live", None)?;
    let session = parts.to_session(ctx.dir);
    let build_s = built.elapsed().as_secs_f64();
    let elapsed_s = now_mono.saturating_sub(recorder.start_mono) as f64 / 1e9;
    let recent_s = options.live.interval.as_secs_f64().max(5.0);
    let status = match &options.live.analysis {
        Some(analysis) => (analysis.0)(&session, elapsed_s, recent_s),
        None => live::before_analysis(
            session.timeseries.as_ref().unwrap_or(&Default::default()),
            elapsed_s,
            recent_s,
            elapsed_s,
        ),
    };
    log::debug!(
        "live update at {elapsed_s:.1} s: build {build_s:.3} s, analysis {:.3} s",
        built.elapsed().as_secs_f64() - build_s
    );
    Ok((status, parts))
}

/// Records until the command exits, the duration ends or a signal arrives.
#[cfg(test)]
pub(super) fn run_loop(
    recorder: &mut Recorder,
    options: &RecordOptions,
    child_pid: Option<i32>,
) -> Result<Ending, RecordError> {
    run_loop_live(recorder, options, child_pid, None).map(|(ending, _)| ending)
}

/// [`run_loop`], with the live view and the early verdict of
/// `options.live` when `ctx` is given and they are on. After an early
/// verdict, also the session as it stood then.
pub(super) fn run_loop_live(
    recorder: &mut Recorder,
    options: &RecordOptions,
    child_pid: Option<i32>,
    ctx: Option<LiveContext>,
) -> Result<(Ending, Option<SessionParts>), RecordError> {
    let mut live = ctx.filter(|_| options.live.active()).map(|ctx| Live {
        ctx,
        screen: live::Screen::new(options.live.view),
        hold: live::VerdictHold::default(),
        smoother: live::VerdictSmoother::default(),
        next_s: options.live.first_analysis_s(),
        spent_s: 0.0,
        last: None,
        refresh: Instant::now() + options.live.interval,
    });
    let mut checkpoints = ctx.zip(options.checkpoint).map(|(ctx, every)| Checkpoints {
        ctx,
        every,
        next: Instant::now() + every,
    });
    let mut early: Option<Reached> = None;
    let mut parts: Option<SessionParts> = None;
    let mut verdict_at: Option<Instant> = None;
    let ending = run_turns(
        recorder,
        options,
        child_pid,
        (&mut live, &mut checkpoints),
        (&mut early, &mut parts),
        &mut verdict_at,
    );
    if let Some(l) = live.as_mut() {
        l.screen.finish();
    }
    let mut ending = ending?;
    if let Some(reached) = early {
        ending.reason = EndReason::Verdict;
        ending.early = Some(reached);
    }
    if let Some(p) = parts.as_mut() {
        p.info.exit_code = ending.exit_code;
        p.info.exit_signal = ending.exit_signal;
        p.info.ended_by = ending.ended_by.map(|e| e.name().to_string());
        p.info.grace_s = ending.grace.map(|g| g.as_secs_f64());
    }
    Ok((ending, parts))
}

fn run_turns(
    recorder: &mut Recorder,
    options: &RecordOptions,
    child_pid: Option<i32>,
    (live, checkpoints): (&mut Option<Live>, &mut Option<Checkpoints>),
    (early, parts): (&mut Option<Reached>, &mut Option<SessionParts>),
    verdict_at: &mut Option<Instant>,
) -> Result<Ending, RecordError> {
    let started = Instant::now();
    let grace = options.grace;
    let mut next_tick = Instant::now() + Duration::from_secs(1);
    let mut interrupted_at: Option<Instant> = None;
    // The Ctrl-C escalation's current step, and when it was taken.
    let mut interrupt_step: Option<(InterruptStep, Instant)> = None;
    let mut terminated_at: Option<Instant> = None;
    let mut next_scan = Instant::now() + select::RESCAN_INTERVAL;
    let proc_fd = recorder.probes.wait_fd();
    loop {
        let timeout = if recorder.fresh.is_empty() { 100 } else { 20 };
        if let Some(fd) = proc_fd {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, timeout) };
        } else {
            std::thread::sleep(Duration::from_millis(timeout as u64));
        }
        recorder.drain();
        if Instant::now() >= next_scan {
            recorder.add_selected()?;
            next_scan = Instant::now() + select::RESCAN_INTERVAL;
        }
        if Instant::now() >= next_tick {
            recorder.tick_series()?;
            next_tick += Duration::from_secs(1);
        }
        // With the live view on, a due checkpoint waits for the next
        // analysis when that comes within an interval, and is written
        // from its parts.
        let analysis_soon = live
            .as_ref()
            .is_some_and(|l| l.next_s <= elapsed_s(recorder) + options.live.interval.as_secs_f64());
        if let Some(c) = checkpoints.as_mut()
            && !analysis_soon
            && Instant::now() >= c.next
            && early.is_none()
            && interrupted_at.is_none()
            && terminated_at.is_none()
        {
            // A failed checkpoint costs the partial session only.
            if let Err(err) = write_checkpoint(recorder, options, &c.ctx) {
                log::warn!("checkpoint of the session failed: {err}");
            }
            c.next = Instant::now() + c.every;
            super::recorder::return_freed_memory();
        }
        if let Some(l) = live.as_mut()
            && l.analysis_due(recorder)
            && early.is_none()
            && interrupted_at.is_none()
            && terminated_at.is_none()
        {
            let cpu_before = procfs::own_cpu_s();
            match live_status(recorder, options, &l.ctx) {
                Ok((status, built)) => {
                    let comms = built
                        .timeseries
                        .threads
                        .iter()
                        .map(|t| (t.tid, t.comm.clone()))
                        .collect();
                    if let Some(c) = checkpoints.as_mut()
                        && Instant::now() >= c.next
                    {
                        if let Err(err) = write_checkpoint_from_live(built, &c.ctx) {
                            log::warn!("checkpoint of the session failed: {err}");
                        }
                        c.next = Instant::now() + c.every;
                    }
                    let mut status = status;
                    l.smoother.settle(&mut status);
                    l.screen.show(&status);
                    l.last = Some((status.clone(), comms));
                    if let Some(hold) = options.live.until_verdict
                        && let Some(reached) = l.hold.update(&status, hold)
                    {
                        let then = options.live.then.unwrap_or(if child_pid.is_some() {
                            ThenAction::Stop
                        } else {
                            ThenAction::Continue
                        });
                        *parts = Some(verdict_parts(recorder, options, &l.ctx, &reached)?);
                        *early = Some(reached);
                        if then == ThenAction::Continue {
                            let ending = Ending::new(EndReason::Verdict, None, None);
                            return Ok(match child_pid {
                                Some(_) => ending.with_command(CommandEnd::LeftRunning, None),
                                None => ending,
                            });
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
                    }
                }
                Err(err) => log::warn!("live update failed: {err}"),
            }
            // The update's session (tens of MB under churn) is dropped.
            super::recorder::return_freed_memory();
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
        } else if let Some(l) = live.as_mut()
            && Instant::now() >= l.refresh
            && early.is_none()
            && interrupted_at.is_none()
            && terminated_at.is_none()
        {
            l.refresh(recorder, options);
            l.refresh = Instant::now() + options.live.interval;
        }
        // The workload had the grace period to stop after the early verdict.
        if let Some(t) = *verdict_at
            && t.elapsed() > grace
        {
            if let Some(pid) = child_pid {
                let status = kill_after_grace(recorder, pid);
                return Ok(
                    Ending::new(EndReason::Verdict, status.0, status.1).with_command(
                        CommandEnd::SigkillAfterGrace(StopCause::Verdict),
                        Some(grace),
                    ),
                );
            }
            return Ok(Ending::new(EndReason::Verdict, None, None));
        }
        if let Some(pid) = child_pid
            && let Some((code, signal)) = launch::try_wait(pid)
        {
            if verdict_at.is_some() {
                // Workers the stopped command left behind (a deadlocked
                // child outlives its parent) are part of the workload.
                kill_leftovers(recorder, pid);
            }
            let reason = if verdict_at.is_some() {
                EndReason::Verdict
            } else if interrupted_at.is_some() {
                EndReason::Interrupted
            } else if terminated_at.is_some() {
                EndReason::Duration
            } else {
                EndReason::Exited
            };
            let sigterm_for = if verdict_at.is_some() {
                Some(StopCause::Verdict)
            } else if terminated_at.is_some() {
                Some(StopCause::Duration)
            } else if matches!(interrupt_step, Some((InterruptStep::Sigterm, _))) {
                Some(StopCause::Interrupt)
            } else {
                None
            };
            return Ok(Ending::new(reason, code, signal)
                .with_command(command_end(signal, sigterm_for), sigterm_for.map(|_| grace)));
        }
        if child_pid.is_none()
            && recorder.selector.is_none()
            && options
                .pids
                .iter()
                .all(|&p| !recorder.probes.thread_alive(p, p))
        {
            let reason = if verdict_at.is_some() {
                EndReason::Verdict
            } else {
                EndReason::Exited
            };
            return Ok(Ending::new(reason, None, None));
        }
        let (signo, forward) = launch::pending_signal();
        if signo != 0 {
            recorder.mark_stop();
            match child_pid {
                Some(pid) => {
                    interrupted_at.get_or_insert_with(Instant::now);
                    let step = interrupt_step.map(|(step, _)| step);
                    let forward = forward.then_some(signo);
                    match escalate(pid, step, forward, grace, "Ctrl-C again") {
                        Some(next) => interrupt_step = Some((next, Instant::now())),
                        None => return Ok(interrupt_kill(recorder, pid, grace)),
                    }
                }
                None => return Ok(Ending::new(EndReason::Interrupted, None, None)),
            }
        }
        // After the duration's SIGTERM, the command has the grace period
        // to exit; then SIGKILL.
        if let (Some(t), Some(pid)) = (terminated_at, child_pid)
            && t.elapsed() > grace
        {
            let (code, signal) = kill_after_grace(recorder, pid);
            return Ok(Ending::new(EndReason::Duration, code, signal).with_command(
                CommandEnd::SigkillAfterGrace(StopCause::Duration),
                Some(grace),
            ));
        }
        // After a Ctrl-C, the command has the grace period at each step:
        // then SIGTERM, then SIGKILL.
        if let (Some((step, t)), Some(pid)) = (interrupt_step, child_pid)
            && t.elapsed() > grace
        {
            let why = format!(
                "still running {:.0} s after the Ctrl-C",
                grace.as_secs_f64()
            );
            let why = match step {
                InterruptStep::Forwarded => why,
                InterruptStep::Sigterm => {
                    format!("still running {:.0} s after SIGTERM", grace.as_secs_f64())
                }
            };
            match escalate(pid, Some(step), None, grace, &why) {
                Some(next) => interrupt_step = Some((next, Instant::now())),
                None => return Ok(interrupt_kill(recorder, pid, grace)),
            }
        }
        if let Some(limit) = options.duration
            && started.elapsed() >= limit
            && terminated_at.is_none()
            && interrupted_at.is_none()
        {
            recorder.mark_stop();
            match child_pid {
                Some(pid) => {
                    launch::send_signal(pid, libc::SIGTERM);
                    terminated_at = Some(Instant::now());
                }
                None => return Ok(Ending::new(EndReason::Duration, None, None)),
            }
        }
    }
}

/// The end of a recording whose command was killed after a Ctrl-C.
fn interrupt_kill(recorder: &Recorder, pid: i32, grace: Duration) -> Ending {
    let (code, signal) = kill_after_grace(recorder, pid);
    Ending::new(EndReason::Interrupted, code, signal).with_command(
        CommandEnd::SigkillAfterGrace(StopCause::Interrupt),
        Some(grace),
    )
}

/// SIGKILL for every traced process still alive but the launched command
/// `pid` (already reaped) and storprof itself: those not seen to exit that
/// the probes still trace (not a reused pid).
fn kill_leftovers(recorder: &Recorder, pid: i32) {
    let own = std::process::id();
    for &p in &recorder.live {
        if p != own
            && p as i32 != pid
            && recorder.probes.thread_alive(p, p)
            && recorder.probes.traces(p)
        {
            log::info!("stopping leftover traced process {p}");
            launch::send_signal(p as i32, libc::SIGKILL);
        }
    }
}
