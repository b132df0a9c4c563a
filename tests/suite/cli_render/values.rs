//! `render`: launch values through every format: hostile values round-trip through `sh`,
//! `--agent-id`, the brokered and borrowed flags, refused control characters, a huge
//! allowlist, and each client's `launch --help` example.

use super::*;

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
    // The JSON is in the plan's `mcp-config.json`, which its argv names.
    let planned = LaunchContext {
        launch_dir: Some("/run/kcap/l1".into()),
        ..ctx.clone()
    };
    let plan = crate::common::plan::lenient(Client::Claude, &planned);
    let config = &plan
        .files
        .iter()
        .find(|f| f.path == "mcp-config.json")
        .unwrap()
        .contents;
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
