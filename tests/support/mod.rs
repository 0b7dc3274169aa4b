//! Support shared by the profiler's integration tests (tests/*.rs, each
//! includes it with `mod support;`): where things are (the storprof binary,
//! the repository, fixture sessions and golden files), root checks, running
//! storprof (`record`, `record_with`, any subcommand, with a deadline),
//! reading session JSON and folded stacks, finding a Python, building C
//! helpers, scratch directories. Golden comparisons go through
//! `testkit::golden` (shared with the benchmark's tests), here with the
//! profiler's golden directory in [`assert_golden`].
//!
//! Root-only tests are `#[ignore = "needs root"]` and start with
//! [`assert_root`]: plain `cargo test` skips them, `-- --include-ignored`
//! (scripts/test.sh as root) runs them, and without root they fail saying
//! why instead of passing silently.
// Not every test binary uses every helper; tests may unwrap (a failure is a test failure).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
use std::{
    ffi::OsStr,
    fs,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

/// The storprof binary cargo built for these tests.
pub const STORPROF: &str = env!("CARGO_BIN_EXE_storprof");

/// The repository root (the tests live in ../tests of the profiler crate).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A recorded fixture session (or set of them): tests/data/sessions/<rel>.
pub fn session_fixture(rel: impl AsRef<Path>) -> PathBuf {
    repo().join("tests/data/sessions").join(rel)
}

/// Compares `got` with the golden file tests/data/golden/<rel> (the rules
/// of `testkit::golden`: `STORPROF_BLESS=1` re-blesses, `CI=true` fails on
/// a missing file).
#[track_caller]
pub fn assert_golden(rel: impl AsRef<Path>, got: &str) {
    testkit::assert_golden(repo().join("tests/data/golden").join(rel), got);
}

/// Whether the tests run as root (eBPF, namespaces, cgroups).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// First line of every `#[ignore = "needs root"]` test: run by
/// `--include-ignored` without root, it fails with the reason.
#[track_caller]
pub fn assert_root() {
    assert!(
        is_root(),
        "this test needs root (eBPF probes, namespaces, cgroups): run it as root, \
         or leave out --include-ignored to skip it"
    );
}

/// `storprof ARGS...`, whatever its exit status.
pub fn storprof<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(STORPROF)
        .args(args)
        .output()
        .expect("run storprof")
}

/// `storprof record --output DIR -- COMMAND`, which must succeed.
pub fn record<C, S>(dir: &Path, command: C) -> Output
where
    C: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    record_with(dir, &[], command)
}

