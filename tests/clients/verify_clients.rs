//! `kcap-mcp-registry verify <client> --client-bin PATH` against the installed real clients
//! (issue 26): on each, the direct launch holds (exit 0), every check passes, and the report
//! names the pinned version. Install them with `bash scripts/install-peers.sh`; a client
//! whose `KCAP_*_BIN` is unset is reported as ignored (a failure under
//! `KCAP_REQUIRE_PEERS=1`). Claude Code runs on both pinned versions (2.1.197,
//! `KCAP_CLAUDE_BIN`; 2.1.332, `KCAP_CLAUDE_NEXT_BIN`), in a pseudo-terminal, and Codex CLI
//! on both of its (0.169.0, `KCAP_CODEX_BIN`; 0.171.0, `KCAP_CODEX_NEXT_BIN`). Claude Code
//! starts its servers in the launch's working directory too, but `verify` does not check where (no
//! `server-cwd`). `tests/suite/cli_verify.rs` runs `verify` against stand-in clients.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::peers::peer;
use serde_json::Value;

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        verify_gemini_holds_on_the_installed_client,
        verify_opencode_holds_on_the_installed_client,
        verify_copilot_holds_on_the_installed_client,
        verify_codex_holds_on_both_pinned_clients,
        verify_claude_holds_on_both_pinned_clients,
        verify_qwen_holds_on_the_installed_client,
        verify_codex_records_its_pass,
    ]
}

/// The checks of a client whose servers run in the worktree, in report order.
const CHECKS: [&str; 8] = [
    "injected-started",
    "no-user-server",
    "no-project-server",
    "no-environment-server",
    "argv-exact",
    "env-exact",
    "no-daemon-env",
    "server-cwd",
];

/// What each recorder tries from inside the reviewer (`verify`'s `attacks.json`).
const ATTACKS: [&str; 5] = [
    "daemon-environ",
    "daemon-home",
    "other-launch-dir",
    "signal-daemon",
    "write-outside",
];

/// Runs `verify <client> --client-bin <bin> --scenario direct --format json` and `more`,
/// bounded (`common::peers::run`), twice: without the sandbox, it holds with every check in
/// `checks` and the client version `version`, and every attack from inside the reviewer
/// gets through (so the second run bites); with `--sandbox required`, it holds with check
/// `sandbox` too, and every attack is denied.
fn holds(client: &str, bin: &Path, more: &[&str], checks: &[&str], version: &str) {
    for (sandbox, reached) in [("off", true), ("required", false)] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"));
        cmd.args(["verify", client, "--client-bin"])
            .arg(bin)
            .args([
                "--scenario",
                "direct",
                "--format",
                "json",
                "--timeout",
                "45",
                "--sandbox",
                sandbox,
            ])
            .args(more);
        let out = common::peers::run(cmd, &format!("verify {client} --sandbox {sandbox}"));
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{text}\n{}", out.stderr);
        assert_eq!(out.stderr, "");
        let reports: Value = serde_json::from_str(&text).unwrap();
        let [report] = reports.as_array().unwrap().as_slice() else {
            panic!("one report: {text}")
        };
        assert_eq!(report["client"], client);
        assert_eq!(report["verdict"], "holds", "{text}");
        assert_eq!(report["client_version"], version);
        assert_eq!(report["proven_version"], true, "{text}");
        let names: Vec<&str> = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                assert_eq!(c["passed"], true, "{c}");
                c["name"].as_str().unwrap()
            })
            .collect();
        let mut want = checks.to_vec();
        if sandbox != "off" {
            want.push("sandbox");
        }
        assert_eq!(names, want);
        let started = report["started"].as_array().unwrap();
        let ids: Vec<&str> = started
            .iter()
            .map(|s| s["origin"]["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["kcap-flow-result", "kcap-review"]);
        for s in started {
            let tried = s["reached"].as_object().unwrap();
            assert_eq!(tried.keys().collect::<Vec<_>>(), ATTACKS, "{s}");
            for (attack, got) in tried {
                assert_eq!(
                    got.as_bool(),
                    Some(reached),
                    "{client} --sandbox {sandbox}: {attack} from {}",
                    s["origin"]["id"]
                );
            }
        }
    }
}

