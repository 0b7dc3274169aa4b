//! The recording loop: drain the kernel side until the command exits, the
//! duration ends or a signal arrives, and say which.
//!
//! Data flow: each turn waits for process events (or 100 ms, 20 ms while a
//! process is fresh), drains them into the [`Recorder`], rescans a
//! selected namespace, ticks the time series once a second, and checks the
//! command, the pending signal (forwarded to the command, which then has
//! 5 s to exit) and the duration (SIGTERM, then the same 5 s).
use std::time::{Duration, Instant};

use super::{RecordError, RecordOptions, launch, recorder::Recorder, select};

/// Why the recording loop ended (`session.json` `end_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The command (or every attached process) exited.
    Exited,
    /// SIGINT/SIGTERM reached storprof.
    Interrupted,
    /// `--duration` ran out.
    Duration,
}

impl EndReason {
    /// The name written to `session.json`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Exited => "exited",
            Self::Interrupted => "interrupted",
            Self::Duration => "duration",
        }
    }
}

/// How the recording loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ending {
    pub reason: EndReason,
    /// The command's exit status, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed the command, when one did.
    pub exit_signal: Option<i32>,
}

pub(super) fn run_loop(
    recorder: &mut Recorder,
    options: &RecordOptions,
    child_pid: Option<i32>,
) -> Result<Ending, RecordError> {
    let started = Instant::now();
    let mut next_tick = Instant::now() + Duration::from_secs(1);
    let mut interrupted_at: Option<Instant> = None;
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
        if let Some(pid) = child_pid
            && let Some((code, signal)) = launch::try_wait(pid)
        {
            let reason = if interrupted_at.is_some() {
                EndReason::Interrupted
            } else if terminated_at.is_some() {
                EndReason::Duration
            } else {
                EndReason::Exited
            };
            return Ok(Ending {
                reason,
                exit_code: code,
                exit_signal: signal,
            });
        }
        if child_pid.is_none()
            && recorder.selector.is_none()
            && options.pids.iter().all(|p| !launch::alive(*p))
        {
            return Ok(Ending {
                reason: EndReason::Exited,
                exit_code: None,
                exit_signal: None,
            });
        }
        let (signo, forward) = launch::pending_signal();
        if signo != 0 {
            match child_pid {
                Some(pid) => {
                    if forward {
                        launch::send_signal(pid, signo);
                    }
                    interrupted_at.get_or_insert_with(Instant::now);
                }
                None => {
                    return Ok(Ending {
                        reason: EndReason::Interrupted,
                        exit_code: None,
                        exit_signal: None,
                    });
                }
            }
        }
        // After a signal or the duration, give the command 5 s to exit.
        if let Some(t) = interrupted_at.or(terminated_at)
            && t.elapsed() > Duration::from_secs(5)
        {
            let reason = if interrupted_at.is_some() {
                EndReason::Interrupted
            } else {
                EndReason::Duration
            };
            return Ok(Ending {
                reason,
                exit_code: None,
                exit_signal: None,
            });
        }
        if let Some(limit) = options.duration
            && started.elapsed() >= limit
            && terminated_at.is_none()
            && interrupted_at.is_none()
        {
            match child_pid {
                Some(pid) => {
                    launch::send_signal(pid, libc::SIGTERM);
                    terminated_at = Some(Instant::now());
                }
                None => {
                    return Ok(Ending {
                        reason: EndReason::Duration,
                        exit_code: None,
                        exit_signal: None,
                    });
                }
            }
        }
    }
}
