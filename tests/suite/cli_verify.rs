//! `kcap-mcp-registry verify` against stand-in clients (no real client needed), and its
//! recorder MCP server: a client that starts a user's server beside the injected ones fails
//! the run (exit 1) with the server and its file named; one that starts nothing is reported
//! as not run (exit 2) once the bound passes; a missing binary is refused before anything
//! runs (exit 2). `tests/clients/verify_clients.rs` runs `verify` against the real clients.

use crate::common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::stand_in::sh_script;
use common::{Run, bin, finish};
use serde_json::Value;

/// What a stand-in Gemini CLI writes to its debug log (`GEMINI_DEBUG_LOG_FILE`) before it
/// answers `session/new`, as the real one does (`clients::gemini::ready`): each server of
/// `--allowed-mcp-server-names` connected, then the end of the session's setup. The
/// executor sends no prompt without these lines (`servers_ready`). Shell: defines
/// `servers_ready`, to call before the answer.
const GEMINI_READY: &str = r#"names=; prev=
for a in "$@"; do [ "$prev" = --allowed-mcp-server-names ] && names="$a"; prev="$a"; done
servers_ready() {
  for n in $(printf '%s' "$names" | tr ',' ' '); do
    printf "[t] [DEBUG] Registering notification handlers for server '%s'\n" "$n" >> "$GEMINI_DEBUG_LOG_FILE"
  done
  printf '[t] [DEBUG] [STARTUP] StartupProfiler.flush() called\n' >> "$GEMINI_DEBUG_LOG_FILE"
}"#;

/// A stand-in ACP client for `verify gemini`, in `/bin/sh`. It answers `--version`, then
/// `initialize` and `session/new` by the ids they come with; at `session/new` it starts the
/// two servers the direct launch injects as a client would (the recorder `verify` made, at
/// `../../records/` from the worktree it runs in, with exactly their arguments and `KCAP_*`
/// variables), asks each for its tools, then does whatever `extra` says, and logs its
/// servers ready ([`GEMINI_READY`]).
fn stand_in(dir: &Path, extra: &str) -> PathBuf {
    let body = format!(
        r#"[ "$1" = --version ] && {{ echo "stand-in 1.0"; exit 0; }}
{GEMINI_READY}
rec="$(cd ../.. && pwd)/records/kcap-verify-recorder"
list='{{"jsonrpc":"2.0","id":1,"method":"tools/list"}}'
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*)
      printf '{{"jsonrpc":"2.0","id":%s,"result":{{"protocolVersion":1}}}}\n' "$id";;
    *'"method":"session/new"'*)
      printf '%s\n' "$list" | env KCAP_URL=http://127.0.0.1:9/kcap KCAP_FLOW_AGENT_ID=kcap-verify "$rec" mcp flow-result >/dev/null
      printf '%s\n' "$list" | env KCAP_URL=http://127.0.0.1:9/kcap "$rec" mcp review >/dev/null
      {extra}
      servers_ready
      printf '{{"jsonrpc":"2.0","id":%s,"result":{{"sessionId":"s1"}}}}\n' "$id";;
  esac
done"#
    );
    sh_script(dir, "gemini", &body)
}

/// Runs `verify gemini` with `args` after `--client-bin <client>`.
fn verify(client: &Path, args: &[&str]) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = bin();
    cmd.env("TMPDIR", tmp.path())
        .args(["verify", "gemini", "--client-bin"])
        .arg(client)
        .args(args);
    let run = finish(&mut cmd);
    // The throwaway root is gone afterwards.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    run
}

#[test]
fn a_client_that_starts_the_users_server_fails_the_run_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    // Like a client that read the daemon user's `~/.gemini/settings.json`.
    let client = stand_in(
        dir.path(),
        r#"printf '%s\n' "$list" | "$rec" hostile user kcap-review >/dev/null"#,
    );
    let run = verify(&client, &["--scenario", "direct", "--timeout", "30"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stderr, "");
    let fail: Vec<&str> = run.stdout.lines().filter(|l| l.contains("FAIL")).collect();
    assert_eq!(
        fail,
        [
            "  FAIL no-user-server         the user configuration's entry ran: server \
             `kcap-review` of home/.gemini/settings.json",
            "  verdict: FAILS",
        ],
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.starts_with("verify gemini (stand-in 1.0; "),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains(
        "  ok   injected-started       2 of 2 listed their tools: kcap-flow-result \
         (kcap-verify-recorder mcp flow-result), kcap-review (kcap-verify-recorder mcp review)\n"
    ));
}

