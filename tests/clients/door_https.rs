//! Issue 32 on the real clients: a review turn through the door to an `https://` model API.
//! The stand-in model API (`common::model_api::ModelApi::answering_tls`) speaks TLS only on
//! 127.0.0.1, with a certificate for `127.0.0.1` that a CA made for the run signed
//! (`common::door::TestCa`, rcgen); the daemon's credentials name it by its `https://` URL,
//! so `Client::plan` (with `LaunchContext::door`) gives the client the door's
//! `http://127.0.0.1:<port>` and a per-launch token, and the executor's door speaks TLS to
//! the stand-in, trusting the test's CA through `Options::with_door_root` only.
//!
//! With the root given: the first model request arrives over TLS carrying the daemon's key
//! (set by the door; no header carries the token) and the upstream's `host`, the client's
//! environment and launch directory hold the token and never the key, and the streamed
//! answer (server-sent events, with a text of the test's) passes so the turn completes.
//! Without the root (the bite): the door refuses the upstream's certificate, answers `502`
//! with a log line, and no request reaches the stand-in.
//! Issue 31, item 3: once the turn ended, the command line (`/proc/<pid>/cmdline`, which
//! every local user reads) of the client and of every process it started, its MCP servers
//! among them, holds no secret: the daemon's key, the per-launch token, the agent id, the
//! result channel's capability URL, OpenCode's server password. (The bite, run once: with
//! the agent id added to the prompt, which Codex CLI takes in its argv, the Codex case
//! fails naming its process.)
//! Clients: Claude Code (both pinned versions) in its terminal (the turn read from its transcript: its terminal
//! redraws only changed cells, so the text can arrive cut), and over ACP Qwen Code, Gemini
//! CLI, OpenCode and Copilot CLI (the prompt's stop reason, `end_turn`), and Codex CLI (both
//! pinned versions) in its terminal (the Responses API over HTTP once its WebSocket upgrade is answered `426`; its
//! key in `auth.json`, the turn read from its session rollout).
//! Offline: the stand-ins on the loopback interface, dummy keys, a dead proxy for the rest.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::door::{KcapServer, TestCa, files_holding, marks, tls_server, write_probe};
use crate::common::model_api::{
    ModelApi, Request, anthropic_turn, gemini_turn, openai_chat_turn, openai_responses_turn,
    response,
};
use crate::common::peers::{inherited_path, peer, skip};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::plan::{DoorScheme, EnvVar, LaunchPlan};
use kcap_mcp_registry::clients::root::{CredentialFile, Credentials};
use kcap_mcp_registry::launch::{
    self, AcpEvent, AcpSession, Options, Reviewer, TerminalEvent, TerminalSession,
};
use kcap_mcp_registry::{LaunchContext, Policy, ResultDelivery};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        claude_completes_a_turn_through_the_door_to_an_https_model_api,
        claude_next_completes_a_turn_through_the_door_to_an_https_model_api,
        qwen_completes_a_turn_through_the_door_to_an_https_model_api,
        gemini_completes_a_turn_through_the_door_to_an_https_model_api,
        opencode_completes_a_turn_through_the_door_to_an_https_model_api,
        copilot_completes_a_turn_through_the_door_to_an_https_model_api,
        codex_completes_a_turn_through_the_door_to_an_https_model_api,
        codex_next_completes_a_turn_through_the_door_to_an_https_model_api,
    ]
}

/// How long one launch may take, from its start to the end of its first turn (or, in the
/// bite, to the door's refusal).
const BOUND: Duration = Duration::from_secs(120);

/// The text of the stand-in model's answer: the client shows it once the stream is in.
const MARKER: &str = "kcap-door-tls-turn-complete";

/// The launch's agent id, a secret of the result channel's: in no command line.
const AGENT_ID: &str = "kcap-agent-door-https-5e1f0c";

/// The path of the result channel's capability URL, its secret: in no command line.
const CAPABILITY: &str = "capability-secret-door-https-9c1d";

