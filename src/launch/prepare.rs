//! Before the client starts: [`check`] refuses a plan or a launch directory that is not
//! safe to carry out, before anything is created; [`create`] makes the per-launch
//! directory, its `dirs` and `files` without following links; [`remove_worktree_paths`]
//! removes `worktree_remove` from the worktree.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use super::args::{check_argv, check_env};
use super::error::{ExecError, PathField, Step};
use super::remove::{Spare, remove_tree};
use crate::clients::plan::{LaunchPlan, PLAN_VERSION};

/// Directories are created with this mode (the plan's `dirs`, and each file's parents).
pub const DIR_MODE: u32 = 0o700;

/// Refuses what must not be carried out, before anything is created: a plan of another
/// version; a `dirs`, `files` or `worktree_remove` path that is not a plain relative path or
/// goes through a symbolic link that exists; a `sandbox` path that is not a plain absolute
/// path; a file mode beyond 0o777; an environment that
/// cannot be set exactly; a typed prompt holding a control character other than a line
/// break or a tab; a launch directory that exists and is not an empty directory of
/// this user's.
pub(crate) fn check(plan: &LaunchPlan, launch_dir: &Path) -> Result<(), ExecError> {
    if plan.version != PLAN_VERSION {
        return Err(ExecError::Version {
            found: plan.version,
            expected: PLAN_VERSION,
        });
    }
    check_paths(plan)?;
    check_argv(plan)?;
    check_env(plan)?;
    // Typed into the client's terminal: a control character would be a key.
    if let Some(found) = plan.typed_prompt.as_ref().and_then(|t| {
        t.text
            .chars()
            .find(|&c| crate::clients::plan::is_refused_in_terminal_prompt(c))
    }) {
        return Err(ExecError::TypedPromptChar { found });
    }
    // A launch checks it again once it holds the directory's [`Claim`].
    check_launch_dir(launch_dir, true)?;
    for path in plan.dirs.iter().chain(plan.files.iter().map(|f| &f.path)) {
        let field = if plan.dirs.contains(path) {
            PathField::Dirs
        } else {
            PathField::Files
        };
        no_symlink_on_the_way(launch_dir, path, field, true)?;
    }
    if let Some(cwd) = plan.cwd.as_deref() {
        match std::fs::metadata(cwd) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(ExecError::WorktreeMissing {
                    path: cwd.into(),
                    source: std::io::Error::from(std::io::ErrorKind::NotADirectory),
                });
            }
            Err(source) => {
                return Err(ExecError::WorktreeMissing {
                    path: cwd.into(),
                    source,
                });
            }
        }
    }
    if plan.worktree_remove.is_empty() {
        return Ok(());
    }
    let cwd = plan.cwd.as_deref().ok_or(ExecError::NoWorktree)?;
    for path in &plan.worktree_remove {
        // The path itself may be a link: removing it removes the link only.
        no_symlink_on_the_way(Path::new(cwd), path, PathField::WorktreeRemove, false)?;
    }
    Ok(())
}

/// What is wrong with `path` as a plan path (relative, `/`-separated, no empty, `.` or
/// `..` component), if anything.
pub fn path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        Some("is empty")
    } else if path.starts_with('/') {
        Some("is absolute; plan paths are relative")
    } else if path.contains('\0') {
        Some("holds a NUL byte")
    } else if path.split('/').any(|c| c == "..") {
        Some("has a `..` component, which could leave its directory")
    } else if path.split('/').any(|c| c == ".") {
        Some("has a `.` component")
    } else if path.split('/').any(str::is_empty) {
        Some("has an empty component (`//` or a trailing `/`)")
    } else {
        None
    }
}

