//! storprof as root, writing where another user can plant links. A real
//! unprivileged user (created here with useradd when missing) plants
//! symbolic links to root's files in a shared sticky directory, as in /tmp:
//! - `record --output` through the user's link is refused, root's
//!   directory untouched;
//! - a directory of the user's is written into only with `--force`, and a
//!   link planted there under a session file's name is replaced, not
//!   followed;
//! - run as through sudo (SUDO_UID/SUDO_GID), the command runs as the user
//!   (it cannot read a root-only file) and the session is theirs;
//! - `bundle -o`, `flamegraph -o` and `merge -o` refuse a path through the
//!   user's link (even with `--force`), replace an existing file (or fill a
//!   full directory) only with `--force`, replace a planted link instead of
//!   following it, and through sudo leave their outputs to the user.
//!
//! Root only.
// Tests may unwrap (a failure is a test failure).
#![allow(clippy::expect_used)]

use std::{
    fs,
    os::unix::fs::MetadataExt,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
};

use crate::support::{STORPROF, assert_root, copy_dir, session_fixture};

const USER: &str = "storprof-test";

/// The test user's (uid, gid), made with useradd when missing.
fn test_user() -> (u32, u32) {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, USER]).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
            .flatten()
    };
    if id("-u").is_none() {
        let status = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .status()
            .expect("run useradd");
        assert!(status.success(), "useradd {USER} failed");
    }
    (
        id("-u").expect("uid of the test user"),
        id("-g").expect("gid of the test user"),
    )
}

/// Runs `args` as the test user (setpriv, no supplementary groups).
fn as_user(user: (u32, u32), args: &[&str]) {
    let status = Command::new("setpriv")
        .arg(format!("--reuid={}", user.0))
        .arg(format!("--regid={}", user.1))
        .args(["--clear-groups", "--"])
        .args(args)
        .status()
        .expect("run setpriv");
    assert!(status.success(), "as {USER}: {args:?} failed");
}

/// A directory anyone may write, sticky like /tmp, in /tmp (every user can
/// reach it, unlike a checkout under a private home).
fn shared_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("storprof-root-outputs-")
        .tempdir()
        .expect("tempdir in /tmp");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

fn record(output: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(STORPROF)
        .args(["record", "--live", "off"])
        .args(extra)
        .arg("--output")
        .arg(output)
        .args(["--", "true"])
        .output()
        .expect("run storprof record")
}

#[test]
#[ignore = "needs root"]
fn a_link_planted_by_another_user_is_not_followed() {
    assert_root();
    let user = test_user();
    let shared = shared_dir();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    // Root's own directory, and a link to it that the user plants.
    let root_dir = shared.path().join("root-only");
    fs::create_dir(&root_dir).unwrap();
    fs::set_permissions(&root_dir, fs::Permissions::from_mode(0o700)).unwrap();
    let planted = shared.path().join("planted");
    as_user(user, &["ln", "-s", &s(&root_dir), &s(&planted)]);
    for output in [planted.clone(), planted.join("session")] {
        let out = record(&output, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "record through {output:?} succeeded");
        assert!(
            stderr.contains(&format!("symbolic link owned by uid {}", user.0)),
            "{stderr}"
        );
        let with_force = record(&output, &["--force"]);
        assert!(!with_force.status.success(), "--force followed the link");
    }
    assert_eq!(
        fs::read_dir(&root_dir).unwrap().count(),
        0,
        "root's directory was written"
    );
}

