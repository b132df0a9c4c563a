//! The client process: its command (exactly the plan's environment, in the plan's `cwd`),
//! and stopping it with its whole process group and its [cgroup](super::cgroup).
//!
//! The group is signalled by its id, the leader's pid, so that id must never name another
//! group: the leader is left unreaped (a zombie, which keeps its pid and so the group's id
//! from being reused) until the last signal to its group is sent. Its exit is seen with
//! `waitid(…, WNOWAIT)`, which reports it without reaping; only [`Process::stop`] reaps.
//! The cgroup is killed by the kernel (`cgroup.kill`), which names no pid at all.

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitStatus;

use super::spawn::{Child, Command};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

use super::cgroup::LaunchCgroup;
use super::error::{ExecError, Step};
use crate::clients::plan::LaunchPlan;

/// How long a stopped client has between `SIGTERM` and `SIGKILL` to its process group.
pub const STOP_GRACE: Duration = Duration::from_millis(1500);

/// The environment the client starts with: the current process's values of the plan's
/// `env_inherit` (those set), then the plan's `env`; nothing else.
pub fn client_env(plan: &LaunchPlan) -> Vec<(OsString, OsString)> {
    client_env_from(plan, &|name| std::env::var_os(name))
}

/// [`client_env`], with the values of `env_inherit` looked up in `parent` (the
/// environment the daemon would have) instead of the current process's.
pub fn client_env_from(
    plan: &LaunchPlan,
    parent: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = plan
        .env_inherit
        .iter()
        .filter_map(|name| parent(name).map(|v| (OsString::from(name), v)))
        .collect();
    env.extend(
        plan.env
            .iter()
            .map(|v| (OsString::from(&v.name), OsString::from(&v.value))),
    );
    env
}

/// `path` as the kernel resolves it (symbolic links and `..` followed) when it exists, else
/// as given: the paths the checks compare are judged as the client will reach them.
fn resolved(path: &Path) -> std::path::PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// Refuses a daemon environment the plan cannot be carried out safely in: an inherited
/// `PATH` with an empty, relative, worktree-internal or world-writable entry
/// ([`ExecError::UnsafePath`]), a worktree that is the daemon's `HOME` or holds it
/// ([`ExecError::WorktreeHoldsHome`]). Paths are compared as written and as the kernel
/// resolves them, so a symbolic link or a `..` slips past neither check.
pub(crate) fn check_parent(
    plan: &LaunchPlan,
    parent: &dyn Fn(&str) -> Option<OsString>,
) -> Result<(), ExecError> {
    use std::os::unix::fs::PermissionsExt as _;
    let worktree = plan.cwd.as_deref().map(Path::new);
    let worktree_real = worktree.map(resolved);
    let inside_worktree = |p: &Path| {
        worktree.is_some_and(|w| p.starts_with(w))
            || worktree_real
                .as_deref()
                .is_some_and(|w| resolved(p).starts_with(w))
    };
    if plan.env_inherit.iter().any(|n| n == "PATH")
        && let Some(path) = parent("PATH")
    {
        for entry in std::env::split_paths(&path) {
            let problem = if entry.as_os_str().is_empty() {
                Some("is empty (the working directory)")
            } else if entry.is_relative() {
                Some("is relative (to the working directory)")
            } else if inside_worktree(&entry) {
                Some("is inside the worktree")
            } else if std::fs::metadata(&entry)
                .is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o002 != 0)
            {
                Some("is writable by every user (another could put a program there)")
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(ExecError::UnsafePath {
                    entry: entry.to_string_lossy().into_owned(),
                    problem,
                });
            }
        }
    }
    let home = parent("HOME")
        .filter(|h| !h.is_empty())
        .map(std::path::PathBuf::from);
    if let (Some(worktree), Some(home)) = (worktree, home)
        && !plan.worktree_remove.is_empty()
        && inside_worktree(&home)
    {
        return Err(ExecError::WorktreeHoldsHome {
            worktree: worktree.to_owned(),
            home,
        });
    }
    Ok(())
}