/// What is wrong with `path` as a path of the plan's sandbox (absolute, no `.` or `..`
/// component: the kernel resolves it as written, and the executor would otherwise resolve a
/// relative one against its own working directory; not `/`, which would undo the sandbox: a
/// hand-edited plan's, found by the red team of issue 31), if anything.
fn sandbox_path_problem(path: &str) -> Option<&'static str> {
    match path.strip_prefix('/') {
        None => Some("is not absolute; sandbox paths are absolute"),
        Some("") => Some("is `/`, the whole file system, which no reviewer needs"),
        Some(rest) if rest.starts_with('/') => Some("has an empty component (`//`)"),
        Some(rest) => path_problem(rest.strip_suffix('/').unwrap_or(rest)),
    }
}

fn check_paths(plan: &LaunchPlan) -> Result<(), ExecError> {
    let bad = |field, path: &str, problem| ExecError::BadPath {
        field,
        path: path.to_owned(),
        problem,
    };
    let fields = [
        (PathField::Dirs, plan.dirs.iter().collect::<Vec<_>>()),
        (
            PathField::Files,
            plan.files.iter().map(|f| &f.path).collect(),
        ),
        (
            PathField::WorktreeRemove,
            plan.worktree_remove.iter().collect(),
        ),
        (
            PathField::TypedPromptLog,
            plan.typed_prompt.iter().map(|t| &t.log).collect(),
        ),
        (
            PathField::ServersReadyLog,
            plan.servers_ready.iter().map(|t| &t.log).collect(),
        ),
    ];
    for (field, paths) in &fields {
        for path in paths {
            // A log may be a directory, written with a trailing `/` (`gate`).
            let logs = [PathField::TypedPromptLog, PathField::ServersReadyLog];
            let checked = match path.strip_suffix('/') {
                Some(dir) if logs.contains(field) => dir,
                _ => path,
            };
            if let Some(problem) = path_problem(checked) {
                return Err(bad(*field, path, problem));
            }
        }
    }
    for (_, path) in plan.sandbox.paths() {
        if let Some(problem) = sandbox_path_problem(path) {
            return Err(bad(PathField::Sandbox, path, problem));
        }
    }
    if let Some(kept) = &plan.pr_config {
        let inside = kept
            .strip_prefix(plan.launch_dir.as_str())
            .and_then(|rest| rest.strip_prefix('/'));
        match inside {
            None | Some("") => {
                return Err(bad(
                    PathField::PrConfig,
                    kept,
                    "is not a directory in the launch directory",
                ));
            }
            Some(rest) => {
                if let Some(problem) = path_problem(rest) {
                    return Err(bad(PathField::PrConfig, kept, problem));
                }
            }
        }
    }
    let dirs: BTreeSet<&str> = plan.dirs.iter().map(String::as_str).collect();
    let mut files = BTreeSet::new();
    for file in &plan.files {
        if file.mode & !0o777 != 0 {
            return Err(ExecError::BadMode {
                path: file.path.clone(),
                mode: file.mode,
            });
        }
        if !files.insert(file.path.as_str()) {
            return Err(bad(PathField::Files, &file.path, "is given twice"));
        }
        if dirs.contains(file.path.as_str()) {
            return Err(bad(PathField::Files, &file.path, "is also one of the dirs"));
        }
    }
    // A file cannot also be the parent of another file or directory.
    for path in plan.files.iter().map(|f| &f.path).chain(&plan.dirs) {
        for (i, _) in path.match_indices('/') {
            if files.contains(&path[..i]) {
                return Err(bad(
                    PathField::Files,
                    &path[..i],
                    "is a file and the parent directory of another path of the plan",
                ));
            }
        }
    }
    Ok(())
}

