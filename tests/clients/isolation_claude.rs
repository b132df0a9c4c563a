//! Issue 22 on Claude Code 2.1.197 (`KCAP_CLAUDE_BIN`) and 2.1.332 (`KCAP_CLAUDE_NEXT_BIN`):
//! one test per class, each carrying out the rooted plan (`Client::plan`) through the
//! library's executor, as a daemon does (`launch::launch_with_parent_env`: `dirs` and
//! `files` written, the interactive client in a pseudo-terminal, in `cwd`, with exactly the
//! plan's `env` plus the daemon's values of `env_inherit`; a reviewer that sits at a dialog
//! fails the test naming it) in a hostile world: a daemon environment with its own `HOME`
//! and `CLAUDE_CONFIG_DIR` (settings with `env`, hooks, an `apiKeyHelper`, deny/ask rules,
//! `deniedMcpServers`; a `.claude.json` with servers and a `disabledMcpServers` veto), knobs
//! (`MCP_TIMEOUT=1`, `CLAUDE_CODE_SAFE_MODE=1`) and `KCAP_*` values; a worktree whose
//! `.claude/settings*.json` and `.mcp.json` do the same (kept: the plan's `worktree_remove`
//! is emptied, so the argv and the root alone must keep them out); and, for class 5,
//! `/etc/claude-code` in a private mount namespace (overlay on `/etc`, entered by a wrapper
//! given as the client binary; the machine's `/etc` is never written). Judged on the real
//! client: the recorder MCP servers (exactly ours, exactly their `KCAP_*` values, no foreign
//! variable), the hook marker files (none), and the tools the stand-in model API
//! (`tests/common/model_api.rs`, 400 to every request) was offered. A run ends once the
//! reviewer sent the turn that offers tools and no server started for a while. Offline: the
//! API is on 127.0.0.1 and the harness adds only a dead proxy. Evidence for today's plan:
//! `docs/isolation/claude.md`.
use crate::claude_oracle;
use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::etc::Etc;
use common::model_api::ModelApi;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::clients::root::{CredentialFile, Credentials, managed_preflight};
use kcap_mcp_registry::launch::{self, Options, Reviewer, TerminalEvent};
use kcap_mcp_registry::{LaunchContext, Policy, RenderError};
use serde_json::json;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        class1_settings_env_reaches_no_server,
        class2_no_hook_or_helper_command_runs,
        class3_permission_rules_hide_no_tool_of_ours,
        class4_startup_knobs_drop_no_server,
        class5_administrator_files_are_refused_before_launch,
        class6_configuration_added_after_the_render_does_not_reach,
        class7_a_gateway_credential_fetches_no_remote_settings,
        class8_client_variables_of_the_daemon_do_not_reach,
        class9_a_trusted_parent_folder_brings_nothing_in,
        class10_behind_the_door_the_key_stays_outside_and_only_the_door_is_reached,
    ]
}

const URL: &str = "http://127.0.0.1:5100";
const AGENT: &str = "agent-22";
const RESULT_TOOL: &str = "mcp__kcap-flow-result__submit_review_result";
/// The tools our recorders list, as the model is offered them.
const OUR_TOOLS: [&str; 3] = [
    RESULT_TOOL,
    "mcp__kcap-flow-result__send_flow_message",
    "mcp__kcap-review__get_pr_summary",
];
/// The longest one launch may take to settle; past it the run is judged as it is.
const RUN_BOUND: Duration = Duration::from_secs(60);

/// Variables the harness adds to the plan's environment: the offline guard only.
const HARNESS_ENV: [(&str, &str); 3] = [
    ("HTTPS_PROXY", "http://127.0.0.1:9"),
    ("HTTP_PROXY", "http://127.0.0.1:9"),
    ("NO_PROXY", "127.0.0.1"),
];

/// Both Claude Code binaries; none marks the test skipped (fails under `KCAP_REQUIRE_PEERS=1`).
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

