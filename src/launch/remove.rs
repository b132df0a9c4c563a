//! Removing a launch directory with everything a client left in it: read-only directories
//! included, links never followed, and at the descriptor limit too (issue 33: "at the fd
//! limit, 106–116 of 118 failed launches left their directories, 12–26 holding
//! `auth.json`").
//!
//! The usual way ([`std::fs::remove_dir_all`]) holds a descriptor for each level it is in;
//! at the limit it fails. Then the tree is removed again holding at most two descriptors at
//! a time ([`remove_frugally`]), which [`Spare`] keeps free for it: a launch directory
//! holds two descriptors of its own until it is removed, and gives them back for that.

use std::ffi::{CStr, CString};
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

/// Bytes of names the frugal walk keeps (the path from the tree's top to the directory it
/// empties, each name with its NUL): 64 KiB, 256 levels of the longest names a file system
/// allows (255 bytes) and more of shorter ones. A tree deeper than that is left
/// (`ENAMETOOLONG`).
pub(crate) const WALK_NAME_BYTES: usize = 64 * 1024;

/// Removes `dir` and everything in it holding at most two descriptors at a time
/// ([`remove_frugally_at`], `dir` named whole, relative to the working directory).
pub(crate) fn remove_frugally(dir: &Path) -> rustix::io::Result<()> {
    let name = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str()))
        .map_err(|_| Errno::INVAL)?;
    remove_frugally_at(rustix::fs::CWD, &name, &mut vec![0; WALK_NAME_BYTES])
}

/// Removes the directory `name` in `parent` and everything in it holding at most two
/// descriptors at a time: it walks down from `name` again (each level opened relative to the
/// one above it, without following links, the one above then closed) to the deepest
/// directory not yet emptied, removes what is not a directory there, and goes into its
/// first subdirectory, or removes it once empty. Each walk costs one `openat` a level:
/// slower than [`std::fs::remove_dir_all`], for the descriptor limit and the guard.
///
/// System calls only, no allocation (the guard runs it on a fork of a process with many
/// threads): the path walked is kept in `names` (its NUL-terminated names one after the
/// other; [`WALK_NAME_BYTES`] is what callers give), the directories are read with
/// `getdents64` into a buffer on the stack. A directory of this user's that is not
/// `u+rwx` is made so first. `name` not there is no error.
///
/// # Errors
/// The first system call that fails; `ENAMETOOLONG` when the path walked does not fit in
/// `names`. What is not removed yet stays.
pub(crate) fn remove_frugally_at(
    parent: impl AsFd,
    name: &CStr,
    names: &mut [u8],
) -> rustix::io::Result<()> {
    let parent = parent.as_fd();
    // `names[..len]`: the path from `name` to the directory being emptied; `emptied`: the
    // range of a name just popped (still in `names`), emptied there, to remove.
    let mut len = 0;
    let mut emptied: Option<(usize, usize)> = None;
    loop {
        let mut here = match open_dir_at(parent, name) {
            Ok(fd) => fd,
            Err(Errno::NOENT) if len == 0 => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut at = 0;
        while at < len {
            let end = at
                + names[at..len]
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or(Errno::INVAL)?;
            let step = CStr::from_bytes_with_nul(&names[at..=end]).map_err(|_| Errno::INVAL)?;
            // Opened before the one above is closed: two at a time.
            here = open_dir_at(&here, step)?;
            at = end + 1;
        }
        let stat = rustix::fs::fstat(&here)?;
        if stat.st_mode & 0o700 != 0o700 {
            rustix::fs::fchmod(&here, Mode::from_raw_mode((stat.st_mode & 0o7777) | 0o700))?;
        }
        if let Some((start, end)) = emptied.take() {
            let gone = CStr::from_bytes_with_nul(&names[start..=end]).map_err(|_| Errno::INVAL)?;
            rustix::fs::unlinkat(&here, gone, AtFlags::REMOVEDIR)?;
        }
        match first_subdir_after_unlinking_the_rest(&here, &mut names[len..])? {
            Some(taken) => len += taken,
            None => {
                drop(here);
                if len == 0 {
                    return rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR);
                }
                let start = names[..len - 1]
                    .iter()
                    .rposition(|&b| b == 0)
                    .map_or(0, |i| i + 1);
                emptied = Some((start, len - 1));
                len = start;
            }
        }
    }
}

/// Removes every entry of `dir` that is not a directory, and copies the name of a
/// subdirectory, if any is left, into `out` with its NUL, returning its length. Reads with
/// the one descriptor (`getdents64` into a buffer on the stack); allocates nothing.
fn first_subdir_after_unlinking_the_rest(
    dir: &OwnedFd,
    out: &mut [u8],
) -> rustix::io::Result<Option<usize>> {
    use std::mem::MaybeUninit;
    loop {
        rustix::fs::seek(dir, rustix::fs::SeekFrom::Start(0))?;
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut entries = rustix::fs::RawDir::new(dir, &mut buf);
        let (mut unlinked, mut subdir) = (0usize, None);
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
                if subdir.is_none() {
                    let bytes = name.to_bytes_with_nul();
                    out.get_mut(..bytes.len())
                        .ok_or(Errno::NAMETOOLONG)?
                        .copy_from_slice(bytes);
                    subdir = Some(bytes.len());
                }
                continue;
            }
            match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => unlinked += 1,
                Err(e) => return Err(e),
            }
        }
        if subdir.is_some() || unlinked == 0 {
            return Ok(subdir);
        }
        // Read again: entries unlinked while reading may have hidden others.
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
