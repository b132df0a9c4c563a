//! `kcap-mcp-registry check`: every format and exit code, with exact output.
#![cfg(feature = "cli")]

use crate::common;

use common::{Run, run, run_in};
use kcap_mcp_registry::diagnostic::Location;
use kcap_mcp_registry::report::{Finding, github};

const THREE: &str = "tests/fixtures/three-violations-two-files";

#[test]
fn a_clean_check_prints_one_ok_line_and_exits_0() {
    assert_eq!(
        run(&["check"]),
        Run {
            code: 0,
            stdout: "ok: 8 registry entries in registry\n".into(),
            stderr: String::new(),
        }
    );
    assert_eq!(
        run(&["check", "registry", "--format", "json"]).stdout,
        "[]\n"
    );
    assert_eq!(
        run(&["check", "registry", "--format", "github"]),
        Run {
            code: 0,
            stdout: String::new(),
            stderr: String::new(),
        }
    );
}

#[test]
fn three_violations_human_is_rustc_style_on_stderr_without_colour() {
    let expected = r#"error[unknown-key]: unknown key `start_flows`
 --> tests/fixtures/three-violations-two-files/kcap-x.toml:4:1
  |
4 | start_flows = false
  | ^^^^^^^^^^^
  |
  = help: did you mean `starts_flows`? (valid keys: id, description, args, starts_flows, allowlistable, inject, registered, read_only, needs_project_cwd, driver_stamp, alias, env, tools)

error[wrong-type]: `read_only` must be a boolean, found a string
 --> tests/fixtures/three-violations-two-files/kcap-x.toml:5:13
  |
5 | read_only = "yes"
  |             ^^^^^
  |
  = help: write `read_only` as a boolean

error[agent-id-injection-only]: `env.KCAP_FLOW_AGENT_ID` takes the agent id, but this entry is allowlistable
 --> tests/fixtures/three-violations-two-files/kcap-y.toml:7:22
  |
7 | KCAP_FLOW_AGENT_ID = "agent_id"
  |                      ^^^^^^^^^^
  |
  = help: only `allowlistable = false` entries may receive the agent id: use `"server_url"` or set `allowlistable = false`

error: 3 registry rule violations
"#;
    let r = run(&["check", THREE]);
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(r.stderr, expected);
    // Not a terminal: no ANSI escapes, whatever NO_COLOR says.
    let r = run(&["check", THREE, "--format", "human"]);
    assert!(!r.stderr.contains('\x1b'));
    assert_eq!(r.stderr, expected);
}

#[test]
fn three_violations_json() {
    let expected = r#"[
  {
    "file": "tests/fixtures/three-violations-two-files/kcap-x.toml",
    "line": 4,
    "column": 1,
    "end_line": 4,
    "end_column": 12,
    "rule": "unknown-key",
    "severity": "error",
    "message": "unknown key `start_flows`",
    "help": "did you mean `starts_flows`? (valid keys: id, description, args, starts_flows, allowlistable, inject, registered, read_only, needs_project_cwd, driver_stamp, alias, env, tools)"
  },
  {
    "file": "tests/fixtures/three-violations-two-files/kcap-x.toml",
    "line": 5,
    "column": 13,
    "end_line": 5,
    "end_column": 18,
    "rule": "wrong-type",
    "severity": "error",
    "message": "`read_only` must be a boolean, found a string",
    "help": "write `read_only` as a boolean"
  },
  {
    "file": "tests/fixtures/three-violations-two-files/kcap-y.toml",
    "line": 7,
    "column": 22,
    "end_line": 7,
    "end_column": 32,
    "rule": "agent-id-injection-only",
    "severity": "error",
    "message": "`env.KCAP_FLOW_AGENT_ID` takes the agent id, but this entry is allowlistable",
    "help": "only `allowlistable = false` entries may receive the agent id: use `\"server_url\"` or set `allowlistable = false`"
  }
]
"#;
    assert_eq!(
        run(&["check", THREE, "--format", "json"]),
        Run {
            code: 1,
            stdout: expected.into(),
            stderr: String::new(),
        }
    );
}

