//! The folding step: what the maps and the unwound samples hold at the end
//! of a recording becomes folded stacks, per command name and per thread.
//!
//! Data flow: [`fold_stacks`] takes the CPU and off-CPU counts of the
//! frame-pointer maps, the DWARF-unwound samples, the Python stacks and the
//! unwinding mode ([`FoldInput`]); it folds each source with the frames
//! [`StackFrames`] gives for its keys, takes out of the frame-pointer
//! counts what another source already holds (Python samples, DWARF
//! processes' samples under `--unwind auto`), merges the texts, and splits
//! them into the per-comm and per-thread files. It reads nothing else:
//! symbols come through the trait, so tests give it fixed frames.
use storprof_common::StackKey;

use super::{UnwindMode, aggregate, dwarf_samples::DwarfSamples, kernel::Kernel, python};
use storprof_stacks::symbolize::Symbolizer;

/// Names for the addresses of a stack.
pub trait StackFrames {
    /// Instruction pointers of a stack id of the probes (leaf first).
    fn stack(&self, id: i32) -> Vec<u64>;
    /// Names of a process's user addresses (leaf first).
    fn user_frames(&mut self, tgid: u32, ips: &[u64]) -> Vec<String>;
    /// Names of kernel addresses (leaf first).
    fn kernel_frames(&mut self, ips: &[u64]) -> Vec<String>;
}

/// The recorder's symbolizer over the kernel side's stack map.
pub struct Symbols<'a> {
    pub symbolizer: &'a mut Symbolizer,
    pub kernel: &'a dyn Kernel,
}

impl StackFrames for Symbols<'_> {
    fn stack(&self, id: i32) -> Vec<u64> {
        self.kernel.stack(id)
    }
    fn user_frames(&mut self, tgid: u32, ips: &[u64]) -> Vec<String> {
        self.symbolizer.user_frames(tgid, ips)
    }
    fn kernel_frames(&mut self, ips: &[u64]) -> Vec<String> {
        kernel_frames(self.symbolizer, self.kernel, ips)
    }
}

/// Names of kernel addresses (leaf first): those not named yet are asked
/// of the kernel itself, in one batch, and kallsyms names what it cannot.
pub fn kernel_frames(symbolizer: &mut Symbolizer, kernel: &dyn Kernel, ips: &[u64]) -> Vec<String> {
    let unnamed = symbolizer.unnamed_kernel_addresses(ips);
    if !unnamed.is_empty()
        && let Some(names) = kernel.kernel_symbol_names(&unnamed)
    {
        symbolizer.name_kernel_addresses(unnamed.into_iter().zip(names));
    }
    symbolizer.kernel_frames(ips)
}

/// What is folded.
pub struct FoldInput<'a> {
    pub mode: UnwindMode,
    /// CPU samples of the frame-pointer map (stack ids).
    pub samples: &'a [(StackKey, u64)],
    /// Off-CPU ns of the frame-pointer map (stack ids).
    pub offcpu: &'a [(StackKey, u64)],
    /// DWARF mode: unwound CPU samples, and blocked syscalls' ns.
    pub dwarf: &'a DwarfSamples,
    pub dwarf_offcpu: &'a DwarfSamples,
    /// Python processes' CPU samples (frame pointers plus Python frames),
    /// and DWARF mode's off-CPU intervals with their Python frames.
    pub python_fp: &'a python::PythonStacks,
    pub python_offcpu: &'a python::PythonStacks,
    /// Off-CPU Python samples lost: (map full, ring buffer full).
    pub python_offcpu_lost: (u64, u64),
}

/// Folded stacks and what the unwinding reached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Folded {
    /// Per command name (`comm;frames... count`): samples.
    pub oncpu: String,
    /// Per command name: µs off CPU.
    pub offcpu: String,
    /// Per thread (`comm;[pid/tid];frames... count`).
    pub oncpu_threads: String,
    pub offcpu_threads: String,
    /// (tgid, depth, stopped early (None: frame pointers), samples).
    pub unwind_entries: Vec<(u32, u32, Option<bool>, u64)>,
    /// A note on the off-CPU Python stacks, when there were any.
    pub offcpu_python_note: Option<String>,
}

