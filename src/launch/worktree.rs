//! What the executor does to the worktree before the launch: it takes out each
//! [`LaunchPlan::worktree_remove`] path, the client configuration a client would load from
//! the reviewed tree, and keeps it in the plan's [`LaunchPlan::pr_config`] (in the launch
//! directory), where the reviewer reads it as part of the change and no client loads it.

use std::os::fd::OwnedFd;
use std::path::Path;

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
/// # Errors
/// [`ExecError::NoWorktree`] for paths to take out without a worktree; an I/O error of
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
    for rel in &plan.worktree_remove {
        let dir = rustix::fs::openat(
            rustix::fs::CWD,
            cwd,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(os(Step::RemoveWorktreePath, Path::new(cwd)))?;
        let components: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
        take_out_any_case(&dir, Path::new(cwd), &components, keep)?;
    }
    Ok(())
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

/// Takes `components` under `dir` (shown as `shown`) out, each in any ASCII capitalisation;
/// `keep`: the worktree and the directory that keeps what is taken out.
fn take_out_any_case(
    dir: &OwnedFd,
    shown: &Path,
    components: &[&str],
    keep: Option<(&Path, &Path)>,
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
                Ok(sub) => take_out_any_case(&sub, &path, rest, keep)?,
                // Not a directory (a file): nothing of the path is under it. A link (`ELOOP`)
                // fails the step: the client would follow it to configuration elsewhere.
                Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => {}
                Err(e) => return Err(ExecError::io(Step::RemoveWorktreePath, &path, e.into())),
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
            if move_to(&path, &to).map_err(|e| ExecError::io(Step::RemoveWorktreePath, &path, e))? {
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
fn move_to(from: &Path, to: &Path) -> std::io::Result<bool> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::rename(from, to) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            copy_tree(from, to)?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Copies `from` to `to`: a file with its contents and mode, a link as a link, a directory
/// with what it holds; nothing followed.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from)?, to)
    } else if meta.is_dir() {
        std::fs::create_dir(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else if meta.is_file() {
        std::fs::copy(from, to).map(|_| ())
    } else {
        // A device, a socket or a fifo is no configuration to read: left out of the copy.
        Ok(())
    }
}
