//! Setting a recording up, step by step: what to record checked, the
//! session directory made, the probes loaded, the attached pids traced
//! and the command launched.
use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use storprof_session::model::SESSION_DIR_ENV;

use super::{RecordError, RecordOptions, UnwindMode, launch, live, recorder::Recorder, select};
use crate::probes::{ProbeOptions, ProbeSet};

/// Checks that there is something to record and that it can be: the
/// command exists, the pids are alive, and `--then stop` may signal them.
/// Returns the command's resolved path, when there is a command.
pub(super) fn check_targets(options: &RecordOptions) -> Result<Option<PathBuf>, RecordError> {
    if options.command.is_empty() && options.pids.is_empty() && options.netns.is_none() {
        return Err(RecordError::NothingToRecord);
    }
    let program = match options.command.first() {
        Some(name) => Some(
            launch::resolve_command(name)
                .ok_or_else(|| RecordError::UnknownCommand(name.clone()))?,
        ),
        None => None,
    };
    for &pid in &options.pids {
        if !launch::alive(pid) {
            return Err(RecordError::NoSuchPid(pid));
        }
    }
    let stops_pids = options.live.until_verdict.is_some()
        && options.command.is_empty()
        && options.live.then == Some(live::ThenAction::Stop);
    if stops_pids {
        for &pid in &options.pids {
            launch::may_signal(pid).map_err(|reason| RecordError::CannotSignal { pid, reason })?;
        }
    }
    Ok(program)
}

/// The session directory, made for the recording.
pub(super) struct OutputDir {
    /// As given.
    pub(super) dir: PathBuf,
    /// Whether it did not exist before.
    pub(super) is_new: bool,
    /// Its absolute path (as given when that cannot be had).
    pub(super) abs: PathBuf,
}

/// Checks the output directory is safe to write and makes it.
pub(super) fn make_output_dir(options: &RecordOptions) -> Result<OutputDir, RecordError> {
    let dir = options.output.clone();
    storprof_session::safe_path::check_output_dir(
        &dir,
        options.force,
        storprof_session::safe_path::invoking_uid(),
    )?;
    let dir_is_new = !dir.exists();
    std::fs::create_dir_all(&dir).map_err(|source| RecordError::Write {
        path: dir.clone(),
        source,
    })?;
    let dir_abs = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
    Ok(OutputDir {
        dir,
        is_new: dir_is_new,
        abs: dir_abs,
    })
}

/// Loads and attaches every probe family for `options`; those that could
/// not attach are said in the log.
pub(super) fn load_probes(options: &RecordOptions) -> Result<ProbeSet, RecordError> {
    // Auto mode copies stack windows too, for the processes it marks.
    let dwarf_mode = options.unwind != UnwindMode::Fp;
    let probe_options = ProbeOptions {
        freq_hz: options.freq_hz,
        syscall_timing: options.syscall_timing,
        stack_bytes: if dwarf_mode {
            options.stack_bytes.max(64)
        } else {
            0
        },
        unwind_per_process: options.unwind == UnwindMode::Auto,
        offcpu_quantum_us: options.offcpu_quantum_us(),
    };
    let mut probes = ProbeSet::load(&probe_options)?;
    probes.attach_all();
    for status in &probes.status {
        if !status.attached {
            log::warn!("probe {} disabled: {}", status.name, status.note);
        }
    }
    Ok(probes)
}

/// Ctrl-C or SIGTERM while the probes loaded: nothing was recorded, the
/// command never started; the directory made for it goes away, and the
/// error says so.
pub(super) fn stop_if_interrupted(out: &OutputDir) -> Result<(), RecordError> {
    let signo = launch::signal_seen();
    if signo != 0 {
        if out.is_new {
            let _ = std::fs::remove_dir(&out.dir);
        }
        return Err(RecordError::Interrupted(signo));
    }
    Ok(())
}

/// Says on stderr what a namespace selection records, when there is one.
pub(super) fn announce_selection(recorder: &Recorder) {
    if let Some(selector) = &recorder.selector {
        eprintln!(
            "storprof: recording host {}: {} processes of {} now, newcomers within {} ms; \
             --duration or Ctrl-C ends it",
            selector.host_name(),
            selector.selected(),
            selector.describe(),
            select::RESCAN_INTERVAL.as_millis()
        );
    }
}

/// Traces the attached `pids` and their existing descendants.
pub(super) fn trace_attached_pids(
    recorder: &mut Recorder,
    pids: &[u32],
) -> Result<(), RecordError> {
    for &pid in pids {
        let mut all = vec![pid];
        all.extend(recorder.probes.descendants(pid));
        for p in all {
            recorder.probes.trace_tgid(p)?;
            recorder.track(p);
            recorder.read_layout(p);
            recorder.decide_unwind(p);
            recorder.detect_python(p);
        }
    }
    Ok(())
}

/// The command at `path`: forked (told the session directory
/// `dir_abs`), registered with the probes, then released to exec and
/// tracked. Returns its pid.
pub(super) fn start_command(
    recorder: &mut Recorder,
    options: &RecordOptions,
    path: &Path,
    dir_abs: &Path,
) -> Result<i32, RecordError> {
    let credentials = if options.as_root {
        None
    } else {
        launch::sudo_credentials()
    };
    let env = [(SESSION_DIR_ENV, dir_abs.as_os_str())];
    let pending = launch::fork_command(
        path,
        &options.command,
        &env,
        credentials,
        options.command_stdout_to_stderr,
    )
    .map_err(|source| RecordError::Spawn {
        command: options.command.join(" "),
        source,
    })?;
    if let Err(err) = recorder.probes.set_root_tgid(pending.pid as u32) {
        pending.abort();
        return Err(err.into());
    }
    let pid = pending.start().map_err(|source| RecordError::Spawn {
        command: options.command.join(" "),
        source,
    })?;
    recorder.track(pid as u32);
    // Its unwinding mode is decided at its EXEC event.
    recorder.read_layout(pid as u32);
    recorder.fresh.insert(pid as u32, Instant::now());
    Ok(pid)
}
