//! Each traced process's layout (`/proc/PID/maps` and its perf map), which
//! names its stacks and unwinds its DWARF samples.
//!
//! Data flow: a layout is read through the kernel seam at exec, at fork
//! (unless the child's code is still its parent's) and when a process is
//! first traced; a fresh process (exec'ed or forked in the last two
//! seconds) is looked at again after `FRESH_REREAD`, then at half its age,
//! and read again only when its code footprint moved (a large process's
//! maps cost about a millisecond to read, its footprint a few
//! microseconds); a sample in code the layout does not know has it read
//! again at most every `ON_DEMAND_REREAD`. A layout that changed drops the
//! process's unwinder (unwind tables stay cached per file).
use std::time::{Duration, Instant};

use super::recorder::Recorder;

/// The shortest time between two looks at the layout of a process that
/// exec'ed or forked in the last two seconds (later, half its age).
const FRESH_REREAD: Duration = Duration::from_millis(100);
/// The shortest time between two reads of a process's layout asked for by
/// samples in unknown code.
const ON_DEMAND_REREAD: Duration = Duration::from_millis(20);

impl Recorder {
    /// Reads the layout of `tgid` through the kernel seam for its stacks'
    /// names; false when it is gone (its last layout stays).
    pub(super) fn read_layout(&mut self, tgid: u32) -> bool {
        // Taken before the maps: a mapping made in between shows as a
        // changed footprint at the next look, never as a missed one.
        let footprint = self.probes.code_footprint(tgid);
        let read = self.probes.process_layout(tgid).is_some_and(|layout| {
            self.symbolizer
                .set_layout_text(tgid, &layout.maps, layout.perf_map.as_deref())
        });
        match footprint {
            Some(footprint) if read => {
                self.footprints.insert(tgid, footprint);
            }
            _ => {
                self.footprints.remove(&tgid);
            }
        }
        read
    }

    /// True when the code footprint of `tgid` is the one its layout was
    /// read with (no executable mapping came or went since).
    fn layout_current(&self, tgid: u32) -> bool {
        self.footprints
            .get(&tgid)
            .is_some_and(|known| self.probes.code_footprint(tgid) == Some(*known))
    }

    /// A forked child starts with its parent's layout, read again only when
    /// its code footprint differs from the one that layout was read with
    /// (it mapped or unmapped code since the fork, or the parent had).
    pub(super) fn inherit_layout(&mut self, child: u32, parent: u32) {
        self.symbolizer.inherit(child, parent);
        let inherited = self.symbolizer.layout_id(child).is_some()
            && self.symbolizer.layout_id(child) == self.symbolizer.layout_id(parent);
        match self.footprints.get(&parent).copied() {
            Some(footprint) if inherited => {
                self.footprints.insert(child, footprint);
            }
            _ => {
                self.footprints.remove(&child);
            }
        }
        if !self.layout_current(child) {
            self.read_layout(child);
        }
    }

    /// Looks at the layouts of fresh processes that are due: each one
    /// whose code footprint moved is read again.
    pub(super) fn reread_due_layouts(&mut self) {
        let due: Vec<u32> = self
            .fresh
            .iter()
            .filter(|(tgid, since)| {
                let wait = FRESH_REREAD.max(since.elapsed() / 2);
                self.layout_read
                    .get(tgid)
                    .is_none_or(|t| t.elapsed() >= wait)
            })
            .map(|(&tgid, _)| tgid)
            .collect();
        for tgid in due {
            if self.layout_current(tgid) {
                self.layout_read.insert(tgid, Instant::now());
                continue;
            }
            self.reread_layout(tgid);
            self.detect_python(tgid);
        }
    }

