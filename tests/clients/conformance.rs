//! Conformance of the renderers against the real clients: Codex CLI 0.169.0 and Claude Code
//! 2.1.197 (issue 5). Install them with `bash scripts/install-peers.sh`, then run
//! `KCAP_CODEX_BIN=… KCAP_CLAUDE_BIN=… cargo test --test clients conformance::`. The Claude cases run
//! unchanged on Claude Code 2.1.332 with `KCAP_CLAUDE_BIN=$KCAP_CLAUDE_NEXT_BIN`, the Codex
//! cases on Codex CLI 0.171.0 with `KCAP_CODEX_BIN=$KCAP_CODEX_NEXT_BIN` (as `.ci/run` does).
//!
//! Oracles, both offline (no login, no model, no network):
//! - Codex: `codex <codex_reviewer_args> mcp list --json` (and `mcp get NAME --json` for the
//!   tool filters) prints the effective MCP server table after our `-c` overrides have merged
//!   onto `$CODEX_HOME/config.toml`: an empty one for the argv's own values, and, for the
//!   isolation, the plan's (`codex_plan` carried out, the daemon's `$CODEX_HOME` a hostile
//!   user's).
//! - Claude Code: `claude <claude_reviewer_args> -- <prompt>` with stdin from `/dev/null`
//!   and the API at a dead local port starts every configured MCP server; once the
//!   recorders have settled the oracle kills it (`tests/claude_oracle`). Our `kcap_bin`
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
use kcap_mcp_registry::clients::claude::claude_reviewer_args;
use kcap_mcp_registry::clients::codex::{codex_mcp_overrides, codex_plan, codex_reviewer_args};
use kcap_mcp_registry::{LaunchContext, Policy, RenderError};
use serde_json::{Value, json};
use tempfile::TempDir;

/// A value that needs every kind of escaping: double and single quotes, a tab, a newline,
/// non-ASCII, `=`, `#`, a backslash and a plain `$HOME` (which no client expands).
const HOSTILE: &str = "a1 \"dq\" 'sq'\ttab\nnl \u{e9}\u{4e2d} =eq #hash \\bs $HOME";

/// A hostile URL-like value in the same spirit.
const HOSTILE_URL: &str = "http://127.0.0.1:9/p?\"q\"='s'&t=\t#frag\n\u{e9}$HOME";

/// [`HOSTILE_URL`] without its control characters, which `export` refuses (the library
/// renderers still take, and escape, them): what the registration exports are read with.
#[cfg(feature = "cli")]
const EXPORT_URL: &str = "http://127.0.0.1:9/p?\"q\"='s'&t=\\t #frag \u{e9}$HOME";

/// The Windows-style kcap path from the issue.
const WINDOWS_KCAP: &str = r"C:\Program Files\kcap\kcap.exe";

/// A Windows-style value whose backslashes precede `t` and `n` (must not become TAB/LF).
const WINDOWS_URL: &str = r"C:\tools\new";

/// The tests, run by the real-client harness (`tests/common/peers.rs`): a test whose client
/// is missing is reported as ignored, with the reason. Every test function is listed here.
pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        codex_baseline_enables_exactly_the_result_channel,
        codex_full_allowlist_gives_result_channel_plus_allowed_servers,
        codex_hostile_user_config_is_not_read_by_the_planned_reviewer,
        codex_same_named_user_fields_merge_into_ours_only_outside_the_plan,
        codex_values_reach_the_table_exactly,
        codex_gated_enables_no_server,
        claude_baseline_starts_exactly_the_result_channel,
        claude_full_allowlist_starts_result_channel_plus_allowed_servers,
        claude_windows_path_and_values_arrive_byte_for_byte,
        claude_hostile_path_and_values_arrive_byte_for_byte,
        claude_dollar_brace_is_refused_before_any_process_starts,
        claude_gated_starts_no_server,
        #[cfg(feature = "cli")]
        codex_exported_toml_lists_exactly_the_allowlistable_servers,
        #[cfg(feature = "cli")]
        claude_exported_mcp_json_loads_without_diagnostics,
    ]
}

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

// ------------------------------------------------------------------------------------------
// Codex
// ------------------------------------------------------------------------------------------

/// A throwaway Codex setup: its own `HOME`, `CODEX_HOME` and cwd (the daemon's, for a
/// plan), and a launch directory for plans.
struct Codex {
    bin: PathBuf,
    home: TempDir,
    codex_home: TempDir,
    cwd: TempDir,
    launch: TempDir,
    /// The executor's wrapper script and what it wrote.
    scratch: TempDir,
}

impl Codex {
    fn new(bin: PathBuf) -> Codex {
        Codex {
            bin,
            home: tempfile::tempdir().unwrap(),
            codex_home: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
            launch: tempfile::tempdir().unwrap(),
            scratch: tempfile::tempdir().unwrap(),
        }
    }

    /// Writes the user's `$CODEX_HOME/config.toml`.
    fn user_config(&self, toml: &str) {
        std::fs::write(self.codex_home.path().join("config.toml"), toml).unwrap();
    }

