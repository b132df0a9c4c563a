//! [`ExecError`]: why a plan was not carried out, or why a running reviewer was stopped.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use crate::text::ShownPath;

mod check;

/// A step of carrying a plan out, named in every [`ExecError`] that happens during it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Checking the plan and the launch directory before anything is created.
    Check,
    /// Creating the per-launch directory.
    CreateLaunchDir,
    /// Creating one of [`LaunchPlan::dirs`](crate::clients::plan::LaunchPlan::dirs) (or a
    /// file's parent directory).
    CreateDir,
    /// Writing one of [`LaunchPlan::files`](crate::clients::plan::LaunchPlan::files).
    WriteFile,
    /// Removing one of
    /// [`LaunchPlan::worktree_remove`](crate::clients::plan::LaunchPlan::worktree_remove).
    RemoveWorktreePath,
    /// Opening the pseudo-terminal.
    OpenTerminal,
    /// Starting the client.
    Start,
    /// ACP `initialize`.
    Initialize,
    /// ACP `session/new`.
    SessionNew,
    /// ACP `session/prompt`.
    Prompt,
    /// Reading or answering what the running reviewer sends.
    Run,
    /// Typing a terminal client's prompt
    /// ([`TypedPrompt`](crate::clients::plan::TypedPrompt)): a client that exits before it
    /// is typed fails here, its review never asked for.
    TypePrompt,
    /// Stopping the reviewer.
    Stop,
    /// Removing the per-launch directory.
    Cleanup,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Step::Check => "check the plan",
            Step::CreateLaunchDir => "create the launch directory",
            Step::CreateDir => "create a directory",
            Step::WriteFile => "write a file",
            Step::RemoveWorktreePath => "remove a worktree path",
            Step::OpenTerminal => "open a pseudo-terminal",
            Step::Start => "start the client",
            Step::Initialize => "ACP initialize",
            Step::SessionNew => "ACP session/new",
            Step::Prompt => "ACP session/prompt",
            Step::Run => "run the reviewer",
            Step::TypePrompt => "type the prompt",
            Step::Stop => "stop the reviewer",
            Step::Cleanup => "remove the launch directory",
        })
    }
}

/// Which part of a plan a refused path comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathField {
    /// [`LaunchPlan::dirs`](crate::clients::plan::LaunchPlan::dirs).
    Dirs,
    /// [`LaunchPlan::files`](crate::clients::plan::LaunchPlan::files).
    Files,
    /// [`LaunchPlan::worktree_remove`](crate::clients::plan::LaunchPlan::worktree_remove).
    WorktreeRemove,
    /// [`LaunchPlan::sandbox`](crate::clients::plan::LaunchPlan::sandbox).
    Sandbox,
    /// [`LaunchPlan::pr_config`](crate::clients::plan::LaunchPlan::pr_config).
    PrConfig,
    /// The `log` of [`LaunchPlan::typed_prompt`](crate::clients::plan::LaunchPlan::typed_prompt).
    TypedPromptLog,
    /// The `log` of [`LaunchPlan::servers_ready`](crate::clients::plan::LaunchPlan::servers_ready).
    ServersReadyLog,
}

impl fmt::Display for PathField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathField::Dirs => "dirs",
            PathField::Files => "files",
            PathField::WorktreeRemove => "worktree_remove",
            PathField::Sandbox => "sandbox",
            PathField::PrConfig => "pr_config",
            PathField::TypedPromptLog => "typed_prompt.log",
            PathField::ServersReadyLog => "servers_ready.log",
        })
    }
}

