//! `kcap-mcp-registry diff`: exact Markdown and JSON for a security-relevant change,
//! `--fail-on security`, and which changes count as security-relevant.
#![cfg(feature = "cli")]

use crate::common;

use common::{Run, run};
use kcap_mcp_registry::ops::diff::diff;
use kcap_mcp_registry::schema::{RegistryEntry, ToolEntry};
use kcap_mcp_registry::{EnvSource, Inject, ops};

const OLD: &str = "tests/fixtures/cli/diff/old";
const NEW: &str = "tests/fixtures/cli/diff/new";

const SECURITY_MARKDOWN: &str = r#"## MCP server registry changes

### Security-relevant changes (7)

- `kcap-audit`: `env.KCAP_AUDIT_ID` `{"value":"1"}` → `"agent_id"`
- `kcap-flows`: `starts_flows` `true` → `false`
- `kcap-new`: `read_only` (absent) → `true`
- `kcap-new`: `tools.peek.unattended_safe` (absent) → `true`
- `kcap-notes`: `args` `["mcp","notes"]` → `["mcp","notes","--read-only"]`
- `kcap-notes`: `read_only` `false` → `true`
- `kcap-notes`: `tools.list_notes.unattended_safe` `false` → `true`

### Added servers (1)

- `kcap-new`: `A new read-only server.` (args `["mcp","new"]`, starts_flows `false`, allowlistable `true`, read_only `true`)

### Removed servers (1)

- `kcap-old`: `A retired server.`

### Other changes (2)

- `kcap-flow-result`: `description` `"Result channel."` → `"Result channel for verdicts."`
- `kcap-notes`: `tools.write_note.unattended_safe` `false` → (absent)
"#;

#[test]
fn a_security_diff_in_markdown_lists_the_flips_first() {
    let expected = Run {
        code: 0,
        stdout: SECURITY_MARKDOWN.into(),
        stderr: String::new(),
    };
    assert_eq!(run(&["diff", OLD, NEW]), expected);
    assert_eq!(run(&["diff", OLD, NEW, "--format", "markdown"]), expected);
    assert_eq!(
        run(&["diff", OLD, NEW, "--fail-on", "security"]),
        Run {
            code: 1,
            ..expected
        }
    );
}

#[test]
fn a_security_diff_in_json() {
    let expected = r#"{
  "security": [
    {
      "server": "kcap-audit",
      "field": "env.KCAP_AUDIT_ID",
      "old": {
        "value": "1"
      },
      "new": "agent_id"
    },
    {
      "server": "kcap-flows",
      "field": "starts_flows",
      "old": true,
      "new": false
    },
    {
      "server": "kcap-new",
      "field": "read_only",
      "old": null,
      "new": true
    },
    {
      "server": "kcap-new",
      "field": "tools.peek.unattended_safe",
      "old": null,
      "new": true
    },
    {
      "server": "kcap-notes",
      "field": "args",
      "old": [
        "mcp",
        "notes"
      ],
      "new": [
        "mcp",
        "notes",
        "--read-only"
      ]
    },
    {
      "server": "kcap-notes",
      "field": "read_only",
      "old": false,
      "new": true
    },
    {
      "server": "kcap-notes",
      "field": "tools.list_notes.unattended_safe",
      "old": false,
      "new": true
    }
  ],
  "added": [
    {
      "id": "kcap-new",
      "description": "A new read-only server.",
      "args": [
        "mcp",
        "new"
      ],
      "starts_flows": false,
      "allowlistable": true,
      "inject": null,
      "registered": true,
      "read_only": true,
      "needs_project_cwd": false,
      "driver_stamp": false,
      "alias": null,
      "env": [],
      "tools": [
        {
          "name": "peek",
          "unattended_safe": true
        }
      ]
    }
  ],
  "removed": [
    {
      "id": "kcap-old",
      "description": "A retired server.",
      "args": [
        "mcp",
        "old"
      ],
      "starts_flows": false,
      "allowlistable": true,
      "inject": null,
      "registered": true,
      "read_only": false,
      "needs_project_cwd": false,
      "driver_stamp": false,
      "alias": null,
      "env": [],
      "tools": []
    }
  ],
  "changes": [
    {
      "server": "kcap-flow-result",
      "field": "description",
      "old": "Result channel.",
      "new": "Result channel for verdicts."
    },
    {
      "server": "kcap-notes",
      "field": "tools.write_note.unattended_safe",
      "old": false,
      "new": null
    }
  ]
}
"#;
    assert_eq!(
        run(&[
            "diff",
            OLD,
            NEW,
            "--format",
            "json",
            "--fail-on",
            "security"
        ]),
        Run {
            code: 1,
            stdout: expected.into(),
            stderr: String::new(),
        }
    );
}

