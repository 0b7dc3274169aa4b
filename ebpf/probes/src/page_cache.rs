//! Page-cache additions per thread (`mm_filemap_add_to_page_cache`),
//! summed in its `ThreadAcc`: inside a write-family syscall they are new
//! pages of a buffered write, otherwise read misses (read syscalls,
//! readahead, page faults), which storage had to supply.
use aya_ebpf::{helpers::bpf_get_current_pid_tgid, programs::TracePointContext};
use storprof_common::{is_write_family, tracepoint_offsets as offsets};

use crate::{
    kernel::{current_syscall, field},
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
    let pages = 1u64 << (order & 31);
    // One register read per added folio of a traced thread (not per
    // syscall): tells a buffered write's new pages from read misses.
    let in_write = is_write_family(u64::from(current_syscall()));
    if let Some(acc) = thread_acc(tgid, pid_tgid as u32) {
        // SAFETY: map value of the current thread.
        unsafe {
            if in_write {
                (*acc).page_cache_write_pages += pages;
            } else {
                (*acc).page_cache_pages += pages;
            }
        }
    }
    0
}
