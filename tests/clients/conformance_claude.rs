//! The Claude Code settings that veto an inline `--strict-mcp-config` server (issue 17),
//! replayed on the real clients: Claude Code 2.1.197 (`KCAP_CLAUDE_BIN`) and 2.1.332
//! (`KCAP_CLAUDE_NEXT_BIN`; `bash scripts/install-peers.sh` installs both).
//!
//! Each case writes a setting where the reviewer's Claude Code reads it, then shows both
//! halves: what the preflight says (`claude::preflight::claude_preflight`: the vetoes, each
//! naming its setting; one of the result channel is the one a launch cannot run without),
//! and what the real client does with the plan's argv (`Client::plan`, as `render claude`
//! prints it, without `--setting-sources=`: see [`argv`]), the plan's `--mcp-config` file
//! written into its launch directory: it starts exactly
//! the injected servers the preflight did not flag, each with exactly its env. The oracle
//! (`tests/claude_oracle`) gives a prompt, points the API at a dead local port, records what
//! starts, and kills the client's process group once the recorders settle.
//!
//! Every run: root-safe (`IS_SANDBOX=1`), stdin `/dev/null`, a throwaway `HOME`, worktree
//! and recorder dir, `ANTHROPIC_API_KEY=dummy`, `ANTHROPIC_BASE_URL=http://127.0.0.1:9`, a
//! cleared environment otherwise, and a bounded run. A missing binary marks the test ignored,
//! with the reason, or fails it under `KCAP_REQUIRE_PEERS=1`. Managed settings live in `/etc/claude-code`
//! (no variable moves it), so those cases run the client in a private mount namespace
//! (`unshare -m`) with an overlay on `/etc`: the machine's `/etc` is never written.

use crate::claude_oracle;
use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::etc::Etc;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::claude::preflight::{ClaudeConfigSources, claude_preflight};
use kcap_mcp_registry::clients::veto::VetoKind;

use kcap_mcp_registry::{LaunchContext, Policy, RESULT_CHANNEL_ID};
use tempfile::TempDir;

/// The argv of Claude Code's lenient plan for `ctx` (the public call), its files written
/// into its launch directory `launch_dir` (the `--mcp-config` file the argv names).
///
/// Without `--setting-sources=`, and run with the test's `HOME` rather than the plan's: the
/// preflight models a Claude Code that reads the user's, the project's and the local
/// settings (a launch outside the per-launch root), so these cases replay that launch. The
/// rooted plan's `--setting-sources=` and per-launch `CLAUDE_CONFIG_DIR` make every
/// non-managed row moot (`tests/clients/isolation_claude.rs`).
fn argv(ctx: &LaunchContext, launch_dir: &Path) -> Vec<String> {
    let ctx = LaunchContext {
        launch_dir: Some(launch_dir.to_str().unwrap().into()),
        ..ctx.clone()
    };
    let plan = common::plan::lenient(Client::Claude, &ctx);
    common::plan::write_files(&plan);
    let mut argv = plan.argv;
    let at = argv.iter().position(|a| a == "--setting-sources=").unwrap();
    argv.remove(at);
    argv
}

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        project_disabled_mcp_servers_vetoes_the_result_channel,
        the_project_key_is_the_main_checkout_of_a_linked_worktree_reached_through_a_symlink,
        the_reviewed_repository_can_deny_a_server_by_name_in_its_project_settings,
        denied_by_command_line_in_user_and_local_settings,
        an_allowlist_in_user_settings_admits_only_its_servers,
        claude_config_dir_moves_the_global_config_and_user_settings,
        managed_settings_and_managed_mcp_json,
    ]
}

const URL: &str = "http://127.0.0.1:5100";
const AGENT: &str = "agent-17";

/// The Claude Code binaries to run, each with its variable. A missing one (not set, and not
/// required by `KCAP_REQUIRE_PEERS=1`) marks the test as skipped, so the harness reports it as
/// ignored with the reason even when it ran the other version.
fn binaries() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for var in ["KCAP_CLAUDE_BIN", "KCAP_CLAUDE_NEXT_BIN"] {
        match common::peers::peer_in(var, |name| std::env::var_os(name)) {
            Ok(Some(path)) => found.push(path),
            Ok(None) => {}
            Err(reason) => missing.push(reason),
        }
    }
    if !missing.is_empty() {
        common::peers::skip(missing.join("; "));
    }
    found
}

