//! Issue 35 item 1, on the real clients: every injected MCP server is in the reviewer's first
//! model request, even one that answers only after [`DELAY`]. The kcap binary of the plan
//! is a stand-in MCP server ([`slow_server`]) that sleeps before it reads its first message
//! and then lists the registry's tools of the server it was started as; a stand-in model API
//! (`common::model_api`, 127.0.0.1) records each request and ends every turn at once. The
//! plan of `Client::plan` (the result channel and `kcap-review`) is carried out by the
//! executor (`launch::launch_with_parent_env`) as a daemon would, with no second prompt:
//! the first request that offers tools must name a tool of each server.
//! Offline: dummy keys, the stand-in on the loopback interface, a dead proxy for the rest.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::model_api::{
    ModelApi, Request, anthropic_turn, gemini_turn, openai_chat_turn, openai_responses_turn,
    response,
};
use crate::common::peers::{inherited_path, peer};
use crate::common::records::listing_server_source;
use crate::common::tool_attacks::Scene;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::clients::root::{CredentialFile, Credentials};
use kcap_mcp_registry::launch::{self, AcpEvent, Options, Reviewer};
use kcap_mcp_registry::{LaunchContext, Policy};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        claude_offers_a_slow_server_in_its_first_turn,
        claude_next_offers_a_slow_server_in_its_first_turn,
        codex_offers_a_slow_server_in_its_first_turn,
        codex_next_offers_a_slow_server_in_its_first_turn,
        gemini_offers_a_slow_server_in_its_first_turn,
        opencode_offers_a_slow_server_in_its_first_turn,
        copilot_offers_a_slow_server_in_its_first_turn,
        qwen_offers_a_slow_server_in_its_first_turn,
        claude_a_typed_prompt_is_only_a_prompt,
        claude_a_quoted_failure_does_not_stop_the_launch,
        claude_next_a_quoted_failure_does_not_stop_the_launch,
    ]
}

/// How long each injected server sleeps before it reads the client's `initialize`.
const DELAY: Duration = Duration::from_secs(5);

/// How long one client run may take, from its start to its first request that offers tools.
pub(crate) const BOUND: Duration = Duration::from_secs(90);

/// A tool of each injected server (the registry's), which the first turn must name.
const TOOLS: &[&str] = &["submit_review_result", "get_pr_summary"];

fn claude_offers_a_slow_server_in_its_first_turn() {
    claude("KCAP_CLAUDE_BIN");
}

fn claude_next_offers_a_slow_server_in_its_first_turn() {
    claude("KCAP_CLAUDE_NEXT_BIN");
}

/// Claude Code (Anthropic Messages API; 2.1.197 lists MCP tools in `tools`, 2.1.328 names
/// them, deferred, in the system prompt: both are in the request body). The plan types the
/// prompt once its log says the servers are ready (`claude::ready`); the bite puts the
/// prompt back in the argv, where Claude Code sends it at once.
fn claude(var: &'static str) {
    let Some(bin) = peer(var) else { return };
    let bench = Bench::for_any(Client::Claude, listing_server_source(DELAY));
    let plan = bench.any_plan(Client::Claude);
    let typed = plan
        .typed_prompt
        .clone()
        .expect("the plan types its prompt");
    assert!(
        typed
            .text
            .starts_with("Review the change.\n\nNote from kcap:"),
        "{typed:?}"
    );
    bench.judge(&plan, &bin);
    // The whole prompt, its line breaks too, is the first turn's user message.
    let first = bench.recorded_first_turn().unwrap();
    let sent = serde_json::to_string(&typed.text).unwrap();
    assert!(
        first.contains(sent.trim_matches('"')),
        "{var}: the typed prompt arrived changed"
    );

    let bench = Bench::for_any(Client::Claude, listing_server_source(DELAY));
    let mut plan = bench.any_plan(Client::Claude);
    let typed = plan.typed_prompt.take().unwrap();
    let log = plan.argv.iter().position(|a| a == "--debug-file").unwrap();
    plan.argv.truncate(log);
    plan.argv.extend(["--".into(), typed.text]);
    bench.judge_without(&plan, &bin, "the typed prompt");
}

