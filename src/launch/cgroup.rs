//! The reviewer's cgroup: every process of a reviewer, and everything it starts (what
//! leaves its process group too: `setsid`, a double fork), in a cgroup v2 of its own, killed
//! whole with `cgroup.kill` when the reviewer stops, and when the executor dies.
//!
//! Under the executor's own cgroup (the `0::` entry of `/proc/self/cgroup`, found on the
//! writable `cgroup2` mount of `/proc/self/mountinfo`):
//!
//! ```text
//! <the executor's cgroup>/kcap-<pid>-<random>/           this executor's reviewers
//!                                             launch-<n>/ one reviewer: its client and all it starts
//! ```
//!
//! - The reviewers' cgroup is made at the executor's first launch, and held with an
//!   exclusive `flock` on its directory for as long as the executor (or its guard) lives.
//!   Then the guard is forked, a small process that holds the read end of a pipe whose only
//!   write end is the executor's: when the executor is gone, however it died (`SIGKILL`
//!   too), it reads end-of-file, kills the reviewers' cgroup whole and removes it.
//! - Then the cgroups of executors that are gone (a `kcap-*` sibling whose `flock` is
//!   free: its executor and its guard both gone) are killed and removed: the sweep, for
//!   what a guard killed with its executor (`SIGKILL` to both) left.
//! - Each launch makes `launch-<n>`; the client is born in it (`clone3` with
//!   `CLONE_INTO_CGROUP`: no move, which would wait for an RCU grace period), or where the
//!   kernel refuses that, joins it between fork and exec (it writes `0`, itself, to the
//!   cgroup's `cgroup.procs`, opened before the fork): `src/launch/spawn.rs`. Everything it starts
//!   is born in it. [`Reviewer::stop`](super::Reviewer::stop) writes `1` to its
//!   `cgroup.kill` after the process group's `SIGTERM` and grace, waits (at most
//!   [`EMPTY_WAIT`]) for it to empty, and removes it.
//!
//! docs/sandbox.md, "Nothing outlives the reviewer", has why a cgroup (and not a PID
//! namespace or a subreaper), the measurements and the cost.
//!
//! What it needs: a writable cgroup v2 mount, a cgroup the executor may create cgroups in
//! and move its children within (root, or a delegated cgroup: systemd's `Delegate=yes`),
//! and `cgroup.kill` (Linux 5.14). [`missing`] says what this machine lacks.
//!
//! Sources: the kernel's cgroup v2 documentation
//! (<https://docs.kernel.org/admin-guide/cgroup-v2.html>: "Processes", "Delegation
//! Containment", `cgroup.kill`, `cgroup.events`).

use crate::launch::spawn::Command;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, Mode, OFlags};

use super::error::ExecError;
use super::guard::{self, Guard};
use super::sandbox::Confinement;

/// How long a stop waits for a killed reviewer's cgroup to empty (its processes to have
/// exited) before it leaves the cgroup's removal to a later launch.
pub const EMPTY_WAIT: Duration = Duration::from_secs(2);

/// How the name of an executor's reviewers' cgroup begins (`kcap-<pid>-<random>`).
pub const PREFIX: &str = "kcap-";

/// This executor's reviewers' cgroup, once made.
#[derive(Debug)]
struct Executor {
    dir: PathBuf,
    /// The directory, `flock`ed: the sweep of another executor passes it over.
    lock: OwnedFd,
    guard: Guard,
    /// The parents of launch directories its guard sweeps when the executor dies
    /// ([`guard_parent`]), each sent once to each guard, and their bytes (with a NUL each).
    parents: Vec<std::ffi::CString>,
    parent_bytes: usize,
    next: u64,
    /// Launch cgroups a stop could not remove yet (a process still exiting).
    pending: Vec<PathBuf>,
}

static EXECUTOR: Mutex<Option<Executor>> = Mutex::new(None);

