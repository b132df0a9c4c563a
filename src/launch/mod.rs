//! Carrying a [`LaunchPlan`] out: the executor a daemon runs (feature `launch`).
//!
//! [`launch`] takes a plan (as `render <client> --format plan` prints it, or as a room's
//! `*_plan` function returns it; its `launch_dir` is the per-launch directory) and the client
//! binary, and returns a running [`Reviewer`]:
//!
//! 1. **Check**, before anything is created: the plan's `version` is
//!    [`PLAN_VERSION`](crate::clients::plan::PLAN_VERSION); every `dirs`, `files` and
//!    `worktree_remove` path is relative, without `..`, `.` or empty components, and goes
//!    through no symbolic link that exists; file modes are permission bits only; every argv
//!    element can be passed (no NUL, at most [`MAX_ARG_BYTES`]); the environment can be set
//!    exactly (unique names, none both set and inherited, no `=` or
//!    NUL); a typed prompt holds no control character but line breaks and tabs
//!    ([`is_refused_in_terminal_prompt`](crate::clients::plan::is_refused_in_terminal_prompt));
//!    the launch directory does not exist, or is an empty directory (not a link) of
//!    this user's, and its parent is not writable by every user unless sticky. In the
//!    daemon's environment: the inherited `PATH` has no empty, relative, worktree-internal
//!    (the client starts in the worktree, and `#!/usr/bin/env node` would find the
//!    repository's `node`) or world-writable entry, and the worktree is not the daemon's
//!    `HOME` nor holds it (removing `worktree_remove` there would delete the user's
//!    configuration); both judged on the paths as written and as the kernel resolves them
//!    (links and `..` followed). Under a sandbox, the client's installation (the outermost
//!    `node_modules` directory it lies in, [`sandbox::installation`]) is not `/` and holds
//!    neither the daemon's `HOME`, the launch directory nor the worktree's parent.
//! 2. **Create** the launch directory (0700), then `dirs` (0700, parents too), then `files`
//!    with their modes: each component opened relative to its parent without following
//!    links, each file created new (`O_EXCL | O_NOFOLLOW`). On any later error the launch
//!    directory is removed again, at the descriptor limit too: two descriptors taken before
//!    it is created are given back for its removal, which then needs no more than two.
//! 3. **Remove** the `worktree_remove` paths under `cwd` that exist (a link is removed, not
//!    followed; a parent that is a link is refused).
//! 4. **Start** the client: `client_bin` with the plan's `argv`, in `cwd` (the launch
//!    directory when the plan has none), with exactly the plan's environment (an empty
//!    environment, then this process's values of `env_inherit` that are set, then `env`),
//!    in its own process group; under [`Options::network`]'s
//!    [`Network::Door`](door::Network::Door) in a network namespace of its own whose only
//!    way out is the [`door`]'s endpoints, and under [`Options::confinement`] in the
//!    [`sandbox`].
//!    - ACP clients (`session_new` is set): stdin and stdout piped; `initialize
//!      {protocolVersion: 1, clientCapabilities: {}}` and `session/new` with
//!      `session_new`, each bounded by [`Options::handshake_timeout`], their answers
//!      checked; then [`AcpSession::prompt`] sends `session/prompt` and
//!      [`AcpSession::next_event`] reads `session/update`s and refuses permission requests.
//!    - The others (Claude Code, Codex, Antigravity): a pseudo-terminal of their own
//!      ([`TerminalSession`]); a client that shows one of its plan's dialogs
//!      ([`LaunchPlan::dialogs`](crate::clients::plan::LaunchPlan::dialogs)) and then
//!      writes nothing for [`Options::dialog_quiet`] is stopped with
//!      [`ExecError::Dialog`] naming the dialog.
//! 5. **Stop** ([`Reviewer::stop`], or dropping it): `SIGTERM` to the client's whole process
//!    group (its MCP servers with it), [`STOP_GRACE`] for it to exit, then `SIGKILL` to
//!    every process in the reviewer's [`cgroup`] (`cgroup.kill`: what left the group too, a
//!    `setsid` or a double fork) and to the group; the cgroup is removed once empty (at most
//!    [`cgroup::EMPTY_WAIT`]), then the launch directory. The client is reaped only after
//!    the last signal, so the group's id (its pid, held by the unreaped leader) never names
//!    another process's group; the cgroup is killed by the kernel, by no pid at all.
//!
//!    The reviewer's cgroup ([`Options::cgroup`], default best effort): the client is born in
//!    a cgroup v2 of its own (`clone3` with `CLONE_INTO_CGROUP`, or where the kernel refuses
//!    that, it joins between fork and exec: `src/launch/spawn.rs`), so all it starts is born there. When the
//!    executor dies, however (`SIGKILL` too), its guard process kills all its reviewers'
//!    cgroups within milliseconds, then sweeps the parents of its launch directories
//!    ([`sweep`]'s code: their credentials gone within milliseconds, or
//!    [`SWEEP_MIN_AGE`] more for a launch begun just before); what a guard killed with it
//!    left is swept at the next executor's first launch. Where the machine gives no writable cgroup
//!    ([`cgroup::missing`]), a best-effort launch stops the process group only, and
//!    [`Options::die_with_parent`] kills the client (not what it started) with the
//!    executor's thread. docs/sandbox.md, "Nothing outlives the reviewer", has why and the
//!    measurements.
//!
//! No async runtime: one reader thread per launch (an ACP client's standard output and
//! standard error, both waited on with `poll`; a terminal client's terminal), and bounded
//! waits. Nothing the client does stalls the caller or grows the executor's memory without
//! bound:
//! - a line of its output is at most [`MAX_MESSAGE_BYTES`] (a longer one stops it with
//!   [`ExecError::TooLarge`]), a line of its standard error at most
//!   [`MAX_STDERR_LINE_BYTES`] (cut there, marked);
//! - what the readers hand the caller holds at most [`MAX_QUEUED_BYTES`]: past it they stop
//!   reading, and a client writing faster than the caller reads blocks on its own pipe;
//! - what an ACP client sends before it answers `initialize` or `session/new` is kept for
//!   [`AcpSession::next_event`] up to [`MAX_SET_ASIDE_BYTES`] ([`ExecError::Flooded`] past
//!   it);
//! - writes to an ACP client never block ([`AcpSession::prompt`] included): what its pipe
//!   does not take yet is written as it reads, during [`AcpSession::next_event`]; a client
//!   that has not read [`MAX_UNSENT_BYTES`] and is sent more is [`ExecError::Stalled`].
//!
//! Nothing of a launch is held once [`Reviewer::stop`] returns: no descriptor, thread,
//! process, launch directory or cgroup, and no memory that grows with the number of launches
//! (BENCHMARKS.md, "The executor's soak run": 10,000 launches in a row, resident memory
//! within 1%). What stays is the allocator's: glibc keeps, in each thread that launched,
//! a cache of the small blocks that thread freed (its tcache: at most 7 blocks of each of 64
//! sizes up to 1,032 bytes, about 234 KiB a thread), filled over a thread's first launches
//! and flat after. A daemon with a large pool of long-lived launch threads pays up to that
//! per thread (a pool of 200: about 10 MB); it can cap it with
//! `GLIBC_TUNABLES=glibc.malloc.tcache_count=0` in its environment, or launch from threads
//! that end.
//!
//! ```no_run
//! use std::path::Path;
//! use std::time::Duration;
//! use kcap_mcp_registry::clients::plan::LaunchPlan;
//! use kcap_mcp_registry::launch::{self, AcpEvent, Options, Reviewer};
//!
//! let plan: LaunchPlan = serde_json::from_str(&std::fs::read_to_string("plan.json")?)?;
//! let reviewer = launch::launch(&plan, Path::new("/usr/local/bin/gemini"), &Options::default())?;
//! if let Reviewer::Acp(mut session) = reviewer {
//!     session.prompt("Review the change on this branch.")?;
//!     while let Some(event) = session.next_event(Duration::from_secs(600))? {
//!         if matches!(event, AcpEvent::PromptDone { .. } | AcpEvent::Exited(_)) {
//!             break;
//!         }
//!     }
//!     session.stop()?;
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod acp;
mod args;
pub mod cgroup;
pub mod door;
mod error;
mod gate;
mod guard;
mod prepare;
mod process;
mod pty;
mod queue;
mod remove;
pub mod sandbox;
mod seccomp;
mod spawn;
mod sweep;
mod userns;
mod worktree;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use spawn::Stdio;

