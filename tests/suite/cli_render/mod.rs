//! `kcap-mcp-registry render claude|codex`: exact argv in every format, warnings naming the
//! entry and the agent id, every refusal, and a shell round-trip for hostile values.
#![cfg(feature = "cli")]

mod refusals;
mod values;

pub(super) use crate::common;

pub(super) use common::{Run, bin, finish, run};
pub(super) use kcap_mcp_registry::clients::Client;
pub(super) use kcap_mcp_registry::clients::codex::{CLOSED_FEATURES, PROJECT_DOC_OFF};
pub(super) use kcap_mcp_registry::{LaunchContext, Policy};

pub(super) const URL: &str = "http://127.0.0.1:5100";
pub(super) const KCAP: &str = "/usr/bin/kcap";
pub(super) const LAUNCH: &str = "tests/fixtures/cli/render/launch.json";
/// A saved `codex app-server` `config/read` answer, once `render codex --inventory`'s input.
pub(super) const INVENTORY: &str = "tests/fixtures/cli/render/config-read.json";

/// Runs `render CLIENT --launch-dir /run/kcap/l1 --server-url URL --kcap-bin KCAP` followed by `args` (in the crate
/// root): the launch values most cases share.
pub(super) fn render(client: &str, args: &[&str]) -> Run {
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

pub(super) const CLAUDE_CONFIG: &str = concat!(
    r#"{"mcpServers":{"kcap-flow-result":{"command":"/usr/bin/kcap","args":["mcp","flow-result"],"#,
    r#""env":{"KCAP_URL":"http://127.0.0.1:5100","KCAP_FLOW_AGENT_ID":"a1"}},"#,
    r#""kcap-review":{"command":"/usr/bin/kcap","args":["mcp","review"],"env":{"KCAP_URL":"http://127.0.0.1:5100"}}}}"#
);

/// Where `render claude` puts its `--mcp-config` JSON: a file of the launch directory, which
/// the argv names (no secret in an argv).
pub(super) const CLAUDE_CONFIG_FILE: &str = "/run/kcap/l1/mcp-config.json";

/// What `render claude` says when its launch has a prompt (typed, not in the argv).
pub(super) const TYPED_NOTE: &str = "note: the prompt is not in this argv: Claude Code would send an argv \
     prompt before its MCP servers listed their tools; `launch` types it once claude-debug.log \
     says they have (the plan's `typed_prompt`, `--format plan`)\n";

/// The argv of Claude Code's plan for `ctx` in the launch directory `/run/kcap/l1`: what
/// `render claude` prints.
pub(super) fn claude_argv(ctx: &LaunchContext) -> Vec<String> {
    let mut ctx = ctx.clone();
    ctx.launch_dir = Some("/run/kcap/l1".into());
    let resolution = ctx.resolve(Policy::Lenient).unwrap();
    crate::common::plan::resolved(Client::Claude, &ctx, &resolution, Policy::Lenient)
        .unwrap()
        .argv
}

/// The argv of Codex CLI's plan for `ctx` in the launch directory `/run/kcap/l1`: what
/// `render codex` prints (its servers' `env` is in the plan's `config.toml`).
pub(super) fn codex_argv(ctx: &LaunchContext) -> Vec<String> {
    let mut ctx = ctx.clone();
    ctx.launch_dir = Some("/run/kcap/l1".into());
    let resolution = ctx.resolve(Policy::Lenient).unwrap();
    crate::common::plan::resolved(Client::Codex, &ctx, &resolution, Policy::Lenient)
        .unwrap()
        .argv
}

/// The `--mcp-config` JSON of a `render claude … --format plan` output.
pub(super) fn claude_config(plan: &str) -> String {
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
    // (An escape character is refused in a terminal client's prompt: `prompt_chars`.)
    let prompt = "Review\nwarning: forged\u{202e}x\u{200b}y\tz";
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
        &r"Review\nwarning: forged\u{202e}x\u{200b}y\tz"
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
            "--sandbox\ndanger-full-access\n--ask-for-approval\nnever\n--no-daemon\n{}-c\n{}\n--no-alt-screen\n",
            CLOSED_FEATURES
                .map(|f| format!("--disable\n{f}\n"))
                .concat(),
            PROJECT_DOC_OFF
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
        snapbox::file!["../snapshots/render-codex-launch-json.stdout"]
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
                "warning: agent \"a9\": no kcap server URL or no kcap binary (--server-url, --kcap-bin; `LaunchRequest::server`), so every MCP server (the result channel and any allowlist) is gated off\n{TYPED_NOTE}"
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
