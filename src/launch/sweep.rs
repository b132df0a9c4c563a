//! The sweep of a parent of launch directories: every launch directory there whose launch
//! is gone is removed, with its lock file. One implementation, in system calls only, for
//! both sweepers: [`sweep`] (an executor's first launch into a parent, [`once`]) and the
//! guard (src/launch/guard.rs), which runs it on a fork of a process with many threads when
//! its executor dies, on the parents the executor named to it ([`once`] again).
//!
//! The rule, for each entry of the parent named `.<name>.kcap-lock` ([`LOCK_SUFFIX`],
//! `<name>` non-empty UTF-8): passed over when younger than [`SWEEP_MIN_AGE`] (a launch may
//! be between creating it and locking it); else opened without following a link and
//! without blocking (a FIFO in its place is not waited on), `flock`ed exclusively without
//! waiting (one held is a live launch's), and checked to be still the file the parent names
//! (not one removed meanwhile). Then, when it is a regular file of this user's with no other
//! name ([`left_by_us`]), the directory `<name>` beside it goes, if it is a directory of
//! this user's (not a link), with everything in it ([`remove_frugally_at`]); and the lock
//! file is removed, still held.

use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};

use super::prepare::{LOCK_SUFFIX, SWEEP_MIN_AGE, left_by_us};
use super::remove::{WALK_NAME_BYTES, remove_frugally_at};

/// Removes every launch directory in `parent` whose launch is gone (its lock file there,
/// free, and a regular file of this user's with no other name), with its lock file; returns the directories
/// removed. A directory of another user is left (its lock file removed), and so is one
/// whose lock file is another user's. The rule is the module's; the guard runs the same
/// code when its executor dies.
///
/// # Errors
/// When `parent` cannot be opened as a directory.
pub fn sweep(parent: &Path) -> std::io::Result<Vec<PathBuf>> {
    let fd = rustix::fs::open(
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut names = vec![0; WALK_NAME_BYTES];
    let mut removed = Vec::new();
    sweep_at(&fd, &mut names, &mut |name| {
        removed.push(parent.join(std::ffi::OsStr::from_bytes(name.to_bytes())));
    });
    Ok(removed)
}

/// One pass of the sweep over the directory `parent` (open): calls `removed` with the name
/// of each launch directory it removed, and returns how many lock files it passed over as
/// younger than [`SWEEP_MIN_AGE`] (the guard sweeps again once they are of age).
///
/// System calls only, no allocation: `names` is the frugal walk's ([`WALK_NAME_BYTES`]),
/// the entries are read with `getdents64` into a buffer on the stack, `removed` is the
/// caller's (the guard's does nothing). An entry it cannot read, open, lock or remove is
/// left as it is.
pub(crate) fn sweep_at(
    parent: impl AsFd,
    names: &mut [u8],
    removed: &mut dyn FnMut(&CStr),
) -> usize {
    use std::mem::MaybeUninit;
    let parent = parent.as_fd();
    let mut young = 0;
    if rustix::fs::seek(parent, rustix::fs::SeekFrom::Start(0)).is_err() {
        return young;
    }
    let now = now();
    let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
    let mut entries = rustix::fs::RawDir::new(parent, &mut buf);
    while let Some(Ok(entry)) = entries.next() {
        let lock = entry.file_name();
        let Some(dir) = lock
            .to_bytes()
            .strip_prefix(b".")
            .and_then(|n| n.strip_suffix(LOCK_SUFFIX.as_bytes()))
            .filter(|n| !n.is_empty() && std::str::from_utf8(n).is_ok())
        else {
            continue;
        };
        let Ok(seen) = rustix::fs::statat(parent, lock, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let age = now - (seen.st_mtime as i128 * 1_000_000_000 + seen.st_mtime_nsec as i128);
        if age < SWEEP_MIN_AGE.as_nanos() as i128 {
            young += 1;
            continue;
        }
        // The directory's name with a NUL, beside the lock's.
        let mut dir_name = [0u8; 256];
        let Some(slot) = dir_name.get_mut(..dir.len()) else {
            continue;
        };
        slot.copy_from_slice(dir);
        let Ok(dir) = CStr::from_bytes_with_nul(&dir_name[..=dir.len()]) else {
            continue;
        };
        if let Some(gone) = take_leftover(parent, lock, dir, names) {
            if gone {
                removed(dir);
            }
        }
    }
    young
}

/// Takes the lock file `lock` in `parent` (not following a link, not blocking, not waiting
/// for its `flock`); when it is still the file `parent` names, removes `dir` if the lock was
/// [`left_by_us`] and `dir` is a directory of this user's, then the lock file. `None` when
/// the lock was not taken; else whether `dir` was removed.
fn take_leftover(
    parent: BorrowedFd<'_>,
    lock: &CStr,
    dir: &CStr,
    names: &mut [u8],
) -> Option<bool> {
    let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = rustix::fs::openat(parent, lock, flags, Mode::empty()).ok()?;
    rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).ok()?;
    let held = rustix::fs::fstat(&fd).ok()?;
    let now = rustix::fs::statat(parent, lock, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    if now.st_dev != held.st_dev || now.st_ino != held.st_ino {
        return None;
    }
    let mut gone = false;
    if left_by_us(&held) {
        let ours = rustix::fs::statat(parent, dir, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
            FileType::from_raw_mode(st.st_mode) == FileType::Directory
                && st.st_uid == rustix::process::geteuid().as_raw()
        });
        gone = ours && remove_frugally_at(parent, dir, names).is_ok();
    }
    // Removed before it is released (`fd` closes after): whoever opens it next and gets
    // the lock finds the path no longer names it.
    let _ = rustix::fs::unlinkat(parent, lock, AtFlags::empty());
    drop(fd);
    Some(gone)
}

/// The time of day in nanoseconds (`clock_gettime(CLOCK_REALTIME)`, async-signal-safe).
fn now() -> i128 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &raw mut t) };
    t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128
}