/// `cmd` run in a private mount namespace where `/etc/claude-code` holds a copy of `managed`
/// (an overlay on `/etc` with `<dir>/u` as its upper layer).
fn overlay_etc(dir: &Path, managed: &Path, cmd: Command) -> Command {
    std::fs::create_dir_all(dir.join("u/claude-code")).unwrap();
    if managed.is_dir() {
        for entry in walk(managed) {
            let to = dir
                .join("u/claude-code")
                .join(entry.strip_prefix(managed).unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&entry, &to).unwrap();
        }
    }
    common::etc::command(Etc::Writable(dir), &cmd)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// One reviewer launch's world: `HOME`, worktree, managed dir and recorder.
struct World {
    bin: PathBuf,
    version: String,
    root: TempDir,
    /// Extra environment for Claude Code (e.g. `CLAUDE_CONFIG_DIR`).
    env: Vec<(String, PathBuf)>,
    /// The directory the reviewer runs in (defaults to `<root>/wt`).
    cwd: PathBuf,
    /// Run in a private mount namespace with `<root>/managed` as `/etc/claude-code`.
    managed: bool,
}

impl World {
    fn new(bin: &Path) -> World {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().canonicalize().unwrap();
        for d in ["home", "wt", "records", "bin"] {
            std::fs::create_dir(real.join(d)).unwrap();
        }
        let w = World {
            bin: bin.to_path_buf(),
            version: claude_oracle::version(bin),
            cwd: real.join("wt"),
            root,
            env: Vec::new(),
            managed: false,
        };
        w.write("home/.claude.json", r#"{"hasCompletedOnboarding":true}"#);
        // The recorder: NUL-separated argv, `env -0`, then a done mark; exits at once.
        let mut body = b"#!/bin/sh\nd='".to_vec();
        body.extend(w.path("records").as_os_str().as_bytes());
        body.extend_from_slice(
            b"'\n: > \"$d/$$.start\"\nprintf '%s\\0' \"$0\" \"$@\" > \"$d/$$.argv\"\n\
              env -0 > \"$d/$$.env\"\n: > \"$d/$$.done\"\nexit 0\n",
        );
        let kcap = w.kcap();
        common::stand_in::write_executable(&kcap, body);
        w
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().canonicalize().unwrap().join(rel)
    }

    fn kcap(&self) -> PathBuf {
        self.path("bin/kcap")
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `~/.claude.json` with `projects[<key>] = entry`.
    fn project_entry(&self, key: &str, entry: &str) -> PathBuf {
        let key = serde_json::to_string(key).unwrap();
        self.write(
            "home/.claude.json",
            &format!(r#"{{"hasCompletedOnboarding":true,"projects":{{{key}:{entry}}}}}"#),
        )
    }

    fn ctx(&self, allowlist: &[&str]) -> LaunchContext {
        LaunchContext {
            server_url: Some(URL.into()),
            kcap_bin: Some(self.kcap().to_str().unwrap().into()),
            agent_id: AGENT.into(),
            mcp_allowlist: Some(allowlist.iter().map(|a| Some(a.to_string())).collect()),
            ..LaunchContext::default()
        }
    }

    /// What the preflight reads for this world.
    fn sources(&self) -> ClaudeConfigSources {
        let config_dir = self
            .env
            .iter()
            .find(|(k, _)| k == "CLAUDE_CONFIG_DIR")
            .map(|(_, v)| v.clone());
        ClaudeConfigSources {
            home: Some(self.path("home")),
            config_dir,
            managed_dir: self.path("managed"),
            worktree: self.cwd.clone(),
            ..ClaudeConfigSources::default()
        }
    }

    /// Claude Code's own environment (everything else is cleared).
    fn parent_env(&self) -> Vec<(String, std::ffi::OsString)> {
        let mut env: Vec<(String, std::ffi::OsString)> = vec![
            (
                "PATH".into(),
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            ),
            ("HOME".into(), self.path("home").into()),
            ("IS_SANDBOX".into(), "1".into()),
            ("ANTHROPIC_API_KEY".into(), "dummy".into()),
            ("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9".into()),
            ("HTTPS_PROXY".into(), "http://127.0.0.1:9".into()),
            ("HTTP_PROXY".into(), "http://127.0.0.1:9".into()),
            ("DISABLE_AUTOUPDATER".into(), "1".into()),
        ];
        env.extend(self.env.iter().map(|(k, v)| (k.clone(), v.into())));
        env
    }

    /// Runs the real client with `args` in the worktree and returns, per distinct server
    /// started, its argv after `$0` and its whole environment.
    fn started(&self, args: &[String]) -> BTreeMap<Vec<String>, BTreeMap<String, String>> {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args).args(["--", claude_oracle::PROMPT]);
        let mut cmd = if self.managed {
            overlay_etc(&self.path("overlay"), &self.path("managed"), cmd)
        } else {
            cmd
        };
        cmd.env_clear()
            .envs(self.parent_env())
            .current_dir(&self.cwd);
        let records = self.path("records");
        claude_oracle::run_until_recorded(cmd, &records, &self.path("claude.log"));
        let mut started: BTreeMap<Vec<String>, BTreeMap<String, String>> = BTreeMap::new();
        let pids: BTreeSet<String> = std::fs::read_dir(&records)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".done").map(str::to_string)
            })
            .collect();
        for pid in pids {
            let read = |ext: &str| std::fs::read(records.join(format!("{pid}.{ext}"))).unwrap();
            let argv: Vec<String> = String::from_utf8(read("argv"))
                .unwrap()
                .trim_end_matches('\0')
                .split('\0')
                .skip(1)
                .map(str::to_string)
                .collect();
            let env: BTreeMap<String, String> = String::from_utf8(read("env"))
                .unwrap()
                .split('\0')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.to_string())
                })
                .collect();
            // 2.1.328 starts a server twice: both starts must be the same.
            if let Some(earlier) = started.get(&argv) {
                assert_eq!(earlier, &env, "two starts of {argv:?} differ");
            }
            started.insert(argv, env);
        }
        for entry in std::fs::read_dir(&records).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        started
    }

    /// Runs the unchecked argv for `allowlist` and asserts that exactly `expected` (server
    /// ids) start, each with exactly its env: its own `KCAP_*` values, and otherwise only
    /// Claude Code's environment, the variables it adds, and `PWD`.
    fn assert_starts(&self, allowlist: &[&str], expected: &[&str]) {
        let args = argv(&self.ctx(allowlist), &self.path("launch"));
        let started = self.started(&args);
        let want: BTreeSet<Vec<String>> = expected
            .iter()
            .map(|id| {
                let sub = id.strip_prefix("kcap-").unwrap();
                vec!["mcp".to_string(), sub.to_string()]
            })
            .collect();
        assert_eq!(
            started.keys().cloned().collect::<BTreeSet<_>>(),
            want,
            "Claude Code {} started other servers than expected",
            self.version
        );
        for (argv, env) in &started {
            let ours: Vec<(&str, &str)> = if argv[1] == "flow-result" {
                vec![("KCAP_FLOW_AGENT_ID", AGENT), ("KCAP_URL", URL)]
            } else {
                vec![("KCAP_URL", URL)]
            };
            let kcap: Vec<(&str, &str)> = env
                .iter()
                .filter(|(k, _)| k.starts_with("KCAP_"))
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            assert_eq!(kcap, ours, "{argv:?} on {}", self.version);
            let names: BTreeSet<String> = self
                .parent_env()
                .into_iter()
                .map(|(k, _)| k)
                .chain(
                    claude_oracle::added_env(&self.version, true)
                        .into_iter()
                        .map(str::to_string),
                )
                .chain(["PWD".to_string()])
                .chain(ours.iter().map(|(k, _)| k.to_string()))
                .collect();
            assert_eq!(
                env.keys().cloned().collect::<BTreeSet<_>>(),
                names,
                "{argv:?} on {}",
                self.version
            );
        }
    }

    /// The preflight's vetoes for `allowlist` (resolved under the lenient policy), as
    /// (server, file, JSON path, kind), and whether one is of the result channel (the
    /// reviewer could never report: no launch runs without it).
    fn preflight(
        &self,
        allowlist: &[&str],
    ) -> (bool, Vec<(&'static str, PathBuf, String, VetoKind)>) {
        let ctx = self.ctx(allowlist);
        let resolution = ctx.resolve(Policy::Lenient).unwrap();
        let vetoes = claude_preflight(&ctx, &resolution, &self.sources())
            .unwrap_or_else(|e| panic!("preflight: {e}"));
        let result_channel = vetoes.iter().any(|v| v.server == RESULT_CHANNEL_ID);
        let vetoes = vetoes
            .into_iter()
            .map(|v| (v.server, v.file, v.json_path, v.kind))
            .collect();
        (result_channel, vetoes)
    }
}

