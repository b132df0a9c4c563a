//! Issue 31 on the ACP clients OpenCode and Qwen Code: a shell command the real client runs
//! as a tool, because the model asked, is confined by the reviewer's sandbox. A stand-in
//! model API (`common::model_api`, 127.0.0.1) answers the client's first turn with a call of
//! its shell tool whose command tries each attack of `common::tool_attacks`; the client runs
//! it and sends its output back in the next request, which the stand-in records. The plan of
//! `Client::plan` is carried out by the executor (`launch::launch_with_parent_env`) under
//! `Confinement::BestEffort` (the default: every attack is denied, the reviewer's own work is
//! done) and under `Confinement::Off` (every attack succeeds: the test bites).
//! `sandbox_clients::claude_tool_commands_are_confined` is the same for Claude Code.
//! Offline: dummy keys, the stand-in on the loopback interface, a dead proxy for the rest.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::model_api::{
    ModelApi, anthropic_tool_output, anthropic_turn, offers_tool, openai_chat_turn,
    openai_tool_output, response,
};
use crate::common::peers::{peer, skip};
use crate::common::tool_attacks::{self, Scene};
use kcap_mcp_registry::LaunchContext;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, Options, Reviewer};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        opencode_tool_commands_are_confined,
        qwen_tool_commands_are_confined,
    ]
}

/// How long one client run may take, from its start to the request carrying the tool's
/// output.
const BOUND: Duration = Duration::from_secs(60);

/// OpenCode 1.18.33 (`opencode acp`, Anthropic provider): the stand-in calls its `bash`
/// tool (input `{command, description}`) and reads the `tool_result` of the next request.
/// The plan denies `bash` (`opencode::DENIED_TOOLS`): the model is offered `glob`, `grep`
/// and `read` only, and a call of `bash` comes back as "Model tried to call unavailable tool
/// 'invalid'" (measured). So this launch allows `bash` in the plan's `OPENCODE_PERMISSION`,
/// and nothing else: the sandbox is the layer under test, as it would be if a permission
/// rule were ever beaten.
fn opencode_tool_commands_are_confined() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    if let Some(missing) = sandbox::missing() {
        skip(format!("this kernel lacks {missing}"));
        return;
    }
    let confined = opencode_attacks(&bin, Confinement::BestEffort);
    let open = opencode_attacks(&bin, Confinement::Off);
    eprintln!("OpenCode, sandboxed: {confined:?}\nOpenCode, sandbox off: {open:?}");
    tool_attacks::assert_confined("KCAP_OPENCODE_BIN", &confined, &open);
}

/// Qwen Code 0.24.4 (`qwen --acp --approval-mode yolo`, OpenAI-compatible provider): the
/// stand-in calls its `run_shell_command` tool (arguments `{command}`) and reads the
/// `role: "tool"` message of the next request. The plan is used as it is: `yolo` runs the
/// tool without asking.
fn qwen_tool_commands_are_confined() {
    let Some(bin) = peer("KCAP_QWEN_BIN") else {
        return;
    };
    if let Some(missing) = sandbox::missing() {
        skip(format!("this kernel lacks {missing}"));
        return;
    }
    let confined = qwen_attacks(&bin, Confinement::BestEffort);
    let open = qwen_attacks(&bin, Confinement::Off);
    eprintln!("Qwen Code, sandboxed: {confined:?}\nQwen Code, sandbox off: {open:?}");
    tool_attacks::assert_confined("KCAP_QWEN_BIN", &confined, &open);
}

