//! Issue 31's attacks from a command the real client runs as a tool, shared by every
//! client's test (`tests/clients/sandbox_clients.rs`, `sandbox_tools_*.rs`): a [`Scene`] (a
//! daemon HOME with a key, another reviewer's launch directory, the worktree, and a process
//! outside the reviewer holding a key in its environment, whose resource limits a command
//! also tries to set: red team of stop 53), the shell command a stand-in
//! model asks the client's shell tool to run ([`Scene::command`], one `name=yes|no` line per
//! attempt), the client's plan offline ([`offline_plan`]) and its run until the stand-in
//! gets the tool's output ([`until_tool_output`]), the answers read back from it
//! ([`answers`]) and the judgment ([`assert_confined`]): every attack denied in the sandbox
//! and done without it, the reviewer's own work done in both.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Child;

/// What a command the model asks for tries.
pub const ATTACKS: &[&str] = &[
    "daemon_home",
    "other_launch_dir",
    "other_environ",
    "signal_outside",
    "limit_outside",
    "write_outside",
    "write_worktree",
    "shared_tmp",
];

/// What the reviewer's own work needs: its HOME (in the launch directory), the worktree,
/// a system program.
pub const WORK: &[&str] = &["own_home", "read_worktree", "system_program"];

/// The attacked world of one run; dropping it ends the outside process and removes what the
/// attacks planted in `/tmp`.
pub struct Scene {
    root: PathBuf,
    _tmp: tempfile::TempDir,
    other: Child,
}