fn executor() -> MutexGuard<'static, Option<Executor>> {
    EXECUTOR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The directory of this process's cgroup v2, on a writable `cgroup2` mount.
///
/// # Errors
/// What is missing: no cgroup v2 entry in `/proc/self/cgroup`, or no writable `cgroup2`
/// mount that shows it.
pub fn own_cgroup() -> Result<PathBuf, String> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("/proc/self/cgroup ({e})"))?;
    let own = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("a cgroup v2 hierarchy (/proc/self/cgroup has no `0::` entry)")?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("/proc/self/mountinfo ({e})"))?;
    for line in mounts.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if right.split(' ').next() != Some("cgroup2") {
            continue;
        }
        // id parent major:minor root mountpoint options …
        let fields: Vec<&str> = left.split(' ').collect();
        let (Some(root), Some(point), Some(options)) =
            (fields.get(3), fields.get(4), fields.get(5))
        else {
            continue;
        };
        if !options.split(',').any(|o| o == "rw") {
            continue;
        }
        let root = unescape(root);
        let inside = if root == "/" {
            Some(own)
        } else {
            own.strip_prefix(root.as_str())
                .filter(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        if let Some(inside) = inside {
            return Ok(Path::new(&unescape(point)).join(inside.trim_start_matches('/')));
        }
    }
    Err(
        "a writable cgroup v2 mount (none in /proc/self/mountinfo shows this process's cgroup)"
            .into(),
    )
}

