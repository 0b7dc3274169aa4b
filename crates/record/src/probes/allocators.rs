//! Priming the kernel's allocator of the stack maps, which allocate their
//! entries as stacks arrive (`BPF_F_NO_PREALLOC`): one entry inserted and
//! deleted from user space on each online CPU before the probes attach.
//!
//! Why: such a map gets a per-CPU cache of free entries, filled with a
//! single entry at creation when entries are large (a stored stack is
//! about 1 KiB) and refilled by interrupt work after an allocation. A probe
//! that stores two new stacks in one run with interrupts off (the user and
//! kernel stacks of a switch-out) found the cache empty the second time,
//! and the stack was lost. An allocation made here has the kernel refill
//! that CPU's cache to its working size before any probe runs.
use super::*;

/// A key no probe stores under: stack slots are below `STACK_SLOTS`.
const PRIMING_KEY: u32 = u32::MAX;

impl ProbeSet {
    /// Inserts and deletes one entry of `STACK_FRAMES` and `STACK_OWNERS`
    /// on each online CPU this thread may run on, then gives the thread
    /// back its CPU mask. A CPU it may not run on (a cpuset) is skipped:
    /// its first burst of new stacks may then lose one.
    pub(super) fn prime_stack_allocators(&mut self) -> Result<(), ProbeError> {
        let cpus = aya::util::online_cpus().unwrap_or_default();
        let Some(original) = current_cpu_mask() else {
            return Ok(());
        };
        let frames = StackFrames {
            ips: [0; storprof_common::MAX_STACK_FRAMES],
        };
        for cpu in cpus {
            if !run_on_cpu(cpu as usize) {
                continue;
            }
            let mut stacks: HashMap<&mut MapData, u32, StackFrames> =
                self.hash_mut("STACK_FRAMES")?;
            if stacks.insert(PRIMING_KEY, frames, 0).is_ok() {
                let _ = stacks.remove(&PRIMING_KEY);
            }
            let mut owners: HashMap<&mut MapData, u32, u64> = self.hash_mut("STACK_OWNERS")?;
            if owners.insert(PRIMING_KEY, 0, 0).is_ok() {
                let _ = owners.remove(&PRIMING_KEY);
            }
        }
        set_cpu_mask(&original);
        Ok(())
    }
}

/// The calling thread's CPU mask.
fn current_cpu_mask() -> Option<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is a valid value.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `mask` is a cpu_set_t of the size passed; pid 0 is this thread.
    let got =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut mask) };
    (got == 0).then_some(mask)
}

/// Moves the calling thread to `cpu` alone; false when it may not run there.
fn run_on_cpu(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: as in `current_cpu_mask`.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu, &mut mask) };
    set_cpu_mask(&mask)
}

fn set_cpu_mask(mask: &libc::cpu_set_t) -> bool {
    // SAFETY: `mask` is a cpu_set_t of the size passed; pid 0 is this thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), mask) == 0 }
}
