//! Conformance of the Copilot CLI launch plan against the real client, Copilot CLI 1.0.102
//! (issues 14, 24, 26). Install it with `bash scripts/install-peers.sh`, then run
//! `KCAP_COPILOT_BIN=… KCAP_COPILOT_CACHE=… cargo test --test clients conformance_copilot::`.
//!
//! Each test is one run of the library's `verify` (`kcap_mcp_registry::ops::verify`, what
//! `kcap-mcp-registry verify copilot` runs): the daemon user's `$COPILOT_HOME/mcp-config.json`
//! and the worktree's `.mcp.json` and `.github/mcp.json` each declare a server named like an
//! injected one and a server named otherwise, the user's `settings.json` and the worktree's
//! `.github/hooks/` a `SessionStart` hook, the user trusts the worktree
//! (`config.json` `trustedFolders`), and the daemon's own environment holds that
//! `COPILOT_HOME`, `COPILOT_ALLOW_ALL=true` (which trusts the worktree too) and leaked
//! `KCAP_*` values. Every server command is the recorder (the crate's binary as
//! `kcap-verify-recorder`). The plan (version 3: a per-launch root, no inventory) is
//! rendered by `Client::plan` and carried out by the executor: `dirs` created,
//! `worktree_remove` applied, the environment built from empty, ACP `initialize` then
//! `session/new`; once every injected server listed its tools, and a settle time later, the
//! client's process group is stopped. The recorders' logs must show exactly the injected
//! servers, each with exactly its argv and `KCAP_*` environment, in the worktree, and nothing
//! else. A negative control undoes part of the isolation and expects the checks to name what
//! ran. `tests/clients/isolation_copilot.rs` covers every class of issue 22.
//!
//! Offline: `COPILOT_OFFLINE=true` and the model provider at a dead local port, handed over
//! as credentials; the package cache is the shared one the installer filled
//! (`KCAP_COPILOT_CACHE`, the launch's `cache_dir`). A missing client is reported as ignored
//! (or fails under `KCAP_REQUIRE_PEERS=1`).

use crate::common;

use std::path::PathBuf;

use common::peers::peer;
use common::verify::{assert_caught, assert_exactly_injected, prepare, request, run};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::LaunchPlan;
use kcap_mcp_registry::ops::verify::{Request, Scenario};
use serde_json::{Value, json};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        copilot_starts_exactly_the_injected_servers_under_a_hostile_config,
        copilot_brokered_borrowed_launch_starts_exactly_its_three_servers,
        copilot_checks_name_the_servers_a_leaky_plan_starts,
    ]
}

/// The request for `scenario` with the shared package cache, or `None` (test skipped) when
/// the client is not set up.
fn copilot(scenario: Scenario) -> Option<Request> {
    let bin = peer("KCAP_COPILOT_BIN")?;
    let cache = peer_dir("KCAP_COPILOT_CACHE");
    Some(request(Client::Copilot, &bin, scenario).with_cache_dir(Some(cache)))
}

/// The shared package cache: must be set with the binary (the installer prints both).
fn peer_dir(var: &str) -> PathBuf {
    let dir = std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{var} is not set; `bash scripts/install-peers.sh` prints it"));
    assert!(dir.is_dir(), "{var}={} is not a directory", dir.display());
    dir
}

/// The servers the plan passes in `--additional-mcp-config`, as `args` lines.
fn additional_servers(plan: &LaunchPlan) -> Vec<String> {
    let json = common::records::argv_file(plan, "--additional-mcp-config");
    let config: Value = serde_json::from_str(json).unwrap();
    let mut args: Vec<String> = config["mcpServers"]
        .as_object()
        .unwrap()
        .values()
        .map(|s| {
            serde_json::from_value::<Vec<String>>(s["args"].clone())
                .unwrap()
                .join(" ")
        })
        .collect();
    args.sort();
    args
}

/// `COPILOT_ALLOW_ALL=true`, `COPILOT_HOME` and its trust in the daemon's environment and
/// files: not passed on, so neither the daemon user's servers nor the worktree's start,
/// only ours.
fn copilot_starts_exactly_the_injected_servers_under_a_hostile_config() {
    let Some(request) = copilot(Scenario::Direct) else {
        return;
    };
    let bench = prepare(&request);
    let plan = bench.plan();
    assert_eq!(
        serde_json::to_value(plan.session_new.as_ref().unwrap()).unwrap()["mcpServers"],
        json!([])
    );
    assert_eq!(additional_servers(plan), ["mcp flow-result", "mcp review"]);
    let report = run(bench);
    assert_exactly_injected(&report, &["mcp flow-result", "mcp review"], true);
    assert_eq!(
        report.client_version.as_deref(),
        Ok("GitHub Copilot CLI 1.0.102.")
    );
}

/// A brokered result and a borrowed snapshot: the three servers start with exactly their env
/// (the capability URL on the result channel, no `KCAP_URL` there).
fn copilot_brokered_borrowed_launch_starts_exactly_its_three_servers() {
    let Some(request) = copilot(Scenario::BrokeredBorrowed) else {
        return;
    };
    let report = run(prepare(&request));
    assert_exactly_injected(
        &report,
        &["mcp flow-result", "mcp review", "mcp review"],
        true,
    );
    assert!(!report.expected[0].env.contains_key("KCAP_URL"));
}

/// The negative control: the plan with the daemon's `COPILOT_HOME` and `COPILOT_ALLOW_ALL`
/// and the worktree's files left in place. The checks name what ran (measured on 1.0.102).
fn copilot_checks_name_the_servers_a_leaky_plan_starts() {
    let Some(request) = copilot(Scenario::Direct) else {
        return;
    };
    // A negative control: unconfined, as `common::verify::leaky_request` says why.
    let request = request.with_confinement(kcap_mcp_registry::launch::sandbox::Confinement::Off);
    let mut bench = prepare(&request);
    let plan = bench.plan_mut();
    plan.env.retain(|v| v.name != "COPILOT_HOME");
    plan.env_inherit
        .extend(["COPILOT_HOME".to_owned(), "COPILOT_ALLOW_ALL".to_owned()]);
    plan.worktree_remove.clear();
    // Its `COPILOT_HOME`, and so its log, is the daemon's here: no wait on that log.
    plan.servers_ready = None;
    let report = run(bench);
    // The servers named otherwise in `mcp-config.json` and `.mcp.json` run; the same-named
    // ones give way to `--additional-mcp-config`'s.
    assert_caught(
        &report,
        &["no-user-server", "no-project-server"],
        &["project project-other", "user user-other"],
    );
}