    /// A command for this setup: cleared environment (so no `RUST_BACKTRACE`), only `PATH`,
    /// `HOME` and `CODEX_HOME`, in the fresh cwd.
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.env_clear()
            .env("PATH", inherited_path())
            .env("HOME", self.home.path())
            .env("CODEX_HOME", self.codex_home.path())
            .current_dir(self.cwd.path());
        cmd
    }

    /// `codex <reviewer args> <tail…>`; panics unless it exits 0; returns stdout as JSON.
    fn json(&self, reviewer_args: &[String], tail: &[&str]) -> Value {
        let mut cmd = self.command();
        cmd.args(reviewer_args).args(tail);
        json_of(cmd, tail)
    }

    /// `codex <plan argv> <tail…>` as the daemon launches the reviewer: `ctx` (with this
    /// setup's launch directory) rendered by [`codex_plan`] and carried out by the library's
    /// executor (`common::carry`), Codex run with exactly the plan's environment built from
    /// this setup's (the daemon's `HOME`, `CODEX_HOME` and `PATH`), in the plan's cwd (this
    /// setup's when `ctx` names no worktree).
    fn planned(&self, ctx: &LaunchContext, tail: &[&str]) -> Value {
        let mut ctx = ctx.clone();
        ctx.launch_dir = Some(self.launch.path().to_str().unwrap().into());
        // A plan without a worktree still removes worktree paths, which the executor refuses
        // without a cwd: the daemon's cwd stands in as the worktree.
        if ctx.worktree.is_none() {
            ctx.worktree = Some(self.cwd.path().to_str().unwrap().into());
        }
        let plan = codex_plan(
            &ctx,
            &ctx.resolve(Policy::Lenient).unwrap(),
            Policy::Lenient,
        )
        .unwrap_or_else(|e| panic!("codex_plan: {e}"));
        let daemon: BTreeMap<String, String> = [
            ("PATH", inherited_path()),
            ("HOME", self.home.path().into()),
            ("CODEX_HOME", self.codex_home.path().into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into_string().unwrap()))
        .collect();
        // The executor carries the plan out; its client binary, a wrapper, runs Codex with
        // the plan's argv up to the prompt and then `tail`.
        let out = self.scratch.path().join("out.json");
        let wrapper =
            common::carry::subcommand(self.scratch.path(), "codex-sub", &self.bin, tail, &out);
        // In the sandbox: Codex behind the wrapper, and the scratch directory (the wrapper
        // and its output only) writable.
        let options = common::carry::reach(
            kcap_mcp_registry::launch::Options::default().with_die_with_parent(true),
            &[&self.bin],
            &[self.scratch.path()],
        );
        let mut t = common::carry::Terminal::start(&plan, &wrapper, &daemon, &options);
        let status = t.wait_exit(Duration::from_secs(30));
        t.stop();
        let what = format!("codex … {}", tail.join(" "));
        let stdout = std::fs::read(&out).unwrap_or_default();
        assert!(
            status.is_some_and(|s| s.success()),
            "{what} failed ({status:?}):\n{}",
            std::fs::read_to_string(self.scratch.path().join("out.json.err")).unwrap_or_default()
        );
        serde_json::from_slice(&stdout).unwrap_or_else(|e| {
            panic!(
                "{what} printed no JSON ({e}):\n{}",
                String::from_utf8_lossy(&stdout)
            )
        })
    }

    /// The effective server table of the planned reviewer: [`Codex::planned`] with
    /// `mcp list --json`.
    fn plan_list(&self, ctx: &LaunchContext) -> Value {
        self.planned(ctx, &["mcp", "list", "--json"])
    }

    /// The effective server table: `codex <reviewer args> mcp list --json`.
    fn list(&self, reviewer_args: &[String]) -> Value {
        self.json(reviewer_args, &["mcp", "list", "--json"])
    }

    /// One server with its tool filters: `codex <reviewer args> mcp get NAME --json`.
    fn get(&self, reviewer_args: &[String], name: &str) -> Value {
        self.json(reviewer_args, &["mcp", "get", name, "--json"])
    }
}

/// Runs `cmd`; panics unless it exits 0; returns stdout as JSON.
fn json_of(cmd: Command, tail: &[&str]) -> Value {
    let what = format!("codex … {}", tail.join(" "));
    let out = run(cmd, &what);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        out.stderr
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what} printed no JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The reviewer argv we hand Codex, which must carry no prompt (the oracle appends
/// `mcp list --json` to it).
fn codex_args(ctx: &LaunchContext) -> Vec<String> {
    assert!(ctx.prompt.is_none(), "the oracle runs without a prompt");
    let resolution = ctx.resolve(Policy::Lenient).unwrap();
    let args = codex_reviewer_args(ctx, &resolution)
        .unwrap_or_else(|e| panic!("codex_reviewer_args: {e}"));
    assert_eq!(args.last().map(String::as_str), Some("--no-alt-screen"));
    args
}

/// One of our stdio servers as `codex mcp list --json` shows it with no user entry of the
/// same name.
fn codex_ours(name: &str, command: &str, args: &[&str], env: Value) -> Value {
    json!({
        "name": name,
        "enabled": true,
        "disabled_reason": null,
        "transport": {
            "type": "stdio",
            "command": command,
            "args": args,
            "env": env,
            "env_vars": [],
            "cwd": null,
        },
        "startup_timeout_sec": null,
        "tool_timeout_sec": null,
        "auth_status": "unsupported",
    })
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

fn codex_baseline_enables_exactly_the_result_channel() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let codex = Codex::new(bin);
    let args = codex_args(&ctx(
        "http://127.0.0.1:5100",
        "/usr/bin/kcap",
        "agent-1",
        None,
    ));
    assert_eq!(
        codex.list(&args),
        json!([codex_ours(
            "kcap-flow-result",
            "/usr/bin/kcap",
            &["mcp", "flow-result"],
            json!({"KCAP_URL": "http://127.0.0.1:5100", "KCAP_FLOW_AGENT_ID": "agent-1"}),
        )])
    );
    let got = codex.get(&args, "kcap-flow-result");
    assert_eq!(got["enabled_tools"], Value::Null);
    assert_eq!(got["disabled_tools"], Value::Null);
}

fn codex_full_allowlist_gives_result_channel_plus_allowed_servers() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let codex = Codex::new(bin);
    let url = "http://127.0.0.1:5100";
    let args = codex_args(&ctx(
        url,
        "/usr/bin/kcap",
        "agent-2",
        Some(case2_allowlist()),
    ));
    let only_url = json!({ "KCAP_URL": url });
    // `mcp list --json` sorts by name.
    assert_eq!(
        codex.list(&args),
        json!([
            codex_ours(
                "kcap-analytics",
                "/usr/bin/kcap",
                &["mcp", "analytics"],
                only_url.clone()
            ),
            codex_ours(
                "kcap-flow-result",
                "/usr/bin/kcap",
                &["mcp", "flow-result"],
                json!({"KCAP_URL": url, "KCAP_FLOW_AGENT_ID": "agent-2"}),
            ),
            codex_ours(
                "kcap-memory",
                "/usr/bin/kcap",
                &["mcp", "memory"],
                only_url.clone()
            ),
            codex_ours(
                "kcap-review",
                "/usr/bin/kcap",
                &["mcp", "review"],
                only_url.clone()
            ),
            codex_ours(
                "kcap-sessions",
                "/usr/bin/kcap",
                &["mcp", "sessions"],
                only_url.clone()
            ),
            codex_ours(
                "kcap-workitems",
                "/usr/bin/kcap",
                &["mcp", "workitems"],
                only_url
            ),
        ])
    );
}

