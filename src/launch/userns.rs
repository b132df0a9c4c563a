//! A user namespace of the client's own, entered between fork and exec: by the door (with a
//! network namespace, [`door`](super::door)) and by the sandbox (with a mount namespace for a
//! `/dev/pts` of its own, [`sandbox`](super::sandbox)). The executor's uid and gid map to
//! themselves (`<id> <id> 1`, `setgroups` `deny`), so the client runs as the daemon's user;
//! inside it, the child holds the capabilities it needs to mount and to bring `lo` up, which
//! the sandbox drops before exec.
//!
//! Source: user_namespaces(7), mount_namespaces(7) ("a less privileged mount namespace": the
//! copied shared mounts become slaves, so a mount made inside reaches no other namespace).

use std::ffi::CStr;

/// The uid and gid maps, prepared before the fork (the child may not allocate), and the
/// namespace's share of the user's watch limits ([`WATCH_SHARE`]).
#[derive(Debug)]
pub(crate) struct Maps {
    uid: Vec<u8>,
    gid: Vec<u8>,
    watches: [(&'static CStr, Vec<u8>); 4],
}

/// The part of the daemon's user's inotify instances and watches, and fanotify groups and
/// marks, one reviewer may hold: an eighth. The kernel counts each per user in every user
/// namespace up to the first (`ucount`s; the limits are `fs.inotify.max_user_*` and
/// `fs.fanotify.max_user_*`, 128 instances and 128 groups here), and a namespace's own
/// `user.max_inotify_*` and `user.max_fanotify_*` bound what is counted in it. Left at the
/// first's, a reviewer's command in the whole sandbox took all 128 inotify instances of the
/// daemon's user (root here: every process of root on the machine), and while it lived no
/// other process of the user made one (`inotify_init1`: `EMFILE`), the daemon and the next
/// reviewers included; the same with all 128 fanotify groups (`fanotify_init`, unprivileged
/// since Linux 5.13) (red team of stop 53; `launch_sandbox_others`). A client and its
/// servers make one inotify instance each at most (one per event loop).
pub const WATCH_SHARE: u64 = 8;

/// The most tasks (processes and threads) the processes of one reviewer run at once, for a
/// daemon that is not root: `RLIMIT_NPROC`, set by the child in its user namespace, where
/// the kernel counts the tasks of the user in that namespace only (`ucount`s, Linux 5.14),
/// so the reviewer's own, not the daemon's. Without it a reviewer's fork bomb ran up to the
/// user's limit (here 96,368, `threads-max` / 2) and the daemon, and every process of its
/// user, forked nothing while it lived (red team of stop 53; `launch_tasks`). The kernel
/// does not apply the limit to root (`INIT_USER` in `copy_process`), so a root daemon's
/// reviewer is bounded by nothing of this (docs/sandbox.md, "Not yet").
pub const MAX_TASKS: u64 = 4096;

impl Maps {
    /// The executor's effective uid and gid, each mapped to itself; the inotify and
    /// fanotify limits of the executor's user namespace divided by [`WATCH_SHARE`] (at
    /// least 1; none where the kernel has no such limit).
    pub(crate) fn own() -> Maps {
        // SAFETY: geteuid and getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let share = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/user/max_{name}"))
                .ok()
                .and_then(|n| n.trim().parse::<u64>().ok())
                .map(|n| (n / WATCH_SHARE).max(1).to_string().into_bytes())
                .unwrap_or_default()
        };
        Maps {
            uid: format!("{uid} {uid} 1\n").into_bytes(),
            gid: format!("{gid} {gid} 1\n").into_bytes(),
            watches: [
                (
                    c"/proc/sys/user/max_inotify_instances",
                    share("inotify_instances"),
                ),
                (
                    c"/proc/sys/user/max_inotify_watches",
                    share("inotify_watches"),
                ),
                (
                    c"/proc/sys/user/max_fanotify_groups",
                    share("fanotify_groups"),
                ),
                (
                    c"/proc/sys/user/max_fanotify_marks",
                    share("fanotify_marks"),
                ),
            ],
        }
    }
}

fn last() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// In the child: `unshare(CLONE_NEWUSER | also)`, then the maps, the watch limits and the
/// limit of tasks ([`MAX_TASKS`]).
///
/// # Safety
/// Called between fork and exec: system calls on memory prepared before the fork only.
pub(crate) unsafe fn enter(also: libc::c_int, maps: &Maps) -> std::io::Result<()> {
    unsafe {
        if libc::unshare(libc::CLONE_NEWUSER | also) != 0 {
            return Err(last());
        }
        write_proc(c"/proc/self/setgroups", b"deny")?;
        write_proc(c"/proc/self/uid_map", &maps.uid)?;
        write_proc(c"/proc/self/gid_map", &maps.gid)?;
        // The namespace's own limits, written while the child holds its capabilities there
        // (`CAP_SYS_RESOURCE` makes them writable).
        for (path, value) in &maps.watches {
            if !value.is_empty() {
                write_proc(path, value)?;
            }
        }
        let mut tasks = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NPROC, &raw mut tasks) != 0 {
            return Err(last());
        }
        // The hard limit too, which no process of the reviewer may raise again.
        tasks.rlim_cur = tasks.rlim_cur.min(MAX_TASKS);
        tasks.rlim_max = tasks.rlim_max.min(MAX_TASKS);
        if libc::setrlimit(libc::RLIMIT_NPROC, &raw const tasks) != 0 {
            return Err(last());
        }
    }
    Ok(())
}

