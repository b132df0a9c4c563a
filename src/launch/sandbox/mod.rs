//! The reviewer's sandbox: the Landlock LSM, installed in the client's process between fork
//! and exec, so that the client and everything it starts (MCP servers, shells, hooks, tools)
//! inherit it and cannot leave it.
//!
//! What a confined reviewer may reach ([`Boundary`]) is the plan's
//! [`sandbox`](crate::clients::plan::Sandbox), which the plan computes and shows, and what
//! only the executor knows:
//! - read and execute: the system's directories ([`SYSTEM_READ_EXEC`]) and the kcap binary
//!   its MCP servers run (the plan's), the client's own installation ([`installation`]) and
//!   what [`Options::sandbox_read_exec`] adds;
//! - read: the worktree (the plan's `cwd`), read-only; the system-wide files of `/proc`
//!   ([`SYSTEM_PROC_READ`]) (the plan's); and the client's own `/proc/<pid>` (its
//!   `/proc/self`), added in the child, so that no other process's `/proc/<pid>/environ`
//!   can be read;
//! - read and write: the launch directory (the client's `HOME` and `TMPDIR`), the
//!   terminal and the null devices ([`SYSTEM_DEVICES`]), the daemon's cache directory (the
//!   plan's), and what [`Options::sandbox_read_write`] adds;
//! - a `/dev/pts` of its own: in the child, a mount namespace (in a user namespace of its
//!   own, `src/launch/userns.rs`, mapping the daemon's uid to itself) with a new `devpts`
//!   instance on `/dev/pts`, allowed read and write: the terminals the reviewer opens (a
//!   tool's shell through node-pty or `openpty`) are there, and no other process's terminal
//!   is reachable by a path (on the system's, a reviewer wrote into another's: the red team
//!   of issue 31). Its own terminal it holds open (`/dev/tty` reaches it; `ttyname` finds no
//!   name for it). Where the kernel refuses the namespaces, a best-effort sandbox allows the
//!   system's `/dev/pts` and [`missing`] names it;
//! - no signal to a process outside the sandbox, and no connection to an abstract unix
//!   socket created outside it (Landlock scopes, ABI 6); `ptrace` of a process outside it
//!   is refused by Landlock itself (every ABI);
//! - a seccomp filter (`src/launch/seccomp.rs`): no `ptrace`, `process_vm_readv`,
//!   `process_vm_writev`, `pidfd_getfd` or `perf_event_open` at all (inside, a tool read an
//!   MCP server's environment from its memory, and from its stack's samples), no
//!   `socket(AF_UNIX)`, datagram `socketpair(AF_UNIX)` or `io_uring` (Landlock governs no
//!   `connect` or `sendto` to a socket by its path: a tool reached a daemon's socket, past
//!   the door too), and no keyring calls (the session keyring is the daemon's);
//! - an IPC namespace of its own: no System V or POSIX IPC object of another process.
//!
//! Everything else of the file system is refused: the daemon's `HOME`, other reviewers'
//! launch directories and worktrees, the shared `/tmp`. The network is not confined here: the
//! [`door`](super::door) does that.
//!
//! The ruleset is built in the executor (allocations, opening the paths); the child makes
//! system calls only: `unshare`, the writes of its maps and `mount` (its `/dev/pts`),
//! `open`, `landlock_add_rule` and `close` (its `/proc/self` and `/dev/pts`), `prctl`
//! (capabilities, `PR_SET_NO_NEW_PRIVS`) and `landlock_restrict_self`.
//!
//! Why `/proc/<pid>` of the client and no PID namespace: Claude Code 2.1.197 and OpenCode
//! 1.18.33 (their Bun runtime) abort without it (they read `/proc/self/maps`, `statm` and
//! `cgroup`, and `/proc/sys/vm/*`: `strace`; `tests/clients/sandbox_clients.rs`); and
//! Landlock's ptrace restriction does not cover reading `/proc/<pid>/environ` of a process
//! outside the sandbox (measured on Linux 6.18: it reads, where `kill` gets `EPERM`), so all
//! of `/proc` cannot be allowed. A process the client starts sees no `/proc/self` of its own
//! (its pid is another); the runtimes of the MCP servers and tools measured (Node.js,
//! Python, the shell: `tests/suite/launch_sandbox.rs`) run without it. docs/sandbox.md has
//! the measurements.
//!
//! Sources: the kernel's Landlock documentation
//! (<https://docs.kernel.org/userspace-api/landlock.html>) and the `landlock` crate 0.4.8.

