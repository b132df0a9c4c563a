//! Conformance of the Claude Code launch plan carried out by the executor, on Claude Code
//! 2.1.197 (`KCAP_CLAUDE_BIN`) and 2.1.332 (`KCAP_CLAUDE_NEXT_BIN`), the interactive client
//! in a pseudo-terminal (issues 24, 26). Install them with `bash scripts/install-peers.sh`.
//!
//! Each test is one run per version of the library's `verify` (`kcap-mcp-registry verify
//! claude`): the daemon user's `~/.claude.json` and `~/.claude/settings.json`, the
//! worktree's `.mcp.json` and `.claude/settings.json`, and the `.claude.json` of the
//! `CLAUDE_CONFIG_DIR` the daemon's environment names each declare servers named like the
//! injected ones and otherwise (and `SessionStart` hooks), every command the recorder. The
//! plan (a per-launch `CLAUDE_CONFIG_DIR` holding the first-run state, `--strict-mcp-config`,
//! `--setting-sources=`) is carried out by the executor with the prompt; once every injected
//! server listed its tools, and a settle time later, its process group is stopped. The
//! recorders' logs must show exactly the injected servers, each with exactly its argv and
//! `KCAP_*` environment. A negative control undoes part of the isolation and expects the
//! checks to name what ran. `tests/clients/isolation_claude.rs` covers every class of issue 22.
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
        claude_brokered_borrowed_launch_starts_exactly_its_three_servers,
        claude_checks_name_what_a_leaky_plan_runs,
    ]
}

/// Both binaries with their versions (a missing one marks the test skipped).
fn binaries() -> Vec<(std::path::PathBuf, &'static str)> {
    [
        ("KCAP_CLAUDE_BIN", "2.1.197 (Claude Code)"),
        ("KCAP_CLAUDE_NEXT_BIN", "2.1.332 (Claude Code)"),
    ]
    .into_iter()
    .filter_map(|(var, version)| Some((peer(var)?, version)))
    .collect()
}

fn claude_brokered_borrowed_launch_starts_exactly_its_three_servers() {
    for (bin, version) in binaries() {
        let bench = prepare(&request(Client::Claude, &bin, Scenario::BrokeredBorrowed));
        assert_eq!(bench.plan().session_new, None, "a terminal client");
        let report = run(bench);
        assert_exactly_injected(
            &report,
            &["mcp flow-result", "mcp review", "mcp review"],
            false,
        );
        assert!(!report.expected[0].env.contains_key("KCAP_URL"));
        assert_eq!(report.client_version.as_deref(), Ok(version));
    }
}

/// The negative control: the plan without `--setting-sources=`, and the worktree's
/// `.claude/` and `.mcp.json` left in place. The checks name what ran. (Dropping
/// `--strict-mcp-config` instead is caught by nothing here: the per-launch root and
/// `--setting-sources=` already keep every other server out, measured on both versions.)
fn claude_checks_name_what_a_leaky_plan_runs() {
    for (bin, _) in binaries() {
        let mut bench = prepare(&request(Client::Claude, &bin, Scenario::Direct));
        let plan = bench.plan_mut();
        plan.argv.retain(|a| a != "--setting-sources=");
        plan.worktree_remove.clear();
        let report = run(bench);
        // The worktree's `SessionStart` hook runs (its folder is trusted); its `.mcp.json`
        // servers still need an approval nothing gives (measured on both versions).
        assert_caught(
            &report,
            &["no-project-server"],
            &["project-settings hook-SessionStart"],
        );
    }
}
