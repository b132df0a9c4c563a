//! `kcap-mcp-registry render claude|codex`: exact argv in every format, warnings naming the
//! entry and the agent id, every refusal, and a shell round-trip for hostile values.
#![cfg(feature = "cli")]

use crate::common;

use common::{Run, bin, finish, run};
use kcap_mcp_registry::clients::claude::{claude_plan, claude_reviewer_args};
use kcap_mcp_registry::clients::codex::CLOSED_FEATURES;
use kcap_mcp_registry::clients::codex::codex_plan;
use kcap_mcp_registry::{LaunchContext, Policy};

const URL: &str = "http://127.0.0.1:5100";
const KCAP: &str = "/usr/bin/kcap";
const LAUNCH: &str = "tests/fixtures/cli/render/launch.json";
/// A saved `codex app-server` `config/read` answer, once `render codex --inventory`'s input.
const INVENTORY: &str = "tests/fixtures/cli/render/config-read.json";

/// Runs `render CLIENT --launch-dir /run/kcap/l1 --server-url URL --kcap-bin KCAP` followed by `args` (in the crate
/// root): the launch values most cases share.
fn render(client: &str, args: &[&str]) -> Run {
    let mut all = vec![
        "render",
        client,
        "--launch-dir",
        "/run/kcap/l1",
        "--server-url",
        URL,
        "--kcap-bin",
        KCAP,
    ];
    all.extend(args);
    run(&all)
}

const CLAUDE_CONFIG: &str = concat!(
    r#"{"mcpServers":{"kcap-flow-result":{"command":"/usr/bin/kcap","args":["mcp","flow-result"],"#,
    r#""env":{"KCAP_URL":"http://127.0.0.1:5100","KCAP_FLOW_AGENT_ID":"a1"}},"#,
    r#""kcap-review":{"command":"/usr/bin/kcap","args":["mcp","review"],"env":{"KCAP_URL":"http://127.0.0.1:5100"}}}}"#
);

/// Where `render claude` puts its `--mcp-config` JSON: a file of the launch directory, which
/// the argv names (no secret in an argv).
const CLAUDE_CONFIG_FILE: &str = "/run/kcap/l1/mcp-config.json";

/// What `render claude` says when its launch has a prompt (typed, not in the argv).
const TYPED_NOTE: &str = "note: the prompt is not in this argv: Claude Code would send an argv \
     prompt before its MCP servers listed their tools; `launch` types it once claude-debug.log \
     says they have (the plan's `typed_prompt`, `--format plan`)\n";

/// The argv of Claude Code's plan for `ctx` in the launch directory `/run/kcap/l1`: what
/// `render claude` prints.
fn claude_argv(ctx: &LaunchContext) -> Vec<String> {
    let mut ctx = ctx.clone();
    ctx.launch_dir = Some("/run/kcap/l1".into());
    let resolution = ctx.resolve(Policy::Lenient).unwrap();
    claude_plan(&ctx, &resolution).unwrap().argv
}

/// The argv of Codex CLI's plan for `ctx` in the launch directory `/run/kcap/l1`: what
/// `render codex` prints (its servers' `env` is in the plan's `config.toml`).
fn codex_argv(ctx: &LaunchContext) -> Vec<String> {
    let mut ctx = ctx.clone();
    ctx.launch_dir = Some("/run/kcap/l1".into());
    let resolution = ctx.resolve(Policy::Lenient).unwrap();
    codex_plan(&ctx, &resolution).unwrap().argv
}

