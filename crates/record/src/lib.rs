//! The recorder: everything that touches the kernel and the traced
//! processes, and the session directory it leaves. Nothing here knows the
//! analysis: the live view gets its verdicts from the caller
//! ([`live::LiveOptions::analysis`]).
//!
//! ```text
//!  ebpf/probes (in the kernel)
//!        │ maps / ring buffers
//!        ▼
//!  probes::    load + attach: the one kernel seam (tracefs, BTF, aya)
//!        │ raw counters, stack ids, wait records
//!        ▼
//!  launch, run_loop, recorder, aggregate (this crate's root modules):
//!              launch or attach, follow the workers (select, procfs),
//!              drain each turn (run_loop ─► recorder), aggregate (pure)
//!        │ user stacks, Python frames ─► [storprof-stacks]: unwound,
//!        │                                 symbolized, Python frames decoded
//!        ▼
//!  session_writer ─► session directory [storprof-session]
//! ```
//!
//! [`record`] (`storprof record`): attach the probes, run or attach to the workload,
//! drain and symbolize, and write the session directory.
//!
//! Data flow: [`record`] loads and attaches every probe family
//! (`probes::ProbeSet`), forks the command (it waits on a pipe), registers
//! its pid, lets it exec ([`launch`]); then loops: process events keep the
//! symbolizer's view of each traced process fresh, block completions are
//! collected, the per-thread maps are read every second for the time
//! series, and (DWARF mode) user-stack samples are unwound while their
//! process is alive: CPU samples, and blocked syscalls' stacks copied at
//! the syscall's exit, which become DWARF off-CPU stacks. When the command exits (or the duration ends, or SIGINT/SIGTERM), the
//! maps are read one last time, turned into the model by the pure functions
//! of [`aggregate`], symbolized, and written, with the workload's own DLIO
//! summary.json when it wrote one ([`workload_summary`]); dropping the probe
//! set detaches everything.
pub mod aggregate;
pub mod args;
mod cgroup_io;
pub mod dwarf_samples;
pub mod fold;
pub mod kernel;
pub mod launch;
mod layouts;
pub mod live;
pub mod probes;
mod procfs;
pub mod python;
mod recorder;
pub mod replay;
mod retired;
pub mod run_loop;
pub mod screen;
pub mod select;
mod session_parts;
mod session_writer;
mod setup;
mod unwind_choice;
pub mod workload_summary;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

pub use crate::probes::SyscallTiming;
use recorder::Recorder;
use run_loop::EndReason;

/// Default of [`RecordOptions::grace`].
pub const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Default of [`RecordOptions::checkpoint`].
pub const DEFAULT_CHECKPOINT: std::time::Duration = std::time::Duration::from_secs(30);

/// The share of one CPU the checkpoints may take on average since the
/// recording began. Each costs more as the session grows (0.04 s at 1 min,
/// 0.12 s at 4 min on a two-worker Python loader here): every 30 s on a
/// job of hours would take several percent of a CPU.
pub const CHECKPOINT_CPU_BUDGET: f64 = 0.01;

/// Seconds since the recording began of the next checkpoint, after one
/// ending at `elapsed_s`, every `every_s` seconds, checkpoints having cost
/// `spent_s` seconds of CPU in all: not before the budget has earned that
/// back.
pub fn next_checkpoint_s(elapsed_s: f64, every_s: f64, spent_s: f64) -> f64 {
    budgeted_next_s(elapsed_s, every_s, spent_s, CHECKPOINT_CPU_BUDGET)
}

/// The rule the live analyses and the checkpoints keep to: the next one
/// `interval_s` after the last (ending at `elapsed_s`) at the soonest, and
/// not before `budget` of one CPU since the start has paid for the
/// `spent_s` seconds of CPU the ones so far cost.
pub(crate) fn budgeted_next_s(elapsed_s: f64, interval_s: f64, spent_s: f64, budget: f64) -> f64 {
    (elapsed_s + interval_s).max(spent_s.max(0.0) / budget)
}

