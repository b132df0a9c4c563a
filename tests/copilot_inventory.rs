//! The Copilot CLI inventory parser on real `copilot mcp list --json` shapes (Copilot CLI
//! 1.0.102, measured 2026-11-30 in a throwaway HOME with `COPILOT_OFFLINE=true`), on hostile
//! ones, and fail-closed behaviour of running the binary.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kcap_mcp_registry::clients::copilot::inventory::{
    INVENTORY_TIMEOUT, InheritedServer, InventoryError, ParseError, copilot_inventory,
    copilot_inventory_from, parse_inventory,
};

/// `copilot mcp list --json` (1.0.102) for a user `mcp-config.json` with a stdio server using
/// `${HOME}`, a `"disabled": true` one, an http one, one without `type` and one of type
/// `local` with a space and a dot in its name, plus, with `COPILOT_ALLOW_ALL=true`, the
/// worktree's `.mcp.json` (two servers). Verbatim.
const REAL: &str = r#"{
  "mcpServers": {
    "user-a": {
      "tools": [
        "*"
      ],
      "type": "stdio",
      "command": "/bin/echo",
      "args": [
        "x",
        "${HOME}"
      ],
      "env": {
        "K": "v"
      },
      "source": "user",
      "enabled": true
    },
    "user-off": {
      "tools": [
        "*"
      ],
      "disabled": true,
      "type": "stdio",
      "command": "/bin/true",
      "args": [],
      "source": "user",
      "enabled": true
    },
    "user-http": {
      "tools": [
        "*"
      ],
      "type": "http",
      "url": "http://127.0.0.1:9/mcp",
      "headers": {
        "A": "b"
      },
      "source": "user",
      "enabled": true
    },
    "kcap-flow-result": {
      "tools": [
        "*"
      ],
      "command": "/bin/false",
      "args": [],
      "source": "user",
      "enabled": true
    },
    "we.ird name": {
      "tools": [
        "*"
      ],
      "type": "local",
      "command": "x",
      "args": [],
      "source": "user",
      "enabled": true
    },
    "proj-a": {
      "tools": [
        "*"
      ],
      "command": "/bin/echo",
      "args": [],
      "source": "workspace",
      "sourcePath": "/tmp/cp/proj/.mcp.json",
      "enabled": true
    },
    "kcap-review": {
      "tools": [
        "*"
      ],
      "command": "/bin/echo",
      "args": [],
      "source": "workspace",
      "sourcePath": "/tmp/cp/proj/.mcp.json",
      "enabled": true
    }
  }
}
"#;

fn server(name: &str, source: &str, disabled: bool) -> InheritedServer {
    InheritedServer {
        name: name.into(),
        source: source.into(),
        disabled,
    }
}

