//! `check --against`: drift is what the client's loader model says it does with the file.
//! One named test per row of issue 11's table of measured shapes (each starting from the
//! export), and the `line:column` of findings pinned in all three formats.
#![cfg(feature = "cli")]

use assert_cmd::Command;
use serde_json::{Value, json};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let out = Command::cargo_bin("kcap-mcp-registry")
        .unwrap()
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn export(what: &str) -> String {
    run(&["export", what]).stdout
}

/// Writes `text` as `name` in a fresh directory; runs `check registry --against` with
/// `--format json` plus `extra`; returns the exit code and the `(rule, message)` pairs.
fn check(name: &str, text: &[u8], extra: &[&str]) -> (i32, Vec<(String, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    let mut args = vec![
        "check",
        "registry",
        "--format",
        "json",
        "--against",
        path.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let r = run(&args);
    let findings: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", r.stdout, r.stderr));
    let pairs = findings
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (r.code, pairs)
}

fn claude_with(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut v: Value = serde_json::from_str(&export("claude-mcp-json")).unwrap();
    edit(&mut v["mcpServers"]);
    serde_json::to_vec_pretty(&v).unwrap()
}

fn codex_with(after_review_args: &str) -> Vec<u8> {
    let text = export("codex-toml");
    let anchor = "args = [\"mcp\", \"review\"]\n";
    assert!(text.contains(anchor));
    text.replace(anchor, &format!("{anchor}{after_review_args}"))
        .into_bytes()
}

#[test]
fn claude_env_null_is_skipped_by_claude_code() {
    let text = claude_with(|s| s["kcap-review"]["env"] = Value::Null);
    let (code, found) = check(".mcp.json", &text, &[]);
    assert_eq!(code, 1);
    assert_eq!(found, [("drift-skipped".into(), found[0].1.clone())]);
    assert!(
        found[0]
            .1
            .starts_with("skipped by Claude Code: MCP server `kcap-review` in "),
        "{}",
        found[0].1
    );
    assert!(
        found[0].1.ends_with(": `env` is null, not an object"),
        "{}",
        found[0].1
    );
}

#[test]
fn claude_enabled_false_is_ignored_and_started() {
    let (code, found) = check(
        ".mcp.json",
        &claude_with(|s| s["kcap-review"]["enabled"] = json!(false)),
        &[],
    );
    assert_eq!((code, found), (0, vec![]));
}

#[test]
fn claude_enabled_no_is_ignored_and_started() {
    let (code, found) = check(
        ".mcp.json",
        &claude_with(|s| s["kcap-review"]["enabled"] = json!("no")),
        &[],
    );
    assert_eq!((code, found), (0, vec![]));
}

#[test]
fn claude_type_stdio_with_a_url_runs_the_command() {
    for url in [json!("http://127.0.0.1:9/mcp"), Value::Null] {
        let text = claude_with(|s| {
            s["kcap-review"]["type"] = json!("stdio");
            s["kcap-review"]["url"] = url;
        });
        assert_eq!(check(".mcp.json", &text, &[]), (0, vec![]));
    }
}

#[test]
fn claude_a_leading_bom_loads_every_server_and_a_second_is_rejected() {
    let mut text = "\u{feff}".as_bytes().to_vec();
    text.extend(export("claude-mcp-json").into_bytes());
    assert_eq!(check(".mcp.json", &text, &[]), (0, vec![]));
    let mut twice = "\u{feff}".as_bytes().to_vec();
    twice.extend(text);
    let (code, found) = check(".mcp.json", &twice, &[]);
    assert_eq!(code, 1);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, "drift-rejected");
    assert!(
        found[0].1.contains("it is not valid JSON"),
        "{}",
        found[0].1
    );
}

#[test]
fn claude_an_invalid_neighbour_is_skipped_alone() {
    let text = claude_with(|s| s["other"] = json!({"command": "x", "args": ["x", 1]}));
    assert_eq!(check(".mcp.json", &text, &[]), (0, vec![]));
}

#[test]
fn claude_local_scope_servers_load_for_their_project() {
    let servers: Value =
        serde_json::from_str::<Value>(&export("claude-mcp-json")).unwrap()["mcpServers"].clone();
    let text =
        serde_json::to_vec(&json!({"projects": {"/srv/p": {"mcpServers": servers}}})).unwrap();
    assert_eq!(
        check(".claude.json", &text, &["--project", "/srv/p"]),
        (0, vec![])
    );
    // Without --project, each project is checked and named.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude.json");
    std::fs::write(&path, &text).unwrap();
    let r = run(&["check", "registry", "--against", path.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(
            "(Claude Code) for project /srv/p starts the registry's 6 allowlistable servers"
        ),
        "{}",
        r.stdout
    );
    // Another project sees only the (empty) user scope.
    let (code, found) = check(".claude.json", &text, &["--project", "/srv/q"]);
    assert_eq!(code, 1);
    assert_eq!(found.len(), 6);
    assert!(found.iter().all(|(rule, _)| rule == "drift-missing"));
}

#[test]
fn codex_type_sse_with_a_command_runs_the_command() {
    assert_eq!(
        check("config.toml", &codex_with("type = \"sse\"\n"), &[]),
        (0, vec![])
    );
}

#[test]
fn codex_cwd_5_rejects_the_whole_file() {
    let (code, found) = check("config.toml", &codex_with("cwd = 5\n"), &[]);
    assert_eq!(code, 1);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "drift-rejected");
    assert!(
        found[0].1.starts_with("Codex CLI rejects this file, "),
        "{}",
        found[0].1
    );
    assert!(
        found[0]
            .1
            .ends_with(": `mcp_servers.kcap-review.cwd` is a number, not a string"),
        "{}",
        found[0].1
    );
}

#[test]
fn codex_enabled_tools_empty_keeps_the_server_without_tools() {
    let (code, found) = check("config.toml", &codex_with("enabled_tools = []\n"), &[]);
    assert_eq!(code, 1);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "drift-tools");
}

