//! The Codex inventory parser on real `codex mcp list --json` shapes (Codex CLI 0.169.0),
//! and fail-closed behaviour of parsing and of running the binary.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kcap_mcp_registry::clients::codex::inventory::{
    INVENTORY_TIMEOUT, InheritedServer, IsolationError, Transport, codex_inventory,
    codex_inventory_with, parse_inventory,
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
                config: None,
            },
            InheritedServer {
                name: "http1".into(),
                enabled: true,
                transport: Transport::StreamableHttp {
                    url: "https://example.com/mcp".into()
                },
                startup_timeout_sec: None,
                tool_timeout_sec: None,
                config: None,
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
                config: None,
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
            err.to_string().starts_with(
                "the inventory is not the JSON `codex mcp list --json` or codex app-server \
                 (config/read) prints: "
            ),
            "{err}"
        );
    }
}

/// An empty `config/read` answer.
const EMPTY_CONFIG_READ: &str = r#"echo '{"id":2,"result":{"config":{"mcp_servers":{}}}}'"#;

/// A stand-in for `codex`: a script file run by `sh` (never exec'd itself, so writing it
/// cannot race with running it: no ETXTBSY), running `app_server` for `app-server` and
/// `mcp_list` for `mcp list --json`. Returns the command factory and the script's directory.
fn stand_in(dir: &Path, app_server: &str, mcp_list: &str) -> impl Fn() -> Command + use<> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("codex-{n}.sh"));
    std::fs::write(
        &path,
        format!(
            "printf '%s\\n' \"$@\" > \"$0.$1.args\"\ncase \"$1\" in\napp-server)\n{app_server}\n;;\n*)\n{mcp_list}\n;;\nesac\n"
        ),
    )
    .unwrap();
    move || {
        let mut c = Command::new("sh");
        c.arg(&path);
        c
    }
}

#[test]
fn running_codex_merges_config_read_and_mcp_list() {
    let dir = tempfile::tempdir().unwrap();
    let codex = stand_in(
        dir.path(),
        // Reads the three requests, answers `initialize`, a notification, then `config/read`.
        r#"read a; read b; read c
echo '{"id":1,"result":{}}'
echo '{"method":"configWarning","params":{}}'
echo '{"id":2,"result":{"config":{"mcp_servers":{"kcap-review":{"command":"k","required":true}}}}}'"#,
        &format!("cat <<'EOF'\n{REAL}\nEOF"),
    );
    let inv = codex_inventory_with(&codex, INVENTORY_TIMEOUT).unwrap();
    let names: Vec<&str> = inv.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["corp.flows", "http1", "kcap-review"]);
    assert!(inv[0].config.is_none());
    assert_eq!(inv[2].config.as_ref().unwrap().required, Some(true));
    let read = |sub: &str| {
        let suffix = format!(".{sub}.args");
        let file = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.to_str().unwrap().ends_with(&suffix))
            .unwrap();
        std::fs::read_to_string(file).unwrap()
    };
    assert_eq!(read("mcp"), "mcp\nlist\n--json\n");
    assert_eq!(read("app-server"), "app-server\n");
}

#[test]
fn a_bad_app_server_answer_fails_closed_naming_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "echo '{\"id\":2,\"result\":'",
            "a line of the answer is not JSON",
        ),
        (
            "echo '{\"id\":1,\"result\":{}}'",
            "the answer ended before the config/read response (exit status: 0)",
        ),
        (
            "echo 'boom' >&2; exit 4",
            r#"the Codex binary failed (exit status: 4), printing "boom""#,
        ),
        (
            "echo '{\"id\":2,\"error\":{\"code\":-32600,\"message\":\"no\"}}'",
            "config/read answered with an error",
        ),
        (
            "echo '{\"id\":2,\"result\":{\"config\":{\"mcp_servers\":{\"a\":{\"required\":\"yes\"}}}}}'",
            "config.mcp_servers: invalid type",
        ),
        (
            "echo '{\"id\":2,\"result\":[]}'",
            "expected a config/read answer",
        ),
    ];
    for (body, want) in cases {
        let codex = stand_in(dir.path(), body, "echo '[]'");
        let err = codex_inventory_with(&codex, INVENTORY_TIMEOUT).unwrap_err();
        assert!(
            matches!(err, IsolationError::ConfigRead(_)),
            "{body}: {err:?}"
        );
        let text = chain(&err);
        assert!(
            text.starts_with("codex app-server (config/read) failed: "),
            "{text}"
        );
        assert!(text.contains(want), "{body}: {text}");
    }

    // Hung: answers nothing and keeps stdout open; the timeout ends it (and its group).
    let codex = stand_in(dir.path(), "sleep 30", "echo '[]'");
    let started = std::time::Instant::now();
    let err = codex_inventory_with(&codex, Duration::from_millis(300)).unwrap_err();
    assert_eq!(
        chain(&err),
        "codex app-server (config/read) failed: the Codex binary gave no answer within 0.3 s (it was stopped)"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// `e` and each of its causes, joined by `: ` (each layer displays itself only).
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

#[test]
fn running_codex_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let missing = codex_inventory(&dir.path().join("no-codex")).unwrap_err();
    assert!(
        matches!(missing, IsolationError::ConfigRead(ref e) if matches!(**e, IsolationError::Spawn(_))),
        "{missing:?}"
    );

    let codex = stand_in(
        dir.path(),
        EMPTY_CONFIG_READ,
        "echo 'Error: bad config' >&2\nexit 1",
    );
    match codex_inventory_with(&codex, INVENTORY_TIMEOUT).unwrap_err() {
        IsolationError::Exit { status, stderr } => {
            assert_eq!(status.code(), Some(1));
            assert_eq!(status.to_string(), "exit status: 1");
            assert_eq!(stderr, "Error: bad config\n");
        }
        other => panic!("{other:?}"),
    }

    for body in ["echo 'not json'", "printf ''", "echo '{}'"] {
        let codex = stand_in(dir.path(), EMPTY_CONFIG_READ, body);
        let err = codex_inventory_with(&codex, INVENTORY_TIMEOUT).unwrap_err();
        assert!(matches!(err, IsolationError::Parse(_)), "{body}: {err:?}");
    }

    // A grandchild that keeps stdout open after codex exits cannot hold the caller either.
    let codex = stand_in(dir.path(), EMPTY_CONFIG_READ, "echo '[]'\nsleep 30 &");
    let started = std::time::Instant::now();
    let err = codex_inventory_with(&codex, Duration::from_millis(300)).unwrap_err();
    assert!(matches!(err, IsolationError::Timeout(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(10));

    let codex = stand_in(dir.path(), EMPTY_CONFIG_READ, "exec sleep 30");
    let err = codex_inventory_with(&codex, Duration::from_millis(200)).unwrap_err();
    assert!(matches!(err, IsolationError::Timeout(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the Codex binary gave no answer within 0.2 s (it was stopped)"
    );
}
