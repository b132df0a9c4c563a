//! A reviewer's tasks for a daemon that is not root (the red team of stop 53): `launch
//! --plan` run as `nobody` (uid 65534, `setpriv`) starts a stand-in reviewer whose command
//! starts threads (tasks, as processes are) until the kernel refuses one or it holds
//! `MAX_TASKS` and 16 more. Without a bound it ran up to the user's `RLIMIT_NPROC` (96,368
//! here, `threads-max` / 2): a fork bomb there leaves the daemon, and every process of its
//! user, unable to fork while it lives. The child sets `RLIMIT_NPROC` to
//! [`launch::MAX_TASKS`] in the reviewer's user namespace, where the kernel counts the
//! reviewer's tasks only. Needs root to become `nobody`; without it the test says so and
//! returns. (A root daemon's reviewer is not bounded: the kernel applies no `RLIMIT_NPROC`
//! to root.)

use crate::common;

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::carry::terminal_plan;
use common::stand_in::sh_script;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{EnvVar, Sandbox};
use kcap_mcp_registry::launch;

const NOBODY: u32 = 65534;

/// The reviewer's command: threads (64 KiB stacks, each waiting) until one is refused or
/// `sys.argv[1]` run; prints `tasks <n>`.
const THREADS: &str = r#"
import sys, threading
threading.stack_size(65536)
done = threading.Event()
n = 0
try:
    while n < int(sys.argv[1]):
        threading.Thread(target=done.wait, daemon=True).start()
        n += 1
except RuntimeError:
    pass
print("tasks", n, flush=True)
done.set()
"#;

/// A directory under the system's temp dir that every user may enter, removed on drop.
struct OpenDir(PathBuf);

impl Drop for OpenDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The tasks the reviewer's command ran, launched as `nobody` with `--sandbox sandbox`.
fn tasks_as_nobody(root: &Path, sandbox: &str) -> u64 {
    let at = |p: &str| root.join(p);
    let launch_dir = at(&format!("launches/{sandbox}"));
    let tree = at("tree").display().to_string();
    let mut plan = terminal_plan(Client::Codex, &launch_dir);
    plan.cwd = Some(tree.clone());
    plan.env.push(EnvVar::new("PATH", "/usr/bin:/bin"));
    plan.sandbox = Sandbox::new(&launch_dir.display().to_string(), Some(&tree));
    let plan_file = at(&format!("plan-{sandbox}.json"));
    std::fs::write(&plan_file, plan.to_json()).unwrap();
    let mut cmd = Command::new("/usr/bin/setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(at("bin/kcap-mcp-registry"))
        .args(["launch", "--timeout", "60", "--sandbox", sandbox, "--plan"])
        .arg(&plan_file)
        .arg("--client-bin")
        .arg(at("bin/reviewer"))
        .env("HOME", root)
        .current_dir(root);
    let out = common::peers::run(cmd, "launch as nobody");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", out.stderr);
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("output tasks "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no count: {stdout}\n{}", out.stderr))
}

#[test]
fn a_reviewer_of_a_daemon_that_is_not_root_runs_at_most_max_tasks() {
    if !rustix::process::geteuid().is_root() || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("ignored: becoming uid {NOBODY} needs root and /usr/bin/setpriv");
        return;
    }
    let root = OpenDir(std::env::temp_dir().join(format!("kcap-tasks-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&root.0);
    let at = |p: &str| root.0.join(p);
    for dir in ["", "tree", "bin", "launches"] {
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(at(dir))
            .unwrap();
    }
    std::os::unix::fs::chown(at("launches"), Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::write(at("tree/threads.py"), THREADS).unwrap();
    let cap = launch::MAX_TASKS + 16;
    sh_script(
        &at("bin"),
        "reviewer",
        &format!(
            "exec /usr/bin/python3 {} {cap}",
            at("tree/threads.py").display()
        ),
    );
    // The CLI, where `nobody` can run it (the build's directory may be closed to it).
    let copied = Command::new("cp")
        .arg(env!("CARGO_BIN_EXE_kcap-mcp-registry"))
        .arg(at("bin/kcap-mcp-registry"))
        .status()
        .unwrap();
    assert!(copied.success());
    if launch::sandbox::missing().is_some() {
        eprintln!("ignored: this kernel lacks the sandbox");
        return;
    }
    assert_eq!(tasks_as_nobody(&root.0, "off"), cap, "sandbox off");
    let confined = tasks_as_nobody(&root.0, "best-effort");
    assert!(
        confined < launch::MAX_TASKS,
        "the reviewer ran {confined} tasks, over {}",
        launch::MAX_TASKS
    );
}