pub use acp::{
    AcpEvent, AcpSession, MAX_MESSAGE_BYTES, MAX_SET_ASIDE_BYTES, MAX_STDERR_LINE_BYTES,
    MAX_UNSENT_BYTES, PROTOCOL_VERSION,
};
pub use args::MAX_ARG_BYTES;
pub use error::{ExecError, PathField, ReadyField, Step};
pub use prepare::{DIR_MODE, LOCK_SUFFIX, SWEEP_MIN_AGE, lock_path, path_problem};
pub use process::{STOP_GRACE, client_env, client_env_from};
pub use pty::{TerminalEvent, TerminalSession};
pub use queue::MAX_QUEUED_BYTES;
pub use sweep::sweep;
pub use userns::{MAX_TASKS, WATCH_SHARE};

use crate::clients::plan::LaunchPlan;

/// Bounds and sizes of a launch.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Options {
    /// How long an ACP client may take to answer `initialize`, and then `session/new`
    /// (each); and a terminal client with a typed prompt
    /// ([`TypedPrompt`](crate::clients::plan::TypedPrompt)), from its start, for its log to
    /// say that its MCP servers listed their tools ([`ExecError::ServersNotReady`] after).
    /// Default 60 s: Gemini CLI and Copilot CLI start in a few seconds, `session/new` waits
    /// for the MCP servers to start, and Claude Code gives up on a server after 30 s
    /// (`MCP_TIMEOUT`).
    pub handshake_timeout: Duration,
    /// How long a terminal client may show a known dialog without writing anything before
    /// it is stopped with [`ExecError::Dialog`]. Default 3 s.
    pub dialog_quiet: Duration,
    /// The pseudo-terminal's size, rows and columns. Default 50 × 200.
    pub terminal_size: (u16, u16),
    /// Have the kernel kill the client (`SIGKILL`, `PR_SET_PDEATHSIG`) when the thread that
    /// started it exits, so that a killed command-line run leaves no reviewer behind.
    /// Default off: a daemon that starts reviewers from short-lived threads must not.
    pub die_with_parent: bool,
    /// Whether the client runs in the [`sandbox`]. Default
    /// [`BestEffort`](sandbox::Confinement::BestEffort): the whole sandbox where the kernel
    /// gives it, as much of it as it gives elsewhere ([`sandbox::missing`] names the rest, for
    /// the daemon's log). A daemon under the strict policy sets
    /// [`Required`](sandbox::Confinement::Required), which refuses such a kernel.
    pub confinement: sandbox::Confinement,
    /// Whether the client and all it starts run in a [`cgroup`] of their own, killed whole
    /// on stop and when the executor dies. Default
    /// [`Confinement::BestEffort`](sandbox::Confinement::BestEffort): where this machine
    /// gives none ([`cgroup::missing`]), the process group only;
    /// [`Confinement::Required`](sandbox::Confinement::Required) refuses the launch there
    /// ([`ExecError::NoCgroup`]) before anything is created.
    pub cgroup: sandbox::Confinement,
    /// Paths the sandboxed reviewer may also read and execute (the kcap binary its MCP
    /// servers run, say): absolute; a directory allows what is beneath it.
    pub sandbox_read_exec: Vec<PathBuf>,
    /// Paths the sandboxed reviewer may also read and write.
    pub sandbox_read_write: Vec<PathBuf>,
    /// The reviewer's network: the executor's own, or a namespace whose only way out is the
    /// [`door`]. Default [`Network::Open`](door::Network::Open).
    pub network: door::Network,
    /// How the door runs (its answer timeout, root certificates added for its TLS
    /// upstreams): the daemon's own configuration, never a plan's. Default
    /// [`door::Settings::default`].
    pub door: door::Settings,
    /// Leave the launch directory in place, on a failed launch too (once it is created), for
    /// a look at what the client wrote: its credentials stay with it, so the caller removes
    /// it. Default off. A running reviewer's is kept with [`Reviewer::keep_launch_dir`].
    pub keep_launch_dir: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            handshake_timeout: Duration::from_secs(60),
            dialog_quiet: Duration::from_secs(3),
            terminal_size: (50, 200),
            die_with_parent: false,
            confinement: sandbox::Confinement::BestEffort,
            cgroup: sandbox::Confinement::BestEffort,
            sandbox_read_exec: Vec::new(),
            sandbox_read_write: Vec::new(),
            network: door::Network::Open,
            door: door::Settings::default(),
            keep_launch_dir: false,
        }
    }
}

