//! Root integration tests of Python frames in DWARF-mode stacks:
//! `storprof record --unwind dwarf` on tests/python/loader.py (2 forked
//! workers decoding Parquet with pyarrow and formatting dicts) must show
//! the worker's Python function with file:line above libpython/pyarrow
//! native frames and a leaf, in one stack; stacks several times deeper
//! than frame-pointer stacks (which show the Python frames too); off-CPU
//! stacks with Python frames. And for
//! each CPython 3.10-3.13 found (pyenv): outer → middle → leaf of
//! tests/python/nested.py. Root only (`#[ignore = "needs root"]`, run with
//! `-- --include-ignored`); skipped, with the reason printed, without a
//! Python that has pyarrow (CI: the crosscheck venv) or the CPython asked for.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use storprof_session::model::SessionInfo;

use crate::support::{
    assert_root, folded_count, python_of_version, python_version, python_with_pyarrow,
    read_session_json, record_with, repo,
};

fn record(dir: &Path, unwind: &str, python: &Path, data: &Path, seconds: &str) {
    let loader = repo().join("tests/python/loader.py");
    record_with(
        dir,
        &["--unwind", unwind],
        [python, &loader, data, Path::new(seconds)],
    );
}

fn session(dir: &Path) -> SessionInfo {
    read_session_json(dir, "session.json")
}

/// Median user stack depth over the processes that ran the workers.
fn median_depth(info: &SessionInfo) -> u32 {
    let unwind = info.unwind.as_ref().expect("unwind stats");
    unwind
        .processes
        .iter()
        .max_by_key(|p| p.samples)
        .map_or(0, |p| p.median_depth)
}