/// The `--mcp-config` JSON of a `render claude … --format plan` output.
fn claude_config(plan: &str) -> String {
    let plan: serde_json::Value = serde_json::from_str(plan).unwrap();
    let file = plan["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "mcp-config.json")
        .unwrap_or_else(|| panic!("no mcp-config.json in {plan}"));
    assert_eq!(file["mode"], 0o600);
    file["contents"].as_str().unwrap().to_owned()
}

#[test]
fn claude_lines_with_warnings_naming_the_entry_and_the_agent() {
    let r = render(
        "claude",
        &[
            "--agent-id",
            "a1",
            "--allowlist",
            "kcap-review,kcap-flows",
            "--allowlist",
            "evil\n\"x\"",
            "--effort",
            "high",
            "--model",
            "opus",
            "--prompt",
            "Review it",
        ],
    );
    assert_eq!(
        r,
        Run {
            code: 0,
            stdout: format!(
                "--permission-mode\nbypassPermissions\n--strict-mcp-config\n--mcp-config\n{CLAUDE_CONFIG_FILE}\n--disallowedTools\nAgent\n--setting-sources=\n--settings\n{{\"skipDangerousModePermissionPrompt\":true}}\n--effort\nhigh\n--model\nopus\n--debug-file\n/run/kcap/l1/claude-debug.log\n"
            ),
            stderr: [
                "warning: agent \"a1\": MCP allowlist entry 2 \"kcap-flows\" skipped: can start flows (recursion guard)\n",
                "warning: agent \"a1\": MCP allowlist entry 3 \"evil\\n\\\"x\\\"\" skipped: not a kcap MCP server\n",
                TYPED_NOTE,
            ]
            .concat(),
        }
    );
}

#[test]
fn lines_format_shows_control_and_invisible_characters_escaped_and_json_keeps_them() {
    let prompt = "Review\nwarning: forged\u{1b}[2J\u{202e}x\u{200b}y\tz";
    let base = ["--agent-id", "a1", "--prompt", prompt, "--format"];
    let r = render("codex", &[&base[..], &["lines"]].concat());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    // One line per argument: the prompt's newline did not add one.
    let ctx = LaunchContext {
        server_url: Some(URL.into()),
        kcap_bin: Some(KCAP.into()),
        agent_id: "a1".into(),
        prompt: Some(prompt.into()),
        ..LaunchContext::default()
    };
    let exact = codex_argv(&ctx);
    assert_eq!(lines.len(), exact.len(), "{}", r.stdout);
    assert_eq!(
        lines.last().unwrap(),
        &r"Review\nwarning: forged\u{1b}[2J\u{202e}x\u{200b}y\tz"
    );
    assert!(
        !r.stdout
            .chars()
            .any(|c| c != '\n' && kcap_mcp_registry::text::is_forbidden_char(c)),
        "{:?}",
        r.stdout
    );
    // `json` stays exact.
    let r = render("codex", &[&base[..], &["json"]].concat());
    let argv: Vec<String> = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(argv, exact);
    assert_eq!(argv.last().unwrap(), prompt);
}

#[test]
fn claude_json_is_the_library_argv() {
    let r = render(
        "claude",
        &[
            "--agent-id",
            "a1",
            "--allowlist",
            "kcap-review",
            "--format",
            "json",
        ],
    );
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let expected = serde_json::to_string(&[
        "--permission-mode",
        "bypassPermissions",
        "--strict-mcp-config",
        "--mcp-config",
        CLAUDE_CONFIG_FILE,
        "--disallowedTools",
        "Agent",
        "--setting-sources=",
        "--settings",
        r#"{"skipDangerousModePermissionPrompt":true}"#,
    ])
    .unwrap();
    assert_eq!(r.stdout, format!("{expected}\n"));
    // The JSON is the plan's file, which the executor writes (mode 0600).
    let r = render(
        "claude",
        &[
            "--agent-id",
            "a1",
            "--allowlist",
            "kcap-review",
            "--format",
            "plan",
        ],
    );
    assert_eq!(claude_config(&r.stdout), CLAUDE_CONFIG);
}

#[test]
fn a_gated_render_has_no_mcp_servers() {
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--agent-id",
        "a1",
        "--format",
        "json",
    ]);
    assert_eq!(
        r.stdout,
        "[\"--permission-mode\",\"bypassPermissions\",\"--strict-mcp-config\",\"--mcp-config\",\"/run/kcap/l1/mcp-config.json\",\"--disallowedTools\",\"Agent\",\"--setting-sources=\",\"--settings\",\"{\\\"skipDangerousModePermissionPrompt\\\":true}\"]\n"
    );
    let r = run(&[
        "render",
        "codex",
        "--launch-dir",
        "/run/kcap/l1",
        "--agent-id",
        "a1",
        "--kcap-bin",
        KCAP,
    ]);
    assert_eq!(
        r.stdout,
        format!(
            "--sandbox\ndanger-full-access\n--ask-for-approval\nnever\n--no-daemon\n{}--no-alt-screen\n",
            CLOSED_FEATURES
                .map(|f| format!("--disable\n{f}\n"))
                .concat()
        )
    );
}

