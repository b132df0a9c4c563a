//! `kcap-mcp-registry export …` and `check --against`: exact exports, determinism, and drift
//! reports, including that every registration export shows no drift against the registry.
#![cfg(feature = "cli")]

use crate::common;

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
        kcap_mcp_registry::ops::export::json_schema_value()
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
                "{name} ({client}) starts the registry's 6 allowlistable servers\n"
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

/// `export <client>` for the six JSON clients besides Claude Code: exact text (golden),
/// written with `--command /usr/local/bin/kcap --server-url http://127.0.0.1:5100`.
#[test]
fn every_json_client_export_is_exact() {
    for client in [
        "gemini",
        "opencode",
        "copilot",
        "cursor",
        "kiro",
        "antigravity",
    ] {
        let out = stdout_of(&[
            "export",
            client,
            "--command",
            "/usr/local/bin/kcap",
            "--server-url",
            "http://127.0.0.1:5100",
        ]);
        assert_eq!(out, golden(&format!("{client}.json")), "{client}");
    }
    // The new names of the two older exports give the same text as the old ones.
    assert_eq!(
        stdout_of(&["export", "claude"]),
        stdout_of(&["export", "claude-mcp-json"])
    );
    assert_eq!(
        stdout_of(&["export", "codex"]),
        stdout_of(&["export", "codex-toml"])
    );
}

/// Each client's entry shape and trust knob, read back from its export.
#[test]
fn each_client_export_has_its_entry_shape_and_trust_knob() {
    let json = |client: &str| -> serde_json::Value {
        serde_json::from_str(&stdout_of(&["export", client])).unwrap()
    };
    let read_only = |id: &str| kcap_mcp_registry::lookup(id).unwrap().read_only;
    let gemini = json("gemini");
    for (id, server) in gemini["mcpServers"].as_object().unwrap() {
        assert_eq!(
            server.get("trust"),
            read_only(id).then_some(&serde_json::json!(true)),
            "{id}"
        );
    }
    assert_eq!(
        gemini["mcpServers"]["kcap-flows"],
        serde_json::json!({"command": "kcap", "args": ["mcp", "flows", "--driver", "gemini"]})
    );
    assert_eq!(
        json("copilot")["mcpServers"]["kcap-review"],
        serde_json::json!({"type": "stdio", "command": "kcap", "args": ["mcp", "review"]})
    );
    assert_eq!(
        json("opencode")["mcp"]["kcap-flows"],
        serde_json::json!({
            "type": "local",
            "command": ["kcap", "mcp", "flows", "--driver", "opencode"],
            "enabled": true,
        })
    );
    for client in ["cursor", "kiro", "antigravity"] {
        assert_eq!(
            json(client)["mcpServers"]["kcap-flows"],
            serde_json::json!({"command": "kcap", "args": ["mcp", "flows", "--driver", client]}),
            "{client}"
        );
    }
    // Claude Code and Codex are not stamped; Codex approves read-only servers' tools.
    assert_eq!(
        json("claude")["mcpServers"]["kcap-flows"]["args"],
        serde_json::json!(["mcp", "flows"])
    );
    let codex: toml::Table = toml::from_str(&stdout_of(&["export", "codex"])).unwrap();
    for (id, server) in codex["mcp_servers"].as_table().unwrap() {
        assert_eq!(
            server
                .get("default_tools_approval_mode")
                .and_then(|v| v.as_str()),
            read_only(id).then_some("approve"),
            "{id}"
        );
        assert_eq!(server["args"].as_array().unwrap().len(), 2, "{id}");
    }
}

/// Every client refuses a value it would expand, with one error shape, exit 2.
#[test]
fn every_client_refuses_values_it_expands() {
    let cases = [
        ("claude", "--command", "/opt/${D}/kcap", "command", "${"),
        (
            "gemini",
            "--server-url",
            "http://$HOST",
            "env.KCAP_URL",
            "$",
        ),
        (
            "copilot",
            "--server-url",
            "http://${H}",
            "env.KCAP_URL",
            "${",
        ),
        ("opencode", "--command", "{env:KCAP}", "command[0]", "{env:"),
        (
            "opencode",
            "--server-url",
            "{env:U}",
            "environment.KCAP_URL",
            "{env:",
        ),
        ("cursor", "--command", "${userHome}/kcap", "command", "${"),
        ("kiro", "--command", "/x/${K}", "command", "${"),
        ("antigravity", "--server-url", "${U}", "env.KCAP_URL", "${"),
    ];
    for (client, flag, value, field, token) in cases {
        let r = run(&["export", client, flag, value]);
        assert_eq!(r.code, 2, "{client} {value}");
        assert!(r.stdout.is_empty());
        let name = kcap_mcp_registry::clients::Client::from_name(client)
            .unwrap()
            .display_name();
        assert_eq!(
            r.stderr,
            format!(
                "error: cannot register MCP server `kcap-analytics` with {name}: `{field}` \
                 contains `{token}`, which {name} expands and cannot escape; use a value \
                 without `{token}` (e.g. another --kcap-bin or --server-url)\n"
            ),
            "{client}"
        );
    }
    // Values a client does not expand are written as given.
    assert!(
        stdout_of(&["export", "codex", "--command", "/opt/${D}/kcap"]).contains("/opt/${D}/kcap")
    );
    // Gemini CLI 0.61.0 expands `$D` in `command` too (measured, see
    // src/clients/gemini/registration.rs), so it is refused there.
    assert_eq!(
        run(&["export", "gemini", "--command", "/opt/$D/kcap"]).code,
        2
    );
    assert!(
        stdout_of(&["export", "opencode", "--command", "/opt/${D}/kcap"])
            .contains("/opt/${D}/kcap")
    );
}

#[test]
fn a_control_or_invisible_character_in_kcap_bin_or_server_url_is_refused_shown_escaped() {
    for (args, message) in [
        (
            [
                "export",
                "claude-mcp-json",
                "--kcap-bin",
                "/usr/bin/kcap\n\"x\": 1",
            ],
            "error: --kcap-bin `/usr/bin/kcap\\n\"x\": 1` contains a line break (U+000A); give it without one\n",
        ),
        (
            ["export", "codex", "--server-url", "http://h/\u{1b}[2J"],
            "error: --server-url `http://h/\\u{1b}[2J` contains an escape character (U+001B); give it without one\n",
        ),
        (
            ["export", "gemini", "--server-url", "http://h/\u{202e}x"],
            "error: --server-url `http://h/\\u{202e}x` contains a right-to-left override (U+202E); give it without one\n",
        ),
        (
            ["export", "claude-mcp-json", "--kcap-bin", "/k\u{200b}"],
            "error: --kcap-bin `/k\\u{200b}` contains a zero width space (U+200B); give it without one\n",
        ),
    ] {
        assert_eq!(
            run(&args),
            Run {
                code: 2,
                stdout: String::new(),
                stderr: message.into(),
            },
            "{args:?}"
        );
    }
}
