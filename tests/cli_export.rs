//! `kcap-mcp-registry export …` and `check --against`: exact exports, determinism, and drift
//! reports, including that every registration export shows no drift against the registry.
#![cfg(feature = "cli")]

mod common;

use common::{Run, run, stdout_of};

/// The golden files in `tests/fixtures/cli/export/`; regenerate one with
/// `cargo run -- export <what> > tests/fixtures/cli/export/<file>` after reviewing the change.
fn golden(file: &str) -> String {
    std::fs::read_to_string(format!("tests/fixtures/cli/export/{file}")).unwrap()
}

#[test]
fn claude_mcp_json_is_exact_and_deterministic() {
    let out = stdout_of(&["export", "claude-mcp-json"]);
    assert_eq!(out, golden(".mcp.json"));
    assert_eq!(out, stdout_of(&["export", "claude-mcp-json"]));
    assert!(out.starts_with(
        "{\n  \"mcpServers\": {\n    \"kcap-analytics\": {\n      \"command\": \"kcap\",\n      \"args\": [\n        \"mcp\",\n        \"analytics\"\n      ],\n      \"description\": \"Read-only usage and cost analytics of the project's agent sessions.\"\n    },\n"
    ));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&String> = json["mcpServers"].as_object().unwrap().keys().collect();
    // Every allowlistable entry; never the injection-only result channel.
    assert_eq!(
        names,
        [
            "kcap-analytics",
            "kcap-flows",
            "kcap-memory",
            "kcap-review",
            "kcap-sessions",
            "kcap-workitems"
        ]
    );
}

#[test]
fn claude_mcp_json_options_set_command_and_env() {
    let out = stdout_of(&[
        "export",
        "claude-mcp-json",
        "--command",
        "/opt/kcap \"x\"/kcap",
        "--server-url",
        "http://127.0.0.1:5100",
    ]);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        json["mcpServers"]["kcap-review"],
        serde_json::json!({
            "command": "/opt/kcap \"x\"/kcap",
            "args": ["mcp", "review"],
            "env": {"KCAP_URL": "http://127.0.0.1:5100"},
            "description": "Read-only view of the pull request under review: summary, changed files, file context and related sessions.",
        })
    );
}

#[test]
fn codex_toml_is_exact_valid_toml_and_deterministic() {
    let out = stdout_of(&["export", "codex-toml"]);
    assert_eq!(out, golden("config.toml"));
    assert_eq!(out, stdout_of(&["export", "codex-toml"]));
    assert!(out.contains(
        "\n# Read-only view of the pull request under review: summary, changed files, file context and related sessions.\n[mcp_servers.kcap-review]\ncommand = \"kcap\"\nargs = [\"mcp\", \"review\"]\n"
    ));
    let table: toml::Table = toml::from_str(&out).unwrap();
    let servers = table["mcp_servers"].as_table().unwrap();
    assert_eq!(servers.len(), 6);
    assert!(!servers.contains_key("kcap-flow-result"));
}

#[test]
fn codex_toml_project_dir_sets_cwd_only_where_needed() {
    let out = stdout_of(&[
        "export",
        "codex-toml",
        "--project-dir",
        "/srv/my \"project\"",
        "--server-url",
        "http://h",
    ]);
    let table: toml::Table = toml::from_str(&out).unwrap();
    let servers = table["mcp_servers"].as_table().unwrap();
    for (id, server) in servers {
        let needs = kcap_mcp_registry::lookup(id).unwrap().needs_project_cwd;
        assert_eq!(
            server.get("cwd").and_then(|c| c.as_str()),
            needs.then_some("/srv/my \"project\""),
            "{id}"
        );
        assert_eq!(server["env"]["KCAP_URL"].as_str(), Some("http://h"));
    }
    assert!(!out.contains("--project-dir DIR to set"));
    let r = run(&["export", "codex-toml", "--project-dir", "relative/dir"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("must be an absolute path"),
        "{}",
        r.stderr
    );
}

#[test]
fn denylist_is_the_flow_starting_ids() {
    assert_eq!(
        stdout_of(&["export", "denylist"]),
        "[\n  \"kcap-flows\"\n]\n"
    );
    assert_eq!(
        stdout_of(&[
            "export",
            "denylist",
            "--registry",
            "tests/fixtures/cli/diff/old"
        ]),
        "[\n  \"kcap-flows\"\n]\n"
    );
    assert_eq!(
        stdout_of(&[
            "export",
            "denylist",
            "--registry",
            "tests/fixtures/cli/diff/new"
        ]),
        "[]\n"
    );
}

#[test]
fn json_schema_is_exact_and_deterministic() {
    let out = stdout_of(&["export", "json-schema"]);
    assert_eq!(out, golden("registry.schema.json"));
    assert_eq!(out, stdout_of(&["export", "json-schema"]));
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap(),
        kcap_mcp_registry::export::json_schema_value()
    );
}