#[test]
#[ignore = "needs root"]
fn loader_workers_show_python_frames_over_native_frames() {
    assert_root();
    let Some(python) = python_with_pyarrow() else {
        eprintln!(
            "skipped: no Python with pyarrow (set STORPROF_PYTHON, or run scripts/crosscheck.sh to make target/venv)"
        );
        return;
    };
    let version = python_version(&python);
    if version != "3.11" && version != "3.10" && version != "3.12" && version != "3.13" {
        eprintln!(
            "skipped: {} is Python {version}, not 3.10-3.13",
            python.display()
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dwarf = tmp.path().join("dwarf");
    record(&dwarf, "dwarf", &python, &data, "4");
    let folded = std::fs::read_to_string(dwarf.join("oncpu.folded")).unwrap();
    let info = session(&dwarf);
    let loader_frame = |f: &str| f.contains("/tests/python/loader.py:");
    let worker_frame = |f: &str| f.starts_with("worker (") && loader_frame(f);
    let is_native = |f: &str| !f.ends_with("_[k]") && !loader_frame(f) && !f.contains(".py:");
    // One stack: worker (loader.py:N) above a native libpython/pyarrow
    // frame, ending in a leaf.
    let whole = folded.lines().find(|line| {
        let stack = line.rsplit_once(' ').map_or("", |(s, _)| s);
        let frames: Vec<&str> = stack.split(';').collect();
        let Some(w) = frames.iter().position(|f| worker_frame(f)) else {
            return false;
        };
        let below = &frames[w + 1..];
        below.iter().any(|f| is_native(f) && !f.starts_with('['))
            && below.last().is_some_and(|leaf| !leaf.is_empty())
    });
    assert!(
        whole.is_some(),
        "no stack with worker (loader.py:N) over native frames; notes: {:?}\n{folded}",
        info.notes
    );
    // pyarrow's decoding shows as Python frames over the C++ decoder.
    let arrow_native = folded.lines().any(|line| {
        line.contains("decode_row_groups (") && (line.contains("parquet") || line.contains("arrow"))
    });
    assert!(
        arrow_native,
        "no decode_row_groups over parquet/arrow frames:\n{folded}"
    );
    assert!(
        info.notes
            .iter()
            .any(|n| n.contains(&format!("CPython {version}"))),
        "{:?}",
        info.notes
    );

    // Off-CPU: the parent waits for its workers' results in main()
    // (loader.py), blocked in the kernel.
    let offcpu = std::fs::read_to_string(dwarf.join("offcpu.folded")).unwrap();
    let waiting = offcpu.lines().any(|line| {
        let stack = line.rsplit_once(' ').map_or("", |(s, _)| s);
        stack.contains("main (")
            && stack.contains("/tests/python/loader.py:")
            && stack.ends_with("_[k]")
    });
    assert!(
        waiting,
        "no off-CPU stack of main (loader.py:N) into the kernel; notes {:?}\n{offcpu}",
        info.notes
    );

    let fp = tmp.path().join("fp");
    record(&fp, "fp", &python, &data, "2");
    // Frame-pointer mode shows the Python frames too (over the fp leaf).
    let fp_folded = std::fs::read_to_string(fp.join("oncpu.folded")).unwrap();
    assert!(
        fp_folded.lines().any(|l| l.split(';').any(&worker_frame)),
        "fp mode: no worker (loader.py:N) frame\n{fp_folded}"
    );
    let (d, f) = (median_depth(&info), median_depth(&session(&fp)));
    eprintln!("median user stack depth: dwarf {d}, fp {f}");
    assert!(d >= 3 * f.max(1), "dwarf median depth {d} vs fp {f}");
}

/// `outer → middle → leaf` of tests/python/nested.py in this order in one stack.
fn nested_chain(folded: &str) -> bool {
    folded.lines().any(|line| {
        let frames: Vec<&str> = line.split(';').collect();
        let at = |name: &str| {
            frames
                .iter()
                .position(|f| f.starts_with(name) && f.contains("/tests/python/nested.py:"))
        };
        matches!(
            (at("outer ("), at("middle ("), at("leaf (")),
            (Some(o), Some(m), Some(l)) if o < m && m < l
        )
    })
}

#[test]
#[ignore = "needs root"]
fn every_supported_cpython_version_shows_its_frames() {
    assert_root();
    let nested = repo().join("tests/python/nested.py");
    let mut tested = 0;
    for version in ["3.10", "3.11", "3.12", "3.13"] {
        let Some(python) = python_of_version(version) else {
            eprintln!(
                "skipped CPython {version}: no interpreter found (pyenv or python{version} on PATH)"
            );
            continue;
        };
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("session");
        // Through a shell: python is exec'ed by a traced child, not by storprof.
        let script = format!("{} {} 1.5; true", python.display(), nested.display());
        record_with(&dir, &["--unwind", "dwarf"], ["/bin/sh", "-c", &script]);
        let folded = std::fs::read_to_string(dir.join("oncpu.folded")).unwrap();
        let info = session(&dir);
        assert!(
            nested_chain(&folded),
            "CPython {version}: no outer;middle;leaf stack; notes {:?}\n{folded}",
            info.notes
        );
        assert!(
            info.notes
                .iter()
                .any(|n| n.contains(&format!("CPython {version} "))),
            "{:?}",
            info.notes
        );
        tested += 1;
    }
    eprintln!("{tested} CPython versions tested");
}

#[test]
#[ignore = "needs root"]
fn an_unsupported_cpython_version_is_named_in_the_notes() {
    assert_root();
    let Some(python) = [
        "/root/.pyenv/versions/3.9.18/bin/python3",
        "/usr/bin/python3.9",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.exists()) else {
        eprintln!("skipped: no CPython 3.9 found (pyenv 3.9.18 or /usr/bin/python3.9)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("session");
    let nested = repo().join("tests/python/nested.py");
    record_with(
        &dir,
        &["--unwind", "dwarf"],
        [python.as_os_str(), nested.as_os_str(), "1".as_ref()],
    );
    let info = session(&dir);
    assert!(
        info.notes
            .iter()
            .any(|n| n.contains("CPython 3.9") && n.contains("not a supported")),
        "{:?}",
        info.notes
    );
    // Native frames only, still unwound through libpython.
    let folded = std::fs::read_to_string(dir.join("oncpu.folded")).unwrap();
    assert!(!folded.contains("nested.py:"), "{folded}");
    assert!(folded.contains("_PyEval_EvalFrameDefault"), "{folded}");
}

#[test]
#[ignore = "needs root"]
fn perf_trampolines_of_cpython_312_are_unwound_through() {
    assert_root();
    let python = PathBuf::from("/root/.pyenv/versions/3.12.1/bin/python3");
    if !python.exists() {
        eprintln!("skipped: no CPython 3.12 at {}", python.display());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("session");
    let nested = repo().join("tests/python/nested.py");
    record_with(
        &dir,
        &["--unwind", "dwarf"],
        [
            python.as_os_str(),
            "-X".as_ref(),
            "perf".as_ref(),
            nested.as_os_str(),
            "1.5".as_ref(),
        ],
    );
    let folded = std::fs::read_to_string(dir.join("oncpu.folded")).unwrap();
    // The native walk crosses the trampolines (no unwind info) up to
    // Py_RunMain, with the Python frames spliced in and no py:: duplicates.
    let whole = folded.lines().any(|line| {
        line.contains("Py_RunMain;")
            && line.contains("py_trampoline_evaluator;")
            && line.contains(";leaf (")
            && !line.contains("py::")
    });
    assert!(whole, "{folded}");
}

#[test]
#[ignore = "needs root"]
fn python_in_its_own_pid_namespace_shows_its_frames() {
    assert_root();
    // A container's view: python runs as pid 1's child in a new pid
    // namespace, where its thread ids (`native_thread_id`) differ from
    // the kernel's global ones.
    let unshare_works = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !unshare_works {
        eprintln!("skipped: `unshare --pid --fork --mount-proc` is not available");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("session");
    let nested = repo().join("tests/python/nested.py");
    record_with(
        &dir,
        &["--unwind", "dwarf"],
        [
            "unshare".as_ref(),
            "--pid".as_ref(),
            "--fork".as_ref(),
            "--mount-proc".as_ref(),
            "python3".as_ref(),
            nested.as_os_str(),
            "1.5".as_ref(),
        ],
    );
    let folded = std::fs::read_to_string(dir.join("oncpu.folded")).unwrap();
    let info = session(&dir);
    assert!(
        nested_chain(&folded),
        "no outer;middle;leaf stack in a pid namespace; notes {:?}\n{folded}",
        info.notes
    );
}

#[test]
#[ignore = "needs root"]
fn each_thread_gets_its_own_python_frames() {
    assert_root();
    // 3.10 matches threads by pthread_self() (its FS base), 3.11+ by
    // native thread id: either way a thread running without the GIL must
    // not get the GIL holder's frames.
    let threads = repo().join("tests/python/threads.py");
    let mut pythons: Vec<(String, PathBuf)> = Vec::new();
    for version in ["3.10", "3.11", "3.12", "3.13"] {
        match python_of_version(version) {
            Some(python) => pythons.push((version.to_string(), python)),
            None => eprintln!("skipped CPython {version}: no interpreter found"),
        }
    }
    // The distribution's own python3 too (Debian's links libpython into
    // the executable and strips its local symbols), when it is a supported
    // version.
    let system = PathBuf::from("/usr/bin/python3");
    let system_version = if system.exists() {
        python_version(&system)
    } else {
        String::new()
    };
    if ["3.10", "3.11", "3.12", "3.13"].contains(&system_version.as_str()) {
        pythons.push((format!("{system_version} ({})", system.display()), system));
    }
    let mut tested = 0;
    for (version, python) in pythons {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("session");
        record_with(
            &dir,
            &["--unwind", "dwarf"],
            [python.as_os_str(), threads.as_os_str(), "2".as_ref()],
        );
        let folded = std::fs::read_to_string(dir.join("oncpu.folded")).unwrap();
        let hashing = |l: &str| l.contains("sha256") || l.contains("SHA256");
        let under_hash_b = folded_count(&folded, |l| hashing(l) && l.contains("hash_b ("));
        let under_spin_a = folded_count(&folded, |l| hashing(l) && l.contains("spin_a ("));
        assert!(
            under_hash_b >= 20,
            "CPython {version}: {under_hash_b} hashing samples under hash_b:\n{folded}"
        );
        assert_eq!(
            under_spin_a, 0,
            "CPython {version}: hashing samples under the other thread's spin_a:\n{folded}"
        );
        // And the spinning thread keeps its own frames.
        assert!(
            folded_count(&folded, |l| l.contains("spin_a (")) >= 20,
            "{folded}"
        );
        tested += 1;
    }
    eprintln!("{tested} CPython versions tested");
}

#[test]
#[ignore = "needs root"]
fn preempted_python_threads_keep_their_frames_off_the_cpu() {
    assert_root();
    // More spinning processes than CPUs: their off-CPU time is runnable
    // time after preemptions, whose Python frames are walked about every
    // 10 ms a thread and stand for the preemptions in between.
    let Some(python) = ["3.11", "3.12", "3.10", "3.13"]
        .into_iter()
        .find_map(python_of_version)
        .or_else(|| Some(PathBuf::from("/usr/bin/python3")).filter(|p| p.exists()))
    else {
        eprintln!("skipped: no CPython found");
        return;
    };
    let spinner = repo().join("tests/python/preempted.py");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("session");
    let seconds = 3.0;
    record_with(
        &dir,
        &["--unwind", "dwarf"],
        [python.as_os_str(), spinner.as_os_str(), "3".as_ref()],
    );
    let offcpu = std::fs::read_to_string(dir.join("offcpu.folded")).unwrap();
    let under_spin_us = folded_count(&offcpu, |l| l.contains("spin_preempted ("));
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get()) as f64;
    let workers = cpus.max(2.0) + 1.0;
    // Each spinner waits for a CPU about 1/workers of the time.
    let expected_us = seconds * (workers - cpus) * 1e6;
    eprintln!("{under_spin_us} µs runnable under spin_preempted, about {expected_us} expected");
    // Sampled by the off-CPU quantum, unbiased: a reused entry not sent
    // again, or sent twice, lands outside these bounds.
    let ratio = under_spin_us as f64 / expected_us;
    assert!(
        (0.6..1.6).contains(&ratio),
        "{under_spin_us} µs off the CPU under spin_preempted, about {expected_us} expected:\n{offcpu}"
    );
}