use crate::launch::spawn::Command;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible as _, PathBeneath, PathFd, Ruleset,
    RulesetAttr as _, RulesetCreatedAttr as _, Scope,
};

use super::Options;
use super::error::ExecError;
use super::seccomp;
use super::userns;
use crate::clients::plan::LaunchPlan;

/// How strictly a launch applies a protection: the sandbox ([`Options::confinement`]) or
/// the reviewer's cgroup ([`Options::cgroup`]). The default is [`Confinement::BestEffort`]
/// for both: on a kernel that gives the whole sandbox (Landlock ABI 6, Linux 6.12 and
/// later) it is [`Confinement::Required`]; where it does not, a daemon under the strict
/// policy asks for `Required` (docs/sandbox.md, "Policies", says why this split).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Confinement {
    /// Not applied. No sandbox: the client runs with the executor's authority (for a
    /// measurement of the unconfined reviewer only); no cgroup: a stop reaches its process
    /// group only.
    Off,
    /// As far as this machine gives it; [`missing`] (the sandbox) and
    /// [`cgroup::missing`](super::cgroup::missing) name what it lacks (the CLI prints it as a
    /// warning). The default.
    #[default]
    BestEffort,
    /// All of it, or the launch is refused before anything is created
    /// ([`ExecError::NoSandbox`], [`ExecError::NoCgroup`] name what is missing).
    Required,
}

/// The Landlock ABI the whole sandbox needs: 6 (Linux 6.12), for the signal and
/// abstract-unix-socket scopes. The file-system rules need ABI 5 (device `ioctl`s).
pub const SANDBOX_ABI: i32 = 6;

pub use crate::clients::plan::{
    SYSTEM_DEVICES, SYSTEM_PROC_READ, SYSTEM_READ_EXEC, SYSTEM_SECRETS,
};

/// What a confined reviewer may reach: each list of absolute paths, a directory allowing
/// what is beneath it, a file (the client's own, [`installation`]) itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Boundary {
    /// Read and execute.
    pub read_exec: Vec<PathBuf>,
    /// Read only. (The client's own `/proc/<pid>` is added in the child, where its pid is
    /// known; it is not listed here.)
    pub read: Vec<PathBuf>,
    /// Read, write, create, remove, execute.
    pub read_write: Vec<PathBuf>,
}

impl Boundary {
    /// The boundary of `plan` carried out with `client_bin` under `options`: the plan's
    /// [`sandbox`](LaunchPlan::sandbox), the client's installation ([`installation`]) added
    /// to what it may read and execute, and what `options` add. `path` is the `PATH` the
    /// client starts with (to find a `#!/usr/bin/env` interpreter). An installation path
    /// that is or holds `/`, this process's `HOME`, the launch directory or the worktree's
    /// parent is never added (the executor refuses such a launch before it starts:
    /// [`ExecError::InstallationHolds`]).
    pub fn of(
        plan: &LaunchPlan,
        client_bin: &Path,
        path: Option<&std::ffi::OsStr>,
        options: &Options,
    ) -> Boundary {
        let paths = |list: &[String]| list.iter().map(PathBuf::from).collect::<Vec<_>>();
        let mut read_exec = paths(&plan.sandbox.read_exec);
        let kept = kept_out(plan, std::env::var_os("HOME").as_deref());
        read_exec.extend(
            installation(client_bin, path)
                .into_iter()
                .filter(|dir| held(dir, &kept).is_none()),
        );
        read_exec.extend(options.sandbox_read_exec.iter().cloned());
        let mut read_write = paths(&plan.sandbox.read_write);
        read_write.extend(options.sandbox_read_write.iter().cloned());
        Boundary {
            read_exec: without_secrets(read_exec),
            read: without_secrets(paths(&plan.sandbox.read)),
            read_write: without_secrets(read_write),
        }
    }
}