/// Options of one recording. Defaults are documented per field.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// Command to start and follow (with all its descendants). Empty: attach to `pids`.
    pub command: Vec<String>,
    /// Running processes to trace (with descendants forked after attach).
    pub pids: Vec<u32>,
    /// Trace every process of this network namespace (an `ip netns` name or
    /// an nsfs path), rescanned every [`select::RESCAN_INTERVAL`]. Default none.
    pub netns: Option<String>,
    /// Stop after this long. Default: until the command exits (or Ctrl-C).
    pub duration: Option<std::time::Duration>,
    /// Time the command has to exit after storprof's SIGTERM (at
    /// `duration`, after an early verdict) before SIGKILL, and after a
    /// forwarded Ctrl-C before the recording ends without it. Default 5 s.
    pub grace: std::time::Duration,
    /// CPU sampling frequency. Default 99 Hz.
    pub freq_hz: u64,
    /// Session directory to write. Default: `storprof-<timestamp>` in the cwd.
    pub output: PathBuf,
    /// Run the command as root even under sudo. Default false: run it as SUDO_UID/SUDO_GID.
    pub as_root: bool,
    /// Write into an existing directory that is not empty (files of the
    /// same names are replaced). Default false: such a directory is refused.
    pub force: bool,
    /// Write the session as it stands this often while recording, so a
    /// storprof killed with SIGKILL (or a machine that stops) leaves a
    /// readable partial session (`end_reason` "checkpoint"). A checkpoint
    /// builds and writes the whole session, whose size grows with the
    /// recording: once they cost more than [`CHECKPOINT_CPU_BUDGET`] of one
    /// CPU, they come less often (see [`next_checkpoint_s`]). None: only at
    /// the end. Default 30 s.
    pub checkpoint: Option<std::time::Duration>,
    /// How syscalls are timed. Default [`SyscallTiming::Blocked`] (time
    /// switched out inside each call, no hook on syscall entry).
    pub syscall_timing: SyscallTiming,
    /// How user stacks are unwound. Default `Auto` (per process: DWARF when
    /// its executable lacks frame pointers or it runs CPython, else frame pointers).
    pub unwind: UnwindMode,
    /// Bytes of user stack copied per sample in `Dwarf` mode. Default 16384.
    pub stack_bytes: u32,
    /// Off-CPU stacks of DWARF-unwound processes: time blocked in a
    /// syscall is sampled, one stack copy per this many µs of blocked time
    /// on average (shorter intervals are taken with probability
    /// `blocked / quantum` and weigh one quantum, longer ones are always
    /// taken; an unbiased estimate at a bounded cost). `Some(0)` takes
    /// every blocked syscall. Default `None`: one sampling period at
    /// `freq_hz` (10101 µs at 99 Hz), as dense as the CPU samples.
    pub offcpu_quantum_us: Option<u32>,
    /// The live view and the early verdict. Default: a live view
    /// (`LiveView::Auto`), no early verdict.
    pub live: live::LiveOptions,
    /// The command's standard output goes to storprof's standard error,
    /// so that storprof's own stdout carries only its result
    /// (`diagnose --json`). Default false: the command keeps its stdout.
    pub command_stdout_to_stderr: bool,
}

impl RecordOptions {
    /// The off-CPU sampling quantum in effect (µs).
    pub fn offcpu_quantum_us(&self) -> u32 {
        self.offcpu_quantum_us
            .unwrap_or_else(|| (1_000_000 / self.freq_hz.max(1)).min(u32::MAX as u64) as u32)
    }
}

/// How user stacks of CPU samples are unwound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum UnwindMode {
    /// Per process, decided at exec: dwarf when the main executable lacks
    /// frame pointers (judged from its code) or runs a CPython
    /// interpreter, fp otherwise. Only DWARF processes pay for the
    /// stack copy.
    #[default]
    Auto,
    /// Frame pointers, walked by the kernel (cheap; stops at code built
    /// without frame pointers).
    Fp,
    /// A copy of the user registers and stack window per sample, unwound in
    /// user space from `.eh_frame`/`.debug_frame` (no frame pointers needed).
    Dwarf,
}

impl UnwindMode {
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Fp => "fp",
            Self::Dwarf => "dwarf",
        }
    }
}

impl Default for RecordOptions {
    fn default() -> Self {
        Self {
            command: Vec::new(),
            pids: Vec::new(),
            netns: None,
            duration: None,
            grace: DEFAULT_GRACE,
            freq_hz: 99,
            output: PathBuf::from("storprof-session"),
            as_root: false,
            force: false,
            checkpoint: Some(DEFAULT_CHECKPOINT),
            syscall_timing: SyscallTiming::Blocked,
            unwind: UnwindMode::Auto,
            stack_bytes: storprof_common::DEFAULT_STACK_BYTES,
            offcpu_quantum_us: None,
            live: live::LiveOptions::default(),
            command_stdout_to_stderr: false,
        }
    }
}

/// What a finished recording produced.
#[derive(Clone, Debug)]
pub struct RecordOutcome {
    /// The session directory written.
    pub dir: PathBuf,
    /// The exit code `storprof record` should exit with (the command's status,
    /// 128+signal when it was killed, 0 when attached to pids or after an
    /// early verdict).
    pub exit_code: i32,
}

