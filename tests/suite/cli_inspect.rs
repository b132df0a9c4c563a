//! `kcap-mcp-registry list`, `resolve`, `--help` and `--version`.
#![cfg(feature = "cli")]

use crate::common;

use common::{Run, run, stdout_of};
use kcap_mcp_registry::EnvSource;

#[test]
fn list_table_is_exact() {
    assert_eq!(
        stdout_of(&["list"]),
        format!(
            "\
ID                   FLAGS                                        TOOLS  ARGS             DESCRIPTION
kcap-analytics       read_only,needs_project_cwd                  0/0    mcp analytics    Read-only usage and cost analytics of the project's agent sessions.
kcap-flow-result     injection_only                               2/2    mcp flow-result  Result channel through which a reviewer submits its verdict and messages back to its flow.
kcap-flows           starts_flows,needs_project_cwd,driver_stamp  0/0    mcp flows        Start and steer kcap flows; each started flow launches further agents.
kcap-memory          needs_project_cwd                            0/0    mcp memory       Project memory the agent can read and write; writes persist beyond the review.
kcap-review          read_only                                    6/6    mcp review       Read-only view of the pull request under review: summary, changed files, file context and related sessions.
kcap-review-context  injection_only,read_only                     1/1    mcp review       Read-only review context of a borrowed snapshot: the MCP configs the reviewed branch itself adds or changes.
kcap-sessions        read_only,needs_project_cwd                  5/5    mcp sessions     Search and read recorded agent sessions of the project: summaries, transcripts and single turns.
kcap-workitems       needs_project_cwd                            0/0    mcp workitems    Read and update the project's work items.

registry digest (SHA-256): {}
",
            kcap_mcp_registry::registry::DIGEST
        )
    );
    assert_eq!(
        stdout_of(&["list", "--format", "table"]),
        stdout_of(&["list"])
    );
    let r = run(&["list", "--format", "xml"]);
    assert_eq!((r.code, r.stdout.as_str()), (2, ""));
    assert!(
        r.stderr
            .starts_with("error: invalid value 'xml' for '--format <FORMAT>'"),
        "{}",
        r.stderr
    );
}

#[test]
fn list_json_holds_every_compiled_entry_with_every_field() {
    let out = stdout_of(&["list", "--format", "json"]);
    assert!(out.starts_with("[\n  {\n    \"id\": \"kcap-analytics\",\n"));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let items = json.as_array().unwrap();
    let compiled = kcap_mcp_registry::servers();
    assert_eq!(items.len(), compiled.len());
    for (item, s) in items.iter().zip(compiled) {
        let env: Vec<serde_json::Value> = s
            .env
            .iter()
            .map(|(n, src)| match src {
                EnvSource::Constant(value) => {
                    serde_json::json!({"name": n, "source": {"value": value}})
                }
                _ => serde_json::json!({"name": n, "source": src.name()}),
            })
            .collect();
        let tools: Vec<serde_json::Value> = s
            .tools
            .iter()
            .map(|t| serde_json::json!({"name": t.name, "unattended_safe": t.unattended_safe}))
            .collect();
        assert_eq!(
            *item,
            serde_json::json!({
                "id": s.id,
                "description": s.description,
                "args": s.args,
                "starts_flows": s.starts_flows,
                "allowlistable": s.allowlistable,
                "inject": s.inject.map(|i| i.name()),
                "registered": s.registered,
                "read_only": s.read_only,
                "needs_project_cwd": s.needs_project_cwd,
                "driver_stamp": s.driver_stamp,
                "alias": s.alias,
                "env": env,
                "tools": tools,
            })
        );
    }
    // The result channel's env order (and tool order) is the registry file's.
    assert_eq!(
        items[1]["env"],
        serde_json::json!([
            {"name": "KCAP_URL", "source": "server_url"},
            {"name": "KCAP_FLOW_CAPABILITY_URL", "source": "result_capability_url"},
            {"name": "KCAP_FLOW_AGENT_ID", "source": "agent_id"}
        ])
    );
    assert_eq!(items[1]["tools"][0]["name"], "submit_review_result");
}

