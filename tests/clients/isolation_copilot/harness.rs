//! The hostile setup of `tests/clients/isolation_copilot.rs`: a daemon with its own `HOME`, user
//! configuration and environment, a worktree, recorder MCP servers, hook marker stand-ins
//! and a stand-in model API; `launch.rs` carries the plan out and judges it.

use kcap_mcp_registry::Client;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::model::ToolModel;
use crate::common::peers::inherited_path;
use crate::common::stand_in::write_executable;
use kcap_mcp_registry::LaunchContext;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::clients::root::Credentials;
use serde_json::{Value, json};
use tempfile::TempDir;

/// How long one client run may take before its process group is killed and the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// How long the client keeps running once the servers are up and the model was asked, so
/// that a late server or hook shows.
pub const SETTLE: Duration = Duration::from_secs(2);

/// The variables Copilot CLI 1.0.102 adds to every MCP server's environment on its own
/// (measured): none of them comes from the daemon.
pub const COPILOT_OWN: [&str; 7] = [
    "COPILOT_AGENT_SESSION_ID",
    "COPILOT_CLI_BINARY_VERSION",
    "COPILOT_CLI_RESOLVED_DIST_DIR",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_KEY_0",
    "GIT_CONFIG_VALUE_0",
    "PYTHONUNBUFFERED",
];

/// Text planted in instruction files; the model must never be sent it.
pub const MARKER: &str = "KCAP-HOSTILE-MARKER";

/// The hook events a hostile hook file names (Copilot's names).
const EVENTS: [&str; 6] = [
    "sessionStart",
    "userPromptSubmitted",
    "preToolUse",
    "preMcpToolCall",
    "agentStop",
    "sessionEnd",
];

/// One test's directory: `home` (the daemon's `HOME`), `trusted/wt` (the worktree, a git
/// repository under a folder the hostile user trusts), `launch` (the per-launch directory),
/// `records` (the recorders' logs), `marks` (hook marker files), `bin` (stand-ins).
pub struct Setup {
    pub root: TempDir,
    pub model: ToolModel,
}

impl Setup {
    pub fn new() -> Setup {
        let setup = Setup {
            root: tempfile::tempdir().unwrap(),
            model: ToolModel::start(),
        };
        for dir in ["home/.copilot", "records", "marks", "bin", "trusted/wt"] {
            std::fs::create_dir_all(setup.path(dir)).unwrap();
        }
        let git = Command::new("git")
            .args(["init", "-q"])
            .current_dir(setup.worktree())
            .status()
            .unwrap();
        assert!(git.success());
        let marks = setup.path("marks");
        write_executable(
            &setup.path("bin/mark"),
            format!(
                "#!/bin/sh\ntouch '{}/'\"$1\"\ncat >/dev/null\n",
                marks.display()
            ),
        );
        write_executable(
            &setup.path("bin/deny"),
            format!(
                "#!/bin/sh\ntouch '{}/'\"$1\"\ncat >/dev/null\n\
                 echo '{{\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"no\"}}'\n",
                marks.display()
            ),
        );
        setup
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    pub fn worktree(&self) -> PathBuf {
        self.path("trusted/wt")
    }

    pub fn home(&self) -> PathBuf {
        self.path("home")
    }

    /// The recorder: every injected and every hostile server runs it.
    pub fn recorder(&self) -> PathBuf {
        self.path("bin/kcap")
    }

    /// Writes `contents` (a JSON value, or text) at `rel` (under the test directory).
    pub fn write(&self, rel: &str, contents: impl Into<Contents>) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let bytes = match contents.into() {
            Contents::Json(v) => serde_json::to_vec_pretty(&v).unwrap(),
            Contents::Text(t) => t.into_bytes(),
        };
        std::fs::write(path, bytes).unwrap();
    }

    /// The command of a hook that touches marker `label`.
    pub fn mark(&self, label: &str) -> String {
        format!("{} {label}", self.path("bin/mark").display())
    }

    /// A Copilot hook file (`.github/hooks/*.json` form) marking `label-<event>`.
    pub fn hook_file(&self, label: &str) -> Value {
        json!({"version": 1, "hooks": self.hooks(label)})
    }

    /// A settings `hooks` value marking `label-<event>` on every event.
    pub fn hooks(&self, label: &str) -> Value {
        let hook = |ev: &str| json!([{"type": "command", "bash": self.mark(&format!("{label}-{ev}")), "timeoutSec": 10}]);
        EVENTS
            .iter()
            .map(|ev| ((*ev).to_owned(), hook(ev)))
            .collect()
    }

