//! The command line on bad input, without root: usage errors exit 2 and say
//! their cause once, with what to type instead; edge-case sessions get an
//! honest answer.
use std::{fs, path::Path, process::Command};

use crate::support::{STORPROF, read_json, session_fixture};

/// Runs storprof with `args`: (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(STORPROF)
        .args(args)
        .output()
        .expect("run storprof");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A writable copy of the fixture session `name` at `to`.
fn copy_of_fixture(name: &str, to: &Path) -> std::path::PathBuf {
    fs::create_dir(to).unwrap();
    for f in crate::support::SESSION_FILES {
        let from = session_fixture(name).join(f);
        if from.exists() {
            fs::copy(&from, to.join(f)).unwrap();
        }
    }
    to.to_path_buf()
}

#[test]
fn bare_diagnose_is_a_usage_error_that_names_the_demo() {
    let (code, _, err) = run(&["diagnose"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nothing to diagnose"), "{err}");
    assert!(err.contains("storprof demo"), "{err}");
}

#[test]
fn out_of_range_flags_are_usage_errors() {
    for args in [
        &["record", "--freq", "0", "--", "true"][..],
        &["record", "-F", "20000", "--", "true"][..],
        &[
            "sweep",
            "--workload",
            "flux",
            "--data-dir",
            "/nonexistent",
            "--np",
            "0",
        ][..],
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
    }
}

/// `--np 1 2 4` (as `--help` shows the default) parses like `--np 1,2,4`:
/// the run then fails on the missing data dir, not on the flag, before
/// any cell runs or writes a result.
#[test]
fn sweep_lists_take_spaces_or_commas() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    for np in [&["1", "2"][..], &["1,2"][..]] {
        let mut args = vec![
            "sweep",
            "--workload",
            "flux",
            "--data-dir",
            "/nonexistent",
            "--results-dir",
            results.to_str().unwrap(),
            "--np",
        ];
        args.extend_from_slice(np);
        let (code, _, err) = run(&args);
        assert_ne!(code, 2, "{args:?}: {err}");
        assert!(!err.contains("unexpected argument"), "{err}");
        assert!(err.contains("/nonexistent does not exist"), "{err}");
        assert!(!results.exists(), "a sweep without data wrote results");
    }
}

#[test]
fn an_unknown_param_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let (code, _, err) = run(&[
        "bench",
        "--workload",
        "flux",
        "--data-dir",
        data,
        "--param",
        "reader.batch_sise=4",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("batch_sise"), "{err}");
}

/// A workload DLIO has no template for on the named accelerator: the error
/// names the flag and a value that works; without the flag the workload's
/// own default is taken.
#[test]
fn a_workload_on_the_wrong_accelerator_names_the_right_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d");
    let (code, _, err) = run(&[
        "datagen",
        "--workload",
        "resnet50",
        "--accelerator-type",
        "b200",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--accelerator-type a100"), "{err}");
    // The suggestion of a missing data dir can be pasted as it is.
    let (code, _, err) = run(&[
        "bench",
        "--workload",
        "resnet50",
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "storprof datagen --workload resnet50 --data-dir {}",
            data.display()
        )),
        "{err}"
    );
}

#[test]
fn thresholds_files_are_strict_and_their_errors_say_the_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let session = session_fixture("real-compute-bound");
    let bad = dir.path().join("t.json");
    fs::write(&bad, r#"{"compute_bound_au_percentag": 70}"#).unwrap();
    let (code, _, err) = run(&["thresholds", "--thresholds", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("did you mean `compute_bound_au_percentage`"),
        "{err}"
    );
    fs::write(&bad, r#"{"lock_futex_share": -1}"#).unwrap();
    let (code, _, err) = run(&["thresholds", "--thresholds", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("must be within 0..=1"), "{err}");
    let missing = dir.path().join("none.json");
    let (code, _, err) = run(&["thresholds", "--thresholds", missing.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.matches("(os error 2)").count(), 1, "{err}");
    // A range without an upper end reads as one.
    fs::write(&bad, r#"{"stall_s": -1}"#).unwrap();
    let (code, _, err) = run(&["thresholds", "--thresholds", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("must be ≥ 0") && !err.contains("e308"),
        "{err}"
    );
    let (_, table, _) = run(&["thresholds"]);
    assert!(!table.contains("1797693"), "{table}");
    // A good file: listed as the source of what it overrides.
    fs::write(&bad, r#"{"compute_bound_au_percentage": 70}"#).unwrap();
    let (code, out, err) = run(&[
        "thresholds",
        "--thresholds",
        bad.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "compute_bound_au_percentage")
        .unwrap();
    assert_eq!(row["value"], 70.0);
    assert_eq!(row["source"], bad.to_str().unwrap());
    assert!(session.is_dir());
}

/// A session directory holding only session.json: nothing was recorded,
/// and the verdict says so instead of naming a rule.
#[test]
fn a_session_with_nothing_recorded_is_inconclusive() {
    let dir = tempfile::tempdir().unwrap();
    let src = session_fixture("real-compute-bound/session.json");
    fs::copy(&src, dir.path().join("session.json")).unwrap();
    let (code, out, err) = run(&["report", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // The terminal and the report say inconclusive, not a verdict's id.
    assert!(
        out.starts_with("verdict: inconclusive (closest match "),
        "{out}"
    );
    let md = fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.starts_with("# storprof report: inconclusive"), "{md}");
    let v: serde_json::Value = read_json(&dir.path().join("verdict.json"));
    assert_eq!(v["inconclusive"], true, "{v}");
    assert_eq!(v["confidence"], 0.0, "{v}");
    let headline = v["headline"].as_str().unwrap();
    assert!(headline.contains("no thread was recorded"), "{headline}");
    assert!(!v["actions"].as_array().unwrap().is_empty(), "{v}");
}

/// Overridden thresholds are recorded in verdict.json and in the report.
#[test]
fn overridden_thresholds_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let session = copy_of_fixture("real-compute-bound", &dir.path().join("s"));
    let t = dir.path().join("t.json");
    fs::write(&t, r#"{"compute_bound_au_percentage": 70}"#).unwrap();
    let (code, _, err) = run(&[
        "report",
        session.to_str().unwrap(),
        "--thresholds",
        t.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = read_json(&session.join("verdict.json"));
    let o = &v["threshold_overrides"][0];
    assert_eq!(o["key"], "compute_bound_au_percentage", "{v}");
    assert_eq!(o["value"], 70.0);
    let md = fs::read_to_string(session.join("report.md")).unwrap();
    assert!(
        md.contains("Thresholds overridden: `compute_bound_au_percentage` = 70"),
        "{md}"
    );
    assert!(Path::new(&session.join("report.html")).exists());
}

/// `report` reads a bundle in place and writes where -o says; --json
/// prints verdict.json and, without -o, writes nothing.
#[test]
fn report_reads_bundles_and_writes_where_told() {
    let dir = tempfile::tempdir().unwrap();
    let session = copy_of_fixture("real-compute-bound", &dir.path().join("sess"));
    // --json alone prints verdict.json and writes nothing.
    let (code, out, err) = run(&["report", session.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let direct: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        !session.join("report.md").exists(),
        "--json alone wrote files"
    );
    let bundle = dir.path().join("b.tar.gz");
    let (code, _, err) = run(&[
        "bundle",
        session.to_str().unwrap(),
        "-o",
        bundle.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = run(&["report", bundle.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["verdict"], "compute-bound", "{v}");
    assert_eq!(direct["headline"], v["headline"]);
    let to = dir.path().join("out");
    let (code, out, err) = run(&[
        "report",
        bundle.to_str().unwrap(),
        "-o",
        to.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("verdict: compute-bound"), "{out}");
    for f in ["verdict.json", "report.md", "report.html"] {
        assert!(to.join(f).is_file(), "{f} missing in {}", to.display());
    }
}

/// Every command's `--help`, one golden file: help text cannot go stale
/// (or leak an internal name) unnoticed. Re-bless with STORPROF_BLESS=1.
#[test]
fn help_text_is_golden() {
    let help = |args: &[&str]| {
        let out = Command::new(STORPROF)
            .args(args)
            .arg("--help")
            .env("COLUMNS", "100")
            .output()
            .expect("run storprof --help");
        assert!(out.status.success(), "{args:?} --help failed");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let top = help(&[]);
    let mut all = format!("$ storprof --help\n{top}");
    // The command names, from the top-level help's command list.
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A wrapped description continues further in.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 15, "{commands:?}");
    assert_eq!(
        commands[0], "diagnose",
        "diagnose comes first: {commands:?}"
    );
    for c in &commands {
        let text = help(&[c]);
        for internal in ["CLOSED_OVERRIDES", "::", "WARN "] {
            assert!(
                !text.contains(internal),
                "`{c} --help` shows `{internal}`:\n{text}"
            );
        }
        all.push_str(&format!("\n$ storprof {c} --help\n{text}"));
    }
    crate::support::assert_golden("help/all.txt", &all);
}

/// mlpstorage's option names are accepted as they are typed there.
#[test]
fn mlpstorage_option_names_are_aliases() {
    let (code, _, err) = run(&[
        "bench",
        "--workload",
        "flux",
        "--data-dir",
        "/nonexistent",
        "--num-accelerators",
        "2",
        "--client-host-memory-in-gb",
        "64",
    ]);
    // Parsed: the run fails on the missing dataset, not on the flags.
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("does not exist"), "{err}");
}

/// `storprof whatif` on a recorded real pool: a table by default, one JSON
/// object per lever with `--json`; a bad lever is a usage error, and a
/// recording without a consumer says why it has no projection.
#[test]
fn whatif_projects_the_default_levers_and_refuses_what_it_cannot() {
    let pool = session_fixture("real-pool-cpu-bound-reader");
    let pool = pool.to_str().unwrap();
    let (code, out, err) = run(&["whatif", pool]);
    assert_eq!(code, 0, "{err}");
    for lever in [
        "storage ×2",
        "read-threads ×2",
        "computation ×2",
        "computation ×4",
    ] {
        assert!(out.contains(lever), "{lever}: {out}");
    }
    let (code, out, err) = run(&[
        "whatif",
        pool,
        "--json",
        "--lever",
        "cache",
        "--lever",
        "computation=0.5",
    ]);
    assert_eq!(code, 0, "{err}");
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2, "{out}");
    for key in [
        "lever",
        "factor",
        "projected_au_percentage",
        "low",
        "high",
        "reason",
    ] {
        assert!(list[1].get(key).is_some(), "{key}: {out}");
    }
    assert_eq!(list[1]["lever"], "computation");
    let (code, _, err) = run(&["whatif", pool, "--lever", "disk=2"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown lever"), "{err}");
    let no_consumer = session_fixture("real-arrow-workers-no-trainer");
    let (code, out, err) = run(&["whatif", no_consumer.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("no projection") && out.is_empty(), "{err}");
}