#[test]
fn codex_a_config_with_only_a_model_loads_with_no_servers() {
    let (code, found) = check("config.toml", b"model = \"o3\"\n", &[]);
    assert_eq!(code, 1);
    assert_eq!(found.len(), 6);
    assert!(found.iter().all(|(rule, _)| rule == "drift-missing"));
}

#[test]
fn codex_url_and_command_rejects_the_whole_file() {
    let (code, found) = check(
        "config.toml",
        &codex_with("url = \"http://127.0.0.1:9/mcp\"\n"),
        &[],
    );
    assert_eq!(code, 1);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "drift-rejected");
    assert!(
        found[0]
            .1
            .contains("`mcp_servers.kcap-review.url` is not supported for a command server"),
        "{}",
        found[0].1
    );
}

#[test]
fn codex_a_top_level_profile_is_rejected_and_profile_files_merge() {
    let mut text = b"profile = \"p\"\n".to_vec();
    text.extend(export("codex-toml").into_bytes());
    let (code, found) = check("config.toml", &text, &[]);
    assert_eq!((code, found[0].0.as_str()), (1, "drift-rejected"));
    // A profile file next to config.toml disables kcap-review.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.toml"), export("codex-toml")).unwrap();
    std::fs::write(
        dir.path().join("p.config.toml"),
        "[mcp_servers.kcap-review]\nenabled = false\n",
    )
    .unwrap();
    let config = dir.path().join("config.toml");
    let r = run(&[
        "check",
        "registry",
        "--format",
        "json",
        "--against",
        config.to_str().unwrap(),
        "--codex-profile",
        "p",
    ]);
    assert_eq!(r.code, 1);
    let findings: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(findings[0]["rule"], "drift-disabled");
    assert!(
        findings[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("p.config.toml")
    );
    assert_eq!(
        (findings[0]["line"].as_u64(), findings[0]["column"].as_u64()),
        (Some(2), Some(11))
    );
}

#[test]
fn claude_export_refuses_a_value_claude_code_would_expand() {
    let r = run(&[
        "export",
        "claude-mcp-json",
        "--command",
        "/opt/${X_DIR:-bin}/kcap",
    ]);
    assert_eq!(r.code, 2);
    assert_eq!(r.stdout, "");
    assert_eq!(
        r.stderr,
        "error: cannot register MCP server `kcap-analytics` with Claude Code: `command` contains `${`, which Claude Code expands and cannot escape; use a value without `${` (e.g. another --kcap-bin or --server-url)\n"
    );
}

#[test]
fn drift_findings_carry_line_and_column_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, codex_with("cwd = 5\n")).unwrap();
    let p = path.to_str().unwrap();
    let message = format!(
        "Codex CLI rejects this file, {p}: `mcp_servers.kcap-review.cwd` is a number, not a string"
    );
    let help = "fix it: until then Codex CLI starts none of the servers in the configuration";
    let human = run(&["check", "registry", "--against", p]);
    assert_eq!(
        human.stderr,
        format!(
            "error[drift-rejected]: {message}\n--> {p}:27:7\n = help: {help}\n\nerror: 1 drift finding\n"
        )
    );
    let json = run(&["check", "registry", "--format", "json", "--against", p]);
    let v: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        v,
        json!([{"file": p, "line": 27, "column": 7, "end_line": 27, "end_column": 8,
                "rule": "drift-rejected", "severity": "error", "message": message, "help": help}])
    );
    let github = run(&["check", "registry", "--format", "github", "--against", p]);
    assert_eq!(
        github.stdout,
        format!(
            "::error file={p},line=27,col=7,endLine=27,endColumn=8,title=drift-rejected::{message}%0Ahelp: {help}\n"
        )
    );
}
