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

use crate::common::peers::{inherited_path, peer};
use crate::first_turn::{BOUND, Bench};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::LaunchPlan;
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

/// Asserts that the ACP client `client`'s plan (its binary in `var`) stops as
/// `ExecError::ServersNotReady` with a failed line naming `kcap-review`'s wire name, before
/// any model request; then the bite: the plan without `servers_ready` (on a fresh world)
/// sends its prompt, and the first request offers the result channel's tool but not
/// `kcap-review`'s.
fn judge(client: Client, var: &'static str) {
    let Some(bin) = peer(var) else {
        return;
    };
    let bin = bin.as_path();
    let bench = Bench::for_client(client, exiting_review_server());
    let plan = bench.acp_plan(client);
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
    let bench = Bench::for_client(client, exiting_review_server());
    let mut plan = bench.acp_plan(client);
    plan.servers_ready = None;
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
    judge(Client::Gemini, "KCAP_GEMINI_BIN");
}

/// Qwen Code 0.24.4 answers `session/new` as usual when a server exits at once; its debug
/// log says `[McpPool] Failed to spawn pool entry for '<wire>'` (`qwen::ready`).
fn qwen_a_server_that_exits_stops_the_launch() {
    judge(Client::Qwen, "KCAP_QWEN_BIN");
}

/// Copilot CLI 1.0.102 starts its servers after `session/new` and drops one that exits at
/// once; its log says `MCP server connection failed {"server_name":"<name>"` (`copilot::ready`).
fn copilot_a_server_that_exits_stops_the_launch() {
    judge(Client::Copilot, "KCAP_COPILOT_BIN");
}

/// OpenCode 1.18.33 answers `session/new` as usual when a server exits at once; its log says
/// `message="server unavailable" key=<name>` (`opencode::ready`).
fn opencode_a_server_that_exits_stops_the_launch() {
    judge(Client::OpenCode, "KCAP_OPENCODE_BIN");
}
