//! storprof as root, writing where another user can plant links. A real
//! unprivileged user (created here with useradd when missing) plants
//! symbolic links to root's files in a shared sticky directory, as in /tmp:
//! - `record --output` through the user's link is refused, root's
//!   directory untouched;
//! - a directory of the user's is written into only with `--force`, and a
//!   link planted there under a session file's name is replaced, not
//!   followed;
//! - run as through sudo (SUDO_UID/SUDO_GID), the command runs as the user
//!   (it cannot read a root-only file) and the session is theirs.
//!
//! Root only.
// Tests may unwrap (a failure is a test failure).
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod support;

use std::{
    fs, os::unix::fs::MetadataExt, os::unix::fs::PermissionsExt, path::Path, process::Command,
};

use support::{STORPROF, assert_root};

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