/// The hostile user config of the isolation tests: a user `kcap-flows`, a dotted name, a URL server, and
/// user entries named like ours carrying fields that would merge into ours.
const HOSTILE_CODEX_CONFIG: &str = r#"
[mcp_servers.kcap-flows]
command = "/usr/bin/kcap"
args = ["mcp", "flows"]
env = { KCAP_URL = "http://user.example" }

[mcp_servers."corp.flows"]
command = "corp-flows"
args = ["serve"]

[mcp_servers.remote]
url = "https://mcp.example.com/mcp"
bearer_token_env_var = "REMOTE_TOKEN"

[mcp_servers.kcap-review]
command = "/opt/user/kcap"
args = ["mcp", "review", "--user-flag"]
enabled = false
cwd = "/srv/user-project"
env_vars = ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN"]
env = { KCAP_URL = "http://user.example" }
startup_timeout_sec = 1
tool_timeout_sec = 2.5
enabled_tools = ["get_transcript"]
disabled_tools = ["get_pr_summary"]

[mcp_servers.kcap-flow-result]
command = "/opt/user/kcap"
enabled = false
env_vars = ["HOME"]
disabled_tools = ["submit_review_result"]
"#;

/// The hostile user configuration in the daemon's `CODEX_HOME`: Codex starts its servers
/// and merges its same-named entries into ours when the argv runs there (the argv alone
/// isolates nothing), and reads none of it when the reviewer is launched as the plan says.
fn codex_hostile_user_config_is_not_read_by_the_planned_reviewer() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let codex = Codex::new(bin);
    codex.user_config(HOSTILE_CODEX_CONFIG);
    let worktree = tempfile::tempdir().unwrap();
    let worktree = worktree.path().to_str().unwrap();

    // Unrendered, the user's own entries are what Codex would start.
    let enabled = |table: &Value| -> Vec<String> {
        table
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["enabled"] == true)
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        enabled(&codex.list(&[])),
        ["corp.flows", "kcap-flows", "remote"]
    );

    let mut context = ctx(
        "http://127.0.0.1:5100",
        "/usr/bin/kcap",
        "agent-3",
        Some(vec![Some("kcap-review")]),
    );
    context.worktree = Some(worktree.into());
    // The argv under the user's CODEX_HOME: the user's servers start beside ours.
    assert_eq!(
        enabled(&codex.list(&codex_args(&context))),
        [
            "corp.flows",
            "kcap-flow-result",
            "kcap-flows",
            "kcap-review",
            "remote"
        ]
    );
    // The plan: exactly ours, with exactly our values.
    let url_env = json!({ "KCAP_URL": "http://127.0.0.1:5100" });
    assert_eq!(
        codex.plan_list(&context),
        json!([
            codex_ours(
                "kcap-flow-result",
                "/usr/bin/kcap",
                &["mcp", "flow-result"],
                json!({"KCAP_URL": "http://127.0.0.1:5100", "KCAP_FLOW_AGENT_ID": "agent-3"}),
            ),
            codex_ours("kcap-review", "/usr/bin/kcap", &["mcp", "review"], url_env),
        ])
    );
    // The tool filters only `mcp get` shows: none, not the user's.
    for name in ["kcap-review", "kcap-flow-result"] {
        let got = codex.planned(&context, &["mcp", "get", name, "--json"]);
        assert_eq!(
            (&got["enabled_tools"], &got["disabled_tools"]),
            (&json!(null), &json!(null)),
            "{name}"
        );
    }
}

/// A user entry named like ours with a field we do not set (an extra `env` key) merges into
/// our server when the argv runs under the user's `CODEX_HOME`, and does not under the plan.
fn codex_same_named_user_fields_merge_into_ours_only_outside_the_plan() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let context = ctx(
        "http://127.0.0.1:5100",
        "/usr/bin/kcap",
        "agent-3",
        Some(vec![Some("kcap-review")]),
    );
    let resolution = context.resolve(Policy::Lenient).unwrap();
    let codex = Codex::new(bin);
    codex.user_config(
        "[mcp_servers.kcap-review]\ncommand = \"/opt/user/kcap\"\n\
         env = { KCAP_URL = \"http://user.example\", EXTRA_SECRET = \"s3cr3t\" }\n",
    );
    let mut args = Vec::new();
    for o in codex_mcp_overrides(&context, &resolution).unwrap() {
        args.extend(["-c".to_string(), o]);
    }
    let review = codex.get(&args, "kcap-review");
    assert_eq!(
        review["transport"]["env"],
        json!({"KCAP_URL": "http://127.0.0.1:5100", "EXTRA_SECRET": "s3cr3t"})
    );
    let review = codex.planned(&context, &["mcp", "get", "kcap-review", "--json"]);
    assert_eq!(
        review["transport"]["env"],
        json!({"KCAP_URL": "http://127.0.0.1:5100"})
    );
}

