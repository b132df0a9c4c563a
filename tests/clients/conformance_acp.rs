//! Conformance of the ACP launch plans against the real clients: Gemini CLI 0.61.0,
//! OpenCode 1.18.33 and Qwen Code 0.24.4 (issues 14, 23, 24, 26). Install them with
//! `bash scripts/install-peers.sh`, then run
//! `KCAP_GEMINI_BIN=… KCAP_OPENCODE_BIN=… KCAP_QWEN_BIN=… cargo test --test clients conformance_acp::`.
//!
//! Each test is one run of the library's `verify` (`kcap_mcp_registry::ops::verify`, what
//! `kcap-mcp-registry verify` runs): a throwaway daemon user, worktree and environment whose
//! configuration declares servers named like the injected ones, like a guessed alias
//! (Gemini) and otherwise, hooks, and (OpenCode) `OPENCODE_CONFIG`, `OPENCODE_CONFIG_DIR`
//! and `OPENCODE_CONFIG_CONTENT`, (Gemini) `GEMINI_CLI_HOME` and
//! `GEMINI_CLI_SYSTEM_SETTINGS_PATH` pointing at more; every server command is the recorder
//! (the crate's binary as `kcap-verify-recorder`). The plan is rendered by `Client::plan`
//! and carried out by the executor (`launch::launch_with_parent_env`): ACP `initialize`,
//! `session/new`, a wait until every injected server listed its tools, a settle time, then
//! the client's process group is stopped. The recorders' logs must show exactly the
//! injected servers, each with exactly its argv and `KCAP_*` environment. A negative control
//! per client undoes part of the plan's isolation and expects the checks to name what ran,
//! so a hostile file the client does not read cannot make a test pass.
//!
//! Offline: dummy keys, model API base URLs and proxies at a dead local port, throwaway
//! `HOME` and XDG directories. A missing client is reported as ignored (or fails under
//! `KCAP_REQUIRE_PEERS=1`).

use crate::common;

use std::process::Command;

use common::peers::peer;
use common::verify::{
    assert_caught, assert_exactly_injected, leaky_request, prepare, request, run,
};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::LaunchPlan;
use kcap_mcp_registry::launch::client_env_from;
use kcap_mcp_registry::ops::verify::Scenario;
use serde_json::{Value, json};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        gemini_starts_exactly_the_injected_servers_under_a_hostile_config,
        gemini_brokered_borrowed_launch_starts_exactly_its_three_servers,
        gemini_checks_name_the_servers_a_leaky_plan_starts,
        opencode_starts_exactly_the_injected_servers_under_a_hostile_config,
        opencode_brokered_borrowed_launch_starts_exactly_its_three_servers,
        opencode_checks_name_the_servers_a_leaky_plan_starts,
        opencode_reads_the_plans_permission_rules,
        qwen_starts_exactly_the_injected_servers_under_a_hostile_config,
        qwen_brokered_borrowed_launch_starts_exactly_its_three_servers,
        qwen_checks_name_the_servers_a_leaky_plan_starts,
    ]
}

/// The servers the direct launch injects, as `args` lines: the result channel and
/// `kcap-review`.
const DIRECT_SERVERS: [&str; 2] = ["mcp flow-result", "mcp review"];

/// The servers the brokered, borrowed-snapshot launch injects: the result channel,
/// `kcap-review`, then `kcap-review-context` (whose args are `kcap-review`'s; its env tells
/// them apart).
const BROKERED_BORROWED_SERVERS: [&str; 3] = ["mcp flow-result", "mcp review", "mcp review"];

/// Removes `option` and the value after it from `plan`'s argv.
fn drop_option(plan: &mut LaunchPlan, option: &str) {
    let at = plan.argv.iter().position(|a| a == option).unwrap();
    plan.argv.drain(at..at + 2);
}

/// Takes `names` from the daemon's environment instead of the plan's.
fn inherit(plan: &mut LaunchPlan, names: &[&str]) {
    plan.env.retain(|v| !names.contains(&v.name.as_str()));
    plan.env_inherit
        .extend(names.iter().map(|n| (*n).to_owned()));
}

// ------------------------------------------------------------------------------------------
// Gemini CLI
// ------------------------------------------------------------------------------------------

fn gemini_starts_exactly_the_injected_servers_under_a_hostile_config() {
    let Some(bin) = peer("KCAP_GEMINI_BIN") else {
        return;
    };
    let bench = prepare(&request(Client::Gemini, &bin, Scenario::Direct));
    let plan = bench.plan();
    assert!(plan.worktree_remove.contains(&".gemini".to_owned()));
    assert!(
        plan.servers
            .iter()
            .all(|s| s.wire_name.len() == s.id.len() + 17 && s.wire_name.starts_with(&s.id)),
        "every injected server is aliased: {:?}",
        plan.servers
    );
    let report = run(bench);
    assert_exactly_injected(&report, &DIRECT_SERVERS, true);
    assert_eq!(report.client_version.as_deref(), Ok("0.61.0"));
}

