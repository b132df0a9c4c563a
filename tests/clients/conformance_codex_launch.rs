//! Conformance of the Codex CLI launch plan carried out by the executor, Codex CLI 0.169.0
//! (and 0.171.0, `KCAP_CODEX_BIN=$KCAP_CODEX_NEXT_BIN`) in a pseudo-terminal (issues 24, 26). Install it with `bash scripts/install-peers.sh`,
//! then run `KCAP_CODEX_BIN=… cargo test --test clients conformance_codex_launch::`.
//!
//! Each test is one run of the library's `verify` (`kcap-mcp-registry verify codex`): the
//! daemon user's `~/.codex/config.toml`, the worktree's `.codex/config.toml` (the worktree a
//! git checkout) and the `config.toml` of the `CODEX_HOME` the daemon's environment names each
//! declare servers named like the injected ones and otherwise, every command the recorder.
//! The plan (a per-launch `CODEX_HOME` that trusts the worktree, the key as a credential
//! file) is carried out by the executor: the interactive client in a pseudo-terminal, with
//! the prompt; once every injected server listed its tools, and a settle time later, its
//! process group is stopped. The recorders' logs must show exactly the injected servers,
//! each with exactly its argv and `KCAP_*` environment, in the worktree. A negative control
//! undoes part of the isolation and expects the checks to name what ran.
//! `tests/clients/conformance/codex.rs` judges the `-c` overrides by `codex mcp list`, and
//! `tests/clients/isolation_codex.rs` every class of issue 22.
//!
//! Offline: the key is a dummy, the model API and proxies at a dead local port. A missing
//! client is reported as ignored (or fails under `KCAP_REQUIRE_PEERS=1`).

use crate::common;

use common::peers::peer;
use common::verify::{assert_caught, assert_exactly_injected, prepare, request, run};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::ops::verify::Scenario;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        codex_starts_exactly_the_injected_servers_under_a_hostile_config,
        codex_brokered_borrowed_launch_starts_exactly_its_three_servers,
        codex_checks_name_the_servers_a_leaky_plan_starts,
    ]
}

fn codex_starts_exactly_the_injected_servers_under_a_hostile_config() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let bench = prepare(&request(Client::Codex, &bin, Scenario::Direct));
    assert!(bench.worktree().join(".git").is_dir(), "a git checkout");
    assert_eq!(bench.plan().session_new, None, "a terminal client");
    let report = run(bench);
    assert_exactly_injected(&report, &["mcp flow-result", "mcp review"], true);
    // A pinned version: 0.169.0 (`KCAP_CODEX_BIN`), or 0.171.0 when `.ci/run` runs the
    // Codex cases again with `KCAP_CODEX_BIN=$KCAP_CODEX_NEXT_BIN`.
    assert_eq!(
        report.proven_version(),
        Some(true),
        "{:?}",
        report.client_version
    );
}

fn codex_brokered_borrowed_launch_starts_exactly_its_three_servers() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let report = run(prepare(&request(
        Client::Codex,
        &bin,
        Scenario::BrokeredBorrowed,
    )));
    assert_exactly_injected(
        &report,
        &["mcp flow-result", "mcp review", "mcp review"],
        true,
    );
    assert!(!report.expected[0].env.contains_key("KCAP_URL"));
}

/// The negative control: the plan with `CODEX_HOME` taken from the daemon's environment
/// and the worktree's `.codex/` left in place.
/// The checks name what ran (measured on 0.169.0).
fn codex_checks_name_the_servers_a_leaky_plan_starts() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let mut bench = prepare(&common::verify::leaky_request(
        Client::Codex,
        &bin,
        Scenario::Direct,
    ));
    // The daemon's `CODEX_HOME` holds a key too, so Codex gets past its sign-in screen.
    std::fs::write(
        bench.root().join("extra/codex-home/auth.json"),
        r#"{"OPENAI_API_KEY":"dummy"}"#,
    )
    .unwrap();
    let plan = bench.plan_mut();
    plan.env.retain(|v| v.name != "CODEX_HOME");
    plan.env_inherit.push("CODEX_HOME".to_owned());
    plan.worktree_remove.clear();
    let report = run(bench);
    // The servers named otherwise in the daemon's `CODEX_HOME` and the worktree's `.codex/`
    // run; the same-named ones give way to the plan's `-c` overrides, but lack their `KCAP_*`
    // variables, which only the plan's own `config.toml` gives (no secret in the argv).
    assert_caught(
        &report,
        &[
            "injected-started",
            "no-project-server",
            "no-environment-server",
            "env-exact",
        ],
        &["codex-home codex-home-other", "project project-other"],
    );
}
