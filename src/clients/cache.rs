//! The daemon's shared cache directory ([`LaunchContext::cache_dir`]), checked before a launch
//! uses it ([`check`]). A client that keeps code there runs whatever it finds, in every
//! reviewer, with that reviewer's credentials: a cache another user can write is code that
//! user runs in the next reviewer. Issue 34 found it on Copilot CLI 1.0.102: an `index.js`
//! planted in its package cache ran in the next reviewer, holding its model key, and a cache
//! of mode 0777 was accepted (`isolation_copilot::copilot_refuses_an_unsafe_package_cache`).
//!
//! What [`check`] requires, with `lstat` alone (no file is read or hashed):
//! - **Above the cache directory**, each directory on its path, as written and as the kernel
//!   resolves it: owned by root or the daemon's user, and writable by no one else; a sticky
//!   directory writable by others (`/tmp`) only where the entry beneath it exists and is
//!   root's or the daemon user's (the sticky bit keeps others from renaming or removing it).
//!   A link on the way is root's or the daemon user's. This is how OpenSSH's `StrictModes`
//!   judges the path to `authorized_keys`.
//! - **The cache directory**, when it exists: a directory, owned by root or the daemon's user,
//!   writable by no one else. A missing one holds nothing to run (and its parents are checked
//!   as above, so no one else can create it).
//! - **Every entry under the client's subdirectories** (Copilot CLI's `<cache>/copilot`):
//!   each directory and file owned by root or the daemon's user and writable by no one else;
//!   nothing but files, directories and symbolic links whose target is relative with no `..`
//!   (such a link resolves beneath its own directory, through entries this check sees); the
//!   subdirectory itself a directory, not a link.
//!
//! The daemon's user is this process's effective user (`/proc/self/status`).
//!
//! Cost: measured on Copilot CLI 1.0.102's cache (235 MB, 410 entries, 2026-12-05): 3–8 ms a
//! check (debug build, warm page cache, two shared cores; nothing is read, only looked up).
//! Hashing the same files took 0.55 s (BLAKE2) to 2.5 s (SHA-256) on this machine, too much for
//! every launch, and would add little to what ownership and modes give: once they hold, only
//! root and the daemon's user can change the cache, and a reviewer (the daemon's user) reaches
//! it read and execute only (the plan's `sandbox`). A reviewer run without the sandbox could
//! write it unseen.

use std::fmt;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

#[allow(unused_imports, reason = "named in the docs")]
use super::LaunchContext;
use super::{Client, RenderError};

/// What makes a path of the shared cache unsafe ([`RenderError::UnsafeCache`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheProblem {
    /// Owned by another user than root and the daemon's.
    Owner {
        /// Its owner's uid.
        uid: u32,
        /// The daemon's (effective) uid.
        daemon: u32,
    },
    /// Writable by its group or by other users (for a directory above the cache: and not
    /// sticky, or sticky with nothing of the daemon's beneath it).
    Writable {
        /// Its mode's permission bits, with the sticky bit.
        mode: u32,
    },
    /// A symbolic link whose target is absolute or has a `..` component, so it can lead out
    /// of the directory checked.
    LinkOut {
        /// The link's target as written.
        target: PathBuf,
    },
    /// Not a directory where one is needed (the cache directory, a directory above it, the
    /// client's subdirectory), or, under the subdirectory, neither a file, a directory nor a
    /// link.
    Kind,
    /// It, or the daemon's user, cannot be looked up.
    Unreadable {
        /// The error, as the system gave it.
        error: String,
    },
}

/// Where the unsafe path lies, for the fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// The cache directory or a directory above it.
    Above,
    /// Under one of the client's subdirectories.
    Inside,
}

