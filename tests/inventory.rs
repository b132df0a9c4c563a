//! The Codex inventory parser on real `codex mcp list --json` shapes (Codex CLI 0.169.0),
//! and fail-closed behaviour of parsing and of running the binary.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kcap_mcp_registry::clients::codex::inventory::{
    InheritedServer, IsolationError, Transport, codex_inventory, codex_inventory_within,
    parse_inventory,
};

/// Output of `codex mcp list --json` with a stdio, a URL and a dotted-name server (0.169.0).
const REAL: &str = r#"[
  {
    "name": "corp.flows",
    "enabled": true,
    "disabled_reason": null,
    "transport": {"type": "stdio", "command": "flows", "args": [], "env": null, "env_vars": [], "cwd": null},
    "startup_timeout_sec": null,
    "tool_timeout_sec": null,
    "auth_status": "unsupported"
  },
  {
    "name": "http1",
    "enabled": true,
    "disabled_reason": null,
    "transport": {
      "type": "streamable_http", "url": "https://example.com/mcp", "bearer_token_env_var": "MY_TOKEN",
      "http_headers": {"X-Foo": "bar"}, "env_http_headers": null, "http_headers_helper": null
    },
    "startup_timeout_sec": null,
    "tool_timeout_sec": null,
    "auth_status": "bearer_token"
  },
  {
    "name": "kcap-review",
    "enabled": false,
    "disabled_reason": null,
    "transport": {
      "type": "stdio", "command": "/usr/bin/kcap", "args": ["mcp", "review"],
      "env": {"KCAP_URL": "http://x", "B": "2"}, "env_vars": ["PATH_EXTRA", "TOKEN"], "cwd": "/srv/work"
    },
    "startup_timeout_sec": 15.0,
    "tool_timeout_sec": 90.5,
    "auth_status": "unsupported"
  }
]"#;

#[test]
fn parses_stdio_url_and_dotted_servers() {
    let inv = parse_inventory(REAL).unwrap();
    assert_eq!(
        inv,
        vec![
            InheritedServer {
                name: "corp.flows".into(),
                enabled: true,
                transport: Transport::Stdio {
                    command: "flows".into(),
                    args: vec![],
                    env: None,
                    env_vars: vec![],
                    cwd: None
                },
                startup_timeout_sec: None,
                tool_timeout_sec: None,
            },
            InheritedServer {
                name: "http1".into(),
                enabled: true,
                transport: Transport::StreamableHttp {
                    url: "https://example.com/mcp".into()
                },
                startup_timeout_sec: None,
                tool_timeout_sec: None,
            },
            InheritedServer {
                name: "kcap-review".into(),
                enabled: false,
                transport: Transport::Stdio {
                    command: "/usr/bin/kcap".into(),
                    args: vec!["mcp".into(), "review".into()],
                    env: Some(BTreeMap::from([
                        ("B".into(), "2".into()),
                        ("KCAP_URL".into(), "http://x".into())
                    ])),
                    env_vars: vec!["PATH_EXTRA".into(), "TOKEN".into()],
                    cwd: Some("/srv/work".into()),
                },
                startup_timeout_sec: Some(15.0),
                tool_timeout_sec: Some(90.5),
            },
        ]
    );
    assert_eq!(parse_inventory("[]\n").unwrap(), vec![]);
}

#[test]
fn malformed_output_fails_closed() {
    for bad in [
        "",
        "\n",
        "null",
        "{}",
        "[{}]",
        r#"[{"name":1,"enabled":true,"transport":{"type":"stdio","command":"x"}}]"#,
        r#"[{"name":"a","transport":{"type":"stdio","command":"x"}}]"#,
        r#"[{"name":"a","enabled":true}]"#,
        r#"[{"name":"a","enabled":true,"transport":{"type":"websocket","url":"ws://x"}}]"#,
        r#"[{"name":"a","enabled":true,"transport":{"type":"stdio"}}]"#,
        r#"[{"name":"a","enabled":true,"transport":{"type":"stdio","command":"x"}}"#,
        "Error: failed to load bootstrap configuration",
        r#"[] trailing"#,
    ] {
        let err = parse_inventory(bad).unwrap_err();
        assert!(matches!(err, IsolationError::Parse(_)), "{bad:?}: {err:?}");
        assert!(
            err.to_string()
                .starts_with("cannot list the Codex MCP servers"),
            "{err}"
        );
    }
}

/// Writes an executable `/bin/sh` script standing in for `codex`.
fn fake_codex(dir: &Path, body: &str) -> PathBuf {
    common::stand_in::sh_script(dir, "codex", body)
}

#[test]
fn running_codex_reads_its_json_and_passes_mcp_list_json() {
    let dir = tempfile::tempdir().unwrap();
    let args_file = dir.path().join("args");
    let bin = fake_codex(
        dir.path(),
        &format!(
            "printf '%s\\n' \"$@\" > '{}'\ncat <<'EOF'\n{REAL}\nEOF",
            args_file.display()
        ),
    );
    let inv = codex_inventory(&bin).unwrap();
    assert_eq!(inv, parse_inventory(REAL).unwrap());
    assert_eq!(
        std::fs::read_to_string(args_file).unwrap(),
        "mcp\nlist\n--json\n"
    );
}

#[test]
fn running_codex_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let missing = codex_inventory(&dir.path().join("no-codex")).unwrap_err();
    assert!(matches!(missing, IsolationError::Spawn(_)), "{missing:?}");

    let bin = fake_codex(dir.path(), "echo 'Error: bad config' >&2\nexit 1");
    match codex_inventory(&bin).unwrap_err() {
        IsolationError::Exit { status, stderr } => {
            assert_eq!(status, "exit status: 1");
            assert_eq!(stderr, "Error: bad config\n");
        }
        other => panic!("{other:?}"),
    }

    let bin = fake_codex(dir.path(), "echo 'not json'");
    assert!(matches!(
        codex_inventory(&bin).unwrap_err(),
        IsolationError::Parse(_)
    ));

    let bin = fake_codex(dir.path(), "printf ''");
    assert!(matches!(
        codex_inventory(&bin).unwrap_err(),
        IsolationError::Parse(_)
    ));

    // A grandchild that keeps stdout open after codex exits cannot hold the caller either.
    let bin = fake_codex(dir.path(), "echo '[]'\nsleep 30 &");
    let started = std::time::Instant::now();
    let err = codex_inventory_within(&bin, Duration::from_millis(300)).unwrap_err();
    assert!(matches!(err, IsolationError::Timeout(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(10));

    let bin = fake_codex(dir.path(), "exec sleep 30");
    let err = codex_inventory_within(&bin, Duration::from_millis(200)).unwrap_err();
    assert!(matches!(err, IsolationError::Timeout(_)), "{err:?}");
    assert!(err.to_string().ends_with("no answer within 0.2 s"), "{err}");
}