/// `paths` with every directory that holds one of [`SYSTEM_SECRETS`] or of the entries of
/// `/etc` every user cannot read ([`private_in_etc`]) replaced by its entries less the one on
/// the way to it (again for that entry, when the secret lies deeper): the same reach, less
/// the secrets. An entry that is a symbolic link is left out, as a rule would allow its
/// target: beneath the directory only what lies there was reachable.
fn without_secrets(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut secrets: Vec<PathBuf> = SYSTEM_SECRETS.iter().map(PathBuf::from).collect();
    if paths.iter().any(|p| Path::new("/etc").starts_with(p)) {
        private_in_etc(Path::new("/etc"), 0, &mut secrets);
    }
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        carve(path, &secrets, &mut out);
    }
    out
}

/// Adds to `out` each entry beneath `dir` that every user cannot read (a file without `o+r`,
/// a directory without `o+r` or `o+x`; its contents with it), at most 8 levels down. What
/// every user reads is the system's; the rest is someone's: the red team of issue 33 had a
/// root daemon's reviewer read `/etc/credstore/kcap.key` (`0600` in a `0700` directory:
/// systemd's store of a service's credentials, `LoadCredential=`), which no list named. A
/// root reviewer holds no capability, so it reads root's files only; a daemon of another
/// user reads none of these anyway.
fn private_in_etc(dir: &Path, depth: u32, out: &mut Vec<PathBuf>) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let mode = meta.permissions().mode();
        if meta.is_dir() {
            if mode & 0o005 != 0o005 {
                out.push(entry.path());
            } else if depth < 8 {
                private_in_etc(&entry.path(), depth + 1, out);
            }
        } else if meta.is_file() && mode & 0o004 == 0 {
            out.push(entry.path());
        }
    }
}

fn carve(path: PathBuf, secrets: &[PathBuf], out: &mut Vec<PathBuf>) {
    let holds = secrets.iter().any(|s| s.starts_with(&path) && *s != path);
    if !holds {
        if !secrets.contains(&path) {
            out.push(path);
        }
        return;
    }
    let Ok(entries) = std::fs::read_dir(&path) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        carve(entry.path(), secrets, out);
    }
}

/// The paths of `client_bin`'s installation, each canonical: for a file inside a
/// `node_modules` tree, that outermost `node_modules` directory itself (the package and
/// every dependency it loads lie beneath it), not the directory holding it; otherwise the
/// file itself, not its directory (a client in a directory it shares with other files,
/// `~/bin/claude`, `~/.local/bin/x`, would otherwise open all of them to the reviewer; a
/// native single-file install, `~/.local/share/claude/versions/<v>` behind the link
/// `~/.local/bin/claude`, is that file). `client_bin` is resolved through its links first
/// (`node_modules/.bin/x` links into the package). A `#!` interpreter's installation is added the same way
/// (`#!/usr/bin/env node` looks `node` up in `path`). What a file outside `node_modules`
/// loads from beside it (a wrapper's sibling script, a shared library found through its
/// `RPATH`) is not found here: [`Options::sandbox_read_exec`] adds it.
///
/// A Landlock rule on a file allows the access rights of a file only (`ruleset` keeps
/// those of [`AccessFs::from_file`],
/// <https://docs.rs/landlock/0.4.8/landlock/enum.AccessFs.html#method.from_file>; the
/// kernel refuses a directory's on a file): here read and execute, what running it takes.
///
/// Not the directory holding `node_modules`: for a local `npm install` in the daemon's
/// `HOME` (`~/node_modules/.bin/claude`) that is `HOME` itself, its keys and `.env` opened to
/// the reviewer (the red team of issue 31); for one at `/node_modules`, all of `/`. Measured
/// with the boundary holding `node_modules` only (`tests/clients/sandbox_*.rs`,
/// `launch_peers`, `first_turn`, `verify_clients`; `strace` of every open outside it): Claude
/// Code 2.1.197 and 2.1.332, Codex CLI 0.169.0 and 0.171.0, OpenCode 1.18.33 and Copilot CLI
/// 1.0.102 open nothing of the directory holding it; Gemini CLI 0.61.0 and Qwen Code 0.24.4
/// list it and read its `package.json` (yargs' version guess, which starts above the first
/// `node_modules` of its own path), are refused, and start, answer and run their servers as
/// before (yargs catches the error; both print their own version). docs/sandbox.md has the
/// table.
pub fn installation(client_bin: &Path, path: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(bin) = std::fs::canonicalize(client_bin) else {
        return found;
    };
    found.push(root_of(&bin));
    if let Some(interpreter) = interpreter(&bin, path)
        && let Ok(interpreter) = std::fs::canonicalize(interpreter)
    {
        let root = root_of(&interpreter);
        if !found.contains(&root) {
            found.push(root);
        }
    }
    found
}