#[test]
fn exporting_from_an_invalid_or_missing_registry_fails() {
    let r = run(&[
        "export",
        "claude-mcp-json",
        "--registry",
        "tests/fixtures/three-violations-two-files",
    ]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout, "");
    assert!(r.stderr.ends_with(
        "error: 3 registry rule violations\nerror: tests/fixtures/three-violations-two-files is not a valid registry; `kcap-mcp-registry check tests/fixtures/three-violations-two-files` shows the same report\n"
    ), "{}", r.stderr);
    let r = run(&[
        "export",
        "denylist",
        "--registry",
        "tests/fixtures/no-such-dir",
    ]);
    assert_eq!(r.code, 2);
}

/// Writes `text` to `name` in a fresh directory and runs `check registry --against` on it.
fn check_against(name: &str, text: &str, extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    let path = path.to_str().unwrap().to_string();
    let mut args = vec!["check", "registry", "--against", &path];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn each_registration_export_shows_no_drift() {
    let cases: [(&str, &[&str], &[&str]); 4] = [
        (".mcp.json", &["export", "claude-mcp-json"], &[]),
        ("config.toml", &["export", "codex-toml"], &[]),
        (
            ".mcp.json",
            &[
                "export",
                "claude-mcp-json",
                "--command",
                "/usr/bin/kcap",
                "--server-url",
                "http://h",
            ],
            &["--command", "/usr/bin/kcap"],
        ),
        (
            "config.toml",
            &[
                "export",
                "codex-toml",
                "--command",
                "/usr/bin/kcap",
                "--project-dir",
                "/srv/p",
            ],
            &["--command", "/usr/bin/kcap"],
        ),
    ];
    for (name, export, check) in cases {
        let text = stdout_of(export);
        let r = check_against(name, &text, check);
        assert_eq!((r.code, r.stderr.as_str()), (0, ""), "{export:?}");
        let client = if name == ".mcp.json" {
            "Claude Code"
        } else {
            "Codex CLI"
        };
        assert!(
            r.stdout.ends_with(&format!(
                "{name} ({client}) registers the registry's 6 allowlistable servers\n"
            )),
            "{}",
            r.stdout
        );
        for format in ["json", "github"] {
            let mut args = check.to_vec();
            args.extend(["--format", format]);
            let r = check_against(name, &text, &args);
            assert_eq!(r.code, 0);
            assert_eq!(r.stdout, if format == "json" { "[]\n" } else { "" });
        }
    }
}

#[test]
fn an_export_checked_with_another_command_drifts() {
    let text = stdout_of(&["export", "claude-mcp-json"]);
    let r = check_against(".mcp.json", &text, &["--command", "/usr/bin/kcap"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stderr.matches("error[drift-command]").count(), 6);
}

const DRIFT_HUMAN: &str = r#"error[drift-command]: MCP server `kcap-memory` runs "/opt/kcap/bin/kcap" in tests/fixtures/cli/drift/.mcp.json, not "kcap"
--> tests/fixtures/cli/drift/.mcp.json
 = help: set its `command` to "kcap" (or pass `--kcap-bin` with the kcap binary this file uses)

error[drift-args]: MCP server `kcap-review` has args ["mcp","review","--verbose"] in tests/fixtures/cli/drift/.mcp.json; the registry has ["mcp","review"]
--> tests/fixtures/cli/drift/.mcp.json
 = help: set its `args` to ["mcp","review"]

error[drift-missing]: MCP server `kcap-workitems` is in the registry but not registered in tests/fixtures/cli/drift/.mcp.json
--> tests/fixtures/cli/drift/.mcp.json
 = help: register it with command "kcap" and args ["mcp","workitems"], or regenerate the file with `kcap-mcp-registry export claude-mcp-json`

error[drift-extra]: tests/fixtures/cli/drift/.mcp.json registers MCP server `github`, which is not in the registry
--> tests/fixtures/cli/drift/.mcp.json
 = help: remove it, or add `registry/github.toml` if it is a kcap MCP server

error[drift-extra]: tests/fixtures/cli/drift/.mcp.json registers `kcap-flow-result`, an injection-only registry entry
--> tests/fixtures/cli/drift/.mcp.json
 = help: remove it: the launcher injects it into reviewers with their agent id, and no client registers it

error[drift-command]: MCP server `kcap-sessions` has no `command` in tests/fixtures/cli/drift/config.toml; the registry runs "kcap"
--> tests/fixtures/cli/drift/config.toml
 = help: set its `command` to "kcap" (or pass `--kcap-bin` with the kcap binary this file uses)

error: 6 drift findings
"#;

#[test]
fn a_drift_report_names_every_difference_in_both_files() {
    assert_eq!(
        run(&[
            "check",
            "--against",
            "tests/fixtures/cli/drift/.mcp.json",
            "--against",
            "tests/fixtures/cli/drift/config.toml",
        ]),
        Run {
            code: 1,
            stdout: String::new(),
            stderr: DRIFT_HUMAN.into(),
        }
    );
}

#[test]
fn a_drift_report_in_json_and_github() {
    let r = run(&[
        "check",
        "--against",
        "tests/fixtures/cli/drift/config.toml",
        "--format",
        "json",
    ]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout,
        r#"[
  {
    "file": "tests/fixtures/cli/drift/config.toml",
    "line": null,
    "column": null,
    "end_line": null,
    "end_column": null,
    "rule": "drift-command",
    "severity": "error",
    "message": "MCP server `kcap-sessions` has no `command` in tests/fixtures/cli/drift/config.toml; the registry runs \"kcap\"",
    "help": "set its `command` to \"kcap\" (or pass `--kcap-bin` with the kcap binary this file uses)"
  }
]
"#
    );
    let r = run(&[
        "check",
        "--against",
        "tests/fixtures/cli/drift/.mcp.json",
        "--format",
        "github",
    ]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout,
        concat!(
            "::error file=tests/fixtures/cli/drift/.mcp.json,title=drift-command::MCP server `kcap-memory` runs \"/opt/kcap/bin/kcap\" in tests/fixtures/cli/drift/.mcp.json, not \"kcap\"%0Ahelp: set its `command` to \"kcap\" (or pass `--kcap-bin` with the kcap binary this file uses)\n",
            "::error file=tests/fixtures/cli/drift/.mcp.json,title=drift-args::MCP server `kcap-review` has args [\"mcp\",\"review\",\"--verbose\"] in tests/fixtures/cli/drift/.mcp.json; the registry has [\"mcp\",\"review\"]%0Ahelp: set its `args` to [\"mcp\",\"review\"]\n",
            "::error file=tests/fixtures/cli/drift/.mcp.json,title=drift-missing::MCP server `kcap-workitems` is in the registry but not registered in tests/fixtures/cli/drift/.mcp.json%0Ahelp: register it with command \"kcap\" and args [\"mcp\",\"workitems\"], or regenerate the file with `kcap-mcp-registry export claude-mcp-json`\n",
            "::error file=tests/fixtures/cli/drift/.mcp.json,title=drift-extra::tests/fixtures/cli/drift/.mcp.json registers MCP server `github`, which is not in the registry%0Ahelp: remove it, or add `registry/github.toml` if it is a kcap MCP server\n",
            "::error file=tests/fixtures/cli/drift/.mcp.json,title=drift-extra::tests/fixtures/cli/drift/.mcp.json registers `kcap-flow-result`, an injection-only registry entry%0Ahelp: remove it: the launcher injects it into reviewers with their agent id, and no client registers it\n",
        )
    );
}

#[test]
fn violations_are_reported_before_any_drift_comparison() {
    let r = run(&[
        "check",
        "tests/fixtures/three-violations-two-files",
        "--against",
        "tests/fixtures/cli/drift/.mcp.json",
    ]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.ends_with("error: 3 registry rule violations\n"));
    assert!(!r.stderr.contains("drift"));
}

#[test]
fn files_that_are_not_registration_files_exit_2_with_the_reason() {
    let neither = "is neither a Claude Code .mcp.json (a JSON object with `mcpServers`) nor a Codex config.toml (TOML with an `[mcp_servers]` table)";
    let cases = [
        (
            "a.json",
            "{\"servers\": {}}",
            format!("{neither}: it is JSON without a top-level `mcpServers` key"),
        ),
        (
            "a.toml",
            "model = \"o4\"\n",
            format!("{neither}: it is TOML without an `mcp_servers` table"),
        ),
        (
            "a.txt",
            "mcp_servers =",
            format!(
                "{neither}: it is not JSON (expected value at line 1 column 1) and not TOML (string values must be quoted, expected literal string)"
            ),
        ),
        (
            "b.json",
            "{\"mcpServers\": {\"k\": {\"command\": \"kcap\", \"args\": \"mcp k\"}}}",
            "`mcpServers.k.args` must be an array of strings".into(),
        ),
        (
            "b.toml",
            "[mcp_servers.\"a.b\"]\ncommand = 7\n",
            "`mcp_servers.\"a.b\".command` must be a string".into(),
        ),
        (
            "c.toml",
            "mcp_servers = 5\n",
            "`mcp_servers` must be a TOML table of servers".into(),
        ),
    ];
    for (name, text, problem) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let r = run(&["check", "--against", path.to_str().unwrap()]);
        assert_eq!(
            r,
            Run {
                code: 2,
                stdout: String::new(),
                stderr: format!("error: {}: {problem}\n", path.display()),
            }
        );
    }
    let r = run(&["check", "--against", "tests/fixtures/cli/no-such-file.json"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with("error: tests/fixtures/cli/no-such-file.json: cannot read it: "),
        "{}",
        r.stderr
    );
}

/// The `(rule, message)` of each finding of `check --format json` output.
fn rules_and_messages(stdout: &str) -> Vec<(String, String)> {
    let findings: serde_json::Value = serde_json::from_str(stdout).unwrap();
    findings
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let field = |k: &str| f[k].as_str().unwrap().to_string();
            (field("rule"), field("message"))
        })
        .collect()
}

