//! The guard: a small process forked (not executed) from the executor, once, that waits for
//! the executor to be gone and then kills this executor's reviewers' cgroup whole.
//!
//! It holds the read end of a pipe whose only write end is the executor's (close-on-exec,
//! so a client it starts drops it at exec). When the executor exits or dies, however it dies
//! (`SIGKILL` included), the kernel closes that end and the guard reads end-of-file: it
//! writes `1` to the reviewers' `cgroup.kill`, which kills every process of every reviewer of
//! this executor, removes their cgroups and the reviewers' cgroup; then it sweeps the
//! parents of this executor's launch directories (below), and exits.
//!
//! The sweep: before a launch with a cgroup creates its launch directory, the executor
//! writes the directory's parent (absolute, once per parent, one `write` of the path and a
//! NUL: at most `PIPE_BUF`, so atomic) into the same pipe ([`Guard::watch_parent`],
//! through [`super::cgroup::guard_parent`]); the guard keeps them, up to [`PARENT_BYTES`],
//! in a buffer made before the fork. Once the reviewers are killed it runs the sweep of each
//! ([`super::sweep`], the same code as [`sweep`](super::sweep())'s: a launch directory
//! beside a lock file of this user's that nobody holds goes, with its credentials), and
//! again every [`SWEEP_RETRY`] while a lock file there is younger than
//! [`SWEEP_MIN_AGE`](super::SWEEP_MIN_AGE), [`SWEEPS`] times at most. So a launch
//! directory of this executor's is gone within the guard's reaction (milliseconds; measured
//! in docs/sandbox.md) of the executor's death, or, for a launch begun less than
//! `SWEEP_MIN_AGE` before it, within `SWEEP_MIN_AGE` and one `SWEEP_RETRY` more. A parent
//! past `PARENT_BYTES`, or whose path is over `PIPE_BUF`, is not sent: its leftovers wait
//! for a later launch's sweep, as without a guard.
//!
//! It runs on a copy of the executor's memory (a fork of a process that may have many
//! threads), so between `fork` and `_exit` it makes system calls only: no allocation, no
//! lock, nothing that is not async-signal-safe (the sweep's walk included: its buffers are
//! made before the fork). It keeps two descriptors (the pipe, the
//! reviewers' cgroup directory, which also holds the executor's `flock` on it) and closes
//! every other one, so that no pipe of a reviewer stays open in it. It is in a process
//! group of its own and ignores the signals a terminal or a signal to the daemon's group
//! sends (`SIGINT`, `SIGTERM`, `SIGHUP`, …), so that it outlives the executor it guards.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// The guard of one executor, a child of the executor's.
#[derive(Debug)]
pub(crate) struct Guard {
    pid: libc::pid_t,
    /// The write end of its pipe (not blocking): closed when the executor is gone; the
    /// parents to sweep are written into it.
    alive: OwnedFd,
}

/// The bytes of parents' paths (each with a NUL) a guard keeps to sweep: 32 KiB, half a
/// pipe's default capacity (64 KiB), so the executor's writes never find it full.
pub(crate) const PARENT_BYTES: usize = 32 * 1024;

/// How often, and how many times at most, the guard sweeps the parents again while a lock
/// file there is younger than [`SWEEP_MIN_AGE`](super::SWEEP_MIN_AGE): 250 ms × 12, 3 s.
pub(crate) const SWEEP_RETRY: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 250_000_000,
};
/// See [`SWEEP_RETRY`].
pub(crate) const SWEEPS: u32 = 12;

/// How often, and how many times, the guard tries to remove the reviewers' cgroups once
/// their processes are killed (they die within milliseconds; one in uninterruptible sleep
/// later): 20 ms × 250, 5 s.
const RETRY: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 20_000_000,
};
const TRIES: u32 = 250;