/// One launch's world: the daemon's hostile home and environment, the worktree, the
/// per-launch directory, the recorder, the hook marker directory and the stand-in API.
struct World {
    bin: PathBuf,
    version: String,
    dir: tempfile::TempDir,
    api: ModelApi,
    /// Files for `/etc/claude-code` (relative paths); run in an overlay when not empty.
    managed: Vec<(String, String)>,
}

impl World {
    fn new(bin: &Path) -> World {
        let w = World {
            bin: bin.to_path_buf(),
            version: claude_oracle::version(bin),
            dir: tempfile::tempdir().unwrap(),
            api: ModelApi::start(),
            managed: Vec::new(),
        };
        for d in [
            "daemon-home",
            "parent/wt",
            "launch",
            "records",
            "hooks",
            "bin",
        ] {
            std::fs::create_dir_all(w.path(d)).unwrap();
        }
        common::stand_in::write_executable(
            &w.path("bin/kcap"),
            claude_oracle::mcp_recorder(&w.path("records")),
        );
        w
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().canonicalize().unwrap().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// Settings that would reach the reviewer from `source`: env (our own variable among
    /// them, and a startup knob), hooks and a helper command that touch marker files, and
    /// rules that hide or gate our result tool.
    fn hostile_settings(&self, source: &str) -> String {
        let hook = |event: &str| {
            json!([{"hooks": [{"type": "command", "command":
                format!("touch {}/{source}-{event}", self.path("hooks").display())}]}])
        };
        json!({
            "env": {
                "KCAP_FLOW_CAPABILITY_URL": format!("http://evil/{source}"),
                format!("HOSTILE_{}", source.to_uppercase()): "1",
                "MCP_TIMEOUT": "1",
            },
            "hooks": {"SessionStart": hook("SessionStart"), "UserPromptSubmit": hook("UserPromptSubmit")},
            "apiKeyHelper": format!("touch {}/{source}-apiKeyHelper; echo key", self.path("hooks").display()),
            "permissions": {"deny": [RESULT_TOOL], "ask": ["mcp__kcap-flow-result"]},
            "deniedMcpServers": [{"serverName": "kcap-review"}],
        })
        .to_string()
    }

    /// The daemon's user configuration (its `HOME` and its `CLAUDE_CONFIG_DIR`) and the
    /// reviewed worktree's, all hostile.
    fn hostile_user_and_repository(&self) {
        let wt = self.path("parent/wt");
        let other = self.path("bin/kcap");
        let global = json!({
            "hasCompletedOnboarding": true,
            "mcpServers": {"user-srv": {"command": other, "args": ["mcp", "user-srv"]}},
            "projects": {wt.to_str().unwrap(): {"hasTrustDialogAccepted": true,
                "disabledMcpServers": ["kcap-flow-result"],
                "mcpServers": {"local-srv": {"command": other, "args": ["mcp", "local-srv"]}}}},
        })
        .to_string();
        let mcp_json =
            json!({"mcpServers": {"proj-srv": {"command": other, "args": ["mcp", "proj-srv"]}}});
        let (u, p, l) = (
            self.hostile_settings("user"),
            self.hostile_settings("project"),
            self.hostile_settings("local"),
        );
        for (rel, text) in [
            ("daemon-home/.claude/settings.json", u.clone()),
            ("daemon-config/settings.json", u),
            ("daemon-home/.claude/.claude.json", global.clone()),
            ("daemon-config/.claude.json", global.clone()),
            ("daemon-home/.claude.json", global),
            ("parent/wt/.claude/settings.json", p),
            ("parent/wt/.claude/settings.local.json", l),
            ("parent/wt/.mcp.json", mcp_json.to_string()),
        ] {
            self.write(rel, &text);
        }
    }

    /// The daemon's environment: hostile client variables next to what a daemon has.
    fn daemon_env(&self) -> BTreeMap<String, String> {
        let path = common::peers::inherited_path().into_string().unwrap();
        [
            ("PATH", path),
            ("LANG", "C.UTF-8".into()),
            ("HOME", self.s("daemon-home")),
            ("CLAUDE_CONFIG_DIR", self.s("daemon-config")),
            ("ANTHROPIC_CONFIG_DIR", self.s("daemon-config")),
            ("XDG_CONFIG_HOME", self.s("daemon-home/.config")),
            ("MCP_TIMEOUT", "1".into()),
            ("CLAUDE_CODE_SAFE_MODE", "1".into()),
            ("KCAP_FLOW_CAPABILITY_URL", "http://evil/daemon".into()),
            ("KCAP_FLOW_AGENT_ID", "daemon-agent".into()),
        ]
        .map(|(k, v)| (k.to_owned(), v))
        .into()
    }

    fn s(&self, rel: &str) -> String {
        self.path(rel).to_str().unwrap().to_owned()
    }

    fn ctx(&self) -> LaunchContext {
        let var = |n: &str, v: &str| EnvVar::new(n, v);
        LaunchContext {
            server_url: Some(URL.into()),
            kcap_bin: Some(self.s("bin/kcap")),
            agent_id: AGENT.into(),
            mcp_allowlist: Some(vec![Some("kcap-review".into())]),
            prompt: Some(claude_oracle::PROMPT.into()),
            worktree: Some(self.s("parent/wt")),
            launch_dir: Some(self.s("launch")),
            credentials: Credentials {
                env: vec![
                    var("ANTHROPIC_API_KEY", "dummy"),
                    var("ANTHROPIC_BASE_URL", &self.api.url),
                    var("IS_SANDBOX", "1"),
                ],
                files: Vec::new(),
            },
            ..LaunchContext::default()
        }
    }

    fn plan(&self, ctx: &LaunchContext) -> LaunchPlan {
        crate::common::plan::lenient(Client::Claude, ctx)
    }

    /// Carries the plan out as a daemon does, through the library's executor
    /// (`launch_with_parent_env`: the plan's `dirs` and `files` written, `worktree_remove`
    /// applied, `argv` in `cwd` in a pseudo-terminal with exactly the plan's `env` plus the
    /// daemon's values of `env_inherit`), with the harness's offline guard added to the plan;
    /// in a private mount namespace when [`World::managed`] is set (the client binary is then
    /// a wrapper that enters it). Waits until no server started for a while and the turns
    /// offered every tool of [`OUR_TOOLS`] (or [`RUN_BOUND`] passed), then stops it; panics when it sits
    /// at a dialog.
    fn launch(&self, plan: &LaunchPlan) -> Observed {
        let mut plan = plan.clone();
        plan.env
            .extend(HARNESS_ENV.map(|(name, value)| EnvVar::new(name, value)));
        let bin = if self.managed.is_empty() {
            self.bin.clone()
        } else {
            self.overlay_etc()
        };
        let daemon = self.daemon_env();
        let lookup = |name: &str| daemon.get(name).map(OsString::from);
        let options = Options::default()
            .with_dialog_quiet(Duration::from_secs(5))
            .with_die_with_parent(true);
        // In the sandbox: Claude Code, the recorders, and the records and hook markers
        // writable (so that a server or hook it wrongly runs shows); not under the `/etc`
        // overlay, which the wrapper mounts (a confined process cannot mount).
        let options = if self.managed.is_empty() {
            common::carry::reach(
                options,
                &[&self.bin, &self.path("bin")],
                &[&self.path("records"), &self.path("hooks")],
            )
        } else {
            options.with_confinement(kcap_mcp_registry::launch::sandbox::Confinement::Off)
        };
        let what = format!("claude {}", self.version);
        let reviewer = launch::launch_with_parent_env(&plan, &bin, &options, &lookup)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let Reviewer::Terminal(mut session) = reviewer else {
            panic!("{what}: an ACP session; the Claude Code plan runs in a terminal")
        };
        let started = Instant::now();
        let mut output = Vec::new();
        let mut seen = (0, Instant::now());
        loop {
            match session.next_event(Duration::from_millis(100)) {
                Ok(Some(TerminalEvent::Output(bytes))) => output.extend_from_slice(&bytes),
                Ok(Some(TerminalEvent::Exited(_))) => break,
                Ok(_) => {}
                // Exited before its prompt was typed (a class that makes it refuse to
                // start): judged by what it did.
                Err(kcap_mcp_registry::launch::ExecError::Exited {
                    step: kcap_mcp_registry::launch::Step::TypePrompt,
                    ..
                }) => break,
                Err(e) => panic!(
                    "{what}: {e}; its screen: {}",
                    claude_oracle::screen(&output)
                ),
            }
            let n = std::fs::read_dir(self.path("records")).unwrap().count();
            if n != seen.0 {
                seen = (n, Instant::now());
            }
            let quiet = n > 0 && seen.1.elapsed() >= claude_oracle::QUIET;
            let turns = self.turns();
            // Every tool of ours offered by some turn (the plan's prompt is typed once the
            // servers listed their tools: `claude::ready`).
            let offered_all = OUR_TOOLS
                .iter()
                .all(|tool| turns.iter().any(|t| t.contains(*tool)));
            if quiet && offered_all {
                break;
            }
            if started.elapsed() >= RUN_BOUND {
                // Judged as it is: the assertions name what is missing.
                break;
            }
        }
        // Kept for the tests that read what the plan wrote (the test's directory goes).
        session.keep_launch_dir();
        session.stop().unwrap_or_else(|e| panic!("{what}: {e}"));
        self.observe(&plan, &claude_oracle::screen(&output))
    }

    /// The MCP tool names each turn the reviewer sent offered (the requests whose `tools`
    /// is not empty; 2.1.197 lists MCP tools in `tools`, 2.1.328 names them, deferred, in
    /// the system prompt).
    fn turns(&self) -> Vec<BTreeSet<String>> {
        self.api
            .requests()
            .iter()
            .filter_map(common::model_api::Request::json)
            .filter(|b| b["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .map(|b| mcp_names(&b.to_string()))
            .collect()
    }

    /// A client binary that runs [`World::bin`] in a private mount namespace whose
    /// `/etc/claude-code` holds [`World::managed`] (an overlay on `/etc`).
    fn overlay_etc(&self) -> PathBuf {
        for (rel, text) in &self.managed {
            self.write(&format!("overlay/u/claude-code/{rel}"), text);
        }
        std::fs::create_dir_all(self.path("bin")).unwrap();
        let overlay = self.path("overlay");
        common::etc::wrapper(
            &self.path("bin"),
            "claude-in-overlay",
            Etc::Writable(&overlay),
            &self.bin,
        )
    }

    fn observe(&self, plan: &LaunchPlan, stderr: &str) -> Observed {
        let mut servers = BTreeMap::new();
        for entry in std::fs::read_dir(self.path("records")).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let argv: Vec<String> = serde_json::from_value(v["argv"].clone()).unwrap();
            let env: BTreeMap<String, String> = serde_json::from_value(v["env"].clone()).unwrap();
            // 2.1.328 may start a server twice: both starts are the same.
            servers.insert(argv, env);
        }
        let hooks = std::fs::read_dir(self.path("hooks"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        // Every MCP tool a turn offered the model.
        let turns = self.turns();
        let offered = (!turns.is_empty()).then(|| turns.into_iter().flatten().collect());
        let paths = self.api.requests().into_iter().map(|r| r.path).collect();
        Observed {
            version: self.version.clone(),
            plan_env: plan.env.iter().map(|v| v.name.clone()).collect(),
            inherited: plan
                .env_inherit
                .iter()
                .filter(|n| self.daemon_env().contains_key(*n))
                .cloned()
                .collect(),
            servers,
            hooks,
            offered,
            paths,
            stderr: stderr.to_owned(),
        }
    }
}

/// Every `mcp__<server>__<tool>` name in `text`.
fn mcp_names(text: &str) -> BTreeSet<String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    text.match_indices("mcp__")
        .map(|(i, _)| text[i..].chars().take_while(|c| ok(*c)).collect())
        .collect()
}

/// What one launch did.
struct Observed {
    version: String,
    plan_env: BTreeSet<String>,
    inherited: BTreeSet<String>,
    /// Per distinct server started: its argv (after the command) and environment.
    servers: BTreeMap<Vec<String>, BTreeMap<String, String>>,
    hooks: BTreeSet<String>,
    offered: Option<BTreeSet<String>>,
    paths: Vec<String>,
    stderr: String,
}

impl Observed {
    /// Exactly our two servers, each with exactly its `KCAP_*` values and no variable but
    /// the plan's, the inherited ones, the harness's offline guard and Claude Code's own; no
    /// hook ran; our tools, the result channel's first, were offered.
    fn assert_isolated(&self) {
        let v = &self.version;
        let want: BTreeSet<Vec<String>> = [["mcp", "flow-result"], ["mcp", "review"]]
            .map(|a| a.map(String::from).to_vec())
            .into();
        assert_eq!(
            self.servers.keys().cloned().collect::<BTreeSet<_>>(),
            want,
            "{v}: servers started; stderr: {}",
            self.stderr
        );
        let allowed: BTreeSet<String> = self
            .plan_env
            .iter()
            .chain(&self.inherited)
            .cloned()
            .chain(HARNESS_ENV.map(|(n, _)| n.to_owned()))
            .chain(
                claude_oracle::added_env(v, true)
                    .into_iter()
                    .map(str::to_owned),
            )
            .collect();
        for (argv, env) in &self.servers {
            let kcap: Vec<(&str, &str)> = env
                .iter()
                .filter(|(k, _)| k.starts_with("KCAP_"))
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let ours = if argv[1] == "flow-result" {
                vec![("KCAP_FLOW_AGENT_ID", AGENT), ("KCAP_URL", URL)]
            } else {
                vec![("KCAP_URL", URL)]
            };
            assert_eq!(kcap, ours, "{v}: {argv:?}");
            let foreign: Vec<&String> = env
                .keys()
                .filter(|k| !k.starts_with("KCAP_") && !allowed.contains(*k))
                .collect();
            assert!(foreign.is_empty(), "{v}: {argv:?} got {foreign:?}");
        }
        assert!(self.hooks.is_empty(), "{v}: commands ran: {:?}", self.hooks);
        let offered = self
            .offered
            .as_ref()
            .unwrap_or_else(|| panic!("{v}: no request offered tools; requests {:?}", self.paths));
        for tool in OUR_TOOLS {
            assert!(
                offered.contains(tool),
                "{v}: {tool} not offered: {offered:?}"
            );
        }
    }
}

/// On both versions: writes the hostile world (before the render, or only after it when
/// `after`), renders with `edit` applied to the launch
/// context, carries the plan out and checks isolation. Returns each world with what it saw.
fn rooted(after: bool, edit: impl Fn(&World, &mut LaunchContext)) -> Vec<(World, Observed)> {
    let mut seen = Vec::new();
    for bin in binaries() {
        let w = World::new(&bin);
        if !after {
            w.hostile_user_and_repository();
        }
        let mut ctx = w.ctx();
        edit(&w, &mut ctx);
        let mut plan = w.plan(&ctx);
        // The worktree keeps its hostile `.claude/` and `.mcp.json` (the plan's
        // `worktree_remove` emptied): the argv and the root alone keep them out.
        plan.worktree_remove.clear();
        // Written again (or first) after the render: nothing of the user's is read at
        // render time.
        w.hostile_user_and_repository();
        let o = w.launch(&plan);
        o.assert_isolated();
        seen.push((w, o));
    }
    seen
}

fn plain(_: &World, _: &mut LaunchContext) {}

// ------------------------------------------------------------------------------------------
// The classes
// ------------------------------------------------------------------------------------------

/// Class 1. Today user, project and local settings `env` reached both servers (our
/// `KCAP_FLOW_CAPABILITY_URL` too). Rooted: not read (root `CLAUDE_CONFIG_DIR`,
/// `--setting-sources=`).
fn class1_settings_env_reaches_no_server() {
    for (_, o) in rooted(false, plain) {
        for env in o.servers.values() {
            assert!(
                !env.keys().any(|k| k.starts_with("HOSTILE_")),
                "{}: {env:?}",
                o.version
            );
            assert!(!env.contains_key("KCAP_FLOW_CAPABILITY_URL"));
        }
    }
}

/// Class 2. Today user, project and local hooks and the local `apiKeyHelper` ran (with
/// `ANTHROPIC_API_KEY` set). Rooted: no marker file appears.
fn class2_no_hook_or_helper_command_runs() {
    for (w, o) in rooted(false, plain) {
        assert!(o.hooks.is_empty());
        // The hooks were there to run: the worktree kept its settings.
        assert!(w.path("parent/wt/.claude/settings.json").exists());
    }
}

/// Class 3. Today a project's `deny` of `submit_review_result` hid it (2.1.328) and an `ask`
/// rule refused its call under `bypassPermissions`. Rooted: all our tools are offered.
fn class3_permission_rules_hide_no_tool_of_ours() {
    for (_, o) in rooted(false, plain) {
        assert!(o.offered.unwrap().contains(RESULT_TOOL));
    }
}

/// Class 4. Today daemon `MCP_TIMEOUT=1` left no MCP tool offered (2.1.197 also from a
/// project's `env`); `CLAUDE_CODE_SAFE_MODE=1` started no server. Rooted: both run.
fn class4_startup_knobs_drop_no_server() {
    for (_, o) in rooted(false, plain) {
        assert_eq!(o.servers.len(), 2);
        for env in o.servers.values() {
            assert!(!env.contains_key("MCP_TIMEOUT") && !env.contains_key("CLAUDE_CODE_SAFE_MODE"));
        }
    }
}

/// Class 5. `/etc/claude-code` reaches a rooted launch too (shown: managed `env` reaches our
/// result channel, the administrator's `CLAUDE.md` reaches the model), so each managed file
/// refuses the launch, naming file and effect.
fn class5_administrator_files_are_refused_before_launch() {
    let root = tempfile::tempdir().unwrap();
    assert_eq!(
        managed_preflight(Client::Claude, Client::Claude.managed_files(), root.path()),
        Ok(())
    );
    for rel in [
        "managed-settings.json",
        "managed-settings.d/",
        "managed-mcp.json",
        ".claude/",
        "CLAUDE.md",
    ] {
        let path = root.path().join("etc/claude-code").join(rel);
        std::fs::create_dir_all(if rel.ends_with('/') {
            &path
        } else {
            path.parent().unwrap()
        })
        .unwrap();
        let _ = std::fs::write(&path, "{}");
        let refused =
            managed_preflight(Client::Claude, Client::Claude.managed_files(), root.path());
        let Err(RenderError::Managed {
            client: Client::Claude,
            file,
            effect,
        }) = refused
        else {
            panic!("{rel}: {refused:?}");
        };
        assert_eq!(
            file,
            Path::new("/etc/claude-code").join(rel.trim_end_matches('/'))
        );
        assert!(!effect.is_empty());
        let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
    }
    // Why: the real client applies them to a rooted launch.
    if !common::etc::can_overlay() {
        return;
    }
    for bin in binaries() {
        let mut w = World::new(&bin);
        let settings = json!({"env": {"KCAP_FLOW_CAPABILITY_URL": "http://evil/managed"}});
        w.managed = vec![
            ("managed-settings.json".into(), settings.to_string()),
            ("CLAUDE.md".into(), "KCAP-ADMINISTRATOR-INSTRUCTION".into()),
        ];
        let plan = w.plan(&w.ctx());
        let o = w.launch(&plan);
        let result = &o.servers[&vec!["mcp".to_string(), "flow-result".to_string()]];
        assert_eq!(
            result.get("KCAP_FLOW_CAPABILITY_URL").map(String::as_str),
            Some("http://evil/managed"),
            "{}",
            o.version
        );
        assert!(
            w.api
                .requests()
                .iter()
                .any(|r| r.body.contains("KCAP-ADMINISTRATOR-INSTRUCTION")),
            "{}: the administrator's CLAUDE.md reached no model request",
            o.version
        );
    }
}

/// Class 6. The whole hostile world is written after the render and after `worktree_remove`:
/// nothing of it is read at launch time, so no render-time check could have missed it.
fn class6_configuration_added_after_the_render_does_not_reach() {
    for (w, o) in rooted(true, plain) {
        assert!(w.path("daemon-home/.claude.json").exists());
        assert!(!o.servers.keys().any(|a| a[1].ends_with("-srv")));
    }
}

/// The user's `.credentials.json`: a claude.ai token, and an enterprise gateway at the
/// stand-in that Claude Code trusts (`http-loopback` is the fingerprint it pins for a
/// loopback `http` URL).
fn user_credentials(w: &World) -> String {
    json!({
        "claudeAiOauth": {"accessToken": "oauth-dummy", "refreshToken": "r",
            "expiresAt": 4_102_444_800_000_u64, "scopes": ["user:inference"]},
        "enterpriseGateway": {"url": w.api.url, "jwt": "eyJhbGciOiJub25lIn0.e30.", "expiresAt": 4_102_444_800_000_u64},
        "gatewayTrust": {"127.0.0.1": "http-loopback"},
    })
    .to_string()
}

/// Class 7. A `.credentials.json` `enterpriseGateway` makes both versions fetch
/// `<gateway>/managed/settings` and apply it as policy (measured). The plan keeps only the
/// token fields: no fetch; a control launch with the whole file shows the request.
fn class7_a_gateway_credential_fetches_no_remote_settings() {
    let oauth = |w: &World, ctx: &mut LaunchContext| {
        ctx.credentials
            .env
            .retain(|v| v.name != "ANTHROPIC_API_KEY");
        ctx.credentials.files = vec![CredentialFile {
            name: ".credentials.json".into(),
            contents: user_credentials(w),
        }];
    };
    for (w, o) in rooted(false, oauth) {
        let plan_file =
            std::fs::read_to_string(w.path("launch/home/.claude/.credentials.json")).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&plan_file).unwrap(),
            json!({"claudeAiOauth": {"accessToken": "oauth-dummy", "expiresAt": 4_102_444_800_000_u64, "scopes": ["user:inference"]}})
        );
        assert!(
            !o.paths.iter().any(|p| p.contains("managed/settings")),
            "{}: {:?}",
            o.version,
            o.paths
        );
    }
    // Control: the user's whole file in the root makes the client fetch.
    for bin in binaries() {
        let w = World::new(&bin);
        let mut ctx = w.ctx();
        oauth(&w, &mut ctx);
        let mut plan = w.plan(&ctx);
        let file = plan
            .files
            .iter_mut()
            .find(|f| f.path == "home/.claude/.credentials.json")
            .unwrap();
        file.contents = user_credentials(&w);
        let o = w.launch(&plan);
        assert!(
            o.paths.iter().any(|p| p.contains("/managed/settings")),
            "{}: {:?}",
            o.version,
            o.paths
        );
    }
}

/// Class 8. The daemon's `HOME`, `CLAUDE_CONFIG_DIR`, `ANTHROPIC_CONFIG_DIR`,
/// `XDG_CONFIG_HOME`, `KCAP_*`, `MCP_TIMEOUT`, `CLAUDE_CODE_SAFE_MODE` do not reach.
fn class8_client_variables_of_the_daemon_do_not_reach() {
    for (w, o) in rooted(false, plain) {
        let launch = w.s("launch");
        for env in o.servers.values() {
            assert!(env["CLAUDE_CONFIG_DIR"].starts_with(&launch));
            assert!(env["HOME"].starts_with(&launch));
            assert!(!env.contains_key("ANTHROPIC_CONFIG_DIR"));
            assert!(!env.values().any(|v| v.contains("daemon-")), "{env:?}");
        }
    }
}

/// Class 9. Non-interactive Claude Code trusts every folder, so trust gates nothing; a parent
/// folder's `CLAUDE.md` reached the model today. Rooted: its `CLAUDE.md` and
/// `.claude/settings.json` (hooks) bring nothing in.
fn class9_a_trusted_parent_folder_brings_nothing_in() {
    let parent = |w: &World, _: &mut LaunchContext| {
        w.write("parent/CLAUDE.md", "PARENT-CLAUDE-MD-MARKER\n");
        w.write(
            "parent/.claude/settings.json",
            &w.hostile_settings("parent"),
        );
    };
    for (w, _) in rooted(false, parent) {
        let bodies: String = w.api.requests().into_iter().map(|r| r.body).collect();
        assert!(!bodies.contains("PARENT-CLAUDE-MD-MARKER"));
    }
}

/// Class 10 (issue 32). A reviewer holds the daemon's model key (Claude Code passes its whole
/// environment, `ANTHROPIC_API_KEY` included, to every MCP server) and reaches any port of
/// the host. Behind the door (`LaunchContext::door`): the client and its servers hold a
/// per-launch token, the stand-in model API gets the daemon's key on every request (set by
/// the door), a server reaches the stand-in kcap server through the door's URL, and a
/// connection from a server to the model API's own port on the host fails. Without the door
/// the key reaches the servers and the direct connection succeeds: the test bites.
fn class10_behind_the_door_the_key_stays_outside_and_only_the_door_is_reached() {
    const DAEMON_KEY: &str = "sk-ant-daemon-key-door-0123456789";
    if let Some(missing) = kcap_mcp_registry::launch::door::missing() {
        common::peers::skip(format!("this kernel lacks {missing}"));
        return;
    }
    for bin in binaries() {
        let run = |door: bool| {
            let w = World::new(&bin);
            let kcap = common::door::KcapServer::start();
            // The servers: a probe, then the recorder. Marks go to `hooks/`.
            let recorder = w.path("bin/recorder.js");
            std::fs::rename(w.path("bin/kcap"), &recorder).unwrap();
            common::door::write_probe(
                &w.path("bin/kcap"),
                &w.path("hooks"),
                &w.api.url,
                &format!("/usr/bin/env node {}", recorder.display()),
            );
            let mut ctx = w.ctx();
            ctx.server_url = Some(kcap.url.clone());
            ctx.credentials.env[0] = EnvVar::new("ANTHROPIC_API_KEY", DAEMON_KEY);
            ctx.door = door;
            // Through `Client::plan`, which puts the launch behind the door.
            let inputs = kcap_mcp_registry::clients::dispatch::PlanInputs::new(Policy::Lenient);
            let plan = Client::Claude.plan(&ctx, &inputs).unwrap().plan;
            assert_eq!(plan.door.is_some(), door);
            let o = w.launch(&plan);
            let marks = common::door::marks(&w.path("hooks"));
            // The harness keeps the launch directory (`keep_launch_dir`).
            let leaks = common::door::files_holding(&w.path("launch"), DAEMON_KEY);
            (o, marks, w.api.requests(), kcap.reached(), leaks)
        };
        let (o, marks, requests, reached, leaks) = run(true);
        let v = &o.version;
        assert_eq!(
            o.servers.len(),
            2,
            "{v}: {:?}; stderr {}",
            o.servers,
            o.stderr
        );
        for (argv, env) in &o.servers {
            assert!(
                env["ANTHROPIC_API_KEY"].starts_with("kcap-door-"),
                "{v}: {argv:?}: {env:?}"
            );
        }
        common::door::assert_reach_behind_the_door(
            o.servers.iter().map(|(argv, env)| (argv.as_slice(), env)),
            DAEMON_KEY,
            &leaks,
            &marks,
            reached,
        );
        let offered = o.offered.clone().unwrap_or_default();
        assert!(
            offered.contains(RESULT_TOOL),
            "{v}: {offered:?}; {:?}",
            o.paths
        );
        common::door::assert_door_headers(&requests, "x-api-key", DAEMON_KEY);
        let (o, marks, _, _, _) = run(false);
        assert!(
            o.servers
                .values()
                .all(|env| env.get("ANTHROPIC_API_KEY").map(String::as_str) == Some(DAEMON_KEY)),
            "{v}: without the door the servers hold the key: {:?}",
            o.servers
        );
        common::door::assert_open_network(&marks);
    }
}
