//! What ended each wait: a wake-up edge's kind, read from who woke the
//! thread (a traced task, an untraced one, an interrupt, a timer), the
//! waker's kernel stack (a block completion, a network receive, an
//! hrtimer) and the syscall the thread waited in.
//!
//! The stack is read first: an interrupt's kind from the probes says which
//! handler ran, but a network receive processed in the softirq run at the
//! exit of a timer interrupt is a network wake-up, not a timer, and
//! sessions recorded before the probes credited the innermost handler
//! (a skipped exit program could leave a handler's depth raised) carry
//! task wake-ups labelled as interrupts.
use storprof_session::model::WakeEdge;

use super::ThreadId;

/// What ended one wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EdgeKind {
    /// A traced thread handed something over (a queue, a pipe, a future).
    Handoff,
    /// A traced thread released a lock both contend for (`futex_shared`).
    Lock,
    /// A block I/O completion (an interrupt or a kworker completing a bio,
    /// io_uring and AIO completions included).
    Storage,
    /// A network receive (softirq, ksoftirqd, or the sender's own context).
    Network,
    /// A timer: a timed sleep's end, or a timeout.
    Timer,
    /// A task that is not traced (a server, a daemon, a kernel thread).
    OtherProcess,
    /// An interrupt that is none of the above.
    Interrupt,
}

impl EdgeKind {
    /// Whether the wait was for the outside world: data from storage or
    /// the network.
    pub fn is_input(self) -> bool {
        matches!(self, Self::Storage | Self::Network)
    }
}

/// Syscalls a thread waits in for a socket (or any file) to have data.
const RECEIVE_SYSCALLS: &[&str] = &[
    "recvfrom",
    "recvmsg",
    "recvmmsg",
    "poll",
    "ppoll",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "select",
    "pselect6",
    "read",
    "readv",
];

/// Kernel frames of a waker stack that mean a network receive.
pub const NET_FRAMES: &[&str] = &[
    "net_rx_action",
    "tcp_",
    "udp_",
    "napi_",
    "ip_rcv",
    "ip_local_deliver",
    "sock_def_readable",
    "__netif_receive_skb",
];
/// Kernel frames of a waker stack that mean a block completion (the
/// completion path, not the submission: a kworker dispatching throttled
/// bios wakes nobody).
pub const BLOCK_FRAMES: &[&str] = &[
    "blk_mq_complete_request",
    "blk_mq_end_request",
    "blk_update_request",
    "blk_done_softirq",
    "blk_complete_reqs",
    "bio_endio",
    "virtblk_done",
    "nvme_",
    "scsi_io_completion",
    "iomap_dio_bio_end_io",
    "blkdev_bio_end_io",
    "aio_complete",
    FUSE_REPLY_FRAME,
];
/// A FUSE daemon's reply ending a request (a read, an open) of a file
/// system served from user space (s3fs, gcsfuse, Mountpoint for S3,
/// virtiofs): storage to the reader, whichever process answered.
const FUSE_REPLY_FRAME: &str = "fuse_request_end";

/// Whether a FUSE daemon's reply ended `e`'s waits.
pub fn is_fuse_reply(e: &WakeEdge) -> bool {
    stack_has(e, &[FUSE_REPLY_FRAME])
}
/// Kernel frames of a waker stack that mean a timer expired.
const TIMER_FRAMES: &[&str] = &["hrtimer_wakeup", "process_timeout", "pollwake_timeout"];
/// The outermost kernel frames of a task in process context: a waker
/// stack that starts here was a task, whatever kind the edge says.
const TASK_CONTEXT_FRAMES: &[&str] = &["entry_SYSCALL_64", "ret_from_fork"];

/// Whether the waker's kernel frames hold one of `frames` (user frames of
/// a task waker can have any name).
fn stack_has(edge: &WakeEdge, frames: &[&str]) -> bool {
    edge.waker_stack
        .iter()
        .filter_map(|f| f.strip_suffix("_[k]"))
        .any(|f| frames.iter().any(|p| f.contains(p)))
}

/// The first kernel frame of the waker's stack (its outermost).
fn outermost_kernel_frame(edge: &WakeEdge) -> Option<&str> {
    edge.waker_stack
        .iter()
        .find(|f| f.ends_with("_[k]"))
        .map(String::as_str)
}

/// The traced thread that woke `e`'s wakee, when a traced task did.
pub fn waker_id(e: &WakeEdge) -> Option<ThreadId> {
    (e.waker_kind == "task" && e.waker_traced).then_some((e.waker_pid, e.waker_tid))
}

/// What ended the waits of `e`.
pub fn classify(e: &WakeEdge) -> EdgeKind {
    if waker_id(e).is_some() {
        return if e.futex_shared {
            EdgeKind::Lock
        } else {
            EdgeKind::Handoff
        };
    }
    // A completion's own frames say what it completed, whoever ran it.
    if stack_has(e, NET_FRAMES) {
        return EdgeKind::Network;
    }
    if stack_has(e, BLOCK_FRAMES) {
        return EdgeKind::Storage;
    }
    if e.waker_kind == "task" {
        return EdgeKind::OtherProcess;
    }
    if stack_has(e, TIMER_FRAMES) {
        return EdgeKind::Timer;
    }
    // An interrupt kind over a process-context stack: a task's wake-up
    // that an older probe credited to a handler; its waker is unknown.
    if outermost_kernel_frame(e).is_some_and(|f| TASK_CONTEXT_FRAMES.iter().any(|p| f.contains(p)))
    {
        return EdgeKind::OtherProcess;
    }
    match e.waker_kind.as_str() {
        "timer" => EdgeKind::Timer,
        _ if e.wakee_state == "uninterruptible" => EdgeKind::Storage,
        _ if e
            .syscall
            .as_deref()
            .is_some_and(|s| RECEIVE_SYSCALLS.contains(&s) && s.starts_with("recv")) =>
        {
            EdgeKind::Network
        }
        _ => EdgeKind::Interrupt,
    }
}