/// The outermost `node_modules` directory above `file`, or else `file`.
fn root_of(file: &Path) -> PathBuf {
    file.ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .unwrap_or(file)
        .to_owned()
}

/// What no installation path may be or hold, each named and as the kernel resolves it: the
/// daemon's `HOME` (`home`), the launch directory and the worktree's parent (`/` holds the
/// launch directory). Allowing one of them would give the reviewer the daemon's keys, the
/// other reviewers' launch directories, or the worktree's siblings and a `.env` in its
/// parent (issue 34).
fn kept_out(plan: &LaunchPlan, home: Option<&std::ffi::OsStr>) -> Vec<(&'static str, PathBuf)> {
    let mut kept = Vec::new();
    if let Some(home) = home.filter(|h| !h.is_empty()) {
        kept.push(("the daemon's HOME", resolved(Path::new(home))));
    }
    kept.push((
        "the launch directory",
        resolved(Path::new(&plan.launch_dir)),
    ));
    if let Some(parent) = plan.cwd.as_deref().and_then(|c| Path::new(c).parent()) {
        kept.push(("the worktree's parent", resolved(parent)));
    }
    kept
}

/// The first of `kept` that `dir` is or holds.
fn held<'a>(
    dir: &Path,
    kept: &'a [(&'static str, PathBuf)],
) -> Option<&'a (&'static str, PathBuf)> {
    kept.iter().find(|(_, path)| path.starts_with(dir))
}

/// `path` as the kernel resolves it: canonical where it exists, else its nearest existing
/// ancestor's canonical path joined with the rest (a launch directory not created yet).
fn resolved(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => resolved(parent).join(name),
        _ => path.to_owned(),
    }
}

/// Refuses, before anything is created, a confined launch whose client installation
/// ([`installation`]) would be or hold `/`, the daemon's `HOME` (`home`: the environment's
/// the plan is carried out from), the launch directory or the worktree's parent: a
/// `node_modules` directory with the reviewer's own directories inside it. Refused rather
/// than left out of the boundary, where the client would fail at its first file.
///
/// # Errors
/// [`ExecError::InstallationHolds`], naming the installation, what it holds and the fix.
pub(crate) fn check_installation(
    plan: &LaunchPlan,
    client_bin: &Path,
    path: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Result<(), ExecError> {
    let kept = kept_out(plan, home);
    for dir in installation(client_bin, path) {
        if let Some((what, inside)) = held(&dir, &kept) {
            return Err(ExecError::InstallationHolds {
                client: plan.client.name().to_owned(),
                installation: dir,
                what,
                path: inside.clone(),
            });
        }
    }
    Ok(())
}

/// The program of `bin`'s `#!` line: its first word, or for `/usr/bin/env` the next word
/// looked up in `path`.
fn interpreter(bin: &Path, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    use std::io::Read as _;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(bin).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let program = words.next()?;
    if Path::new(program).file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        return std::env::split_paths(path?)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file());
    }
    Some(PathBuf::from(program))
}