impl Guard {
    /// Forks the guard of the reviewers' cgroup `dir`, open (and `flock`ed) as `dir_fd`.
    pub(crate) fn spawn(dir: &Path, dir_fd: &OwnedFd) -> io::Result<Guard> {
        let path = CString::new(dir.as_os_str().as_bytes())?;
        let mut ends = [0 as libc::c_int; 2];
        // SAFETY: `ends` is two ints, as pipe2 writes.
        if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both were just opened and are owned here only.
        let (read, write) =
            unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
        // The executor's writes never wait for the guard (one that cannot write a parent
        // leaves it to a later sweep).
        rustix::fs::fcntl_setfl(&write, rustix::fs::OFlags::NONBLOCK)?;
        // The guard's memory, made here: it allocates nothing after the fork.
        let mut parents: Vec<u8> = vec![0; PARENT_BYTES];
        let mut names: Vec<u8> = vec![0; super::remove::WALK_NAME_BYTES];
        // SAFETY: the child runs `watch` only, which makes async-signal-safe system calls on
        // values prepared before the fork and ends in `_exit`.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => unsafe {
                watch(
                    read.as_raw_fd(),
                    dir_fd.as_raw_fd(),
                    path.as_ptr(),
                    &mut parents,
                    &mut names,
                )
            },
            pid => Ok(Guard { pid, alive: write }),
        }
    }

    /// Has the guard sweep `parent` when the executor dies (module docs): one `write` of
    /// the path with its NUL. `false` when the path is over `PIPE_BUF` (such a write is not
    /// atomic) or the write fails.
    pub(crate) fn watch_parent(&self, parent: &CStr) -> bool {
        let bytes = parent.to_bytes_with_nul();
        bytes.len() <= libc::PIPE_BUF
            && rustix::io::write(&self.alive, bytes).is_ok_and(|n| n == bytes.len())
    }

    /// Whether it is still there (it ends only when the executor is gone, or is killed).
    pub(crate) fn alive(&self) -> bool {
        // SAFETY: siginfo_t is plain data; all zeroes is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a siginfo_t; WNOWAIT leaves it unreaped.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                self.pid as libc::id_t,
                &raw mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // Nothing to report: it runs. ECHILD: someone else reaped it.
        // SAFETY: waitid filled `info` (or left it zeroed).
        r == 0 && unsafe { info.si_pid() } == 0
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Dropped when it is found gone, to start another: reaped. (Its pipe closes with
        // this, so a guard that still runs ends its watch now.)
        // SAFETY: a plain waitpid on this process's own child.
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) };
    }
}

/// The guard's whole life, in the forked child.
///
/// # Safety
/// Only in the child of `fork`, with `read` the pipe's read end, `dir` the reviewers'
/// cgroup directory, and `path` its path, NUL-terminated and left alone by the parent;
/// `parents` and `names` the buffers made for it before the fork.
unsafe fn watch(
    read: RawFd,
    dir: RawFd,
    path: *const libc::c_char,
    parents: &mut [u8],
    names: &mut [u8],
) -> ! {
    // SAFETY (the whole function): system calls on values prepared before the fork.
    unsafe {
        libc::setpgid(0, 0);
        for signal in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            libc::signal(signal, libc::SIG_IGN);
        }
        libc::prctl(libc::PR_SET_NAME, c"kcap-guard".as_ptr());
        // Its two descriptors at 0 and 1 (copied above 2 first, so neither overwrites the
        // other), and nothing else open.
        let (r, d) = (
            libc::fcntl(read, libc::F_DUPFD, 3),
            libc::fcntl(dir, libc::F_DUPFD, 3),
        );
        if r < 0 || d < 0 || libc::dup2(r, 0) < 0 || libc::dup2(d, 1) < 0 {
            libc::_exit(1);
        }
        close_from(2);
        // The parents to sweep, until end-of-file: the executor is gone. (Past the buffer,
        // which the executor does not fill, what comes is read and dropped.)
        let (mut len, mut spill) = (0usize, [0u8; 512]);
        loop {
            let room = match parents.get_mut(len..) {
                Some(room) if !room.is_empty() => room,
                _ => &mut spill[..],
            };
            let n = libc::read(0, room.as_mut_ptr().cast(), room.len());
            if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                break;
            }
            if n > 0 && len < parents.len() {
                len += n.unsigned_abs();
            }
        }
        // Its reviewers go.
        let mut removed = false;
        for _ in 0..TRIES {
            kill_all(1);
            remove_children(1);
            if libc::rmdir(path) == 0 || *libc::__errno_location() == libc::ENOENT {
                removed = true;
                break;
            }
            libc::nanosleep(&RETRY, std::ptr::null_mut());
        }
        // Then their launch directories.
        sweep_parents(&parents[..len], names);
        libc::_exit(if removed { 0 } else { 1 })
    }
}

