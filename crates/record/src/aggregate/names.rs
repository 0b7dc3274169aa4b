//! Names for what the kernel hands over as numbers and bytes: syscall
//! numbers, `comm` arrays, waker kinds and off-CPU states.

use storprof_common::{offcpu_state, waker_kind};

/// Name of an x86_64 syscall number (`sys_<nr>` when not in the table).
pub fn syscall_name(nr: u32) -> String {
    const NAMES: &[(u32, &str)] = &[
        (0, "read"),
        (1, "write"),
        (2, "open"),
        (3, "close"),
        (4, "stat"),
        (5, "fstat"),
        (6, "lstat"),
        (7, "poll"),
        (8, "lseek"),
        (9, "mmap"),
        (10, "mprotect"),
        (11, "munmap"),
        (12, "brk"),
        (13, "rt_sigaction"),
        (14, "rt_sigprocmask"),
        (15, "rt_sigreturn"),
        (16, "ioctl"),
        (17, "pread64"),
        (18, "pwrite64"),
        (19, "readv"),
        (20, "writev"),
        (21, "access"),
        (22, "pipe"),
        (23, "select"),
        (24, "sched_yield"),
        (25, "mremap"),
        (26, "msync"),
        (28, "madvise"),
        (32, "dup"),
        (33, "dup2"),
        (35, "nanosleep"),
        (39, "getpid"),
        (40, "sendfile"),
        (41, "socket"),
        (42, "connect"),
        (43, "accept"),
        (44, "sendto"),
        (45, "recvfrom"),
        (46, "sendmsg"),
        (47, "recvmsg"),
        (56, "clone"),
        (57, "fork"),
        (58, "vfork"),
        (59, "execve"),
        (60, "exit"),
        (61, "wait4"),
        (62, "kill"),
        (63, "uname"),
        (72, "fcntl"),
        (74, "fsync"),
        (75, "fdatasync"),
        (77, "ftruncate"),
        (78, "getdents"),
        (79, "getcwd"),
        (80, "chdir"),
        (82, "rename"),
        (83, "mkdir"),
        (87, "unlink"),
        (89, "readlink"),
        (96, "gettimeofday"),
        (102, "getuid"),
        (104, "getgid"),
        (110, "getppid"),
        (157, "prctl"),
        (158, "arch_prctl"),
        (186, "gettid"),
        (202, "futex"),
        (217, "getdents64"),
        (218, "set_tid_address"),
        (221, "fadvise64"),
        (228, "clock_gettime"),
        (230, "clock_nanosleep"),
        (231, "exit_group"),
        (232, "epoll_wait"),
        (233, "epoll_ctl"),
        (257, "openat"),
        (262, "newfstatat"),
        (270, "pselect6"),
        (271, "ppoll"),
        (273, "set_robust_list"),
        (281, "epoll_pwait"),
        (284, "eventfd"),
        (290, "eventfd2"),
        (291, "epoll_create1"),
        (293, "pipe2"),
        (295, "preadv"),
        (296, "pwritev"),
        (302, "prlimit64"),
        (318, "getrandom"),
        (319, "memfd_create"),
        (326, "copy_file_range"),
        (327, "preadv2"),
        (328, "pwritev2"),
        (332, "statx"),
        (334, "rseq"),
        (425, "io_uring_setup"),
        (426, "io_uring_enter"),
        (435, "clone3"),
        (437, "openat2"),
        (439, "faccessat2"),
    ];
    match NAMES.binary_search_by_key(&nr, |&(n, _)| n) {
        Ok(i) => NAMES[i].1.to_string(),
        Err(_) => format!("sys_{nr}"),
    }
}

/// `comm` bytes → string.
pub fn comm_string(comm: &[u8]) -> String {
    let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end]).into_owned()
}

pub(super) fn trim_histogram(hist: &[u64]) -> Vec<u64> {
    let len = hist.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    hist[..len].to_vec()
}

/// Name of a `waker_kind`.
pub fn waker_kind_name(kind: u8) -> &'static str {
    match kind {
        waker_kind::TASK => "task",
        waker_kind::HARDIRQ => "hardirq",
        waker_kind::SOFTIRQ => "softirq",
        waker_kind::TIMER => "timer",
        waker_kind::IDLE => "idle",
        _ => "unknown",
    }
}

/// Name of an `offcpu_state` index.
pub fn offcpu_state_name(state: u8) -> &'static str {
    match state as usize {
        offcpu_state::RUNNABLE => "runnable",
        offcpu_state::SLEEPING => "sleeping",
        offcpu_state::UNINTERRUPTIBLE => "uninterruptible",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{Direction, direction};

    #[test]
    fn names_and_directions() {
        assert_eq!(syscall_name(17), "pread64");
        assert_eq!(syscall_name(439), "faccessat2");
        assert_eq!(syscall_name(9999), "sys_9999");
        assert_eq!(direction(b"FWS\0\0\0\0\0"), Direction::Write);
        assert_eq!(direction(b"RM\0\0\0\0\0\0"), Direction::Read);
        assert_eq!(direction(b"D\0\0\0\0\0\0\0"), Direction::Other);
    }
}
