//! The tests that run the real clients (`cargo test --test clients`), on the real-client
//! harness (`tests/common/peers.rs`, libtest-mimic): a test whose client is missing is reported
//! as ignored with the reason, and fails under `KCAP_REQUIRE_PEERS=1` (as `.ci/run` sets).
//! Each module lists its tests in `trials()`; a test is named `<module>::<function>`.

#[path = "../common/mod.rs"]
#[macro_use]
mod common;

/// Claude Code's loader, modelled (`conformance`, `conformance_claude`, `isolation_claude`).
mod claude_oracle;
/// Gemini CLI's loader, modelled (`isolation_gemini`).
#[cfg(feature = "launch")]
mod gemini_machine;

#[cfg(feature = "cli")]
mod ci_snippets;
#[cfg(feature = "launch")]
mod conformance;
#[cfg(feature = "cli")]
mod conformance_acp;
mod conformance_claude;
#[cfg(feature = "cli")]
mod conformance_claude_launch;
#[cfg(feature = "launch")]
mod conformance_codex_config;
#[cfg(feature = "cli")]
mod conformance_codex_launch;
#[cfg(feature = "cli")]
mod conformance_copilot;
mod conformance_injection;
#[cfg(feature = "cli")]
mod differential;
#[cfg(feature = "cli")]
mod differential_copilot;
#[cfg(feature = "cli")]
mod differential_gemini;
#[cfg(feature = "cli")]
mod differential_opencode;
#[cfg(feature = "cli")]
mod differential_qwen;
#[cfg(feature = "launch")]
mod door_https;
#[cfg(feature = "launch")]
mod env_race;
#[cfg(feature = "launch")]
mod first_turn;
#[cfg(feature = "launch")]
mod first_turn_failed;
#[cfg(feature = "launch")]
mod git_start;
#[cfg(feature = "cli")]
mod install_clients;
#[cfg(feature = "launch")]
mod isolation_claude;
#[cfg(feature = "launch")]
mod isolation_codex;
#[cfg(feature = "launch")]
mod isolation_copilot;
#[cfg(feature = "launch")]
mod isolation_gemini;
#[cfg(feature = "launch")]
mod isolation_opencode;
#[cfg(feature = "launch")]
mod isolation_qwen;
#[cfg(feature = "launch")]
mod launch_claude_dialogs;
#[cfg(feature = "cli")]
mod launch_cli_codex;
#[cfg(feature = "launch")]
mod launch_peers;
#[cfg(feature = "launch")]
mod pr_config_claude;
#[cfg(feature = "launch")]
mod quiet_claude;
#[cfg(feature = "launch")]
mod remote_settings_claude;
#[cfg(feature = "launch")]
mod sandbox_clients;
#[cfg(feature = "launch")]
mod sandbox_reach_qwen;
#[cfg(feature = "launch")]
mod sandbox_tools_acp;
#[cfg(feature = "launch")]
mod sandbox_tools_gemini;
#[cfg(feature = "launch")]
mod sandbox_tools_openai;
#[cfg(feature = "launch")]
mod strict_attacks;
#[cfg(feature = "launch")]
mod unasked_tools;
#[cfg(feature = "cli")]
mod verify_clients;

fn main() {
    let mut trials = Vec::new();
    #[cfg(feature = "launch")]
    trials.extend(conformance::trials());
    #[cfg(feature = "cli")]
    trials.extend(conformance_acp::trials());
    #[cfg(feature = "launch")]
    trials.extend(isolation_opencode::trials());
    #[cfg(feature = "launch")]
    trials.extend(isolation_qwen::trials());
    #[cfg(feature = "cli")]
    trials.extend(conformance_copilot::trials());
    #[cfg(feature = "launch")]
    trials.extend(isolation_copilot::trials());
    #[cfg(feature = "launch")]
    trials.extend(isolation_gemini::trials());
    trials.extend(conformance_claude::trials());
    #[cfg(feature = "launch")]
    trials.extend(isolation_claude::trials());
    trials.extend(conformance_injection::trials());
    #[cfg(feature = "cli")]
    trials.extend(differential::trials());
    #[cfg(feature = "cli")]
    trials.extend(differential_gemini::trials());
    #[cfg(feature = "cli")]
    trials.extend(differential_qwen::trials());
    #[cfg(feature = "cli")]
    trials.extend(differential_copilot::trials());
    #[cfg(feature = "cli")]
    trials.extend(differential_opencode::trials());
    #[cfg(feature = "launch")]
    trials.extend(conformance_codex_config::trials());
    #[cfg(feature = "launch")]
    trials.extend(isolation_codex::trials());
    #[cfg(feature = "cli")]
    trials.extend(ci_snippets::trials());
    #[cfg(feature = "cli")]
    trials.extend(conformance_codex_launch::trials());
    #[cfg(feature = "cli")]
    trials.extend(install_clients::trials());
    #[cfg(feature = "cli")]
    trials.extend(verify_clients::trials());
    #[cfg(feature = "launch")]
    trials.extend(launch_peers::trials());
    #[cfg(feature = "cli")]
    trials.extend(launch_cli_codex::trials());
    #[cfg(feature = "cli")]
    trials.extend(conformance_claude_launch::trials());
    #[cfg(feature = "launch")]
    trials.extend(launch_claude_dialogs::trials());
    #[cfg(feature = "launch")]
    trials.extend(sandbox_clients::trials());
    #[cfg(feature = "launch")]
    trials.extend(sandbox_tools_gemini::trials());
    #[cfg(feature = "launch")]
    trials.extend(sandbox_reach_qwen::trials());
    #[cfg(feature = "launch")]
    trials.extend(sandbox_tools_acp::trials());
    #[cfg(feature = "launch")]
    trials.extend(sandbox_tools_openai::trials());
    #[cfg(feature = "launch")]
    trials.extend(first_turn::trials());
    #[cfg(feature = "launch")]
    trials.extend(first_turn_failed::trials());
    #[cfg(feature = "launch")]
    trials.extend(strict_attacks::trials());
    #[cfg(feature = "launch")]
    trials.extend(unasked_tools::trials());
    #[cfg(feature = "launch")]
    trials.extend(pr_config_claude::trials());
    #[cfg(feature = "launch")]
    trials.extend(door_https::trials());
    #[cfg(feature = "launch")]
    trials.extend(remote_settings_claude::trials());
    #[cfg(feature = "launch")]
    trials.extend(quiet_claude::trials());
    #[cfg(feature = "launch")]
    trials.extend(env_race::trials());
    #[cfg(feature = "launch")]
    trials.extend(git_start::trials());
    common::peers::main(common::peers::longest_first(
        trials,
        DURATIONS,
        "ci_snippets::",
        SPREAD,
    ))
}

/// Each test's wall time in a whole run (`KCAP_TEST_TIMES`, `tests/common/README.md`): the
/// harness starts the longest first ([`common::peers::longest_first`]), so that the threads
/// finish together. Refresh it from a whole run when tests are added or their times change;
/// a test not listed starts after the listed ones.
const DURATIONS: &str = include_str!("durations.tsv");

/// `ci_snippets::` cases take one lock (they share one checkout): one starts every `SPREAD`
/// other tests, so that the threads waiting on that lock are few. 10 from a simulation of
/// `.ci/run`'s 8 threads on the times of `durations.tsv` (see `durations.tsv`'s header).
const SPREAD: usize = 10;
