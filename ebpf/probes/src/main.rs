//! storprof's probes. Placeholder: one tracepoint that counts context switches.
#![no_std]
#![no_main]

use aya_ebpf::{
    macros::{map, tracepoint},
    maps::PerCpuArray,
    programs::TracePointContext,
};

#[map]
static SWITCHES: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[tracepoint]
pub fn sched_switch(_ctx: TracePointContext) -> u32 {
    if let Some(counter) = SWITCHES.get_ptr_mut(0) {
        // SAFETY: per-CPU slot, this program is the only writer on this CPU.
        unsafe { *counter += 1 };
    }
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