/// A brokered result and a borrowed snapshot: the three servers (all aliased) start with
/// exactly their env, the result channel's capability URL and no `KCAP_URL`.
fn gemini_brokered_borrowed_launch_starts_exactly_its_three_servers() {
    let Some(bin) = peer("KCAP_GEMINI_BIN") else {
        return;
    };
    let report = run(prepare(&request(
        Client::Gemini,
        &bin,
        Scenario::BrokeredBorrowed,
    )));
    assert_exactly_injected(&report, &BROKERED_BORROWED_SERVERS, true);
    let result = &report.expected[0];
    assert_eq!(result.id, "kcap-flow-result");
    assert!(!result.env.contains_key("KCAP_URL"), "{result:?}");
    assert_eq!(
        result
            .env
            .get("KCAP_FLOW_CAPABILITY_URL")
            .map(String::as_str),
        Some("http://127.0.0.1:9/cap/kcap-verify")
    );
}

/// The negative control: the plan without its server-name gate, with Gemini's home and
/// system settings taken from the daemon's environment and the worktree's `.gemini/` left in
/// place. The checks name what ran (measured on 0.61.0).
fn gemini_checks_name_the_servers_a_leaky_plan_starts() {
    let Some(bin) = peer("KCAP_GEMINI_BIN") else {
        return;
    };
    let mut bench = prepare(&leaky_request(Client::Gemini, &bin, Scenario::Direct));
    let plan = bench.plan_mut();
    drop_option(plan, "--allowed-mcp-server-names");
    inherit(
        plan,
        &["GEMINI_CLI_HOME", "GEMINI_CLI_SYSTEM_SETTINGS_PATH"],
    );
    plan.worktree_remove.clear();
    // The injected servers do not start here (below): no wait for them before the prompt.
    plan.servers_ready = None;
    let report = run(bench);
    // The worktree's servers run; its `mcp.allowed` (which names them, not the aliases)
    // keeps the injected servers and the other scopes' servers from starting.
    assert_caught(
        &report,
        &["injected-started", "no-project-server"],
        &[
            "project kcap-flow-result",
            "project kcap-review",
            "project kcap-review-0000000000000000",
            "project project-other",
        ],
    );
}

// ------------------------------------------------------------------------------------------
// OpenCode
// ------------------------------------------------------------------------------------------

fn opencode_starts_exactly_the_injected_servers_under_a_hostile_config() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    let report = run(prepare(&request(Client::OpenCode, &bin, Scenario::Direct)));
    assert_exactly_injected(&report, &DIRECT_SERVERS, false);
    assert_eq!(report.client_version.as_deref(), Ok("1.18.33"));
}

/// A brokered result and a borrowed snapshot under the hostile OpenCode setup: the three
/// servers start with exactly their env.
fn opencode_brokered_borrowed_launch_starts_exactly_its_three_servers() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    let report = run(prepare(&request(
        Client::OpenCode,
        &bin,
        Scenario::BrokeredBorrowed,
    )));
    assert_exactly_injected(&report, &BROKERED_BORROWED_SERVERS, false);
}

/// The negative control: the plan with OpenCode's project configuration allowed, its
/// config variables and home taken from the daemon's environment, and the worktree's files
/// left in place. The checks name what ran (measured on 1.18.33).
fn opencode_checks_name_the_servers_a_leaky_plan_starts() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    let mut bench = prepare(&leaky_request(Client::OpenCode, &bin, Scenario::Direct));
    let plan = bench.plan_mut();
    inherit(
        plan,
        &[
            "HOME",
            "XDG_CONFIG_HOME",
            "OPENCODE_DISABLE_PROJECT_CONFIG",
            "OPENCODE_CONFIG",
            "OPENCODE_CONFIG_DIR",
            "OPENCODE_CONFIG_CONTENT",
        ],
    );
    plan.worktree_remove.clear();
    let report = run(bench);
    // Every scope's own server runs but the parent directory's (the worktree is a git
    // checkout: OpenCode looks for project files up to its root); of the servers named like
    // the injected ones, only `OPENCODE_CONFIG_CONTENT`'s replace them.
    assert_caught(
        &report,
        &[
            "no-user-server",
            "no-project-server",
            "no-environment-server",
        ],
        &[
            "envcontent envcontent-other",
            "envcontent kcap-flow-result",
            "envcontent kcap-review",
            "envdir envdir-other",
            "envfile envfile-other",
            "homedot homedot-other",
            "project project-other",
            "projectdot projectdot-other",
            "user user-other",
        ],
    );
}

/// `opencode debug config` (no server started) with the plan's environment, from the
/// hostile daemon environment, shows the plan's permission rules exactly, and no MCP server
/// from any config layer.
fn opencode_reads_the_plans_permission_rules() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    let bench = prepare(&request(Client::OpenCode, &bin, Scenario::Direct));
    let plan = bench.plan();
    for dir in &plan.dirs {
        std::fs::create_dir_all(bench.root().join("launch").join(dir)).unwrap();
    }
    let parent = |name: &str| bench.parent_env().get(name).map(Into::into);
    let permission = plan.env_value("OPENCODE_PERMISSION").unwrap().to_owned();
    let mut cmd = Command::new(&bin);
    cmd.env_clear()
        .envs(client_env_from(plan, &parent))
        .args(["debug", "config"])
        .current_dir(bench.worktree());
    let out = common::peers::run(cmd, "opencode debug config");
    assert!(out.status.success(), "{}", out.stderr);
    let config: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "opencode debug config: {e}:\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let wanted: Value = serde_json::from_str(&permission).unwrap();
    assert_eq!(config["permission"], wanted);
    assert_eq!(
        config.get("mcp").cloned().unwrap_or(json!({})),
        json!({}),
        "{config:#}"
    );
}