/// Checks the shared cache directory `cache` (absolute) of a `client` launch and everything
/// under each of its `subdirs` (relative: the client's own, e.g. `copilot`) as the module
/// docs say. Nothing is created or changed.
///
/// # Errors
/// [`RenderError::UnsafeCache`] for the first unsafe path found: the cache directory's
/// parents first, then the directory, then each subdirectory's entries (in directory order).
///
/// ```
/// use std::os::unix::fs::PermissionsExt as _;
/// use kcap_mcp_registry::{Client, RenderError};
/// use kcap_mcp_registry::clients::cache::{self, CacheProblem};
///
/// let root = std::env::temp_dir().join(format!("kcap-cache-doc-{}", std::process::id()));
/// let pkg = root.join("copilot/pkg");
/// std::fs::create_dir_all(&pkg)?;
/// std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))?;
/// assert_eq!(cache::check(Client::Copilot, &root, &["copilot"]), Ok(()));
/// std::fs::set_permissions(&pkg, std::fs::Permissions::from_mode(0o777))?;
/// let Err(RenderError::UnsafeCache { path, problem, .. }) =
///     cache::check(Client::Copilot, &root, &["copilot"])
/// else {
///     panic!("a directory every user can write was accepted");
/// };
/// assert_eq!((path, problem), (pkg, CacheProblem::Writable { mode: 0o777 }));
/// std::fs::remove_dir_all(&root)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn check(client: Client, cache: &Path, subdirs: &[&str]) -> Result<(), RenderError> {
    let refuse = |(path, problem, place): (PathBuf, CacheProblem, Place)| {
        // What another user may have changed: the subdirectory the path is in, or (the
        // client's first) when it is the cache directory itself.
        let tree = match place {
            Place::Above if path == cache => subdirs.first().map(|s| cache.join(s)),
            Place::Above => None,
            Place::Inside => subdirs
                .iter()
                .map(|s| cache.join(s))
                .find(|t| path.starts_with(t)),
        };
        RenderError::UnsafeCache {
            client,
            cache: cache.to_owned(),
            path,
            tree,
            problem,
        }
    };
    let daemon = daemon_uid().map_err(|e| {
        refuse((
            PathBuf::from("/proc/self/status"),
            CacheProblem::Unreadable {
                error: e.to_string(),
            },
            Place::Above,
        ))
    })?;
    let above = |(p, problem)| (p, problem, Place::Above);
    chain(cache, daemon).map_err(above).map_err(refuse)?;
    if let Some(real) = resolved(cache).filter(|r| r != cache) {
        chain(&real, daemon).map_err(above).map_err(refuse)?;
    }
    for sub in subdirs {
        tree(&cache.join(sub), daemon)
            .map_err(|(p, problem)| (p, problem, Place::Inside))
            .map_err(refuse)?;
    }
    Ok(())
}

/// An unsafe path and what is wrong with it.
type Found = (PathBuf, CacheProblem);

/// The daemon's user: this process's effective uid, the second field of `Uid:` in
/// `/proc/self/status` (proc(5)); read there so that the lean library needs no libc binding.
fn daemon_uid() -> io::Result<u32> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|euid| euid.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no effective uid in it"))
}

/// `path` as the kernel resolves it: its deepest existing ancestor made canonical, then the
/// rest as written; `None` when not even `/` can be resolved.
fn resolved(path: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    for at in path.ancestors() {
        if let Ok(real) = std::fs::canonicalize(at) {
            return Some(rest.iter().rev().fold(real, |p: PathBuf, c| p.join(c)));
        }
        rest.extend(at.file_name());
    }
    None
}

/// Checks each directory on `path` (absolute), from `/` down to `path` itself, as far as it
/// exists; a link on the way only for its owner (what it leads to is on the resolved path).
fn chain(path: &Path, daemon: u32) -> Result<(), Found> {
    let mut prefixes: Vec<&Path> = path.ancestors().collect();
    prefixes.reverse();
    for (i, at) in prefixes.iter().enumerate() {
        let meta = match std::fs::symlink_metadata(at) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(unreadable(at, &e)),
        };
        owner(at, &meta, daemon)?;
        if meta.file_type().is_symlink() {
            continue;
        }
        if !meta.is_dir() {
            return Err((at.to_path_buf(), CacheProblem::Kind));
        }
        let mode = meta.mode() & 0o7777;
        let sticky = mode & 0o1000 != 0;
        let beneath = prefixes
            .get(i + 1)
            .is_some_and(|next| std::fs::symlink_metadata(next).is_ok());
        // The sticky bit protects what is beneath from others (its owner is checked next);
        // it does not protect the cache directory's own contents, nor a place still empty.
        if mode & 0o022 != 0 && !(sticky && beneath) {
            return Err((at.to_path_buf(), CacheProblem::Writable { mode }));
        }
    }
    Ok(())
}