#[test]
fn codex_from_a_launch_json() {
    let expected_stderr = "\
warning: agent \"agent-7\": MCP allowlist entry 2 \"KCAP-FLOWS\" skipped: can start flows (recursion guard)
warning: agent \"agent-7\": MCP allowlist entry 3 null skipped: blank
warning: agent \"agent-7\": MCP allowlist entry 4 \"kcap-review\" skipped: duplicate of an earlier entry
";
    let r = run(&[
        "render",
        "codex",
        "--launch-dir",
        "/run/kcap/l1",
        "--launch-json",
        LAUNCH,
        "--server-url",
        URL,
        "--kcap-bin",
        KCAP,
        "--worktree",
        "/work/tree",
    ]);
    assert_eq!((r.code, r.stderr.as_str()), (0, expected_stderr));
    // The rendered argv, one per line (`SNAPSHOTS=overwrite` rewrites it after a reviewed
    // change).
    snapbox::assert_data_eq!(
        r.stdout.as_str(),
        snapbox::file!["snapshots/render-codex-launch-json.stdout"]
    );
}

#[test]
fn command_line_values_override_the_launch_json() {
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--launch-json",
        LAUNCH,
        "--agent-id",
        "a9",
        "--allowlist",
        "kcap-sessions",
        "--model",
        "sonnet",
        "--prompt",
        "Other",
        "--format",
        "json",
    ]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            0,
            &format!(
                "warning: agent \"a9\": no --server-url or no --kcap-bin, so every MCP server (the result channel and any allowlist) is gated off\n{TYPED_NOTE}"
            )[..]
        )
    );
    let argv: Vec<String> = serde_json::from_str(&r.stdout).unwrap();
    // Effort still comes from the launch JSON; the rest from the flags. (Gated: no URL.)
    assert_eq!(
        argv[10..],
        [
            "--effort",
            "max",
            "--model",
            "sonnet",
            "--debug-file",
            "/run/kcap/l1/claude-debug.log"
        ]
    );
    let r = render(
        "claude",
        &[
            "--launch-json",
            LAUNCH,
            "--agent-id",
            "a9",
            "--allowlist",
            "kcap-sessions",
            "--format",
            "plan",
        ],
    );
    let config = claude_config(&r.stdout);
    assert!(config.contains("\"KCAP_FLOW_AGENT_ID\":\"a9\""), "{config}");
    assert!(config.contains("\"kcap-sessions\""));
    assert!(!config.contains("\"kcap-review\""));
}

/// A stand-in for the Codex binary that leaves `<itself>.ran` when it is run.
fn marking_codex(dir: &std::path::Path) -> std::path::PathBuf {
    common::stand_in::sh_script(dir, "codex", "touch \"$0.ran\"; echo '[]'")
}