/// A dummy key and the stand-in model API as Claude Code's.
fn claude_credentials(bench: &Bench) -> Credentials {
    Credentials {
        env: vec![
            EnvVar::new("ANTHROPIC_API_KEY", "sk-ant-dummy-0123456789abcdefghij"),
            EnvVar::new("ANTHROPIC_BASE_URL", &bench.api.url),
            EnvVar::new("IS_SANDBOX", "1"),
        ],
        files: Vec::new(),
    }
}

fn codex_offers_a_slow_server_in_its_first_turn() {
    codex("KCAP_CODEX_BIN");
}

fn codex_next_offers_a_slow_server_in_its_first_turn() {
    codex("KCAP_CODEX_NEXT_BIN");
}

/// Codex CLI (Responses API over HTTP: its WebSocket upgrade is refused), from `var`.
fn codex(var: &'static str) {
    let Some(bin) = peer(var) else {
        return;
    };
    let with = Bench::for_any(Client::Codex, listing_server_source(DELAY));
    with.judge(&with.any_plan(Client::Codex), &bin);
    // The bite: the servers not `required` in the plan's `config.toml`.
    let without = Bench::for_any(Client::Codex, listing_server_source(DELAY));
    let mut plan = without.any_plan(Client::Codex);
    let config = plan
        .files
        .iter_mut()
        .find(|f| f.path.ends_with("config.toml"))
        .unwrap();
    assert!(
        config.contents.contains("required = true\n"),
        "{}",
        config.contents
    );
    config.contents = config.contents.replace("required = true\n", "");
    without.judge_without(&plan, &bin, "`required = true`");
}

/// Gemini CLI over ACP (Gemini API, `streamGenerateContent`).
fn gemini_offers_a_slow_server_in_its_first_turn() {
    acp_offers_a_slow_server(Client::Gemini, "KCAP_GEMINI_BIN");
}

/// OpenCode over ACP (its Anthropic provider).
fn opencode_offers_a_slow_server_in_its_first_turn() {
    acp_offers_a_slow_server(Client::OpenCode, "KCAP_OPENCODE_BIN");
}

/// Copilot CLI over ACP (its OpenAI-compatible provider, offline).
fn copilot_offers_a_slow_server_in_its_first_turn() {
    acp_offers_a_slow_server(Client::Copilot, "KCAP_COPILOT_BIN");
}

/// The ACP client `client` (its binary in `var`) offers the slow servers in its first turn.
fn acp_offers_a_slow_server(client: Client, var: &'static str) {
    let Some(bin) = peer(var) else {
        return;
    };
    let bench = Bench::for_client(client, listing_server_source(DELAY));
    bench.judge(&bench.acp_plan(client), &bin);
}

/// Qwen Code over ACP (its OpenAI-compatible provider).
fn qwen_offers_a_slow_server_in_its_first_turn() {
    acp_offers_a_slow_server(Client::Qwen, "KCAP_QWEN_BIN");
    let Some(bin) = peer("KCAP_QWEN_BIN") else {
        return;
    };
    // The bite: without the switch that makes `session/new` wait for the servers, and
    // without the executor's wait on the debug log (`qwen::ready`).
    let without = Bench::for_client(Client::Qwen, listing_server_source(DELAY));
    let mut plan = without.acp_plan(Client::Qwen);
    let before = plan.env.len();
    plan.env
        .retain(|v| v.name != "QWEN_CODE_LEGACY_MCP_BLOCKING");
    assert_eq!(plan.env.len() + 1, before);
    assert!(plan.servers_ready.take().is_some());
    without.judge_without(
        &plan,
        &bin,
        "QWEN_CODE_LEGACY_MCP_BLOCKING=1 and servers_ready",
    );
}

/// An Anthropic Messages API turn that ends at once.
fn anthropic(model: &str) -> Vec<u8> {
    response("200 OK", "text/event-stream", &anthropic_turn(model, None))
}

/// Codex CLI's stand-in turn: its WebSocket upgrade refused (`426`), so it falls back to the
/// Responses API over HTTP; a turn that ends at once to `POST …/responses`.
pub(crate) fn codex_answer(req: &Request) -> Vec<u8> {
    if !req.header("upgrade").is_empty() {
        return b"HTTP/1.1 426 Upgrade Required\r\ncontent-length: 0\r\n\r\n".to_vec();
    }
    if !(req.method == "POST" && req.path.ends_with("/responses")) {
        return response("404 Not Found", "application/json", b"{}");
    }
    response("200 OK", "text/event-stream", &openai_responses_turn(None))
}