impl Options {
    /// These options with `handshake_timeout`.
    pub fn with_handshake_timeout(mut self, bound: Duration) -> Self {
        self.handshake_timeout = bound;
        self
    }

    /// These options with `die_with_parent`.
    pub fn with_die_with_parent(mut self, on: bool) -> Self {
        self.die_with_parent = on;
        self
    }

    /// These options with `confinement`.
    pub fn with_confinement(mut self, confinement: sandbox::Confinement) -> Self {
        self.confinement = confinement;
        self
    }

    /// These options with `cgroup`.
    pub fn with_cgroup(mut self, policy: sandbox::Confinement) -> Self {
        self.cgroup = policy;
        self
    }

    /// These options with `network`: [`Network::Door`](door::Network::Door) gives the
    /// reviewer a network of its own whose only way out is the door's endpoints.
    pub fn with_network(mut self, network: door::Network) -> Self {
        self.network = network;
        self
    }

    /// These options with `der` (a DER certificate) added to the roots the door's TLS
    /// upstreams may chain to ([`door::Settings::extra_roots`]).
    pub fn with_door_root(mut self, der: impl Into<Vec<u8>>) -> Self {
        self.door.extra_roots.push(der.into());
        self
    }

    /// These options with the door's [`answer_timeout`](door::Settings::answer_timeout).
    pub fn with_door_answer_timeout(mut self, bound: Duration) -> Self {
        self.door.answer_timeout = bound;
        self
    }