/// `render codex --inventory`, `--codex-bin` and `--no-inherited-servers` (deprecated: the
/// plan takes no inventory) are accepted, hidden from the help, ignored (no file read, no
/// binary run, standard input left for --launch-json) and named in one warning line.
#[test]
fn codex_inventory_flags_are_ignored_with_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let codex = marking_codex(dir.path());
    let codex = codex.to_str().unwrap();
    let base = render("codex", &["--agent-id", "a1", "--format", "plan"]);
    assert_eq!((base.code, base.stderr.as_str()), (0, ""));
    let warning = |flags: &str| {
        format!(
            "warning: {flags} ignored (deprecated, to be removed): the plan roots Codex in a \
             per-launch CODEX_HOME that configures no MCP server but kcap's, so there is no \
             inherited server to take an inventory of\n"
        )
    };
    for (flags, named) in [
        (vec!["--no-inherited-servers"], "--no-inherited-servers"),
        (vec!["--inventory", INVENTORY], "--inventory"),
        (
            vec!["--inventory", "/nonexistent/inventory.json"],
            "--inventory",
        ),
        (vec!["--codex-bin", codex], "--codex-bin"),
        (vec!["--codex-bin", "/nonexistent/codex"], "--codex-bin"),
        (
            vec![
                "--inventory",
                INVENTORY,
                "--codex-bin",
                codex,
                "--no-inherited-servers",
            ],
            "--inventory, --codex-bin, --no-inherited-servers",
        ),
    ] {
        let mut args = vec!["--agent-id", "a1", "--format", "plan"];
        args.extend(&flags);
        let r = render("codex", &args);
        assert_eq!(
            r,
            Run {
                stderr: warning(named),
                ..base.clone()
            },
            "{flags:?}"
        );
    }
    assert!(
        !dir.path().join("codex.ran").exists(),
        "--codex-bin was run"
    );
    // `--inventory -` no longer reads standard input, so --launch-json can.
    let r = finish(
        bin()
            .args([
                "render",
                "codex",
                "--launch-dir",
                "/run/kcap/l1",
                "--server-url",
                URL,
                "--kcap-bin",
                KCAP,
                "--launch-json",
                "-",
                "--inventory",
                "-",
                "--format",
                "plan",
            ])
            .write_stdin(r#"{"agent_id":"a1"}"#),
    );
    assert_eq!(
        r,
        Run {
            stderr: warning("--inventory"),
            ..base
        }
    );
    let help = run(&["render", "codex", "--help"]);
    for flag in ["--inventory", "--codex-bin", "--no-inherited-servers"] {
        assert!(!help.stdout.contains(flag), "{flag}: {}", help.stdout);
    }
}

#[test]
fn bad_inputs_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad_launch = dir.path().join("launch.json");
    std::fs::write(
        &bad_launch,
        r#"{"agent_id":"a1","mcp_allowlist":["kcap-review",7]}"#,
    )
    .unwrap();
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--launch-json",
        bad_launch.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr,
        format!(
            "error: {} is not a launch command JSON: mcp_allowlist[1]: invalid type: integer `7`, expected a string at line 1 column 49\n",
            bad_launch.display()
        )
    );
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--launch-json",
        "tests/fixtures/cli/no-such.json",
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with("error: --launch-json: cannot read tests/fixtures/cli/no-such.json: "),
        "{}",
        r.stderr
    );
    // Missing agent id, unknown format.
    assert_eq!(
        run(&["render", "claude", "--launch-dir", "/run/kcap/l1"]).code,
        2
    );
    assert_eq!(
        run(&[
            "render",
            "claude",
            "--launch-dir",
            "/run/kcap/l1",
            "--agent-id",
            "a",
            "--format",
            "csv"
        ])
        .code,
        2
    );
}

