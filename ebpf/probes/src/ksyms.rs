//! Kernel symbol names on demand: `kernel_symbols` is never attached; user
//! space runs it (BPF_PROG_TEST_RUN) over the addresses in `KSYM_REQUEST`
//! and reads the kernel's own `%ps` of each from `KSYM_NAMES`. Naming a
//! recording's few hundred kernel frames so costs a lookup each, where
//! reading `/proc/kallsyms` has the kernel print all of its symbols.
use aya_ebpf::{
    cty::{c_char, c_void},
    helpers::generated::bpf_snprintf,
};
use storprof_common::{KSYM_BATCH, KSYM_NAME_BYTES, KsymNames, KsymRequest};

use crate::{
    kernel::bounded_loop,
    maps::{KSYM_NAMES, KSYM_REQUEST},
};

/// The format of a name: the symbol alone, no offset (a read-only global:
/// `bpf_snprintf` takes its format from a frozen map only).
static SYMBOL_FORMAT: [u8; 4] = *b"%ps\0";

/// Names the requested addresses.
#[inline(always)]
pub(crate) fn name_requested() -> u32 {
    let (Some(request), Some(names)) = (KSYM_REQUEST.get_ptr(0), KSYM_NAMES.get_ptr_mut(0)) else {
        return 0;
    };
    // SAFETY: the map value holds a KsymRequest.
    let count = unsafe { (*request).count }.min(KSYM_BATCH as u32);
    bounded_loop(count, name_address, &mut KsymBatch { request, names });
    0
}

/// The map values a run reads and writes.
#[repr(C)]
struct KsymBatch {
    request: *const KsymRequest,
    names: *mut KsymNames,
}

/// `bpf_loop` callback: writes the name of address `index`.
extern "C" fn name_address(index: u64, ctx: *mut c_void) -> i64 {
    let batch = ctx.cast::<KsymBatch>();
    let i = index as usize;
    if i >= KSYM_BATCH {
        return 1;
    }
    // SAFETY: `ctx` is the caller's `KsymBatch` of two map values, `i` is
    // in bounds of both; `bpf_snprintf` writes at most `KSYM_NAME_BYTES`
    // into the name and reads one u64 argument.
    unsafe {
        let address = &raw const (*(*batch).request).addrs[i];
        let name = &raw mut (*(*batch).names).names[i];
        bpf_snprintf(
            name.cast::<c_char>(),
            KSYM_NAME_BYTES as u32,
            SYMBOL_FORMAT.as_ptr().cast::<c_char>(),
            address.cast_mut(),
            8,
        );
    }
    0
}
