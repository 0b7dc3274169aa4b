//! Starting the recorded command without losing its first events, and
//! signal handling.
//!
//! `std::process::Command` waits for the exec, so the child is forked by
//! hand: it blocks on a pipe until the parent has attached the probes and
//! registered its pid, then drops privileges to SUDO_UID/SUDO_GID and execs
//! with the caller's environment (plus `STORPROF_SESSION_DIR`), working
//! directory and standard streams. Exec failures come back over a
//! close-on-exec pipe.
use std::{
    ffi::{CString, OsStr, OsString},
    os::unix::ffi::{OsStrExt, OsStringExt},
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, AtomicI32, Ordering},
};

/// Finds `program` like execvp would; None when it is not an executable file.
pub fn resolve_command(program: &str) -> Option<PathBuf> {
    let is_exec = |p: &Path| {
        let Ok(c) = CString::new(p.as_os_str().as_bytes()) else {
            return false;
        };
        // SAFETY: `c` is a valid NUL-terminated path.
        p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return is_exec(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| is_exec(p))
}

/// User and group the command runs as (None: keep root).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
}

/// SUDO_UID/SUDO_GID when running through sudo.
pub fn sudo_credentials() -> Option<Credentials> {
    let uid = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    let gid = std::env::var("SUDO_GID").ok()?.parse().ok()?;
    Some(Credentials { uid, gid })
}

/// A forked child waiting for the go signal.
pub struct PendingChild {
    pub pid: i32,
    go_write: i32,
    error_read: i32,
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| std::io::Error::other("argument contains a NUL byte"))
}

/// Forks a child that will exec `path` with `argv` once [`PendingChild::start`] is called;
/// with `stdout_to_stderr` its standard output is storprof's standard error.
pub fn fork_command(
    path: &Path,
    argv: &[String],
    extra_env: &[(&str, &OsStr)],
    credentials: Option<Credentials>,
    stdout_to_stderr: bool,
) -> std::io::Result<PendingChild> {
    let c_path = cstring(path.as_os_str().as_bytes())?;
    let c_argv: Vec<CString> = argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let mut c_env: Vec<CString> = Vec::new();
    for (key, value) in std::env::vars_os() {
        if extra_env.iter().any(|(k, _)| OsStr::new(k) == key) {
            continue;
        }
        let mut kv = key.into_vec();
        kv.push(b'=');
        kv.extend_from_slice(value.as_bytes());
        c_env.push(cstring(&kv)?);
    }
    for (key, value) in extra_env {
        let mut kv = key.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(value.as_bytes());
        c_env.push(cstring(&kv)?);
    }
    let mut argv_ptrs: Vec<*const libc::c_char> = c_argv.iter().map(|c| c.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut env_ptrs: Vec<*const libc::c_char> = c_env.iter().map(|c| c.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());

    let mut go = [0i32; 2];
    let mut err = [0i32; 2];
    // SAFETY: valid out arrays of two fds each.
    let go_rc = unsafe { libc::pipe2(go.as_mut_ptr(), libc::O_CLOEXEC) };
    // SAFETY: as above.
    let err_rc = unsafe { libc::pipe2(err.as_mut_ptr(), libc::O_CLOEXEC) };
    if go_rc != 0 || err_rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a zeroed sigset_t is a valid value for sigemptyset to fill.
    let empty_mask = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        set
    };
    // SAFETY: fork in a process whose other threads (if any) hold no locks the
    // child needs: the child only calls async-signal-safe functions below.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // Child. Only async-signal-safe calls from here to exec.
        // SAFETY: plain syscalls on fds and buffers owned by this process;
        // the argv/env pointer arrays were built before the fork.
        unsafe {
            libc::close(go[1]);
            libc::close(err[0]);
            let mut byte = 0u8;
            let n = libc::read(go[0], (&raw mut byte).cast(), 1);
            if n != 1 {
                libc::_exit(127);
            }
            let fail = |fd: i32| -> ! {
                let errno = *libc::__errno_location();
                let bytes = errno.to_ne_bytes();
                libc::write(fd, bytes.as_ptr().cast(), bytes.len());
                libc::_exit(127)
            };
            // The command starts with the signal state it would have
            // without storprof: Rust's runtime ignores SIGPIPE (an ignored
            // signal stays ignored across exec; a pipeline in the command
            // would see EPIPE errors instead of ending), and no signal is
            // blocked.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::sigprocmask(libc::SIG_SETMASK, &empty_mask, std::ptr::null_mut());
            if stdout_to_stderr && libc::dup2(2, 1) < 0 {
                fail(err[1]);
            }
            if let Some(c) = credentials {
                let groups = [c.gid];
                if libc::setgroups(1, groups.as_ptr()) != 0
                    || libc::setgid(c.gid) != 0
                    || libc::setuid(c.uid) != 0
                {
                    fail(err[1]);
                }
            }
            libc::execve(c_path.as_ptr(), argv_ptrs.as_ptr(), env_ptrs.as_ptr());
            fail(err[1]);
        }
    }
    // SAFETY: closing the child's ends in the parent.
    unsafe {
        libc::close(go[0]);
        libc::close(err[1]);
    }
    Ok(PendingChild {
        pid,
        go_write: go[1],
        error_read: err[0],
    })
}