fn codex_values_reach_the_table_exactly() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let codex = Codex::new(bin);
    let allowlist = Some(vec![Some("kcap-review")]);

    // Windows paths: `\P`, `\k`, `\t` and `\n` must stay a backslash and a letter.
    let args = codex_args(&ctx(WINDOWS_URL, WINDOWS_KCAP, HOSTILE, allowlist.clone()));
    assert_eq!(
        codex.list(&args),
        json!([
            codex_ours(
                "kcap-flow-result",
                "C:\\Program Files\\kcap\\kcap.exe",
                &["mcp", "flow-result"],
                json!({
                    "KCAP_URL": "C:\\tools\\new",
                    "KCAP_FLOW_AGENT_ID":
                        "a1 \"dq\" 'sq'\ttab\nnl \u{e9}\u{4e2d} =eq #hash \\bs $HOME",
                }),
            ),
            codex_ours(
                "kcap-review",
                "C:\\Program Files\\kcap\\kcap.exe",
                &["mcp", "review"],
                json!({"KCAP_URL": "C:\\tools\\new"}),
            ),
        ])
    );

    // Quotes, tab, newline, non-ASCII, `=`, `#`, `$HOME` and `${HOME}` (Codex expands
    // neither) in the path and the URL.
    let path = format!("/opt/{HOSTILE} ${{HOME}}/kcap");
    let args = codex_args(&ctx(HOSTILE_URL, &path, "${HOME}", allowlist));
    assert_eq!(
        codex.list(&args),
        json!([
            codex_ours(
                "kcap-flow-result",
                "/opt/a1 \"dq\" 'sq'\ttab\nnl \u{e9}\u{4e2d} =eq #hash \\bs $HOME ${HOME}/kcap",
                &["mcp", "flow-result"],
                json!({
                    "KCAP_URL": "http://127.0.0.1:9/p?\"q\"='s'&t=\t#frag\n\u{e9}$HOME",
                    "KCAP_FLOW_AGENT_ID": "${HOME}",
                }),
            ),
            codex_ours(
                "kcap-review",
                "/opt/a1 \"dq\" 'sq'\ttab\nnl \u{e9}\u{4e2d} =eq #hash \\bs $HOME ${HOME}/kcap",
                &["mcp", "review"],
                json!({"KCAP_URL": "http://127.0.0.1:9/p?\"q\"='s'&t=\t#frag\n\u{e9}$HOME"}),
            ),
        ])
    );
}

fn codex_gated_enables_no_server() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    // No user config: nothing at all.
    let codex = Codex::new(bin.clone());
    let mut gated = ctx(
        "http://127.0.0.1:5100",
        "/usr/bin/kcap",
        "agent-5",
        Some(vec![Some("kcap-review")]),
    );
    gated.server_url = None;
    assert_eq!(codex.list(&codex_args(&gated)), json!([]));

    // A user config with servers, and a blank kcap path: the planned reviewer has none.
    let codex = Codex::new(bin);
    codex.user_config(
        "[mcp_servers.kcap-review]\ncommand = \"/opt/user/kcap\"\nargs = [\"mcp\", \"review\"]\n\n\
         [mcp_servers.\"corp.flows\"]\ncommand = \"corp-flows\"\n\n\
         [mcp_servers.remote]\nurl = \"https://mcp.example.com/mcp\"\n",
    );
    let mut gated = ctx(
        "http://127.0.0.1:5100",
        " \t",
        "agent-5",
        Some(vec![Some("kcap-review")]),
    );
    gated.worktree = Some(codex.cwd.path().to_str().unwrap().into());
    assert_eq!(codex.plan_list(&gated), json!([]));
}

// ------------------------------------------------------------------------------------------
// Claude Code
// ------------------------------------------------------------------------------------------

/// What one recorder invocation saw.
#[derive(Debug, PartialEq, Eq)]
struct Record {
    /// `$0` and the arguments, byte for byte.
    argv: Vec<Vec<u8>>,
    /// The whole environment.
    env: BTreeMap<Vec<u8>, Vec<u8>>,
    /// `pwd -P`.
    cwd: Vec<u8>,
}

impl Record {
    /// The `KCAP_*` variables.
    fn kcap_env(&self) -> BTreeMap<&[u8], &[u8]> {
        self.env
            .iter()
            .filter(|(k, _)| k.starts_with(b"KCAP_"))
            .map(|(k, v)| (k.as_slice(), v.as_slice()))
            .collect()
    }
}

/// A throwaway Claude Code setup: its own `HOME`, project dir (the cwd) and recorder output.
struct Claude {
    bin: PathBuf,
    /// `claude --version`, e.g. `2.1.197`.
    version: String,
    home: TempDir,
    project: TempDir,
    scratch: TempDir,
    /// Prepended to `PATH`, for a capacitor path without a `/`.
    path_prefix: Option<PathBuf>,
}

impl Claude {
    fn new(bin: PathBuf) -> Claude {
        let claude = Claude {
            version: claude_oracle::version(&bin),
            bin,
            home: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
            scratch: tempfile::tempdir().unwrap(),
            path_prefix: None,
        };
        std::fs::create_dir(claude.records_dir()).unwrap();
        claude
    }

    fn records_dir(&self) -> PathBuf {
        self.scratch.path().join("records")
    }

    /// Writes the recorder at `path` (created with its parent dirs). It records `$0` and its
    /// arguments (NUL-separated), its whole environment (`env -0`) and `pwd -P` into
    /// `<records>/<pid>.*`, marks itself done, and exits 0 at once (Claude Code does not
    /// wait for its MCP servers and would leave a long-running one orphaned).
    fn recorder_at(&self, path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut body = b"#!/bin/sh\nd=".to_vec();
        body.extend(sh_quote(self.records_dir().as_os_str().as_bytes()));
        body.extend_from_slice(
            b"\n: > \"$d/$$.start\"\n\
              printf '%s\\0' \"$0\" \"$@\" > \"$d/$$.argv\"\n\
              env -0 > \"$d/$$.env\"\n\
              pwd -P > \"$d/$$.cwd\"\n\
              : > \"$d/$$.done\"\n\
              exit 0\n",
        );
        write_executable(path, &body);
    }