/// The model of the Gemini CLI stand-in turns.
const GEMINI_MODEL: &str = "gemini-2.5-flash";

/// The model of the OpenCode stand-in turns (its Anthropic provider).
const OPENCODE_MODEL: &str = "anthropic/claude-haiku-4-5";

/// The stand-in model API's answer to an ACP client (Gemini CLI, OpenCode, Copilot CLI,
/// Qwen Code): a turn that ends at once, in its API's shape.
fn acp_answer(client: Client) -> fn(&Request) -> Vec<u8> {
    match client {
        Client::Gemini => |_| {
            response(
                "200 OK",
                "text/event-stream",
                &gemini_turn(GEMINI_MODEL, None),
            )
        },
        Client::OpenCode => |_| anthropic(OPENCODE_MODEL),
        _ => openai_chat,
    }
}

/// A Chat Completions turn that ends at once, to the completions path only.
pub(crate) fn openai_chat(req: &Request) -> Vec<u8> {
    if !req.path.ends_with("/chat/completions") {
        return response("404 Not Found", "application/json", b"{}");
    }
    response(
        "200 OK",
        "text/event-stream",
        &openai_chat_turn("gpt-4o", None),
    )
}

/// One launch's world: a worktree and launch directory ([`Scene`]), the slow stand-in
/// server as the kcap binary, and the stand-in model API.
pub(crate) struct Bench {
    pub(crate) scene: Scene,
    pub(crate) kcap: PathBuf,
    pub(crate) api: ModelApi,
    /// Copilot CLI's package cache (`KCAP_COPILOT_CACHE`), read and executed in place.
    pub(crate) cache: Option<PathBuf>,
}

impl Bench {
    fn new(answer: impl Fn(&Request) -> Vec<u8> + Send + Sync + 'static) -> Bench {
        Bench::serving(answer, listing_server_source(DELAY))
    }

    /// A world for the ACP client `client` ([`acp_answer`]) with `server` (an executable's
    /// source) as the kcap binary, and Copilot CLI's package cache (`KCAP_COPILOT_CACHE`)
    /// for Copilot CLI.
    pub(crate) fn for_client(client: Client, server: String) -> Bench {
        let mut bench = Bench::serving(acp_answer(client), server);
        if client == Client::Copilot {
            bench.cache = Some(PathBuf::from(
                std::env::var_os("KCAP_COPILOT_CACHE")
                    .expect("KCAP_COPILOT_CACHE with KCAP_COPILOT_BIN"),
            ));
        }
        bench
    }

    /// A world for any client of these tests with `server` (an executable's source) as the
    /// kcap binary: [`Bench::for_client`] for an ACP client; for Claude Code an Anthropic
    /// turn, for Codex CLI a Responses API turn over HTTP (its WebSocket upgrade refused).
    pub(crate) fn for_any(client: Client, server: String) -> Bench {
        match client {
            Client::Claude => Bench::serving(|_| anthropic("claude-stand-in"), server),
            Client::Codex => Bench::serving(codex_answer, server),
            acp => Bench::for_client(acp, server),
        }
    }

    /// `client`'s plan ([`Bench::plan`]) with dummy credentials for the stand-in model API:
    /// [`Bench::acp_plan`] for an ACP client, an Anthropic key and base URL for Claude Code,
    /// an `auth.json` and `OPENAI_BASE_URL` for Codex CLI (model `gpt-5`).
    pub(crate) fn any_plan(&self, client: Client) -> LaunchPlan {
        self.any_plan_under(client, Policy::Lenient)
    }

    /// [`Bench::any_plan`] with its allowlist resolved under `policy`.
    pub(crate) fn any_plan_under(&self, client: Client, policy: Policy) -> LaunchPlan {
        let plan = |client: Client, model: Option<&str>, credentials| {
            let ctx = self.context(model, credentials);
            self.offline(
                client
                    .plan(&ctx, &PlanInputs::new(policy))
                    .unwrap_or_else(|e| panic!("{client}: {e}"))
                    .plan,
            )
        };
        match client {
            Client::Claude => plan(Client::Claude, None, claude_credentials(self)),
            Client::Codex => plan(
                Client::Codex,
                Some("gpt-5"),
                Credentials {
                    env: vec![EnvVar::new(
                        "OPENAI_BASE_URL",
                        format!("{}/v1", self.api.url),
                    )],
                    files: vec![CredentialFile {
                        name: "auth.json".into(),
                        contents: r#"{"OPENAI_API_KEY":"sk-kcap-dummy"}"#.into(),
                    }],
                },
            ),
            acp => {
                let (model, credentials) = self.acp_credentials(acp);
                plan(acp, model, credentials)
            }
        }
    }