#[test]
fn parses_the_measured_shape() {
    assert_eq!(
        parse_inventory(REAL).unwrap(),
        vec![
            server("kcap-flow-result", "user", false),
            server("kcap-review", "workspace", false),
            server("proj-a", "workspace", false),
            server("user-a", "user", false),
            server("user-http", "user", false),
            server("user-off", "user", true),
            server("we.ird name", "user", false),
        ]
    );
    // No servers (no mcp-config.json, or an empty `mcpServers`), as 1.0.102 prints it.
    assert_eq!(parse_inventory("{\n  \"mcpServers\": {}\n}\n").unwrap(), []);
    // An unknown source value of a later Copilot is kept, so the server is still disabled.
    let inv = parse_inventory(r#"{"mcpServers":{"p":{"source":"plugin","enabled":true}}}"#);
    assert_eq!(inv.unwrap(), [server("p", "plugin", false)]);
}

#[test]
fn any_other_shape_fails_closed() {
    for (text, why) in [
        ("", "expected a JSON object, got: "),
        ("[]", "expected a JSON object, got: []"),
        // serde alone would read this one-element array as the object: an empty inventory.
        (r#"[{}]"#, "expected a JSON object, got: [{}]"),
        ("not json", "expected a JSON object, got: not json"),
        ("{", "EOF while parsing an object at line 1 column 1"),
        ("{}", "missing field `mcpServers` at line 1 column 2"),
        (
            r#"{"mcpServers":[]}"#,
            "invalid type: sequence, expected a map at line 1 column 14",
        ),
        (
            r#"{"mcpServers":null}"#,
            "invalid type: null, expected a map at line 1 column 18",
        ),
        (
            r#"{"mcpServers":{}} trailing"#,
            "trailing characters at line 1 column 19",
        ),
        (
            r#"{"mcpServers":{"a":"x"}}"#,
            "server \"a\": the entry is a string, not an object (expected an object with a \
             string `source` and a boolean `enabled`)",
        ),
        (
            r#"{"mcpServers":{"a":["user",true]}}"#,
            "server \"a\": the entry is an array, not an object (expected an object with a \
             string `source` and a boolean `enabled`)",
        ),
        (
            r#"{"mcpServers":{"a":{"enabled":true}}}"#,
            "server \"a\": missing field `source` (expected an object with a string `source` \
             and a boolean `enabled`)",
        ),
        (
            r#"{"mcpServers":{"a":{"source":"user"}}}"#,
            "server \"a\": missing field `enabled` (expected an object with a string `source` \
             and a boolean `enabled`)",
        ),
        (
            r#"{"mcpServers":{"a":{"source":"user","enabled":"yes"}}}"#,
            "server \"a\": invalid type: string \"yes\", expected a boolean (expected an object \
             with a string `source` and a boolean `enabled`)",
        ),
        (
            r#"{"mcpServers":{"a":{"source":"user","enabled":true,"disabled":1}}}"#,
            "server \"a\": invalid type: integer `1`, expected a boolean (expected an object \
             with a string `source` and a boolean `enabled`)",
        ),
        (
            r#"{"mcpServers":{"":{"source":"user","enabled":true}}}"#,
            "server name \"\" cannot be passed to --disable-mcp-server (empty or NUL)",
        ),
        (
            r#"{"mcpServers":{"a\u0000b":{"source":"user","enabled":true}}}"#,
            "server name \"a\\0b\" cannot be passed to --disable-mcp-server (empty or NUL)",
        ),
    ] {
        let err = parse_inventory(text).unwrap_err();
        let InventoryError::Parse(parse) = &err else {
            panic!("{text}: {err:?}")
        };
        assert_eq!(parse.to_string(), why, "{text}");
        assert_eq!(
            err.to_string(),
            "the inventory is not the JSON `copilot mcp list --json` prints"
        );
    }
    // One byte order mark is accepted, as for every JSON input.
    assert_eq!(parse_inventory("\u{feff}{\"mcpServers\":{}}").unwrap(), []);
}

/// A stand-in for `copilot`: `sh <script>`, the script recording its arguments and running
/// `body` (never exec'd itself, so writing it cannot race with running it).
fn stand_in(dir: &Path, body: &str) -> Command {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = dir.join(format!("copilot-{n}.sh"));
    std::fs::write(
        &path,
        format!("printf '%s\\n' \"$@\" > \"$0.args\"\n{body}\n"),
    )
    .unwrap();
    let mut c = Command::new("sh");
    c.arg(&path);
    c
}

#[test]
fn running_copilot_lists_in_the_given_directory_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    let mut copilot = stand_in(
        dir.path(),
        r#"printf '{"mcpServers":{"%s":{"source":"user","enabled":true}}}' "$(basename "$PWD")-$CHOSEN""#,
    );
    let work = dir.path().join("tree");
    std::fs::create_dir(&work).unwrap();
    copilot.current_dir(&work).env("CHOSEN", "x");
    let inv = copilot_inventory_from(copilot, INVENTORY_TIMEOUT).unwrap();
    assert_eq!(inv, [server("tree-x", "user", false)]);
    let args = std::fs::read_to_string(dir.path().join("copilot-0.sh.args"))
        .or_else(|_| {
            // Another test of this file may have drawn number 0.
            std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(|e| e.ok())
                .find(|e| e.file_name().to_string_lossy().ends_with(".args"))
                .map(|e| std::fs::read_to_string(e.path()).unwrap())
                .ok_or(())
        })
        .unwrap();
    assert_eq!(args, "mcp\nlist\n--json\n");
}

#[test]
fn running_copilot_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let missing = copilot_inventory(&dir.path().join("no-copilot")).unwrap_err();
    assert!(matches!(missing, InventoryError::Spawn(_)), "{missing:?}");
    assert_eq!(
        missing.to_string(),
        "the Copilot CLI binary could not be run"
    );

    // Copilot exits 1 on an mcp-config.json it refuses (measured: `{}`).
    let copilot = stand_in(dir.path(), "echo 'Error: mcpServers: Required' >&2\nexit 1");
    match copilot_inventory_from(copilot, INVENTORY_TIMEOUT).unwrap_err() {
        e @ InventoryError::Exit { .. } => assert_eq!(
            e.to_string(),
            "the Copilot CLI binary failed (exit status: 1), printing \"Error: mcpServers: Required\""
        ),
        other => panic!("{other:?}"),
    }
    // A success with a valid JSON of no servers on stdout but exit 1 is still a failure.
    let copilot = stand_in(dir.path(), "echo '{\"mcpServers\":{}}'\nexit 3");
    assert!(matches!(
        copilot_inventory_from(copilot, INVENTORY_TIMEOUT).unwrap_err(),
        InventoryError::Exit { .. }
    ));
    for body in ["echo 'not json'", "printf ''", "echo '{}'", "echo '[{}]'"] {
        let copilot = stand_in(dir.path(), body);
        let err = copilot_inventory_from(copilot, INVENTORY_TIMEOUT).unwrap_err();
        assert!(
            matches!(
                err,
                InventoryError::Parse(ParseError::Json(_) | ParseError::NotAnObject { .. })
            ),
            "{body}: {err:?}"
        );
    }
    let copilot = stand_in(dir.path(), r"printf '{\377}'");
    let err = copilot_inventory_from(copilot, INVENTORY_TIMEOUT).unwrap_err();
    assert!(
        matches!(err, InventoryError::Parse(ParseError::NotUtf8(_))),
        "{err:?}"
    );

    // Hung, or a grandchild holding stdout open: stopped at the timeout.
    for body in ["exec sleep 30", "echo '{\"mcpServers\":{}}'\nsleep 30 &"] {
        let copilot = stand_in(dir.path(), body);
        let started = Instant::now();
        let err = copilot_inventory_from(copilot, Duration::from_millis(300)).unwrap_err();
        assert!(matches!(err, InventoryError::Timeout(_)), "{body}: {err:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(
            err.to_string(),
            "the Copilot CLI binary gave no answer within 0.3 s (it was stopped)"
        );
    }
}