/// What the kernel gives: its Landlock ABI version (0 when Landlock is not available).
pub fn kernel_abi() -> i32 {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attribute only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    i32::try_from(v).unwrap_or(0).max(0)
}

/// What this kernel lacks for the whole sandbox, for a refusal or a warning; `None` when
/// it gives all of it.
pub fn missing() -> Option<String> {
    missing_of(kernel_abi(), terminals_missing(), seccomp::program().err())
}

/// What is missing for the whole sandbox on a kernel whose Landlock ABI is `abi` (0: no
/// Landlock), where a `/dev/pts` of the reviewer's own lacks `terminals` and the seccomp
/// filter lacks `seccomp` (`None`: given): each named, joined by `; `.
fn missing_of(abi: i32, terminals: Option<String>, seccomp: Option<String>) -> Option<String> {
    let landlock = match abi {
        0 => Some("the Landlock LSM (not built in, or not enabled in `lsm=`)".to_owned()),
        a if a < SANDBOX_ABI => Some(format!(
            "Landlock ABI {SANDBOX_ABI} (this kernel has ABI {a}: {})",
            if a < 5 {
                "no file-system rule for device ioctls, no signal or abstract-socket scope"
            } else {
                "no signal or abstract-socket scope"
            }
        )),
        _ => None,
    };
    let missing: Vec<String> = landlock
        .into_iter()
        .chain(terminals)
        .chain(seccomp)
        .collect();
    (!missing.is_empty()).then(|| missing.join("; "))
}

/// The namespaces the sandbox's child enters ([`own_namespaces`]), in a user namespace.
const NAMESPACES: libc::c_int = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;

/// What this kernel lacks, for this user, for a `/dev/pts` of the reviewer's own (a user
/// and a mount namespace, and a new `devpts` instance mounted in it); `None` when it gives
/// it. Found by trying once in a forked process, and remembered.
fn terminals_missing() -> Option<String> {
    static FOUND: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    FOUND
        .get_or_init(|| {
            let maps = userns::Maps::own();
            // SAFETY: the step makes system calls on `maps`, prepared before the fork.
            let tried = unsafe {
                userns::probe(|| {
                    userns::enter(NAMESPACES, &maps)?;
                    userns::private_devpts()
                })
            };
            match tried {
                Ok(()) => None,
                Err(userns::Trial::NoProcess(why)) => Some(format!(
                    "a /dev/pts of its own (no process could try it: {why})"
                )),
                Err(userns::Trial::Refused(errno)) => Some(format!(
                    "a /dev/pts of its own (a user and a mount namespace with a new devpts \
                     instance: errno {errno}, {}), so another reviewer's terminal stays open to it",
                    std::io::Error::from_raw_os_error(errno)
                )),
            }
        })
        .clone()
}

/// Refuses, before anything is created, a [`Confinement::Required`] launch on a kernel that
/// lacks part of the sandbox.
///
/// # Errors
/// [`ExecError::NoSandbox`], naming what is missing.
pub(crate) fn preflight(confinement: Confinement) -> Result<(), ExecError> {
    refusal(confinement, missing())
}

/// [`preflight`]'s judgment of a kernel that lacks `missing`: a refusal naming it under
/// [`Confinement::Required`], else nothing (a best-effort launch goes on; its caller warns).
fn refusal(confinement: Confinement, missing: Option<String>) -> Result<(), ExecError> {
    match missing {
        Some(missing) if confinement == Confinement::Required => {
            Err(ExecError::NoSandbox { missing })
        }
        _ => Ok(()),
    }
}