/// A path of `/proc/self/mountinfo`, its `\ooo` escapes (space, tab, newline, backslash)
/// undone.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(i) = rest.find('\\') {
        out.push_str(&rest[..i]);
        let code = rest
            .get(i + 1..i + 4)
            .and_then(|o| u8::from_str_radix(o, 8).ok());
        match code {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[i + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// What this machine lacks for the reviewers' cgroups, for a refusal or a warning; `None`
/// when launches get them. Makes this executor's reviewers' cgroup and its guard the first
/// time (the launches use them), and sweeps the cgroups of executors that are gone.
pub fn missing() -> Option<String> {
    let mut executor = executor();
    ready(&mut executor).err()
}

/// Makes this executor's reviewers' cgroup and guard if they are not there (a guard that
/// is gone is started again).
fn ready(executor: &mut Option<Executor>) -> Result<&mut Executor, String> {
    if executor.as_ref().is_some_and(|e| !e.guard.alive()) {
        let e = executor.as_mut().unwrap_or_else(|| unreachable!());
        e.guard = Guard::spawn(&e.dir, &e.lock).map_err(|e| format!("a guard process ({e})"))?;
        // The new guard sweeps what the old one would have.
        for parent in &e.parents {
            e.guard.watch_parent(parent);
        }
    }
    if executor.is_none() {
        *executor = Some(make()?);
    }
    executor.as_mut().ok_or_else(String::new)
}

/// Has this executor's guard [`sweep`](super::sweep()) `parent` (absolute) when the
/// executor dies, after it killed the reviewers: called by a launch with a cgroup before it
/// creates its launch directory there. Returns whether the guard will: not past
/// [`guard::PARENT_BYTES`] of parents (each path with a NUL), nor for a path over
/// `PIPE_BUF` (4,096 bytes) or with a NUL, nor without a guard; such a parent's leftovers
/// wait for a later launch's sweep.
pub(crate) fn guard_parent(parent: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let mut executor = executor();
    let Ok(e) = ready(&mut executor) else {
        return false;
    };
    let Ok(parent) = std::ffi::CString::new(parent.as_os_str().as_bytes()) else {
        return false;
    };
    if e.parents.contains(&parent) {
        return true;
    }
    let bytes = parent.as_bytes_with_nul().len();
    if e.parent_bytes + bytes > guard::PARENT_BYTES || !e.guard.watch_parent(&parent) {
        return false;
    }
    e.parent_bytes += bytes;
    e.parents.push(parent);
    true
}

fn make() -> Result<Executor, String> {
    let own = own_cgroup()?;
    let (dir, lock) = claim(&own)?;
    let made = (|| {
        if !dir.join("cgroup.kill").exists() {
            return Err("cgroup.kill (Linux 5.14)".to_owned());
        }
        // Moving a child from its cgroup into `launch-<n>` needs write access to the
        // `cgroup.procs` of both and of their common ancestor, the executor's own.
        for procs in [own.join("cgroup.procs"), dir.join("cgroup.procs")] {
            rustix::fs::accessat(
                rustix::fs::CWD,
                &procs,
                rustix::fs::Access::WRITE_OK,
                rustix::fs::AtFlags::EACCESS,
            )
            .map_err(|e| {
                format!(
                    "a cgroup it may move its children in ({}: {e}; a daemon that is not root \
                     needs a delegated cgroup, systemd's Delegate=yes)",
                    procs.display()
                )
            })?;
        }
        let ours = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        sweep(&own, ours);
        let guard = Guard::spawn(&dir, &lock).map_err(|e| format!("a guard process ({e})"))?;
        Ok(guard)
    })();
    match made {
        Ok(guard) => Ok(Executor {
            dir,
            lock,
            guard,
            parents: Vec::new(),
            parent_bytes: 0,
            next: 0,
            pending: Vec::new(),
        }),
        Err(missing) => {
            let _ = std::fs::remove_dir(&dir);
            Err(missing)
        }
    }
}

/// Makes `kcap-<pid>-<random>` in `own` and takes its `flock`. Another executor's sweep may
/// take a new one's lock first (before this one has it) and remove it: a lock that is
/// taken, or on a directory no longer there, is given up and another name tried.
fn claim(own: &Path) -> Result<(PathBuf, OwnedFd), String> {
    let mut last = String::new();
    for _ in 0..3 {
        let mut random = [0u8; 4];
        let _ = getrandom::fill(&mut random);
        let name = format!(
            "{PREFIX}{}-{:08x}",
            std::process::id(),
            u32::from_le_bytes(random)
        );
        let dir = own.join(name);
        // 0700: another user who could open it could hold its `flock` once this executor and
        // its guard are gone, and the next executor's sweep passed its reviewers over (red
        // team of issue 33).
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                format!(
                    "a cgroup it may create cgroups in (mkdir {}: {e})",
                    dir.display()
                )
            })?;
        let lock = rustix::fs::open(
            &dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("{} ({e})", dir.display()))?;
        let held = rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive)
            .and_then(|()| Ok((rustix::fs::fstat(&lock)?, rustix::fs::stat(&dir)?)));
        match held {
            Ok((fd, path)) if fd.st_ino == path.st_ino && fd.st_dev == path.st_dev => {
                return Ok((dir, lock));
            }
            Ok(_) => last = format!("{} was removed as it was made", dir.display()),
            Err(e) => last = format!("an flock on {} ({e})", dir.display()),
        }
    }
    Err(last)
}