const NAMES: [&str; 8] = [
    " KCAP-Review ",
    "kcap-flows",
    "kcap-sessions",
    "kcap-flow-result",
    "nope\n\"x\"",
    "",
    "kcap-review",
    "kcap-memory",
];

/// `resolve` with `first` and then every name of `names` as its own `--allowlist`.
fn resolve_args<'a>(first: &[&'a str], names: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["resolve"];
    args.extend(first);
    for name in names {
        args.extend(["--allowlist", name]);
    }
    args
}

#[test]
fn resolve_names_each_entry_and_exits_0_when_lenient() {
    let args = resolve_args(&[], &NAMES);
    assert_eq!(
        run(&args),
        Run {
            code: 0,
            stdout: r#"" KCAP-Review " -> kcap-review
"kcap-flows" -> skipped (starts_flows): can start flows (recursion guard)
"kcap-sessions" -> kcap-sessions
"kcap-flow-result" -> skipped (injection_only): injection-only, never materialized from an allowlist
"nope\n\"x\"" -> skipped (unknown): not a kcap MCP server
"" -> skipped (blank): blank
"kcap-review" -> skipped (duplicate): duplicate of an earlier entry
"kcap-memory" -> kcap-memory
"#
            .into(),
            stderr: String::new(),
        }
    );
}

#[test]
fn resolve_strict_reports_every_rejection_and_exits_1() {
    let args = resolve_args(&["--strict"], &NAMES);
    assert_eq!(
        run(&args),
        Run {
            code: 1,
            stdout: r#"" KCAP-Review " -> kcap-review
"kcap-flows" -> rejected (starts_flows): the server can start flows
"kcap-sessions" -> kcap-sessions
"kcap-flow-result" -> skipped (injection_only): injection-only, never materialized from an allowlist
"nope\n\"x\"" -> rejected (unknown): it is not a kcap MCP server
"" -> rejected (blank): it is blank
"kcap-review" -> skipped (duplicate): duplicate of an earlier entry
"kcap-memory" -> rejected (not_read_only): the server is not read-only, so its tools need approval
"#
            .into(),
            stderr: String::new(),
        }
    );
    // Read-only, injection-only and duplicate entries pass the strict policy.
    assert_eq!(
        run(&[
            "resolve",
            "--strict",
            "--allowlist",
            "kcap-review,kcap-flow-result",
            "--allowlist=KCAP-REVIEW"
        ])
        .code,
        0
    );
}

#[test]
fn resolve_needs_a_name() {
    let r = run(&["resolve"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("the following required arguments were not provided:\n  --allowlist <A,B,…>"),
        "{}",
        r.stderr
    );
}

#[test]
fn version_and_help_with_an_example_for_every_subcommand() {
    assert_eq!(
        stdout_of(&["--version"]),
        format!(
            "kcap-mcp-registry {} (registry {})\n",
            env!("CARGO_PKG_VERSION"),
            &kcap_mcp_registry::registry::DIGEST[..12]
        )
    );
    let top = stdout_of(&["--help"]);
    assert!(top.contains("Exit codes: 0 success; 1 a problem was found"));
    for sub in [
        &["check"][..],
        &["list"],
        &["resolve"],
        &["render"],
        &["render", "claude"],
        &["render", "codex"],
        &["export"],
        &["export", "claude-mcp-json"],
        &["export", "codex-toml"],
        &["export", "denylist"],
        &["export", "json-schema"],
        &["diff"],
    ] {
        let mut args = sub.to_vec();
        args.push("--help");
        let help = stdout_of(&args);
        let example = help
            .split_once("Example")
            .map(|(_, rest)| rest)
            .unwrap_or_else(|| panic!("no example in `{} --help`", sub.join(" ")));
        assert!(
            example.contains(&format!("kcap-mcp-registry {}", sub[0])),
            "`{}` example: {example}",
            sub.join(" ")
        );
    }
}