/// One OpenCode launch under `confinement` (see [`opencode_tool_commands_are_confined`]);
/// each probe's answer.
fn opencode_attacks(bin: &Path, confinement: Confinement) -> BTreeMap<String, bool> {
    const MODEL: &str = "anthropic/claude-haiku-4-5";
    let scene = Scene::new();
    let input = json!({"command": scene.command(), "description": "probe"});
    let api = ModelApi::answering(move |req| {
        let body = req.json().unwrap_or_default();
        let call = offers_tool(&body, "bash") && anthropic_tool_output(&body).is_none();
        let turn = anthropic_turn(MODEL, call.then_some(("bash", &input)));
        response("200 OK", "text/event-stream", &turn)
    });
    let credentials = vec![
        EnvVar::new("ANTHROPIC_API_KEY", "sk-ant-dummy-0123456789abcdefghij"),
        EnvVar::new("ANTHROPIC_BASE_URL", format!("{}/v1", api.url)),
    ];
    let mut plan = plan(Client::OpenCode, &scene, MODEL, credentials);
    let permission = plan
        .env
        .iter_mut()
        .find(|v| v.name == "OPENCODE_PERMISSION")
        .expect("the plan sets OPENCODE_PERMISSION");
    assert!(
        permission.value.contains(r#""bash":"deny""#),
        "{permission:?}"
    );
    permission.value = permission
        .value
        .replace(r#""bash":"deny""#, r#""bash":"allow""#);
    attacks(&plan, bin, confinement, &api, anthropic_tool_output)
}

/// One Qwen Code launch under `confinement` (see [`qwen_tool_commands_are_confined`]); each
/// probe's answer.
fn qwen_attacks(bin: &Path, confinement: Confinement) -> BTreeMap<String, bool> {
    const MODEL: &str = "gpt-4o";
    const TOOL: &str = "run_shell_command";
    let scene = Scene::new();
    let input = json!({"command": scene.command()});
    let api = ModelApi::answering(move |req| {
        let body = req.json().unwrap_or_default();
        let call = offers_tool(&body, TOOL) && openai_tool_output(&body).is_none();
        let turn = openai_chat_turn(MODEL, call.then_some((TOOL, &input)));
        response("200 OK", "text/event-stream", &turn)
    });
    let credentials = vec![
        EnvVar::new("OPENAI_API_KEY", "sk-dummy-0123456789abcdefghij"),
        EnvVar::new("OPENAI_BASE_URL", format!("{}/v1", api.url)),
    ];
    let plan = plan(Client::Qwen, &scene, MODEL, credentials);
    attacks(&plan, bin, confinement, &api, openai_tool_output)
}

/// `client`'s reviewer plan (`Client::plan`, lenient policy) for the scene's worktree and
/// launch directory, `model` and `credentials`, with a dead proxy for anything but the
/// loopback interface (where the stand-in and OpenCode's own server listen).
fn plan(client: Client, scene: &Scene, model: &str, credentials: Vec<EnvVar>) -> LaunchPlan {
    let mut ctx = LaunchContext {
        agent_id: "a1".into(),
        worktree: Some(scene.worktree().display().to_string()),
        launch_dir: Some(scene.launch_dir().display().to_string()),
        model: Some(model.into()),
        ..LaunchContext::default()
    };
    ctx.credentials.env = credentials;
    tool_attacks::offline_plan(client, &ctx)
}

/// Carries `plan` out with the executor under `confinement` (the daemon's environment: its
/// `PATH` only), sends one prompt, and reads the session (its permission requests refused by
/// the executor) until a request to `api` carries the tool's output, which `output` reads
/// from a request body; stops the client and returns each probe's answer. Panics after
/// [`BOUND`], when the client exits, asks a permission, or ends its turn without the output.
fn attacks(
    plan: &LaunchPlan,
    bin: &Path,
    confinement: Confinement,
    api: &ModelApi,
    output: fn(&Value) -> Option<String>,
) -> BTreeMap<String, bool> {
    let client = plan.client;
    let options = Options::default()
        .with_confinement(confinement)
        .with_handshake_timeout(BOUND)
        .with_die_with_parent(true);
    let deadline = Instant::now() + BOUND;
    let reviewer = launch::launch_with_parent_env(plan, bin, &options, &tool_attacks::daemon_env)
        .unwrap_or_else(|e| panic!("{client}: {}", launch_error(&e)));
    assert!(
        matches!(reviewer, Reviewer::Acp(_)),
        "{client} runs over ACP"
    );
    let who = format!("{client} ({confinement:?})");
    let result = tool_attacks::until_tool_output(reviewer, api, output, deadline, &who);
    tool_attacks::answers(&result)
}

/// An executor error and its sources, on one line.
fn launch_error(e: &launch::ExecError) -> String {
    kcap_mcp_registry::text::error_chain(e)
}