/// The limits of the namespaces of each kind a user may make in the reviewer's user
/// namespace (its `user.max_*_namespaces`, namespaces(7)), each set to 0 by
/// [`no_more_namespaces`] once the child made its own.
const NAMESPACE_LIMITS: [&CStr; 8] = [
    c"/proc/sys/user/max_user_namespaces",
    c"/proc/sys/user/max_net_namespaces",
    c"/proc/sys/user/max_mnt_namespaces",
    c"/proc/sys/user/max_ipc_namespaces",
    c"/proc/sys/user/max_pid_namespaces",
    c"/proc/sys/user/max_uts_namespaces",
    c"/proc/sys/user/max_cgroup_namespaces",
    c"/proc/sys/user/max_time_namespaces",
];

/// In the child, once its own namespaces are made, before it drops its capabilities: no
/// process of the reviewer makes a namespace of any kind ([`NAMESPACE_LIMITS`] set to 0; a
/// limit this kernel does not have is passed over). A user namespace of its own gave a
/// reviewer's command every capability over the namespaces it then made: it made a network
/// namespace after another, each held by a socket, 300 of them ~60 MB of the kernel's
/// memory, up to the user's `max_net_namespaces` (96,368 here: the machine's memory, and
/// every namespace the daemon's next launch needs); and `CAP_NET_ADMIN` over a network
/// namespace of its own is the kernel's widest surface to an unprivileged user (nf_tables)
/// (red team of stop 53; `launch_sandbox_others`).
///
/// # Safety
/// Called between fork and exec, in a user namespace the child made.
pub(crate) unsafe fn no_more_namespaces() -> std::io::Result<()> {
    for path in NAMESPACE_LIMITS {
        match unsafe { write_proc(path, b"0") } {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            other => other?,
        }
    }
    Ok(())
}

/// In the child, in a mount namespace of its own: a new instance of the `devpts` file system
/// on `/dev/pts` (`newinstance`, `ptmxmode=0666`, `mode=0620`), so that the terminals it
/// opens through `/dev/ptmx` are in it and no other process's terminal is visible there.
/// (`/dev/ptmx` opens the instance mounted at the `pts` beside it: devpts(5), Linux 4.7.)
///
/// # Safety
/// Called between fork and exec.
pub(crate) unsafe fn private_devpts() -> std::io::Result<()> {
    let done = unsafe {
        libc::mount(
            c"devpts".as_ptr(),
            c"/dev/pts".as_ptr(),
            c"devpts".as_ptr(),
            libc::MS_NOSUID | libc::MS_NOEXEC,
            c"newinstance,ptmxmode=0666,mode=0620".as_ptr().cast(),
        )
    };
    if done != 0 {
        return Err(last());
    }
    Ok(())
}

/// Writes `data` to the `/proc` file `path` in one `write`, as the kernel wants a map.
unsafe fn write_proc(path: &CStr, data: &[u8]) -> std::io::Result<()> {
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(last());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let error = (n < 0).then(last);
        libc::close(fd);
        match error {
            Some(e) => Err(e),
            None if usize::try_from(n).ok() != Some(data.len()) => {
                Err(std::io::Error::from_raw_os_error(libc::EIO))
            }
            None => Ok(()),
        }
    }
}

/// Tries, once, in a forked process that exits at once, what `step` does in the child;
/// `Ok(())` when it works for this user on this kernel, else the errno it failed with.
///
/// # Safety
/// `step` runs in the forked child of a possibly multi-threaded process: it must be
/// async-signal-safe (system calls on memory prepared before, no allocation, no lock).
pub(crate) unsafe fn probe(step: impl Fn() -> std::io::Result<()>) -> Result<(), Trial> {
    // SAFETY: the forked child runs `step` (async-signal-safe by this function's contract)
    // and exits with `_exit`; the parent waits for it.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = match step() {
            Ok(()) => 0,
            Err(e) => e.raw_os_error().unwrap_or(libc::EIO) & 0x7f,
        };
        unsafe { libc::_exit(code) };
    }
    if pid < 0 {
        return Err(Trial::NoProcess(last().to_string()));
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    while unsafe { libc::waitpid(pid, &raw mut status, 0) } < 0 {
        if last().kind() != std::io::ErrorKind::Interrupted {
            return Err(Trial::NoProcess("waitpid failed".to_owned()));
        }
    }
    if !libc::WIFEXITED(status) {
        return Err(Trial::NoProcess(format!(
            "the trying process ended with {status:#x}"
        )));
    }
    match libc::WEXITSTATUS(status) {
        0 => Ok(()),
        errno => Err(Trial::Refused(errno)),
    }
}

/// Why a [`probe`] failed.
#[derive(Debug)]
pub(crate) enum Trial {
    /// No process could try it (the reason).
    NoProcess(String),
    /// The step failed with this errno.
    Refused(i32),
}
