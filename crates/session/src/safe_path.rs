//! Output paths a root tool can trust. storprof runs as root and writes
//! where users point it, often in /tmp or a shared directory, where another
//! user may have planted a symbolic link to a file of root's. So:
//! - a session directory whose path holds a symbolic link owned by someone
//!   other than root or the invoking user (SUDO_UID, else the real uid) is
//!   refused (the rule of the kernel's `fs.protected_symlinks`, applied to
//!   every component);
//! - an existing directory that is not empty is written into only with
//!   `--force`;
//! - each file is unlinked when present (a link, not its target) and
//!   created with `O_CREAT | O_EXCL | O_NOFOLLOW`, so a link planted in
//!   between makes the write fail instead of following it;
//! - an output file named on the command line (`bundle -o`, `flamegraph
//!   -o`) passes the same symbolic link check, and an existing file (or
//!   link) of that name is replaced only with `--force`.
use std::{
    fs,
    io::{self, Write},
    os::unix::fs::{MetadataExt, OpenOptionsExt},
    path::{Path, PathBuf},
};

/// Why an output directory was refused.
#[derive(Debug, thiserror::Error)]
pub enum UnsafeOutput {
    #[error(
        "{path} is a symbolic link owned by uid {owner}, neither root nor you: \
         refusing to write through it"
    )]
    ForeignSymlink { path: PathBuf, owner: u32 },
    #[error(
        "{path} exists and is not empty ({entries} entries): pass --force to write \
         into it (files of the same names are replaced)"
    )]
    NotEmpty { path: PathBuf, entries: usize },
    #[error("{path} exists and is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("{path} exists: pass --force to replace it")]
    FileExists { path: PathBuf },
    #[error("{path} is a directory: name a file to write")]
    IsADirectory { path: PathBuf },
    #[error("checking {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The user storprof acts for: SUDO_UID under sudo, else the real uid.
pub fn invoking_uid() -> u32 {
    std::env::var("SUDO_UID")
        .ok()
        .and_then(|v| v.parse().ok())
        // SAFETY: getuid has no preconditions and cannot fail.
        .unwrap_or_else(|| unsafe { libc::getuid() })
}

/// `path` made absolute against the current directory.
fn absolute(path: &Path) -> Result<PathBuf, UnsafeOutput> {
    if path.is_absolute() {
        return Ok(path.to_path_buf());
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(path))
        .map_err(|source| UnsafeOutput::Io {
            path: path.to_path_buf(),
            source,
        })
}

/// Refuses `absolute` when a component of it is a symbolic link owned by
/// neither root nor `trusted_uid`; returns the last component's own
/// metadata (not followed), None when some component does not exist yet.
fn check_links(absolute: &Path, trusted_uid: u32) -> Result<Option<fs::Metadata>, UnsafeOutput> {
    let mut prefix = PathBuf::new();
    let mut last = None;
    for component in absolute.components() {
        prefix.push(component);
        let meta = match fs::symlink_metadata(&prefix) {
            Ok(m) => m,
            // The rest does not exist yet: create_dir_all makes it.
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(UnsafeOutput::Io {
                    path: prefix,
                    source,
                });
            }
        };
        if meta.file_type().is_symlink() && meta.uid() != 0 && meta.uid() != trusted_uid {
            return Err(UnsafeOutput::ForeignSymlink {
                path: prefix,
                owner: meta.uid(),
            });
        }
        last = Some(meta);
    }
    Ok(last)
}

/// Checks that `dir` may receive a session: no component of its path is a
/// symbolic link owned by a user other than root or `trusted_uid`, and it
/// is absent, an empty directory, or (with `force`) any directory.
pub fn check_output_dir(dir: &Path, force: bool, trusted_uid: u32) -> Result<(), UnsafeOutput> {
    let io_err = |path: &Path, source| UnsafeOutput::Io {
        path: path.to_path_buf(),
        source,
    };
    let absolute = absolute(dir)?;
    if check_links(&absolute, trusted_uid)?.is_none() {
        return Ok(());
    }
    let meta = fs::metadata(&absolute).map_err(|e| io_err(&absolute, e))?;
    if !meta.is_dir() {
        return Err(UnsafeOutput::NotADirectory { path: absolute });
    }
    if !force {
        let entries = fs::read_dir(&absolute)
            .map_err(|e| io_err(&absolute, e))?
            .count();
        if entries > 0 {
            return Err(UnsafeOutput::NotEmpty {
                path: absolute,
                entries,
            });
        }
    }
    Ok(())
}