#[test]
fn three_violations_github() {
    let expected = concat!(
        "::error file=tests/fixtures/three-violations-two-files/kcap-x.toml,line=4,col=1,endLine=4,endColumn=12,title=unknown-key::",
        "unknown key `start_flows`%0Ahelp: did you mean `starts_flows`? (valid keys: id, description, args, starts_flows, allowlistable, inject, registered, read_only, needs_project_cwd, driver_stamp, alias, env, tools)\n",
        "::error file=tests/fixtures/three-violations-two-files/kcap-x.toml,line=5,col=13,endLine=5,endColumn=18,title=wrong-type::",
        "`read_only` must be a boolean, found a string%0Ahelp: write `read_only` as a boolean\n",
        "::error file=tests/fixtures/three-violations-two-files/kcap-y.toml,line=7,col=22,endLine=7,endColumn=32,title=agent-id-injection-only::",
        "`env.KCAP_FLOW_AGENT_ID` takes the agent id, but this entry is allowlistable%0Ahelp: only `allowlistable = false` entries may receive the agent id: use `\"server_url\"` or set `allowlistable = false`\n",
    );
    assert_eq!(
        run(&["check", THREE, "--format", "github"]),
        Run {
            code: 1,
            stdout: expected.into(),
            stderr: String::new(),
        }
    );
}

#[test]
fn directory_level_diagnostics_have_null_positions_and_no_position_properties() {
    let r = run(&["check", "tests/fixtures/registry-empty", "--format", "json"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout,
        r#"[
  {
    "file": "tests/fixtures/registry-empty",
    "line": null,
    "column": null,
    "end_line": null,
    "end_column": null,
    "rule": "registry-empty",
    "severity": "error",
    "message": "the registry directory holds no `.toml` file",
    "help": "add one `<id>.toml` file per MCP server"
  }
]
"#
    );
    let r = run(&[
        "check",
        "tests/fixtures/registry-empty",
        "--format",
        "github",
    ]);
    assert_eq!(
        r.stdout,
        "::error file=tests/fixtures/registry-empty,title=registry-empty::the registry directory holds no `.toml` file%0Ahelp: add one `<id>.toml` file per MCP server\n"
    );
}

/// GitHub's workflow-command syntax (`::error k=v,k=v::data`), parsed as the runner does:
/// properties split on `,` and at the first `=`, then `%0D`, `%0A`, `%3A`, `%2C`, `%25`
/// decoded; the data decoded the same way without `%3A`/`%2C`.
fn parse_workflow_command(line: &str) -> (Vec<(String, String)>, String) {
    let rest = line.strip_prefix("::error ").expect("an error command");
    let (props, data) = rest.split_once("::").expect("`::` before the data");
    let unescape_data = |s: &str| {
        s.replace("%0D", "\r")
            .replace("%0A", "\n")
            .replace("%25", "%")
    };
    let unescape_prop = |s: &str| {
        s.replace("%0D", "\r")
            .replace("%0A", "\n")
            .replace("%3A", ":")
            .replace("%2C", ",")
            .replace("%25", "%")
    };
    let props = props
        .split(',')
        .map(|p| {
            let (k, v) = p.split_once('=').expect("key=value");
            (k.to_string(), unescape_prop(v))
        })
        .collect();
    (props, unescape_data(data))
}