/// Folds every source of stacks; `comm_of` names a thread.
pub fn fold_stacks(
    input: &FoldInput,
    frames: &mut dyn StackFrames,
    comm_of: &dyn Fn(u32, u32) -> String,
) -> Folded {
    let dwarf_mode = input.mode != UnwindMode::Fp;
    let auto_mode = input.mode == UnwindMode::Auto;
    // Folded per thread first (the comm, then the ids after a mark), split
    // into the per-comm and per-thread files at the end.
    let comm_of_key = |key: &StackKey| {
        format!(
            "{}{}{}/{}",
            comm_of(key.tgid, key.tid),
            aggregate::THREAD_MARK,
            key.tgid,
            key.tid
        )
    };
    let (oncpu, unwind_entries) = if dwarf_mode {
        let dwarf = input.dwarf;
        let samples: Vec<(StackKey, u64)> = dwarf.counts.iter().map(|(k, v)| (*k, *v)).collect();
        let folded = aggregate::fold(&samples, 1, &comm_of_key, &mut |k| {
            key_frames(frames, k, Some(&dwarf.chains))
        });
        let mut entries: Vec<(u32, u32, Option<bool>, u64)> = dwarf
            .depths
            .iter()
            .map(|(&(tgid, depth, early), &n)| (tgid, depth, Some(early), n))
            .collect();
        if auto_mode {
            // The frame-pointer processes' samples: those without a stack
            // window, less the Python ones (folded with their frames below).
            let held: Vec<(StackKey, u64)> = dwarf.fp_keys.iter().map(|(k, v)| (*k, *v)).collect();
            let fp_left = python::subtract(input.samples, &held);
            let fp_only = input.python_fp.subtract_from(&fp_left);
            let fp_folded = aggregate::fold(&fp_only, 1, &comm_of_key, &mut |k| {
                key_frames(frames, k, None)
            });
            entries.extend(
                fp_left
                    .iter()
                    .map(|(k, n)| (k.tgid, frames.stack(k.user_stack).len() as u32, None, *n)),
            );
            (python::merge_folded(&folded, &fp_folded), entries)
        } else {
            (folded, entries)
        }
    } else {
        // Python processes' samples are folded with their Python frames.
        let fp_only = input.python_fp.subtract_from(input.samples);
        let folded = aggregate::fold(&fp_only, 1, &comm_of_key, &mut |k| {
            key_frames(frames, k, None)
        });
        let entries: Vec<(u32, u32, Option<bool>, u64)> = input
            .samples
            .iter()
            .map(|(k, n)| (k.tgid, frames.stack(k.user_stack).len() as u32, None, *n))
            .collect();
        (folded, entries)
    };
    // Off-CPU: frame-pointer stacks, less the intervals folded with their
    // Python frames (DWARF mode, outside syscalls) ...
    let offcpu_fp = input.python_offcpu.subtract_from(input.offcpu);
    let offcpu = aggregate::fold(&offcpu_fp, 1000, &comm_of_key, &mut |k| {
        key_frames(frames, k, None)
    });
    // ... and blocked syscalls of DWARF-unwound processes, with their
    // unwound user stacks (never in the frame-pointer map).
    let dwarf_offcpu = input.dwarf_offcpu;
    let offcpu_dwarf: Vec<(StackKey, u64)> =
        dwarf_offcpu.counts.iter().map(|(k, v)| (*k, *v)).collect();
    let offcpu_dwarf_folded = aggregate::fold(&offcpu_dwarf, 1000, &comm_of_key, &mut |k| {
        key_frames(frames, k, Some(&dwarf_offcpu.chains))
    });
    let offcpu = python::merge_folded(&offcpu, &offcpu_dwarf_folded);
    let oncpu = if dwarf_mode && !auto_mode {
        oncpu
    } else {
        let python = python::fold_python_stacks(input.python_fp, 1, frames, &comm_of_key);
        python::merge_folded(&oncpu, &python)
    };
    let (offcpu_python, offcpu_python_note) = python::fold_python_offcpu(
        input.python_offcpu,
        input.python_offcpu_lost,
        frames,
        &comm_of_key,
    );
    let offcpu = python::merge_folded(&offcpu, &offcpu_python);
    let (oncpu, oncpu_threads) = aggregate::split_thread_folded(&oncpu);
    let (offcpu, offcpu_threads) = aggregate::split_thread_folded(&offcpu);
    Folded {
        oncpu,
        offcpu,
        oncpu_threads,
        offcpu_threads,
        unwind_entries,
        offcpu_python_note,
    }
}