/// Why a plan was not carried out, or a running reviewer was stopped. Each variant names
/// the step, the path or the client; an OS error is its [`source`](std::error::Error::source)
/// (displayed by a chain printer, not by this `Display`: the crate's convention).
#[derive(Debug)]
#[non_exhaustive]
pub enum ExecError {
    /// The plan's `version` is not [`PLAN_VERSION`](crate::clients::plan::PLAN_VERSION).
    Version {
        /// The plan's version.
        found: u32,
        /// The version this executor carries out.
        expected: u32,
    },
    /// A path of the plan is not a plain relative path (`..`, `.`, an empty component, an
    /// absolute path, a NUL byte), or two entries collide.
    BadPath {
        /// Where in the plan.
        field: PathField,
        /// The path as the plan gives it.
        path: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A path of the plan goes through a symbolic link that exists.
    Symlink {
        /// Where in the plan.
        field: PathField,
        /// The link found.
        link: PathBuf,
    },
    /// A file's mode sets more than the permission bits (0o777).
    BadMode {
        /// The file's path in the plan.
        path: String,
        /// The mode the plan gives.
        mode: u32,
    },
    /// An environment variable cannot be set as the plan says.
    BadEnv {
        /// The variable's name.
        name: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// An element of the plan's argv that the kernel cannot pass to the client: it holds a NUL
    /// byte, or is longer than [`MAX_ARG_BYTES`](super::MAX_ARG_BYTES) (a prompt too long for
    /// a terminal client's command line).
    BadArg {
        /// Its index in the argv.
        index: usize,
        /// What is wrong.
        problem: String,
    },
    /// The plan's typed prompt ([`TypedPrompt::text`](crate::clients::plan::TypedPrompt::text))
    /// holds a character that, typed into the client's terminal, would be a key and not text
    /// ([`is_refused_in_terminal_prompt`](crate::clients::plan::is_refused_in_terminal_prompt):
    /// a control character other than a line break or a tab).
    TypedPromptChar {
        /// The first such character.
        found: char,
    },
    /// The plan has `worktree_remove` paths but no `cwd` to resolve them in.
    NoWorktree,
    /// The plan's `cwd`, the worktree the reviewer starts in, is missing or not a directory
    /// (the cause is the [`source`](std::error::Error::source)): the daemon checks the pull
    /// request out there before the launch.
    WorktreeMissing {
        /// The worktree.
        path: PathBuf,
        /// Why it cannot be used.
        source: std::io::Error,
    },
    /// The inherited `PATH` (the daemon's, through the plan's `env_inherit`) has an entry
    /// that is empty, relative or inside the worktree (the client, started in the worktree,
    /// would run the reviewed repository's programs: `#!/usr/bin/env node` resolves `node`
    /// through it), or writable by every user (another user's program would run).
    UnsafePath {
        /// The entry (empty for `::` or a leading or trailing `:`).
        entry: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The plan's `cwd` (the worktree) is the daemon's `HOME` or holds it: removing the
    /// plan's `worktree_remove` paths there would delete the user's own configuration.
    WorktreeHoldsHome {
        /// The worktree.
        worktree: PathBuf,
        /// The daemon's `HOME`.
        home: PathBuf,
    },
    /// The client's installation ([`sandbox::installation`](super::sandbox::installation)),
    /// which a confined reviewer may read and execute, is or holds `/`, the daemon's `HOME`,
    /// the launch directory or the worktree's parent.
    InstallationHolds {
        /// The client's name.
        client: String,
        /// The installation path (a `node_modules` directory).
        installation: PathBuf,
        /// What it holds: "the daemon's HOME", "the launch directory", ….
        what: &'static str,
        /// That path, as the kernel resolves it.
        path: PathBuf,
    },
    /// The launch asks for [`Confinement::Required`](super::sandbox::Confinement::Required)
    /// and this kernel lacks part of the [sandbox](super::sandbox).
    NoSandbox {
        /// What is missing (the Landlock LSM, or an ABI version and what it gives).
        missing: String,
    },
    /// The launch asks for [`Options::cgroup`](super::Options::cgroup)
    /// [`Required`](super::sandbox::Confinement::Required) and this machine gives no
    /// [reviewer's cgroup](super::cgroup).
    NoCgroup {
        /// What is missing (a writable cgroup v2 mount, a delegated cgroup, `cgroup.kill`).
        missing: String,
    },
    /// The launch asks for the network [door](super::door) and this kernel does not give
    /// this user the namespaces it needs (or the door could not be set up).
    NoDoor {
        /// What is missing, and why when the kernel said.
        missing: String,
    },
    /// The door's endpoints cannot be served: none, too many, a port 0 or twice, an
    /// upstream that is not `host:port`.
    BadDoor {
        /// What is wrong with them.
        problem: String,
    },
    /// The launch directory exists and holds something.
    LaunchDirNotEmpty {
        /// The launch directory.
        dir: PathBuf,
    },
    /// Another launch holds the launch directory (its lock, `.<name>.kcap-lock` beside it).
    LaunchDirBusy {
        /// The launch directory.
        dir: PathBuf,
    },
    /// The launch directory exists and belongs to another user.
    LaunchDirNotOwned {
        /// The launch directory.
        dir: PathBuf,
        /// Its owner's uid.
        owner: u32,
        /// This process's effective uid.
        uid: u32,
    },
    /// The launch directory exists and is not a directory (a file, a symbolic link).
    LaunchDirNotDir {
        /// The launch directory.
        dir: PathBuf,
    },
    /// The launch directory's parent is writable by every user and not sticky: another user
    /// could rename the launch directory away and put one of theirs in its place.
    LaunchDirParentOpen {
        /// The parent directory.
        parent: PathBuf,
    },
    /// An operating-system call failed (the [`source`](std::error::Error::source)).
    Io {
        /// The step.
        step: Step,
        /// The path it was on.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A [`LaunchPlan::worktree_remove`](crate::clients::plan::LaunchPlan::worktree_remove)
    /// path holds (or is) a device, a socket or a fifo, and the launch directory is on
    /// another file system: what is taken out is copied to the plan's `pr_config` there, and
    /// such a file cannot be copied. Nothing of the path was copied or removed.
    NotCopyable {
        /// The device, socket or fifo.
        path: PathBuf,
        /// Which it is: `fifo`, `socket`, `block device`, `character device`.
        kind: &'static str,
    },
    /// The client could not be started, or its terminal or pipes set up.
    Start {
        /// The client's name.
        client: String,
        /// The binary.
        bin: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Writing to or reading from the running client failed.
    Pipe {
        /// The client's name.
        client: String,
        /// The step.
        step: Step,
        /// The OS error.
        source: std::io::Error,
    },
    /// The client answered an ACP request with something else than the protocol says.
    Protocol {
        /// The client's name.
        client: String,
        /// The step (the request).
        step: Step,
        /// What it answered, shortened.
        answer: String,
    },
    /// The client answered an ACP request with a JSON-RPC error.
    Rpc {
        /// The client's name.
        client: String,
        /// The step (the request).
        step: Step,
        /// The error object, as JSON.
        error: String,
    },
    /// The client did not answer within the bound.
    Timeout {
        /// The client's name.
        client: String,
        /// The step (the request waited for).
        step: Step,
        /// The bound.
        after: Duration,
    },
    /// The client exited (or closed its output) while an answer was awaited.
    Exited {
        /// The client's name.
        client: String,
        /// The step.
        step: Step,
        /// Its exit status, when it exited within the step's bound (a client that closed
        /// its output is waited for until then).
        status: Option<ExitStatus>,
        /// The end of its standard error.
        stderr: String,
    },
    /// The client wrote a line longer than the bound on its output
    /// ([`MAX_MESSAGE_BYTES`](super::MAX_MESSAGE_BYTES)): it was stopped.
    TooLarge {
        /// The client's name.
        client: String,
        /// The step.
        step: Step,
        /// The bound, in bytes.
        limit: usize,
    },
    /// The client sent more than [`MAX_SET_ASIDE_BYTES`](super::MAX_SET_ASIDE_BYTES) of
    /// messages before it answered a request of the handshake (`initialize`,
    /// `session/new`), all of which would be kept for
    /// [`AcpSession::next_event`](super::AcpSession::next_event): it was stopped.
    Flooded {
        /// The client's name.
        client: String,
        /// The step.
        step: Step,
        /// The bound, in bytes.
        limit: usize,
    },
    /// The client has not read what was written to it for more than the bound
    /// ([`MAX_UNSENT_BYTES`](super::MAX_UNSENT_BYTES)), and more was to be written.
    Stalled {
        /// The client's name.
        client: String,
        /// The step.
        step: Step,
        /// The bytes it has not read.
        unsent: usize,
    },
    /// A terminal client's typed prompt ([`TypedPrompt`](crate::clients::plan::TypedPrompt))
    /// was never typed, or an ACP client's first prompt never sent
    /// ([`ServersReady`](crate::clients::plan::ServersReady)): its log said an injected MCP
    /// server never will list its tools, or still lacked one at
    /// [`Options::handshake_timeout`](super::Options::handshake_timeout). The client was
    /// stopped; the reviewer got no prompt.
    ServersNotReady {
        /// The client's name.
        client: String,
        /// How long the executor waited.
        waited: Duration,
        /// The log line that said a server failed, if one did.
        failed: Option<String>,
        /// The texts the log still lacked (each a server's, or the client's input), when
        /// none failed.
        missing: Vec<String>,
        /// The log's path (the plan's [`ServersReady::log`](crate::clients::plan::ServersReady::log)
        /// in the launch directory).
        log: PathBuf,
        /// Whether the log was there to read (the file, or one file in the directory): a
        /// client that wrote none (another environment, a stand-in that writes no log) will
        /// not list its servers there however long it is waited for.
        log_found: bool,
        /// The plan's field that named the log.
        field: ReadyField,
    },
    /// The reviewer sat at an interactive dialog, no output for the bound: it was stopped.
    Dialog {
        /// The client's name.
        client: String,
        /// The dialog's name (the plan's [`Dialog`](crate::clients::plan::Dialog)), e.g.
        /// `Codex's "Trust this folder?" dialog`.
        dialog: String,
        /// How long it showed no progress.
        after: Duration,
    },
}

/// The plan's field whose log the executor read for the MCP servers' readiness
/// ([`ExecError::ServersNotReady`]); shown as the field's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadyField {
    /// [`TypedPrompt`](crate::clients::plan::TypedPrompt) (a terminal client: Claude Code).
    TypedPrompt,
    /// [`ServersReady`](crate::clients::plan::ServersReady) (an ACP client).
    ServersReady,
}

impl fmt::Display for ReadyField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReadyField::TypedPrompt => "typed_prompt",
            ReadyField::ServersReady => "servers_ready",
        })
    }
}