/// A stand-in terminal client for `verify claude`, in `/bin/sh`: it answers `--version`,
/// starts the two servers the direct launch injects as Claude Code would (from the worktree
/// it runs in), asks each for its tools, does what `extra` says, and waits.
fn claude_stand_in(dir: &Path, extra: &str) -> PathBuf {
    let body = format!(
        r#"[ "$1" = --version ] && {{ echo "2.1.197 (stand-in)"; exit 0; }}
rec="$(cd ../.. && pwd)/records/kcap-verify-recorder"
list='{{"jsonrpc":"2.0","id":1,"method":"tools/list"}}'
printf '%s\n' "$list" | env KCAP_URL=http://127.0.0.1:9/kcap KCAP_FLOW_AGENT_ID=kcap-verify "$rec" mcp flow-result >/dev/null
printf '%s\n' "$list" | env KCAP_URL=http://127.0.0.1:9/kcap "$rec" mcp review >/dev/null
{extra}
echo "> Reply with the word ok."
sleep 60"#
    );
    sh_script(dir, "claude", &body)
}

#[test]
fn a_claude_that_starts_the_users_server_fails_the_run_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    // Like a Claude Code that read the daemon user's `~/.claude.json`.
    let client = claude_stand_in(
        dir.path(),
        r#"printf '%s\n' "$list" | "$rec" hostile user kcap-review >/dev/null"#,
    );
    let tmp = tempfile::tempdir().unwrap();
    let run = finish(
        bin()
            .env("TMPDIR", tmp.path())
            .args(["verify", "claude", "--client-bin"])
            .arg(&client)
            .args(["--scenario", "direct", "--timeout", "30"]),
    );
    assert_eq!(run.code, 1, "{run:?}");
    let fail: Vec<&str> = run.stdout.lines().filter(|l| l.contains("FAIL")).collect();
    assert_eq!(
        fail,
        [
            "  FAIL no-user-server         the user configuration's entry ran: server \
             `kcap-review` of home/.claude.json",
            "  verdict: FAILS",
        ],
        "{}",
        run.stdout
    );
    // Without it, the same stand-in holds.
    let client = claude_stand_in(dir.path(), ":");
    let run = finish(
        bin()
            .env("TMPDIR", tmp.path())
            .args(["verify", "claude", "--client-bin"])
            .arg(&client)
            .args(["--scenario", "direct", "--timeout", "30"]),
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("  verdict: holds\n"), "{}", run.stdout);
}

