//! How a recording ended: why the loop stopped, and how the launched
//! command went (`session.json` `end_reason`, `ended_by`).
use std::time::Duration;

use super::super::live::Reached;

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
    pub(super) fn new(reason: EndReason, exit_code: Option<i32>, exit_signal: Option<i32>) -> Self {
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
    pub(super) fn with_command(mut self, ended_by: CommandEnd, grace: Option<Duration>) -> Self {
        self.ended_by = Some(ended_by);
        self.grace = grace;
        self
    }
}

/// How the command ended, from its wait status and the SIGTERM storprof
/// sent it, if any.
pub(super) fn command_end(signal: Option<i32>, sigterm_for: Option<StopCause>) -> CommandEnd {
    match (sigterm_for, signal) {
        (Some(cause), _) => CommandEnd::Sigterm(cause),
        (None, Some(_)) => CommandEnd::Signaled,
        (None, None) => CommandEnd::Exited,
    }
}