#[test]
fn a_diff_without_security_flips_passes_fail_on_security() {
    assert_eq!(
        run(&[
            "diff",
            OLD,
            "tests/fixtures/cli/diff/cosmetic",
            "--fail-on",
            "security"
        ]),
        Run {
            code: 0,
            stdout: "## MCP server registry changes\n\n### Other changes (1)\n\n- `kcap-notes`: `description` `\"Project notes.\"` → ``\"Project notes, `shared`.\"``\n".into(),
            stderr: String::new(),
        }
    );
    assert_eq!(
        run(&["diff", "registry", "registry", "--fail-on", "security"]),
        Run {
            code: 0,
            stdout: "## MCP server registry changes\n\nNo changes.\n".into(),
            stderr: String::new(),
        }
    );
    let r = run(&["diff", "registry", "registry", "--format", "json"]);
    assert_eq!(
        r.stdout,
        "{\n  \"security\": [],\n  \"added\": [],\n  \"removed\": [],\n  \"changes\": []\n}\n"
    );
}

#[test]
fn reversing_a_diff_reverses_every_flip() {
    let r = run(&["diff", NEW, OLD, "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    // new → old: args, starts_flows and read_only flip back (still security-relevant); the tool
    // losing unattended_safe and the env source leaving agent_id are not.
    let fields: Vec<(String, String)> = json["security"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["server"].as_str().unwrap().to_string(),
                c["field"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("kcap-flows".to_string(), "starts_flows".to_string()),
            ("kcap-notes".to_string(), "args".to_string()),
            ("kcap-notes".to_string(), "read_only".to_string()),
        ]
    );
    assert_eq!(json["added"][0]["id"], "kcap-old");
    assert_eq!(json["removed"][0]["id"], "kcap-new");
}

#[test]
fn invalid_or_missing_registries_fail() {
    let r = run(&["diff", "tests/fixtures/three-violations-two-files", NEW]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout, "");
    assert!(r.stderr.contains("error: 3 registry rule violations\n"));
    let r = run(&["diff", OLD, "tests/fixtures/no-such-dir"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with("error: cannot read tests/fixtures/no-such-dir: "),
        "{}",
        r.stderr
    );
    assert_eq!(run(&["diff", OLD]).code, 2);
    assert_eq!(run(&["diff", OLD, NEW, "--fail-on", "anything"]).code, 2);
}

fn entry(id: &str) -> RegistryEntry {
    RegistryEntry {
        id: id.into(),
        description: "D.".into(),
        args: vec!["mcp".into(), id.into()],
        starts_flows: false,
        allowlistable: true,
        inject: None,
        registered: true,
        read_only: true,
        needs_project_cwd: false,
        driver_stamp: false,
        alias: None,
        env: vec![],
        tools: vec![],
    }
}

fn tool(name: &str, unattended_safe: bool) -> ToolEntry {
    ToolEntry {
        name: name.into(),
        unattended_safe,
    }
}

/// (field, old, new, security) of each change.
fn changes(old: RegistryEntry, new: RegistryEntry) -> Vec<(String, String, String, bool)> {
    diff(&[old], &[new])
        .changes
        .into_iter()
        .map(|c| (c.field, c.old.to_string(), c.new.to_string(), c.security))
        .collect()
}

fn c(field: &str, old: &str, new: &str, security: bool) -> (String, String, String, bool) {
    (field.into(), old.into(), new.into(), security)
}

#[test]
fn which_changes_are_security_relevant() {
    let base = entry("kcap-x");
    let mut flipped = base.clone();
    flipped.allowlistable = false;
    flipped.inject = Some(Inject::BorrowedSnapshot);
    flipped.registered = false;
    flipped.read_only = false;
    flipped.needs_project_cwd = true;
    flipped.driver_stamp = true;
    flipped.alias = Some("kx".into());
    flipped.env = vec![
        ("KCAP_URL".into(), EnvSource::ServerUrl),
        ("KCAP_FLOW_AGENT_ID".into(), EnvSource::AgentId),
        ("KCAP_MODE".into(), EnvSource::Constant("1".into())),
    ];
    assert_eq!(
        changes(base.clone(), flipped),
        [
            c("allowlistable", "true", "false", true),
            c("inject", "null", "\"borrowed-snapshot\"", true),
            c("registered", "true", "false", false),
            c("read_only", "true", "false", true),
            c("needs_project_cwd", "false", "true", false),
            c("driver_stamp", "false", "true", true),
            c("alias", "null", "\"kx\"", false),
            c("env.KCAP_URL", "null", "\"server_url\"", false),
            c("env.KCAP_FLOW_AGENT_ID", "null", "\"agent_id\"", true),
            c("env.KCAP_MODE", "null", "{\"value\":\"1\"}", false),
        ]
    );

    let mut old = base.clone();
    old.tools = vec![tool("a", true), tool("b", false), tool("c", true)];
    let mut new = base.clone();
    new.tools = vec![tool("b", true), tool("a", false), tool("d", true)];
    assert_eq!(
        changes(old, new),
        [
            c("tools.b.unattended_safe", "false", "true", true),
            c("tools.a.unattended_safe", "true", "false", false),
            c("tools.d.unattended_safe", "null", "true", true),
            c("tools.c.unattended_safe", "true", "null", false),
            c("tools", "[\"a\",\"b\"]", "[\"b\",\"a\"]", false),
        ]
    );

    // A new server's read_only claim, unattended_safe tools and agent_id env vars are
    // security-relevant.
    let mut injected = entry("kcap-y");
    injected.allowlistable = false;
    injected.env = vec![("KCAP_FLOW_AGENT_ID".into(), EnvSource::AgentId)];
    injected.tools = vec![tool("t", true), tool("u", false)];
    let d = diff(&[], &[injected]);
    let security: Vec<&str> = d.security().map(|c| c.field.as_str()).collect();
    assert_eq!(
        security,
        [
            "read_only",
            "env.KCAP_FLOW_AGENT_ID",
            "tools.t.unattended_safe"
        ]
    );
    assert!(d.has_security());

    // A new server that starts flows: the server's own deny-list must learn it.
    let mut flows = entry("kcap-z");
    flows.read_only = false;
    flows.starts_flows = true;
    let d = diff(&[], &[flows]);
    let security: Vec<&str> = d.security().map(|c| c.field.as_str()).collect();
    assert_eq!(security, ["starts_flows"]);

    // The compiled registry against itself: nothing.
    let compiled = ops::list::compiled_entries();
    assert!(diff(&compiled, &compiled).is_empty());
}

#[test]
fn both_sides_are_walked_in_id_order_whatever_order_they_come_in() {
    let ids = |v: &[RegistryEntry]| v.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
    let old: Vec<RegistryEntry> = ["kcap-a", "kcap-b", "kcap-d"].map(entry).into();
    let mut new: Vec<RegistryEntry> = ["kcap-b", "kcap-c", "kcap-e"].map(entry).into();
    new[0].description = "Changed.".into();
    let sorted = diff(&old, &new);
    assert_eq!(ids(&sorted.added), ["kcap-c", "kcap-e"]);
    assert_eq!(ids(&sorted.removed), ["kcap-a", "kcap-d"]);
    assert_eq!(
        sorted
            .changes
            .iter()
            .map(|c| (c.server.as_str(), c.field.as_str()))
            .collect::<Vec<_>>(),
        [
            ("kcap-b", "description"),
            ("kcap-c", "read_only"),
            ("kcap-e", "read_only")
        ]
    );
    let (mut old_rev, mut new_rev) = (old.clone(), new.clone());
    old_rev.reverse();
    new_rev.reverse();
    assert_eq!(diff(&old_rev, &new_rev), sorted);
}