    /// The ACP client `client`'s plan ([`Bench::plan`]) with dummy credentials for the
    /// stand-in model API: Gemini API key and base URL (Gemini CLI), Anthropic's (OpenCode),
    /// Copilot CLI's offline provider, OpenAI's (Qwen Code).
    pub(crate) fn acp_plan(&self, client: Client) -> LaunchPlan {
        let (model, credentials) = self.acp_credentials(client);
        self.plan(client, model, credentials)
    }

    /// The model and dummy credentials of [`Bench::acp_plan`].
    fn acp_credentials(&self, client: Client) -> (Option<&'static str>, Credentials) {
        let url = &self.api.url;
        let (model, env) = match client {
            Client::Gemini => (
                Some(GEMINI_MODEL),
                vec![
                    EnvVar::new("GEMINI_API_KEY", "dummy-gemini-key-0123456789"),
                    EnvVar::new("GOOGLE_GEMINI_BASE_URL", url),
                ],
            ),
            Client::OpenCode => (
                Some(OPENCODE_MODEL),
                vec![
                    EnvVar::new("ANTHROPIC_API_KEY", "sk-ant-dummy-0123456789abcdefghij"),
                    EnvVar::new("ANTHROPIC_BASE_URL", format!("{url}/v1")),
                ],
            ),
            Client::Copilot => (
                None,
                vec![
                    EnvVar::new("COPILOT_OFFLINE", "true"),
                    EnvVar::new("COPILOT_PROVIDER_BASE_URL", format!("{url}/v1")),
                    EnvVar::new("COPILOT_MODEL", "gpt-4o"),
                ],
            ),
            Client::Qwen => (
                Some("gpt-4o"),
                vec![
                    EnvVar::new("OPENAI_API_KEY", "sk-dummy-0123456789abcdefghij"),
                    EnvVar::new("OPENAI_BASE_URL", format!("{url}/v1")),
                ],
            ),
            other => panic!("{other}: not an ACP client of these tests"),
        };
        let files = Vec::new();
        (model, Credentials { env, files })
    }

    /// [`Bench::new`] with `server` (an executable's source) as the kcap binary.
    pub(crate) fn serving(
        answer: impl Fn(&Request) -> Vec<u8> + Send + Sync + 'static,
        server: String,
    ) -> Bench {
        let scene = Scene::new();
        let dir = scene.root().join("kcap");
        std::fs::create_dir_all(&dir).unwrap();
        let kcap = dir.join("kcap");
        crate::common::stand_in::write_executable(&kcap, server);
        Bench {
            scene,
            kcap,
            api: ModelApi::answering(answer),
            cache: None,
        }
    }

    /// A launch with the result channel and `kcap-review`, the stand-in as the kcap binary,
    /// the prompt `Review the change.`, the scene's worktree and launch directory.
    pub(crate) fn context(&self, model: Option<&str>, credentials: Credentials) -> LaunchContext {
        LaunchContext {
            agent_id: "a1".into(),
            server_url: Some("http://127.0.0.1:9".into()),
            kcap_bin: Some(self.kcap.display().to_string()),
            mcp_allowlist: Some(vec![Some("kcap-review".into())]),
            model: model.map(str::to_owned),
            prompt: Some("Review the change.".into()),
            worktree: Some(self.scene.worktree().display().to_string()),
            launch_dir: Some(self.scene.launch_dir().display().to_string()),
            cache_dir: self.cache.as_ref().map(|c| c.display().to_string()),
            credentials,
            ..LaunchContext::default()
        }
    }

    /// `client`'s reviewer plan (`Client::plan`, lenient policy) of [`Bench::context`],
    /// [`Bench::offline`].
    pub(crate) fn plan(
        &self,
        client: Client,
        model: Option<&str>,
        credentials: Credentials,
    ) -> LaunchPlan {
        let ctx = self.context(model, credentials);
        self.offline(
            client
                .plan(&ctx, &PlanInputs::new(Policy::Lenient))
                .unwrap_or_else(|e| panic!("{client}: {e}"))
                .plan,
        )
    }