/// `storprof record OPTIONS --output DIR -- COMMAND`, which must succeed.
pub fn record_with<C, S>(dir: &Path, options: &[&str], command: C) -> Output
where
    C: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::new(STORPROF)
        .arg("record")
        .args(options)
        .arg("--output")
        .arg(dir)
        .arg("--")
        .args(command)
        .output()
        .expect("run storprof record");
    assert!(
        out.status.success(),
        "storprof record failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `cmd` (output captured) with a hard deadline: a hang fails the test,
/// naming `what`, instead of blocking CI.
pub fn run_within(mut cmd: Command, limit: Duration, what: &str) -> Output {
    // Its own process group: a hang kills whatever it started too (a
    // leftover holding the output pipes would block the test).
    let child = std::os::unix::process::CommandExt::process_group(&mut cmd, 0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let pid = child.id();
    // The output is read while the watchdog waits: a full pipe cannot stall the child.
    let watchdog = std::thread::spawn(move || {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY: signal 0 only checks that the pid exists.
            if unsafe { libc::kill(pid as libc::pid_t, 0) } != 0 {
                return false;
            }
        }
        // SAFETY: kill(2) of the process group of the child we started,
        // after its deadline.
        unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
        true
    });
    let out = child.wait_with_output().unwrap();
    assert!(
        !watchdog.join().unwrap(),
        "{what} did not finish within {limit:?}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `--param P` for each of `params` (storprof bench/datagen overrides).
pub fn param_args<S: AsRef<str>>(params: &[S]) -> Vec<String> {
    params
        .iter()
        .flat_map(|p| ["--param".to_string(), p.as_ref().to_string()])
        .collect()
}

/// A JSON file (a session file, a summary), parsed; panics naming the file.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The session file `name` (session.json, threads.json, io.json...) of `session`.
pub fn read_session_json<T: serde::de::DeserializeOwned>(session: &Path, name: &str) -> T {
    read_json(&session.join(name))
}

/// Sum of the counts of the folded-stack lines (`stack COUNT`) that `keep` accepts.
pub fn folded_count(folded: &str, keep: impl Fn(&str) -> bool) -> u64 {
    folded
        .lines()
        .filter(|l| keep(l))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}

/// The files of a session directory worth keeping as a fixture.
pub const SESSION_FILES: &[&str] = &[
    "session.json",
    "threads.json",
    "io.json",
    "timeseries.json",
    "oncpu.folded",
    "offcpu.folded",
    "bench-summary.json",
    "waits.json",
    "oncpu-threads.folded",
    "offcpu-threads.folded",
];

/// Replaces `dest` with the session files of `session` that exist
/// (re-recording a fixture, under `STORPROF_SAVE_FIXTURES=1`).
pub fn save_session_files(session: &Path, dest: &Path, files: &[&str]) {
    let _ = fs::remove_dir_all(dest);
    fs::create_dir_all(dest).expect("create fixture dir");
    for f in files {
        if session.join(f).exists() {
            fs::copy(session.join(f), dest.join(f)).expect("copy fixture file");
        }
    }
}

/// Whether `STORPROF_SAVE_FIXTURES` asks root tests to save their recordings.
pub fn saving_fixtures() -> bool {
    std::env::var_os("STORPROF_SAVE_FIXTURES").is_some()
}

/// Copies the files of `from` into `to` (a fixture session into a temp dir).
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// A fresh scratch directory under this build's target dir, in `area`: a
/// real disk (unlike /tmp on some machines), so blkio throttles and
/// O_DIRECT have a block device to act on. `STORPROF_KEEP_SCRATCH=1` keeps
/// it after the test (its path is printed) to look at what a test recorded.
pub fn scratch(area: &str) -> tempfile::TempDir {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join(area);
    fs::create_dir_all(&base).expect("create scratch dir");
    let keep = std::env::var_os("STORPROF_KEEP_SCRATCH").is_some_and(|v| v == "1");
    let dir = tempfile::Builder::new()
        .disable_cleanup(keep)
        .tempdir_in(base)
        .expect("tempdir");
    if keep {
        eprintln!("scratch kept: {}", dir.path().display());
    }
    dir
}

/// Copies a wrong scenario's session files to
/// target/tmp/AREA-failed/NAME (kept across runs and after a CI clone's
/// test run, to look at what storprof saw).
pub fn keep_failed_session(area: &str, session: &Path, name: &str) {
    let to = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{area}-failed"))
        .join(name);
    let _ = fs::remove_dir_all(&to);
    if fs::create_dir_all(&to).is_ok() {
        save_session_files(session, &to, SESSION_FILES);
        eprintln!("{name}: session kept in {}", to.display());
    }
}

/// MCA settings that make a test's `mpirun` independent of earlier runs and
/// of where the kernel put a daemon's stack:
/// - `orte_tmpdir_base DIR`: OpenMPI's session directories go to a directory
///   of this test binary's, emptied at its first use, instead of the shared
///   /tmp/ompi.<host>.<uid>, where job-family directories left behind by
///   killed runs stay. The path stays short: OpenMPI puts sockets under it.
/// - `rtc_hwloc_vmhole none`: OpenMPI 4.1's daemons otherwise map the hwloc
///   topology at an address they guess from a hole in their memory map, and
///   now and then it lands on their own stack: `orted` dies with SIGSEGV in
///   `hwloc_shmem_topology_write` and the job fails to start.
pub fn isolate_mpirun(mpirun: &mut Command) {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        let stem = exe.file_stem().and_then(OsStr::to_str).unwrap_or("test");
        let name = stem.rsplit_once('-').map_or(stem, |(name, _hash)| name);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("ompi-{name}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the OpenMPI session base");
        dir
    });
    mpirun
        .args(["--mca", "orte_tmpdir_base"])
        .arg(dir)
        .args(["--mca", "rtc_hwloc_vmhole", "none"]);
}

/// `gcc FLAGS -o OUT SRC`, which must succeed: the C helpers and workloads.
pub fn build_c(src: &Path, out: &Path, flags: &[&str]) {
    let status = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(src)
        .status()
        .expect("run gcc (apt-get install gcc libc6-dev)");
    assert!(
        status.success(),
        "gcc {} failed for {}",
        flags.join(" "),
        src.display()
    );
}

/// A Python with pyarrow: $STORPROF_PYTHON, the crosscheck venvs, python3.
pub fn python_with_pyarrow() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("STORPROF_PYTHON") {
        candidates.push(p.into());
    }
    if let Some(v) = std::env::var_os("STORPROF_VENV") {
        candidates.push(Path::new(&v).join("bin/python"));
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(Path::new(&t).join("venv/bin/python"));
    }
    candidates.push(repo().join("target/venv/bin/python"));
    candidates.push("python3".into());
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", "import pyarrow.parquet"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// CPython `version` (e.g. "3.10"): pyenv's, else `pythonX.Y` on PATH.
pub fn python_of_version(version: &str) -> Option<PathBuf> {
    let pyenv = fs::read_dir("/root/.pyenv/versions")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{version}.")))
        })
        .map(|p| p.join("bin/python3"));
    pyenv.filter(|p| p.exists()).or_else(|| {
        let name = PathBuf::from(format!("python{version}"));
        Command::new(&name)
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
            .then_some(name)
    })
}