impl Scene {
    /// A fresh scene in a new temporary directory.
    pub fn new() -> Scene {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        for dir in ["daemon-home", "other-launch", "wt"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(
            root.join("daemon-home/.env"),
            "ANTHROPIC_API_KEY=daemon-secret\n",
        )
        .unwrap();
        std::fs::write(root.join("other-launch/.credentials.json"), "other-secret").unwrap();
        std::fs::write(root.join("wt/README.md"), "the change under review\n").unwrap();
        let other = std::process::Command::new("/bin/sleep")
            .arg("120")
            .env_clear()
            .env("ANTHROPIC_API_KEY", "concurrent-reviewer-key")
            .spawn()
            .unwrap();
        Scene {
            root,
            _tmp: tmp,
            other,
        }
    }

    /// The reviewer's worktree (holds `README.md`).
    pub fn worktree(&self) -> PathBuf {
        self.root.join("wt")
    }

    /// A launch directory for the reviewer (not created).
    pub fn launch_dir(&self) -> PathBuf {
        self.root.join("launch")
    }

    /// The scene's root, for a test's own files beside the attacked ones.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The `sh` command that tries every [`ATTACKS`] and [`WORK`] item and prints
    /// `name=yes` or `name=no` for each. (`/bin/grep -a`: a plain `grep` in Claude Code
    /// 2.1.197's `Bash` tool found nothing in an environ file that `/bin/grep -a` reads, its
    /// NUL-separated entries read as binary.) Qwen Code 0.24.4's `run_shell_command` output
    /// repeats the command (`Command: …`), so the command never holds an item's answer
    /// line itself: it prints `$n=yes`.
    pub fn command(&self) -> String {
        let at = |p: &str| self.root.join(p).display().to_string();
        let pid = self.other.id();
        format!(
            "p() {{ n=$1; shift; if \"$@\" >/dev/null 2>&1; then echo \"$n=yes\"; else echo \"$n=no\"; fi; }}; \
             p daemon_home cat {home}/.env; \
             p other_launch_dir cat {other}/.credentials.json; \
             p other_environ /bin/grep -a -q concurrent-reviewer-key /proc/{pid}/environ; \
             p signal_outside kill -0 {pid}; \
             p limit_outside prlimit --pid {pid} --core=0:0; \
             p write_outside sh -c 'echo x > {root}/planted'; \
             p write_worktree sh -c 'echo x > {wt}/planted'; \
             p shared_tmp sh -c 'echo x > /tmp/kcap-tool-planted-{pid}'; \
             p own_home sh -c 'echo x > \"$HOME/note\" && cat \"$HOME/note\"'; \
             p read_worktree cat {wt}/README.md; \
             p system_program /usr/bin/python3 -c 'print(1)'",
            home = at("daemon-home"),
            other = at("other-launch"),
            root = self.root.display(),
            wt = at("wt"),
        )
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = self.other.kill();
        let _ = self.other.wait();
        let _ = std::fs::remove_file(format!("/tmp/kcap-tool-planted-{}", self.other.id()));
    }
}

/// Each item's answer in the tool's `output`: `name → yes`, for the items that printed
/// exactly one of `name=yes`, `name=no`.
pub fn answers(output: &str) -> BTreeMap<String, bool> {
    ATTACKS
        .iter()
        .chain(WORK)
        .filter_map(|name| {
            let yes = output.contains(&format!("{name}=yes"));
            let no = output.contains(&format!("{name}=no"));
            (yes != no).then(|| ((*name).to_owned(), yes))
        })
        .collect()
}

/// In the sandbox (`confined`) every attack was denied; without it (`open`) every attack
/// succeeded (the test bites); the reviewer's own work was done in both. `who` names the run.
pub fn assert_confined(
    who: &str,
    confined: &BTreeMap<String, bool>,
    open: &BTreeMap<String, bool>,
) {
    for attack in ATTACKS {
        assert_eq!(
            confined.get(*attack),
            Some(&false),
            "{who} {attack}: {confined:?}"
        );
        assert_eq!(
            open.get(*attack),
            Some(&true),
            "{who} {attack} without the sandbox: {open:?}"
        );
    }
    for work in WORK {
        assert_eq!(
            confined.get(*work),
            Some(&true),
            "{who} {work}: {confined:?}"
        );
        assert_eq!(open.get(*work), Some(&true), "{who} {work}: {open:?}");
    }
}

/// `client`'s reviewer plan for `ctx` (`Client::plan`, lenient policy), offline: a dead
/// proxy (`127.0.0.1:9`) for anything but the loopback interface, where the stand-in model
/// API (and OpenCode's own server) listen.
#[cfg(feature = "launch")]
pub fn offline_plan(
    client: kcap_mcp_registry::clients::Client,
    ctx: &kcap_mcp_registry::LaunchContext,
) -> kcap_mcp_registry::clients::plan::LaunchPlan {
    use kcap_mcp_registry::clients::plan::EnvVar;
    let inputs =
        kcap_mcp_registry::clients::dispatch::PlanInputs::new(kcap_mcp_registry::Policy::Lenient);
    let mut plan = client
        .plan(ctx, &inputs)
        .unwrap_or_else(|e| panic!("{client}: {e}"))
        .plan;
    plan.env.extend([
        EnvVar::new("HTTP_PROXY", "http://127.0.0.1:9"),
        EnvVar::new("HTTPS_PROXY", "http://127.0.0.1:9"),
        EnvVar::new("NO_PROXY", "127.0.0.1,localhost"),
    ]);
    plan
}

/// The daemon's environment a reviewer's launch inherits from: its `PATH` only.
pub fn daemon_env(name: &str) -> Option<std::ffi::OsString> {
    (name == "PATH").then(super::peers::inherited_path)
}

/// What the model asks the reviewer in every client's run (the ACP prompt; a terminal
/// client's `LaunchContext::prompt`).
pub const PROMPT: &str = "Run the probe.";

/// Drives a started `reviewer` until a request to the stand-in `api` carries the tool's
/// output (`output` finds it in a request's JSON body), then stops the reviewer and returns
/// that output. An ACP reviewer is sent [`PROMPT`] first; its permission requests are refused
/// by the executor. Panics, naming `who` and showing the requests, the events and the
/// client's standard error (an ACP client's) or terminal output, when the client exits,
/// asks a permission, or ends its turn without the output (after one more look: the last
/// request may still be on its way), or when `deadline` passes.
#[cfg(feature = "launch")]
pub fn until_tool_output(
    reviewer: kcap_mcp_registry::launch::Reviewer,
    api: &super::model_api::ModelApi,
    output: fn(&serde_json::Value) -> Option<String>,
    deadline: std::time::Instant,
    who: &str,
) -> String {
    use kcap_mcp_registry::launch::{AcpEvent, Reviewer, TerminalEvent};
    use std::time::{Duration, Instant};
    let started = Instant::now();
    let mut reviewer = reviewer;
    if let Reviewer::Acp(session) = &mut reviewer {
        session
            .prompt(PROMPT)
            .unwrap_or_else(|e| panic!("{who}: session/prompt: {e}"));
    }
    // What the client did meanwhile: its events, or its terminal's bytes.
    let mut events = Vec::new();
    let mut terminal = Vec::new();
    let mut turn_ended = None;
    let result = loop {
        let requests = api.requests();
        if let Some(done) = requests.iter().find_map(|r| output(&r.json()?)) {
            break done;
        }
        let (step, seen) = match &mut reviewer {
            Reviewer::Acp(session) => {
                let step = session.next_event(Duration::from_millis(200));
                (step.map(|e| e.map(Step::Acp)), session.stderr_tail())
            }
            Reviewer::Terminal(session) => {
                let step = session.next_event(Duration::from_millis(200));
                let seen = String::from_utf8_lossy(&terminal).into_owned();
                (step.map(|e| e.map(Step::Terminal)), seen)
            }
        };
        let paths: Vec<String> = requests
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert!(
            Instant::now() < deadline && turn_ended.is_none(),
            "{who}: no request carried the tool's output (turn ended: {turn_ended:?}); \
             requests: {paths:?}; events: {events:?}; stderr or terminal:\n{seen}"
        );
        match step {
            Ok(Some(Step::Acp(AcpEvent::Exited(status))))
            | Ok(Some(Step::Terminal(TerminalEvent::Exited(status)))) => {
                panic!("{who} exited: {status:?}:\n{seen}")
            }
            Ok(Some(Step::Acp(AcpEvent::PermissionDenied { tool_call }))) => {
                panic!("{who} asked to run a tool: {tool_call}")
            }
            Ok(Some(Step::Acp(AcpEvent::PromptDone { stop_reason, .. }))) => {
                std::thread::sleep(Duration::from_millis(500));
                turn_ended = Some(stop_reason);
            }
            Ok(Some(Step::Terminal(TerminalEvent::Output(bytes)))) => terminal.extend(bytes),
            Ok(Some(Step::Acp(event))) => events.push(event),
            Ok(_) => {}
            Err(e) => panic!(
                "{who}: {}\n{seen}",
                kcap_mcp_registry::text::error_chain(&e)
            ),
        }
    };
    reviewer
        .stop()
        .unwrap_or_else(|e| panic!("{who}: stop: {e}"));
    eprintln!(
        "{who}: the tool's output after {:.1} s:\n{result}",
        started.elapsed().as_secs_f64()
    );
    result
}

/// One event of either kind of reviewer.
#[cfg(feature = "launch")]
enum Step {
    Acp(kcap_mcp_registry::launch::AcpEvent),
    Terminal(kcap_mcp_registry::launch::TerminalEvent),
}