#[test]
#[ignore = "needs root"]
fn a_full_directory_needs_force_and_planted_files_are_replaced() {
    assert_root();
    let user = test_user();
    let shared = shared_dir();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let victim = shared.path().join("victim.txt");
    fs::write(&victim, "precious").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).unwrap();
    let user_dir = shared.path().join("user-dir");
    as_user(user, &["mkdir", &s(&user_dir)]);
    as_user(
        user,
        &["ln", "-s", &s(&victim), &s(&user_dir.join("session.json"))],
    );

    let out = record(&user_dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "record into a full directory succeeded"
    );
    assert!(
        stderr.contains("is not empty") && stderr.contains("--force"),
        "{stderr}"
    );

    let out = record(&user_dir, &["--force"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(
        fs::metadata(&victim).unwrap().uid(),
        0,
        "the victim changed owner"
    );
    let session = fs::symlink_metadata(user_dir.join("session.json")).unwrap();
    assert!(session.is_file(), "session.json is still a link");
}

#[test]
#[ignore = "needs root"]
fn through_sudo_the_command_runs_as_the_user_and_the_session_is_theirs() {
    assert_root();
    let user = test_user();
    let shared = shared_dir();
    let secret = shared.path().join("root-secret");
    fs::write(&secret, "root only").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).unwrap();
    let seen = shared.path().join("seen-uid");
    let session = shared.path().join("session");
    let script = format!(
        "id -u > {seen}; cat {secret} > /dev/null 2>&1 && echo read > {seen}.secret; exit 0",
        seen = seen.display(),
        secret = secret.display()
    );
    let out = Command::new(STORPROF)
        .args(["record", "--live", "off", "--output"])
        .arg(&session)
        .args(["--", "sh", "-c", &script])
        .env("SUDO_UID", user.0.to_string())
        .env("SUDO_GID", user.1.to_string())
        .output()
        .expect("run storprof record");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        fs::read_to_string(&seen).unwrap().trim(),
        user.0.to_string()
    );
    assert!(
        !shared.path().join("seen-uid.secret").exists(),
        "the command read a root-only file"
    );
    for entry in fs::read_dir(&session).unwrap().flatten() {
        let meta = fs::symlink_metadata(entry.path()).unwrap();
        assert_eq!(
            meta.uid(),
            user.0,
            "{} is not the user's",
            entry.path().display()
        );
    }
    assert_eq!(fs::metadata(&session).unwrap().uid(), user.0);
}

/// `storprof ARGS...` as root, or as through sudo for `user`.
fn storprof_as(user: Option<(u32, u32)>, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new(STORPROF);
    cmd.args(args);
    if let Some((uid, gid)) = user {
        cmd.env("SUDO_UID", uid.to_string())
            .env("SUDO_GID", gid.to_string());
    }
    cmd.output().expect("run storprof")
}

/// A copy of a recorded fixture session in `dir`, as `name`.
fn session_copy(dir: &Path, name: &str, fixture: &str) -> String {
    let to = dir.join(name);
    copy_dir(&session_fixture(fixture), &to);
    to.to_str().unwrap().to_string()
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Root's files the planted links point at, in `dir`: a private file
/// ("precious") and an empty private directory.
fn root_targets(dir: &Path) -> (PathBuf, PathBuf) {
    let victim = dir.join("victim.txt");
    fs::write(&victim, "precious").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).unwrap();
    let root_dir = dir.join("root-only");
    fs::create_dir(&root_dir).unwrap();
    fs::set_permissions(&root_dir, fs::Permissions::from_mode(0o700)).unwrap();
    (victim, root_dir)
}

/// `out` (of `what`) is storprof's refusal of a path through a link
/// `user` owns: usage error 2, naming the link's owner.
fn assert_link_refused(out: &std::process::Output, user: (u32, u32), what: &str) {
    assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr_of(out));
    assert!(
        stderr_of(out).contains(&format!("symbolic link owned by uid {}", user.0)),
        "{what}: {}",
        stderr_of(out)
    );
}

/// The file-writing commands, each as `args ++ [OUTPUT]`.
fn file_commands(session: &str) -> Vec<Vec<String>> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        v(&["bundle", session, "-o"]),
        v(&["flamegraph", session, "--kind", "offcpu", "-o"]),
    ]
}