    /// `plan` with a dead proxy for anything but the loopback interface.
    pub(crate) fn offline(&self, mut plan: LaunchPlan) -> LaunchPlan {
        plan.env.extend([
            EnvVar::new("HTTP_PROXY", "http://127.0.0.1:9"),
            EnvVar::new("HTTPS_PROXY", "http://127.0.0.1:9"),
            EnvVar::new("NO_PROXY", "127.0.0.1,localhost"),
        ]);
        plan
    }

    /// Asserts that the first request of `plan` carried out with `bin` that offers tools
    /// ([`Bench::first_turn`]) names every one of [`TOOLS`].
    fn judge(&self, plan: &LaunchPlan, bin: &Path) {
        let client = plan.client;
        let first = self.first_turn(plan, bin);
        let missing: Vec<&str> = TOOLS
            .iter()
            .copied()
            .filter(|t| !first.contains(t))
            .collect();
        assert!(
            missing.is_empty(),
            "{client}: the first model request that offers tools lacks {missing:?}: the \
             prompt went out before every injected server listed its tools; the request \
             begins: {}",
            first.chars().take(300).collect::<String>()
        );
    }

    /// The bite: `plan` without the protection under test, on a fresh world, gives a first
    /// turn that names none of [`TOOLS`] (so the test's servers are slow enough to show the
    /// race).
    fn judge_without(&self, plan: &LaunchPlan, bin: &Path, protection: &str) {
        let first = self.first_turn(plan, bin);
        let named: Vec<&str> = TOOLS
            .iter()
            .copied()
            .filter(|t| first.contains(t))
            .collect();
        assert!(
            named.is_empty(),
            "{}: without {protection} the first turn still named {named:?}: the test's servers \
             are not slow enough to show the race",
            plan.client
        );
    }

    /// The executor's options for a launch in this world: the handshake bounded by [`BOUND`],
    /// dialogs after 5 s quiet, the client dying with this process, a 48×160 terminal; the
    /// kcap binary (and Copilot CLI's package cache) executable and each of `write` writable
    /// in the reviewer's sandbox.
    pub(crate) fn options(&self, write: &[&Path]) -> Options {
        let mut options = crate::common::carry::reach(
            Options::default()
                .with_handshake_timeout(BOUND)
                .with_dialog_quiet(Duration::from_secs(5))
                .with_die_with_parent(true),
            &[&self.kcap],
            write,
        );
        if let Some(cache) = &self.cache {
            options = options.with_sandbox_read_exec(cache);
        }
        options.terminal_size = (48, 160);
        options
    }