/// One client's model API through the door: the variable naming its binary, its model, its
/// credentials for the stand-in's URL (the daemon's key `key`), the header the key goes in
/// (after `prefix`), and the stand-in's answer.
struct Spec {
    client: Client,
    bin_var: &'static str,
    model: Option<&'static str>,
    key: &'static str,
    credentials: fn(&str, &str) -> Vec<EnvVar>,
    /// The credential files for the daemon's key (Codex CLI's `auth.json`), if any.
    files: fn(&str) -> Vec<CredentialFile>,
    header: &'static str,
    prefix: &'static str,
    answer: fn(&Request) -> Vec<u8>,
    /// The variable naming the client's package cache, read and executed in place (Copilot
    /// CLI's `KCAP_COPILOT_CACHE`), if it has one.
    cache_var: Option<&'static str>,
}

/// Claude Code in its terminal (Anthropic Messages API, `x-api-key`).
fn claude_completes_a_turn_through_the_door_to_an_https_model_api() {
    claude("KCAP_CLAUDE_BIN");
}

/// The same on the newest pinned Claude Code.
fn claude_next_completes_a_turn_through_the_door_to_an_https_model_api() {
    claude("KCAP_CLAUDE_NEXT_BIN");
}

/// Claude Code, the one named by `bin_var`.
fn claude(bin_var: &'static str) {
    check(&Spec {
        client: Client::Claude,
        bin_var,
        model: None,
        key: "sk-ant-daemon-key-door-https-0123456789",
        credentials: |url, key| {
            vec![
                EnvVar::new("ANTHROPIC_API_KEY", key),
                EnvVar::new("ANTHROPIC_BASE_URL", url),
                EnvVar::new("IS_SANDBOX", "1"),
            ]
        },
        header: "x-api-key",
        prefix: "",
        answer: |_| streamed(&anthropic_turn("claude-stand-in", None)),
        files: |_| Vec::new(),
        cache_var: None,
    });
}

/// Qwen Code over ACP (its OpenAI-compatible provider, `authorization: Bearer`).
fn qwen_completes_a_turn_through_the_door_to_an_https_model_api() {
    check(&Spec {
        client: Client::Qwen,
        bin_var: "KCAP_QWEN_BIN",
        model: Some("gpt-4o"),
        key: "sk-daemon-key-door-https-qwen-0123",
        credentials: |url, key| {
            vec![
                EnvVar::new("OPENAI_API_KEY", key),
                EnvVar::new("OPENAI_BASE_URL", format!("{url}/v1")),
            ]
        },
        header: "authorization",
        prefix: "Bearer ",
        answer: openai_chat,
        files: |_| Vec::new(),
        cache_var: None,
    });
}

/// Gemini CLI over ACP (Gemini API `streamGenerateContent`, `x-goog-api-key`).
fn gemini_completes_a_turn_through_the_door_to_an_https_model_api() {
    check(&Spec {
        client: Client::Gemini,
        bin_var: "KCAP_GEMINI_BIN",
        model: Some("gemini-2.5-flash"),
        key: "daemon-gemini-key-door-https-0123456789",
        credentials: |url, key| {
            vec![
                EnvVar::new("GEMINI_API_KEY", key),
                EnvVar::new("GOOGLE_GEMINI_BASE_URL", url),
            ]
        },
        header: "x-goog-api-key",
        prefix: "",
        answer: |_| streamed(&gemini_turn("gemini-2.5-flash", None)),
        files: |_| Vec::new(),
        cache_var: None,
    });
}

/// OpenCode over ACP (its Anthropic provider, `x-api-key`).
fn opencode_completes_a_turn_through_the_door_to_an_https_model_api() {
    const MODEL: &str = "anthropic/claude-haiku-4-5";
    check(&Spec {
        client: Client::OpenCode,
        bin_var: "KCAP_OPENCODE_BIN",
        model: Some(MODEL),
        key: "sk-ant-daemon-key-door-https-opencode-0123",
        credentials: |url, key| {
            vec![
                EnvVar::new("ANTHROPIC_API_KEY", key),
                EnvVar::new("ANTHROPIC_BASE_URL", format!("{url}/v1")),
            ]
        },
        header: "x-api-key",
        prefix: "",
        answer: |_| streamed(&anthropic_turn(MODEL, None)),
        files: |_| Vec::new(),
        cache_var: None,
    });
}