fn verify_gemini_holds_on_the_installed_client() {
    let Some(bin) = peer("KCAP_GEMINI_BIN") else {
        return;
    };
    holds("gemini", &bin, &[], &CHECKS, "0.61.0");
}

fn verify_opencode_holds_on_the_installed_client() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    holds("opencode", &bin, &[], &CHECKS, "1.18.33");
}

fn verify_copilot_holds_on_the_installed_client() {
    let Some(bin) = peer("KCAP_COPILOT_BIN") else {
        return;
    };
    let cache = std::env::var("KCAP_COPILOT_CACHE")
        .expect("KCAP_COPILOT_CACHE is set with KCAP_COPILOT_BIN (install-peers.sh prints both)");
    let checks: Vec<&str> = CHECKS
        .into_iter()
        .filter(|c| *c != "no-environment-server")
        .collect();
    holds(
        "copilot",
        &bin,
        &["--cache-dir", &cache],
        &checks,
        "GitHub Copilot CLI 1.0.102.",
    );
}

fn verify_codex_holds_on_both_pinned_clients() {
    for (var, version) in [
        ("KCAP_CODEX_BIN", "codex-cli 0.169.0"),
        ("KCAP_CODEX_NEXT_BIN", "codex-cli 0.171.0"),
    ] {
        let Some(bin) = peer(var) else {
            continue;
        };
        holds("codex", &bin, &[], &CHECKS, version);
    }
}

fn verify_claude_holds_on_both_pinned_clients() {
    let checks: Vec<&str> = CHECKS.into_iter().filter(|c| *c != "server-cwd").collect();
    for (var, version) in [
        ("KCAP_CLAUDE_BIN", "2.1.197 (Claude Code)"),
        ("KCAP_CLAUDE_NEXT_BIN", "2.1.332 (Claude Code)"),
    ] {
        let Some(bin) = peer(var) else {
            continue;
        };
        holds("claude", &bin, &[], &checks, version);
    }
}

fn verify_qwen_holds_on_the_installed_client() {
    let Some(bin) = peer("KCAP_QWEN_BIN") else {
        return;
    };
    holds("qwen", &bin, &[], &CHECKS, "0.24.4");
}

/// `verify codex` on the newest pinned Codex CLI, every scenario (the default): it holds, and
/// records the pass in `$XDG_STATE_HOME/kcap-mcp-registry/verified/codex.json` for the file
/// `node_modules/.bin/codex` runs (the symlink followed: `@openai/codex/bin/codex.js`), which
/// the library's lookup then finds for that binary and version, and not for another version.
fn verify_codex_records_its_pass() {
    use kcap_mcp_registry::clients::Client;
    use kcap_mcp_registry::clients::version::ClientVersion;
    use kcap_mcp_registry::ops::verify::record::{self, Binary};
    let Some(bin) = peer("KCAP_CODEX_NEXT_BIN") else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"));
    cmd.env("XDG_STATE_HOME", state.path())
        .args(["verify", "codex", "--client-bin"])
        .arg(&bin)
        .args(["--timeout", "45"]);
    let out = common::peers::run(cmd, "verify codex (every scenario)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", out.stderr);
    assert_eq!(text.matches("  verdict: holds\n").count(), 2, "{text}");
    let dir = state.path().join("kcap-mcp-registry/verified");
    let binary = Binary::identify(&bin).unwrap();
    assert!(
        binary.path.ends_with("@openai/codex/bin/codex.js"),
        "{binary:?}"
    );
    assert!(
        out.stderr.starts_with(&format!(
            "verify codex: recorded the pass of Codex CLI 0.171.0 ({}, sha256 {}) in {}",
            binary.path.display(),
            &binary.sha256[..16],
            dir.join("codex.json").display()
        )),
        "{}",
        out.stderr
    );
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("codex.json")).unwrap()).unwrap();
    assert_eq!(file["client"], "codex");
    assert_eq!(file["passes"][0]["version"], "0.171.0");
    assert_eq!(file["passes"][0]["sha256"], binary.sha256.as_str());
    let found = |line: &str| {
        record::lookup(&dir, Client::Codex, &binary, &ClientVersion::new(line)).unwrap()
    };
    assert!(found("codex-cli 0.171.0").is_some());
    assert_eq!(found("codex-cli 0.172.0"), None);
}