// ------------------------------------------------------------------------------------------
// The cases
// ------------------------------------------------------------------------------------------

fn project_disabled_mcp_servers_vetoes_the_result_channel() {
    for bin in binaries() {
        let w = World::new(&bin);
        let wt = w.cwd.to_str().unwrap().to_string();
        // The issue's reproduction.
        let file = w.project_entry(
            &wt,
            r#"{"hasTrustDialogAccepted":true,"disabledMcpServers":["kcap-flow-result"]}"#,
        );
        assert_eq!(
            w.preflight(&["kcap-review"]),
            (
                true,
                vec![(
                    "kcap-flow-result",
                    file,
                    format!("projects[{wt:?}].disabledMcpServers[0]"),
                    VetoKind::Disabled
                )]
            )
        );
        w.assert_starts(&["kcap-review"], &["kcap-review"]);
    }
}

fn the_project_key_is_the_main_checkout_of_a_linked_worktree_reached_through_a_symlink() {
    for bin in binaries() {
        let mut w = World::new(&bin);
        let main = w.path("repo");
        std::fs::create_dir(&main).unwrap();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(&main)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q", "."]);
        git(&["commit", "-q", "--allow-empty", "-m", "x"]);
        let linked = w.path("linked");
        git(&["worktree", "add", "-q", linked.to_str().unwrap()]);
        let link = w.path("link");
        std::os::unix::fs::symlink(&linked, &link).unwrap();
        w.cwd = link.clone();

        // Control: entries under the linked worktree's own path, the symlink, a trailing
        // slash, a name in another case, the top-level list and the `.mcp.json` switches veto
        // nothing, on either side.
        let entry = r#"{"disabledMcpServers":["kcap-flow-result","kcap-review"]}"#;
        let key = |p: &Path| serde_json::to_string(p.to_str().unwrap()).unwrap();
        w.write(
            "home/.claude.json",
            &format!(
                r#"{{"hasCompletedOnboarding":true,"disabledMcpServers":["kcap-flow-result"],
                "projects":{{{}:{entry},{}:{entry},{}:{entry},
                {}:{{"disabledMcpServers":["KCAP-FLOW-RESULT","Kcap-Review"],
                     "disabledMcpjsonServers":["kcap-flow-result"],"enabledMcpjsonServers":[]}}}}}}"#,
                key(&linked),
                key(&link),
                serde_json::to_string(&format!("{}/", main.display())).unwrap(),
                key(&main),
            ),
        );
        assert_eq!(w.preflight(&["kcap-review"]), (false, vec![]));
        w.assert_starts(&["kcap-review"], &["kcap-flow-result", "kcap-review"]);

        // The main checkout's entry applies: an allowlisted server vetoed is a warning.
        let file = w.project_entry(
            main.to_str().unwrap(),
            r#"{"disabledMcpServers":["kcap-review"]}"#,
        );
        assert_eq!(
            w.preflight(&["kcap-review"]),
            (
                false,
                vec![(
                    "kcap-review",
                    file,
                    format!(
                        "projects[{:?}].disabledMcpServers[0]",
                        main.to_str().unwrap()
                    ),
                    VetoKind::Disabled
                )]
            )
        );
        w.assert_starts(&["kcap-review"], &["kcap-flow-result"]);
    }
}