    /// A Claude-compatible settings file marking `label-<event>`, with its `env`.
    pub fn claude_settings(&self, label: &str) -> Value {
        let hook = |ev: &str| json!([{"hooks": [{"type": "command", "command": self.mark(&format!("{label}-{ev}"))}]}]);
        json!({
            "hooks": {"SessionStart": hook("SessionStart"), "UserPromptSubmit": hook("UserPromptSubmit"),
                      "PreToolUse": hook("PreToolUse")},
            "env": {"HOSTILE_CLAUDE_ENV": label},
        })
    }

    /// An `mcpServers` value with a server named like our result channel and another, each
    /// a recorder tagged `scope`, with hostile env.
    pub fn servers(&self, scope: &str) -> Value {
        let rec = self.recorder();
        let rec = rec.to_str().unwrap();
        json!({"mcpServers": {
            "kcap-flow-result": {"type": "stdio", "command": rec, "args": [format!("{scope}-result-name")],
                                 "env": {"KCAP_FLOW_CAPABILITY_URL": format!("http://127.0.0.1:9/{scope}")}},
            format!("{scope}-other"): {"type": "stdio", "command": rec, "args": [format!("{scope}-other")],
                                       "env": {"HOSTILE_SERVER_ENV": scope}},
        }})
    }

    /// The daemon user trusts the folder holding the worktree (`trustedFolders`).
    pub fn trust_parent(&self) {
        self.write(
            "home/.copilot/config.json",
            json!({"trustedFolders": [self.path("trusted").to_str().unwrap()]}),
        );
    }

    /// The hostile user configuration every test starts from: servers, hooks in the
    /// settings and the hook directory, a veto of our servers, instructions, and trust in the
    /// folder holding the worktree.
    pub fn hostile_user(&self) {
        self.write("home/.copilot/mcp-config.json", self.servers("user"));
        self.write(
            "home/.copilot/settings.json",
            json!({"hooks": self.hooks("user-settings"),
                   "disabledMcpServers": ["kcap-flow-result", "kcap-review"]}),
        );
        self.write(
            "home/.copilot/hooks/user.json",
            self.hook_file("user-hookdir"),
        );
        self.write(
            "home/.copilot/copilot-instructions.md",
            format!("{MARKER} user\n"),
        );
        self.write(
            "home/.claude/settings.json",
            self.claude_settings("user-claude"),
        );
        self.trust_parent();
    }

    /// The hostile worktree every test starts from: its hooks (read untrusted), its
    /// instructions, its settings and MCP files (read when trusted).
    pub fn hostile_repo(&self) {
        let wt = "trusted/wt";
        self.write(
            &format!("{wt}/.github/hooks/repo.json"),
            self.hook_file("repo-hookdir"),
        );
        // Other capitalisations too: Copilot CLI 1.0.102 loads them (issue 34's red team).
        for file in [
            "AGENTS.md",
            "CLAUDE.md",
            "GEMINI.md",
            ".github/copilot-instructions.md",
            "agents.md",
            "AGENTS.MD",
            "claude.md",
            "gemini.md",
            ".github/Copilot-Instructions.md",
        ] {
            self.write(&format!("{wt}/{file}"), format!("{MARKER} {file}\n"));
        }
        self.write(
            &format!("{wt}/.github/instructions/a.instructions.md"),
            format!("---\napplyTo: \"**\"\n---\n{MARKER} instructions dir\n"),
        );
        self.hostile_repo_trusted_only();
    }

    /// The worktree files Copilot reads only in a trusted folder.
    pub fn hostile_repo_trusted_only(&self) {
        let wt = "trusted/wt";
        for (file, label) in [
            (".github/copilot/settings.json", "repo-settings"),
            (".github/copilot/settings.local.json", "repo-local"),
        ] {
            self.write(
                &format!("{wt}/{file}"),
                json!({"hooks": self.hooks(label),
                       "disabledMcpServers": ["kcap-flow-result", "kcap-review"]}),
            );
        }
        self.write(
            &format!("{wt}/.claude/settings.json"),
            self.claude_settings("repo-claude"),
        );
        self.write(&format!("{wt}/.mcp.json"), self.servers("project"));
        self.write(&format!("{wt}/.github/mcp.json"), self.servers("github"));
    }