    /// These options with the door's [`request_timeout`](door::Settings::request_timeout).
    pub fn with_door_request_timeout(mut self, bound: Duration) -> Self {
        self.door.request_timeout = bound;
        self
    }

    /// These options with the door's budget of requests carrying the daemon's credential
    /// ([`keyed_requests`](door::Settings::keyed_requests)).
    pub fn with_door_keyed_requests(mut self, budget: u64) -> Self {
        self.door.keyed_requests = budget;
        self
    }

    /// These options with the door's rate of requests carrying the daemon's credential
    /// ([`keyed_rate`](door::Settings::keyed_rate)).
    pub fn with_door_keyed_rate(mut self, rate: door::Rate) -> Self {
        self.door.keyed_rate = rate;
        self
    }

    /// These options with `path` added to [`Options::sandbox_read_exec`].
    pub fn with_sandbox_read_exec(mut self, path: impl Into<PathBuf>) -> Self {
        self.sandbox_read_exec.push(path.into());
        self
    }

    /// These options with `path` added to [`Options::sandbox_read_write`].
    pub fn with_sandbox_read_write(mut self, path: impl Into<PathBuf>) -> Self {
        self.sandbox_read_write.push(path.into());
        self
    }

    /// These options with `dialog_quiet`.
    pub fn with_dialog_quiet(mut self, bound: Duration) -> Self {
        self.dialog_quiet = bound;
        self
    }

    /// These options with `keep_launch_dir`.
    pub fn with_keep_launch_dir(mut self, on: bool) -> Self {
        self.keep_launch_dir = on;
        self
    }
}

/// A running reviewer: over ACP, or in a pseudo-terminal.
#[derive(Debug)]
pub enum Reviewer {
    /// A client driven over ACP, its session open.
    Acp(AcpSession),
    /// A client in a pseudo-terminal.
    Terminal(TerminalSession),
}

impl Reviewer {
    /// The client's process id (the leader of its process group).
    pub fn pid(&self) -> u32 {
        match self {
            Reviewer::Acp(s) => s.pid(),
            Reviewer::Terminal(s) => s.pid(),
        }
    }

    /// Stops the client, its process group and its cgroup (all it started, what left the
    /// group too), removes the launch directory, and returns the client's exit status.
    ///
    /// # Errors
    /// As [`AcpSession::stop`].
    pub fn stop(self) -> Result<Option<ExitStatus>, ExecError> {
        match self {
            Reviewer::Acp(s) => s.stop(),
            Reviewer::Terminal(s) => s.stop(),
        }
    }

    /// The network door's last log lines ([`door::Door::log`]); none without a door, or
    /// once the reviewer is stopped.
    pub fn door_log(&self) -> Vec<String> {
        match self {
            Reviewer::Acp(s) => s.door_log(),
            Reviewer::Terminal(s) => s.door_log(),
        }
    }

    /// The requests the network door passed on with the daemon's credential, and those it
    /// refused past the launch's budget ([`door::Door::keyed_requests`]); `(0, 0)` without a
    /// door, or once the reviewer is stopped.
    pub fn door_keyed_requests(&self) -> (u64, u64) {
        match self {
            Reviewer::Acp(s) => s.door_keyed_requests(),
            Reviewer::Terminal(s) => s.door_keyed_requests(),
        }
    }

