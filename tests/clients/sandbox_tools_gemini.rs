//! Issue 31 on the real Gemini CLI: a shell command the client runs as a tool, because the
//! model asked, is confined by the reviewer's sandbox (`launch::sandbox`), as
//! `sandbox_clients::claude_tool_commands_are_confined` shows for Claude Code.
//!
//! A stand-in Gemini API (`common::model_api`, 127.0.0.1, `GOOGLE_GEMINI_BASE_URL`, a dummy
//! `GEMINI_API_KEY`) answers the first `streamGenerateContent` request that offers the shell
//! tool (`run_shell_command` in the request's `tools[].functionDeclarations`) with a
//! `functionCall` of it whose `command` is `common::tool_attacks`'s probe; the plan's
//! `--approval-mode yolo` lets Gemini run it without asking, and it sends the command's
//! output back as a `functionResponse` part of the next request, which the stand-in records.
//! The plan is `Client::plan`'s, carried out by the executor over ACP (`Reviewer::Acp`,
//! `session/prompt`), offline (dead proxies for anything but the loopback interface), each
//! run bounded (60 s). In the default sandbox every attack is denied and the reviewer's own
//! work is done; with the sandbox off every attack succeeds (the bite).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::model_api::{ModelApi, Request, gemini_turn, response};
use crate::common::peers::{peer, skip};
use crate::common::tool_attacks::{self, Scene};
use kcap_mcp_registry::LaunchContext;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::EnvVar;
use kcap_mcp_registry::clients::root::Credentials;
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, Options, Reviewer};
use serde_json::{Value, json};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![gemini_tool_commands_are_confined]
}

/// Gemini CLI's shell tool, as its requests declare it (0.61.0).
const SHELL_TOOL: &str = "run_shell_command";

/// The model the plan names and the stand-in answers as.
const MODEL: &str = "gemini-2.5-flash";

/// How long one client run may take, from launch to the request carrying the tool's output.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// Issue 31 from a command Gemini CLI runs as its shell tool (module docs): every attack of
/// `common::tool_attacks` denied in the default sandbox, done with the sandbox off.
fn gemini_tool_commands_are_confined() {
    let Some(bin) = peer("KCAP_GEMINI_BIN") else {
        return;
    };
    if let Some(missing) = sandbox::missing() {
        skip(format!("this kernel lacks {missing}"));
        return;
    }
    let confined = run_tool_attacks(&bin, Confinement::BestEffort);
    let open = run_tool_attacks(&bin, Confinement::Off);
    tool_attacks::assert_confined("KCAP_GEMINI_BIN", &confined, &open);
}

/// One Gemini CLI launch under `confinement` whose first turn runs the probe as its shell
/// tool; each probe's answer, read from the request that carries the tool's output.
fn run_tool_attacks(bin: &Path, confinement: Confinement) -> BTreeMap<String, bool> {
    let scene = Scene::new();
    let args = json!({"command": scene.command(), "description": "probe"});
    let api = ModelApi::answering(move |req| answer(req, &args));
    let ctx = LaunchContext {
        agent_id: "a1".into(),
        worktree: Some(scene.worktree().display().to_string()),
        launch_dir: Some(scene.launch_dir().display().to_string()),
        model: Some(MODEL.into()),
        credentials: Credentials {
            env: vec![
                EnvVar::new("GEMINI_API_KEY", "dummy-gemini-key-0123456789"),
                EnvVar::new("GOOGLE_GEMINI_BASE_URL", &api.url),
            ],
            files: Vec::new(),
        },
        ..LaunchContext::default()
    };
    let plan = tool_attacks::offline_plan(Client::Gemini, &ctx);
    let options = Options::default()
        .with_confinement(confinement)
        .with_die_with_parent(true);
    let reviewer = launch::launch_with_parent_env(&plan, bin, &options, &tool_attacks::daemon_env)
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(
        matches!(reviewer, Reviewer::Acp(_)),
        "Gemini CLI speaks ACP"
    );
    let deadline = Instant::now() + RUN_LIMIT;
    let who = format!("Gemini CLI ({confinement:?})");
    let output = tool_attacks::until_tool_output(reviewer, &api, tool_output, deadline, &who);
    let answers = tool_attacks::answers(&output);
    assert_eq!(
        answers.len(),
        tool_attacks::ATTACKS.len() + tool_attacks::WORK.len(),
        "{confinement:?}: the shell tool did not answer every probe: {output}"
    );
    answers
}

/// The stand-in Gemini API's answer to `req`: to a `streamGenerateContent` request that
/// offers [`SHELL_TOOL`] and holds no `functionResponse` yet, a call of it with `args`;
/// to any other, the text `done`.
fn answer(req: &Request, args: &Value) -> Vec<u8> {
    let body = req.json().unwrap_or_default();
    let offers_shell = body["tools"].as_array().is_some_and(|tools| {
        tools.iter().any(|t| {
            t["functionDeclarations"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d["name"] == SHELL_TOOL))
        })
    });
    let answered = req.body.contains("\"functionResponse\"");
    let turn = gemini_turn(
        MODEL,
        (offers_shell && !answered).then_some((SHELL_TOOL, args)),
    );
    response("200 OK", "text/event-stream", &turn)
}

/// The `response` of the first `functionResponse` part of a Gemini API request body's
/// `contents`, as JSON text, if it has one.
fn tool_output(body: &Value) -> Option<String> {
    body["contents"].as_array()?.iter().find_map(|content| {
        content["parts"].as_array()?.iter().find_map(|part| {
            let response = part.get("functionResponse")?;
            Some(response["response"].to_string())
        })
    })
}
