//! The registration exports, read by the real clients.

use super::claude::{Claude, Seen, argv, kcap_env, seen};
use super::codex::Codex;
use super::*;

pub(super) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        codex_exported_toml_lists_exactly_the_allowlistable_servers,
        claude_exported_mcp_json_loads_without_diagnostics,
    ]
}

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
        HOSTILE_URL,
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
            HOSTILE_URL,
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