/// The frames of one key, root first: user frames (from the DWARF chain
/// the key indexes, or the frame-pointer stack id) spliced with the
/// chain's Python frames, then kernel frames.
fn key_frames(
    frames: &mut dyn StackFrames,
    key: &StackKey,
    chains: Option<&Vec<(Vec<u64>, python::PythonFrames)>>,
) -> Vec<String> {
    let no_python = python::PythonFrames::new();
    let (user_ips, python_frames) = match chains {
        Some(chains) => usize::try_from(key.user_stack)
            .ok()
            .and_then(|i| chains.get(i))
            .map_or((Vec::new(), &no_python), |(ips, py)| (ips.clone(), py)),
        None => (frames.stack(key.user_stack), &no_python),
    };
    let native = frames.user_frames(key.tgid, &user_ips);
    let mut out: Vec<String> = python::splice_python(native, python_frames)
        .into_iter()
        .rev()
        .collect();
    let kernel = frames.stack(key.kernel_stack);
    out.extend(frames.kernel_frames(&kernel).into_iter().rev());
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use storprof_common::UserStackHeader;
    use storprof_stacks::unwind::{UnwindEnd, Unwound};

    /// Stack ids → ips; a user ip is named `u<hex>`, a kernel one `k<hex>`.
    struct FixedFrames(BTreeMap<i32, Vec<u64>>);

    impl StackFrames for FixedFrames {
        fn stack(&self, id: i32) -> Vec<u64> {
            self.0.get(&id).cloned().unwrap_or_default()
        }
        fn user_frames(&mut self, _tgid: u32, ips: &[u64]) -> Vec<String> {
            ips.iter().map(|ip| format!("u{ip:x}")).collect()
        }
        fn kernel_frames(&mut self, ips: &[u64]) -> Vec<String> {
            ips.iter().map(|ip| format!("k{ip:x}")).collect()
        }
    }

    fn key(tgid: u32, tid: u32, user_stack: i32, kernel_stack: i32) -> StackKey {
        StackKey {
            tgid,
            tid,
            user_stack,
            kernel_stack,
        }
    }

    fn frames() -> FixedFrames {
        // Leaf first, as the kernel's stack map holds them.
        FixedFrames(BTreeMap::from([
            (1, vec![0x11, 0x10]),
            (2, vec![0x21, 0x10]),
            (9, vec![0x91]),
        ]))
    }

    fn comm(tgid: u32, tid: u32) -> String {
        format!("c{tgid}.{tid}")
    }

    fn empty<'a>(
        mode: UnwindMode,
        samples: &'a [(StackKey, u64)],
        offcpu: &'a [(StackKey, u64)],
        dwarf: &'a DwarfSamples,
        python: &'a python::PythonStacks,
    ) -> FoldInput<'a> {
        FoldInput {
            mode,
            samples,
            offcpu,
            dwarf,
            dwarf_offcpu: dwarf,
            python_fp: python,
            python_offcpu: python,
            python_offcpu_lost: (0, 0),
        }
    }

    #[test]
    fn frame_pointer_stacks_fold_per_comm_and_per_thread_root_first() {
        let samples = [
            (key(5, 5, 1, 9), 3),
            (key(5, 6, 2, -1), 2),
            (key(5, 7, 1, 9), 1),
        ];
        let offcpu = [(key(5, 6, 2, 9), 4_000)];
        let dwarf = DwarfSamples::default();
        let python = python::PythonStacks::default();
        let input = empty(UnwindMode::Fp, &samples, &offcpu, &dwarf, &python);
        let folded = fold_stacks(&input, &mut frames(), &comm);
        assert_eq!(
            folded.oncpu,
            "c5.5;u10;u11;k91 3\nc5.6;u10;u21 2\nc5.7;u10;u11;k91 1\n"
        );
        assert_eq!(
            folded.oncpu_threads,
            "c5.5;[5/5];u10;u11;k91 3\nc5.6;[5/6];u10;u21 2\nc5.7;[5/7];u10;u11;k91 1\n"
        );
        // Off-CPU ns become µs.
        assert_eq!(folded.offcpu, "c5.6;u10;u21;k91 4\n");
        // Frame-pointer depths per sample key.
        assert_eq!(
            folded.unwind_entries,
            vec![(5, 2, None, 3), (5, 2, None, 2), (5, 2, None, 1)]
        );
        assert_eq!(folded.offcpu_python_note, None);
    }

    #[test]
    fn auto_mode_takes_dwarf_processes_samples_out_of_the_frame_pointer_counts() {
        // Process 5 is DWARF-unwound: its 3 samples arrive twice, in the
        // frame-pointer map (stack id 1) and as an unwound chain. Process 8
        // keeps frame pointers.
        let samples = [(key(5, 5, 1, -1), 3), (key(8, 8, 2, -1), 2)];
        let mut dwarf = DwarfSamples::default();
        let header = UserStackHeader {
            tgid: 5,
            tid: 5,
            user_stack: 1,
            kernel_stack: -1,
            ..UserStackHeader::default()
        };
        for _ in 0..3 {
            dwarf.add(
                &header,
                Unwound {
                    ips: vec![0x31, 0x30, 0x10],
                    end: UnwindEnd::Complete,
                },
                Vec::new(),
                1,
            );
        }
        let python = python::PythonStacks::default();
        let input = empty(UnwindMode::Auto, &samples, &[], &dwarf, &python);
        let folded = fold_stacks(&input, &mut frames(), &comm);
        assert_eq!(folded.oncpu, "c5.5;u10;u30;u31 3\nc8.8;u10;u21 2\n");
        assert_eq!(
            folded.unwind_entries,
            vec![(5, 3, Some(false), 3), (8, 2, None, 2)]
        );
    }

    #[test]
    fn dwarf_mode_folds_blocked_syscalls_with_their_unwound_stacks() {
        let mut dwarf_offcpu = DwarfSamples::default();
        let header = UserStackHeader {
            tgid: 5,
            tid: 6,
            user_stack: 2,
            kernel_stack: 9,
            blocked_ns: 7_000_000,
            ..UserStackHeader::default()
        };
        dwarf_offcpu.add(
            &header,
            Unwound {
                ips: vec![0x41, 0x40],
                end: UnwindEnd::Early,
            },
            Vec::new(),
            7_000_000,
        );
        let dwarf = DwarfSamples::default();
        let python = python::PythonStacks::default();
        let mut input = empty(UnwindMode::Dwarf, &[], &[], &dwarf, &python);
        input.dwarf_offcpu = &dwarf_offcpu;
        let folded = fold_stacks(&input, &mut frames(), &comm);
        assert_eq!(folded.oncpu, "");
        assert_eq!(folded.offcpu, "c5.6;u40;u41;k91 7000\n");
        assert_eq!(folded.offcpu_threads, "c5.6;[5/6];u40;u41;k91 7000\n");
    }
}
