//! `storprof record`'s arguments and their mapping onto
//! [`RecordOptions`]: times checked in words, the live budget, the
//! `--stall-after` override of the thresholds. `diagnose` flattens them.
use std::path::PathBuf;

use storprof_analysis::Thresholds;
use storprof_record::{
    RecordOptions, SyscallTiming, UnwindMode,
    args::default_output,
    live::{LiveOptions, LiveView, ThenAction},
};

/// `storprof record [--pid PID]... [--netns NAME|PATH] [--duration SECS] [--freq HZ] [--output DIR] [-- CMD ARGS...]`
#[derive(clap::Args, Debug, Clone)]
pub struct RecordArgs {
    /// Trace this running process and its descendants (repeatable; -p as in perf and py-spy).
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Trace every process in this network namespace: a name from
    /// `ip netns list` or a path such as /proc/PID/ns/net. Processes already
    /// in it are traced at start, newcomers within 100 ms (rescans), their
    /// children from their fork on. For test hosts sharing one kernel (one
    /// `record` per host); the session is named after the host
    /// ($STORPROF_HOST, else the namespace's own host name, else the
    /// `ip netns` name). Records until --duration or Ctrl-C.
    #[arg(long, value_name = "NAME|PATH")]
    pub netns: Option<String>,
    /// Stop recording after this many seconds: the command gets SIGTERM,
    /// and SIGKILL if it still runs after --grace (the report says so).
    #[arg(short = 'd', long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Seconds the command has to exit after storprof's SIGTERM (at
    /// --duration, after an early verdict) before SIGKILL, and at each
    /// step after a Ctrl-C: the forwarded SIGINT, then SIGTERM, then
    /// SIGKILL (a further Ctrl-C takes the next step at once).
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    pub grace: f64,
    /// CPU sampling frequency in Hz (1 to 10000).
    #[arg(short = 'F', long, default_value_t = 99, value_name = "HZ",
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub freq: u64,
    /// Session directory to write (default: storprof-YYYYmmdd-HHMMSS).
    #[arg(long, short, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Run the command as root even when started through sudo.
    #[arg(long)]
    pub as_root: bool,
    /// Write into an existing output directory that is not empty (files of
    /// the same names are replaced); without it such a directory is refused.
    /// `diagnose`: also replace an existing --bundle file.
    #[arg(long)]
    pub force: bool,
    /// Write the session as it stands every SECS seconds while recording,
    /// so a storprof killed with SIGKILL leaves a partial session that
    /// `report` reads (0: only at the end). Less often once checkpoints,
    /// which grow with the session, would take over 1% of one CPU.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    pub checkpoint: f64,
    /// How each syscall's time is measured: `blocked` (default: the time
    /// its thread spent switched out inside it, from the scheduler; one hook
    /// per syscall), `exact` (entry to exit of every call; a second hook,
    /// about twice the per-syscall cost) or `off` (counts and bytes only).
    #[arg(long, value_enum, default_value_t = SyscallTiming::Blocked, value_name = "MODE")]
    pub syscall_timing: SyscallTiming,
    /// Same as `--syscall-timing off`.
    #[arg(long, conflicts_with = "syscall_timing")]
    pub no_syscall_latency: bool,
    /// How to unwind user stacks: `auto` (default: per process, decided at
    /// exec: `dwarf` when its main executable lacks frame pointers, i.e.
    /// under half of its functions open with `push %rbp; mov %rsp,%rbp`,
    /// or it has no symbols, or it runs a CPython interpreter; `fp`
    /// otherwise; the choice and its reason per process go to session.json
    /// `unwind.decisions`), `fp` (frame pointers for all, cheap) or `dwarf`
    /// (for all: copies --stack-bytes of stack per sample, unwinds code
    /// built without frame pointers from its .eh_frame).
    #[arg(long, value_enum, default_value_t = UnwindMode::Auto)]
    pub unwind: UnwindMode,
    /// Bytes of user stack copied per sample of a process in dwarf mode (at most 65536).
    #[arg(long, default_value_t = storprof_common::DEFAULT_STACK_BYTES, value_name = "N",
          value_parser = clap::value_parser!(u32).range(64..=65536))]
    pub stack_bytes: u32,
    /// Off-CPU stacks in dwarf mode, and Python threads' off-CPU Python
    /// frames: time blocked is sampled with one stack copy per this many
    /// µs of blocked time on average (unbiased: a shorter wait is taken
    /// with probability wait/quantum and then weighs a quantum). 0 takes
    /// every one (costly for readers that block thousands of times a
    /// second). Default: one --freq period (10101 µs at 99 Hz).
    #[arg(long, value_name = "US")]
    pub offcpu_quantum_us: Option<u32>,
    /// The live view: `auto` (a status block under the command's output
    /// when stderr is a terminal, else one line per update), `block`,
    /// `lines` or `off`.
    #[arg(long, value_enum, default_value_t = LiveView::Auto)]
    pub live: LiveView,
    /// Seconds between two live updates (each analyses the recording so far).
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    pub live_interval: f64,
    /// The share of one CPU, in percent, the live analyses (verdict, AU,
    /// phase) may take on average since the start: the first comes once
    /// the budget has earned 0.4 s of CPU (40 s in at 1%), each next once
    /// it has earned back what they cost so far; the view's rates and
    /// threads are refreshed every --live-interval between them. 0: an
    /// analysis every --live-interval. Not applied with --until-verdict.
    #[arg(long, default_value_t = 1.0, value_name = "PERCENT")]
    pub live_budget: f64,
    /// Stop recording once the training window has begun and the verdict
    /// and its confidence label have held for SECS (default 30) of it; a
    /// stall stops at once. The session, report and bundle are written as
    /// usual and say the verdict was reached early.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "30")]
    pub until_verdict: Option<f64>,
    /// After an early verdict: `stop` the workload (SIGTERM, SIGKILL
    /// --grace later) or leave it running (`continue`). Default: stop a command
    /// storprof launched, leave --pid processes running.
    #[arg(long, value_enum, value_name = "ACTION", requires = "until_verdict")]
    pub then: Option<ThenAction>,
    /// Seconds without progress (no read, no hand-off between threads)
    /// before the job is `stalled` (default 60, from the thresholds).
    #[arg(long, value_name = "SECS")]
    pub stall_after: Option<f64>,
    /// The command to run and trace, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// A time option in seconds: finite and above zero, else a usage error.