#[test]
fn render_refusals_exit_1_with_the_message() {
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--agent-id",
        "a1",
        "--allowlist",
        "kcap-review,kcap-memory",
        "--strict",
    ]);
    assert_eq!(
        r,
        Run {
            code: 1,
            stdout: String::new(),
            stderr: "error: MCP allowlist entry 2 \"kcap-memory\" is refused by the strict policy: the server is not read-only, so its tools need approval; remove it from the flow's MCP allowlist, or plan with the lenient policy, which admits it\n".into(),
        }
    );
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--agent-id",
        "a1",
        "--server-url",
        "http://${HOST}",
        "--kcap-bin",
        KCAP,
    ]);
    assert_eq!(
        r,
        Run {
            code: 1,
            stdout: String::new(),
            stderr: "error: cannot render the Claude Code launch: `kcap-flow-result.env.KCAP_URL` contains `${`, which Claude Code expands as a variable reference and cannot escape; remove `${` from that value\n".into(),
        }
    );
    // A NUL cannot be a shell word.
    let nul = |client| {
        finish(
            bin()
                .args([
                    "render",
                    client,
                    "--launch-dir",
                    "/run/kcap/l1",
                    "--launch-json",
                    "-",
                    "--format",
                    "shell",
                ])
                .write_stdin(r#"{"agent_id":"a1","prompt":"a\u0000b"}"#),
        )
    };
    assert_eq!(
        nul("codex"),
        Run {
            code: 1,
            stdout: String::new(),
            stderr: "error: cannot render the codex launch: codex takes the reviewer's prompt in argv, and it holds a NUL byte, which no argument can pass; remove it\n".into(),
        }
    );
    // Claude Code's prompt is typed into its terminal: a control character would be a key.
    assert_eq!(
        nul("claude"),
        Run {
            code: 1,
            stdout: String::new(),
            stderr: "error: the reviewer's `prompt` `a\\0b` contains a null character (U+0000); give it without one\n".into(),
        }
    );
}

/// Hostile launch values: quotes, spaces, newlines, `$`, backticks, backslashes, globs.
const HOSTILE: [&str; 4] = [
    "it's \"quoted\" $HOME `id` $(id) ${HOME}\nline 2\t\\ * ~ # ! ; & | < >",
    "/opt/my kcap/'k'\"c\"ap$x`y`",
    // No control character: `render` refuses one in an agent id, URL or binary path.
    "a'b c\"d\\e",
    "m -- --not-an-option",
];

/// Runs `sh -c '<script>' _ <line>`: the rendered shell line becomes the positional
/// parameters of `script`.
fn through_sh(script: &str, line: &str) -> Vec<u8> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("sh -c '{script}' _ {line}"))
        .output()
        .expect("sh runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn assert_round_trip(cli: &[&str], expected: &[String]) {
    let r = run(cli);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let line = r.stdout.strip_suffix('\n').expect("one line");
    assert!(!line.is_empty());
    // The form from the issue: one argument per output line.
    let printed = through_sh(r#"printf "%s\n" "$@""#, line);
    let mut joined = expected.join("\n");
    joined.push('\n');
    assert_eq!(String::from_utf8(printed).unwrap(), joined);
    // And exactly, NUL-separated, so arguments holding newlines are unambiguous.
    let printed = through_sh(r#"printf "%s\0" "$@""#, line);
    let got: Vec<&[u8]> = printed.split(|&b| b == 0).collect();
    let got: Vec<String> = got[..got.len() - 1]
        .iter()
        .map(|a| String::from_utf8(a.to_vec()).unwrap())
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn shell_format_round_trips_hostile_values_through_sh() {
    let [prompt, kcap, agent, model] = HOSTILE;
    let ctx = LaunchContext {
        server_url: Some("http://h/$x `y` 'q' \"z\" nl".into()),
        kcap_bin: Some(kcap.into()),
        agent_id: agent.into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into())]),
        model: Some(model.into()),
        effort: Some(agent.into()),
        prompt: Some(prompt.into()),
        worktree: Some(format!("/w/{kcap}")),
        ..LaunchContext::default()
    };
    let url = ctx.server_url.clone().unwrap();
    let worktree = ctx.worktree.clone().unwrap();
    let common = [
        "--server-url",
        url.as_str(),
        "--kcap-bin",
        kcap,
        "--agent-id",
        agent,
        "--allowlist",
        "kcap-review",
        "--model",
        model,
        "--effort",
        agent,
        "--prompt",
        prompt,
        "--format",
        "shell",
    ];

    let mut claude = vec!["render", "claude", "--launch-dir", "/run/kcap/l1"];
    claude.extend(common);
    // Rendered without `--worktree`: nothing is kept from a worktree, no note on the prompt.
    let expected = claude_argv(&LaunchContext {
        worktree: None,
        ..ctx.clone()
    });
    assert_round_trip(&claude, &expected);

    let mut codex = vec![
        "render",
        "codex",
        "--launch-dir",
        "/run/kcap/l1",
        "--worktree",
        &worktree,
    ];
    codex.extend(common);
    let expected = codex_argv(&ctx);
    assert!(expected.iter().any(|a| a.contains('\n') && a.contains('`')));
    assert_round_trip(&codex, &expected);
}