/// Checks `top` (a client's subdirectory of the cache) and everything under it; nothing to
/// check when it does not exist.
fn tree(top: &Path, daemon: u32) -> Result<(), Found> {
    match std::fs::symlink_metadata(top) {
        Ok(meta) if meta.is_dir() => entry(top, &meta, daemon)?,
        Ok(_) => return Err((top.to_owned(), CacheProblem::Kind)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(unreadable(top, &e)),
    }
    let mut dirs = vec![top.to_owned()];
    while let Some(dir) = dirs.pop() {
        let list = std::fs::read_dir(&dir).map_err(|e| unreadable(&dir, &e))?;
        for item in list {
            let item = item.map_err(|e| unreadable(&dir, &e))?;
            let path = item.path();
            let meta = std::fs::symlink_metadata(&path).map_err(|e| unreadable(&path, &e))?;
            let kind = meta.file_type();
            if kind.is_symlink() {
                let target = std::fs::read_link(&path).map_err(|e| unreadable(&path, &e))?;
                if !stays_beneath(&target) {
                    return Err((path, CacheProblem::LinkOut { target }));
                }
            } else if kind.is_dir() {
                entry(&path, &meta, daemon)?;
                dirs.push(path);
            } else if kind.is_file() {
                entry(&path, &meta, daemon)?;
            } else {
                return Err((path, CacheProblem::Kind));
            }
        }
    }
    Ok(())
}

/// Whether a link target resolves beneath the link's own directory: relative, no `..`.
fn stays_beneath(target: &Path) -> bool {
    target
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// A file or directory under the subdirectory: root's or the daemon user's, writable by no
/// one else.
fn entry(path: &Path, meta: &std::fs::Metadata, daemon: u32) -> Result<(), Found> {
    owner(path, meta, daemon)?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err((path.to_owned(), CacheProblem::Writable { mode }));
    }
    Ok(())
}

/// Refuses `path` unless root or the daemon's user owns it.
fn owner(path: &Path, meta: &std::fs::Metadata, daemon: u32) -> Result<(), Found> {
    let uid = meta.uid();
    if uid == 0 || uid == daemon {
        return Ok(());
    }
    Err((path.to_owned(), CacheProblem::Owner { uid, daemon }))
}

/// `path` could not be looked up.
fn unreadable(path: &Path, e: &io::Error) -> Found {
    let error = e.to_string();
    (path.to_owned(), CacheProblem::Unreadable { error })
}

/// [`RenderError::UnsafeCache`]'s message: the path, what is wrong, why it matters, the fix.
pub(crate) fn fmt_unsafe_cache(
    f: &mut fmt::Formatter<'_>,
    client: Client,
    cache: &Path,
    path: &Path,
    tree: Option<&Path>,
    problem: &CacheProblem,
) -> fmt::Result {
    use crate::text::ShownPath;
    write!(
        f,
        "cannot launch the {} reviewer with the cache directory {}: {} ",
        client.display_name(),
        ShownPath(cache),
        ShownPath(path)
    )?;
    let inside = tree.is_some_and(|t| path.starts_with(t) && path != t);
    match problem {
        CacheProblem::Owner { uid, daemon } => write!(
            f,
            "is owned by uid {uid}, neither root nor the daemon's user (uid {daemon})"
        )?,
        CacheProblem::Writable { mode } => {
            let by = match (mode & 0o020 != 0, mode & 0o002 != 0) {
                (true, true) => "its group and every user",
                (true, false) => "its group",
                _ => "every user",
            };
            write!(f, "is writable by {by} (mode {mode:04o})")?;
        }
        CacheProblem::LinkOut { target } => write!(
            f,
            "is a symbolic link to {}, which can lead out of the cache (only a relative \
             target without `..` stays in it)",
            ShownPath(target)
        )?,
        CacheProblem::Kind if inside => {
            f.write_str("is neither a file, a directory nor a symbolic link")?;
        }
        CacheProblem::Kind => f.write_str("is not a directory")?,
        CacheProblem::Unreadable { error } => write!(f, "cannot be looked up ({error})")?,
    }
    write!(
        f,
        "; {} runs the code it finds in its cache, so whoever can change it runs code in \
         every reviewer, with its credentials; ",
        client.display_name()
    )?;
    let q = |p: &Path| format!("'{}'", ShownPath(p).to_string().replace('\'', r"'\''"));
    match problem {
        CacheProblem::Owner { daemon, .. } => write!(
            f,
            "give it to the daemon's user (`chown {daemon} {}`) or to root",
            q(path)
        )?,
        CacheProblem::Writable { .. } => write!(
            f,
            "make it writable by its owner only (`chmod go-w {}`)",
            q(path)
        )?,
        CacheProblem::LinkOut { .. } => write!(f, "remove the link (`rm {}`)", q(path))?,
        CacheProblem::Kind if inside => write!(f, "remove it (`rm {}`)", q(path))?,
        CacheProblem::Kind => f.write_str("give a directory as the cache directory")?,
        CacheProblem::Unreadable { .. } => {
            return f.write_str(
                "make it readable by the daemon's user, or give another cache directory",
            );
        }
    }
    match tree {
        Some(tree) => write!(
            f,
            "; another user may already have changed the package: remove {} (`rm -rf {}`) \
             and let the daemon fill it again",
            ShownPath(tree),
            q(tree)
        ),
        None => f.write_str(
            ", or put the cache directory under directories only root and the daemon's user \
             can write",
        ),
    }
}
