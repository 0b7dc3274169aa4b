//! `--unwind auto`: which traced processes get DWARF stack windows.
//!
//! Data flow: at each exec (and for the recorded command, attached pids and
//! namespace newcomers) the recorder judges the process's main executable
//! with [`storprof_stacks::unwind::frame_pointers::decide`] (cached per path), marks
//! DWARF processes in the kernel (`DWARF_PROCS`, inherited at fork) and
//! notes the choice for session.json; a process whose CPython interpreter
//! is found later is switched to DWARF.
use std::path::PathBuf;

use super::{UnwindMode, recorder::Recorder};
use storprof_session::model::UnwindDecision;
use storprof_stacks::unwind::frame_pointers;

/// How the reason of an inherited decision starts; the pid of the process
/// that decided follows.
const FORKED_FROM: &str = "forked from ";

/// Decisions listed one per process; past them, forked children inherit
/// without an entry of their own, so a workload that forks for hours keeps
/// a bounded list.
pub(super) const LISTED_DECISIONS: usize = 8192;

/// Forks followed up to a listed ancestor (a loop guard).
const MAX_FORK_DEPTH: usize = 64;

impl Recorder {
    /// True under `--unwind auto`.
    pub(super) fn auto_unwind(&self) -> bool {
        self.unwind_mode == UnwindMode::Auto
    }

    /// True when the DWARF samples of `tgid` are expected (stack windows).
    pub(super) fn is_dwarf_process(&self, tgid: u32) -> bool {
        match self.unwind_mode {
            UnwindMode::Dwarf => true,
            UnwindMode::Fp => false,
            UnwindMode::Auto => self.decision_of(tgid).is_some_and(|d| d.mode == "dwarf"),
        }
    }

    /// The unwind decision that applies to `tgid`: its own, or for a forked
    /// child not listed, the nearest listed ancestor's.
    fn decision_of(&self, tgid: u32) -> Option<&UnwindDecision> {
        let mut pid = tgid;
        for _ in 0..MAX_FORK_DEPTH {
            if let Some(decision) = self.unwind_decisions.get(&pid) {
                return Some(decision);
            }
            pid = *self.parents.get(&pid)?;
        }
        None
    }

    /// Decides the mode of `tgid` from its executable (auto mode only).
    pub(super) fn decide_unwind(&mut self, tgid: u32) {
        if !self.auto_unwind() {
            return;
        }
        let Some(exe) = self.probes.exe(tgid) else {
            return;
        };
        let choice = match self.exe_choices.get(&exe) {
            Some(choice) => choice.clone(),
            None => {
                let choice = frame_pointers::decide(&exe);
                self.exe_choices.insert(exe.clone(), choice.clone());
                choice
            }
        };
        self.set_unwind(tgid, exe, choice.dwarf, choice.reason);
    }

    /// A forked child runs its parent's executable: same mode (the kernel
    /// copied the mark already), and the reason of the process that
    /// decided, so a chain of forks does not lengthen it.
    pub(super) fn inherit_unwind(&mut self, child: u32, parent: u32) {
        if self.unwind_decisions.len() >= LISTED_DECISIONS {
            // `decision_of` finds its mode through its parent.
            self.unlisted_inherited_decisions += 1;
            return;
        }
        if let Some(decision) = self.decision_of(parent).cloned() {
            let decided = match decision.reason.strip_prefix(FORKED_FROM) {
                Some(inherited) => inherited.to_string(),
                None => format!("{parent}: {}", decision.reason),
            };
            self.unwind_decisions.insert(
                child,
                UnwindDecision {
                    pid: child,
                    reason: format!("{FORKED_FROM}{decided}"),
                    ..decision
                },
            );
        }
    }

    /// A CPython interpreter was found in `tgid`: its eval loop has no
    /// frame pointers, so it gets DWARF stack windows (auto mode only).
    pub(super) fn python_needs_dwarf(&mut self, tgid: u32, version: &str) {
        if !self.auto_unwind() || self.is_dwarf_process(tgid) {
            return;
        }
        let exe = self.probes.exe(tgid).unwrap_or_default();
        self.set_unwind(
            tgid,
            exe,
            true,
            format!("runs CPython {version} (its eval loop has no frame pointers)"),
        );
    }

    fn set_unwind(&mut self, tgid: u32, exe: PathBuf, dwarf: bool, reason: String) {
        // Frame pointers need no mark: exec cleared the inherited one.
        if dwarf && let Err(err) = self.probes.set_dwarf(tgid) {
            log::warn!("unwind: marking pid {tgid}: {err}");
            return;
        }
        log::debug!(
            "unwind: pid {tgid} ({}) {}: {reason}",
            exe.display(),
            if dwarf { "dwarf" } else { "fp" }
        );
        self.unwind_decisions.insert(
            tgid,
            UnwindDecision {
                pid: tgid,
                exe: exe.display().to_string(),
                mode: if dwarf { "dwarf" } else { "fp" }.to_string(),
                reason,
            },
        );
    }
}
