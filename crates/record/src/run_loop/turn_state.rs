//! The recording loop's state across turns (its clocks, the Ctrl-C
//! escalation, the stop at `--duration`) and the checks that end it: the
//! command's exit, the attached pids gone, a signal, a grace period over.
use std::time::{Duration, Instant};

use super::super::{RecordError, RecordOptions, launch, live::Reached, recorder::Recorder, select};
use super::{
    CommandEnd, EndReason, Ending, InterruptStep, StopCause, ending::command_end, escalate,
    interrupt_kill, kill_after_grace, kill_leftovers,
};

/// The loop's clocks and how far stopping the command has gone, carried
/// from one turn to the next.
pub(super) struct TurnState {
    /// When the loop began (`--duration` counts from here).
    started: Instant,
    /// The next tick of the time series.
    next_tick: Instant,
    /// When the first Ctrl-C arrived.
    interrupted_at: Option<Instant>,
    /// The Ctrl-C escalation's current step, and when it was taken.
    interrupt_step: Option<(InterruptStep, Instant)>,
    /// When `--duration` sent the command SIGTERM.
    terminated_at: Option<Instant>,
    /// The next rescan of a selected namespace.
    next_scan: Instant,
}

impl TurnState {
    /// Clocks starting now, nothing stopping yet.
    pub(super) fn new() -> Self {
        Self {
            started: Instant::now(),
            next_tick: Instant::now() + Duration::from_secs(1),
            interrupted_at: None,
            interrupt_step: None,
            terminated_at: None,
            next_scan: Instant::now() + select::RESCAN_INTERVAL,
        }
    }

    /// Whether nothing is stopping the recording yet: no early verdict
    /// (`early`), no Ctrl-C, no SIGTERM at `--duration`.
    pub(super) fn undisturbed(&self, early: &Option<Reached>) -> bool {
        early.is_none() && self.interrupted_at.is_none() && self.terminated_at.is_none()
    }

    /// Rescans a selected namespace and ticks the time series, each when
    /// it is due.
    pub(super) fn rescan_and_tick(&mut self, recorder: &mut Recorder) -> Result<(), RecordError> {
        if Instant::now() >= self.next_scan {
            recorder.add_selected()?;
            self.next_scan = Instant::now() + select::RESCAN_INTERVAL;
        }
        if Instant::now() >= self.next_tick {
            recorder.tick_series()?;
            self.next_tick += Duration::from_secs(1);
        }
        Ok(())
    }