fn the_reviewed_repository_can_deny_a_server_by_name_in_its_project_settings() {
    for bin in binaries() {
        let w = World::new(&bin);
        let file = w.write(
            "wt/.claude/settings.json",
            r#"{"deniedMcpServers":[{"serverName":"kcap-flow-result"}]}"#,
        );
        assert_eq!(
            w.preflight(&["kcap-review", "kcap-sessions"]),
            (
                true,
                vec![(
                    "kcap-flow-result",
                    file,
                    "deniedMcpServers[0].serverName".into(),
                    VetoKind::DeniedByName
                )]
            )
        );
        w.assert_starts(
            &["kcap-review", "kcap-sessions"],
            &["kcap-review", "kcap-sessions"],
        );
    }
}

fn denied_by_command_line_in_user_and_local_settings() {
    for bin in binaries() {
        let w = World::new(&bin);
        let kcap = w.kcap();
        let user = w.write(
            "home/.claude/settings.json",
            &format!(
                r#"{{"deniedMcpServers":[{{"serverCommand":[{:?},"mcp","review"]}}]}}"#,
                kcap.to_str().unwrap()
            ),
        );
        let local = w.write(
            "wt/.claude/settings.local.json",
            r#"{"deniedMcpServers":[{"serverName":"kcap-sessions"}]}"#,
        );
        assert_eq!(
            w.preflight(&["kcap-review", "kcap-sessions"]),
            (
                false,
                vec![
                    (
                        "kcap-review",
                        user,
                        "deniedMcpServers[0].serverCommand".into(),
                        VetoKind::DeniedByCommand
                    ),
                    (
                        "kcap-sessions",
                        local,
                        "deniedMcpServers[0].serverName".into(),
                        VetoKind::DeniedByName
                    ),
                ]
            )
        );
        w.assert_starts(&["kcap-review", "kcap-sessions"], &["kcap-flow-result"]);
    }
}