/// A timed sleep ended by its timer (nanosleep family): a thread's
/// emulated compute, or a poll interval.
pub fn is_timer_sleep(e: &WakeEdge) -> bool {
    e.waker_kind == "timer"
        && matches!(
            e.syscall.as_deref(),
            Some("nanosleep" | "clock_nanosleep") | None
        )
        && classify(e) == EdgeKind::Timer
}

/// A timeout of a wait that was not a sleep (a futex, poll or select with
/// a timeout): the thread waited for something and gave up for a while,
/// as a queue `get(timeout=...)` or the GIL's timed wait does.
pub fn is_timeout(e: &WakeEdge) -> bool {
    classify(e) == EdgeKind::Timer && !is_timer_sleep(e) && e.syscall.is_some()
}

/// A wait of a thread to receive something: a read, a receive, a poll or
/// a futex (a queue's condition variable), an io_uring or AIO completion.
/// Not one to hand work over (a full pipe to a worker), nor to start or
/// reap one (vfork, wait4).
pub fn is_receive_wait(e: &WakeEdge) -> bool {
    matches!(
        e.syscall.as_deref(),
        Some(
            "pread64"
                | "preadv"
                | "preadv2"
                | "futex"
                | "io_getevents"
                | "io_pgetevents"
                | "io_uring_enter"
        )
    ) || e
        .syscall
        .as_deref()
        .is_some_and(|s| RECEIVE_SYSCALLS.contains(&s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(kind: &str, stack: &[&str], syscall: &str, state: &str) -> WakeEdge {
        WakeEdge {
            waker_kind: kind.into(),
            waker_stack: stack.iter().map(|s| format!("{s}_[k]")).collect(),
            syscall: Some(syscall.into()),
            wakee_state: state.into(),
            ..WakeEdge::default()
        }
    }

    #[test]
    fn completions_are_known_by_their_frames_whatever_the_handler() {
        // io_uring's completion of an O_DIRECT read, in the block softirq.
        let uring = edge(
            "softirq",
            &[
                "handle_softirqs",
                "blk_done_softirq",
                "iomap_dio_bio_end_io",
                "__io_req_task_work_add",
                "try_to_wake_up",
            ],
            "io_uring_enter",
            "sleeping",
        );
        assert_eq!(classify(&uring), EdgeKind::Storage);
        // A TCP receive run in the softirq at the exit of a timer
        // interrupt, which an older probe called a timer.
        let net = edge(
            "timer",
            &[
                "asm_sysvec_apic_timer_interrupt",
                "__irq_exit_rcu",
                "handle_softirqs",
                "net_rx_action",
                "tcp_v4_rcv",
                "sock_def_readable",
                "pollwake",
            ],
            "poll",
            "sleeping",
        );
        assert_eq!(classify(&net), EdgeKind::Network);
        let sleep = edge(
            "timer",
            &["hrtimer_interrupt", "hrtimer_wakeup", "try_to_wake_up"],
            "clock_nanosleep",
            "sleeping",
        );
        assert_eq!(classify(&sleep), EdgeKind::Timer);
        assert!(is_timer_sleep(&sleep));
        let timeout = edge(
            "timer",
            &["hrtimer_interrupt", "hrtimer_wakeup"],
            "futex",
            "sleeping",
        );
        assert!(is_timeout(&timeout) && !is_timer_sleep(&timeout));
    }

    #[test]
    fn a_task_wake_up_labelled_as_an_interrupt_is_no_timer() {
        let futex_wake = edge(
            "timer",
            &[
                "entry_SYSCALL_64_after_hwframe",
                "do_syscall_64",
                "__x64_sys_futex",
                "futex_wake",
                "wake_up_q",
                "try_to_wake_up",
            ],
            "futex",
            "sleeping",
        );
        assert_eq!(classify(&futex_wake), EdgeKind::OtherProcess);
        assert!(!is_timer_sleep(&futex_wake));
    }

    #[test]
    fn traced_tasks_hand_off_or_release_locks() {
        let mut e = edge("task", &[], "futex", "sleeping");
        e.waker_traced = true;
        assert_eq!(classify(&e), EdgeKind::Handoff);
        e.futex_shared = true;
        assert_eq!(classify(&e), EdgeKind::Lock);
        e.waker_traced = false;
        assert_eq!(classify(&e), EdgeKind::OtherProcess);
        // Without a stack, an interrupt ending a D-state wait is I/O.
        let d = edge("hardirq", &[], "read", "uninterruptible");
        assert_eq!(classify(&d), EdgeKind::Storage);
    }

    #[test]
    fn a_fuse_daemons_reply_is_storage_whoever_sent_it() {
        // The daemon writes its reply to /dev/fuse: an untraced task that
        // would otherwise be some other process.
        let reply = edge(
            "task",
            &[
                "entry_SYSCALL_64_after_hwframe",
                "ksys_write",
                "vfs_write",
                "fuse_dev_write",
                "fuse_dev_do_write",
                "fuse_request_end",
                "__wake_up",
                "try_to_wake_up",
            ],
            "read",
            "sleeping",
        );
        assert_eq!(classify(&reply), EdgeKind::Storage);
        assert!(is_fuse_reply(&reply));
        let other = edge(
            "task",
            &[
                "entry_SYSCALL_64_after_hwframe",
                "anon_pipe_write",
                "try_to_wake_up",
            ],
            "read",
            "sleeping",
        );
        assert_eq!(classify(&other), EdgeKind::OtherProcess);
        assert!(!is_fuse_reply(&other));
    }
}