    /// The environment Claude Code itself gets (everything else is cleared).
    fn parent_env(&self) -> Vec<(&'static str, OsString)> {
        let mut path = OsString::new();
        if let Some(prefix) = &self.path_prefix {
            path.push(prefix);
            path.push(":");
        }
        path.push(inherited_path());
        vec![
            ("PATH", path),
            ("HOME", self.home.path().into()),
            // `--permission-mode bypassPermissions` refuses to run as root otherwise (CI
            // containers run as root).
            ("IS_SANDBOX", "1".into()),
            ("ANTHROPIC_API_KEY", "dummy".into()),
            // Offline even where the machine has a network: every HTTP request (the API,
            // telemetry) goes to a dead local port; no update check.
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9".into()),
            ("HTTPS_PROXY", "http://127.0.0.1:9".into()),
            ("HTTP_PROXY", "http://127.0.0.1:9".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
        ]
    }

    /// Runs `claude <args> -- <prompt>` in the project dir with stdin from `/dev/null` until
    /// the servers it starts have been recorded (`claude_oracle::run_until_recorded`), and
    /// returns every distinct recorder invocation, sorted by argv.
    fn run(&self, args: &[String]) -> Vec<Record> {
        assert!(
            !args.iter().any(|a| a == "--"),
            "the oracle gives the prompt itself"
        );
        let mut cmd = Command::new(&self.bin);
        cmd.env_clear()
            .envs(self.parent_env())
            .args(args)
            .args(["--", claude_oracle::PROMPT])
            .current_dir(self.project.path());
        let log = self.scratch.path().join("claude.log");
        claude_oracle::run_until_recorded(cmd, &self.records_dir(), &log);
        let records = self.records();
        // Consumed: the next run of the same setup starts from an empty log.
        for entry in std::fs::read_dir(self.records_dir()).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        records
    }

    /// Waits until every started recorder is done and none has started for a while.
    fn records(&self) -> Vec<Record> {
        let dir = self.records_dir();
        let marks = |ext: &str| -> BTreeSet<String> {
            std::fs::read_dir(&dir)
                .unwrap()
                .filter_map(|e| {
                    let name = e.unwrap().file_name().into_string().unwrap();
                    name.strip_suffix(ext).map(str::to_string)
                })
                .collect()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut settled_since: Option<(Instant, BTreeSet<String>)> = None;
        let pids = loop {
            let (started, done) = (marks(".start"), marks(".done"));
            if started == done {
                match &settled_since {
                    Some((t, seen)) if *seen == started => {
                        if t.elapsed() >= Duration::from_millis(500) {
                            break started;
                        }
                    }
                    _ => settled_since = Some((Instant::now(), started.clone())),
                }
            } else {
                settled_since = None;
            }
            assert!(
                Instant::now() < deadline,
                "recorders did not finish: started {started:?}, done {done:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let read = |pid: &str, ext: &str| std::fs::read(dir.join(format!("{pid}.{ext}"))).unwrap();
        let mut records: Vec<Record> = pids
            .iter()
            .map(|pid| {
                let argv = read(pid, "argv");
                let argv = argv
                    .strip_suffix(b"\0")
                    .expect("argv ends with NUL")
                    .split(|&b| b == 0)
                    .map(<[u8]>::to_vec)
                    .collect();
                let env = read(pid, "env");
                let env = env
                    .strip_suffix(b"\0")
                    .unwrap_or(&env)
                    .split(|&b| b == 0)
                    .map(|kv| {
                        let eq = kv.iter().position(|&b| b == b'=').expect("NAME=value");
                        (kv[..eq].to_vec(), kv[eq + 1..].to_vec())
                    })
                    .collect();
                let mut cwd = read(pid, "cwd");
                assert_eq!(cwd.pop(), Some(b'\n'));
                Record { argv, env, cwd }
            })
            .collect();
        records.sort_by(|a, b| a.argv.cmp(&b.argv));
        // Claude Code 2.1.328 starts a server that exits at once a second time, with the same
        // argv, env and cwd: one record per distinct start.
        records.dedup();
        records
    }

    /// Checks what every recorder shares: run in the project dir, and an environment of
    /// exactly Claude Code's own, the variables Claude Code adds, `PWD` (set by `/bin/sh`)
    /// and `ours` (the names of the entry's `env`).
    fn assert_common(&self, record: &Record, ours: &[&str]) {
        self.assert_common_in(record, ours, true);
    }

    /// [`Claude::assert_common`] for servers started by a reviewer session (`session`) or by
    /// `claude mcp list`.
    fn assert_common_in(&self, record: &Record, ours: &[&str], session: bool) {
        let project = self.project.path().canonicalize().unwrap();
        assert_eq!(record.cwd, project.as_os_str().as_bytes());
        let expected: BTreeSet<&[u8]> = self
            .parent_env()
            .iter()
            .map(|(k, _)| k.as_bytes())
            .chain(
                claude_oracle::added_env(&self.version, session)
                    .into_iter()
                    .map(str::as_bytes),
            )
            .chain([b"PWD".as_slice()])
            .chain(ours.iter().map(|k| k.as_bytes()))
            .collect();
        let got: BTreeSet<&[u8]> = record.env.keys().map(Vec::as_slice).collect();
        assert_eq!(
            got.iter()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>(),
            expected
                .iter()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>(),
            "unexpected environment names"
        );
    }
}

fn os(s: impl Into<OsString>) -> Vec<u8> {
    s.into().into_vec()
}

fn argv(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

fn kcap_env<'a>(pairs: &[(&'a str, &'a str)]) -> BTreeMap<&'a [u8], &'a [u8]> {
    pairs
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
        .collect()
}

/// What a recorder invocation saw that the cases pin: argv and the `KCAP_*` variables.
type Seen<'a> = (Vec<Vec<u8>>, BTreeMap<&'a [u8], &'a [u8]>);

fn seen(records: &[Record]) -> Vec<Seen<'_>> {
    records
        .iter()
        .map(|r| (r.argv.clone(), r.kcap_env()))
        .collect()
}

/// The reviewer argv we hand Claude Code.
fn claude_args(ctx: &LaunchContext) -> Vec<String> {
    claude_reviewer_args(ctx, &ctx.resolve(Policy::Lenient).unwrap())
        .unwrap_or_else(|e| panic!("claude_reviewer_args: {e}"))
}

fn claude_baseline_starts_exactly_the_result_channel() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let claude = Claude::new(bin);
    let kcap = claude.scratch.path().join("bin/kcap");
    claude.recorder_at(&kcap);
    let mut context = ctx(
        "http://127.0.0.1:5100",
        kcap.to_str().unwrap(),
        "agent-1",
        None,
    );
    // Model and effort are rendered too; the oracle adds the prompt (the API is a dead port).
    context.model = Some("sonnet".into());
    context.effort = Some("high".into());
    let args = claude_args(&context);
    assert_eq!(
        args[..4],
        [
            "--permission-mode",
            "bypassPermissions",
            "--strict-mcp-config",
            "--mcp-config"
        ]
    );
    assert_eq!(
        args[5..],
        [
            "--disallowedTools",
            "Agent",
            "--setting-sources=",
            "--settings",
            r#"{"skipDangerousModePermissionPrompt":true}"#,
            "--effort",
            "high",
            "--model",
            "sonnet"
        ]
    );

    let records = claude.run(&args);
    assert_eq!(records.len(), 1, "{records:#?}");
    let r = &records[0];
    assert_eq!(
        r.argv,
        argv(&[kcap.as_os_str().as_bytes(), b"mcp", b"flow-result"])
    );
    assert_eq!(
        r.kcap_env(),
        kcap_env(&[
            ("KCAP_URL", "http://127.0.0.1:5100"),
            ("KCAP_FLOW_AGENT_ID", "agent-1")
        ])
    );
    claude.assert_common(r, &["KCAP_URL", "KCAP_FLOW_AGENT_ID"]);
}

fn claude_full_allowlist_starts_result_channel_plus_allowed_servers() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let claude = Claude::new(bin);
    let kcap = claude.scratch.path().join("bin/kcap");
    claude.recorder_at(&kcap);
    let url = "http://127.0.0.1:5100";
    let args = claude_args(&ctx(
        url,
        kcap.to_str().unwrap(),
        "agent-2",
        Some(case2_allowlist()),
    ));
    let records = claude.run(&args);
    let k = kcap.as_os_str().as_bytes();
    let got = seen(&records);
    let only_url = kcap_env(&[("KCAP_URL", url)]);
    assert_eq!(
        got,
        [
            (argv(&[k, b"mcp", b"analytics"]), only_url.clone()),
            (
                argv(&[k, b"mcp", b"flow-result"]),
                kcap_env(&[("KCAP_URL", url), ("KCAP_FLOW_AGENT_ID", "agent-2")])
            ),
            (argv(&[k, b"mcp", b"memory"]), only_url.clone()),
            (argv(&[k, b"mcp", b"review"]), only_url.clone()),
            (argv(&[k, b"mcp", b"sessions"]), only_url.clone()),
            (argv(&[k, b"mcp", b"workitems"]), only_url),
        ]
    );
    for r in &records {
        let ours: &[&str] = if r.argv[2] == b"flow-result" {
            &["KCAP_URL", "KCAP_FLOW_AGENT_ID"]
        } else {
            &["KCAP_URL"]
        };
        claude.assert_common(r, ours);
    }
}

fn claude_windows_path_and_values_arrive_byte_for_byte() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    // `C:\Program Files\kcap\kcap.exe` has no `/`, so Claude Code looks it up in PATH: the
    // recorder is a file of exactly that name in a directory put first in PATH.
    let mut claude = Claude::new(bin);
    let bin_dir = claude.scratch.path().join("bin");
    claude.recorder_at(&bin_dir.join(WINDOWS_KCAP));
    claude.path_prefix = Some(bin_dir.clone());
    let args = claude_args(&ctx(
        WINDOWS_URL,
        WINDOWS_KCAP,
        HOSTILE,
        Some(vec![Some("kcap-review")]),
    ));
    let records = claude.run(&args);
    let exe = os(bin_dir.join(WINDOWS_KCAP));
    let got = seen(&records);
    assert_eq!(
        got,
        [
            (
                argv(&[&exe, b"mcp", b"flow-result"]),
                kcap_env(&[
                    ("KCAP_URL", "C:\\tools\\new"),
                    (
                        "KCAP_FLOW_AGENT_ID",
                        "a1 \"dq\" 'sq'\ttab\nnl \u{e9}\u{4e2d} =eq #hash \\bs $HOME"
                    ),
                ])
            ),
            (
                argv(&[&exe, b"mcp", b"review"]),
                kcap_env(&[("KCAP_URL", "C:\\tools\\new")])
            ),
        ]
    );
    claude.assert_common(&records[0], &["KCAP_URL", "KCAP_FLOW_AGENT_ID"]);
    claude.assert_common(&records[1], &["KCAP_URL"]);
}

