//! What the executor does to the worktree before the launch: it takes out each
//! [`LaunchPlan::worktree_remove`] path, the client configuration a client would load from
//! the reviewed tree, and keeps it in the plan's [`LaunchPlan::pr_config`] (in the launch
//! directory), where the reviewer reads it as part of the change and no client loads it.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

use super::error::{ExecError, Step};
use super::prepare::os;
use crate::clients::plan::LaunchPlan;

/// Takes each `worktree_remove` path of `plan` that exists under its `cwd` out of the
/// worktree, in any ASCII capitalisation of each of its components (`AGENTS.md` takes
/// `agents.md` and `Agents.MD` too: Copilot CLI 1.0.102 loads instruction files under other
/// capitalisations, measured by the red team of issue 34, and a case-insensitive file system
/// would serve them anyway). Each is moved to the same relative path (as found) under
/// [`LaunchPlan::pr_config`] (renamed; copied, links as links, then removed when the launch
/// directory is on another file system), or deleted when the plan names no `pr_config`.
/// Every directory on the way is opened relative to its parent without following links: a
/// parent that became a link since the plan was checked fails the step instead of taking
/// something elsewhere. The path itself, a link included, is moved, never followed; a
/// directory with what it holds.
///
/// When `pr_config` is on another file system than the worktree, every path is looked at
/// first, so that one that cannot be copied fails the launch before any is taken out.
///
/// # Errors
/// [`ExecError::NoWorktree`] for paths to take out without a worktree;
/// [`ExecError::NotCopyable`] for a device, a socket or a fifo to copy; an I/O error of
/// [`Step::RemoveWorktreePath`] naming the path.
pub(crate) fn take_out_paths(plan: &LaunchPlan) -> Result<(), ExecError> {
    let Some(cwd) = plan.cwd.as_deref() else {
        return if plan.worktree_remove.is_empty() {
            Ok(())
        } else {
            Err(ExecError::NoWorktree)
        };
    };
    let keep = plan
        .pr_config
        .as_deref()
        .map(|dir| (Path::new(cwd), Path::new(dir)));
    let copied = keep.is_some_and(|(worktree, kept)| !same_file_system(worktree, kept));
    let passes: &[Pass] = if copied {
        &[Pass::Check, Pass::Take]
    } else {
        &[Pass::Take]
    };
    for &pass in passes {
        for rel in &plan.worktree_remove {
            let dir = rustix::fs::openat(
                rustix::fs::CWD,
                cwd,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(os(Step::RemoveWorktreePath, Path::new(cwd)))?;
            let components: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
            take_out_any_case(&dir, Path::new(cwd), &components, keep, pass)?;
        }
    }
    Ok(())
}

/// What [`take_out_any_case`] does with each path found.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Fails on one that cannot be copied ([`not_copyable`]); touches nothing.
    Check,
    /// Takes it out.
    Take,
}