fn an_allowlist_in_user_settings_admits_only_its_servers() {
    for bin in binaries() {
        let w = World::new(&bin);
        let file = w.write(
            "home/.claude/settings.json",
            r#"{"allowedMcpServers":[{"serverName":"kcap-flow-result"},{"serverName":"kcap-sessions"}]}"#,
        );
        assert_eq!(
            w.preflight(&["kcap-review", "kcap-sessions"]),
            (
                false,
                vec![(
                    "kcap-review",
                    file,
                    "allowedMcpServers".into(),
                    VetoKind::NotAllowed
                )]
            )
        );
        w.assert_starts(
            &["kcap-review", "kcap-sessions"],
            &["kcap-flow-result", "kcap-sessions"],
        );
    }
}

fn claude_config_dir_moves_the_global_config_and_user_settings() {
    for bin in binaries() {
        let mut w = World::new(&bin);
        let cfg = w.path("cfg");
        w.env.push(("CLAUDE_CONFIG_DIR".into(), cfg.clone()));
        let wt = w.cwd.to_str().unwrap().to_string();
        // `$HOME/.claude.json` no longer counts; `$CLAUDE_CONFIG_DIR/.claude.json` does.
        w.project_entry(&wt, r#"{"disabledMcpServers":["kcap-flow-result"]}"#);
        let key = serde_json::to_string(&wt).unwrap();
        let global = w.write(
            "cfg/.claude.json",
            &format!(
                r#"{{"hasCompletedOnboarding":true,"projects":{{{key}:{{"disabledMcpServers":["kcap-review"]}}}}}}"#
            ),
        );
        let settings = w.write(
            "cfg/settings.json",
            r#"{"deniedMcpServers":[{"serverName":"kcap-sessions"}]}"#,
        );
        assert_eq!(
            w.preflight(&["kcap-review", "kcap-sessions"]),
            (
                false,
                vec![
                    (
                        "kcap-review",
                        global,
                        format!("projects[{wt:?}].disabledMcpServers[0]"),
                        VetoKind::Disabled
                    ),
                    (
                        "kcap-sessions",
                        settings,
                        "deniedMcpServers[0].serverName".into(),
                        VetoKind::DeniedByName
                    ),
                ]
            )
        );
        w.assert_starts(&["kcap-review", "kcap-sessions"], &["kcap-flow-result"]);
    }
}

fn managed_settings_and_managed_mcp_json() {
    if !common::etc::can_overlay() {
        return;
    }
    for bin in binaries() {
        // managed-settings.json denies by name; a drop-in allowlist with
        // allowManagedMcpServersOnly overrides the user's wider one.
        let mut w = World::new(&bin);
        w.managed = true;
        w.write(
            "home/.claude/settings.json",
            r#"{"allowedMcpServers":[{"serverName":"kcap-flow-result"},{"serverName":"kcap-review"},{"serverName":"kcap-sessions"}]}"#,
        );
        let denied = w.write(
            "managed/managed-settings.json",
            r#"{"deniedMcpServers":[{"serverName":"kcap-review"}]}"#,
        );
        let only = w.write(
            "managed/managed-settings.d/10-kcap.json",
            r#"{"allowManagedMcpServersOnly":true,"allowedMcpServers":[{"serverName":"kcap-flow-result"},{"serverName":"kcap-review"}]}"#,
        );
        assert_eq!(
            w.preflight(&["kcap-review", "kcap-sessions"]),
            (
                false,
                vec![
                    (
                        "kcap-review",
                        denied,
                        "deniedMcpServers[0].serverName".into(),
                        VetoKind::DeniedByName
                    ),
                    (
                        "kcap-sessions",
                        only,
                        "allowedMcpServers".into(),
                        VetoKind::NotAllowed
                    ),
                ]
            )
        );
        w.assert_starts(&["kcap-review", "kcap-sessions"], &["kcap-flow-result"]);

        // managed-mcp.json takes exclusive control: no inline server starts.
        let mut w = World::new(&bin);
        w.managed = true;
        let file = w.write(
            "managed/managed-mcp.json",
            r#"{"mcpServers":{"corp":{"command":"/bin/true","args":[]}}}"#,
        );
        assert_eq!(
            w.preflight(&["kcap-review"]),
            (
                true,
                vec![
                    (
                        "kcap-flow-result",
                        file.clone(),
                        String::new(),
                        VetoKind::ManagedMcp
                    ),
                    ("kcap-review", file, String::new(), VetoKind::ManagedMcp),
                ]
            )
        );
        w.assert_starts(&["kcap-review"], &[]);
    }
}