/// `bin` with the plan's argv, in the plan's `cwd` (the launch directory when the plan has
/// none), with exactly [`client_env_from`] `parent`.
pub(crate) fn command(
    plan: &LaunchPlan,
    launch_dir: &Path,
    bin: &Path,
    parent: &dyn Fn(&str) -> Option<OsString>,
) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(&plan.argv)
        .envs(client_env_from(plan, parent))
        .current_dir(plan.cwd.as_deref().map_or(launch_dir, Path::new));
    cmd
}

/// Has the kernel send `SIGKILL` to the client when the thread that started it exits.
pub(crate) fn die_with_parent(cmd: &mut Command) {
    // SAFETY: between fork and exec the closure makes one system call (prctl) and builds an
    // `io::Error` from an errno: no allocation, no lock, async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            Ok(())
        });
    }
}

/// A started client, the leader of its own process group, in its own cgroup when it has
/// one.
#[derive(Debug)]
pub(crate) struct Process {
    pub(crate) child: Child,
    pub(crate) client: String,
    /// The reviewer's network door, closed when the client is stopped.
    pub(crate) door: Option<super::door::Door>,
    status: Option<ExitStatus>,
    stopped: bool,
    cgroup: Option<LaunchCgroup>,
}

impl Process {
    pub(crate) fn new(child: Child, client: &str, cgroup: Option<LaunchCgroup>) -> Process {
        Process {
            child,
            client: client.to_owned(),
            door: None,
            status: None,
            stopped: false,
            cgroup,
        }
    }

    /// The network door's last log lines ([`Door::log`](super::door::Door::log)); none
    /// without a door.
    pub(crate) fn door_log(&self) -> Vec<String> {
        self.door
            .as_ref()
            .map(super::door::Door::log)
            .unwrap_or_default()
    }

    /// [`Door::keyed_requests`](super::door::Door::keyed_requests); `(0, 0)` without a door.
    pub(crate) fn door_keyed_requests(&self) -> (u64, u64) {
        self.door
            .as_ref()
            .map(super::door::Door::keyed_requests)
            .unwrap_or_default()
    }