fn claude_hostile_path_and_values_arrive_byte_for_byte() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let claude = Claude::new(bin);
    // Quotes, a tab, a newline, non-ASCII, `=`, `#`, a backslash and `$HOME` in the path.
    let kcap = claude.scratch.path().join(HOSTILE).join("kcap");
    claude.recorder_at(&kcap);
    let kcap_str = kcap.to_str().unwrap();
    assert!(kcap_str.contains('\n') && kcap_str.contains('\t'));
    let args = claude_args(&ctx(
        HOSTILE_URL,
        kcap_str,
        "agent \u{1F600} #4=x",
        Some(vec![Some("KCAP-SESSIONS")]),
    ));
    let records = claude.run(&args);
    let got = seen(&records);
    let k = kcap_str.as_bytes();
    assert_eq!(
        got,
        [
            (
                argv(&[k, b"mcp", b"flow-result"]),
                kcap_env(&[
                    (
                        "KCAP_URL",
                        "http://127.0.0.1:9/p?\"q\"='s'&t=\t#frag\n\u{e9}$HOME"
                    ),
                    ("KCAP_FLOW_AGENT_ID", "agent \u{1F600} #4=x"),
                ])
            ),
            (
                argv(&[k, b"mcp", b"sessions"]),
                kcap_env(&[(
                    "KCAP_URL",
                    "http://127.0.0.1:9/p?\"q\"='s'&t=\t#frag\n\u{e9}$HOME"
                )])
            ),
        ]
    );
    claude.assert_common(&records[0], &["KCAP_URL", "KCAP_FLOW_AGENT_ID"]);
    claude.assert_common(&records[1], &["KCAP_URL"]);
}