#[test]
fn the_json_report_names_the_check_and_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let client = stand_in(
        dir.path(),
        r#"printf '%s\n' "$list" | env KCAP_URL=http://127.0.0.1:9/other "$rec" mcp review >/dev/null
      printf '%s\n' "$list" | "$rec" hostile project hook-SessionStart >/dev/null"#,
    );
    let run = verify(
        &client,
        &[
            "--scenario",
            "direct",
            "--timeout",
            "30",
            "--format",
            "json",
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let reports: Value = serde_json::from_str(&run.stdout).unwrap();
    let report = &reports[0];
    assert_eq!(reports.as_array().unwrap().len(), 1);
    assert_eq!(report["client"], "gemini");
    assert_eq!(report["client_version"], "stand-in 1.0");
    assert_eq!(report["proven_on"], serde_json::json!(["0.61.0"]));
    assert_eq!(report["proven_version"], false);
    assert_eq!(report["scenario"], "direct");
    assert_eq!(report["verdict"], "fails");
    let failed: Vec<(&str, &str)> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| (c["name"].as_str().unwrap(), c["detail"].as_str().unwrap()))
        .collect();
    assert_eq!(
        failed,
        [
            (
                "no-project-server",
                "the project configuration's entry ran: hook `hook-SessionStart` of \
                 parent/worktree/.gemini/settings.json"
            ),
            (
                "env-exact",
                "`kcap-verify-recorder mcp review` had KCAP_* {\"KCAP_URL\": \
             \"http://127.0.0.1:9/other\"}, the launch gives {\"KCAP_URL\": \
             \"http://127.0.0.1:9/kcap\"}"
            )
        ]
    );
    let origins: Vec<&str> = report["started"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["origin"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(origins, ["hostile", "injected", "injected", "unknown"]);
    let hook = &report["started"][0]["origin"];
    assert_eq!(hook["scope"], "project");
    assert_eq!(hook["kind"], "hook");
    assert_eq!(hook["file"], "parent/worktree/.gemini/settings.json");
}

#[test]
fn a_client_that_starts_nothing_is_reported_as_not_run_after_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    // It logs its servers ready without starting them: `verify`'s own check finds it out.
    let body = format!(
        r#"[ "$1" = --version ] && {{ echo "stand-in 1.0"; exit 0; }}
{GEMINI_READY}
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) printf '{{"jsonrpc":"2.0","id":%s,"result":{{"protocolVersion":1}}}}\n' "$id";;
    *'"method":"session/new"'*) servers_ready; printf '{{"jsonrpc":"2.0","id":%s,"result":{{"sessionId":"s1"}}}}\n' "$id";;
  esac
done"#
    );
    let client = sh_script(dir.path(), "gemini", &body);
    let run = verify(&client, &["--scenario", "direct", "--timeout", "2"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stdout.contains(
            "  verdict: could not run: wait for the injected servers: not every one listed \
             its tools within 2 s\n"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("  FAIL injected-started "),
        "{}",
        run.stdout
    );
}

#[test]
fn a_missing_client_binary_is_refused_before_anything_runs() {
    let run = verify(Path::new("/nonexistent/gemini"), &[]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stdout, "");
    assert_eq!(
        run.stderr,
        "error: verify gemini (direct): could not run: check the program /nonexistent/gemini: \
         No such file or directory (os error 2) (give the client's binary, e.g. \
         `--client-bin $(command -v gemini)`)\n"
    );
}

#[test]
fn a_client_that_exits_at_once_is_reported_with_the_step() {
    let run = verify(Path::new("/bin/true"), &["--scenario", "direct"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.starts_with(
            "error: verify gemini (direct): could not run: carry the plan out: ACP initialize"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn a_client_without_a_measured_isolation_is_not_offered() {
    let run = common::run(&["verify", "cursor", "--client-bin", "/bin/true"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.starts_with(
            "error: invalid value 'cursor' for '<CLIENT>'\n  [possible values: claude, codex, \
             gemini, opencode, copilot, qwen]"
        ),
        "{}",
        run.stderr
    );
}

/// The versions `Client::proven_on` names are the ones `scripts/install-peers.sh` pins (the
/// versions the real-client tests run on).
#[test]
fn the_proven_versions_are_the_pinned_ones() {
    use kcap_mcp_registry::clients::Client;
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install-peers.sh"),
    )
    .unwrap();
    let pinned = |var: &str| -> String {
        let line = script
            .lines()
            .find(|l| l.starts_with(&format!("{var}=")))
            .unwrap_or_else(|| panic!("install-peers.sh sets no {var}"));
        line[var.len() + 1..].to_owned()
    };
    let expected = [
        (
            Client::Claude,
            vec![pinned("CLAUDE_VERSION"), pinned("CLAUDE_NEXT_VERSION")],
        ),
        (
            Client::Codex,
            vec![pinned("CODEX_VERSION"), pinned("CODEX_NEXT_VERSION")],
        ),
        (Client::Gemini, vec![pinned("GEMINI_VERSION")]),
        (Client::OpenCode, vec![pinned("OPENCODE_VERSION")]),
        (Client::Copilot, vec![pinned("COPILOT_VERSION")]),
        (Client::Cursor, vec![]),
        (Client::Kiro, vec![]),
        (Client::Antigravity, vec![]),
    ];
    for (client, versions) in expected {
        assert_eq!(client.proven_on(), versions, "{client}");
    }
}

/// The recorder is the binary started by the name `kcap-verify-recorder`: it records its
/// argv, environment and cwd next to that name, and answers MCP.
#[test]
fn the_recorder_records_its_start_and_answers_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("kcap-verify-recorder");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kcap-mcp-registry"), &link).unwrap();
    let mut child = Command::new(&link)
        .args(["mcp", "review"])
        .env_clear()
        .env("KCAP_URL", "http://127.0.0.1:9/kcap")
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let requests = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"server/discover"}"#,
    ];
    let mut stdin = child.stdin.take().unwrap();
    for line in requests {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let answers: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 3);
    assert_eq!(
        answers[0]["result"]["capabilities"]["tools"],
        serde_json::json!({})
    );
    assert_eq!(answers[1]["result"]["tools"][0]["name"], "recorded");
    assert_eq!(answers[2]["error"]["code"], -32601);
    let records = kcap_mcp_registry::ops::verify::read_records(dir.path()).unwrap();
    assert_eq!(records.len(), 1);
    let record = &records[0];
    assert_eq!(record.argv, [link.to_str().unwrap(), "mcp", "review"]);
    assert_eq!(
        record.env.iter().collect::<Vec<_>>(),
        [(
            &"KCAP_URL".to_owned(),
            &"http://127.0.0.1:9/kcap".to_owned()
        )]
    );
    assert_eq!(Path::new(&record.cwd), dir.path().canonicalize().unwrap());
    assert!(record.listed_tools);
}