/// Builds the Landlock ruleset of `boundary` and has `cmd`'s child restrict itself to it
/// before exec. A best-effort sandbox leaves out what the kernel lacks ([`missing`] names
/// it, for the caller's warning).
///
/// # Errors
/// [`ExecError::NoSandbox`] under [`Confinement::Required`] when the kernel lacks part
/// of the sandbox, or the ruleset cannot be built.
pub(crate) fn confine(
    cmd: &mut Command,
    boundary: &Boundary,
    confinement: Confinement,
    in_user_namespace: bool,
) -> Result<(), ExecError> {
    if confinement == Confinement::Off {
        return Ok(());
    }
    preflight(confinement)?;
    let private_terminals = terminals_missing().is_none();
    // Best effort without a devpts instance of its own: the system's, every terminal of
    // this user's in it (what `missing` names).
    let system_terminals = (!private_terminals).then_some(Path::new("/dev/pts"));
    let fd =
        ruleset(boundary, system_terminals, confinement).map_err(|e| ExecError::NoSandbox {
            missing: format!("a Landlock ruleset ({e})"),
        })?;
    let Some(fd) = fd else {
        // Best effort, and the kernel has no Landlock at all.
        return Ok(());
    };
    let maps = userns::Maps::own();
    let filter = match seccomp::program() {
        Ok(program) => Some(program),
        Err(missing) if confinement == Confinement::Required => {
            return Err(ExecError::NoSandbox { missing });
        }
        Err(_) => None,
    };
    // SAFETY: between fork and exec the closure makes system calls only (unshare, open,
    // write, mount, close, landlock_add_rule, prctl, seccomp and landlock_restrict_self) on
    // C string literals, `maps` and `filter` (prepared above) and stack values, and builds
    // `io::Error`s from errnos: no allocation, no lock, async-signal-safe. `fd` lives in the
    // closure, so it is open in the child.
    unsafe {
        cmd.pre_exec(move || {
            if private_terminals {
                own_namespaces(fd.as_raw_fd(), in_user_namespace, &maps)?;
                userns::no_more_namespaces()?;
            }
            allow(fd.as_raw_fd(), c"/proc/self", ACCESS_READ_FILE_DIR)?;
            drop_capabilities()?;
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(filter) = filter {
                seccomp::install(filter)?;
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, fd.as_raw_fd(), 0u32) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

/// In the child: a mount and an IPC namespace (in a user namespace of its own, unless the
/// door made one already). In the mount namespace a new `devpts` instance on `/dev/pts`,
/// which `ruleset` then allows: the terminals the reviewer opens are there, and no other
/// process's terminal (another reviewer's, the daemon's) is reachable by a path; its own
/// terminal it holds open. The IPC namespace: no System V shared memory, semaphore or
/// message queue, and no POSIX message queue, of another process (the red team of issue 31
/// read a daemon's `0600` segment) and none left behind.
///
/// # Safety
/// Called between fork and exec, with `ruleset` a Landlock ruleset file descriptor.
unsafe fn own_namespaces(
    ruleset: libc::c_int,
    in_user_namespace: bool,
    maps: &userns::Maps,
) -> std::io::Result<()> {
    unsafe {
        if in_user_namespace {
            if libc::unshare(NAMESPACES) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        } else {
            userns::enter(NAMESPACES, maps)?;
        }
        userns::private_devpts()?;
        // Device ioctls (a terminal's size, its modes) need ABI 5; an older kernel's
        // ruleset does not handle them, and refuses a rule naming them.
        match allow(ruleset, c"/dev/pts", ACCESS_TERMINALS | ACCESS_IOCTL_DEV) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                allow(ruleset, c"/dev/pts", ACCESS_TERMINALS)
            }
            other => other,
        }
    }
}

/// In the child, before it confines itself: empties its capability bounding set and its
/// ambient set, so that the client it execs holds no capability, also as root (a root
/// process gets at exec the capabilities of its bounding set: capabilities(7)). Landlock
/// confines the file system and signals only; a root reviewer with its capabilities changed
/// the hostname, read the kernel log and could load modules or reboot (the red team's attack
/// of stop 43). Without `CAP_SETPCAP` (a daemon that is not root) the bounding set is
/// already what the daemon holds, which is nothing a user must not have, and `EPERM` is
/// ignored. Async-signal-safe: `prctl` only. The door calls it too, after its namespace is
/// made: a reviewer without the sandbox keeps no capability over its network namespace.
pub(crate) fn drop_capabilities() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments.
    unsafe {
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            let e = std::io::Error::last_os_error();
            // EINVAL: a kernel before ambient capabilities (4.3).
            if e.raw_os_error() != Some(libc::EINVAL) {
                return Err(e);
            }
        }
        // Capability numbers run from 0 to the kernel's last; past it, EINVAL ends the loop.
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EINVAL) => break,
                    Some(libc::EPERM) => return Ok(()),
                    _ => return Err(std::io::Error::last_os_error()),
                }
            }
        }
    }
    Ok(())
}