#[test]
#[ignore = "needs root"]
fn bundle_and_flamegraph_outputs_are_not_written_through_links_nor_over_files() {
    assert_root();
    let user = test_user();
    let shared = shared_dir();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let session = session_copy(shared.path(), "session", "compute-bound");
    let (victim, root_dir) = root_targets(shared.path());
    let planted_dir = shared.path().join("planted-dir");
    as_user(user, &["ln", "-s", &s(&root_dir), &s(&planted_dir)]);

    for (i, command) in file_commands(&session).into_iter().enumerate() {
        let args = |out: &Path, force: bool| {
            let mut a = command.clone();
            a.push(s(out));
            if force {
                a.push("--force".to_string());
            }
            a
        };
        let run = |out: &Path, force: bool, sudo: bool| {
            let a = args(out, force);
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            storprof_as(sudo.then_some(user), &a)
        };
        // The user's link to root's file, under the output's name, and a
        // path through the user's link to root's directory.
        let planted_file = shared.path().join(format!("planted-{i}"));
        as_user(user, &["ln", "-s", &s(&victim), &s(&planted_file)]);
        for out in [planted_file.clone(), planted_dir.join(format!("out-{i}"))] {
            for force in [false, true] {
                let o = run(&out, force, false);
                assert_link_refused(&o, user, &format!("{command:?} {out:?}"));
            }
        }
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(fs::metadata(&victim).unwrap().uid(), 0);
        assert_eq!(fs::read_dir(&root_dir).unwrap().count(), 0);

        // An existing file: kept without --force, replaced with it.
        let existing = shared.path().join(format!("existing-{i}"));
        fs::write(&existing, "old").unwrap();
        let o = run(&existing, false, false);
        assert_eq!(o.status.code(), Some(2), "{command:?}: {}", stderr_of(&o));
        assert!(
            stderr_of(&o).contains("exists: pass --force to replace it"),
            "{}",
            stderr_of(&o)
        );
        assert_eq!(fs::read_to_string(&existing).unwrap(), "old");
        let o = run(&existing, true, false);
        assert!(o.status.success(), "{command:?}: {}", stderr_of(&o));
        assert!(fs::metadata(&existing).unwrap().len() > 3);

        // Root's own link under the output's name (trusted, so an existing
        // entry): with --force the link is replaced, its target untouched.
        let own_link = shared.path().join(format!("own-link-{i}"));
        std::os::unix::fs::symlink(&victim, &own_link).unwrap();
        let o = run(&own_link, true, false);
        assert!(o.status.success(), "{command:?}: {}", stderr_of(&o));
        assert!(fs::symlink_metadata(&own_link).unwrap().is_file());
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");

        // Through sudo: a new output is the user's.
        let fresh = shared.path().join(format!("fresh-{i}"));
        let o = run(&fresh, false, true);
        assert!(o.status.success(), "{command:?}: {}", stderr_of(&o));
        let meta = fs::symlink_metadata(&fresh).unwrap();
        assert!(meta.is_file());
        assert_eq!(
            (meta.uid(), meta.gid()),
            user,
            "{command:?}: not the user's"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn merge_output_is_not_written_through_links_nor_into_a_full_directory() {
    assert_root();
    let user = test_user();
    let shared = shared_dir();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let h1 = session_copy(shared.path(), "h1", "multihost/netns/h1");
    let h2 = session_copy(shared.path(), "h2", "multihost/netns/h2");
    let merge = |out: &Path, extra: &[&str], sudo: bool| {
        let mut a = vec!["merge", h1.as_str(), h2.as_str(), "-o"];
        let out = s(out);
        a.push(&out);
        a.extend_from_slice(extra);
        storprof_as(sudo.then_some(user), &a)
    };
    let (victim, root_dir) = root_targets(shared.path());

    // Through the user's link to root's directory: refused, even with --force.
    let planted = shared.path().join("planted");
    as_user(user, &["ln", "-s", &s(&root_dir), &s(&planted)]);
    for out in [planted.clone(), planted.join("merged")] {
        for extra in [&[][..], &["--force"][..]] {
            let o = merge(&out, extra, false);
            assert_link_refused(&o, user, &format!("merge {out:?} {extra:?}"));
        }
    }
    assert_eq!(fs::read_dir(&root_dir).unwrap().count(), 0);

    // The user's directory holding their link under report.md's name:
    // refused without --force; with it the link is replaced, not followed.
    let user_dir = shared.path().join("user-dir");
    as_user(user, &["mkdir", &s(&user_dir)]);
    as_user(
        user,
        &["ln", "-s", &s(&victim), &s(&user_dir.join("report.md"))],
    );
    let o = merge(&user_dir, &[], false);
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("is not empty") && stderr_of(&o).contains("--force"),
        "{}",
        stderr_of(&o)
    );
    let o = merge(&user_dir, &["--force"], false);
    assert!(o.status.success(), "{}", stderr_of(&o));
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(fs::metadata(&victim).unwrap().uid(), 0);
    assert!(
        fs::symlink_metadata(user_dir.join("report.md"))
            .unwrap()
            .is_file()
    );

    // Through sudo: the new directory and every file in it are the user's.
    let fresh = shared.path().join("fresh");
    let o = merge(&fresh, &[], true);
    assert!(o.status.success(), "{}", stderr_of(&o));
    let mut owned = vec![fs::symlink_metadata(&fresh).unwrap()];
    for entry in fs::read_dir(&fresh).unwrap() {
        owned.push(fs::symlink_metadata(entry.unwrap().path()).unwrap());
    }
    assert_eq!(
        owned.len(),
        4,
        "merged.json, report.md, merged.tar.gz and the directory"
    );
    for meta in owned {
        assert_eq!((meta.uid(), meta.gid()), user);
    }
}
