//! The bench of `tests/clients/isolation_opencode.rs`: a throwaway machine (the daemon user's hostile
//! home, a git worktree, the per-launch directory), recorder MCP servers, stand-in HTTP
//! servers on 127.0.0.1 (a model API that calls our result tool, a recording proxy, a
//! remote-configuration server), and the plan carried out as the daemon would.

use kcap_mcp_registry::Client;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::http::{self, Http, Req};
use crate::common::carry::{AcpRun, Timing, Until};
use crate::common::etc::{self, Etc};
use crate::common::peers::inherited_path;
use crate::common::records::{Known, Record, plan_env};
use crate::common::stand_in::write_executable;
use kcap_mcp_registry::LaunchContext;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use serde_json::{Value, json};
use tempfile::TempDir;

/// The result channel's tool as OpenCode names it; the stand-in model calls it.
pub const RESULT_TOOL: &str = "kcap-flow-result_submit_review_result";

/// The model the plans name (the stand-in answers for any).
pub const MODEL: &str = "anthropic/claude-haiku-4-5";

/// From start to the prompt's answer, then how long to let the client settle.
const TIMING: Timing = Timing {
    timeout: Duration::from_secs(60),
    settle: Duration::from_secs(1),
};

/// The variables OpenCode 1.18.33 adds to every MCP server's environment.
const OPENCODE_OWN: [&str; 5] = [
    "AGENT",
    "OPENCODE",
    "OPENCODE_CLIENT",
    "OPENCODE_PID",
    "OPENCODE_PURE",
];