fn seconds(flag: &str, value: f64) -> Result<std::time::Duration, String> {
    if value.is_finite() && value > 0.0 {
        Ok(std::time::Duration::from_secs_f64(value))
    } else {
        Err(format!(
            "{flag} must be a number of seconds above 0, not {value}"
        ))
    }
}

/// `--live-budget PERCENT`: a share of one CPU, None for 0.
fn live_budget(percent: f64) -> Result<Option<f64>, String> {
    if !(percent.is_finite() && (0.0..=100.0).contains(&percent)) {
        return Err(format!(
            "--live-budget must be a percentage of one CPU from 0 to 100, not {percent}"
        ));
    }
    Ok((percent > 0.0).then_some(percent / 100.0))
}

impl RecordArgs {
    /// The thresholds of the live verdicts: `thresholds`, with
    /// `--stall-after` as their `stall_s`.
    pub fn live_thresholds(&self, thresholds: &Thresholds) -> Result<Thresholds, String> {
        let mut thresholds = thresholds.clone();
        if let Some(stall) = self.stall_after {
            thresholds.stall_s = seconds("--stall-after", stall)?.as_secs_f64();
        }
        Ok(thresholds)
    }

    /// The library options, with `thresholds` for the live verdicts
    /// (`--stall-after` overrides their `stall_s`): the frequency at least
    /// 1 Hz, the output a timestamped directory by default. Times that are
    /// not above zero are usage errors, in words.
    pub fn to_options(&self, thresholds: &Thresholds) -> Result<RecordOptions, String> {
        let thresholds = self.live_thresholds(thresholds)?;
        let live = LiveOptions {
            view: self.live,
            interval: seconds("--live-interval", self.live_interval)?,
            cpu_budget: live_budget(self.live_budget)?,
            until_verdict: self
                .until_verdict
                .map(|s| seconds("--until-verdict", s))
                .transpose()?,
            then: self.then,
            analysis: Some(crate::live_verdict::analysis(thresholds)),
        };
        Ok(RecordOptions {
            command: self.command.clone(),
            pids: self.pids.clone(),
            netns: self.netns.clone(),
            duration: self
                .duration
                .map(|d| seconds("--duration", d))
                .transpose()?,
            grace: seconds("--grace", self.grace)?,
            freq_hz: self.freq.max(1),
            output: self.output.clone().unwrap_or_else(default_output),
            as_root: self.as_root,
            force: self.force,
            checkpoint: if self.checkpoint == 0.0 {
                None
            } else {
                Some(seconds("--checkpoint", self.checkpoint)?)
            },
            syscall_timing: if self.no_syscall_latency {
                SyscallTiming::Off
            } else {
                self.syscall_timing
            },
            unwind: self.unwind,
            stack_bytes: self.stack_bytes,
            offcpu_quantum_us: self.offcpu_quantum_us,
            live,
            // diagnose --json sets it.
            command_stdout_to_stderr: false,
        })
    }