/// Whether `worktree` and `kept` (or its nearest existing parent) are on one file system
/// (`st_dev`); `true` when either cannot be looked at (the move then says why). A rename
/// may still cross mounts of one file system (`EXDEV`): [`copy_tree`] checks again.
fn same_file_system(worktree: &Path, kept: &Path) -> bool {
    let device = |path: &Path| rustix::fs::stat(path).ok().map(|stat| stat.st_dev);
    let kept = kept.ancestors().find_map(device);
    match (device(worktree), kept) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// The names in directory `dir` equal to `name` ignoring ASCII case.
fn names_any_case(dir: &OwnedFd, name: &str, shown: &Path) -> Result<Vec<String>, ExecError> {
    let mut found = Vec::new();
    let listing = rustix::fs::Dir::read_from(dir).map_err(os(Step::RemoveWorktreePath, shown))?;
    for entry in listing {
        let entry = entry.map_err(os(Step::RemoveWorktreePath, shown))?;
        if let Ok(n) = entry.file_name().to_str()
            && n.eq_ignore_ascii_case(name)
        {
            found.push(n.to_owned());
        }
    }
    Ok(found)
}

/// Takes `components` under `dir` (shown as `shown`) out, each in any ASCII capitalisation
/// (or, in [`Pass::Check`], checks that each can be copied); `keep`: the worktree and the
/// directory that keeps what is taken out.
fn take_out_any_case(
    dir: &OwnedFd,
    shown: &Path,
    components: &[&str],
    keep: Option<(&Path, &Path)>,
    pass: Pass,
) -> Result<(), ExecError> {
    let Some((name, rest)) = components.split_first() else {
        return Ok(());
    };
    for found in names_any_case(dir, name, shown)? {
        let path = shown.join(&found);
        if !rest.is_empty() {
            match rustix::fs::openat(
                dir,
                found.as_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(sub) => take_out_any_case(&sub, &path, rest, keep, pass)?,
                // Not a directory (a file): nothing of the path is under it. A link (`ELOOP`)
                // fails the step: the client would follow it to configuration elsewhere.
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => {}
                Err(e) => return Err(ExecError::io(Step::RemoveWorktreePath, &path, e.into())),
            }
            continue;
        }
        if pass == Pass::Check {
            match not_copyable(&path) {
                Ok(Some((path, kind))) => return Err(ExecError::NotCopyable { path, kind }),
                Ok(None) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(ExecError::io(Step::RemoveWorktreePath, &path, e)),
            }
            continue;
        }
        let stat = match rustix::fs::statat(dir, found.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(ExecError::io(Step::RemoveWorktreePath, &path, e.into())),
        };
        let is_dir =
            rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory;
        if let Some((worktree, kept)) = keep {
            let to = kept.join(path.strip_prefix(worktree).unwrap_or(Path::new(&found)));
            if move_to(&path, &to)? {
                continue;
            }
        }
        if is_dir {
            // Its parents are no links (opened above without following); `remove_dir_all`
            // follows none inside.
            std::fs::remove_dir_all(&path)
                .map_err(|e| ExecError::io(Step::RemoveWorktreePath, &path, e))?;
        } else {
            rustix::fs::unlinkat(dir, found.as_str(), AtFlags::empty())
                .map_err(os(Step::RemoveWorktreePath, &path))?;
        }
    }
    Ok(())
}

/// Moves `from` to `to`, making `to`'s parents: `Ok(true)` when renamed, `Ok(false)` when
/// copied to `to` (across file systems) and so still to be removed.
///
/// # Errors
/// [`ExecError::NotCopyable`], before anything is copied, when it must be copied and is or
/// holds a device, a socket or a fifo; an I/O error of [`Step::RemoveWorktreePath`].
fn move_to(from: &Path, to: &Path) -> Result<bool, ExecError> {
    let io = |e| ExecError::io(Step::RemoveWorktreePath, from, e);
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    match std::fs::rename(from, to) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            if let Some((path, kind)) = not_copyable(from).map_err(io)? {
                return Err(ExecError::NotCopyable { path, kind });
            }
            copy_tree(from, to)?;
            Ok(false)
        }
        Err(e) => Err(io(e)),
    }
}

/// The first device, socket or fifo at or under `from` (links not followed), with its kind:
/// what [`copy_tree`] cannot copy.
fn not_copyable(from: &Path) -> std::io::Result<Option<(PathBuf, &'static str)>> {
    let file_type = std::fs::symlink_metadata(from)?.file_type();
    if file_type.is_dir() {
        for entry in std::fs::read_dir(from)? {
            if let Some(found) = not_copyable(&entry?.path())? {
                return Ok(Some(found));
            }
        }
        return Ok(None);
    }
    Ok(special_kind(file_type).map(|kind| (from.to_owned(), kind)))
}

/// `None` for a file, a directory or a link; else which special file it is.
fn special_kind(file_type: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt as _;
    if file_type.is_file() || file_type.is_dir() || file_type.is_symlink() {
        None
    } else if file_type.is_fifo() {
        Some("fifo")
    } else if file_type.is_socket() {
        Some("socket")
    } else if file_type.is_block_device() {
        Some("block device")
    } else if file_type.is_char_device() {
        Some("character device")
    } else {
        Some("special file")
    }
}

/// Copies `from` to `to`: a file with its contents and mode, a link as a link, a directory
/// with what it holds; nothing followed.
///
/// # Errors
/// [`ExecError::NotCopyable`] for a device, a socket or a fifo (one that appeared since
/// [`not_copyable`] looked); an I/O error of [`Step::RemoveWorktreePath`] naming the path.
fn copy_tree(from: &Path, to: &Path) -> Result<(), ExecError> {
    let io = |e| ExecError::io(Step::RemoveWorktreePath, from, e);
    let file_type = std::fs::symlink_metadata(from).map_err(io)?.file_type();
    if let Some(kind) = special_kind(file_type) {
        return Err(ExecError::NotCopyable {
            path: from.to_owned(),
            kind,
        });
    }
    if file_type.is_symlink() {
        let target = std::fs::read_link(from).map_err(io)?;
        std::os::unix::fs::symlink(target, to).map_err(io)
    } else if file_type.is_dir() {
        std::fs::create_dir(to).map_err(io)?;
        for entry in std::fs::read_dir(from).map_err(io)? {
            let entry = entry.map_err(io)?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else {
        std::fs::copy(from, to).map(|_| ()).map_err(io)
    }
}