/// [`ExecError::ServersNotReady`]'s message; nothing for another error.
fn fmt_not_ready(error: &ExecError, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let ExecError::ServersNotReady {
        client,
        waited,
        failed,
        missing,
        log,
        log_found,
        field,
    } = error
    else {
        return Ok(());
    };
    let (failed, log_found) = (failed.as_deref(), *log_found);
    let run = Step::Run;
    if failed.is_none() && !log_found {
        return write!(
            f,
            "{run}: {client}: after {:.0} s there is no log at {}, where its plan reads that \
             its injected MCP servers listed their tools (`{field}`); the prompt was not \
             sent; stopped it. The client writes its log elsewhere or none: one started \
             outside the plan's environment, or a stand-in that writes no log \
             (docs/launch-plan.md, `{field}`, says what it must write)",
            waited.as_secs_f32(),
            ShownPath(log)
        );
    }
    match failed {
        Some(line) => write!(
            f,
            "{run}: {client}: an injected MCP server will not list its tools (its log, after \
             {:.1} s: {}); the prompt was not sent; stopped it",
            waited.as_secs_f32(),
            short(line)
        ),
        None => write!(
            f,
            "{run}: {client}: after {:.0} s its log ({}) still lacks {}: an injected MCP server \
             has not listed its tools; the prompt was not sent; stopped it (a server this slow \
             needs a longer --handshake-timeout)",
            waited.as_secs_f32(),
            ShownPath(log),
            missing
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn short(s: &str) -> String {
    const MAX: usize = 300;
    let s = crate::text::printable(s);
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::Version { .. }
            | ExecError::BadPath { .. }
            | ExecError::Symlink { .. }
            | ExecError::BadMode { .. }
            | ExecError::BadEnv { .. }
            | ExecError::BadArg { .. }
            | ExecError::TypedPromptChar { .. }
            | ExecError::NoWorktree
            | ExecError::UnsafePath { .. }
            | ExecError::WorktreeHoldsHome { .. }
            | ExecError::InstallationHolds { .. }
            | ExecError::LaunchDirNotEmpty { .. }
            | ExecError::LaunchDirBusy { .. }
            | ExecError::LaunchDirNotOwned { .. }
            | ExecError::LaunchDirNotDir { .. }
            | ExecError::LaunchDirParentOpen { .. } => self.fmt_check(f),
            ExecError::NoSandbox { missing } => write!(
                f,
                "{}: the reviewer's sandbox needs {missing}; run on a kernel that gives it (Linux \
                 6.12 or later, with `landlock` in `lsm=`), or launch with a best-effort sandbox \
                 (`--sandbox best-effort`) and accept what it lacks",
                Step::Check,
            ),
            ExecError::NoCgroup { missing } => write!(
                f,
                "{}: stopping every process of the reviewer with it needs {missing}; run the \
                 executor as root or in a delegated cgroup (systemd: Delegate=yes), or launch \
                 with `--cgroup best-effort` and accept that what leaves the reviewer's process \
                 group may outlive it",
                Step::Check,
            ),
            ExecError::NoDoor { missing } => write!(
                f,
                "{}: the reviewer's network door needs {missing}; run where the kernel gives this \
                 user user and network namespaces, or launch with an open network",
                Step::Check,
            ),
            ExecError::BadDoor { problem } => {
                write!(f, "{}: the network door {problem}", Step::Check)
            }
            _ => self.fmt_run(f),
        }
    }
}

impl ExecError {
    /// The refusals of [`Step::Check`] about the launch directory.
    fn fmt_launch_dir(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::LaunchDirNotEmpty { dir } => write!(
                f,
                "{}: launch directory {} exists and is not empty; give a new or empty one",
                Step::Check,
                ShownPath(dir)
            ),
            ExecError::LaunchDirBusy { dir } => write!(
                f,
                "{}: launch directory {} is in use by another launch (it holds the lock \
                 beside it); give each launch its own directory",
                Step::Check,
                ShownPath(dir)
            ),
            ExecError::LaunchDirNotOwned { dir, owner, uid } => write!(
                f,
                "{}: launch directory {} belongs to uid {owner}, not to this user (uid {uid})",
                Step::Check,
                ShownPath(dir)
            ),
            ExecError::LaunchDirNotDir { dir } => write!(
                f,
                "{}: launch directory {} exists and is not a directory (or is a symbolic link)",
                Step::Check,
                ShownPath(dir)
            ),
            ExecError::LaunchDirParentOpen { parent } => write!(
                f,
                "{}: the launch directory's parent {} is writable by every user and not sticky, \
                 so another user could swap the launch directory; use a parent only this user \
                 can write (or one with the sticky bit, as /tmp has)",
                Step::Check,
                ShownPath(parent)
            ),
            _ => self.fmt_run(f),
        }
    }

    /// The errors of the steps after the check.
    fn fmt_run(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::Io { step, path, .. } => write!(f, "{step}: {}", ShownPath(path)),
            ExecError::NotCopyable { path, kind } => write!(
                f,
                "{}: {} is a {kind}, which cannot be kept in the launch's pr_config on another \
                 file system (it is copied there, and only files, directories and links copy); \
                 delete it from the worktree, or put the launch directory on the worktree's \
                 file system (where the path is moved whole)",
                Step::RemoveWorktreePath,
                ShownPath(path)
            ),
            ExecError::Start { client, bin, .. } => {
                write!(f, "{}: {client} ({})", Step::Start, ShownPath(bin))
            }
            ExecError::Pipe { client, step, .. } => write!(f, "{step}: {client}"),
            ExecError::Protocol {
                client,
                step,
                answer,
            } => write!(f, "{step}: {client} answered {}", short(answer)),
            ExecError::Rpc {
                client,
                step,
                error,
            } => write!(f, "{step}: {client} answered the error {}", short(error)),
            ExecError::Timeout {
                client,
                step,
                after,
            } => write!(
                f,
                "{step}: {client} did not answer within {} s",
                after.as_secs_f32()
            ),
            ExecError::Exited {
                client,
                step,
                status,
                stderr,
            } => {
                write!(f, "{step}: {client} exited")?;
                if let Some(status) = status {
                    write!(f, " ({status})")?;
                }
                if !stderr.trim().is_empty() {
                    write!(f, "; its stderr ends: {}", short(stderr.trim()))?;
                }
                Ok(())
            }
            ExecError::TooLarge {
                client,
                step,
                limit,
            } => write!(
                f,
                "{step}: {client} wrote a line of more than {limit} bytes (the bound of one \
                 message); stopped it"
            ),
            ExecError::Flooded {
                client,
                step,
                limit,
            } => write!(
                f,
                "{step}: {client} sent more than {limit} bytes of messages before it answered \
                 (the bound of what is kept for later); stopped it"
            ),
            ExecError::Stalled {
                client,
                step,
                unsent,
            } => write!(
                f,
                "{step}: {client} has not read the last {unsent} bytes written to it and was \
                 sent more; it no longer reads its standard input"
            ),
            ExecError::ServersNotReady { .. } => fmt_not_ready(self, f),
            ExecError::Dialog {
                client,
                dialog,
                after,
            } => write!(
                f,
                "{}: {client} waits at {dialog} (no output for {} s); stopped it",
                Step::Run,
                after.as_secs_f32()
            ),
            _ => self.fmt_check(f),
        }
    }
}

impl std::error::Error for ExecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExecError::Io { source, .. }
            | ExecError::WorktreeMissing { source, .. }
            | ExecError::Start { source, .. }
            | ExecError::Pipe { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl ExecError {
    pub(crate) fn io(step: Step, path: impl Into<PathBuf>, source: std::io::Error) -> ExecError {
        ExecError::Io {
            step,
            path: path.into(),
            source,
        }
    }
}