/// Copilot CLI over ACP, offline (its OpenAI-compatible provider, `authorization: Bearer`).
fn copilot_completes_a_turn_through_the_door_to_an_https_model_api() {
    check(&Spec {
        client: Client::Copilot,
        bin_var: "KCAP_COPILOT_BIN",
        model: None,
        key: "sk-daemon-key-door-https-copilot-0123",
        credentials: |url, key| {
            vec![
                EnvVar::new("COPILOT_OFFLINE", "true"),
                EnvVar::new("COPILOT_PROVIDER_BASE_URL", format!("{url}/v1")),
                EnvVar::new("COPILOT_PROVIDER_API_KEY", key),
                EnvVar::new("COPILOT_MODEL", "gpt-4o"),
            ]
        },
        header: "authorization",
        prefix: "Bearer ",
        answer: openai_chat,
        files: |_| Vec::new(),
        cache_var: Some("KCAP_COPILOT_CACHE"),
    });
}

/// Codex CLI in its terminal (the Responses API, `authorization: Bearer`; its key only in
/// `auth.json`, its base URL in `OPENAI_BASE_URL`).
fn codex_completes_a_turn_through_the_door_to_an_https_model_api() {
    codex("KCAP_CODEX_BIN");
}

/// The same on the newest pinned Codex CLI.
fn codex_next_completes_a_turn_through_the_door_to_an_https_model_api() {
    codex("KCAP_CODEX_NEXT_BIN");
}

