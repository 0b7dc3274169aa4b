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
    os::fd::RawFd,
    time::{Duration, Instant},
};

use super::{
    RecordError, RecordOptions, launch,
    live::{self, Reached},
    recorder::Recorder,
    session_writer::SessionParts,
};

mod ending;
mod live_updates;
mod turn_state;

pub use ending::{CommandEnd, EndReason, Ending, StopCause};
pub use live_updates::CHECKPOINT_REASON;
pub(crate) use live_updates::LiveContext;
use live_updates::{Checkpoints, Live, elapsed_s, live_analysis, write_due_checkpoint};
use turn_state::{TurnState, attached_pids_gone, verdict_grace_over};

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

/// Waits for process events on `proc_fd` (sleeps without one): up to
/// 100 ms, 20 ms while a process is fresh.
fn wait_for_events(recorder: &Recorder, proc_fd: Option<RawFd>) {
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
}

/// The turns of the recording loop, until one ends it.
fn run_turns(
    recorder: &mut Recorder,
    options: &RecordOptions,
    child_pid: Option<i32>,
    (live, checkpoints): (&mut Option<Live>, &mut Option<Checkpoints>),
    (early, parts): (&mut Option<Reached>, &mut Option<SessionParts>),
    verdict_at: &mut Option<Instant>,
) -> Result<Ending, RecordError> {
    let mut state = TurnState::new();
    let grace = options.grace;
    let proc_fd = recorder.probes.wait_fd();
    loop {
        wait_for_events(recorder, proc_fd);
        recorder.drain();
        state.rescan_and_tick(recorder)?;
        // With the live view on, a due checkpoint waits for the next
        // analysis when that comes within an interval, and is written
        // from its parts.
        let analysis_soon = live
            .as_ref()
            .is_some_and(|l| l.next_s <= elapsed_s(recorder) + options.live.interval.as_secs_f64());
        if let Some(c) = checkpoints.as_mut()
            && !analysis_soon
            && c.due(recorder)
            && state.undisturbed(early)
        {
            write_due_checkpoint(recorder, options, c);
        }
        if let Some(l) = live.as_mut()
            && l.analysis_due(recorder)
            && state.undisturbed(early)
        {
            if let Some(ending) = live_analysis(
                recorder,
                options,
                child_pid,
                l,
                checkpoints,
                (&mut *early, &mut *parts),
                verdict_at,
            )? {
                return Ok(ending);
            }
        } else if let Some(l) = live.as_mut()
            && Instant::now() >= l.refresh
            && state.undisturbed(early)
        {
            l.refresh(recorder, options);
            l.refresh = Instant::now() + options.live.interval;
        }
        if let Some(ending) = verdict_grace_over(recorder, child_pid, grace, *verdict_at) {
            return Ok(ending);
        }
        if let Some(ending) = state.command_exited(recorder, child_pid, grace, *verdict_at) {
            return Ok(ending);
        }
        if let Some(ending) = attached_pids_gone(recorder, options, child_pid, *verdict_at) {
            return Ok(ending);
        }
        if let Some(ending) = state.take_signal(recorder, child_pid, grace) {
            return Ok(ending);
        }
        if let Some(ending) = state.duration_grace_over(recorder, child_pid, grace) {
            return Ok(ending);
        }
        if let Some(ending) = state.interrupt_grace_over(recorder, child_pid, grace) {
            return Ok(ending);
        }
        if let Some(ending) = state.duration_over(recorder, options, child_pid) {
            return Ok(ending);
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
