//! Issue 35 item 1, on the real clients: an injected MCP server that fails before the first
//! turn stops the launch. The kcap binary of the plan is a stand-in MCP server that lists the
//! registry's tools at once when started as the result channel, and exits at once as
//! `kcap-review`; a stand-in model API (`common::model_api`, 127.0.0.1) records each request.
//! An ACP client that answers `session/new` as usual when a server failed has the plan's
//! `servers_ready`, and the executor (`launch::launch_with_parent_env`, as a daemon calls it)
//! returns `ExecError::ServersNotReady` naming the server before any request reaches the
//! stand-in. The bite: without `servers_ready` the prompt goes out, and its first request
//! lacks the failed server's tool. Offline: dummy keys, a dead proxy for the rest.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::model_api::{Request, anthropic_turn, gemini_turn, response};
use crate::common::peers::{inherited_path, peer};
use crate::first_turn::{BOUND, Bench};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::clients::root::Credentials;
use kcap_mcp_registry::launch::{self, ExecError, Options, Reviewer};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        gemini_a_server_that_exits_stops_the_launch,
        qwen_a_server_that_exits_stops_the_launch,
        copilot_a_server_that_exits_stops_the_launch,
        opencode_a_server_that_exits_stops_the_launch,
    ]
}

/// The stand-in server: `kcap-review` (started as `kcap mcp review`) exits at once, with a
/// line on its standard error; the others list their tools at once.
fn exiting_review_server() -> String {
    crate::common::records::listing_server_source(Duration::ZERO).replacen(
        '\n',
        "\nif (process.argv[process.argv.length - 1] === \"review\") { \
         process.stderr.write(\"review: gone\\n\"); process.exit(3); }\n",
        1,
    )
}

/// A world whose `kcap-review` exits at once ([`exiting_review_server`]), with Copilot
/// CLI's package cache when it is installed.
fn world(answer: fn(&Request) -> Vec<u8>) -> Bench {
    let mut bench = Bench::serving(answer, exiting_review_server());
    bench.cache = std::env::var_os("KCAP_COPILOT_CACHE").map(std::path::PathBuf::from);
    bench
}

/// The wire name of `kcap-review` in `plan`.
fn review_wire_name(plan: &LaunchPlan) -> String {
    plan.servers
        .iter()
        .find(|s| s.id == "kcap-review")
        .expect("kcap-review injected")
        .wire_name
        .clone()
}

/// Carries `plan` out with `bin` up to its first prompt: the executor's answer, and how long
/// it took.
fn open(bench: &Bench, plan: &LaunchPlan, bin: &Path) -> (Result<Reviewer, ExecError>, Duration) {
    let mut options = crate::common::carry::reach(
        Options::default()
            .with_handshake_timeout(BOUND)
            .with_die_with_parent(true),
        &[&bench.kcap],
        &[],
    );
    if let Some(cache) = &bench.cache {
        options = options.with_sandbox_read_exec(cache);
    }
    let daemon_env = |name: &str| (name == "PATH").then(inherited_path);
    let started = Instant::now();
    let opened = launch::launch_with_parent_env(plan, bin, &options, &daemon_env);
    (opened, started.elapsed())
}

/// Asserts that the plan of `make` stops as `ExecError::ServersNotReady` with a failed line
/// naming `kcap-review`'s wire name, before any model request; then the bite: the plan with
/// `without` applied (on a fresh world) sends its prompt, and the first request offers the
/// result channel's tool but not `kcap-review`'s.
fn judge(
    answer: fn(&Request) -> Vec<u8>,
    make: impl Fn(&Bench) -> LaunchPlan,
    bin: &Path,
    without: impl FnOnce(&mut LaunchPlan),
) {
    let bench = world(answer);
    let plan = make(&bench);
    let client = plan.client;
    let wire = review_wire_name(&plan);
    let (opened, took) = open(&bench, &plan, bin);
    match opened {
        Err(ExecError::ServersNotReady {
            failed: Some(line), ..
        }) => {
            assert!(
                line.contains(&wire),
                "{client}: the line names {wire}: {line}"
            );
            eprintln!(
                "{client}: stopped after {:.1} s: {line}",
                took.as_secs_f64()
            );
        }
        Err(e) => panic!(
            "{client}: not ServersNotReady naming {wire}: {}",
            kcap_mcp_registry::text::error_chain(&e)
        ),
        Ok(Reviewer::Acp(session)) => panic!(
            "{client}: opened with {wire} gone; stderr:\n{}",
            session.stderr_tail()
        ),
        Ok(Reviewer::Terminal(_)) => panic!("{client}: an ACP client"),
    }
    assert_eq!(
        bench.api.requests().len(),
        0,
        "{client}: a request reached the model API before the launch stopped"
    );
    let bench = world(answer);
    let mut plan = make(&bench);
    without(&mut plan);
    let first = bench.first_turn(&plan, bin);
    assert!(
        first.contains("submit_review_result") && !first.contains("get_pr_summary"),
        "{client}: the bite: without the check the first turn offers the result channel's \
         tool only; it begins: {}",
        first.chars().take(300).collect::<String>()
    );
}