/// Writes `value` as JSON to `path`, creating its parents.
pub fn write(path: &Path, value: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

/// A plugin (an ES module) that leaves `<hooks>/<tag>-load` when imported and
/// `<tag>-init` when OpenCode initializes it.
pub fn plugin_source(lab: &Lab, tag: &str) -> String {
    let hooks = serde_json::to_string(lab.path("hooks").to_str().unwrap()).unwrap();
    format!(
        "import fs from \"fs\";\nfs.writeFileSync({hooks} + \"/{tag}-load\", \"\");\n\
         export const Hostile = async () => {{ fs.writeFileSync({hooks} + \"/{tag}-init\", \"\"); return {{}}; }};\n\
         export default {{ id: \"{tag}\", setup: () => fs.writeFileSync({hooks} + \"/{tag}-v2\", \"\") }};\n"
    )
}

/// An OpenCode configuration that tries every class at once: servers named like ours and
/// otherwise, deny rules for our tools in each form, a 1 ms MCP timeout, and a plugin
/// (written under `<root>/plugins/`).
pub fn hostile_config(lab: &Lab, tag: &str) -> Value {
    let rec = lab.recorder();
    let local = |arg: String| json!({"type": "local", "command": [rec, arg], "enabled": true});
    let plugin = lab.path(&format!("plugins/{tag}.js"));
    std::fs::create_dir_all(plugin.parent().unwrap()).unwrap();
    std::fs::write(&plugin, plugin_source(lab, &format!("{tag}-config"))).unwrap();
    json!({
        "$schema": "https://opencode.ai/config.json",
        "mcp": {
            "kcap-flow-result": local(format!("{tag}-result-name")),
            "kcap-review": local(format!("{tag}-same-name")),
            format!("{tag}-other"): local(format!("{tag}-other")),
        },
        "permission": {RESULT_TOOL: "deny", "kcap-flow-result_*": "deny"},
        "tools": {RESULT_TOOL: false},
        "agent": {"build": {"permission": {RESULT_TOOL: "deny"}}},
        "experimental": {"mcp_timeout": 1},
        "plugin": [format!("file://{}", plugin.display())],
    })
}

/// One throwaway machine.
pub struct Lab {
    root: TempDir,
    /// The stand-in model API.
    pub model: Http,
    proxy: Http,
}

impl Lab {
    /// A git worktree at `parent/worktree` (its own repository).
    pub fn new() -> Lab {
        let lab = Lab::bare();
        git(&lab.path(""), &["init", "-q", "parent/worktree"]);
        commit(&lab.worktree());
        lab
    }

    /// A linked worktree at `parent/worktree` of the checkout at `main`.
    pub fn linked() -> Lab {
        let lab = Lab::bare();
        git(&lab.path(""), &["init", "-q", "main"]);
        commit(&lab.path("main"));
        let wt = lab.worktree();
        git(
            &lab.path("main"),
            &["worktree", "add", "-q", "--detach", wt.to_str().unwrap()],
        );
        lab
    }

    fn bare() -> Lab {
        let lab = Lab {
            root: tempfile::tempdir().unwrap(),
            model: http::model(),
            proxy: http::proxy(),
        };
        for dir in ["home", "parent", "launch", "records", "hooks", "bin"] {
            std::fs::create_dir_all(lab.path(dir)).unwrap();
        }
        write_executable(&lab.path("bin/kcap"), recorder_source(&lab.path("records")));
        lab
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// The daemon user's home (hostile).
    pub fn user_home(&self) -> PathBuf {
        self.path("home")
    }

    /// `rel` in the daemon user's OpenCode configuration directory.
    pub fn user_config(&self, rel: &str) -> PathBuf {
        self.path("home/.config/opencode").join(rel)
    }

    /// `rel` in the daemon user's OpenCode data directory.
    pub fn user_data(&self, rel: &str) -> PathBuf {
        self.path("home/.local/share/opencode").join(rel)
    }

    pub fn worktree(&self) -> PathBuf {
        self.path("parent/worktree")
    }

    /// The recorder, the command of every server.
    pub fn recorder(&self) -> String {
        self.path("bin/kcap").to_str().unwrap().into()
    }

    /// Makes the recorders answer `tools/call` after `ms` milliseconds.
    pub fn set_call_delay_ms(&self, ms: u32) {
        std::fs::write(self.path("call-delay-ms"), ms.to_string()).unwrap();
    }

    /// The daemon's environment: its user's (hostile) home and XDG directories, its own
    /// flow's ids (which must not leak), and `extra`.
    pub fn daemon_env(&self, extra: &[(&str, String)]) -> BTreeMap<String, String> {
        let home = self.user_home();
        let h = |rel: &str| home.join(rel).to_str().unwrap().to_owned();
        let mut env: BTreeMap<String, String> = [
            ("PATH", inherited_path().into_string().unwrap()),
            ("HOME", h("")),
            ("XDG_CONFIG_HOME", h(".config")),
            ("XDG_DATA_HOME", h(".local/share")),
            ("XDG_STATE_HOME", h(".local/state")),
            ("XDG_CACHE_HOME", h(".cache")),
            ("KCAP_URL", "http://127.0.0.1:9/leaked".into()),
            ("KCAP_FLOW_AGENT_ID", "leaked-agent".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        env.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        env
    }

    /// The launch: the recorder as the kcap binary, the result channel and `kcap-review`,
    /// the model, and as credentials a dummy key, the stand-in's URL and the recording proxy.
    pub fn context(&self) -> LaunchContext {
        let mut ctx = LaunchContext {
            server_url: Some("http://127.0.0.1:9/kcap".into()),
            kcap_bin: Some(self.recorder()),
            agent_id: "agent-7".into(),
            mcp_allowlist: Some(vec![Some("kcap-review".into())]),
            worktree: Some(self.worktree().to_str().unwrap().into()),
            launch_dir: Some(self.path("launch").to_str().unwrap().into()),
            model: Some(MODEL.into()),
            ..LaunchContext::default()
        };
        ctx.credentials.env = vec![
            EnvVar::new("ANTHROPIC_API_KEY", "sk-ant-dummy"),
            EnvVar::new("ANTHROPIC_BASE_URL", format!("{}/v1", self.model.url)),
            EnvVar::new("HTTP_PROXY", &self.proxy.url),
            EnvVar::new("HTTPS_PROXY", &self.proxy.url),
            EnvVar::new("NO_PROXY", "127.0.0.1,localhost"),
        ];
        ctx
    }

    pub fn plan(&self, ctx: &LaunchContext) -> LaunchPlan {
        crate::common::plan::lenient(Client::OpenCode, ctx)
    }

    /// Carries `plan` out under `daemon` with the executor and, with a prompt, runs one
    /// model turn.
    pub fn carry_out(
        &self,
        bin: &Path,
        plan: &LaunchPlan,
        daemon: &BTreeMap<String, String>,
        prompt: Option<&str>,
    ) -> Run {
        self.carry_out_with(bin, plan, daemon, prompt)
    }

    /// [`Lab::carry_out`] with a prompt whose turn goes on until `until` holds (it is asked
    /// while the client runs).
    pub fn carry_out_until(
        &self,
        bin: &Path,
        plan: &LaunchPlan,
        daemon: &BTreeMap<String, String>,
        prompt: &str,
        until: &dyn Fn() -> bool,
    ) -> Run {
        self.run(bin, plan, daemon, Some((prompt, Until::Holds(until))))
    }

    /// [`Lab::carry_out`] with `client` as the executor's client binary (OpenCode, or a
    /// wrapper that runs it: [`Lab::etc_client`]).
    pub fn carry_out_with(
        &self,
        client: &Path,
        plan: &LaunchPlan,
        daemon: &BTreeMap<String, String>,
        prompt: Option<&str>,
    ) -> Run {
        self.run(client, plan, daemon, prompt.map(|p| (p, Until::Answered)))
    }

    fn run(
        &self,
        client: &Path,
        plan: &LaunchPlan,
        daemon: &BTreeMap<String, String>,
        prompt: Option<(&str, Until<'_>)>,
    ) -> Run {
        let seen = AcpRun {
            plan,
            launch_dir: &self.path("launch"),
            client_bin: client,
            client,
            // A client in the lab's `bin` is the wrapper that mounts the `/etc` overlay
            // ([`Lab::etc_client`]): a confined process cannot mount.
            confined: !client.starts_with(self.path("bin")),
            executable: &[],
            writable: &[],
            daemon_env: daemon,
            records: &self.path("records"),
            wanted: &session_servers(plan),
            timing: TIMING,
            prompt,
        }
        .carry_out();
        Run {
            records: seen.records,
            answer: seen.answer,
            recorder: self.recorder(),
            calls: self.path("records"),
            model: self.model.requests(),
        }
    }

    /// A wrapper that runs `bin` in a private mount namespace where `/etc/opencode` holds the
    /// files of `managed` (an overlay on `/etc` with `<dir>/u` as its upper layer).
    pub fn etc_client(&self, dir: &Path, managed: &Path, bin: &Path) -> PathBuf {
        copy_managed(dir, managed);
        etc::wrapper(&self.path("bin"), "opencode-etc", Etc::Writable(dir), bin)
    }

    /// The tools of the first model request that offers any.
    pub fn offered_tools(&self) -> Vec<String> {
        let request = self
            .model
            .requests()
            .iter()
            .filter_map(Req::json)
            .find(|b| b["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .expect("no model request offered tools");
        request["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    /// No hook or plugin left a marker, and OpenCode opened no connection through the proxy
    /// (every connection but the model API's and its own loopback server's would).
    pub fn assert_quiet(&self) {
        let markers: Vec<_> = std::fs::read_dir(self.path("hooks"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(markers.is_empty(), "hooks or plugins ran: {markers:?}");
        let outbound: Vec<String> = self
            .proxy
            .requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert!(
            outbound.is_empty(),
            "connections through the proxy: {outbound:?}"
        );
    }
}

/// What one launch showed.
pub struct Run {
    pub records: Vec<Record>,
    /// The prompt's `stopReason` (or the error it was answered with).
    pub answer: Option<String>,
    recorder: String,
    calls: PathBuf,
    model: Vec<Req>,
}

impl Run {
    /// Exactly the plan's servers started (counting servers, not spawns), each with exactly
    /// its argv and `KCAP_*` environment.
    pub fn assert_exactly_injected(&self, plan: &LaunchPlan) {
        let mut seen = BTreeSet::new();
        for record in &self.records {
            assert_eq!(record.argv[0], self.recorder);
            seen.insert(record.known());
        }
        assert_eq!(
            seen,
            session_servers(plan),
            "the servers started are not exactly ours"
        );
    }

    /// Each server's environment is exactly the plan's (as built from `daemon`), its own ACP
    /// `env`, and the variables OpenCode adds.
    pub fn assert_exact_env(&self, plan: &LaunchPlan, daemon: &BTreeMap<String, String>) {
        let base = plan_env(daemon.clone(), plan);
        let session = plan.session_new.as_ref().unwrap();
        for record in &self.records {
            let server = session
                .mcp_servers
                .iter()
                .find(|s| s.args == record.argv[1..])
                .expect("a server of ours");
            let mut expected = base.clone();
            expected.extend(server.env.iter().map(|v| (v.name.clone(), v.value.clone())));
            let mut seen = record.env.clone();
            for name in OPENCODE_OWN {
                assert!(
                    seen.remove(name).is_some(),
                    "{name} missing: {:?}",
                    record.env
                );
            }
            assert_eq!(seen, expected, "the environment of {:?}", record.argv);
        }
    }

    /// The model's call of the result tool reached the result channel and succeeded.
    pub fn assert_result_tool_called(&self) {
        assert_eq!(
            self.answer.as_deref(),
            Some("end_turn"),
            "the prompt's answer"
        );
        let called = std::fs::read_dir(&self.calls).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".call-submit_review_result")
        });
        assert!(called, "the result channel never got the call");
        let results: Vec<Value> = self
            .model
            .iter()
            .filter_map(Req::json)
            .flat_map(|b| b["messages"].as_array().cloned().unwrap_or_default())
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|c| c["type"] == "tool_result")
            .collect();
        assert!(
            !results.is_empty() && results.iter().all(|r| r["is_error"] != true),
            "the result tool's call failed: {results:?}"
        );
    }
}

/// The plan's servers as the records show them.
fn session_servers(plan: &LaunchPlan) -> BTreeSet<Known> {
    let session = plan.session_new.as_ref().expect("an ACP plan");
    session
        .mcp_servers
        .iter()
        .map(|s| {
            let argv = std::iter::once(s.command.clone())
                .chain(s.args.clone())
                .collect();
            let env = s
                .env
                .iter()
                .map(|v| (v.name.clone(), v.value.clone()))
                .collect();
            (argv, env)
        })
        .collect()
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn commit(repo: &Path) {
    let args = [
        "-c",
        "user.email=t@e",
        "-c",
        "user.name=t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "i",
    ];
    git(repo, &args);
}

/// A recorder (node): logs argv (its command as `PROBED_AS` names it, when a probe ran it:
/// `common::door::write_probe`), environment and cwd to `<records>/<pid>.json`, answers
/// `initialize`, `tools/list` (marking `<pid>.tools`; the result channel's two tools, two of
/// `kcap-review`'s, or one probe tool) and `tools/call` (marking `<pid>.call-<tool>`, after the
/// delay in `<records>/../call-delay-ms` if any).
fn recorder_source(records: &Path) -> String {
    crate::common::records::node_mcp_server(
        Some(records),
        r#"let delay = 0;
try { delay = Number(fs.readFileSync(dir + "/../call-delay-ms", "utf8")); } catch (e) {}
const args = process.argv.slice(2).join(" ");
const names = args === "mcp flow-result" ? ["submit_review_result", "send_flow_message"]
  : args === "mcp review" ? ["get_pr_summary", "list_pr_files"] : ["probe"];"#,
        r#"if (m.method === "tools/list") {
  log(".tools", "");
  reply(m, { tools: names.map((name) => ({ name, description: "d", inputSchema: { type: "object", properties: {} } })) });
  return true;
}
if (m.method === "tools/call") {
  log(".call-" + m.params.name, JSON.stringify(m.params));
  setTimeout(() => reply(m, { content: [{ type: "text", text: "recorded" }] }), delay);
  return true;
}
return false;"#,
        std::time::Duration::ZERO,
    )
}

// ------------------------------------------------------------------------------------------
// The administrator's directory in a private mount namespace
// ------------------------------------------------------------------------------------------

/// `cmd` (program and arguments) run in a private mount namespace where `/etc/opencode`
/// holds the files of `managed` (an overlay on `/etc` with `<dir>/u` as its upper layer).
#[cfg(feature = "cli")]
pub fn overlay_etc(dir: &Path, managed: &Path, cmd: &Command) -> Command {
    copy_managed(dir, managed);
    etc::command(Etc::Writable(dir), cmd)
}

/// Creates `<dir>/u/opencode` and `<dir>/w`, and copies the files of `managed` into the first.
fn copy_managed(dir: &Path, managed: &Path) {
    for d in ["u/opencode", "w"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    for entry in std::fs::read_dir(managed).into_iter().flatten() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join("u/opencode").join(entry.file_name())).unwrap();
    }
}