    /// The `--stall-after` override applied to `thresholds` (for the report).
    pub fn thresholds(&self, thresholds: Thresholds) -> Thresholds {
        match self.stall_after {
            Some(s) if s.is_finite() && s > 0.0 => Thresholds {
                stall_s: s,
                ..thresholds
            },
            _ => thresholds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ThenAction;

    use crate::cli::{Cli, Command};

    fn record_args(args: &[&str]) -> Result<super::RecordArgs, clap::Error> {
        use clap::Parser;
        let argv = ["storprof", "record"].iter().chain(args);
        match Cli::try_parse_from(argv)?.command {
            Command::Record(r) => Ok(r),
            _ => unreachable!("parsed a record command"),
        }
    }

    #[test]
    fn until_verdict_defaults_to_30_s_and_bad_times_are_usage_errors() {
        let t = super::Thresholds::default();
        let r = record_args(&["--until-verdict", "--", "true"]).unwrap();
        let o = r.to_options(&t).unwrap();
        assert_eq!(
            o.live.until_verdict,
            Some(std::time::Duration::from_secs(30))
        );
        assert_eq!(o.live.then, None);
        let r =
            record_args(&["--until-verdict", "10", "--then", "continue", "--", "true"]).unwrap();
        let o = r.to_options(&t).unwrap();
        assert_eq!(
            o.live.until_verdict,
            Some(std::time::Duration::from_secs(10))
        );
        assert_eq!(o.live.then, Some(ThenAction::Continue));
        for bad in [
            &["--until-verdict", "0"][..],
            &["--until-verdict=-5"],
            &["--stall-after", "0"],
            &["--live-interval", "NaN"],
            &["--duration=-1"],
        ] {
            let r = record_args(bad).unwrap();
            let err = r.to_options(&t).unwrap_err();
            assert!(err.contains("above 0"), "{bad:?}: {err}");
        }
        // --then needs --until-verdict.
        assert!(record_args(&["--then", "stop", "--", "true"]).is_err());
        let r = record_args(&["--stall-after", "5", "--", "true"]).unwrap();
        assert_eq!(r.live_thresholds(&t).unwrap().stall_s, 5.0);
        assert_eq!(r.thresholds(t.clone()).stall_s, 5.0);
    }
}