#[test]
fn a_disabled_registration_is_drift() {
    let export = run(&["export", "codex-toml"]).stdout;
    let text = export.replace(
        "[mcp_servers.kcap-review]\n",
        "[mcp_servers.kcap-review]\nenabled = false\n",
    );
    assert_ne!(text, export);
    let r = check_against("config.toml", &text, &["--format", "json"]);
    assert_eq!(r.code, 1);
    let rules = rules_and_messages(&r.stdout);
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(rules[0].0, "drift-disabled");
    assert!(
        rules[0]
            .1
            .starts_with("MCP server `kcap-review` is registered in ")
            && rules[0].1.ends_with(" but disabled (`enabled = false`)"),
        "{}",
        rules[0].1
    );
    let bad = export.replace(
        "[mcp_servers.kcap-review]\n",
        "[mcp_servers.kcap-review]\nenabled = \"no\"\n",
    );
    let r = check_against("config.toml", &bad, &[]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("`mcp_servers.\"kcap-review\".enabled` must be a boolean"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_registration_pointed_at_a_url_is_drift() {
    let export = run(&["export", "claude-mcp-json"]).stdout;
    let mut json: serde_json::Value = serde_json::from_str(&export).unwrap();
    let review = json["mcpServers"]["kcap-review"].as_object_mut().unwrap();
    review.insert("type".into(), "http".into());
    review.insert("url".into(), "http://evil.example/mcp".into());
    let text = serde_json::to_string_pretty(&json).unwrap();
    let r = check_against(".mcp.json", &text, &["--format", "json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let found = rules_and_messages(&r.stdout);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "drift-remote");
    assert!(
        found[0]
            .1
            .ends_with("is a remote server (type = \"http\"), not the registry's kcap command"),
        "{}",
        found[0].1
    );
}