/// Refuses a launch directory whose parent every user may write and that is not sticky
/// ([`ExecError::LaunchDirParentOpen`]), and one that exists and is not an empty directory
/// of this user's;
/// with `stale_ok`, one whose lock is left by a launch that is gone (a launch takes it over,
/// removing what is left) passes.
pub(crate) fn check_launch_dir(dir: &Path, stale_ok: bool) -> Result<(), ExecError> {
    use std::os::unix::fs::PermissionsExt as _;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty())
        && let Ok(meta) = std::fs::metadata(parent)
        && meta.permissions().mode() & 0o1002 == 0o002
    {
        return Err(ExecError::LaunchDirParentOpen {
            parent: parent.into(),
        });
    }
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(ExecError::io(Step::Check, dir, e)),
    };
    if !meta.file_type().is_dir() {
        return Err(ExecError::LaunchDirNotDir { dir: dir.into() });
    }
    let uid = rustix::process::geteuid().as_raw();
    if meta.uid() != uid {
        return Err(ExecError::LaunchDirNotOwned {
            dir: dir.into(),
            owner: meta.uid(),
            uid,
        });
    }
    let mut entries = std::fs::read_dir(dir).map_err(|e| ExecError::io(Step::Check, dir, e))?;
    if entries.next().is_some() {
        if stale_ok && lock_is_stale(dir) {
            return Ok(());
        }
        return Err(ExecError::LaunchDirNotEmpty { dir: dir.into() });
    }
    Ok(())
}

/// Refuses `rel` under `base` when one of its existing components (its parents only, unless
/// `whole`) is a symbolic link.
fn no_symlink_on_the_way(
    base: &Path,
    rel: &str,
    field: PathField,
    whole: bool,
) -> Result<(), ExecError> {
    let mut ends: Vec<usize> = rel.match_indices('/').map(|(i, _)| i).collect();
    if whole {
        ends.push(rel.len());
    }
    for end in ends {
        let path = base.join(&rel[..end]);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(ExecError::Symlink { field, link: path });
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(ExecError::io(Step::Check, path, e)),
        }
    }
    Ok(())
}

/// The per-launch directory, removed (with everything in it) when dropped unless
/// [`LaunchDir::keep`] was called.
#[derive(Debug)]
pub(crate) struct LaunchDir {
    path: PathBuf,
    remove: bool,
    /// Given back for the removal ([`Spare`]): a launch that failed at the descriptor
    /// limit can still remove what it created.
    spare: Option<Spare>,
    // Released (and its file removed) after the directory: dropped after `Drop::drop`.
    _claim: Option<Claim>,
}

impl LaunchDir {
    /// Removes the directory now, reporting a failure; nothing when it is kept.
    pub(crate) fn remove(mut self) -> Result<(), ExecError> {
        if !std::mem::replace(&mut self.remove, false) {
            // Kept ([`LaunchDir::keep`]).
            return Ok(());
        }
        self.spare = None;
        remove_tree(&self.path).map_err(|e| ExecError::io(Step::Cleanup, &self.path, e))
    }

    /// Leaves the directory in place when this is dropped.
    pub(crate) fn keep(&mut self) {
        self.remove = false;
    }
}

impl Drop for LaunchDir {
    fn drop(&mut self) {
        if self.remove {
            self.spare = None;
            let _ = remove_tree(&self.path);
        }
    }
}

pub(crate) fn os(step: Step, path: &Path) -> impl Fn(rustix::io::Errno) -> ExecError + '_ {
    move |e| ExecError::io(step, path, e.into())
}