#[test]
fn agent_id_flag_fills_a_payload_without_one_and_a_blank_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let payload = dir.path().join("launch.json");
    std::fs::write(&payload, r#"{"mcp_allowlist":["kcap-review"]}"#).unwrap();
    let p = payload.to_str().unwrap();
    let common = [
        "--server-url",
        "http://h",
        "--kcap-bin",
        "/k",
        "--format",
        "plan",
    ];
    let mut args = vec![
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--launch-json",
        p,
        "--agent-id",
        "a7",
    ];
    args.extend(common);
    let r = run(&args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(r#"\"KCAP_FLOW_AGENT_ID\":\"a7\""#),
        "{}",
        r.stdout
    );

    let mut args = vec![
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--launch-json",
        p,
    ];
    args.extend(common);
    let r = run(&args);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("missing field `agent_id`"),
        "{}",
        r.stderr
    );

    let mut args = vec![
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--agent-id",
        " ",
    ];
    args.extend(common);
    assert_eq!(
        run(&args),
        Run {
            code: 1,
            stdout: String::new(),
            stderr: "error: the reviewer's agent id is blank, and the result channel needs it (KCAP_FLOW_AGENT_ID); give the launch its agent id\n".into(),
        }
    );
}

#[test]
fn brokered_and_borrowed_flags_and_launch_fields_render_the_library_argv() {
    use kcap_mcp_registry::{ResultDelivery, Snapshot};

    let flags = [
        "--server-url",
        URL,
        "--kcap-bin",
        KCAP,
        "--agent-id",
        "a1",
        "--allowlist",
        "kcap-review",
        "--result-capability-url",
        "http://127.0.0.1:7000/t",
        "--review-context-url",
        "http://127.0.0.1:7001/rc",
        "--format",
        "json",
    ];
    let ctx = LaunchContext {
        server_url: Some(URL.into()),
        kcap_bin: Some(KCAP.into()),
        agent_id: "a1".into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into())]),
        result_delivery: ResultDelivery::Brokered {
            capability_url: "http://127.0.0.1:7000/t".into(),
        },
        snapshot: Snapshot::Borrowed {
            review_context_url: Some("http://127.0.0.1:7001/rc".into()),
        },
        ..LaunchContext::default()
    };
    let claude = claude_argv(&ctx);
    let config =
        claude_reviewer_args(&ctx, &ctx.resolve(Policy::Lenient).unwrap()).unwrap()[4].clone();
    assert!(config.contains(r#""KCAP_FLOW_CAPABILITY_URL":"http://127.0.0.1:7000/t""#));
    assert!(config.contains(r#""KCAP_REVIEW_CONTEXT_URL":"http://127.0.0.1:7001/rc""#));
    assert_eq!(claude[4], CLAUDE_CONFIG_FILE);
    let mut args = vec!["render", "claude", "--launch-dir", "/run/kcap/l1"];
    args.extend(flags);
    assert_eq!(
        run(&args),
        Run {
            code: 0,
            stdout: format!("{}\n", serde_json::to_string(&claude).unwrap()),
            stderr: String::new(),
        }
    );
    let codex = codex_argv(&ctx);
    let mut args = vec!["render", "codex", "--launch-dir", "/run/kcap/l1"];
    args.extend(flags);
    assert_eq!(
        run(&args).stdout,
        format!("{}\n", serde_json::to_string(&codex).unwrap())
    );

    // The same launch from a launch command's fields.
    let dir = tempfile::tempdir().unwrap();
    let launch = dir.path().join("launch.json");
    std::fs::write(
        &launch,
        r#"{"agent_id":"a1","mcp_allowlist":["kcap-review"],"result_capability_url":"http://127.0.0.1:7000/t","review_context_url":"http://127.0.0.1:7001/rc"}"#,
    )
    .unwrap();
    let launch = launch.to_str().unwrap();
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--server-url",
        URL,
        "--kcap-bin",
        KCAP,
        "--launch-json",
        launch,
        "--format",
        "json",
    ]);
    assert_eq!(
        (r.code, r.stdout),
        (0, format!("{}\n", serde_json::to_string(&claude).unwrap()))
    );

    // A borrowed snapshot without its URL is refused, naming what is missing.
    std::fs::write(
        dir.path().join("borrowed.json"),
        r#"{"agent_id":"a1","borrowed_snapshot":true}"#,
    )
    .unwrap();
    let borrowed = dir.path().join("borrowed.json");
    for client in ["claude", "codex"] {
        let args = vec![
            "render",
            client,
            "--server-url",
            URL,
            "--kcap-bin",
            KCAP,
            "--launch-json",
            borrowed.to_str().unwrap(),
        ];
        assert_eq!(
            run(&args),
            Run {
                code: 1,
                stdout: String::new(),
                stderr: "error: a borrowed-snapshot review needs the review-context URL (KCAP_REVIEW_CONTEXT_URL of its review-context server), but none is set; give the launch its review-context URL\n".into(),
            },
            "{client}"
        );
    }
}

#[test]
fn a_control_or_invisible_character_in_an_agent_id_url_or_binary_is_refused_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let launch = dir.path().join("launch.json");
    std::fs::write(
        &launch,
        r#"{"agent_id":"a\u001b]0;x\u0007","review_context_url":"http://h/\u202e","borrowed_snapshot":true}"#,
    )
    .unwrap();
    let launch = launch.to_str().unwrap();
    let refused = |args: &[&str], message: &str| {
        assert_eq!(
            run(args),
            Run {
                code: 2,
                stdout: String::new(),
                stderr: format!("error: {message}; give it without one\n"),
            },
            "{args:?}"
        );
    };
    refused(
        &[
            "render",
            "claude",
            "--launch-dir",
            "/run/kcap/l1",
            "--agent-id",
            "a\nerror: forged",
        ],
        r"--agent-id `a\nerror: forged` contains a line break (U+000A)",
    );
    refused(
        &[
            "render",
            "codex",
            "--launch-dir",
            "/run/kcap/l1",
            "--agent-id",
            "a1",
            "--kcap-bin",
            "/k\u{200b}",
        ],
        r"--kcap-bin `/k\u{200b}` contains a zero width space (U+200B)",
    );
    refused(
        &[
            "render",
            "claude",
            "--launch-dir",
            "/run/kcap/l1",
            "--agent-id",
            "a1",
            "--server-url",
            "http://h\r",
        ],
        r"--server-url `http://h\r` contains a carriage return (U+000D)",
    );
    refused(
        &[
            "render",
            "claude",
            "--launch-dir",
            "/run/kcap/l1",
            "--agent-id",
            "a1",
            "--result-capability-url",
            "http://h/\u{85}",
        ],
        r"--result-capability-url `http://h/\u{85}` contains a next line control (U+0085)",
    );
    // From the launch JSON, named as its field; a flag given instead is what counts.
    refused(
        &[
            "render",
            "claude",
            "--launch-dir",
            "/run/kcap/l1",
            "--launch-json",
            launch,
        ],
        r"`agent_id` of the launch JSON `a\u{1b}]0;x\u{7}` contains an escape character (U+001B)",
    );
    refused(
        &[
            "render",
            "claude",
            "--launch-dir",
            "/run/kcap/l1",
            "--launch-json",
            launch,
            "--agent-id",
            "a1",
        ],
        r"`review_context_url` of the launch JSON `http://h/\u{202e}` contains a right-to-left override (U+202E)",
    );
    let r = run(&[
        "render",
        "claude",
        "--launch-dir",
        "/run/kcap/l1",
        "--launch-json",
        launch,
        "--agent-id",
        "a1",
        "--review-context-url",
        "http://h/rc",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn a_huge_allowlist_names_the_first_twenty_skipped_entries_and_counts_the_rest() {
    use kcap_mcp_registry::ops::render::{SHOWN_SKIP_WARNINGS, shown_skip_warnings, skip_warnings};

    const N: usize = 2_000_000;
    let dir = tempfile::tempdir().unwrap();
    let launch = dir.path().join("launch.json");
    let allowlist: Vec<String> = std::iter::once("kcap-review".to_string())
        .chain((0..N).map(|i| format!("x{i}")))
        .collect();
    std::fs::write(
        &launch,
        serde_json::json!({"agent_id": "a1", "mcp_allowlist": allowlist}).to_string(),
    )
    .unwrap();
    let r = render(
        "claude",
        &[
            "--launch-json",
            launch.to_str().unwrap(),
            "--format",
            "plan",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), SHOWN_SKIP_WARNINGS + 1, "{}", r.stderr);
    assert_eq!(SHOWN_SKIP_WARNINGS, 20);
    assert_eq!(
        lines[0],
        "warning: agent \"a1\": MCP allowlist entry 2 \"x0\" skipped: not a kcap MCP server"
    );
    assert_eq!(
        lines[19],
        "warning: agent \"a1\": MCP allowlist entry 21 \"x19\" skipped: not a kcap MCP server"
    );
    assert_eq!(
        lines[20],
        format!(
            "warning: agent \"a1\": … and {} more skipped MCP allowlist entries \
             (`kcap-mcp-registry resolve` lists each)",
            N - 20
        )
    );
    // The servers are those of the one real entry.
    let config = claude_config(&r.stdout);
    assert!(config.contains("\"kcap-review\""), "{config}");

    // The library keeps every line for a machine; exactly `max` lines never add a count.
    let ctx = LaunchContext {
        agent_id: "a1".into(),
        mcp_allowlist: Some((0..1000).map(|i| Some(format!("x{i}"))).collect()),
        ..LaunchContext::default()
    };
    let resolution = ctx.resolve(Policy::Lenient).unwrap();
    assert_eq!(skip_warnings(&ctx, &resolution).len(), 1000);
    assert_eq!(
        shown_skip_warnings(&ctx, &resolution, 1000),
        skip_warnings(&ctx, &resolution)
    );
    let shown = shown_skip_warnings(&ctx, &resolution, 999);
    assert_eq!(shown.len(), 1000);
    assert_eq!(
        shown[999],
        "agent \"a1\": … and 1 more skipped MCP allowlist entry (`kcap-mcp-registry resolve` lists each)"
    );
}

/// `launch <client> --help` shows a launch: its usage names `--client-bin`, and its example is
/// the room's `render` example carried out (`launch`, no `--format`, `--client-bin <binary>`).
#[test]
fn each_clients_launch_help_shows_a_launch_example() {
    for client in kcap_mcp_registry::Client::ALL {
        let spec = client.spec();
        let help = crate::common::stdout_of(&["launch", spec.name, "--help"]);
        let usage = help.lines().find(|l| l.starts_with("Usage:")).unwrap();
        assert!(usage.contains("--client-bin <PATH>"), "{usage}");
        let examples: Vec<&str> = help
            .lines()
            .filter(|l| {
                l.trim_start().starts_with("kcap-mcp-registry ") && !l.contains("[OPTIONS]")
            })
            .collect();
        assert!(!examples.is_empty(), "{}: no example\n{help}", spec.name);
        for line in examples {
            let line = line.trim_start();
            assert!(
                line.starts_with(&format!("kcap-mcp-registry launch {} ", spec.name))
                    && line.ends_with(&format!(" --client-bin {}", spec.binary))
                    && !line.contains("--format"),
                "{}: {line}",
                spec.name
            );
        }
    }
}
