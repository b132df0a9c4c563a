//! Removing a launch directory with everything a client left in it: read-only directories
//! included, links never followed, and at the descriptor limit too (issue 33: "at the fd
//! limit, 106–116 of 118 failed launches left their directories, 12–26 holding
//! `auth.json`").
//!
//! The usual way ([`std::fs::remove_dir_all`]) holds a descriptor for each level it is in;
//! at the limit it fails. Then the tree is removed again holding at most two descriptors at
//! a time ([`remove_frugally`]), which [`Spare`] keeps free for it: a launch directory
//! holds two descriptors of its own until it is removed, and gives them back for that.

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Descriptors held for the removal of a launch directory: taken before the directory is
/// created (a launch that cannot take them fails before it creates anything), given back
/// when it is removed.
#[derive(Debug)]
pub(crate) struct Spare(#[allow(dead_code, reason = "held, never read")] [OwnedFd; 2]);

impl Spare {
    /// Two copies of `fd` (`F_DUPFD_CLOEXEC`: they take a slot each, and open nothing).
    pub(crate) fn take(fd: impl AsFd) -> rustix::io::Result<Spare> {
        let fd = fd.as_fd();
        Ok(Spare([
            rustix::io::fcntl_dupfd_cloexec(fd, 0)?,
            rustix::io::fcntl_dupfd_cloexec(fd, 0)?,
        ]))
    }
}

/// Removes `dir` with everything in it, not following links; first gives this user
/// read, write and search permission on every directory in it (a client may leave
/// read-only ones, Go's module cache for one, which a process without `CAP_DAC_OVERRIDE`
/// could not empty otherwise). A `dir` that is not there is no error. Where the process
/// has no descriptor to spare for each level (`EMFILE`, `ENFILE`), the tree is removed
/// holding two at a time ([`remove_frugally`]).
pub(crate) fn remove_tree(dir: &Path) -> std::io::Result<()> {
    match rustix::fs::open(dir, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => {
            let _ = open_up(&fd, 0);
        }
        Err(Errno::NOENT) => return Ok(()),
        Err(_) => {}
    }
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
            remove_frugally(dir).map_err(Into::into)
        }
        other => other,
    }
}

/// Adds `u+rwx` to `dir` and every directory under it (opened without following links).
fn open_up(dir: &OwnedFd, depth: usize) -> rustix::io::Result<()> {
    let stat = rustix::fs::fstat(dir)?;
    if stat.st_mode & 0o700 != 0o700 {
        rustix::fs::fchmod(dir, Mode::from_raw_mode((stat.st_mode & 0o7777) | 0o700))?;
    }
    if depth > 512 {
        return Ok(());
    }
    let mut subdirs = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let kind = entry.file_type();
        if kind == FileType::Directory || kind == FileType::Unknown {
            subdirs.push(name.to_owned());
        }
    }
    for name in subdirs {
        let Ok(sub) = open_dir_at(dir, &name) else {
            continue;
        };
        let _ = open_up(&sub, depth + 1);
    }
    Ok(())
}

/// Opens the directory `name` in `dir` without following a link; one this user may not
/// read (mode `0o000`, say) gets `u+rwx` first, changed by name once it is seen to be a
/// directory.
fn open_dir_at(dir: impl AsFd, name: &std::ffi::CStr) -> rustix::io::Result<OwnedFd> {
    let dir = dir.as_fd();
    match rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()) {
        Err(Errno::ACCESS) => {
            let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
            if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
                return Err(Errno::NOTDIR);
            }
            rustix::fs::chmodat(
                dir,
                name,
                Mode::from_raw_mode((st.st_mode & 0o7777) | 0o700),
                AtFlags::empty(),
            )?;
            rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty())
        }
        other => other,
    }
}