/// `struct landlock_path_beneath_attr` of `<linux/landlock.h>` (packed, as the kernel
/// declares it).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: libc::c_int,
}

/// `LANDLOCK_RULE_PATH_BENEATH` and the `LANDLOCK_ACCESS_FS_*` rights of
/// `<linux/landlock.h>` the child's own rules name: read a file and a directory; write a
/// file; device ioctls (ABI 5).
const RULE_PATH_BENEATH: libc::c_int = 1;
const ACCESS_READ_FILE_DIR: u64 = (1 << 2) | (1 << 3);
const ACCESS_TERMINALS: u64 = ACCESS_READ_FILE_DIR | (1 << 1);
const ACCESS_IOCTL_DEV: u64 = 1 << 15;

/// In the child, before `landlock_restrict_self`: adds to `ruleset` a rule allowing
/// `access` beneath `path`, as the child sees it (its own `/proc/self`, which stays its own
/// after exec; the `/dev/pts` it mounted). A path that does not exist allows nothing.
/// Async-signal-safe: system calls on a literal and a stack value only.
///
/// # Safety
/// Called between fork and exec, with `ruleset` a Landlock ruleset file descriptor.
unsafe fn allow(ruleset: libc::c_int, path: &std::ffi::CStr, access: u64) -> std::io::Result<()> {
    // SAFETY: a NUL-terminated literal; the flags make `open` return a path descriptor.
    let own = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if own < 0 {
        return Ok(());
    }
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: own,
    };
    // SAFETY: `attr` is the kernel's struct, alive for the call; `own` is closed after.
    let added = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_PATH_BENEATH,
            &raw const attr,
            0u32,
        )
    };
    let error = (added != 0).then(std::io::Error::last_os_error);
    // SAFETY: `own` was opened above and is not used after.
    unsafe { libc::close(own) };
    error.map_or(Ok(()), Err)
}

/// The Landlock ruleset of `boundary`, with `more_read_write` allowed read and write too;
/// `None` when the kernel has no Landlock and `confinement` lets that pass.
fn ruleset(
    boundary: &Boundary,
    more_read_write: Option<&Path>,
    confinement: Confinement,
) -> Result<Option<OwnedFd>, landlock::RulesetError> {
    let abi = ABI::V6;
    let level = match confinement {
        Confinement::Required => CompatLevel::HardRequirement,
        _ => CompatLevel::BestEffort,
    };
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let read_exec = read | AccessFs::Execute;
    // Read-write is everything but device files: a root reviewer that could create a block
    // device in its launch directory read any disk through it, and so every file (measured:
    // a loop device's contents, `/dev/kmsg`; the red team's attack of stop 43).
    let read_write = all & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let mut created = Ruleset::default()
        .set_compatibility(level)
        .handle_access(all)?
        .scope(Scope::from_all(abi))?
        .create()?;
    for (paths, more, access) in [
        (&boundary.read_exec, None, read_exec),
        (&boundary.read, None, read),
        (&boundary.read_write, more_read_write, read_write),
    ] {
        for path in paths.iter().map(PathBuf::as_path).chain(more) {
            // A path that does not exist allows nothing; one that cannot be opened neither.
            let Ok(fd) = PathFd::new(path) else { continue };
            let access = if std::fs::metadata(path).is_ok_and(|m| !m.is_dir()) {
                access & AccessFs::from_file(abi)
            } else {
                access
            };
            created = created.add_rule(PathBeneath::new(fd, access))?;
        }
    }
    Ok(created.into())
}

#[cfg(test)]
mod tests;