/// Codex CLI, the one named by `bin_var`.
fn codex(bin_var: &'static str) {
    check(&Spec {
        client: Client::Codex,
        bin_var,
        model: Some("gpt-5"),
        key: "sk-daemon-key-door-https-codex-0123456",
        credentials: |url, _| vec![EnvVar::new("OPENAI_BASE_URL", format!("{url}/v1"))],
        header: "authorization",
        prefix: "Bearer ",
        answer: |req| {
            if !req.header("upgrade").is_empty() {
                return b"HTTP/1.1 426 Upgrade Required\r\ncontent-length: 0\r\n\r\n".to_vec();
            }
            if !(req.method == "POST" && req.path.ends_with("/responses")) {
                return response("404 Not Found", "application/json", b"{}");
            }
            streamed(&openai_responses_turn(None))
        },
        files: |key| {
            vec![CredentialFile {
                name: "auth.json".into(),
                contents: format!(r#"{{"OPENAI_API_KEY":"{key}"}}"#),
            }]
        },
        cache_var: None,
    });
}

/// A Chat Completions turn of the test's text, to the completions path only.
fn openai_chat(req: &Request) -> Vec<u8> {
    if !req.path.ends_with("/chat/completions") {
        return response("404 Not Found", "application/json", b"{}");
    }
    streamed(&openai_chat_turn("gpt-4o", None))
}

/// A `200` server-sent event stream of `turn` (a stand-in turn whose text is `done`), its
/// text [`MARKER`] instead.
fn streamed(turn: &[u8]) -> Vec<u8> {
    let text = String::from_utf8(turn.to_vec()).unwrap();
    assert!(text.contains("\"done\""), "{text}");
    let text = text.replace("\"done\"", &format!("\"{MARKER}\""));
    response("200 OK", "text/event-stream", text.as_bytes())
}

/// The test of one client: with the door's root, then without (module docs).
fn check(spec: &Spec) {
    let Some(bin) = peer(spec.bin_var) else {
        return;
    };
    if let Some(missing) = kcap_mcp_registry::launch::door::missing() {
        skip(format!("this kernel lacks {missing}"));
        return;
    }
    let client = spec.client;
    let run = Run::new(spec, &bin, true);
    assert!(
        !run.requests.is_empty(),
        "{client}: no model request came through the door; {}",
        run.tail
    );
    for r in &run.requests {
        let prompt = r.body.contains("Review the change.");
        eprintln!(
            "{client}: request {} {} (the prompt in it: {prompt})",
            r.method, r.path
        );
    }
    crate::common::door::assert_door_headers(
        &run.requests,
        spec.header,
        &format!("{}{}", spec.prefix, spec.key),
    );
    for r in &run.requests {
        assert_eq!(r.header("host"), [run.upstream.as_str()], "{client}: {r:?}");
    }
    assert!(
        run.requests
            .iter()
            .any(|r| r.body.contains("Review the change.")),
        "{client}: no request carried the prompt"
    );
    assert!(
        run.turn.as_deref().is_some_and(|t| t.contains(MARKER)),
        "{client}: the streamed answer did not complete the turn: {:?}; {}",
        run.turn,
        run.tail
    );
    assert!(
        run.turn
            .as_deref()
            .is_some_and(|t| t.ends_with("stop reason: end_turn")),
        "{client}: {:?}",
        run.turn
    );
    // The client holds the per-launch token, never the key.
    assert!(run.token.starts_with("kcap-door-"), "{}", run.token);
    assert!(!run.client_side.contains(spec.key), "{}", run.client_side);
    assert!(
        !run.environ.contains(spec.key),
        "{client}: its environment holds the key"
    );
    assert!(
        run.leaks.is_empty(),
        "{client}: launch-directory files hold the key: {:?}",
        run.leaks
    );
    assert!(
        run.environ.contains(&run.token) || !run.holding_token.is_empty(),
        "{client}: neither its environment nor a launch file holds the token"
    );
    // Issue 31, item 3: no secret in any reviewer process's command line, which every local
    // user reads (`/proc/<pid>/cmdline`): the client and every process it started (its MCP
    // servers among them), read while they run.
    assert!(
        run.cmdlines.iter().any(|(_, c)| c.contains("kcap/kcap")),
        "{client}: no MCP server among the reviewer's processes: {:?}",
        run.cmdlines
    );
    let mut secrets = vec![
        spec.key.to_owned(),
        run.token.clone(),
        AGENT_ID.to_owned(),
        CAPABILITY.to_owned(),
    ];
    secrets.extend(run.password.clone());
    for (pid, cmdline) in &run.cmdlines {
        eprintln!(
            "{client}: reviewer process {pid}: {} bytes of command line",
            cmdline.len()
        );
        for secret in &secrets {
            assert!(
                !cmdline.contains(secret.as_str()),
                "{client}: process {pid}'s command line holds a secret ({secret}): {cmdline}"
            );
        }
    }

    // The budget of keyed requests: every request the stand-in got was one the door counted
    // and keyed, far from the default budget; none was refused.
    assert_eq!(
        run.keyed,
        (run.requests.len() as u64, 0),
        "{client}: the door's count of keyed requests"
    );
    assert!(run.keyed.0 * 100 <= kcap_mcp_registry::launch::door::KEYED_REQUESTS);
    // In the same launch, its MCP server reached the stand-in kcap server through the door
    // (and nothing else: not the model API's port on the host, another address, a name
    // server, a host outside), and the door's log names the connection to the host outside.
    assert_eq!(
        run.marks,
        ["direct-no", "dns-no", "kcap-yes", "other-no", "outside-no"]
            .map(String::from)
            .into(),
        "{client}"
    );
    assert!(
        run.log
            .iter()
            .any(|l| l == crate::common::door::OUTSIDE_REFUSED),
        "{client}: {:?}",
        run.log
    );
    assert!(
        run.kcap_reached >= 1,
        "{client}: the kcap server got no connection"
    );

    // The bite: the same launch without the test's CA. The door refuses the certificate.
    let run = Run::new(spec, &bin, false);
    assert!(
        run.log
            .iter()
            .any(|l| l.contains("TLS failed") && l.ends_with("answered 502")),
        "{client}: {:?}; {}",
        run.log,
        run.tail
    );
    assert!(
        run.requests.is_empty(),
        "{client}: without the door's root a request reached the stand-in: {:?}",
        run.requests
    );
    assert!(
        !run.turn.as_deref().is_some_and(|t| t.contains(MARKER)),
        "{client}"
    );
}

/// What one launch showed.
struct Run {
    /// Every request the stand-in model API got.
    requests: Vec<Request>,
    /// The requests the door passed on with the daemon's key, and those it refused past the
    /// launch's budget (`Reviewer::door_keyed_requests`).
    keyed: (u64, u64),
    /// What the MCP servers' probe got (`common::door::write_probe`): the stand-in kcap
    /// server through the door, the model API's host port, another address, a name server.
    marks: std::collections::BTreeSet<String>,
    /// Connections the stand-in kcap server got.
    kcap_reached: usize,
    /// The door's log when the launch ended.
    log: Vec<String>,
    /// The turn's text and stop reason as the client keeps them: Claude Code's transcript
    /// ([`transcript_turn`]), or over ACP the agent's message and the prompt's stop reason;
    /// `None` when the turn did not end.
    turn: Option<String>,
    /// The model API's `host:port`, as the door names it to the upstream.
    upstream: String,
    /// The per-launch token the plan gave the client.
    token: String,
    /// The plan as JSON without its door: what reaches the client.
    client_side: String,
    /// The client process's environment (`/proc/<pid>/environ`, NUL turned to newline).
    environ: String,
    /// Launch-directory files that hold the key, and those that hold the token.
    leaks: Vec<PathBuf>,
    holding_token: Vec<PathBuf>,
    /// The last output or stderr of the client, for failures.
    tail: String,
    /// The command line (`/proc/<pid>/cmdline`, NUL turned to space) of the client and of
    /// every process it started, read once its turn ended, before it stopped.
    cmdlines: Vec<(u32, String)>,
    /// OpenCode's per-launch server password, from the plan, if any.
    password: Option<String>,
}

impl Run {
    /// Launches `spec`'s client through the door to a TLS stand-in, the test's CA given
    /// to the door when `root`, until its first turn ended (or, without the root, the door
    /// answered 502) or [`BOUND`] passed.
    fn new(spec: &Spec, bin: &Path, root: bool) -> Run {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        let ca = TestCa::new("kcap door https test CA");
        let (cert, key) = ca.leaf(&["127.0.0.1"]);
        let api = ModelApi::answering_tls(tls_server(cert, key), spec.answer);
        let kcap = world(&dir, &api.url);
        let kcap_server = KcapServer::start();
        let upstream = api.url.trim_start_matches("https://").to_owned();
        let launch_dir = dir.join("launch");
        let client = spec.client;
        let cache = spec.cache_var.map(|v| {
            PathBuf::from(
                std::env::var_os(v).unwrap_or_else(|| panic!("{v} with {}", spec.bin_var)),
            )
        });
        let mut plan = plan(
            spec,
            &dir,
            &api.url,
            &kcap_server.url,
            &kcap,
            cache.as_deref(),
        );
        let door = plan.door.as_ref().expect("a plan behind the door");
        assert!(
            door.endpoints
                .iter()
                .any(|e| e.upstream == upstream && e.scheme == DoorScheme::Https),
            "{client}: {door:?}"
        );
        let mut shown = plan.clone();
        shown.door = None;
        let client_side = shown.to_json();
        let token = token(&client_side);
        plan.env.extend([
            EnvVar::new("HTTP_PROXY", "http://127.0.0.1:9"),
            EnvVar::new("HTTPS_PROXY", "http://127.0.0.1:9"),
            EnvVar::new("NO_PROXY", "127.0.0.1,localhost"),
        ]);
        let options = options(&dir, &kcap, cache.as_deref(), root.then(|| ca.der()));
        let daemon_env = |name: &str| (name == "PATH").then(inherited_path);
        let reviewer = launch::launch_with_parent_env(&plan, bin, &options, &daemon_env)
            .unwrap_or_else(|e| panic!("{client}: {}", kcap_mcp_registry::text::error_chain(&e)));
        let started = Instant::now();
        // The launch directory goes with the client: read while it runs.
        let scan = || {
            (
                files_holding(&launch_dir, spec.key),
                files_holding(&launch_dir, &token),
            )
        };
        // The door counts a keyed request as it passes it on, the stand-in once it is in: a
        // client that sends one more as its turn ends is between the two for a moment (Qwen
        // Code under CI's load: the door's count read 1, the stand-in's 2), and one passed on
        // just before the stop lands after it. The count and the stand-in's requests are
        // taken together, once they agree, or as they are after 5 s (without the root at
        // once: the door counts requests the upstream's certificate then stopped).
        let settle = |keyed: &dyn Fn() -> (u64, u64)| {
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let (count, requests) = (keyed(), api.requests());
                if count.0 == requests.len() as u64 || !root || Instant::now() >= deadline {
                    return (count, requests);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        let password = plan
            .env_value("OPENCODE_SERVER_PASSWORD")
            .map(str::to_owned);
        let (turn, (log, (keyed, requests)), tail, environ, (leaks, holding_token), cmdlines) =
            match reviewer {
                Reviewer::Acp(mut session) => {
                    let environ = environ(session.pid());
                    let turn = acp_turn(&mut session, client, root, started);
                    let counted = settle(&|| session.door_keyed_requests());
                    let log = (session.door_log(), counted);
                    let tail = session.stderr_tail();
                    let files = scan();
                    let cmdlines = tree_cmdlines(session.pid());
                    session.stop().unwrap();
                    (turn, log, tail, environ, files, cmdlines)
                }
                Reviewer::Terminal(mut session) => {
                    let environ = environ(session.pid());
                    let (turn, tail) =
                        terminal_turn(&mut session, client, root, started, &launch_dir);
                    let counted = settle(&|| session.door_keyed_requests());
                    let log = (session.door_log(), counted);
                    let files = scan();
                    let cmdlines = tree_cmdlines(session.pid());
                    session.stop().unwrap();
                    (turn, log, tail, environ, files, cmdlines)
                }
            };
        eprintln!(
            "{client} (door root {root}): {:.1} s, {} requests ({} with the key by the door's \
             count), log {log:?}; token in the environment {}, in {holding_token:?}",
            started.elapsed().as_secs_f64(),
            requests.len(),
            keyed.0,
            environ.contains(&token),
        );
        Run {
            requests,
            keyed,
            marks: marks(&dir.join("records/door")),
            kcap_reached: kcap_server.reached(),
            log,
            turn,
            upstream,
            leaks,
            holding_token,
            token,
            client_side,
            environ,
            tail,
            cmdlines,
            password,
        }
    }
}

/// The worktree, the records and the kcap binary (the recorder, listing a tool of each
/// injected server) under `dir`; the kcap binary's path.
fn world(dir: &Path, api_url: &str) -> PathBuf {
    for d in ["wt", "kcap", "records"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::write(dir.join("wt/README.md"), "the change under review\n").unwrap();
    let recorder = dir.join("kcap/kcap-recorder");
    crate::common::stand_in::write_executable(
        &recorder,
        crate::common::records::recorder_source_with_tools(
            &dir.join("records"),
            &["submit_review_result", "get_pr_summary"],
        ),
    );
    let kcap = dir.join("kcap/kcap");
    write_probe(
        &kcap,
        &dir.join("records/door"),
        api_url,
        &recorder.display().to_string(),
    );
    kcap
}

/// The executor's options: the kcap binary executable and the records writable in the
/// sandbox, the package `cache` (if any) executable in place, and `root` (DER) added to the
/// roots the door's TLS upstreams may chain to, when given.
fn options(dir: &Path, kcap: &Path, cache: Option<&Path>, root: Option<Vec<u8>>) -> Options {
    let mut options = crate::common::carry::reach(
        Options::default()
            .with_handshake_timeout(BOUND)
            .with_dialog_quiet(Duration::from_secs(5))
            .with_die_with_parent(true),
        // The directory: the probe (`kcap`) and the recorder it runs.
        &[kcap.parent().expect("the kcap binary's directory")],
        &[&dir.join("records")],
    );
    options.terminal_size = (48, 160);
    if let Some(cache) = cache {
        options = options.with_sandbox_read_exec(cache);
    }
    if let Some(root) = root {
        options = options.with_door_root(root);
    }
    options
}

/// `spec`'s reviewer plan behind the door (`Client::plan`, lenient policy): the recorder
/// `kcap` as the kcap binary, the worktree and launch directory under `dir`, the prompt
/// `Review the change.`, the credentials of `spec` for the stand-in at `api_url`.
fn plan(
    spec: &Spec,
    dir: &Path,
    api_url: &str,
    kcap_url: &str,
    kcap: &Path,
    cache: Option<&Path>,
) -> LaunchPlan {
    let s = |p: &Path| p.display().to_string();
    let launch_dir = dir.join("launch");
    let client = spec.client;
    let ctx = LaunchContext {
        agent_id: AGENT_ID.into(),
        // The result channel on the stand-in kcap server too: each MCP server's probe
        // reaches its own URL through the door.
        result_delivery: ResultDelivery::from_capability_url(Some(format!(
            "{kcap_url}/{CAPABILITY}"
        ))),
        server_url: Some(kcap_url.into()),
        kcap_bin: Some(s(kcap)),
        mcp_allowlist: Some(vec![Some("kcap-review".into())]),
        model: spec.model.map(str::to_owned),
        prompt: Some("Review the change.".into()),
        worktree: Some(s(&dir.join("wt"))),
        launch_dir: Some(s(&launch_dir)),
        credentials: Credentials {
            env: (spec.credentials)(api_url, spec.key),
            files: (spec.files)(spec.key),
        },
        cache_dir: cache.map(s),
        door: true,
        ..LaunchContext::default()
    };
    client
        .plan(&ctx, &PlanInputs::new(Policy::Lenient))
        .unwrap_or_else(|e| panic!("{client}: {e}"))
        .plan
}

/// Whether the door answered `502` (its log says so).
fn refused(log: &[String]) -> bool {
    log.iter().any(|l| l.ends_with("answered 502"))
}

/// Prompts over ACP and waits for the turn to end: the agent's message and the stop
/// reason; `None` when [`BOUND`] passed or, without the door's root, the door refused.
fn acp_turn(
    session: &mut AcpSession,
    client: Client,
    root: bool,
    started: Instant,
) -> Option<String> {
    let id = session
        .prompt("Review the change.")
        .unwrap_or_else(|e| panic!("{client}: session/prompt: {e}"));
    let mut said = String::new();
    loop {
        if started.elapsed() > BOUND || (!root && refused(&session.door_log())) {
            return None;
        }
        match session.next_event(Duration::from_millis(200)) {
            Ok(Some(AcpEvent::Update(params))) => {
                let update = &params["update"];
                if update["sessionUpdate"] == "agent_message_chunk" {
                    said.push_str(update["content"]["text"].as_str().unwrap_or(""));
                }
            }
            Ok(Some(AcpEvent::PromptDone {
                id: done,
                stop_reason,
            })) if done == id => {
                return Some(format!("{said}\nstop reason: {stop_reason}"));
            }
            Ok(Some(AcpEvent::Exited(status))) => {
                panic!("{client} exited: {status:?}\n{}", session.stderr_tail())
            }
            Ok(_) => {}
            Err(e) => panic!("{client}: {e}\n{}", session.stderr_tail()),
        }
    }
}

/// Waits for the turn of the client in its terminal (the plan types the prompt) to end in
/// its transcript ([`transcript_turn`]): the turn (`None` as in [`acp_turn`]) and the
/// terminal's last bytes.
fn terminal_turn(
    session: &mut TerminalSession,
    client: Client,
    root: bool,
    started: Instant,
    launch_dir: &Path,
) -> (Option<String>, String) {
    let mut screen = Vec::new();
    let mut looked = Instant::now();
    let turn = loop {
        if looked.elapsed() > Duration::from_millis(200) {
            looked = Instant::now();
            let turn = match client {
                Client::Codex => rollout_turn(launch_dir),
                _ => transcript_turn(launch_dir),
            };
            if let Some(turn) = turn {
                break Some(turn);
            }
        }
        if started.elapsed() > BOUND || (!root && refused(&session.door_log())) {
            break None;
        }
        match session.next_event(Duration::from_millis(200)) {
            Ok(Some(TerminalEvent::Output(bytes))) => screen.extend(bytes),
            Ok(Some(TerminalEvent::Exited(status))) => {
                let shown = String::from_utf8_lossy(&screen);
                panic!("{client} exited: {status:?}\n{shown}")
            }
            Ok(_) => {}
            Err(e) => panic!("{client}: {e}"),
        }
    };
    let tail = String::from_utf8_lossy(&screen[screen.len().saturating_sub(3000)..]).into_owned();
    (turn, tail)
}

/// Claude Code's first turn as its session transcript holds it: the text and stop reason of
/// an assistant message holding [`MARKER`]. The transcript is
/// `$HOME/.claude/projects/<worktree as a slug>/<session id>.jsonl` (`HOME` is the launch
/// directory's `home`), one JSON object a line, an answer of the model's as `{"type":
/// "assistant", "message": {"content": [{"type": "text", "text"}], "stop_reason"}}` written
/// once its stream ended (measured on Claude Code 2.1.197). Its terminal is no witness: it
/// redraws only the cells that changed, so the text can reach it cut by cursor moves.
fn transcript_turn(launch_dir: &Path) -> Option<String> {
    let projects = launch_dir.join("home/.claude/projects");
    let lines: Vec<String> = std::fs::read_dir(projects)
        .ok()?
        .flatten()
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flatten()
        .flatten()
        .filter(|f| f.path().extension().is_some_and(|e| e == "jsonl"))
        .filter_map(|f| std::fs::read_to_string(f.path()).ok())
        .flat_map(|t| t.lines().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    lines.iter().find_map(|line| {
        let entry: serde_json::Value = serde_json::from_str(line).ok()?;
        let message = &entry["message"];
        let text = (message["content"].as_array()?.iter())
            .find_map(|c| c["text"].as_str().filter(|t| t.contains(MARKER)))?;
        (entry["type"] == "assistant").then(|| {
            let stop = message["stop_reason"].as_str().unwrap_or("none");
            format!("{text}\nstop reason: {stop}")
        })
    })
}

/// Codex CLI's first turn as its session rollout holds it: the text of an assistant message
/// holding [`MARKER`] once a later line says the turn is complete, with the stop reason
/// `end_turn` (the ACP clients' word for it). The rollout is
/// `$CODEX_HOME/sessions/<yyyy>/<mm>/<dd>/rollout-….jsonl` under the launch directory's
/// `home`, one JSON object a line: `{"type": "response_item", "payload": {"type":
/// "message", "role": "assistant", "content": [{"type": "output_text", "text"}]}}`, then
/// `{"type": "event_msg", "payload": {"type": "task_complete"}}` (measured on Codex CLI
/// 0.169.0).
fn rollout_turn(launch_dir: &Path) -> Option<String> {
    fn rollouts(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                rollouts(&path, out);
            } else if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("rollout-"))
            {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    rollouts(&launch_dir.join("home"), &mut files);
    let lines: Vec<serde_json::Value> = files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect::<Vec<_>>()
        })
        .collect();
    let at = lines.iter().position(|entry| {
        let payload = &entry["payload"];
        entry["type"] == "response_item"
            && payload["role"] == "assistant"
            && payload.to_string().contains(MARKER)
    })?;
    lines[at..]
        .iter()
        .any(|e| e["type"] == "event_msg" && e["payload"]["type"] == "task_complete")
        .then(|| format!("{MARKER}\nstop reason: end_turn"))
}

/// The per-launch token in the plan the client gets (`kcap-door-…`).
fn token(client_side: &str) -> String {
    let at = client_side
        .find("kcap-door-")
        .unwrap_or_else(|| panic!("no token in the plan: {client_side}"));
    client_side[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect()
}

/// The environment of process `pid` (`/proc/<pid>/environ`), one variable a line.
/// The command lines of `root` and of every process descended from it (by each process's
/// parent in `/proc/<pid>/stat`; the reviewer has no PID namespace of its own), as another
/// local user reads them: `(pid, arguments joined by spaces)`.
fn tree_cmdlines(root: u32) -> Vec<(u32, String)> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid …`: the name may hold spaces and parentheses.
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?;
            Some((pid, ppid.parse().ok()?))
        })
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    tree.into_iter()
        .filter_map(|pid| {
            let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&bytes).replace('\0', " ")))
        })
        .collect()
}

fn environ(pid: u32) -> String {
    let bytes = std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/environ: {e}"));
    String::from_utf8_lossy(&bytes).replace('\0', "\n")
}