    /// Re-reads the layout of `tgid` and drops its unwinder modules (the
    /// loader may have mapped libraries; unwind tables stay cached per file).
    fn reread_layout(&mut self, tgid: u32) {
        let before = self.symbolizer.layout_id(tgid);
        self.read_layout(tgid);
        self.layout_read.insert(tgid, Instant::now());
        // An unchanged layout keeps its unwinder (rebuilding one costs more
        // than most samples' unwinding).
        if before != self.symbolizer.layout_id(tgid)
            && let Some(unwinder) = self.unwinder.as_mut()
        {
            unwinder.forget(tgid);
        }
    }

    /// Re-reads the layout of `tgid` unless it was read in the last
    /// `ON_DEMAND_REREAD`; looks for an interpreter in what it maps now.
    /// Returns whether it was read. A sample in unknown code reads the maps
    /// whatever the footprint says: code replaced by code of the same size,
    /// or in a writable mapping (a JIT's), leaves the footprint as it was.
    pub(super) fn reread_layout_on_demand(&mut self, tgid: u32) -> bool {
        if self
            .layout_read
            .get(&tgid)
            .is_some_and(|t| t.elapsed() < ON_DEMAND_REREAD)
        {
            return false;
        }
        self.reread_layout(tgid);
        self.detect_python(tgid);
        true
    }
}

#[cfg(test)]
mod tests {
    use std::{rc::Rc, time::Duration};

    use super::*;
    use crate::{
        UnwindMode,
        kernel::{CodeFootprint, ProcessLayout},
        replay::{ReplayKernel, ReplayStep, fork_event},
    };

    const MAPS: &str = "55d0c0000000-55d0c0100000 r-xp 00000000 08:01 1234 /usr/bin/python3\n";

    #[test]
    fn a_layout_is_read_again_only_when_its_code_footprint_moved() {
        // Above any pid_max: no process of the test machine.
        let (main, worker) = (4_194_305, 4_194_306);
        let step = ReplayStep::with_proc_events;
        let fork = fork_event(main, worker, 1);
        let mut kernel = ReplayKernel::new(&[], [step(vec![fork]), step(vec![]), step(vec![])]);
        for pid in [main, worker] {
            let layout = ProcessLayout {
                maps: MAPS.to_string(),
                perf_map: None,
            };
            kernel.host.layouts.insert(pid, layout);
        }
        let code = CodeFootprint {
            exec_kib: 1024,
            perf_map_bytes: None,
        };
        kernel
            .footprints
            .borrow_mut()
            .extend([(main, code), (worker, code)]);
        let (footprints, reads) = (
            Rc::clone(&kernel.footprints),
            Rc::clone(&kernel.layout_reads),
        );
        let mut recorder = Recorder::new(Box::new(kernel), UnwindMode::Fp, None, 0);
        recorder.track(main);
        assert!(recorder.read_layout(main));
        assert_eq!(reads.get(), 1);

        recorder.drain();
        assert_eq!(reads.get(), 1, "the child's code is its parent's");
        assert_eq!(
            recorder.symbolizer.layout_id(worker),
            recorder.symbolizer.layout_id(main)
        );

        // Fresh and due: looked at, not read while its footprint holds.
        let a_second_ago = Instant::now() - Duration::from_secs(1);
        recorder.fresh.insert(worker, a_second_ago);
        recorder.drain();
        assert_eq!(reads.get(), 1);
        assert!(recorder.layout_read[&worker] > a_second_ago);

        // It maps a library: read at its next look.
        footprints.borrow_mut().insert(
            worker,
            CodeFootprint {
                exec_kib: 2048,
                ..code
            },
        );
        recorder.layout_read.insert(worker, a_second_ago);
        recorder.drain();
        assert_eq!(reads.get(), 2);
        assert_eq!(recorder.footprints[&worker].exec_kib, 2048);

        // Without a footprint (a replay, a process gone) every look reads.
        footprints.borrow_mut().clear();
        recorder.layout_read.insert(worker, a_second_ago);
        recorder.inherit_layout(worker + 1, main);
        recorder.drain();
        assert_eq!(reads.get(), 4);
    }
}