    /// Its exit status, if it has exited. It is not reaped here (see the module docs), so
    /// its pid, the group's id, stays its own until [`Process::stop`].
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.peek();
        }
        self.status
    }

    /// `waitid(P_PID, pid, WEXITED | WNOHANG | WNOWAIT)`: its exit status without reaping.
    fn peek(&self) -> Option<ExitStatus> {
        use rustix::process::{WaitId, WaitIdOptions};
        use std::os::unix::process::ExitStatusExt as _;
        let pid = Pid::from_raw(i32::try_from(self.child.id()).ok()?)?;
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        let status = rustix::process::waitid(WaitId::Pid(pid), options).ok()??;
        // The wait(2) status word std's `ExitStatus` holds: the code in bits 8..16, or the
        // signal in bits 0..7 (bit 7: a core was dumped).
        let raw = match (status.exit_status(), status.terminating_signal()) {
            (Some(code), _) => (code & 0xff) << 8,
            (None, Some(signal)) => (signal & 0x7f) | if status.dumped() { 0x80 } else { 0 },
            (None, None) => return None,
        };
        Some(ExitStatus::from_raw(raw))
    }

    /// Waits up to `bound` for it to exit.
    pub(crate) fn wait_exit(&mut self, bound: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + bound;
        // A pidfd turns readable when the client exits (Linux 5.3): the wait ends then, not
        // at the next 20 ms look. A sandboxed client's exit tears its namespaces down first,
        // so the first look missed it and every such stop took 20 ms more (BENCHMARKS.md,
        // "The sandbox, on and off"). Without a pidfd, the looks alone.
        let pidfd = i32::try_from(self.child.id())
            .ok()
            .and_then(Pid::from_raw)
            .and_then(|pid| {
                rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
            });
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            let look = (deadline - now).min(Duration::from_millis(20));
            match &pidfd {
                Some(fd) => {
                    use rustix::event::{PollFd, PollFlags, Timespec, poll};
                    let timeout = Timespec::try_from(look).unwrap_or(Timespec {
                        tv_sec: 0,
                        tv_nsec: 20_000_000,
                    });
                    let mut fds = [PollFd::new(fd, PollFlags::IN)];
                    // An interruption or an error is one more look.
                    let _ = poll(&mut fds, Some(&timeout));
                }
                None => std::thread::sleep(look),
            }
        }
    }

    fn signal_group(&self, signal: Signal) -> Result<(), ExecError> {
        // A group of 1 or less would be every process (kill(-1)): never signalled.
        let Some(pid) = i32::try_from(self.child.id())
            .ok()
            .filter(|id| *id > 1)
            .and_then(Pid::from_raw)
        else {
            return Ok(());
        };
        match rustix::process::kill_process_group(pid, signal) {
            // No process of the group is left.
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(e) => Err(ExecError::Pipe {
                client: self.client.clone(),
                step: Step::Stop,
                source: e.into(),
            }),
        }
    }

    /// Stops the client and every process of its group (its MCP servers among them):
    /// `SIGTERM`, then after [`STOP_GRACE`] `SIGKILL`, and reaps it; then kills what is
    /// left in its cgroup (what left the group: `setsid`, a double fork) and removes the
    /// cgroup. Returns its exit status.
    pub(crate) fn stop(&mut self) -> Result<Option<ExitStatus>, ExecError> {
        if self.stopped {
            return Ok(self.status);
        }
        self.stopped = true;
        if self.exited().is_none() {
            self.signal_group(Signal::TERM)?;
            self.wait_exit(STOP_GRACE);
        }
        // Everything of the reviewer, wherever its process group is.
        let killed = self.cgroup.as_ref().map(LaunchCgroup::kill);
        // Whatever is left of the group (servers the client started), leader or not, while
        // the unreaped leader still holds the group's id.
        self.signal_group(Signal::KILL)?;
        if self.status.is_none() {
            let _ = self.child.kill();
        }
        // Reaped only now: the group's id may be reused from here on, and is not signalled.
        let reaped = self.child.wait().ok();
        if let Some(cgroup) = &mut self.cgroup {
            let stopped = killed.unwrap_or(Ok(())).and(cgroup.stop());
            stopped.map_err(|source| ExecError::Pipe {
                client: self.client.clone(),
                step: Step::Stop,
                source,
            })?;
        }
        drop(self.door.take());
        Ok(self.status.or(reaped))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::plan::Isolation;

    fn plan(cwd: Option<&str>, remove: &[&str]) -> LaunchPlan {
        LaunchPlan {
            version: crate::clients::plan::PLAN_VERSION,
            client: crate::clients::Client::Codex,
            isolation: Isolation::Verified {
                proven_on: Vec::new(),
            },
            cwd: cwd.map(str::to_owned),
            launch_dir: "/run/kcap/l1".into(),
            argv: Vec::new(),
            env: Vec::new(),
            env_inherit: vec!["PATH".into(), "LANG".into()],
            dirs: Vec::new(),
            files: Vec::new(),
            worktree_remove: remove.iter().map(|p| (*p).to_owned()).collect(),
            pr_config: None,
            session_new: None,
            typed_prompt: None,
            servers_ready: None,
            dialogs: Vec::new(),
            unasked: Vec::new(),
            servers: Vec::new(),
            sandbox: crate::clients::plan::Sandbox::new("/run/kcap/l1", cwd),
            door: None,
        }
    }

    fn parent(path: &'static str, home: &'static str) -> impl Fn(&str) -> Option<OsString> {
        move |name| match name {
            "PATH" => Some(path.into()),
            "HOME" => Some(home.into()),
            _ => None,
        }
    }

    #[test]
    fn an_inherited_path_entry_the_worktree_could_answer_is_refused() {
        let p = plan(Some("/work/tree"), &[".codex"]);
        assert!(check_parent(&p, &parent("/usr/local/bin:/usr/bin", "/home/k")).is_ok());
        for (path, entry, problem) in [
            (
                "node_modules/.bin:/usr/bin",
                "node_modules/.bin",
                "is relative",
            ),
            ("/usr/bin:", "", "is empty"),
            ("/usr/bin::/bin", "", "is empty"),
            (
                "/work/tree/node_modules/.bin:/usr/bin",
                "/work/tree/node_modules/.bin",
                "is inside",
            ),
        ] {
            match check_parent(&p, &parent(path, "/home/k")) {
                Err(ExecError::UnsafePath {
                    entry: e,
                    problem: why,
                }) => {
                    assert_eq!(e, entry, "{path}");
                    assert!(why.starts_with(problem), "{path}: {why}");
                }
                other => panic!("{path}: {other:?}"),
            }
        }
        // A plan that does not inherit PATH is not concerned.
        let mut q = plan(Some("/work/tree"), &[]);
        q.env_inherit.clear();
        assert!(check_parent(&q, &parent("relative", "/home/k")).is_ok());
    }

    #[test]
    fn a_link_or_dot_dot_to_home_or_into_the_worktree_and_a_world_writable_entry_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let home = real.join("home/k");
        let tree = real.join("tree");
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        std::fs::create_dir_all(tree.join("bin")).unwrap();
        std::os::unix::fs::symlink(&home, real.join("link-to-home")).unwrap();
        std::os::unix::fs::symlink(tree.join("bin"), real.join("link-to-tree-bin")).unwrap();
        let leak =
            |s: &std::path::Path| Box::leak(s.display().to_string().into_boxed_str()) as &str;
        let ok_path = "/usr/bin";
        // The worktree given through a link to HOME, or with `..` into it.
        for worktree in [real.join("link-to-home"), real.join("tree/../home/k")] {
            let e = check_parent(
                &plan(Some(leak(&worktree)), &[".gemini"]),
                &parent(ok_path, leak(&home)),
            )
            .unwrap_err();
            assert!(
                matches!(e, ExecError::WorktreeHoldsHome { .. }),
                "{worktree:?}: {e:?}"
            );
        }
        // A PATH entry that is a link into the worktree.
        let p = plan(Some(leak(&tree)), &[]);
        let path = format!("{}:/usr/bin", real.join("link-to-tree-bin").display());
        match check_parent(&p, &parent(leak(std::path::Path::new(&path)), "/home/k")) {
            Err(ExecError::UnsafePath { problem, .. }) => {
                assert_eq!(problem, "is inside the worktree");
            }
            other => panic!("{other:?}"),
        }
        // A world-writable PATH entry (`/tmp`), and one that is not.
        let open = real.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(
            &open,
            <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o777),
        )
        .unwrap();
        let path = format!("/usr/bin:{}", open.display());
        match check_parent(&p, &parent(leak(std::path::Path::new(&path)), "/home/k")) {
            Err(ExecError::UnsafePath { entry, problem }) => {
                assert_eq!(entry, open.display().to_string());
                assert!(
                    problem.starts_with("is writable by every user"),
                    "{problem}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(check_parent(&p, &parent("/usr/bin:/bin", "/home/k")).is_ok());
    }

    #[test]
    fn a_worktree_that_is_or_holds_home_is_refused_when_the_plan_removes_paths_there() {
        let ok = parent("/usr/bin", "/home/k");
        assert!(check_parent(&plan(Some("/home/k/worktrees/r1"), &[".codex"]), &ok).is_ok());
        // (`/` holds every PATH entry too: refused for that first.)
        assert!(check_parent(&plan(Some("/"), &[".codex"]), &ok).is_err());
        for worktree in ["/home/k", "/home"] {
            let e = check_parent(&plan(Some(worktree), &[".codex"]), &ok).unwrap_err();
            assert!(
                matches!(e, ExecError::WorktreeHoldsHome { .. }),
                "{worktree}: {e:?}"
            );
            assert!(e.to_string().contains("the daemon's HOME"), "{e}");
        }
        // Nothing to remove: nothing to delete.
        assert!(check_parent(&plan(Some("/home/k"), &[]), &ok).is_ok());
    }
}