    /// Keeps the launch directory when the reviewer is stopped or dropped.
    pub fn keep_launch_dir(&mut self) {
        match self {
            Reviewer::Acp(s) => s.keep_launch_dir(),
            Reviewer::Terminal(s) => s.keep_launch_dir(),
        }
    }
}

/// Checks `plan`, creates its launch directory (`plan.launch_dir`) and what the plan puts in it, removes the plan's
/// worktree paths, and starts `client_bin` as the plan says (the module docs list each
/// step). Nothing is created when the check refuses the plan; on a later error the launch
/// directory is removed again and the client, if started, stopped.
///
/// # Errors
/// [`ExecError`], naming the step and the path or the client.
pub fn launch(
    plan: &LaunchPlan,
    client_bin: &Path,
    options: &Options,
) -> Result<Reviewer, ExecError> {
    launch_with_parent_env(plan, client_bin, options, &|name| std::env::var_os(name))
}

/// `client_bin` as its caller meant it: a relative path with a directory in it
/// (`./client.sh`, `bin/claude`) made absolute against this process's working directory. The
/// client starts in the plan's `cwd`, the worktree under review, where the kernel would
/// resolve the same relative path (Rust's `Command` on Unix): a file the pull request adds
/// there would be started as the client (a fresh user's run, issue 36). A bare name is looked
/// up on `PATH`, an absolute path taken as it is.
///
/// # Errors
/// [`ExecError::Io`] at [`Step::Start`] when the working directory cannot be read.
fn client_path(client_bin: &Path) -> Result<std::borrow::Cow<'_, Path>, ExecError> {
    if client_bin.is_absolute() || client_bin.components().count() < 2 {
        return Ok(std::borrow::Cow::Borrowed(client_bin));
    }
    std::path::absolute(client_bin)
        .map(std::borrow::Cow::Owned)
        .map_err(|e| ExecError::io(Step::Start, client_bin, e))
}