/// Checks that the file `path` may be written: no component of its path
/// is a symbolic link owned by a user other than root or `trusted_uid`
/// (the file's own name included), it is not a directory, and it does not
/// exist unless `force` (then [`create_file`] replaces it; a link is
/// replaced, never followed).
pub fn check_output_file(path: &Path, force: bool, trusted_uid: u32) -> Result<(), UnsafeOutput> {
    let absolute = absolute(path)?;
    match check_links(&absolute, trusted_uid)? {
        None => Ok(()),
        Some(meta) if meta.is_dir() => Err(UnsafeOutput::IsADirectory { path: absolute }),
        Some(_) if !force => Err(UnsafeOutput::FileExists { path: absolute }),
        Some(_) => Ok(()),
    }
}

/// Creates a fresh `path` (mode 0644) for writing: an existing entry of
/// that name is unlinked first (a symbolic link is removed, not
/// followed), and the file is created with `O_EXCL | O_NOFOLLOW`.
pub fn create_file(path: &Path) -> io::Result<fs::File> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Writes `bytes` to a fresh `path` (see [`create_file`]).
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    create_file(path)?.write_all(bytes)
}

/// When storprof runs through sudo, hands `path` to the invoking user
/// (SUDO_UID/SUDO_GID) so they can read, move and delete the outputs.
/// Best effort: failures are logged, not returned.
pub fn give_to_invoking_user(path: &Path) {
    let parse = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u32>().ok());
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if let (true, Some(uid), Some(gid)) = (root, parse("SUDO_UID"), parse("SUDO_GID"))
        // lchown: a link planted in place of the file is not followed.
        && let Err(e) = std::os::unix::fs::lchown(path, Some(uid), Some(gid))
    {
        log::warn!("cannot chown {} to {uid}:{gid}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> u32 {
        // SAFETY: getuid has no preconditions.
        unsafe { libc::getuid() }
    }

    #[test]
    fn absent_and_empty_dirs_are_fine_and_a_full_one_needs_force() {
        let tmp = tempfile::tempdir().unwrap();
        let absent = tmp.path().join("a/b/session");
        check_output_dir(&absent, false, me()).unwrap();
        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        check_output_dir(&empty, false, me()).unwrap();
        fs::write(empty.join("notes.txt"), "mine").unwrap();
        let err = check_output_dir(&empty, false, me()).unwrap_err();
        assert!(
            matches!(err, UnsafeOutput::NotEmpty { entries: 1, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("pass --force"), "{err}");
        check_output_dir(&empty, true, me()).unwrap();
        let file = tmp.path().join("file");
        fs::write(&file, "x").unwrap();
        assert!(matches!(
            check_output_dir(&file, true, me()),
            Err(UnsafeOutput::NotADirectory { .. })
        ));
    }

    #[test]
    fn symlinks_of_root_or_the_user_are_followed_others_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        // Owned by this user: trusted.
        check_output_dir(&link.join("session"), false, me()).unwrap();
        // Owned by someone the check does not trust (root's own links are
        // always trusted, so only a non-root owner can be tested here).
        if me() != 0 {
            let err = check_output_dir(&link.join("session"), false, me() + 1).unwrap_err();
            assert!(
                matches!(&err, UnsafeOutput::ForeignSymlink { path, .. } if *path == link),
                "{err}"
            );
        }
    }

    #[test]
    fn an_output_file_is_replaced_only_with_force_and_never_through_a_foreign_link() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out.tar.gz");
        check_output_file(&out, false, me()).unwrap();
        fs::write(&out, "old").unwrap();
        let err = check_output_file(&out, false, me()).unwrap_err();
        assert!(matches!(err, UnsafeOutput::FileExists { .. }), "{err}");
        assert!(err.to_string().contains("pass --force"), "{err}");
        check_output_file(&out, true, me()).unwrap();
        assert!(matches!(
            check_output_file(tmp.path(), true, me()),
            Err(UnsafeOutput::IsADirectory { .. })
        ));
        // The user's own link under the file's name: an existing entry.
        let link = tmp.path().join("link.svg");
        std::os::unix::fs::symlink(&out, &link).unwrap();
        assert!(matches!(
            check_output_file(&link, false, me()),
            Err(UnsafeOutput::FileExists { .. })
        ));
        check_output_file(&link, true, me()).unwrap();
        if me() != 0 {
            // Someone else's link: refused even with --force.
            let err = check_output_file(&link, true, me() + 1).unwrap_err();
            assert!(matches!(err, UnsafeOutput::ForeignSymlink { .. }), "{err}");
        }
    }

    #[test]
    fn write_file_replaces_a_planted_link_without_following_it() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let out = tmp.path().join("session.json");
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        write_file(&out, b"{}\n").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(fs::read_to_string(&out).unwrap(), "{}\n");
        assert!(!fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
        write_file(&out, b"again").unwrap();
        assert_eq!(fs::read_to_string(&out).unwrap(), "again");
    }
}