/// Python version `X.Y` of an interpreter.
pub fn python_version(python: &Path) -> String {
    let out = Command::new(python)
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The venv scripts/setup-dlio.sh makes (the real DLIO benchmark with
/// PyTorch, TensorFlow and pyarrow), when it is there.
pub fn dlio_venv() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(v) = std::env::var_os("STORPROF_DLIO_VENV") {
        candidates.push(v.into());
    }
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(Path::new(&t).join("dlio-venv"));
    }
    candidates.push(repo().join("target/dlio-venv"));
    candidates
        .into_iter()
        .find(|v| v.join("bin/dlio_benchmark").is_file())
}

/// Drops the page-cache pages of every file under `dir` (this dataset
/// only, not the machine's whole cache).
pub fn evict(dir: &Path) {
    for entry in fs::read_dir(dir).expect("read dataset dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            evict(&path);
            continue;
        }
        let file = fs::File::open(&path).expect("open dataset file");
        // SAFETY: a valid open descriptor; DONTNEED only drops clean pages.
        let rc = unsafe {
            libc::fsync(std::os::fd::AsRawFd::as_raw_fd(&file));
            libc::posix_fadvise(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
                0,
                libc::POSIX_FADV_DONTNEED,
            )
        };
        assert_eq!(rc, 0, "posix_fadvise({})", path.display());
    }
}

/// A blkio (cgroup v1) group throttling reads of the device behind `path`.
pub struct Throttle {
    pub dir: PathBuf,
}

impl Throttle {
    pub fn new(path: &Path, bytes_per_sec: u64) -> Option<Throttle> {
        let root = Path::new("/sys/fs/cgroup/blkio");
        if !root.join("blkio.throttle.read_bps_device").exists() {
            return None;
        }
        let dev = std::os::unix::fs::MetadataExt::dev(&fs::metadata(path).ok()?);
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let dir = root.join(format!("storprof-scenario-{}", std::process::id()));
        fs::create_dir_all(&dir).ok()?;
        fs::write(
            dir.join("blkio.throttle.read_bps_device"),
            format!("{major}:{minor} {bytes_per_sec}"),
        )
        .ok()?;
        Some(Throttle { dir })
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.dir);
    }
}

/// tests/workloads/workload.c, built static into `dir`.
pub fn build_workload(dir: &Path) -> PathBuf {
    let src = repo().join("tests/workloads/workload.c");
    let bin = dir.join("workload");
    build_c(
        &src,
        &bin,
        &["-O2", "-static", "-pthread", "-fno-omit-frame-pointer"],
    );
    bin
}