    /// Carries `plan` out with `bin` (one prompt: the plan's, or over ACP sent once after
    /// `session/new`) until the stand-in got a request that offers tools; that request's
    /// body, as text.
    pub(crate) fn first_turn(&self, plan: &LaunchPlan, bin: &Path) -> String {
        let client = plan.client;
        let daemon_env = |name: &str| (name == "PATH").then(inherited_path);
        let options = self.options(&[]);
        let started = Instant::now();
        let reviewer = launch::launch_with_parent_env(plan, bin, &options, &daemon_env)
            .unwrap_or_else(|e| panic!("{client}: {}", kcap_mcp_registry::text::error_chain(&e)));
        let first = match reviewer {
            Reviewer::Acp(mut session) => {
                session
                    .prompt("Review the change.")
                    .unwrap_or_else(|e| panic!("{client}: session/prompt: {e}"));
                let first = loop {
                    if let Some(first) = self.recorded_first_turn() {
                        break first;
                    }
                    assert!(
                        started.elapsed() < BOUND,
                        "{client}: no request offered tools; stderr:\n{}",
                        session.stderr_tail()
                    );
                    match session.next_event(Duration::from_millis(200)) {
                        Ok(Some(AcpEvent::Exited(status))) => {
                            panic!("{client} exited: {status:?}\n{}", session.stderr_tail())
                        }
                        Ok(_) => {}
                        Err(e) => panic!("{client}: {e}\n{}", session.stderr_tail()),
                    }
                };
                session.stop().unwrap();
                first
            }
            Reviewer::Terminal(mut session) => {
                let first = crate::common::carry::drive_terminal(
                    &mut session,
                    client,
                    (started, BOUND),
                    "no request offered tools",
                    || self.recorded_first_turn(),
                );
                session.stop().unwrap();
                first
            }
        };
        eprintln!(
            "{client}: first turn after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        first
    }

    /// The body of the first request that offers any tool (`tools`, a non-empty array, in
    /// the Anthropic, OpenAI and Gemini APIs alike), as text.
    pub(crate) fn recorded_first_turn(&self) -> Option<String> {
        self.api
            .requests()
            .iter()
            .filter_map(Request::json)
            .find(|b| b["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .map(|b: Value| b.to_string())
    }
}

/// A typed prompt is only a prompt: typed into Claude Code 2.1.197's terminal, `!touch F`
/// runs `touch F` (its bash mode), so the plan refuses a prompt that starts with `!`
/// (`claude::ready::COMMAND_PREFIXES`) and one with `!` after text is sent to the model; the
/// bite types `!touch F` past the refusal and sees `F` made.
fn claude_a_typed_prompt_is_only_a_prompt() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let run = |text: Option<String>| {
        let bench = Bench::new(|_| anthropic("claude-stand-in"));
        let marker = bench.scene.root().join("bang");
        std::fs::create_dir_all(&marker).unwrap();
        let command = format!("touch {}/ran", marker.display());
        let mut ctx = bench.context(None, claude_credentials(&bench));
        ctx.prompt = Some(format!("Review: !{command}"));
        let refused = Client::Claude
            .plan(
                &LaunchContext {
                    prompt: Some(format!("  !{command}")),
                    ..ctx.clone()
                },
                &PlanInputs::new(Policy::Lenient),
            )
            .err()
            .map(|e| e.to_string());
        let mut plan = bench.offline(
            Client::Claude
                .plan(&ctx, &PlanInputs::new(Policy::Lenient))
                .unwrap()
                .plan,
        );
        if let Some(text) = &text {
            plan.typed_prompt.as_mut().unwrap().text = text.replace("CMD", &command);
        }
        let options = crate::common::carry::reach(
            Options::default().with_die_with_parent(true),
            &[&bench.kcap],
            &[&marker],
        );
        let daemon_env = |name: &str| (name == "PATH").then(inherited_path);
        let Ok(Reviewer::Terminal(mut session)) =
            launch::launch_with_parent_env(&plan, &bin, &options, &daemon_env)
        else {
            panic!("Claude Code runs in a terminal")
        };
        // Until the turn went out (the prompt) or the command had its time.
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(20)
            && bench.recorded_first_turn().is_none()
            && !marker.join("ran").exists()
        {
            let _ = session.next_event(Duration::from_millis(200));
        }
        session.stop().unwrap();
        (
            refused,
            marker.join("ran").exists(),
            bench.recorded_first_turn().is_some(),
        )
    };
    let (refused, ran, sent) = run(None);
    assert!(
        refused
            .as_deref()
            .is_some_and(|e| e.contains("starts with `!`")),
        "{refused:?}"
    );
    assert_eq!(
        (ran, sent),
        (false, true),
        "`Review: !…` typed: sent, not run"
    );
    let (_, ran, _) = run(Some("!CMD".into()));
    assert!(ran, "the bite: `!…` typed runs as a command");
}

fn claude_a_quoted_failure_does_not_stop_the_launch() {
    quoted_failure("KCAP_CLAUDE_BIN");
}

fn claude_next_a_quoted_failure_does_not_stop_the_launch() {
    quoted_failure("KCAP_CLAUDE_NEXT_BIN");
}

/// A line of Claude Code's log that only quotes a `failed` text says nothing: a server that
/// writes `MCP server "kcap-flow-result": Connection failed` on its standard error (Claude
/// Code logs it as `[ERROR] MCP server "…" Server stderr: …`, measured on 2.1.197 and
/// 2.1.328) and then lists its tools is in the first turn, the launch not stopped as
/// `ExecError::ServersNotReady` (which it was while any line holding the text counted).
fn quoted_failure(var: &'static str) {
    let Some(bin) = peer(var) else { return };
    let server = crate::common::records::listing_server_source(Duration::ZERO).replacen(
        '\n',
        "\nprocess.stderr.write('upstream said: MCP server \"kcap-flow-result\": Connection \
         failed, retrying\\n');\n",
        1,
    );
    let bench = Bench::serving(|_| anthropic("claude-stand-in"), server);
    let plan = bench.plan(Client::Claude, None, claude_credentials(&bench));
    bench.judge(&plan, &bin);
}
