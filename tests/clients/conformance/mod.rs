//! Conformance of the launch plans against the real clients: Codex CLI 0.169.0 and Claude Code
//! 2.1.197 (issue 5). Every plan is made through the public call (`Client::plan`,
//! `tests/common/plan.rs`). Install them with `bash scripts/install-peers.sh`, then run
//! `KCAP_CODEX_BIN=… KCAP_CLAUDE_BIN=… cargo test --test clients conformance::`. The Claude cases run
//! unchanged on Claude Code 2.1.332 with `KCAP_CLAUDE_BIN=$KCAP_CLAUDE_NEXT_BIN`, the Codex
//! cases on Codex CLI 0.171.0 with `KCAP_CODEX_BIN=$KCAP_CODEX_NEXT_BIN` (as `.ci/run` does).
//!
//! Oracles, both offline (no login, no model, no network):
//! - Codex: `codex <plan argv> mcp list --json` (and `mcp get NAME --json` for the tool
//!   filters), the plan carried out by the library's executor, prints the effective MCP
//!   server table after the argv's `-c` overrides have merged onto the plan's
//!   `$CODEX_HOME/config.toml` (which holds the servers' `env`); for the isolation, the
//!   daemon's `$CODEX_HOME` is a hostile user's, and the plan's argv alone runs under it too.
//! - Claude Code: `claude <plan argv> -- <prompt>`, the plan's files written into its launch
//!   directory (the `--mcp-config` file the argv names), with stdin from `/dev/null`
//!   and the API at a stand-in on 127.0.0.1 that refuses every turn, starts every configured
//!   MCP server, then sends its first model request and exits on the refusal; once it
//!   exited (or the recorders have settled) the oracle kills its group (`tests/claude_oracle`). Our `kcap_bin`
//!   points at a recorder script that writes its argv, its whole environment and its cwd,
//!   then exits at once; the test compares them byte for byte, once per distinct server.
//!
//! Every client run gets a fresh temp `HOME` (and `CODEX_HOME`), a fresh temp cwd, stdin
//! from `/dev/null`, a cleared environment, and a 30 s timeout after which its process group
//! is killed and the test fails. The file runs on the real-client harness
//! (`tests/common/README.md`): a missing binary fails the test under `KCAP_REQUIRE_PEERS=1`
//! (as `.ci/run` sets) and otherwise shows it as `ignored` with the reason.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::claude_oracle;

use common::peers::{inherited_path, peer, run};
use common::stand_in::write_executable;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::codex::codex_mcp_overrides;
use kcap_mcp_registry::{LaunchContext, Policy, RenderError};
use serde_json::{Value, json};
use tempfile::TempDir;

/// A value that needs every kind of escaping a launch lets through: double and single
/// quotes, a backslash before `t` and `n` (must not become a tab or a line break), non-ASCII,
/// `=`, `#`, a backslash and a plain `$HOME` (which no client expands). A control character
/// (a tab, a line break) is refused in every value that names the reviewer or its servers,
/// by the plan (`RenderError::ForbiddenChar`) and by `export`: [`CONTROL`].
const HOSTILE: &str = "a1 \"dq\" 'sq'\\ttab\\nnl \u{e9}\u{4e2d} =eq #hash \\bs $HOME";

/// A hostile URL-like value in the same spirit.
const HOSTILE_URL: &str = "http://127.0.0.1:9/p?\"q\"='s'&t=\\t #frag \u{e9}$HOME";

/// The control characters a plan refuses in [`HOSTILE`]'s place.
const CONTROL: [char; 2] = ['\t', '\n'];

/// The Windows-style kcap path from the issue.
const WINDOWS_KCAP: &str = r"C:\Program Files\kcap\kcap.exe";

/// A Windows-style value whose backslashes precede `t` and `n` (must not become TAB/LF).
const WINDOWS_URL: &str = r"C:\tools\new";

/// The tests, run by the real-client harness (`tests/common/peers.rs`): a test whose client
/// is missing is reported as ignored, with the reason. Every test function is listed here.
pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    let mut trials = codex::trials();
    trials.extend(claude::trials());
    #[cfg(feature = "cli")]
    trials.extend(exports::trials());
    trials
}

mod claude;
mod codex;
#[cfg(feature = "cli")]
mod exports;

/// Quotes `s` for `/bin/sh` (single quotes; `'` as `'\''`).
fn sh_quote(s: &[u8]) -> Vec<u8> {
    let mut out = b"'".to_vec();
    for &b in s {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

fn ctx(url: &str, path: &str, agent: &str, allowlist: Option<Vec<Option<&str>>>) -> LaunchContext {
    LaunchContext {
        server_url: Some(url.into()),
        kcap_bin: Some(path.into()),
        agent_id: agent.into(),
        mcp_allowlist: allowlist.map(|l| l.into_iter().map(|e| e.map(String::from)).collect()),
        ..LaunchContext::default()
    }
}

/// The full-allowlist tests' allowlist: mixed case and padding, the flow starter, the result channel, an
/// unknown name, a null and a duplicate.
fn case2_allowlist() -> Vec<Option<&'static str>> {
    vec![
        Some("  KCAP-Review "),
        Some("kcap-flows"),
        Some("Kcap-Flow-Result"),
        Some("kcap-unknown"),
        None,
        Some("kcap-review"),
        Some("\tKCAP-SESSIONS"),
        Some("kcap-memory"),
        Some("KCAP-ANALYTICS"),
        Some("kcap-workitems  "),
    ]
}