// ------------------------------------------------------------------------------------------
// Qwen Code
// ------------------------------------------------------------------------------------------

/// Under the hostile user, extension, project (`.qwen/`, `.mcp.json`, `.env`), `QWEN_HOME`
/// and system settings (`src/clients/qwen/hostile.rs`), exactly the injected servers start,
/// with exactly their argv and `KCAP_*` variables, in the worktree.
fn qwen_starts_exactly_the_injected_servers_under_a_hostile_config() {
    let Some(bin) = peer("KCAP_QWEN_BIN") else {
        return;
    };
    let bench = prepare(&request(Client::Qwen, &bin, Scenario::Direct));
    let plan = bench.plan();
    assert_eq!(
        plan.worktree_remove,
        [
            ".qwen",
            ".env",
            ".mcp.json",
            ".agents",
            "QWEN.md",
            "AGENTS.md"
        ]
    );
    assert!(
        plan.servers
            .iter()
            .all(|s| s.wire_name.len() == s.id.len() + 17 && s.wire_name.starts_with(&s.id)),
        "every injected server is aliased: {:?}",
        plan.servers
    );
    // The key is in the settings file, not in the environment every server inherits.
    assert_eq!(plan.env_value("OPENAI_API_KEY"), None);
    let settings = &plan.files[0];
    assert_eq!(settings.path, "home/.qwen/settings.json");
    assert!(
        settings
            .contents
            .contains("\"apiKey\":\"kcap-verify-dummy-key\""),
        "{}",
        settings.contents
    );
    let report = run(bench);
    assert_exactly_injected(&report, &DIRECT_SERVERS, true);
    assert_eq!(report.client_version.as_deref(), Ok("0.24.4"));
}

/// A brokered result and a borrowed snapshot: the three servers (all aliased) start with
/// exactly their env, the result channel's capability URL and no `KCAP_URL`.
fn qwen_brokered_borrowed_launch_starts_exactly_its_three_servers() {
    let Some(bin) = peer("KCAP_QWEN_BIN") else {
        return;
    };
    let report = run(prepare(&request(
        Client::Qwen,
        &bin,
        Scenario::BrokeredBorrowed,
    )));
    assert_exactly_injected(&report, &BROKERED_BORROWED_SERVERS, true);
    let result = &report.expected[0];
    assert_eq!(result.id, "kcap-flow-result");
    assert!(!result.env.contains_key("KCAP_URL"), "{result:?}");
}

/// The negative control: the plan without its server-name gate, with `QWEN_HOME`, the
/// system settings paths and `OPENAI_API_KEY` taken from the daemon's environment (without
/// the plan's settings file Qwen finds no credentials: `--auth-type=openai` takes the key
/// from the environment) and the worktree's files left in place. The checks name what ran
/// (measured on 0.24.4).
fn qwen_checks_name_the_servers_a_leaky_plan_starts() {
    let Some(bin) = peer("KCAP_QWEN_BIN") else {
        return;
    };
    let mut bench = prepare(&leaky_request(Client::Qwen, &bin, Scenario::Direct));
    let plan = bench.plan_mut();
    drop_option(plan, "--allowed-mcp-server-names");
    inherit(
        plan,
        &[
            "QWEN_HOME",
            "QWEN_CODE_SYSTEM_SETTINGS_PATH",
            "QWEN_CODE_SYSTEM_DEFAULTS_PATH",
            "OPENAI_API_KEY",
        ],
    );
    plan.argv.push("--auth-type=openai".into());
    plan.worktree_remove.clear();
    // The injected servers do not start here (below): no wait for them before the prompt.
    plan.servers_ready = None;
    let report = run(bench);
    // The `QWEN_HOME`, system, system-defaults and worktree settings are read: their own
    // servers and `SessionStart` hooks run (hooks switched back on by `disableAllHooks:
    // false`), and their `mcp.excluded: ["kcap-*"]` drops the injected servers. The user's
    // `~/.qwen` is not read (`QWEN_HOME` points elsewhere) and `mcp.allowed` keeps the
    // `.mcp.json` servers out.
    assert_caught(
        &report,
        &[
            "injected-started",
            "no-project-server",
            "no-environment-server",
        ],
        &[
            "project hook-SessionStart",
            "project project-other",
            "qwen-home hook-SessionStart",
            "qwen-home qwen-home-other",
            "system-defaults hook-SessionStart",
            "system-defaults system-defaults-other",
            "system-settings hook-SessionStart",
            "system-settings system-settings-other",
        ],
    );
}