#[test]
fn github_format_escapes_percent_newline_and_a_colon_in_the_file_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        "registry/kcap-flow-result.toml",
        dir.path().join("kcap-flow-result.toml"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("kcap:x.toml"),
        "id = \"kcap-x\"\ndescription = \"X.\"\nargs = [\"mcp\", \"x\"]\nstarts_flows = false\n\"50%\\noff,now\" = 1\n",
    )
    .unwrap();
    let r = run_in(dir.path(), &["check", ".", "--format", "github"]);
    assert_eq!(r.code, 1);
    let expected = concat!(
        "::error file=./kcap%3Ax.toml,line=1,col=6,endLine=1,endColumn=14,title=id-file-stem::",
        "id `kcap-x` does not match the file name `kcap:x.toml`%0Ahelp: rename the file to `kcap-x.toml`\n",
        "::error file=./kcap%3Ax.toml,line=5,col=1,endLine=5,endColumn=15,title=unknown-key::",
        "unknown key `50%25\\noff,now`%0Ahelp: remove it (valid keys: id, description, args, starts_flows, allowlistable, inject, registered, read_only, needs_project_cwd, driver_stamp, alias, env, tools)\n",
    );
    assert_eq!(r.stdout, expected);

    // Decoding each command as the runner does gives back the JSON report's fields.
    let json: serde_json::Value =
        serde_json::from_str(&run_in(dir.path(), &["check", ".", "--format", "json"]).stdout)
            .unwrap();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), json.as_array().unwrap().len());
    for (line, item) in lines.iter().zip(json.as_array().unwrap()) {
        let (props, data) = parse_workflow_command(line);
        let get = |k: &str| props.iter().find(|(p, _)| p == k).map(|(_, v)| v.clone());
        assert_eq!(get("file").as_deref(), item["file"].as_str());
        assert_eq!(get("title").as_deref(), item["rule"].as_str());
        assert_eq!(get("line"), Some(item["line"].to_string()));
        assert_eq!(get("col"), Some(item["column"].to_string()));
        assert_eq!(get("endLine"), Some(item["end_line"].to_string()));
        assert_eq!(get("endColumn"), Some(item["end_column"].to_string()));
        assert_eq!(
            data,
            format!(
                "{}\nhelp: {}",
                item["message"].as_str().unwrap(),
                item["help"].as_str().unwrap()
            )
        );
    }
    // The key's newline is escaped in the message, so it cannot forge a line.
    assert!(json[1]["message"].as_str().unwrap().contains("50%\\noff"));
}

#[test]
fn github_escaping_of_carriage_returns_commas_and_percent_in_properties() {
    // Control characters in the file name are escaped as text first (`printable`), so they
    // cannot reach the runner; the message's CR LF get GitHub's %0D%0A.
    let finding = Finding {
        file: "a,b:c%d\r\n.toml".into(),
        location: Some(Location {
            line: 2,
            column: 3,
            end_line: 2,
            end_column: 9,
        }),
        rule: "x:y",
        message: "100% done\r\nnext: a,b".into(),
        help: "fix".into(),
    };
    assert_eq!(
        github(&[finding]),
        "::error file=a%2Cb%3Ac%25d\\r\\n.toml,line=2,col=3,endLine=2,endColumn=9,title=x%3Ay::100%25 done%0D%0Anext: a,b%0Ahelp: fix\n"
    );
}

