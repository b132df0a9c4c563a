//! Issue 34 item 3, on the real clients: the built-in tools a reviewer's model is offered are
//! the plan's `unasked` list (`clients::tools`), and under the strict policy none of them
//! writes, runs, reaches the web or starts an agent.
//!
//! Each client's plan of `Client::plan` (the result channel and `kcap-review`) is carried
//! out by the executor against a stand-in model API (`common::model_api`, 127.0.0.1) until
//! its first request that offers tools ([`Bench::first_turn`]); the built-in tools of that
//! request are every tool it offers but the injected servers' (Claude Code 2.1.332 names
//! most of its tools, deferred, in a system message: they count too). Each must be in the
//! plan's list; over every pinned version and both policies, every listed tool must have
//! been offered (no stale entry). The bites: without its strict switches a client offers
//! tools with effects (Claude Code, Codex CLI, Gemini CLI, Qwen Code), and without its tool
//! filter one the plan does not list (Copilot CLI's `--available-tools`, OpenCode's
//! `OPENCODE_PERMISSION`). Offline: dummy keys, a dead proxy for anything but the loopback.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::common::peers::peer;
use crate::common::records::listing_server_source;
use crate::first_turn::Bench;
use kcap_mcp_registry::Policy;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::LaunchPlan;
use kcap_mcp_registry::clients::tools::ToolKind;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        claude_offers_only_the_plans_builtin_tools,
        codex_offers_only_the_plans_builtin_tools,
        gemini_offers_only_the_plans_builtin_tools,
        qwen_offers_only_the_plans_builtin_tools,
        opencode_offers_only_the_plans_builtin_tools,
        copilot_offers_only_the_plans_builtin_tools,
    ]
}

fn claude_offers_only_the_plans_builtin_tools() {
    hides_under_strict(Client::Claude, &["KCAP_CLAUDE_BIN", "KCAP_CLAUDE_NEXT_BIN"]);
}

fn codex_offers_only_the_plans_builtin_tools() {
    hides_under_strict(Client::Codex, &["KCAP_CODEX_BIN", "KCAP_CODEX_NEXT_BIN"]);
}

fn gemini_offers_only_the_plans_builtin_tools() {
    hides_under_strict(Client::Gemini, &["KCAP_GEMINI_BIN"]);
}

fn qwen_offers_only_the_plans_builtin_tools() {
    hides_under_strict(Client::Qwen, &["KCAP_QWEN_BIN"]);
}

/// OpenCode: the plan's list, and without `OPENCODE_PERMISSION` more.
fn opencode_offers_only_the_plans_builtin_tools() {
    filtered(Client::OpenCode, "KCAP_OPENCODE_BIN", |plan| {
        let before = plan.env.len();
        plan.env.retain(|v| v.name != "OPENCODE_PERMISSION");
        assert_eq!(plan.env.len() + 1, before);
        "OPENCODE_PERMISSION"
    });
}

/// Copilot CLI: no built-in tool at all, and without `--available-tools` its own.
fn copilot_offers_only_the_plans_builtin_tools() {
    filtered(Client::Copilot, "KCAP_COPILOT_BIN", |plan| {
        let before = plan.argv.len();
        plan.argv.retain(|a| !a.starts_with("--available-tools="));
        assert!(plan.argv.len() < before);
        "--available-tools"
    });
}