/// Removes `dir` and everything in it holding at most two descriptors at a time: it walks
/// down from `dir` again (each level opened relative to the one above it, without following
/// links, the one above then closed) to the deepest directory not yet emptied, removes what
/// is not a directory there, and goes into its first subdirectory, or removes it once empty.
/// Each walk costs one `openat` a level: slower than [`std::fs::remove_dir_all`], for
/// the descriptor limit only.
pub(crate) fn remove_frugally(dir: &Path) -> rustix::io::Result<()> {
    // The path from `dir` to the directory being emptied, and one emptied there to remove.
    let mut path: Vec<CString> = Vec::new();
    let mut emptied: Option<CString> = None;
    loop {
        let mut here = match rustix::fs::open(dir, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if path.is_empty() => return Ok(()),
            Err(e) => return Err(e),
        };
        for name in &path {
            // Opened before the one above is closed: two at a time.
            here = open_dir_at(&here, name)?;
        }
        let stat = rustix::fs::fstat(&here)?;
        if stat.st_mode & 0o700 != 0o700 {
            rustix::fs::fchmod(&here, Mode::from_raw_mode((stat.st_mode & 0o7777) | 0o700))?;
        }
        if let Some(name) = emptied.take() {
            rustix::fs::unlinkat(&here, &name, AtFlags::REMOVEDIR)?;
        }
        match first_subdir_after_unlinking_the_rest(&here)? {
            Some(sub) => path.push(sub),
            None => {
                drop(here);
                match path.pop() {
                    Some(name) => emptied = Some(name),
                    None => return rustix::fs::rmdir(dir),
                }
            }
        }
    }
}

/// Removes every entry of `dir` that is not a directory, and returns the name of a
/// subdirectory, if any is left. Reads with the one descriptor (`getdents64` into a buffer
/// on the stack).
fn first_subdir_after_unlinking_the_rest(dir: &OwnedFd) -> rustix::io::Result<Option<CString>> {
    use std::mem::MaybeUninit;
    loop {
        rustix::fs::seek(dir, rustix::fs::SeekFrom::Start(0))?;
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut entries = rustix::fs::RawDir::new(dir, &mut buf);
        let (mut files, mut subdir) = (Vec::new(), None);
        while let Some(entry) = entries.next() {
            let entry = entry?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            let mut kind = entry.file_type();
            if kind == FileType::Unknown {
                let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
                kind = FileType::from_raw_mode(st.st_mode);
            }
            if kind == FileType::Directory {
                subdir = Some(name.to_owned());
                break;
            }
            files.push(name.to_owned());
        }
        if files.is_empty() {
            return Ok(subdir);
        }
        for name in files {
            match rustix::fs::unlinkat(dir, &name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(e),
            }
        }
        if subdir.is_some() {
            return Ok(subdir);
        }
        // Read again: a full buffer may not have held every name.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The frugal walk removes what the usual one does: nested and read-only directories,
    /// files, a link (not its target), a directory of mode 0o000.
    #[test]
    fn the_frugal_walk_removes_nested_read_only_trees_and_not_what_links_name() {
        use std::os::unix::fs::PermissionsExt as _;
        let tmp = std::env::temp_dir().join(format!("kcap-frugal-{}", std::process::id()));
        let outside = tmp.with_extension("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), "").unwrap();
        for i in 0..300 {
            let d = tmp.join(format!("a/b{}/c", i % 3));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(format!("f{i}")), "x").unwrap();
        }
        std::os::unix::fs::symlink(&outside, tmp.join("a/link")).unwrap();
        std::fs::create_dir_all(tmp.join("locked/in")).unwrap();
        for (path, mode) in [("a/b1/c", 0o555), ("a/b1", 0o555), ("locked", 0o000)] {
            std::fs::set_permissions(tmp.join(path), std::fs::Permissions::from_mode(mode))
                .unwrap();
        }
        remove_frugally(&tmp).unwrap();
        assert!(!tmp.exists());
        assert!(outside.join("keep").exists(), "followed the link");
        std::fs::remove_dir_all(&outside).unwrap();
        remove_frugally(&tmp).unwrap();
    }
}