/// Creates the launch directory (mode 0700; or takes over the empty one [`check`] let
/// through), then `dirs` (0700) and `files` (their modes) in it. Every component is opened
/// relative to its parent without following links, and every file is created new
/// (`O_EXCL`), so nothing is written outside the launch directory. On an error the launch
/// directory is removed again.
pub(crate) fn create(
    plan: &LaunchPlan,
    launch_dir: &Path,
    claim: Claim,
) -> Result<LaunchDir, ExecError> {
    // Before anything is created: at the descriptor limit, the launch fails here.
    let spare = Spare::take(&claim.fd).map_err(os(Step::CreateLaunchDir, launch_dir))?;
    match std::fs::DirBuilder::new().mode(DIR_MODE).create(launch_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(ExecError::io(Step::CreateLaunchDir, launch_dir, e)),
    }
    let guard = LaunchDir {
        path: launch_dir.to_owned(),
        remove: true,
        spare: Some(spare),
        _claim: Some(claim),
    };
    let root = rustix::fs::openat(
        rustix::fs::CWD,
        launch_dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(os(Step::CreateLaunchDir, launch_dir))?;
    // The umask may have taken bits away, and a directory handed over may have more.
    rustix::fs::fchmod(&root, Mode::from_raw_mode(DIR_MODE))
        .map_err(os(Step::CreateLaunchDir, launch_dir))?;
    for dir in &plan.dirs {
        open_dirs(&root, launch_dir, dir.split('/'))?;
    }
    for file in &plan.files {
        let path = launch_dir.join(&file.path);
        let (parent, name) = match file.path.rsplit_once('/') {
            Some((parent, name)) => (Some(open_dirs(&root, launch_dir, parent.split('/'))?), name),
            None => (None, file.path.as_str()),
        };
        let dir = parent.as_ref().map_or(root.as_fd(), AsFd::as_fd);
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(file.mode),
        )
        .map_err(os(Step::WriteFile, &path))?;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(file.mode))
            .map_err(os(Step::WriteFile, &path))?;
        std::fs::File::from(fd)
            .write_all(file.contents.as_bytes())
            .map_err(|e| ExecError::io(Step::WriteFile, &path, e))?;
    }
    Ok(guard)
}

/// Opens (creating with mode 0700 where missing) the directories `components` under `root`,
/// one at a time without following links, and returns the last one.
fn open_dirs<'a>(
    root: &OwnedFd,
    launch_dir: &Path,
    components: impl Iterator<Item = &'a str>,
) -> Result<OwnedFd, ExecError> {
    let mut path = launch_dir.to_owned();
    let mut current: Option<OwnedFd> = None;
    for name in components {
        path.push(name);
        let parent = current.as_ref().map_or(root.as_fd(), AsFd::as_fd);
        let created = match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(DIR_MODE)) {
            Ok(()) => true,
            Err(rustix::io::Errno::EXIST) => false,
            Err(e) => return Err(ExecError::io(Step::CreateDir, &path, e.into())),
        };
        let fd = rustix::fs::openat(
            parent,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(os(Step::CreateDir, &path))?;
        if created {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(DIR_MODE))
                .map_err(os(Step::CreateDir, &path))?;
        }
        current = Some(fd);
    }
    current.ok_or_else(|| {
        ExecError::io(
            Step::CreateDir,
            path,
            std::io::Error::from(std::io::ErrorKind::InvalidInput),
        )
    })
}

/// The lock file of `launch_dir`: `.<name>.kcap-lock` in its parent directory.
pub fn lock_path(launch_dir: &Path) -> Option<PathBuf> {
    let name = launch_dir.file_name()?;
    let mut lock = std::ffi::OsString::from(".");
    lock.push(name);
    lock.push(LOCK_SUFFIX);
    Some(launch_dir.with_file_name(lock))
}

/// How a lock file's name ends.
pub const LOCK_SUFFIX: &str = ".kcap-lock";

/// A launch's hold on its launch directory: its lock file ([`lock_path`]), open and
/// `flock`ed exclusively for as long as this lives, and removed (while still held) when it
/// is dropped. The kernel releases an `flock` when its holder dies, however it dies: a
/// lock file of this user's that nobody holds is left by a launch that is gone
/// ([`left_by_us`]).
#[derive(Debug)]
pub(crate) struct Claim {
    lock: PathBuf,
    fd: OwnedFd,
    /// The lock file was there, free and this user's ([`left_by_us`]): its launch is gone,
    /// its directory a leftover.
    pub(crate) stale: bool,
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Removed before it is released: whoever opens the file next and gets the lock
        // finds the path no longer names it and starts again.
        let _ = std::fs::remove_file(&self.lock);
    }
}

