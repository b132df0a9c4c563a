//! The guard: a small process forked (not executed) from the executor, once, that waits for
//! the executor to be gone and then kills this executor's reviewers' cgroup whole.
//!
//! It holds the read end of a pipe whose only write end is the executor's (close-on-exec,
//! so a client it starts drops it at exec). When the executor exits or dies, however it dies
//! (`SIGKILL` included), the kernel closes that end and the guard reads end-of-file: it
//! writes `1` to the reviewers' `cgroup.kill`, which kills every process of every reviewer of
//! this executor, removes their cgroups and the reviewers' cgroup, and exits.
//!
//! It runs on a copy of the executor's memory (a fork of a process that may have many
//! threads), so between `fork` and `_exit` it makes system calls only: no allocation, no
//! lock, nothing that is not async-signal-safe. It keeps two descriptors (the pipe, the
//! reviewers' cgroup directory, which also holds the executor's `flock` on it) and closes
//! every other one, so that no pipe of a reviewer stays open in it. It is in a process
//! group of its own and ignores the signals a terminal or a signal to the daemon's group
//! sends (`SIGINT`, `SIGTERM`, `SIGHUP`, …), so that it outlives the executor it guards.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// The guard of one executor, a child of the executor's.
#[derive(Debug)]
pub(crate) struct Guard {
    pid: libc::pid_t,
    /// The write end of its pipe: closed when the executor is gone.
    _alive: OwnedFd,
}

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
        // SAFETY: the child runs `watch` only, which makes async-signal-safe system calls on
        // values prepared before the fork and ends in `_exit`.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => unsafe { watch(read.as_raw_fd(), dir_fd.as_raw_fd(), path.as_ptr()) },
            pid => Ok(Guard { pid, _alive: write }),
        }
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
/// cgroup directory, and `path` its path, NUL-terminated and left alone by the parent.
unsafe fn watch(read: RawFd, dir: RawFd, path: *const libc::c_char) -> ! {
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
        let mut byte = 0u8;
        loop {
            let n = libc::read(0, (&raw mut byte).cast(), 1);
            if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                break;
            }
        }
        // The executor is gone: its reviewers go.
        for _ in 0..TRIES {
            kill_all(1);
            remove_children(1);
            if libc::rmdir(path) == 0 || *libc::__errno_location() == libc::ENOENT {
                libc::_exit(0);
            }
            libc::nanosleep(&RETRY, std::ptr::null_mut());
        }
        libc::_exit(1)
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