/// The guard's sweep of each parent in `parents` (NUL-terminated paths; one cut short is
/// passed over), again while a lock file there is young (module docs). System calls only.
fn sweep_parents(parents: &[u8], names: &mut [u8]) {
    for _ in 0..SWEEPS {
        let mut young = 0;
        for record in parents.split_inclusive(|&b| b == 0) {
            let Ok(parent) = CStr::from_bytes_with_nul(record) else {
                continue;
            };
            // SAFETY: a NUL-terminated path; the descriptor is closed below.
            let fd = unsafe {
                libc::open(
                    parent.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                )
            };
            if fd < 0 {
                continue;
            }
            // SAFETY: `fd` was just opened, and is closed after.
            young += super::sweep::sweep_at(
                unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) },
                names,
                &mut |_| {},
            );
            // SAFETY: closes the descriptor opened above.
            unsafe { libc::close(fd) };
        }
        if young == 0 {
            return;
        }
        // SAFETY: a timespec constant.
        unsafe { libc::nanosleep(&SWEEP_RETRY, std::ptr::null_mut()) };
    }
}

/// Writes `1` to `cgroup.kill` in the directory `dir`: every process in it and beneath it
/// is killed. Async-signal-safe.
pub(crate) fn kill_all(dir: RawFd) -> bool {
    // SAFETY: a literal path relative to `dir`, a one-byte literal buffer.
    unsafe {
        let fd = libc::openat(
            dir,
            c"cgroup.kill".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false;
        }
        let written = libc::write(fd, b"1".as_ptr().cast(), 1) == 1;
        libc::close(fd);
        written
    }
}

/// Removes the (empty) cgroups directly in the directory `dir`. Async-signal-safe: a buffer
/// on the stack, `getdents64` and `unlinkat` (a cgroup is removed with `rmdir`).
fn remove_children(dir: RawFd) {
    use std::mem::MaybeUninit;
    // SAFETY: `dir` is open for the whole call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(dir) };
    if rustix::fs::seek(fd, rustix::fs::SeekFrom::Start(0)).is_err() {
        return;
    }
    let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
    let mut entries = rustix::fs::RawDir::new(fd, &mut buf);
    while let Some(Ok(entry)) = entries.next() {
        let name = entry.file_name();
        if entry.file_type() == rustix::fs::FileType::Directory
            && name.to_bytes() != b"."
            && name.to_bytes() != b".."
        {
            let _ = rustix::fs::unlinkat(fd, name, rustix::fs::AtFlags::REMOVEDIR);
        }
    }
}

/// Closes every descriptor from `first` up.
///
/// # Safety
/// Only where no descriptor from `first` up is in use (the guard, just forked).
unsafe fn close_from(first: libc::c_int) {
    // SAFETY: close_range(first, ~0, 0), or close on each.
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            0,
        ) == 0
        {
            return;
        }
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit);
        let last = limit.rlim_cur.min(1 << 16) as libc::c_int;
        for fd in first..last {
            libc::close(fd);
        }
    }
}
