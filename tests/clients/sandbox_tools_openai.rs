//! Issue 31 on the clients whose model speaks an OpenAI API: a shell command the real client
//! runs as a tool, because the model asked, is confined by the reviewer's sandbox. A
//! stand-in model API (`common::model_api`, 127.0.0.1) answers the first turn with a call of
//! the client's shell tool, whose command tries each attack of `common::tool_attacks`; the
//! client runs it and sends its output back in the next request, which the stand-in
//! records. In the default sandbox every attack is denied and the reviewer's own work is
//! done; with the sandbox off every attack succeeds (the bite). `sandbox_clients.rs` does
//! the same for Claude Code.
//!
//! Codex CLI 0.169.0 (its TUI, the Responses API over HTTP once the stand-in answers its
//! WebSocket upgrade `426`) calls `exec_command`, in the plan as it is (its own sandbox off,
//! `--sandbox danger-full-access` in the plan's argv: with `workspace-write` no command ran in
//! the reviewer's sandbox);
//! Copilot CLI 1.0.102 (ACP, Chat Completions) calls `bash`, in a
//! plan widened to offer it ([`widen_copilot`]). Each client run is bounded by
//! [`RUN_TIMEOUT`] and stopped (its process group, its launch directory) once the output
//! came back.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::model_api::{ModelApi, response};
use crate::common::peers::{peer, skip};
use crate::common::tool_attacks::{self, Scene};
use kcap_mcp_registry::LaunchContext;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::clients::root::{CredentialFile, Credentials};
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, Options, Reviewer};
use serde_json::{Value, json};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        codex_tool_commands_are_confined,
        copilot_tool_commands_are_confined,
    ]
}

/// How long one client run may take, from its start to the request carrying the tool's
/// output.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether this kernel gives the sandbox; says why not (the test skipped) otherwise.
fn kernel_has_sandbox() -> bool {
    match sandbox::missing() {
        None => true,
        Some(missing) => {
            skip(format!("this kernel lacks {missing}"));
            false
        }
    }
}

/// The launch's part of the world: the scene's worktree and launch directory, the prompt.
fn context(scene: &Scene, credentials: Credentials) -> LaunchContext {
    LaunchContext {
        agent_id: "a1".into(),
        prompt: Some("Run the probe.".into()),
        worktree: Some(scene.worktree().display().to_string()),
        launch_dir: Some(scene.launch_dir().display().to_string()),
        credentials,
        ..LaunchContext::default()
    }
}

/// The names of the function tools a request `body` offers: Chat Completions'
/// `tools[].function.name`, the Responses API's `tools[].name`.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().or(t["name"].as_str()))
        .map(str::to_owned)
        .collect()
}

fn codex_tool_commands_are_confined() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    if !kernel_has_sandbox() {
        return;
    }
    let confined = codex_attacks(&bin, Confinement::BestEffort);
    let open = codex_attacks(&bin, Confinement::Off);
    tool_attacks::assert_confined("KCAP_CODEX_BIN", &confined, &open);
}

fn copilot_tool_commands_are_confined() {
    let Some(bin) = peer("KCAP_COPILOT_BIN") else {
        return;
    };
    if !kernel_has_sandbox() {
        return;
    }
    let confined = copilot_attacks(&bin, Confinement::BestEffort);
    let open = copilot_attacks(&bin, Confinement::Off);
    tool_attacks::assert_confined("KCAP_COPILOT_BIN", &confined, &open);
}

/// Codex CLI 0.169.0's shell tool (unified exec: `exec_command`, its command line in `cmd`)
/// and the arguments that run `command` with it, when the request offers it.
fn codex_call(tools: &[String], command: &str) -> Option<(&'static str, Value)> {
    tools
        .iter()
        .any(|t| t == "exec_command")
        .then(|| ("exec_command", json!({"cmd": command})))
}