/// Takes the lock of `launch_dir` ([`Claim`]), or fails with [`ExecError::LaunchDirBusy`]
/// when another launch holds it; nothing else is touched.
pub(crate) fn claim(launch_dir: &Path) -> Result<Claim, ExecError> {
    let lock = lock_path(launch_dir).ok_or_else(|| ExecError::LaunchDirNotDir {
        dir: launch_dir.into(),
    })?;
    let io = |e: rustix::io::Errno| ExecError::io(Step::Check, &lock, e.into());
    loop {
        // Not blocking: a FIFO in the lock's place (another user's, in a parent such as
        // /tmp) held the open, and so the launch, for ever (red team of issue 33).
        let flags = OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let mode = Mode::from_raw_mode(0o600);
        let (fd, fresh) = match rustix::fs::open(&lock, flags | OFlags::CREATE | OFlags::EXCL, mode)
        {
            Ok(fd) => (fd, true),
            Err(rustix::io::Errno::EXIST) => match rustix::fs::open(&lock, flags, mode) {
                Ok(fd) => (fd, false),
                // Released and removed meanwhile.
                Err(rustix::io::Errno::NOENT) => continue,
                Err(e) => return Err(io(e)),
            },
            Err(e) => return Err(io(e)),
        };
        match rustix::fs::flock(&fd, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(ExecError::LaunchDirBusy {
                    dir: launch_dir.into(),
                });
            }
            Err(e) => return Err(io(e)),
        }
        // Ours only if the path still names the file locked (not one removed meanwhile).
        let held = rustix::fs::fstat(&fd).map_err(io)?;
        match rustix::fs::lstat(&lock) {
            Ok(now) if now.st_dev == held.st_dev && now.st_ino == held.st_ino => {
                return Ok(Claim {
                    lock,
                    fd,
                    stale: !fresh && left_by_us(&held),
                });
            }
            Ok(_) | Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(io(e)),
        }
    }
}

/// Whether a lock file (its `fstat`) can have been left by a launch of this user's: a
/// regular file of this user's with no other name. In a parent every user may write (sticky, as `/tmp`)
/// another user can put a lock file of theirs beside any directory of the daemon's, and
/// [`sweep`](super::sweep()) removed that directory on its word (red team of issue 33: a `nobody`'s
/// `/tmp/.victim.kcap-lock` and a root daemon's first launch into `/tmp` removed
/// `/tmp/victim`); a hard link would give another user's name to a file of the daemon's.
pub(crate) fn left_by_us(lock: &rustix::fs::Stat) -> bool {
    rustix::fs::FileType::from_raw_mode(lock.st_mode) == rustix::fs::FileType::RegularFile
        && lock.st_uid == rustix::process::geteuid().as_raw()
        && lock.st_nlink == 1
}

/// A lock file younger than this is passed over by [`sweep`](super::sweep()) (a launch may be between
/// creating it and locking it; the identity check of `claim` makes taking it harmless,
/// this only spares it a retry).
pub const SWEEP_MIN_AGE: std::time::Duration = std::time::Duration::from_secs(2);

/// Removes `dir` ([`remove_tree`]) if it is a directory of this user's (no link).
pub(crate) fn remove_leftover(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() && meta.uid() == rustix::process::geteuid().as_raw() => {
            remove_tree(dir)
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether `launch_dir`'s lock file is there and nobody holds it (probed, then let go).
fn lock_is_stale(launch_dir: &Path) -> bool {
    let Some(lock) = lock_path(launch_dir) else {
        return false;
    };
    let Ok(fd) = rustix::fs::open(
        &lock,
        OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    ) else {
        return false;
    };
    rustix::fs::fstat(&fd).is_ok_and(|st| left_by_us(&st))
        && rustix::fs::flock(&fd, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok()
}

#[cfg(test)]
mod tests {
    use super::LaunchDir;

    #[test]
    fn a_kept_launch_directory_outlives_its_removal() {
        let tmp = std::env::temp_dir().join(format!("kcap-keep-{}", std::process::id()));
        for keep in [true, false] {
            std::fs::create_dir_all(tmp.join("home")).unwrap();
            let mut dir = LaunchDir {
                path: tmp.clone(),
                remove: true,
                spare: None,
                _claim: None,
            };
            if keep {
                dir.keep();
            }
            dir.remove().unwrap();
            assert_eq!(tmp.join("home").is_dir(), keep);
        }
    }
}