fn claude_dollar_brace_is_refused_before_any_process_starts() {
    // Refused by the renderer, for every field it can reach; no client is involved.
    let base = ctx(
        "http://127.0.0.1:5100",
        "/usr/bin/kcap",
        "agent-4",
        Some(vec![Some("kcap-review")]),
    );
    let refused = |ctx: &LaunchContext, field: &str| {
        assert_eq!(
            claude_reviewer_args(ctx, &ctx.resolve(Policy::Lenient).unwrap()),
            Err(RenderError::Expansion {
                client: kcap_mcp_registry::clients::Client::Claude,
                server: "kcap-flow-result".to_string(),
                field: field.into(),
                expands: kcap_mcp_registry::clients::claude::EXPANDS,
            })
        );
    };
    let mut c = base.clone();
    c.kcap_bin = Some("/opt/${HOME}/kcap".into());
    refused(&c, "command");
    let mut c = base.clone();
    c.server_url = Some("http://${HOME}:5100".into());
    refused(&c, "env.KCAP_URL");
    let mut c = base.clone();
    c.agent_id = "a-${HOME:-x}".into();
    refused(&c, "env.KCAP_FLOW_AGENT_ID");
    let mut c = base.clone();
    c.agent_id = "a-$${HOME}".into();
    refused(&c, "env.KCAP_FLOW_AGENT_ID");

    // Why: given such a value, the real client substitutes its own environment, with no
    // escape. A hand-built config (what the renderer would emit) shows it.
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let claude = Claude::new(bin);
    let kcap = claude.scratch.path().join("bin/kcap");
    claude.recorder_at(&kcap);
    let config = json!({"mcpServers": {"kcap-flow-result": {
        "command": kcap,
        "args": ["mcp", "flow-result"],
        "env": {"KCAP_URL": "http://127.0.0.1:5100", "KCAP_FLOW_AGENT_ID": "a-$${HOME}"},
    }}});
    let args: Vec<String> = [
        "--permission-mode",
        "bypassPermissions",
        "--strict-mcp-config",
        "--mcp-config",
        &config.to_string(),
        "--disallowedTools",
        "Agent",
    ]
    .map(String::from)
    .into();
    let records = claude.run(&args);
    assert_eq!(records.len(), 1);
    let home = claude.home.path().to_str().unwrap();
    assert_eq!(
        records[0].kcap_env(),
        kcap_env(&[
            ("KCAP_URL", "http://127.0.0.1:5100"),
            ("KCAP_FLOW_AGENT_ID", &format!("a-${home}")),
        ])
    );
}

fn claude_gated_starts_no_server() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let claude = Claude::new(bin);
    let kcap = claude.scratch.path().join("bin/kcap");
    claude.recorder_at(&kcap);
    for gated in [
        LaunchContext {
            server_url: None,
            ..ctx(
                "",
                kcap.to_str().unwrap(),
                "agent-5",
                Some(vec![Some("kcap-review")]),
            )
        },
        ctx(
            "  ",
            kcap.to_str().unwrap(),
            "agent-5",
            Some(vec![Some("kcap-review")]),
        ),
        ctx(
            "http://127.0.0.1:5100",
            "",
            "agent-5",
            Some(vec![Some("kcap-review")]),
        ),
    ] {
        let args = claude_args(&gated);
        assert_eq!(args[4], r#"{"mcpServers":{}}"#);
        let records = claude.run(&args);
        assert!(records.is_empty(), "{records:#?}");
    }

    // Control: the same setup, ungated, does start the recorder.
    let args = claude_args(&ctx(
        "http://127.0.0.1:5100",
        kcap.to_str().unwrap(),
        "agent-5",
        None,
    ));
    assert_eq!(claude.run(&args).len(), 1);
}

// ------------------------------------------------------------------------------------------
// The registration exports, read by the real clients
// ------------------------------------------------------------------------------------------

/// `kcap-mcp-registry export <args…>`; panics unless it exits 0.
#[cfg(feature = "cli")]
fn export(args: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"));
    cmd.arg("export").args(args);
    let out = run(cmd, "kcap-mcp-registry export");
    assert!(out.status.success(), "export {args:?}: {}", out.stderr);
    String::from_utf8(out.stdout).unwrap()
}

#[cfg(feature = "cli")]
fn codex_exported_toml_lists_exactly_the_allowlistable_servers() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let server = |name: &str, command: &str, args: &[&str], env: Value, cwd: Value| {
        json!({
            "name": name,
            "enabled": true,
            "disabled_reason": null,
            "transport": {
                "type": "stdio", "command": command, "args": args, "env": env,
                "env_vars": [], "cwd": cwd,
            },
            "startup_timeout_sec": null,
            "tool_timeout_sec": null,
            "auth_status": "unsupported",
        })
    };

    // Defaults: `kcap` from PATH, no env, no cwd.
    let codex = Codex::new(bin.clone());
    codex.user_config(&export(&["codex-toml"]));
    let none = Value::Null;
    assert_eq!(
        codex.list(&[]),
        json!([
            server(
                "kcap-analytics",
                "kcap",
                &["mcp", "analytics"],
                none.clone(),
                none.clone()
            ),
            server(
                "kcap-flows",
                "kcap",
                &["mcp", "flows"],
                none.clone(),
                none.clone()
            ),
            server(
                "kcap-memory",
                "kcap",
                &["mcp", "memory"],
                none.clone(),
                none.clone()
            ),
            server(
                "kcap-review",
                "kcap",
                &["mcp", "review"],
                none.clone(),
                none.clone()
            ),
            server(
                "kcap-sessions",
                "kcap",
                &["mcp", "sessions"],
                none.clone(),
                none.clone()
            ),
            server(
                "kcap-workitems",
                "kcap",
                &["mcp", "workitems"],
                none.clone(),
                none
            ),
        ])
    );

    // With a command, a server URL and a project dir (only `needs_project_cwd` servers get it).
    let codex = Codex::new(bin);
    let project = codex.cwd.path().to_str().unwrap().to_string();
    codex.user_config(&export(&[
        "codex-toml",
        "--command",
        WINDOWS_KCAP,
        "--server-url",
        EXPORT_URL,
        "--project-dir",
        &project,
    ]));
    let env = json!({"KCAP_URL": "http://127.0.0.1:9/p?\"q\"='s'&t=\\t #frag \u{e9}$HOME"});
    let cwd = json!(project);
    let kcap = "C:\\Program Files\\kcap\\kcap.exe";
    assert_eq!(
        codex.list(&[]),
        json!([
            server(
                "kcap-analytics",
                kcap,
                &["mcp", "analytics"],
                env.clone(),
                cwd.clone()
            ),
            server(
                "kcap-flows",
                kcap,
                &["mcp", "flows"],
                env.clone(),
                cwd.clone()
            ),
            server(
                "kcap-memory",
                kcap,
                &["mcp", "memory"],
                env.clone(),
                cwd.clone()
            ),
            server(
                "kcap-review",
                kcap,
                &["mcp", "review"],
                env.clone(),
                Value::Null
            ),
            server(
                "kcap-sessions",
                kcap,
                &["mcp", "sessions"],
                env.clone(),
                cwd.clone()
            ),
            server("kcap-workitems", kcap, &["mcp", "workitems"], env, cwd),
        ])
    );
}