/// [`launch`], with the values of the plan's `env_inherit` looked up in `parent` instead of
/// this process's environment: for a caller that stands in for a daemon whose environment
/// is not its own (`verify` gives the client a hostile daemon environment this way).
///
/// # Errors
/// As [`launch`].
pub fn launch_with_parent_env(
    plan: &LaunchPlan,
    client_bin: &Path,
    options: &Options,
    parent: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Reviewer, ExecError> {
    let client_bin = &*client_path(client_bin)?;
    let launch_dir = Path::new(&plan.launch_dir);
    prepare::check(plan, launch_dir)?;
    process::check_parent(plan, parent)?;
    sandbox::preflight(options.confinement)?;
    let path = plan
        .env_inherit
        .iter()
        .any(|n| n == "PATH")
        .then(|| parent("PATH"))
        .flatten();
    if options.confinement != sandbox::Confinement::Off {
        sandbox::check_installation(plan, client_bin, path.as_deref(), parent("HOME").as_deref())?;
    }
    // Before anything is created: a required cgroup that cannot be made refuses the launch.
    let cgroup = cgroup::LaunchCgroup::new(options.cgroup)?;
    let network = door::of_plan(plan, options)?;
    door::preflight(&network, &options.door)?;
    // One launch per directory: the loser of a race stops here, having touched nothing.
    sweep::once(launch_dir, cgroup.is_some());
    let claim = prepare::claim(launch_dir)?;
    if claim.stale {
        // Left by a launch that is gone (killed, or its machine crashed): its credentials
        // go now.
        prepare::remove_leftover(launch_dir)
            .map_err(|e| ExecError::io(Step::CreateLaunchDir, launch_dir, e))?;
    }
    prepare::check_launch_dir(launch_dir, false)?;
    let mut dir = prepare::create(plan, launch_dir, claim)?;
    if options.keep_launch_dir {
        dir.keep();
    }
    worktree::take_out_paths(plan)?;
    let mut cmd = process::command(plan, launch_dir, client_bin, parent);
    if let Some(cgroup) = &cgroup {
        // The first thing the child does: all it starts is born in the cgroup.
        let required = options.cgroup == sandbox::Confinement::Required;
        cgroup
            .join(&mut cmd, required)
            .map_err(|e| ExecError::io(Step::Start, cgroup.dir(), e))?;
    }
    if options.die_with_parent {
        process::die_with_parent(&mut cmd);
    }
    // The namespace is entered before the sandbox is installed: the child writes its own
    // `/proc/self/uid_map`, which the sandbox does not allow.
    let door = door::install(&mut cmd, &network, &options.door)?;
    let boundary = sandbox::Boundary::of(plan, client_bin, path.as_deref(), options);
    sandbox::confine(&mut cmd, &boundary, options.confinement, door.is_some())?;
    let start_error = |source| ExecError::Start {
        client: plan.client.name().to_owned(),
        bin: client_bin.to_owned(),
        source,
    };
    match &plan.session_new {
        Some(session_new) => {
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .own_session();
            let child = cmd.spawn().map_err(start_error)?;
            let note = plan
                .pr_config
                .as_deref()
                .map(|dir| crate::clients::plan::pr_config_note(&plan.worktree_remove, dir));
            // Best effort: one the kernel kept out is not the reviewer's.
            let cgroup = cgroup.filter(|c| c.holds(child.id()));
            let mut process = process::Process::new(child, plan.client.name(), cgroup);
            process.door = door.map(door::Pending::open).transpose()?;
            let gate = plan.servers_ready.as_ref().map(|ready| {
                gate::Gate::servers(
                    ready,
                    Path::new(&plan.launch_dir),
                    options.handshake_timeout,
                )
            });
            AcpSession::open(process, dir, session_new, note, options, gate).map(Reviewer::Acp)
        }
        None => {
            let master = pty::attach(&mut cmd, options)
                .map_err(|e| ExecError::io(Step::OpenTerminal, "/dev/ptmx", e))?;
            let child = cmd.spawn().map_err(start_error);
            // The parent's copies of the client's end of the terminal go with `cmd`: the
            // controller end then reads end-of-file when the client's processes are gone.
            drop(cmd);
            let child = child?;
            let cgroup = cgroup.filter(|c| c.holds(child.id()));
            let mut process = process::Process::new(child, plan.client.name(), cgroup);
            process.door = door.map(door::Pending::open).transpose()?;
            let gate = plan.typed_prompt.as_ref().map(|prompt| {
                gate::Gate::new(
                    prompt,
                    Path::new(&plan.launch_dir),
                    options.handshake_timeout,
                )
            });
            TerminalSession::open(process, dir, master, options, gate, &plan.dialogs)
                .map(Reviewer::Terminal)
        }
    }
}

/// The dry run's line for the sandbox ([`steps`]): none when it is off.
fn sandbox_step(plan: &LaunchPlan, client_bin: &Path, options: &Options) -> Option<String> {
    if options.confinement == sandbox::Confinement::Off {
        return None;
    }
    let path = std::env::var_os("PATH");
    let b = sandbox::Boundary::of(plan, client_bin, path.as_deref(), options);
    let list = |paths: &[PathBuf]| {
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    Some(format!(
        "confine it and all it starts in the sandbox ({:?}, Landlock): read and execute \
         {}; read {} and its own /proc/<pid>; read and write {} and a /dev/pts of its own, no \
         device file made there; no signal, ptrace or abstract unix socket outside; no ptrace, \
         perf_event_open, io_uring or keyring call, no unix socket but a stream pair; no \
         capability",
        options.confinement,
        list(&b.read_exec),
        list(&b.read),
        list(&b.read_write),
    ))
}

/// Only the check of [`launch`]'s first step: `Ok` when `plan` would be carried out into its
/// launch directory. Creates nothing.
///
/// # Errors
/// What [`launch`] would refuse the plan with before creating anything.
pub fn check(plan: &LaunchPlan) -> Result<(), ExecError> {
    prepare::check(plan, Path::new(&plan.launch_dir))
}

/// What [`launch`] would do with `plan`, one line per step, for a dry run (`launch
/// --dry-run`). Environment values are not shown (they hold credentials): the plan shows
/// them, and [`LaunchPlan::to_json_without_credentials`] all but the credentials' (what the dry run
/// prints before the steps).
pub fn steps(plan: &LaunchPlan, client_bin: &Path, options: &Options) -> Vec<String> {
    let client_bin = &*client_path(client_bin).unwrap_or(std::borrow::Cow::Borrowed(client_bin));
    let launch_dir = Path::new(&plan.launch_dir);
    let dir = launch_dir.display();
    let mut steps = vec![
        format!(
            "check the plan (version {}, paths, modes, environment) and that {dir} is new, or \
             an empty directory of this user's",
            plan.version
        ),
        format!("create {dir} (mode {DIR_MODE:04o})"),
    ];
    steps.extend(
        plan.dirs
            .iter()
            .map(|d| format!("create {dir}/{d} (mode {DIR_MODE:04o})")),
    );
    steps.extend(plan.files.iter().map(|f| {
        format!(
            "write {dir}/{} (mode {:04o}, {} bytes, not following links)",
            f.path,
            f.mode,
            f.contents.len()
        )
    }));
    let cwd = plan.cwd.as_deref().map_or(launch_dir, Path::new);
    steps.extend(plan.worktree_remove.iter().map(|p| match &plan.pr_config {
        Some(kept) => format!(
            "move {} if it exists, in any capitalisation, to {kept}/{p} (removed with the \
             launch directory)",
            cwd.join(p).display()
        ),
        None => format!(
            "remove {} if it exists, in any capitalisation",
            cwd.join(p).display()
        ),
    }));
    let set: Vec<&str> = plan.env.iter().map(|v| v.name.as_str()).collect();
    let how = match plan.session_new {
        Some(_) => "stdin and stdout piped",
        None => "in a pseudo-terminal",
    };
    steps.push(format!(
        "start {} {:?} in {}, {how}, in its own process group, with only {} set by the plan \
         and {} from this environment when set",
        client_bin.display(),
        plan.argv,
        cwd.display(),
        set.join(" "),
        plan.env_inherit.join(" "),
    ));
    steps.extend(cgroup_step(options));
    steps.extend(sandbox_step(plan, client_bin, options));
    steps.extend(door::of_plan(plan, options).map_or_else(
        |e| Some(format!("refuse the launch: {e}")),
        |network| door::step(&network),
    ));
    match &plan.session_new {
        Some(session_new) => steps.extend([
            format!(
                "send ACP initialize {{\"protocolVersion\":{PROTOCOL_VERSION},\"clientCapabilities\":{{}}}} \
                 (answer within {} s)",
                options.handshake_timeout.as_secs()
            ),
            format!(
                "send ACP session/new {} (answer within {} s)",
                serde_json::to_string(session_new).unwrap_or_default(),
                options.handshake_timeout.as_secs()
            ),
            "send ACP session/prompt with the prompt; print each session/update; refuse each \
             session/request_permission"
                .to_owned(),
        ]),
        None => steps.push(format!(
            "print the terminal's output; stop the client when it shows a known dialog and \
             writes nothing for {} s",
            options.dialog_quiet.as_secs_f32()
        )),
    }
    steps.extend(typed_prompt_step(plan, options));
    let everything = if options.cgroup == sandbox::Confinement::Off {
        ""
    } else {
        " and to all in its cgroup (cgroup.kill), then remove the cgroup"
    };
    steps.push(format!(
        "on stop: SIGTERM, then SIGKILL after {} s, to the client's process group{everything}; \
         remove {dir}",
        STOP_GRACE.as_secs_f32()
    ));
    steps
}

/// The step of a terminal client's typed prompt, when the plan has one.
fn typed_prompt_step(plan: &LaunchPlan, options: &Options) -> Option<String> {
    let prompt = plan.typed_prompt.as_ref()?;
    let quoted = |texts: &[String]| {
        texts
            .iter()
            .map(|t| format!("{t:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "type the prompt ({} bytes, one bracketed paste, then Enter) once {}/{} holds {}; stop \
         the client, the prompt unsent, when a line holds {} or after {} s",
        prompt.text.len(),
        plan.launch_dir,
        prompt.log,
        quoted(&prompt.ready),
        quoted(&prompt.failed),
        options.handshake_timeout.as_secs()
    ))
}

/// The step of the reviewer's cgroup, unless it is off: where it goes (creates nothing).
fn cgroup_step(options: &Options) -> Option<String> {
    if options.cgroup == sandbox::Confinement::Off {
        return None;
    }
    let place = match cgroup::own_cgroup() {
        Ok(own) => format!("under {}", own.display()),
        Err(missing) => format!("(this machine lacks {missing})"),
    };
    Some(format!(
        "put it and all it starts, before it runs, in a cgroup v2 of their own {place} ({:?}), \
         killed whole on stop and when this process dies",
        options.cgroup
    ))
}
