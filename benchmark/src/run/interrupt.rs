//! Ctrl-C and `kill`: SIGINT/SIGTERM ask the run to stop at the next step
//! boundary instead of killing it, so the results directory still gets
//! `summary.json` and the `[METRIC]` block over the steps that completed.
//!
//! ```text
//!  signal ──► handler (async-signal-safe: two atomic stores) ──► STOP, SIGNAL
//!  rank 0..N, after each step: collective.barrier_agree(STOP) ─► all ranks stop at the same step
//! ```
//! The handlers are one-shot (`SA_RESETHAND`): a second Ctrl-C kills the
//! process the usual way, for a user who does not want to wait for the step.
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::error::BenchError;

/// Set by the handler; the engine's stop flag in `storprof bench`.
pub static STOP: AtomicBool = AtomicBool::new(false);
/// The signal that set [`STOP`] (0 = none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
}

/// Install the SIGINT and SIGTERM handlers.
pub fn install() -> Result<(), BenchError> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value;
        // the handler only stores to atomics (async-signal-safe), and the
        // pointers passed to sigemptyset/sigaction live for the calls.
        let rc = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            act.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(BenchError::System(format!(
                "cannot install the handler for signal {sig}: {}",
                std::io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

/// The signal received since [`install`], if any.
pub fn received() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// "SIGINT", "SIGTERM", or "signal N".
pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        s => format!("signal {s}"),
    }
}

/// The shell's exit status for a run ended by `sig` (128 + signal number).
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}