/// Kills and removes the reviewers' cgroups in `own` whose executor is gone (their `flock`
/// is free), passing over `ours`; returns them.
fn sweep(own: &Path, ours: &str) -> Vec<PathBuf> {
    let mut swept = Vec::new();
    let Ok(entries) = std::fs::read_dir(own) else {
        return swept;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(PREFIX) || name == ours || !entry.path().is_dir() {
            continue;
        }
        let Ok(fd) = rustix::fs::open(
            entry.path(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            continue;
        };
        if rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_ok() {
            guard::kill_all(fd.as_raw_fd());
            if remove(&entry.path(), Instant::now() + EMPTY_WAIT) {
                swept.push(entry.path());
            }
        }
    }
    swept
}

/// Removes the cgroup `dir` and every cgroup beneath it, deepest first, retrying until
/// `deadline` while one still holds a process that is exiting. Whether it is gone.
fn remove(dir: &Path, deadline: Instant) -> bool {
    loop {
        if remove_tree(dir) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn remove_tree(dir: &Path) -> bool {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => e.kind() == io::ErrorKind::NotFound,
    }
}

/// One reviewer's cgroup: killed and removed when dropped, if [`LaunchCgroup::stop`] has not
/// done it.
#[derive(Debug)]
pub(crate) struct LaunchCgroup {
    dir: PathBuf,
    done: bool,
}

impl LaunchCgroup {
    /// A cgroup for the next reviewer, as `policy` asks: `None` under
    /// [`Confinement::Off`], or under [`Confinement::BestEffort`] where this machine does
    /// not give one ([`missing`] says why).
    ///
    /// # Errors
    /// [`ExecError::NoCgroup`] under [`Confinement::Required`] where it does not.
    pub(crate) fn new(policy: Confinement) -> Result<Option<LaunchCgroup>, ExecError> {
        if policy == Confinement::Off {
            return Ok(None);
        }
        match Self::make() {
            Ok(cgroup) => Ok(Some(cgroup)),
            Err(missing) if policy == Confinement::Required => Err(ExecError::NoCgroup { missing }),
            Err(_) => Ok(None),
        }
    }

    fn make() -> Result<LaunchCgroup, String> {
        let mut executor = executor();
        let executor = ready(&mut executor)?;
        // Those a stop left, their last processes gone by now.
        executor.pending.retain(|dir| !remove_tree(dir));
        executor.next += 1;
        let dir = executor.dir.join(format!("launch-{}", executor.next));
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {} ({e})", dir.display()))?;
        Ok(LaunchCgroup { dir, done: false })
    }

    /// The cgroup's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Has `cmd`'s child start in this cgroup, before it can start anything: born there
    /// (`clone3` with `CLONE_INTO_CGROUP`, no move), or where the kernel refuses that, moved
    /// there between fork and exec ([`Command::start_in_cgroup`]). Where the kernel refuses
    /// both, a `required` child fails to start; another starts outside
    /// ([`LaunchCgroup::holds`] tells).
    ///
    /// # Errors
    /// When the cgroup's directory or its `cgroup.procs` cannot be opened.
    pub(crate) fn join(&self, cmd: &mut Command, required: bool) -> io::Result<()> {
        cmd.start_in_cgroup(&self.dir, required).map(|_| ())
    }

    /// Whether the started client `pid` (unreaped) is in this cgroup.
    pub(crate) fn holds(&self, pid: u32) -> bool {
        let Ok(cgroups) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return false;
        };
        cgroups
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .is_some_and(|own| self.dir.ends_with(own.trim_start_matches('/')))
    }

    /// Kills every process in the cgroup (`cgroup.kill`).
    ///
    /// # Errors
    /// When `cgroup.kill` cannot be written.
    pub(crate) fn kill(&self) -> io::Result<()> {
        std::fs::write(self.dir.join("cgroup.kill"), b"1")
    }

    /// Kills every process in the cgroup, waits (at most [`EMPTY_WAIT`]) for them to be
    /// gone, and removes it; one that does not empty in time is removed by a later launch.
    ///
    /// # Errors
    /// When `cgroup.kill` cannot be written.
    pub(crate) fn stop(&mut self) -> io::Result<()> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        let killed = self.kill();
        if !remove(&self.dir, Instant::now() + EMPTY_WAIT) {
            if let Some(executor) = executor().as_mut() {
                executor.pending.push(self.dir.clone());
            }
        }
        killed
    }
}

impl Drop for LaunchCgroup {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::unescape;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape("/sys/fs/cgroup"), "/sys/fs/cgroup");
        assert_eq!(unescape("/mnt/a\\040b\\011c\\134d"), "/mnt/a b\tc\\d");
        assert_eq!(unescape("/x\\0"), "/x\\0");
    }
}