#[cfg(feature = "cli")]
fn claude_exported_mcp_json_loads_without_diagnostics() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    // `claude mcp list` in a project holding the default export: every server listed with
    // its command line, pending approval (so none is started), and no "MCP config
    // diagnostics" block (Claude Code prints it on stdout for entries it rejects).
    let claude = Claude::new(bin.clone());
    let mcp_json = claude.project.path().join(".mcp.json");
    std::fs::write(&mcp_json, export(&["claude-mcp-json"])).unwrap();
    let list = |claude: &Claude| {
        let mut cmd = Command::new(&claude.bin);
        cmd.env_clear()
            .envs(claude.parent_env())
            .args(["mcp", "list"])
            .current_dir(claude.project.path());
        let out = run(cmd, "claude mcp list");
        assert!(out.status.success(), "claude mcp list: {}", out.stderr);
        String::from_utf8(out.stdout).unwrap()
    };
    let pending = "\u{23f8} Pending approval (run `claude` to approve)";
    assert_eq!(
        list(&claude),
        format!(
            "Checking MCP server health\u{2026}\n\n\
             kcap-analytics: kcap mcp analytics - {pending}\n\
             kcap-flows: kcap mcp flows - {pending}\n\
             kcap-memory: kcap mcp memory - {pending}\n\
             kcap-review: kcap mcp review - {pending}\n\
             kcap-sessions: kcap mcp sessions - {pending}\n\
             kcap-workitems: kcap mcp workitems - {pending}\n"
        )
    );
    assert!(seen(&claude.records()).is_empty());

    // Control: the same oracle does report an entry Claude Code rejects.
    let mut broken: Value =
        serde_json::from_str(&std::fs::read_to_string(&mcp_json).unwrap()).unwrap();
    broken["mcpServers"]["kcap-review"]["args"] = json!("mcp review");
    std::fs::write(&mcp_json, broken.to_string()).unwrap();
    let out = list(&claude);
    assert!(
        out.contains("MCP config diagnostics")
            && out.contains("[kcap-review] mcpServers.kcap-review: Skipped"),
        "{out}"
    );

    // Approved (user setting `enableAllProjectMcpServers`), `mcp list` starts every server
    // for a health check: with a recorder as the command, each gets exactly its argv, the
    // exported env and the project dir.
    let claude = Claude::new(bin);
    let kcap = claude.scratch.path().join("bin/kcap");
    claude.recorder_at(&kcap);
    std::fs::create_dir(claude.home.path().join(".claude")).unwrap();
    std::fs::write(
        claude.home.path().join(".claude/settings.json"),
        r#"{"enableAllProjectMcpServers":true}"#,
    )
    .unwrap();
    std::fs::write(
        claude.project.path().join(".mcp.json"),
        export(&[
            "claude-mcp-json",
            "--command",
            kcap.to_str().unwrap(),
            "--server-url",
            EXPORT_URL,
        ]),
    )
    .unwrap();
    // 2.1.328 adds the reason (measured); 2.1.197 prints none.
    let failed = if claude.version == "2.1.197" {
        "\u{2718} Failed to connect"
    } else {
        "\u{2718} Failed to connect \u{2014} CONNECTION_CLOSED: Connection closed"
    };
    let k = kcap.to_str().unwrap();
    assert_eq!(
        list(&claude),
        format!(
            "Checking MCP server health\u{2026}\n\n\
             kcap-analytics: {k} mcp analytics - {failed}\n\
             kcap-flows: {k} mcp flows - {failed}\n\
             kcap-memory: {k} mcp memory - {failed}\n\
             kcap-review: {k} mcp review - {failed}\n\
             kcap-sessions: {k} mcp sessions - {failed}\n\
             kcap-workitems: {k} mcp workitems - {failed}\n"
        )
    );
    let records = claude.records();
    let url = kcap_env(&[(
        "KCAP_URL",
        "http://127.0.0.1:9/p?\"q\"='s'&t=\\t #frag \u{e9}$HOME",
    )]);
    let k = k.as_bytes();
    // `mcp list` checks each server more than once; every start must be one of these.
    let expected: BTreeSet<Seen<'_>> = [
        b"analytics".as_slice(),
        b"flows",
        b"memory",
        b"review",
        b"sessions",
        b"workitems",
    ]
    .into_iter()
    .map(|name| (argv(&[k, b"mcp", name]), url.clone()))
    .collect();
    let got: BTreeSet<Seen<'_>> = seen(&records).into_iter().collect();
    assert_eq!(got, expected);
    for r in &records {
        claude.assert_common_in(r, &["KCAP_URL"], false);
    }
}