/// Gemini CLI 0.61.0 answers `session/new` as usual when a server exits at once; its debug
/// log says `[MCP error] Error during discovery for MCP server '<wire>'` (`gemini::ready`).
fn gemini_a_server_that_exits_stops_the_launch() {
    let Some(bin) = peer("KCAP_GEMINI_BIN") else {
        return;
    };
    const MODEL: &str = "gemini-2.5-flash";
    judge(
        |_| response("200 OK", "text/event-stream", &gemini_turn(MODEL, None)),
        |bench| {
            bench.plan(
                Client::Gemini,
                Some(MODEL),
                Credentials {
                    env: vec![
                        EnvVar::new("GEMINI_API_KEY", "dummy-gemini-key-0123456789"),
                        EnvVar::new("GOOGLE_GEMINI_BASE_URL", &bench.api.url),
                    ],
                    files: Vec::new(),
                },
            )
        },
        &bin,
        |plan| plan.servers_ready = None,
    );
}

/// Qwen Code 0.24.4 answers `session/new` as usual when a server exits at once; its debug
/// log says `[McpPool] Failed to spawn pool entry for '<wire>'` (`qwen::ready`).
fn qwen_a_server_that_exits_stops_the_launch() {
    let Some(bin) = peer("KCAP_QWEN_BIN") else {
        return;
    };
    judge(
        crate::first_turn::openai_chat,
        |bench| {
            bench.plan(
                Client::Qwen,
                Some("gpt-4o"),
                Credentials {
                    env: vec![
                        EnvVar::new("OPENAI_API_KEY", "sk-dummy-0123456789abcdefghij"),
                        EnvVar::new("OPENAI_BASE_URL", format!("{}/v1", bench.api.url)),
                    ],
                    files: Vec::new(),
                },
            )
        },
        &bin,
        |plan| plan.servers_ready = None,
    );
}

/// Copilot CLI 1.0.102 starts its servers after `session/new` and drops one that exits at
/// once; its log says `MCP server connection failed {"server_name":"<name>"` (`copilot::ready`).
fn copilot_a_server_that_exits_stops_the_launch() {
    let Some(bin) = peer("KCAP_COPILOT_BIN") else {
        return;
    };
    judge(
        crate::first_turn::openai_chat,
        |bench| {
            bench.plan(
                Client::Copilot,
                None,
                Credentials {
                    env: vec![
                        EnvVar::new("COPILOT_OFFLINE", "true"),
                        EnvVar::new("COPILOT_PROVIDER_BASE_URL", format!("{}/v1", bench.api.url)),
                        EnvVar::new("COPILOT_MODEL", "gpt-4o"),
                    ],
                    files: Vec::new(),
                },
            )
        },
        &bin,
        |plan| plan.servers_ready = None,
    );
}

/// OpenCode 1.18.33 answers `session/new` as usual when a server exits at once; its log says
/// `message="server unavailable" key=<name>` (`opencode::ready`).
fn opencode_a_server_that_exits_stops_the_launch() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    const MODEL: &str = "anthropic/claude-haiku-4-5";
    judge(
        |_| response("200 OK", "text/event-stream", &anthropic_turn(MODEL, None)),
        |bench| {
            bench.plan(
                Client::OpenCode,
                Some(MODEL),
                Credentials {
                    env: vec![
                        EnvVar::new("ANTHROPIC_API_KEY", "sk-ant-dummy-0123456789abcdefghij"),
                        EnvVar::new("ANTHROPIC_BASE_URL", format!("{}/v1", bench.api.url)),
                    ],
                    files: Vec::new(),
                },
            )
        },
        &bin,
        |plan| plan.servers_ready = None,
    );
}