/// Errors of a recording.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("storprof record needs root (it loads eBPF programs); run it with sudo")]
    NotRoot,
    #[error("not implemented yet")]
    NotImplemented,
    #[error("nothing to record: give a command after `--`, at least one --pid, or --netns")]
    NothingToRecord,
    #[error("command not found or not executable: {0}")]
    UnknownCommand(String),
    #[error("cannot start {command}: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no such process: {0}")]
    NoSuchPid(u32),
    #[error("--then stop cannot stop pid {pid}: {reason}; use --then continue")]
    CannotSignal { pid: u32, reason: String },
    #[error(transparent)]
    Select(#[from] select::SelectError),
    #[error(transparent)]
    Probes(#[from] probes::ProbeError),
    #[error("tracefs: {0}")]
    Tracefs(String),
    #[error(
        "interrupted by signal {0} while the probes loaded: the command was not started, \
         nothing was recorded"
    )]
    Interrupted(i32),
    #[error(transparent)]
    UnsafeOutput(#[from] storprof_session::safe_path::UnsafeOutput),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Record one session. Blocks until the command exits, the duration ends or
/// SIGINT/SIGTERM arrives; the session is written in every case.
pub fn record(options: &RecordOptions) -> Result<RecordOutcome, RecordError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(RecordError::NotRoot);
    }
    // From here a signal only sets a flag: start-up checks it, the run
    // loop stops on it and the session is written.
    launch::install_signal_handlers();
    let program = setup::check_targets(options)?;
    let selector = options
        .netns
        .as_deref()
        .map(select::NetnsSelector::open)
        .transpose()?;
    let tracefs_line = probes::tracefs::ensure_mounted().map_err(RecordError::Tracefs)?;
    let out = setup::make_output_dir(options)?;

    let probes = setup::load_probes(options)?;
    setup::stop_if_interrupted(&out)?;
    let setup::OutputDir {
        dir, abs: dir_abs, ..
    } = out;

    let start_unix = procfs::unix_ns();
    let start_mono = procfs::monotonic_ns();
    let mut recorder = Recorder::new(Box::new(probes), options.unwind, selector, start_mono);
    recorder.add_selected()?;
    setup::announce_selection(&recorder);

    // Attached pids and their existing descendants.
    setup::trace_attached_pids(&mut recorder, &options.pids)?;

    // The command: forked, registered, then released to exec.
    let mut child_pid: Option<i32> = None;
    if let Some(path) = &program {
        child_pid = Some(setup::start_command(
            &mut recorder,
            options,
            path,
            &dir_abs,
        )?);
    }
    recorder.start_series();

    let live = run_loop::LiveContext {
        dir: &dir,
        tracefs_line: &tracefs_line,
        start_unix,
    };
    let (ending, early_parts) =
        run_loop::run_loop_live(&mut recorder, options, child_pid, Some(live))?;
    recorder.cpu_when_recording_ended = procfs::own_cpu_s();
    say_how_it_ended(&ending, options);
    match early_parts {
        // An early verdict: the session as it stood then (before the stop).
        Some(parts) => session_writer::write_parts(&dir, &parts)?,
        None => write_final_session(
            &mut recorder,
            options,
            &dir,
            &ending,
            start_unix,
            &tracefs_line,
        )?,
    }
    // Dropping `recorder` detaches every probe.
    drop(recorder);

    let exit_code = exit_code(&ending);
    Ok(RecordOutcome { dir, exit_code })
}

/// Says on stderr how the recording ended when storprof had to kill the
/// command after its SIGTERM, or stopped it at an early verdict.
fn say_how_it_ended(ending: &run_loop::Ending, options: &RecordOptions) {
    if ending.ended_by.is_some_and(|e| {
        // After a Ctrl-C the run loop said each step as it took it.
        matches!(e, run_loop::CommandEnd::SigkillAfterGrace(cause)
                if cause != run_loop::StopCause::Interrupt)
    }) {
        eprintln!(
            "storprof: the command was still running {:.0} s after SIGTERM: killed with SIGKILL",
            options.grace.as_secs_f64()
        );
    }
    if let Some(r) = &ending.early {
        eprintln!(
            "storprof: verdict {} ({}) held from {:.1} s to {:.1} s: recording stopped",
            r.verdict, r.confidence_label, r.from_s, r.to_s
        );
    }
}

/// The session at the end of the recording: the last events drained and
/// the last tick taken, the workload's own summary copied in when it
/// wrote one, and everything written to `dir`.
fn write_final_session(
    recorder: &mut Recorder,
    options: &RecordOptions,
    dir: &Path,
    ending: &run_loop::Ending,
    start_unix: u64,
    tracefs_line: &str,
) -> Result<(), RecordError> {
    // Let the exiting tasks' last context switches land in the maps.
    std::thread::sleep(Duration::from_millis(30));
    recorder.drain();
    recorder.tick_series()?;
    let end_unix = procfs::unix_ns();
    let end_mono = procfs::monotonic_ns();
    // The workload's own AU (DLIO, mlpstorage), beside the kernel's.
    let since = std::time::UNIX_EPOCH + Duration::from_nanos(start_unix);
    if let Ok(cwd) = std::env::current_dir()
        && let Some(found) = workload_summary::copy_into_session(dir, &options.command, &cwd, since)
    {
        eprintln!(
            "storprof: the workload's {} is in the session as {}",
            found.display(),
            storprof_session::model::files::BENCH_SUMMARY
        );
    }
    session_writer::write_session(
        recorder,
        options,
        dir,
        ending,
        (start_unix, end_unix, end_mono),
        tracefs_line,
    )
}

/// The exit code `storprof record` exits with after `ending`.
fn exit_code(ending: &run_loop::Ending) -> i32 {
    match (ending.exit_code, ending.exit_signal) {
        // An early verdict: storprof stopped the command (or left it
        // running); the recording did what was asked.
        _ if ending.reason == EndReason::Verdict => 0,
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) if ending.reason == EndReason::Interrupted => 130,
        _ => 0,
    }
}

#[cfg(test)]
mod tests;
