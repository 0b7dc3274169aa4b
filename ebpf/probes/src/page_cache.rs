//! Page-cache misses: pages a traced thread adds to the page cache
//! (`mm_filemap_add_to_page_cache`), summed in its `ThreadAcc`.
use aya_ebpf::{helpers::bpf_get_current_pid_tgid, programs::TracePointContext};
use storprof_common::tracepoint_offsets as offsets;

use crate::{
    kernel::field,
    maps::{is_traced, thread_acc},
};

/// `filemap_add_to_page_cache`: a folio of 2^order pages was added.
#[inline(always)]
pub(crate) fn add_to_page_cache(ctx: &TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !is_traced(tgid) {
        return 0;
    }
    let order: u8 = field(ctx, offsets::FILEMAP_ADD_TO_PAGE_CACHE_ORDER);
    if let Some(acc) = thread_acc(tgid, pid_tgid as u32) {
        // SAFETY: map value of the current thread.
        unsafe { (*acc).page_cache_pages += 1u64 << (order & 31) };
    }
    0
}
