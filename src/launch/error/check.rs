//! [`ExecError`]'s messages for the refusals of [`Step::Check`], before anything is created.

use std::fmt;

use super::{ExecError, Step};
use crate::text::ShownPath;

impl ExecError {
    /// The refusals of [`Step::Check`].
    pub(super) fn fmt_check(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::Version { found, expected } => write!(
                f,
                "{}: the plan is version {found}; this executor carries out version {expected} \
                 only (render the plan again with this version of kcap-mcp-registry)",
                Step::Check
            ),
            ExecError::BadPath {
                field,
                path,
                problem,
            } => write!(
                f,
                "{}: {field} path \"{}\" {problem}",
                Step::Check,
                path.escape_debug()
            ),
            ExecError::Symlink { field, link } => write!(
                f,
                "{}: a {field} path goes through the symbolic link {}",
                Step::Check,
                ShownPath(link)
            ),
            ExecError::BadMode { path, mode } => write!(
                f,
                "{}: file \"{}\" has mode {mode:#o}; only permission bits (at most 0o777) are \
                 carried out",
                Step::Check,
                path.escape_debug()
            ),
            ExecError::BadEnv { name, problem } => write!(
                f,
                "{}: environment variable \"{}\" {problem}",
                Step::Check,
                name.escape_debug()
            ),
            ExecError::BadArg { index, problem } => {
                write!(f, "{}: argv[{index}] {problem}", Step::Check)
            }
            ExecError::TypedPromptChar { found } => write!(
                f,
                "{}: the typed prompt contains {}, which typed into the client's terminal would \
                 be a key, not text; give the prompt without it (line breaks and tabs are kept)",
                Step::Check,
                crate::text::char_name(*found)
            ),
            ExecError::WorktreeMissing { path, .. } => write!(
                f,
                "{}: the worktree {} (the plan's cwd) is missing or not a directory; check the \
                 pull request out there before the launch",
                Step::Check,
                ShownPath(path)
            ),
            ExecError::NoWorktree => write!(
                f,
                "{}: the plan removes worktree paths but has no cwd",
                Step::Check
            ),
            ExecError::UnsafePath { entry, problem } => write!(
                f,
                "{}: the inherited PATH has the entry {:?}, which {problem}: the client would \
                 run the programs found there; give the daemon a PATH of absolute directories, \
                 outside the worktree, that only trusted users can write",
                Step::Check,
                entry
            ),
            ExecError::WorktreeHoldsHome { worktree, home } => write!(
                f,
                "{}: the worktree {} is the daemon's HOME or holds it ({}): removing the plan's \
                 worktree paths there would delete the user's own configuration; give the \
                 reviewer a worktree of its own",
                Step::Check,
                worktree.display(),
                home.display()
            ),
            ExecError::InstallationHolds {
                client,
                installation,
                what,
                path,
            } => write!(
                f,
                "{}: {client}'s installation {} is or holds {what} ({}), and the reviewer's sandbox \
                 would let it read all of it; install {client} in a directory of its own (`npm \
                 install --prefix /opt/kcap/{client}`), or keep the launch and worktree \
                 directories out of that node_modules",
                Step::Check,
                ShownPath(installation),
                ShownPath(path)
            ),
            _ => self.fmt_launch_dir(f),
        }
    }
}