#[test]
fn an_unreadable_directory_exits_2() {
    for format in ["human", "json", "github"] {
        let r = run(&["check", "tests/fixtures/no-such-dir", "--format", format]);
        assert_eq!(r.code, 2, "{format}");
        assert_eq!(r.stdout, "");
        assert!(
            r.stderr
                .starts_with("error: cannot read tests/fixtures/no-such-dir: "),
            "{}",
            r.stderr
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    let r = run(&["check", "--format", "xml"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with("error: invalid value 'xml' for '--format <FORMAT>'"),
        "{}",
        r.stderr
    );
    // `--command` only means something with `--against`.
    let r = run(&["check", "--command", "/usr/bin/kcap"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--against <FILE>"), "{}", r.stderr);
    assert_eq!(run(&[]).code, 2);
    assert_eq!(run(&["no-such-subcommand"]).code, 2);
}

/// Runs `check THREE` on a pseudo-terminal (util-linux `script`, from Debian's essential
/// `bsdutils`) and returns what the terminal showed.
fn check_on_a_terminal(no_color: Option<&str>) -> String {
    let mut cmd = std::process::Command::new("script");
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["-qec"])
        .arg(format!(
            "{} check {THREE}",
            env!("CARGO_BIN_EXE_kcap-mcp-registry")
        ))
        .arg("/dev/null")
        .env_remove("NO_COLOR");
    if let Some(v) = no_color {
        cmd.env("NO_COLOR", v);
    }
    let out = cmd.output().expect(
        "util-linux `script` runs the check on a pseudo-terminal (apt-get install bsdutils)",
    );
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn human_output_is_coloured_only_on_a_terminal_without_no_color() {
    let coloured = check_on_a_terminal(None);
    assert!(
        coloured.contains("\x1b[1m\x1b[91merror[unknown-key]\x1b[0m"),
        "{coloured:?}"
    );
    // An empty NO_COLOR does not count (https://no-color.org).
    assert!(check_on_a_terminal(Some("")).contains('\x1b'));
    let plain = check_on_a_terminal(Some("1"));
    assert!(!plain.contains('\x1b'), "{plain:?}");
    assert!(plain.starts_with("error[unknown-key]: unknown key `start_flows`\r\n"));
}

#[test]
fn check_accepts_one_registry_file() {
    assert_eq!(
        run(&["check", "registry/kcap-review.toml"]),
        Run {
            code: 0,
            stdout: "ok: 1 registry entry in registry/kcap-review.toml\n".into(),
            stderr: String::new(),
        }
    );
    let broken = run(&[
        "check",
        "tests/fixtures/three-violations-two-files/kcap-y.toml",
        "--format",
        "github",
    ]);
    assert_eq!(broken.code, 1);
    assert_eq!(
        broken
            .stdout
            .lines()
            .map(|l| l.split("::").nth(1).unwrap())
            .collect::<Vec<_>>(),
        [
            "error file=tests/fixtures/three-violations-two-files/kcap-y.toml,line=7,col=22,endLine=7,endColumn=32,title=agent-id-injection-only"
        ]
    );
}

#[test]
fn invisible_characters_in_quoted_source_show_as_replacement_characters_under_the_right_caret() {
    // kcap-x.toml's description holds U+200B, U+202E and U+00AD; kcap-y.toml has a byte order
    // mark at the start of line 4 (a TOML syntax error there).
    let r = run(&["check", "tests/fixtures/invisible-characters"]);
    let expected = "\
error[description-format]: `description` contains a zero width space (U+200B)
 --> tests/fixtures/invisible-characters/kcap-x.toml:2:15
  |
2 | description = \"Re\u{fffd}view \u{fffd}tool\u{fffd}\"
  |               ^^^^^^^^^^^^^^^^
  |
  = help: write one line of 1 to 300 characters without control, invisible or line-break characters

error[toml-syntax]: invalid TOML: invalid unquoted key, expected letters, numbers, `-`, `_`
 --> tests/fixtures/invisible-characters/kcap-y.toml:4:1
  |
4 | \u{fffd}starts_flows = false
  | ^
  |
  = help: fix the TOML syntax (TOML 1.1, a superset of 1.0: https://toml.io/en/v1.1.0)

error: 2 registry rule violations
";
    assert_eq!(
        r,
        Run {
            code: 1,
            stdout: String::new(),
            stderr: expected.into(),
        }
    );
    // The fixture does hold the raw characters, and the machine formats keep the file's
    // columns (one replacement character per hidden one, so they agree with the snippet).
    let file = std::fs::read_to_string("tests/fixtures/invisible-characters/kcap-x.toml").unwrap();
    assert!(file.contains("Re\u{200b}view \u{202e}tool\u{ad}\""));
    let json = run(&[
        "check",
        "tests/fixtures/invisible-characters",
        "--format",
        "json",
    ]);
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        (&json[0]["line"], &json[0]["column"], &json[0]["end_column"]),
        (&2.into(), &15.into(), &31.into())
    );
}
