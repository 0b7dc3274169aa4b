//! Samples unwound in user space (DWARF mode): CPU samples counted per
//! unwound chain, blocked syscalls' time per chain, with the frame-pointer
//! keys the same samples had and the depth each walk reached.
use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use storprof_common::{StackKey, UserStackHeader};

use super::python;
use storprof_stacks::unwind::{UnwindEnd, Unwound};

/// On-CPU samples unwound in user space: counts per key whose `user_stack`
/// indexes `chains` (leaf-first instruction pointers, and the Python
/// frames of the sample).
#[derive(Default)]
pub struct DwarfSamples {
    pub chains: Vec<(Vec<u64>, python::PythonFrames)>,
    pub chain_ids: FxHashMap<(Vec<u64>, python::PythonFrames), i32>,
    pub counts: BTreeMap<StackKey, u64>,
    /// The frame-pointer keys of the same samples (`--unwind auto` takes
    /// them out of the frame-pointer counts).
    pub fp_keys: BTreeMap<StackKey, u64>,
    /// (tgid, depth, stopped early) → samples.
    pub depths: BTreeMap<(u32, u32, bool), u64>,
    /// Events added (CPU samples, or blocked syscalls with their merged
    /// intervals counted in `intervals`).
    pub events: u64,
    pub intervals: u64,
}

impl DwarfSamples {
    /// Adds `value` (samples or ns) for one unwound event.
    pub fn add(
        &mut self,
        header: &UserStackHeader,
        unwound: Unwound,
        python: python::PythonFrames,
        value: u64,
    ) {
        let depth = unwound.ips.len() as u32;
        let chain = (unwound.ips, python);
        // Looked up before it is cloned: most samples repeat a chain.
        let id = match self.chain_ids.get(&chain) {
            Some(&id) => id,
            None => {
                let id = self.chains.len() as i32;
                self.chain_ids.insert(chain.clone(), id);
                self.chains.push(chain);
                id
            }
        };
        let fp_key = header.stack_key();
        let key = StackKey {
            user_stack: id,
            ..fp_key
        };
        *self.counts.entry(key).or_insert(0) += value;
        *self.fp_keys.entry(fp_key).or_insert(0) += value;
        *self
            .depths
            .entry((header.tgid, depth, unwound.end == UnwindEnd::Early))
            .or_insert(0) += 1;
        self.events += 1;
        self.intervals += u64::from(header.offcpu_intervals.max(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(tid: u32, user_stack: i32, blocked_ns: u64, intervals: u32) -> UserStackHeader {
        UserStackHeader {
            tgid: 7,
            tid,
            kernel_stack: 3,
            user_stack,
            blocked_ns,
            offcpu_intervals: intervals,
            ..UserStackHeader::default()
        }
    }

    fn unwound(ips: &[u64], end: UnwindEnd) -> Unwound {
        Unwound {
            ips: ips.to_vec(),
            end,
        }
    }

    #[test]
    fn dwarf_samples_sum_values_per_chain_and_keep_frame_pointer_keys() {
        let mut offcpu = DwarfSamples::default();
        // Two blocked syscalls of one thread in the same stack, one merging
        // two intervals; a third in another stack that stopped early.
        offcpu.add(
            &header(8, 11, 2_000_000, 1),
            unwound(&[0x10, 0x20, 0x30], UnwindEnd::Complete),
            Vec::new(),
            2_000_000,
        );
        offcpu.add(
            &header(8, 11, 5_000_000, 2),
            unwound(&[0x10, 0x20, 0x30], UnwindEnd::Complete),
            Vec::new(),
            5_000_000,
        );
        offcpu.add(
            &header(8, 12, 1_000_000, 1),
            unwound(&[0x40], UnwindEnd::Early),
            Vec::new(),
            1_000_000,
        );
        assert_eq!(offcpu.chains.len(), 2);
        let key = |user_stack| StackKey {
            tgid: 7,
            tid: 8,
            user_stack,
            kernel_stack: 3,
        };
        assert_eq!(offcpu.counts.get(&key(0)), Some(&7_000_000));
        assert_eq!(offcpu.counts.get(&key(1)), Some(&1_000_000));
        // The frame-pointer keys the same time was seen under.
        assert_eq!(offcpu.fp_keys.get(&key(11)), Some(&7_000_000));
        assert_eq!(offcpu.fp_keys.get(&key(12)), Some(&1_000_000));
        // Depths count stacks, not time.
        assert_eq!(offcpu.depths.get(&(7, 3, false)), Some(&2));
        assert_eq!(offcpu.depths.get(&(7, 1, true)), Some(&1));
        assert_eq!((offcpu.events, offcpu.intervals), (3, 4));
    }
}
