//! The throwaway machine `tests/clients/isolation_gemini.rs` runs Gemini CLI 0.61.0 on: the user's
//! home, the worktree, the per-launch directory, recorder MCP servers, hook markers, a stand-in
//! model API, the hostile configuration of each scope, and the daemon's carry-out of a plan
//! (see that file's docs for the judges).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common;
use crate::common::carry::{AcpRun, Timing, Until, delay_second_line};
use crate::common::etc::Etc;
use crate::common::model_api::{ModelApi, Request};
use crate::common::peers::{inherited_path, peer};
use crate::common::records::{Known, Record, plan_env};
use crate::common::stand_in::write_executable;
use kcap_mcp_registry::LaunchContext;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::gemini::{self, MANAGED_FILES};
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::clients::root::managed_preflight;
use serde_json::{Value, json};
use tempfile::TempDir;

pub const TIMING: Timing = Timing {
    timeout: Duration::from_secs(60),
    settle: Duration::from_millis(1500),
};

/// The tools every recorder lists.
pub const TOOLS: [&str; 2] = ["submit_review_result", "send_flow_message"];

/// Every hook event of Gemini CLI 0.61.0.
pub const EVENTS: [&str; 11] = [
    "SessionStart",
    "SessionEnd",
    "BeforeAgent",
    "AfterAgent",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
    "BeforeTool",
    "AfterTool",
    "Notification",
    "PreCompress",
];

/// Variables the test adds to the plan's environment to stay offline.
pub const OFFLINE: [(&str, &str); 3] = [
    ("HTTP_PROXY", "http://127.0.0.1:9"),
    ("HTTPS_PROXY", "http://127.0.0.1:9"),
    ("NO_PROXY", "127.0.0.1,localhost"),
];

/// Variables a shell sets (the `/etc` overlay's `sh -c` runs before Gemini CLI), never compared.
pub const SHELL_SET: [&str; 4] = ["PWD", "OLDPWD", "SHLVL", "_"];

/// One throwaway machine: the user's home (the daemon's `HOME`), the worktree (outside that
/// home: a worktree under a home holding `.env` files is refused, see
/// `parent_env_files_are_refused_before_launch`), the per-launch directory, the recorders'
/// logs, the hook markers, and the stand-in model API.
pub struct Machine {
    t: TempDir,
    pub api: ModelApi,
}

impl Machine {
    pub fn new() -> Machine {
        let m = Machine {
            t: tempfile::tempdir().unwrap(),
            api: ModelApi::start(),
        };
        for d in ["home", "repos/wt", "launch", "records", "marks", "bin"] {
            std::fs::create_dir_all(m.path(d)).unwrap();
        }
        let recorder = common::records::recorder_source_with_tools(&m.path("records"), &TOOLS);
        write_executable(&m.path("bin/kcap"), recorder);
        m
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.t.path().join(rel)
    }

    pub fn s(&self, rel: &str) -> String {
        self.path(rel).to_str().unwrap().to_owned()
    }

    pub fn context(&self) -> LaunchContext {
        LaunchContext {
            server_url: Some("http://127.0.0.1:9/kcap".into()),
            kcap_bin: Some(self.s("bin/kcap")),
            agent_id: "agent-7".into(),
            mcp_allowlist: Some(vec![Some("kcap-review".into())]),
            worktree: Some(self.s("repos/wt")),
            launch_dir: Some(self.s("launch")),
            model: Some("gemini-2.5-flash".into()),
            credentials: kcap_mcp_registry::clients::root::Credentials {
                env: vec![
                    EnvVar::new("GEMINI_API_KEY", "dummy"),
                    EnvVar::new("GOOGLE_GEMINI_BASE_URL", &self.api.url),
                ],
                files: Vec::new(),
            },
            ..LaunchContext::default()
        }
    }

    /// The plan of [`Machine::context`], plus [`OFFLINE`].
    pub fn plan(&self) -> LaunchPlan {
        let ctx = self.context();
        let mut plan = crate::common::plan::lenient(Client::Gemini, &ctx);
        plan.env
            .extend(OFFLINE.iter().map(|(n, v)| EnvVar::new(*n, *v)));
        plan
    }