impl PendingChild {
    /// Lets the child exec; returns the exec error, if any (the child has then exited).
    pub fn start(self) -> Result<i32, std::io::Error> {
        let byte = 1u8;
        // SAFETY: writing one byte from a valid buffer to our pipe end.
        unsafe { libc::write(self.go_write, (&raw const byte).cast(), 1) };
        let mut buf = [0u8; 4];
        // SAFETY: reading into a valid 4-byte buffer; EOF means exec succeeded
        // (the close-on-exec write end closed).
        let n = unsafe { libc::read(self.error_read, buf.as_mut_ptr().cast(), 4) };
        // SAFETY: closing our pipe ends.
        unsafe {
            libc::close(self.go_write);
            libc::close(self.error_read);
        }
        if n == 4 {
            let mut status = 0;
            // SAFETY: reaping our own child.
            unsafe { libc::waitpid(self.pid, &mut status, 0) };
            return Err(std::io::Error::from_raw_os_error(i32::from_ne_bytes(buf)));
        }
        Ok(self.pid)
    }

    /// Kills the waiting child (recording could not start).
    pub fn abort(self) {
        // SAFETY: closing our pipe ends makes the child's read return 0 and exit;
        // then we reap it.
        unsafe {
            libc::close(self.go_write);
            libc::close(self.error_read);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}

static SIGNAL: AtomicI32 = AtomicI32::new(0);
static SIGNAL_FROM_KILL: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signo: i32, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    SIGNAL.store(signo, Ordering::SeqCst);
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let code = unsafe { info.as_ref().map_or(0, |i| i.si_code) };
    // A terminal's Ctrl-C reaches the whole foreground group (si_code
    // SI_KERNEL); `kill` (si_code <= 0) reached only us and must be forwarded.
    SIGNAL_FROM_KILL.store(code <= 0, Ordering::SeqCst);
}

/// Installs SIGINT/SIGTERM handlers that only record the signal.
pub fn install_signal_handlers() {
    for signo in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a valid SA_SIGINFO handler that only
        // touches atomics (async-signal-safe).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signo, &action, std::ptr::null_mut());
        }
    }
}

/// The signal received so far (0: none), left pending for the run loop.
pub fn signal_seen() -> i32 {
    SIGNAL.load(Ordering::SeqCst)
}

/// The signal received (0: none) and whether it must be forwarded.
pub fn pending_signal() -> (i32, bool) {
    (
        SIGNAL.swap(0, Ordering::SeqCst),
        SIGNAL_FROM_KILL.load(Ordering::SeqCst),
    )
}

/// Non-blocking wait: Some((exit code, signal)) once the child has exited.
pub fn try_wait(pid: i32) -> Option<(Option<i32>, Option<i32>)> {
    let mut status = 0;
    // SAFETY: waiting on our own child with a valid status pointer.
    let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if rc == pid {
        if libc::WIFEXITED(status) {
            return Some((Some(libc::WEXITSTATUS(status)), None));
        }
        if libc::WIFSIGNALED(status) {
            return Some((None, Some(libc::WTERMSIG(status))));
        }
        return None;
    }
    if rc < 0 {
        return Some((None, None));
    }
    None
}

/// Sends `signo` to `pid`.
pub fn send_signal(pid: i32, signo: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid, signo) };
}

/// Why storprof may not stop `pid` with a signal, if it may not: it does
/// not exist or refuses signals from us, it is init (which ignores
/// SIGTERM), a kernel thread, or storprof itself or one of its ancestors.
pub fn may_signal(pid: u32) -> Result<(), String> {
    if pid == 1 {
        return Err("it is init (pid 1), which ignores SIGTERM".to_string());
    }
    let Ok(raw) = i32::try_from(pid) else {
        return Err("not a valid pid".to_string());
    };
    // SAFETY: signal 0 only checks for existence and permission.
    if unsafe { libc::kill(raw, 0) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // A kernel thread has no command line and the PF_KTHREAD flag.
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        && let Some((_, rest)) = stat.rsplit_once(')')
        && let Some(flags) = rest.split_whitespace().nth(7)
        && flags.parse::<u64>().is_ok_and(|f| f & 0x0020_0000 != 0)
    {
        return Err("it is a kernel thread".to_string());
    }
    let mut ancestor = std::process::id();
    for _ in 0..64 {
        if ancestor == pid {
            return Err("it is storprof itself or one of its ancestors".to_string());
        }
        match super::procfs::parent_of(ancestor) {
            Some(parent) if parent != 0 => ancestor = parent,
            _ => break,
        }
    }
    Ok(())
}

/// True while `pid` exists.
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}