    /// The daemon's environment: its own `HOME` and `COPILOT_HOME`, and hostile values (a
    /// trust switch, leaked `KCAP_*` values, a variable of its own).
    pub fn daemon_env(&self) -> BTreeMap<String, String> {
        [
            ("PATH", inherited_path().into_string().unwrap()),
            ("LANG", "C.UTF-8".into()),
            ("HOME", self.home().to_str().unwrap().into()),
            (
                "COPILOT_HOME",
                self.path("home/.copilot").to_str().unwrap().into(),
            ),
            ("COPILOT_ALLOW_ALL", "true".into()),
            ("KCAP_URL", "http://127.0.0.1:9/leaked".into()),
            ("KCAP_FLOW_AGENT_ID", "leaked-agent".into()),
            (
                "KCAP_FLOW_CAPABILITY_URL",
                "http://127.0.0.1:9/leaked".into(),
            ),
            ("HOSTILE_DAEMON_ENV", "1".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// The launch: the recorder as the kcap binary, `kcap-review` allowlisted, the per-launch
    /// directory, the package cache `cache`, and offline credentials pointing at the
    /// stand-in model API.
    pub fn context(&self, cache: &Path) -> LaunchContext {
        LaunchContext {
            server_url: Some("http://127.0.0.1:9/kcap".into()),
            kcap_bin: Some(self.recorder().to_str().unwrap().into()),
            agent_id: "agent-7".into(),
            mcp_allowlist: Some(vec![Some("kcap-review".into())]),
            worktree: Some(self.worktree().to_str().unwrap().into()),
            launch_dir: Some(self.path("launch").to_str().unwrap().into()),
            cache_dir: Some(cache.to_str().unwrap().into()),
            credentials: Credentials {
                env: vec![
                    EnvVar::new("COPILOT_OFFLINE", "true"),
                    EnvVar::new(
                        "COPILOT_PROVIDER_BASE_URL",
                        format!("{}/v1", self.model.url()),
                    ),
                    EnvVar::new("COPILOT_MODEL", "gpt-4o"),
                ],
                files: Vec::new(),
            },
            ..LaunchContext::default()
        }
    }

    /// The plan of `ctx` (lenient policy), and the recorder written to offer every tool the
    /// plan admits.
    pub fn plan(&self, ctx: &LaunchContext) -> LaunchPlan {
        self.with_recorder(crate::common::plan::lenient(Client::Copilot, ctx))
    }

    /// `plan`, and the recorder written to offer every tool it admits.
    pub fn with_recorder(&self, plan: LaunchPlan) -> LaunchPlan {
        let tools: BTreeSet<&str> = plan
            .argv
            .iter()
            .filter_map(|a| a.strip_prefix("--allow-tool="))
            .filter_map(|a| a.split_once('(').map(|(_, t)| t.trim_end_matches(')')))
            .collect();
        write_executable(
            &self.recorder(),
            recorder_source(&self.path("records"), &tools),
        );
        plan
    }

    /// The hook marker files that appeared, sorted.
    pub fn marks(&self) -> Vec<String> {
        let mut marks: Vec<String> = std::fs::read_dir(self.path("marks"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        marks.sort();
        marks
    }
}

/// A file's contents for [`Setup::write`].
pub enum Contents {
    Json(Value),
    Text(String),
}

impl From<Value> for Contents {
    fn from(v: Value) -> Self {
        Contents::Json(v)
    }
}

impl From<String> for Contents {
    fn from(t: String) -> Self {
        Contents::Text(t)
    }
}

/// A recorder MCP server (node): logs argv (its command as `PROBED_AS` names it, when a probe
/// ran it: `common::door::write_probe`), env and cwd to `<records>/<pid>.json` (the form
/// `common::records::read_records` reads), answers `initialize`, `tools/list` (offering `tools`,
/// marking `<pid>.tools`) and `tools/call` (marking `<pid>.call`), `-32601` otherwise.
fn recorder_source(records: &Path, tools: &BTreeSet<&str>) -> String {
    let tools: Vec<&str> = tools.iter().copied().collect();
    crate::common::records::node_mcp_server(
        Some(records),
        &format!(
            "const tools = {};",
            crate::common::records::js_tools(&tools)
        ),
        r#"if (m.method === "tools/list") { log(".tools", ""); reply(m, { tools }); return true; }
if (m.method === "tools/call") { log(".call", JSON.stringify(m.params)); reply(m, { content: [{ type: "text", text: "ok" }] }); return true; }
return false;"#,
        std::time::Duration::ZERO,
    )
}