/// One Codex CLI launch of its reviewer plan under `confinement`, whose first turn runs the
/// probe as its shell tool; each probe's answer, read from the `function_call_output` item
/// of the next request.
fn codex_attacks(bin: &Path, confinement: Confinement) -> BTreeMap<String, bool> {
    use crate::common::model_api::openai_responses_turn;
    let scene = Scene::new();
    let command = scene.command();
    let api = ModelApi::answering(move |req| {
        if !req.header("upgrade").is_empty() {
            return b"HTTP/1.1 426 Upgrade Required\r\ncontent-length: 0\r\n\r\n".to_vec();
        }
        if !(req.method == "POST" && req.path.ends_with("/responses")) {
            return response("404 Not Found", "application/json", b"{}");
        }
        let body = req.json().unwrap_or_default();
        let answered = codex_output(&body).is_some();
        let call = codex_call(&offered(&body), &command).filter(|_| !answered);
        let turn = openai_responses_turn(call.as_ref().map(|(n, a)| (*n, a)));
        response("200 OK", "text/event-stream", &turn)
    });
    let ctx = LaunchContext {
        // As `isolation_codex`: a model whose tools are listed in the first request.
        model: Some("gpt-5".into()),
        ..context(
            &scene,
            Credentials {
                env: vec![EnvVar::new("OPENAI_BASE_URL", format!("{}/v1", api.url))],
                files: vec![CredentialFile {
                    name: "auth.json".into(),
                    contents: r#"{"OPENAI_API_KEY":"sk-kcap-dummy"}"#.into(),
                }],
            },
        )
    };
    let plan = tool_attacks::offline_plan(Client::Codex, &ctx);
    let mut options = Options::default()
        .with_confinement(confinement)
        .with_handshake_timeout(RUN_TIMEOUT)
        .with_die_with_parent(true);
    options.terminal_size = (48, 160);
    let deadline = Instant::now() + RUN_TIMEOUT;
    let reviewer = launch::launch_with_parent_env(&plan, bin, &options, &tool_attacks::daemon_env)
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(
        matches!(reviewer, Reviewer::Terminal(_)),
        "Codex CLI runs in a terminal"
    );
    let who = format!("Codex ({confinement:?})");
    let result = tool_attacks::until_tool_output(reviewer, &api, codex_output, deadline, &who);
    tool_attacks::answers(&result)
}

/// The `output` of the first `function_call_output` input item of a Responses API request
/// body (<https://platform.openai.com/docs/api-reference/responses/create>), as text.
fn codex_output(body: &Value) -> Option<String> {
    body["input"].as_array()?.iter().find_map(|item| {
        (item["type"] == "function_call_output").then(|| match &item["output"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    })
}

/// One Copilot CLI launch under `confinement`, whose first turn runs the probe as its shell
/// tool; each probe's answer, read from the `role: "tool"` message of the next request.
fn copilot_attacks(bin: &Path, confinement: Confinement) -> BTreeMap<String, bool> {
    use crate::common::model_api::openai_chat_turn;
    let scene = Scene::new();
    let input = json!({"command": scene.command(), "description": "probe"});
    let api = ModelApi::answering(move |req| {
        if !req.path.ends_with("/chat/completions") {
            return response("404 Not Found", "application/json", b"{}");
        }
        let body = req.json().unwrap_or_default();
        let answered = copilot_output(&body).is_some();
        let offers = offered(&body).iter().any(|t| t == "bash");
        let turn = openai_chat_turn("gpt-4o", (offers && !answered).then_some(("bash", &input)));
        response("200 OK", "text/event-stream", &turn)
    });
    let cache = std::path::PathBuf::from(
        std::env::var_os("KCAP_COPILOT_CACHE").expect("KCAP_COPILOT_CACHE with KCAP_COPILOT_BIN"),
    );
    let ctx = LaunchContext {
        cache_dir: Some(cache.display().to_string()),
        ..context(
            &scene,
            Credentials {
                env: vec![
                    EnvVar::new("COPILOT_OFFLINE", "true"),
                    EnvVar::new("COPILOT_PROVIDER_BASE_URL", format!("{}/v1", api.url)),
                    EnvVar::new("COPILOT_MODEL", "gpt-4o"),
                ],
                files: Vec::new(),
            },
        )
    };
    let mut plan = tool_attacks::offline_plan(Client::Copilot, &ctx);
    widen_copilot(&mut plan);
    let options = Options::default()
        .with_confinement(confinement)
        .with_handshake_timeout(RUN_TIMEOUT)
        .with_die_with_parent(true)
        .with_sandbox_read_exec(&cache);
    let reviewer = launch::launch_with_parent_env(&plan, bin, &options, &tool_attacks::daemon_env)
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(
        matches!(reviewer, Reviewer::Acp(_)),
        "Copilot CLI runs over ACP"
    );
    let deadline = Instant::now() + RUN_TIMEOUT;
    let who = format!("Copilot ({confinement:?})");
    let result = tool_attacks::until_tool_output(reviewer, &api, copilot_output, deadline, &who);
    tool_attacks::answers(&result)
}

/// The plan with Copilot's built-in shell tool offered and its own permission gates open:
/// the reviewer plan offers only the tools the policy admits (`--available-tools`), the
/// shell never, and Copilot asks before a command or path it does not know, which the
/// executor refuses. So that only the sandbox stands between the command and each attack:
/// `--available-tools=bash` instead, and `--allow-all` (tools, paths, URLs).
fn widen_copilot(plan: &mut LaunchPlan) {
    plan.argv.retain(|a| !a.starts_with("--available-tools"));
    let at = plan.argv.len();
    plan.argv.splice(
        at..at,
        ["--available-tools=bash".into(), "--allow-all".into()],
    );
}

/// The `content` of the first `role: "tool"` message of a Chat Completions request body
/// (<https://platform.openai.com/docs/api-reference/chat/create>), as text.
fn copilot_output(body: &Value) -> Option<String> {
    body["messages"].as_array()?.iter().find_map(|m| {
        (m["role"] == "tool").then(|| match &m["content"] {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    })
}
