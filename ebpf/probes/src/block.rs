//! Block requests: who created each request (`block_io_start`, in the
//! submitter's context), when it was issued and how many bytes it moves
//! (`block_rq_issue`, reading `struct request` at the BTF offsets in
//! `ProbeConfig::block`), and its completion → `BLOCK_EVENTS`.
use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid,
    programs::{RawTracePointContext, TracePointContext},
};
use storprof_common::{
    BlockEvent, BlockInflight, BlockKey, BlockSubmitter, block_op, lost,
    tracepoint_offsets as offsets,
};

use crate::{
    kernel::{field, kernel_read, now_ns},
    maps::{BLOCK_EVENTS, BLOCK_INFLIGHT, BLOCK_SUBMITTER, CONFIG, count_lost},
};

/// `block_io_start`: remembers the request's creator and creation time by
/// (dev, sector).
#[inline(always)]
pub(crate) fn io_start(ctx: &TracePointContext) -> u32 {
    // Runs in the task that created the request (blk_account_io_start
    // from the bio submission path).
    let key = BlockKey {
        dev: field(ctx, offsets::BLOCK_IO_START_DEV),
        _pad: 0,
        sector: field(ctx, offsets::BLOCK_IO_START_SECTOR),
    };
    let submitter = BlockSubmitter {
        tgid: (bpf_get_current_pid_tgid() >> 32) as u32,
        _pad: 0,
        created_ns: now_ns(),
    };
    // An LRU map evicts instead of failing; nothing to count.
    let _ = BLOCK_SUBMITTER.insert(key, submitter, 0);
    0
}

/// `block_rq_issue`: the request goes in flight, attributed to its owner.
#[inline(always)]
pub(crate) fn rq_issue(ctx: &RawTracePointContext) -> u32 {
    // Arguments: (struct request *rq). Fields at `ProbeConfig::block`.
    // Unset until user space has read the layout (`__data_len` is never
    // the first member).
    let Some(layout) = CONFIG.get(0).map(|c| c.block) else {
        return 0;
    };
    if layout.request_data_len == 0 {
        return 0;
    }
    let rq: u64 = ctx.arg(0);
    let queue: u64 = kernel_read(rq, layout.request_queue);
    let disk: u64 = if queue == 0 {
        0
    } else {
        kernel_read(queue, layout.queue_disk)
    };
    let dev = if disk == 0 {
        0
    } else {
        let major: u32 = kernel_read(disk, layout.disk_major);
        let minor: u32 = kernel_read(disk, layout.disk_first_minor);
        (major << 20) | (minor & 0xfffff)
    };
    let cmd_flags: u32 = kernel_read(rq, layout.request_cmd_flags);
    let submitted = BlockKey {
        dev,
        _pad: 0,
        sector: kernel_read(rq, layout.request_sector),
    };
    // Attribution: a re-issued (requeued) request keeps its owner; a new one
    // belongs to the task that created it; the issuing task only when the
    // creation was not seen (no block_io_start, or bio-based device).
    // SAFETY: values are copied out at once.
    let (tgid, created_ns) = match unsafe { BLOCK_INFLIGHT.get(rq) } {
        Some(prev) => (prev.tgid, prev.created_ns),
        // SAFETY: as above.
        None => match unsafe { BLOCK_SUBMITTER.get(submitted) }.copied() {
            Some(submitter) => {
                let _ = BLOCK_SUBMITTER.remove(submitted);
                (submitter.tgid, submitter.created_ns)
            }
            None => ((bpf_get_current_pid_tgid() >> 32) as u32, 0),
        },
    };
    let mut rwbs = [0u8; 8];
    rwbs[0] = block_op::letter(cmd_flags);
    let inflight = BlockInflight {
        issue_ns: now_ns(),
        bytes: kernel_read(rq, layout.request_data_len),
        tgid,
        rwbs,
        dev,
        _pad: 0,
        created_ns,
    };
    if BLOCK_INFLIGHT.insert(rq, inflight, 0).is_err() {
        count_lost(lost::BLOCK_INFLIGHT_FULL);
    }
    0
}

/// `block_rq_complete`: a request seen at issue is done → `BLOCK_EVENTS`.
#[inline(always)]
pub(crate) fn rq_complete(ctx: &RawTracePointContext) -> u32 {
    // Arguments: (struct request *rq, blk_status_t error, unsigned int nr_bytes).
    let rq: u64 = ctx.arg(0);
    // SAFETY: the value is copied out before the entry is removed.
    let Some(inflight) = (unsafe { BLOCK_INFLIGHT.get(rq) }).copied() else {
        return 0;
    };
    let _ = BLOCK_INFLIGHT.remove(rq);
    let status: u64 = ctx.arg(1);
    let event = BlockEvent {
        dev: inflight.dev,
        bytes: inflight.bytes,
        issue_ns: inflight.issue_ns,
        complete_ns: now_ns(),
        tgid: inflight.tgid,
        // A `blk_status_t`: 0 is success.
        error: (status & 0xff) as i32,
        rwbs: inflight.rwbs,
        created_ns: inflight.created_ns,
    };
    if BLOCK_EVENTS.output::<BlockEvent>(&event, 0).is_err() {
        count_lost(lost::BLOCK_RINGBUF_FULL);
    }
    0
}