/// What a launch does with the parent of `launch_dir` before it claims it: the first time
/// this process launches there, [`sweep`]s it; and, when the launch has a guard (`guarded`:
/// it runs in a cgroup of this executor's), has the guard sweep it when the executor dies
/// ([`super::cgroup::guard_parent`]).
pub(crate) fn once(launch_dir: &Path, guarded: bool) {
    static SWEPT: std::sync::Mutex<std::collections::BTreeSet<std::path::PathBuf>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let Ok(launch_dir) = std::path::absolute(launch_dir) else {
        return;
    };
    let Some(parent) = launch_dir.parent() else {
        return;
    };
    if guarded {
        super::cgroup::guard_parent(parent);
    }
    let first = SWEPT
        .lock()
        .map(|mut s| s.insert(parent.to_owned()))
        .unwrap_or(false);
    if first {
        let _ = sweep(parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets the modification time of `path` itself (a link's own, a FIFO's) to `secs` ago.
    fn age(path: &Path, secs: i64) {
        let then = libc::timespec {
            tv_sec: (now() / 1_000_000_000) as libc::time_t - secs,
            tv_nsec: 0,
        };
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path and two timespecs.
        let r = unsafe {
            libc::utimensat(
                libc::AT_FDCWD,
                c.as_ptr(),
                [then, then].as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        assert_eq!(r, 0, "{}", path.display());
    }

    /// One pass over a parent holding each kind of lock file the rule names: only the
    /// directory beside a free regular lock file of this user's, of age, goes; a young one is
    /// counted; a FIFO is not waited on; a link is not followed; a lock file with a second
    /// name, or one held, keeps its directory. Bites: with `left_by_us` passing a second
    /// name, `linked` is removed too.
    #[test]
    fn one_pass_removes_only_what_a_free_lock_file_of_ours_of_age_names() {
        let tmp = std::env::temp_dir().join(format!("kcap-sweep-at-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        for d in ["gone", "young", "fifo", "link", "linked", "held"] {
            std::fs::create_dir_all(tmp.join(d).join("home")).unwrap();
            std::fs::write(tmp.join(d).join("home/auth.json"), "{}").unwrap();
        }
        let lock = |d: &str| tmp.join(format!(".{d}{LOCK_SUFFIX}"));
        for d in ["gone", "young", "held"] {
            std::fs::write(lock(d), "").unwrap();
        }
        let fifo = std::ffi::CString::new(lock("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::write(tmp.join("target"), "").unwrap();
        std::os::unix::fs::symlink(tmp.join("target"), lock("link")).unwrap();
        std::fs::hard_link(tmp.join("target"), lock("linked")).unwrap();
        for d in ["gone", "fifo", "link", "linked", "held"] {
            age(&lock(d), 10);
        }
        let held = std::fs::File::open(lock("held")).unwrap();
        rustix::fs::flock(&held, FlockOperation::NonBlockingLockExclusive).unwrap();

        let fd = rustix::fs::open(&tmp, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let mut names = vec![0; WALK_NAME_BYTES];
        let mut removed = Vec::new();
        let young = sweep_at(&fd, &mut names, &mut |n| removed.push(n.to_owned()));
        assert_eq!(removed, vec![c"gone".to_owned()]);
        assert_eq!(young, 1);
        assert!(!tmp.join("gone").exists() && !lock("gone").exists());
        for d in ["young", "fifo", "link", "linked", "held"] {
            assert!(tmp.join(d).join("home/auth.json").exists(), "{d}");
        }
        assert!(tmp.join("target").exists(), "followed the link");
        drop(held);
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