/// A client whose room hides its tools with effects under the strict policy: on each of
/// `vars` (every pinned version) and under both policies, every built-in tool offered is in
/// the plan's list; every listed tool is offered somewhere; the lenient plan offers tools
/// with effects (so the strict plan's offering none is the switches' doing).
fn hides_under_strict(client: Client, vars: &[&'static str]) {
    let bins: Vec<_> = vars.iter().map(|v| peer(v)).collect();
    let Some(bins) = bins.into_iter().collect::<Option<Vec<_>>>() else {
        return;
    };
    let mut seen = BTreeSet::new();
    for (var, bin) in vars.iter().zip(&bins) {
        for policy in [Policy::Lenient, Policy::Strict] {
            let (plan, offered) = run(client, bin, |bench| bench.any_plan_under(client, policy));
            assert_listed(var, policy, &plan, &offered);
            if policy == Policy::Lenient {
                let effects: Vec<&String> = offered
                    .iter()
                    .filter(|name| kind(client, name).is_some_and(ToolKind::has_effects))
                    .collect();
                assert!(
                    !effects.is_empty(),
                    "{var}: the lenient plan offers no built-in tool with effects, so the \
                     strict plan's hiding shows nothing"
                );
            }
            seen.extend(offered);
        }
    }
    assert_every_listed_tool_offered(client, &seen);
}

/// A client whose plan filters its built-in tools under either policy: every built-in tool
/// offered is in the plan's list, every listed tool is offered, and `unfilter` (which takes
/// the filter out of the plan and names it) leads to a tool the plan does not list.
fn filtered(client: Client, var: &'static str, unfilter: fn(&mut LaunchPlan) -> &'static str) {
    let Some(bin) = peer(var) else { return };
    let (plan, offered) = run(client, &bin, |bench| bench.any_plan(client));
    assert_listed(var, Policy::Lenient, &plan, &offered);
    assert_every_listed_tool_offered(client, &offered);
    let mut filter = "";
    let (plan, offered) = run(client, &bin, |bench| {
        let mut plan = bench.any_plan(client);
        filter = unfilter(&mut plan);
        plan
    });
    let unlisted = unlisted(&plan, &offered);
    assert!(
        !unlisted.is_empty(),
        "{var}: without {filter} the client offered no tool beyond the plan's list: {offered:?}"
    );
}

/// Asserts that every built-in tool in `offered` is in `plan`'s `unasked` list.
fn assert_listed(var: &str, policy: Policy, plan: &LaunchPlan, offered: &BTreeSet<String>) {
    let unlisted = unlisted(plan, offered);
    assert!(
        unlisted.is_empty(),
        "{var} ({policy:?}): the model was offered built-in tools the plan does not list as \
         unasked: {unlisted:?} (clients::tools; the room's BUILTINS)"
    );
}

/// The tools of `offered` that `plan`'s `unasked` list lacks.
fn unlisted<'a>(plan: &LaunchPlan, offered: &'a BTreeSet<String>) -> Vec<&'a String> {
    offered
        .iter()
        .filter(|name| !plan.unasked.iter().any(|t| &t.name == *name))
        .collect()
}

/// Asserts that every built-in tool `client`'s room lists was offered in some run (`seen`).
fn assert_every_listed_tool_offered(client: Client, seen: &BTreeSet<String>) {
    let stale: Vec<&str> = client
        .spec()
        .builtins
        .iter()
        .map(|b| b.name)
        .filter(|name| !seen.contains(*name))
        .collect();
    assert!(
        stale.is_empty(),
        "{client}: the room lists built-in tools no pinned version offered: {stale:?}"
    );
}

/// The kind the room gives the built-in tool `name`, when it lists it.
fn kind(client: Client, name: &str) -> Option<ToolKind> {
    client
        .spec()
        .builtins
        .iter()
        .find(|b| b.name == name)
        .map(|b| b.kind)
}

/// `client`'s plan of `plan` carried out with `bin` up to its first request that offers
/// tools: the plan, and the built-in tools that request offers ([`builtins`]).
fn run(
    client: Client,
    bin: &Path,
    plan: impl FnOnce(&Bench) -> LaunchPlan,
) -> (LaunchPlan, BTreeSet<String>) {
    let bench = Bench::for_any(client, listing_server_source(std::time::Duration::ZERO));
    let plan = plan(&bench);
    let first = bench.first_turn(&plan, bin);
    let body: Value = serde_json::from_str(&first).expect("a JSON request body");
    let offered = builtins(&body, &plan);
    (plan, offered)
}

/// The built-in tools a model request `body` offers: the names of its `tools` (Chat
/// Completions' `function.name`, the Responses API's and Anthropic's `name`, a hosted tool's
/// `type`, Gemini's `functionDeclarations[].name`) and of Claude Code's deferred tools (the
/// lines after "The following deferred tools are now available via ToolSearch" in a system
/// message, up to a blank line), less the injected servers' tools (a name holding a server
/// id of `plan`, `_` read as `-`).
fn builtins(body: &Value, plan: &LaunchPlan) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        let declarations = tool["functionDeclarations"].as_array();
        for d in declarations.into_iter().flatten() {
            names.extend(d["name"].as_str().map(str::to_owned));
        }
        if declarations.is_none() {
            let name = tool["function"]["name"]
                .as_str()
                .or(tool["name"].as_str())
                .or(tool["type"].as_str());
            names.extend(name.map(str::to_owned));
        }
    }
    strings(body, &mut |text| {
        let marker = "The following deferred tools are now available via ToolSearch";
        if let Some(at) = text.find(marker) {
            let rest = text[at..].lines().skip(1);
            names.extend(
                rest.take_while(|l| !l.trim().is_empty())
                    .map(|l| l.trim().to_owned()),
            );
        }
    });
    names.retain(|name| {
        let name = name.replace('_', "-");
        !plan.servers.iter().any(|s| name.contains(&s.id))
    });
    names
}

/// Calls `f` with every string in `value`.
fn strings(value: &Value, f: &mut impl FnMut(&str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, f)),
        Value::Object(map) => map.values().for_each(|v| strings(v, f)),
        _ => {}
    }
}