    /// The ending once the launched command has exited (it is reaped
    /// here), with what storprof did to stop it; after an early verdict,
    /// the traced processes it left are killed.
    pub(super) fn command_exited(
        &self,
        recorder: &Recorder,
        child_pid: Option<i32>,
        grace: Duration,
        verdict_at: Option<Instant>,
    ) -> Option<Ending> {
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
            } else if self.interrupted_at.is_some() {
                EndReason::Interrupted
            } else if self.terminated_at.is_some() {
                EndReason::Duration
            } else {
                EndReason::Exited
            };
            let sigterm_for = if verdict_at.is_some() {
                Some(StopCause::Verdict)
            } else if self.terminated_at.is_some() {
                Some(StopCause::Duration)
            } else if matches!(self.interrupt_step, Some((InterruptStep::Sigterm, _))) {
                Some(StopCause::Interrupt)
            } else {
                None
            };
            return Some(
                Ending::new(reason, code, signal)
                    .with_command(command_end(signal, sigterm_for), sigterm_for.map(|_| grace)),
            );
        }
        None
    }

    /// Takes a pending Ctrl-C (or SIGTERM to storprof): the recording
    /// stops, and the command's stop goes one step further. The ending
    /// when that ends the recording at once (no command, or SIGKILL).
    pub(super) fn take_signal(
        &mut self,
        recorder: &mut Recorder,
        child_pid: Option<i32>,
        grace: Duration,
    ) -> Option<Ending> {
        let (signo, forward) = launch::pending_signal();
        if signo != 0 {
            recorder.mark_stop();
            match child_pid {
                Some(pid) => {
                    self.interrupted_at.get_or_insert_with(Instant::now);
                    let step = self.interrupt_step.map(|(step, _)| step);
                    let forward = forward.then_some(signo);
                    match escalate(pid, step, forward, grace, "Ctrl-C again") {
                        Some(next) => self.interrupt_step = Some((next, Instant::now())),
                        None => return Some(interrupt_kill(recorder, pid, grace)),
                    }
                }
                None => return Some(Ending::new(EndReason::Interrupted, None, None)),
            }
        }
        None
    }

    /// After the duration's SIGTERM, the command has the grace period to
    /// exit; then SIGKILL, and this ending.
    pub(super) fn duration_grace_over(
        &self,
        recorder: &Recorder,
        child_pid: Option<i32>,
        grace: Duration,
    ) -> Option<Ending> {
        if let (Some(t), Some(pid)) = (self.terminated_at, child_pid)
            && t.elapsed() > grace
        {
            let (code, signal) = kill_after_grace(recorder, pid);
            return Some(Ending::new(EndReason::Duration, code, signal).with_command(
                CommandEnd::SigkillAfterGrace(StopCause::Duration),
                Some(grace),
            ));
        }
        None
    }

    /// After a Ctrl-C, the command has the grace period at each step:
    /// then SIGTERM, then SIGKILL, and this ending.
    pub(super) fn interrupt_grace_over(
        &mut self,
        recorder: &Recorder,
        child_pid: Option<i32>,
        grace: Duration,
    ) -> Option<Ending> {
        if let (Some((step, t)), Some(pid)) = (self.interrupt_step, child_pid)
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
                Some(next) => self.interrupt_step = Some((next, Instant::now())),
                None => return Some(interrupt_kill(recorder, pid, grace)),
            }
        }
        None
    }

    /// At `--duration` (unless already stopping): the recording stops and
    /// the command gets SIGTERM; the ending at once when there is no
    /// command.
    pub(super) fn duration_over(
        &mut self,
        recorder: &mut Recorder,
        options: &RecordOptions,
        child_pid: Option<i32>,
    ) -> Option<Ending> {
        if let Some(limit) = options.duration
            && self.started.elapsed() >= limit
            && self.terminated_at.is_none()
            && self.interrupted_at.is_none()
        {
            recorder.mark_stop();
            match child_pid {
                Some(pid) => {
                    launch::send_signal(pid, libc::SIGTERM);
                    self.terminated_at = Some(Instant::now());
                }
                None => return Some(Ending::new(EndReason::Duration, None, None)),
            }
        }
        None
    }
}

/// The workload had the grace period to stop after the early verdict
/// (`verdict_at`): once it is over, the command is SIGKILLed and this is
/// the ending.
pub(super) fn verdict_grace_over(
    recorder: &Recorder,
    child_pid: Option<i32>,
    grace: Duration,
    verdict_at: Option<Instant>,
) -> Option<Ending> {
    if let Some(t) = verdict_at
        && t.elapsed() > grace
    {
        if let Some(pid) = child_pid {
            let status = kill_after_grace(recorder, pid);
            return Some(
                Ending::new(EndReason::Verdict, status.0, status.1).with_command(
                    CommandEnd::SigkillAfterGrace(StopCause::Verdict),
                    Some(grace),
                ),
            );
        }
        return Some(Ending::new(EndReason::Verdict, None, None));
    }
    None
}

/// Attached to pids only (no command, no namespace): the ending once
/// every one of them has exited.
pub(super) fn attached_pids_gone(
    recorder: &Recorder,
    options: &RecordOptions,
    child_pid: Option<i32>,
    verdict_at: Option<Instant>,
) -> Option<Ending> {
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
        return Some(Ending::new(reason, None, None));
    }
    None
}
