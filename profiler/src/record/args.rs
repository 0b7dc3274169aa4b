//! Command-line arguments of `storprof record` and `storprof doctor`, mapped
//! onto [`RecordOptions`] and [`crate::doctor::run`].
use std::path::PathBuf;

use super::{RecordError, RecordOptions, record};
use crate::cli::exit;

/// `storprof record [--pid PID]... [--netns NAME|PATH] [--duration SECS] [--freq HZ] [--output DIR] [-- CMD ARGS...]`
#[derive(clap::Args, Debug, Clone)]
pub struct RecordArgs {
    /// Trace this running process and its descendants (repeatable).
    #[arg(long = "pid", value_name = "PID")]
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
    /// Stop recording after this many seconds (the command gets SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// CPU sampling frequency in Hz.
    #[arg(long, default_value_t = 99, value_name = "HZ")]
    pub freq: u64,
    /// Session directory to write (default: storprof-YYYYmmdd-HHMMSS).
    #[arg(long, short, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Run the command as root even when started through sudo.
    #[arg(long)]
    pub as_root: bool,
    /// Count syscalls at exit only: cheaper, but no syscall latency.
    #[arg(long)]
    pub no_syscall_latency: bool,
    /// How to unwind user stacks: `auto` (default: per process, decided at
    /// exec: `dwarf` when its main executable lacks frame pointers, i.e.
    /// under half of its functions open with `push %rbp; mov %rsp,%rbp`,
    /// or it has no symbols, or it runs a CPython interpreter; `fp`
    /// otherwise; the choice and its reason per process go to session.json
    /// `unwind.decisions`), `fp` (frame pointers for all, cheap) or `dwarf`
    /// (for all: copies --stack-bytes of stack per sample, unwinds code
    /// built without frame pointers from its .eh_frame).
    #[arg(long, value_enum, default_value_t = super::UnwindMode::Auto)]
    pub unwind: super::UnwindMode,
    /// Bytes of user stack copied per sample of a process in dwarf mode (at most 65536).
    #[arg(long, default_value_t = storprof_common::DEFAULT_STACK_BYTES, value_name = "N",
          value_parser = clap::value_parser!(u32).range(64..=65536))]
    pub stack_bytes: u32,
    /// Off-CPU stacks in dwarf mode: time blocked in syscalls is sampled
    /// with one stack copy per this many µs of blocked time on average
    /// (unbiased: a shorter wait is taken with probability wait/quantum
    /// and then weighs a quantum). 0 takes every blocked syscall (costly
    /// for readers that block thousands of times a second). Default: one
    /// --freq period (10101 µs at 99 Hz).
    #[arg(long, value_name = "US")]
    pub offcpu_quantum_us: Option<u32>,
    /// The command to run and trace, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// The local time as `YYYYmmdd-HHMMSS`, for default output names.
pub fn local_timestamp() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as libc::time_t);
    // SAFETY: localtime_r with valid pointers to a time_t and a zeroed tm.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&now, &mut tm);
        tm
    };
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// A default session directory name from the local time.
fn default_output() -> PathBuf {
    PathBuf::from(format!("storprof-{}", local_timestamp()))
}

impl RecordArgs {
    pub fn to_options(&self) -> RecordOptions {
        RecordOptions {
            command: self.command.clone(),
            pids: self.pids.clone(),
            netns: self.netns.clone(),
            duration: self
                .duration
                .filter(|d| d.is_finite() && *d > 0.0)
                .map(std::time::Duration::from_secs_f64),
            freq_hz: self.freq.max(1),
            output: self.output.clone().unwrap_or_else(default_output),
            as_root: self.as_root,
            syscall_latency: !self.no_syscall_latency,
            unwind: self.unwind,
            stack_bytes: self.stack_bytes,
            offcpu_quantum_us: self.offcpu_quantum_us,
        }
    }
}

/// Runs `storprof record`; returns the process exit code.
pub fn run_record(args: &RecordArgs) -> anyhow::Result<i32> {
    match record(&args.to_options()) {
        Ok(outcome) => {
            eprintln!("storprof: session written to {}", outcome.dir.display());
            Ok(outcome.exit_code)
        }
        Err(
            err @ (RecordError::NotRoot
            | RecordError::NothingToRecord
            | RecordError::UnknownCommand(_)
            | RecordError::NoSuchPid(_)
            | RecordError::Select(_)),
        ) => {
            eprintln!("storprof: error: {err}");
            Ok(exit::USAGE)
        }
        Err(err) => Err(err.into()),
    }
}

/// `storprof doctor` (no options).
#[derive(clap::Args, Debug, Clone)]
pub struct DoctorArgs {}

/// Runs `storprof doctor`: prints one line per check; 0 when all pass.
pub fn run_doctor(_args: &DoctorArgs) -> anyhow::Result<i32> {
    let checks = crate::doctor::run(|c| println!("{c}"));
    let failed = checks.iter().filter(|c| !c.ok).count();
    if failed == 0 {
        println!("all {} checks passed", checks.len());
        Ok(exit::OK)
    } else {
        println!("{failed} of {} checks failed", checks.len());
        // SAFETY: geteuid has no preconditions.
        Ok(if unsafe { libc::geteuid() } != 0 {
            exit::USAGE
        } else {
            exit::ERROR
        })
    }
}