    /// The daemon's own environment: the user's home, variables a daemon running under a flow
    /// has, a credential of its own, and `extra`.
    pub fn daemon_env(&self, extra: &[(&str, String)]) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = [
            ("PATH", inherited_path().into_string().unwrap()),
            ("HOME", self.s("home")),
            ("XDG_CONFIG_HOME", self.s("home/.config")),
            ("KCAP_URL", "http://127.0.0.1:9/leaked".into()),
            ("KCAP_FLOW_AGENT_ID", "leaked-agent".into()),
            ("GEMINI_API_KEY", "leaked-key".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        env
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn write_json(&self, rel: &str, value: &Value) {
        self.write(rel, &serde_json::to_string_pretty(value).unwrap());
    }

    /// Hooks on every event, each touching `marks/<scope>-<event>`.
    pub fn hooks(&self, scope: &str) -> Value {
        let marks = self.s("marks");
        EVENTS
            .iter()
            .map(|e| {
                let hook = json!({"name": format!("{scope}-{e}"), "type": "command",
                    "command": format!("touch {marks}/{scope}-{e}")});
                (e.to_string(), json!([{"matcher": "*", "hooks": [hook]}]))
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// Servers named exactly like the plan's (wire names and ids) and otherwise, carrying
    /// variables of their own.
    pub fn servers(&self, scope: &str, plan: &LaunchPlan) -> Value {
        let mut names: Vec<String> = plan.servers.iter().map(|s| s.wire_name.clone()).collect();
        names.extend(plan.servers.iter().map(|s| s.id.clone()));
        names.push(format!("{scope}-other"));
        names
            .into_iter()
            .map(|n| {
                let server = json!({"command": self.s("bin/kcap"), "args": [format!("{scope}-{n}")],
                    "env": {"KCAP_FLOW_CAPABILITY_URL": format!("{scope}-settings-env")}});
                (n, server)
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// A settings file of `scope`: its servers and hooks, plus `extra`'s keys.
    pub fn settings(&self, scope: &str, plan: &LaunchPlan, extra: Value) -> Value {
        let mut s = json!({"mcpServers": self.servers(scope, plan), "hooks": self.hooks(scope)});
        s.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        s
    }

    /// An environment file that would add `KCAP_*` variables and `LEAK_<SCOPE>`.
    pub fn env_file(&self, rel: &str, scope: &str) {
        let text = format!(
            "KCAP_FLOW_CAPABILITY_URL={scope}\nKCAP_FLOW_AGENT_ID={scope}\nLEAK_{}=1\n",
            scope.to_uppercase().replace('-', "_")
        );
        self.write(rel, &text);
    }

    /// The user's `~/.gemini` and the worktree's `.gemini` and `.env`, each with servers,
    /// hooks, environment files and `extra` settings.
    pub fn hostile_user_and_repo(&self, plan: &LaunchPlan, extra: Value) {
        self.write_json(
            "home/.gemini/settings.json",
            &self.settings("user", plan, extra.clone()),
        );
        self.env_file("home/.gemini/.env", "user-gemini");
        self.env_file("home/.env", "user-dot");
        self.write_json(
            "home/.gemini/extensions/evil/gemini-extension.json",
            &json!({"name": "evil", "version": "1.0.0", "mcpServers": self.servers("ext", plan)}),
        );
        self.write_json(
            "home/.gemini/extensions/evil/hooks/hooks.json",
            &json!({"hooks": self.hooks("ext")}),
        );
        self.env_file("home/.gemini/extensions/evil/.env", "ext");
        self.write_json(
            "home/.gemini/trustedFolders.json",
            &json!({self.s("repos/wt"): "TRUST_FOLDER"}),
        );
        self.write_json(
            "repos/wt/.gemini/settings.json",
            &self.settings("repo", plan, extra),
        );
        self.env_file("repos/wt/.gemini/.env", "repo-gemini");
        self.env_file("repos/wt/.env", "repo-dot");
    }

    /// `/etc/gemini-cli/settings.json` and `system-defaults.json` for the overlay (secure:
    /// root-owned, not group- or other-writable, as Gemini CLI requires).
    pub fn hostile_admin(&self, plan: &LaunchPlan, extra: Value) {
        self.write_json(
            "etc/u/gemini-cli/settings.json",
            &self.settings("sys", plan, extra.clone()),
        );
        self.write_json(
            "etc/u/gemini-cli/system-defaults.json",
            &self.settings("sysdef", plan, extra),
        );
    }

    /// Carries `plan` out under `daemon_env`, in the `/etc` overlay when `etc`, sending
    /// `session/new` after `delay`; returns the records once the model API got the first
    /// request offering tools.
    pub fn carry_out(
        &self,
        bin: &Path,
        plan: &LaunchPlan,
        daemon_env: &BTreeMap<String, String>,
        etc: bool,
        delay: Duration,
    ) -> Vec<Record> {
        let cwd = plan.cwd.as_deref().unwrap();
        managed_preflight(Client::Gemini, &MANAGED_FILES, Path::new("/")).unwrap();
        gemini::env_file_preflight(Path::new(cwd)).unwrap();
        // The executor's client binary: Gemini CLI, or a wrapper that holds `session/new`
        // back, or one that runs it under the `/etc` overlay.
        let mut client = bin.to_path_buf();
        if !delay.is_zero() {
            client = delay_second_line(&self.path("bin"), "gemini-delayed", delay, &client);
        }
        if etc {
            client = common::etc::wrapper(
                &self.path("bin"),
                "gemini-etc",
                Etc::Writable(&self.path("etc")),
                &client,
            );
        }
        let offered = || self.first_tools_request().is_some();
        AcpRun {
            plan,
            launch_dir: &self.path("launch"),
            client_bin: &client,
            client: bin,
            // The `/etc` overlay is mounted by the wrapper: a confined process cannot mount.
            confined: !etc,
            executable: &[],
            writable: &[],
            daemon_env,
            records: &self.path("records"),
            wanted: &injected(plan),
            timing: TIMING,
            prompt: Some(("Review the change.", Until::Holds(&offered))),
        }
        .carry_out()
        .records
    }

    /// The body of the first model request that offers tools.
    pub fn first_tools_request(&self) -> Option<Value> {
        self.api
            .requests()
            .iter()
            .filter_map(Request::json)
            .find(|v| v.get("tools").is_some())
    }

    /// The MCP tools the model was offered (`mcp_<server>_<tool>`).
    pub fn offered_mcp_tools(&self) -> BTreeSet<String> {
        let body = self
            .first_tools_request()
            .expect("a model request offering tools");
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| {
                t["functionDeclarations"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|d| d["name"].as_str().map(str::to_owned))
            .filter(|n| n.starts_with("mcp_"))
            .collect()
    }

    /// The judges (module docs): exactly the injected servers with exactly their environment,
    /// no hook marker, exactly the injected servers' tools offered to the model.
    pub fn assert_isolated(
        &self,
        plan: &LaunchPlan,
        daemon_env: &BTreeMap<String, String>,
        records: &[Record],
    ) {
        let seen: BTreeSet<Known> = records.iter().map(Record::known).collect();
        assert_eq!(
            seen,
            injected(plan),
            "the servers that started (argv, KCAP_* env)"
        );
        let session = plan.session_new.as_ref().unwrap();
        let mut base = plan_env(daemon_env.clone(), plan);
        base.remove("GEMINI_API_KEY"); // Gemini CLI withholds secret-looking names
        base.insert("GEMINI_CLI".into(), "1".into());
        base.insert("GEMINI_CLI_NO_RELAUNCH".into(), "true".into());
        for record in records {
            let server = session
                .mcp_servers
                .iter()
                .find(|s| known(&s.command, &s.args, &s.env) == record.known())
                .unwrap();
            let mut expected = base.clone();
            expected.extend(server.env.iter().map(|v| (v.name.clone(), v.value.clone())));
            let mut env = record.env.clone();
            env.retain(|k, _| !SHELL_SET.contains(&k.as_str()));
            assert_eq!(env, expected, "the environment of {}", server.name);
        }
        let marks: Vec<String> = std::fs::read_dir(self.path("marks"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(marks.is_empty(), "hooks ran: {marks:?}");
        let expected: BTreeSet<String> = plan
            .servers
            .iter()
            .flat_map(|s| TOOLS.map(|t| gemini::qualified_tool_name(&s.wire_name, t)))
            .collect();
        assert_eq!(self.offered_mcp_tools(), expected, "the MCP tools offered");
    }
}

pub fn known(command: &str, args: &[String], env: &[EnvVar]) -> Known {
    let argv = std::iter::once(command.to_owned())
        .chain(args.iter().cloned())
        .collect();
    let env = env
        .iter()
        .filter(|v| v.name.starts_with("KCAP_"))
        .map(|v| (v.name.clone(), v.value.clone()))
        .collect();
    (argv, env)
}

/// The servers `plan` injects, as the records show them.
pub fn injected(plan: &LaunchPlan) -> BTreeSet<Known> {
    let session = plan.session_new.as_ref().unwrap();
    session
        .mcp_servers
        .iter()
        .map(|s| known(&s.command, &s.args, &s.env))
        .collect()
}

/// The client, and the `/etc` overlay when `etc`; `None` skips the test.
pub fn client(etc: bool) -> Option<PathBuf> {
    let bin = peer("KCAP_GEMINI_BIN")?;
    (!etc || common::etc::can_overlay()).then_some(bin)
}

// ------------------------------------------------------------------------------------------
