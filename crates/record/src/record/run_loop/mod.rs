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
use std::time::{Duration, Instant};

use super::{
    RecordError, RecordOptions, launch,
    live::{self, Reached, ThenAction},
    procfs,
    recorder::Recorder,
    select,
    session_writer::SessionParts,
};

mod ending;
mod live_updates;

use ending::command_end;
pub use ending::{CommandEnd, EndReason, Ending, StopCause};
pub use live_updates::CHECKPOINT_REASON;
pub(crate) use live_updates::LiveContext;
use live_updates::{
    Checkpoints, Live, elapsed_s, live_status, verdict_parts, write_checkpoint,
    write_checkpoint_from_live,
};

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
    let mut live = ctx
        .zip(options.live.analysis.as_ref())
        .filter(|_| options.live.active())
        .map(|(ctx, analysis)| Live {
            ctx,
            analysis,
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
        next_s: elapsed_s(recorder) + every.as_secs_f64(),
        spent_s: 0.0,
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
            && c.due(recorder)
            && early.is_none()
            && interrupted_at.is_none()
            && terminated_at.is_none()
        {
            let cpu_before = procfs::own_cpu_s();
            // A failed checkpoint costs the partial session only.
            if let Err(err) = write_checkpoint(recorder, options, &c.ctx) {
                log::warn!("checkpoint of the session failed: {err}");
            }
            let cost_s = cpu_before
                .zip(procfs::own_cpu_s())
                .map(|(before, after)| after - before);
            c.written(recorder, cost_s);
            super::recorder::return_freed_memory();
        }
        if let Some(l) = live.as_mut()
            && l.analysis_due(recorder)
            && early.is_none()
            && interrupted_at.is_none()
            && terminated_at.is_none()
        {
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
                        // The build is the analysis's: only the write is
                        // the checkpoint's.
                        let cpu_before = procfs::own_cpu_s();
                        if let Err(err) = write_checkpoint_from_live(built, &c.ctx) {
                            log::warn!("checkpoint of the session failed: {err}");
                        }
                        let cost_s = cpu_before
                            .zip(procfs::own_cpu_s())
                            .map(|(before, after)| after - before);
                        c.written(recorder, cost_s);
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
