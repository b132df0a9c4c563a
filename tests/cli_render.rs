//! `kcap-mcp-registry render claude|codex`: exact argv in every format, warnings naming the
//! entry and the agent id, every refusal, and a shell round-trip for hostile values.
#![cfg(feature = "cli")]

mod common;

use common::{Run, bin, finish, run, run_in};
use kcap_mcp_registry::clients::codex::CLOSED_FEATURES;
use kcap_mcp_registry::clients::{claude::claude_reviewer_args, codex::codex_reviewer_args};
use kcap_mcp_registry::{LaunchContext, Policy};

const URL: &str = "http://127.0.0.1:5100";
const KCAP: &str = "/usr/bin/kcap";
const LAUNCH: &str = "tests/fixtures/cli/render/launch.json";
const INVENTORY: &str = "tests/fixtures/cli/render/config-read.json";
/// The same servers as `codex mcp list --json` reports them (most fields hidden).
const MCP_LIST_INVENTORY: &str = "tests/fixtures/cli/render/inventory.json";

const CLAUDE_CONFIG: &str = concat!(
    r#"{"mcpServers":{"kcap-flow-result":{"command":"/usr/bin/kcap","args":["mcp","flow-result"],"#,
    r#""env":{"KCAP_URL":"http://127.0.0.1:5100","KCAP_FLOW_AGENT_ID":"a1"}},"#,
    r#""kcap-review":{"command":"/usr/bin/kcap","args":["mcp","review"],"env":{"KCAP_URL":"http://127.0.0.1:5100"}}}}"#
);

#[test]
fn claude_lines_with_warnings_naming_the_entry_and_the_agent() {
    let r = run(&[
        "render",
        "claude",
        "--server-url",
        URL,
        "--kcap-bin",
        KCAP,
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
    ]);
    assert_eq!(
        r,
        Run {
            code: 0,
            stdout: format!(
                "--permission-mode\nbypassPermissions\n--strict-mcp-config\n--mcp-config\n{CLAUDE_CONFIG}\n--disallowedTools\nAgent\n--effort\nhigh\n--model\nopus\n--\nReview it\n"
            ),
            stderr: concat!(
                "warning: agent \"a1\": MCP allowlist entry 1 \"kcap-flows\" skipped: can start flows (recursion guard)\n",
                "warning: agent \"a1\": MCP allowlist entry 2 \"evil\\n\\\"x\\\"\" skipped: not a kcap MCP server\n",
            )
            .into(),
        }
    );
}

#[test]
fn claude_json_is_the_library_argv() {
    let r = run(&[
        "render",
        "claude",
        "--server-url",
        URL,
        "--kcap-bin",
        KCAP,
        "--agent-id",
        "a1",
        "--allowlist",
        "kcap-review",
        "--format",
        "json",
    ]);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let expected = serde_json::to_string(&[
        "--permission-mode",
        "bypassPermissions",
        "--strict-mcp-config",
        "--mcp-config",
        CLAUDE_CONFIG,
        "--disallowedTools",
        "Agent",
    ])
    .unwrap();
    assert_eq!(r.stdout, format!("{expected}\n"));
}

#[test]
fn a_gated_render_has_no_mcp_servers() {
    let r = run(&["render", "claude", "--agent-id", "a1", "--format", "json"]);
    assert_eq!(
        r.stdout,
        "[\"--permission-mode\",\"bypassPermissions\",\"--strict-mcp-config\",\"--mcp-config\",\"{\\\"mcpServers\\\":{}}\",\"--disallowedTools\",\"Agent\"]\n"
    );
    let r = run(&[
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--kcap-bin",
        KCAP,
        "--no-inherited-servers",
    ]);
    assert_eq!(
        r.stdout,
        format!(
            "--sandbox\nworkspace-write\n--ask-for-approval\nnever\n{}-c\nmcp_servers={{}}\n--no-alt-screen\n",
            CLOSED_FEATURES
                .map(|f| format!("--disable\n{f}\n"))
                .concat()
        )
    );
}

#[test]
fn codex_from_a_launch_json_and_a_saved_inventory() {
    let expected_stdout = "\
--cd
/work/tree
--sandbox
workspace-write
--ask-for-approval
never
--disable
apps
--disable
enable_mcp_apps
--disable
codex_apps_mcp_2026_07_28
--disable
plugins
--disable
remote_plugin
--disable
skill_mcp_dependency_install
--disable
tool_suggest
--disable
browser_use
--disable
browser_use_external
--disable
in_app_browser
--disable
computer_use
-c
mcp_servers={\"corp.flows\"={enabled=false,command=\"false\"},\"http1\"={enabled=false,url=\"https://example.com/mcp\"}}
-c
mcp_servers.kcap-flow-result.enabled=true
-c
mcp_servers.kcap-flow-result.command=\"/usr/bin/kcap\"
-c
mcp_servers.kcap-flow-result.args=[\"mcp\",\"flow-result\"]
-c
mcp_servers.kcap-flow-result.env={KCAP_URL=\"http://127.0.0.1:5100\",KCAP_FLOW_AGENT_ID=\"agent-7\"}
-c
mcp_servers.kcap-flow-result.default_tools_approval_mode=\"prompt\"
-c
mcp_servers.kcap-flow-result.tools={\"submit_review_result\"={approval_mode=\"approve\"},\"send_flow_message\"={approval_mode=\"approve\"}}
-c
mcp_servers.kcap-review.enabled=true
-c
mcp_servers.kcap-review.command=\"/usr/bin/kcap\"
-c
mcp_servers.kcap-review.args=[\"mcp\",\"review\"]
-c
mcp_servers.kcap-review.env={KCAP_URL=\"http://127.0.0.1:5100\"}
-c
mcp_servers.kcap-review.default_tools_approval_mode=\"approve\"
-c
mcp_servers.kcap-review.tools={\"get_pr_summary\"={approval_mode=\"approve\"},\"list_pr_files\"={approval_mode=\"approve\"},\"get_file_context\"={approval_mode=\"approve\"},\"search_context\"={approval_mode=\"approve\"},\"list_sessions\"={approval_mode=\"approve\"},\"get_transcript\"={approval_mode=\"approve\"}}
-c
mcp_servers.kcap-review.env_vars=[]
-c
mcp_servers.kcap-review.cwd=\"/work/tree\"
-c
mcp_servers.kcap-review.required=false
-c
mcp_servers.kcap-review.startup_timeout_sec=30
-c
mcp_servers.kcap-review.tool_timeout_sec=120
-c
mcp_servers.kcap-review.disabled_tools=[]
-m
gpt-5
-c
model_reasoning_effort=\"xhigh\"
--no-alt-screen
--
Review PR #12
";
    let expected_stderr = "\
warning: agent \"agent-7\": MCP allowlist entry 1 \"KCAP-FLOWS\" skipped: can start flows (recursion guard)
warning: agent \"agent-7\": MCP allowlist entry 2 null skipped: blank
warning: agent \"agent-7\": MCP allowlist entry 3 \"kcap-review\" skipped: duplicate of an earlier entry
";
    let args = [
        "render",
        "codex",
        "--launch-json",
        LAUNCH,
        "--server-url",
        URL,
        "--kcap-bin",
        KCAP,
        "--worktree",
        "/work/tree",
        "--inventory",
    ];
    let expected = Run {
        code: 0,
        stdout: expected_stdout.into(),
        stderr: expected_stderr.into(),
    };
    let mut from_file = args.to_vec();
    from_file.push(INVENTORY);
    assert_eq!(run(&from_file), expected);
    // The same inventory on standard input.
    let mut from_stdin = args.to_vec();
    from_stdin.push("-");
    let stdin = std::fs::read(INVENTORY).unwrap();
    assert_eq!(finish(bin().args(&from_stdin).write_stdin(stdin)), expected);
}

#[test]
fn command_line_values_override_the_launch_json() {
    let r = run(&[
        "render",
        "claude",
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
            "warning: agent \"a9\": no --server-url or no --kcap-bin, so every MCP server (the result channel and any allowlist) is gated off\n"
        )
    );
    let argv: Vec<String> = serde_json::from_str(&r.stdout).unwrap();
    // Effort still comes from the launch JSON; the rest from the flags. (Gated: no URL.)
    assert_eq!(
        argv[7..],
        ["--effort", "max", "--model", "sonnet", "--", "Other"]
    );
    let r = run(&[
        "render",
        "claude",
        "--launch-json",
        LAUNCH,
        "--agent-id",
        "a9",
        "--allowlist",
        "kcap-sessions",
        "--server-url",
        URL,
        "--kcap-bin",
        KCAP,
        "--format",
        "json",
    ]);
    let argv: Vec<String> = serde_json::from_str(&r.stdout).unwrap();
    assert!(argv[4].contains("\"KCAP_FLOW_AGENT_ID\":\"a9\""));
    assert!(argv[4].contains("\"kcap-sessions\""));
    assert!(!argv[4].contains("\"kcap-review\""));
}

#[test]
fn codex_refuses_to_render_without_an_inventory_source() {
    let r = run(&["render", "codex", "--agent-id", "a1"]);
    assert_eq!(
        r,
        Run {
            code: 2,
            stdout: String::new(),
            stderr: "error: Codex also starts the MCP servers of the user's config.toml and plugins, which `-c` cannot remove; give --inventory FILE (saved `codex mcp list --json` output), --codex-bin PATH (to run it), or --no-inherited-servers\n".into(),
        }
    );
    let r = run(&[
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--inventory",
        INVENTORY,
        "--no-inherited-servers",
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("cannot be used with"), "{}", r.stderr);
    let r = run(&["render", "codex", "--launch-json", "-", "--inventory", "-"]);
    assert_eq!(
        r,
        Run {
            code: 2,
            stdout: String::new(),
            stderr: "error: --launch-json and --inventory cannot both read standard input\n".into(),
        }
    );
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
    let bad_inventory = dir.path().join("inventory.json");
    std::fs::write(&bad_inventory, "{}").unwrap();
    let r = run(&[
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--inventory",
        bad_inventory.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with(&format!(
            "error: {}: cannot list the Codex MCP servers to disable (`codex mcp list --json`): unexpected output: ",
            bad_inventory.display()
        )),
        "{}",
        r.stderr
    );
    let r = run(&[
        "render",
        "claude",
        "--launch-json",
        "tests/fixtures/cli/no-such.json",
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with("error: cannot read tests/fixtures/cli/no-such.json: "),
        "{}",
        r.stderr
    );
    // Missing agent id, unknown format.
    assert_eq!(run(&["render", "claude"]).code, 2);
    assert_eq!(
        run(&["render", "claude", "--agent-id", "a", "--format", "csv"]).code,
        2
    );
}

#[test]
fn render_refusals_exit_1_with_the_message() {
    let r = run(&[
        "render",
        "claude",
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
            stderr: "error: MCP allowlist entry 1 \"kcap-memory\" is refused by the strict policy: the server is not read-only, so its tools need approval\n".into(),
        }
    );
    let r = run(&[
        "render",
        "claude",
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
            stderr: "error: cannot render the Claude Code MCP config: `kcap-flow-result.env.KCAP_URL` contains `${`, which Claude Code expands as a variable reference and cannot escape; remove `${` from that value\n".into(),
        }
    );
    // An inherited server named like ours with an env key we do not set cannot be isolated.
    let inventory =
        r#"{"config":{"mcp_servers":{"kcap-review":{"command":"x","env":{"EXTRA":"1"}}}}}"#;
    let r = finish(
        bin()
            .args([
                "render",
                "codex",
                "--agent-id",
                "a1",
                "--server-url",
                URL,
                "--kcap-bin",
                KCAP,
                "--allowlist",
                "kcap-review",
                "--inventory",
                "-",
            ])
            .write_stdin(inventory),
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "error: cannot isolate the Codex reviewer: the user's Codex config defines MCP server `kcap-review` with `env.EXTRA`, which would merge into kcap's server of the same name; remove `env.EXTRA` from `[mcp_servers.kcap-review]` in $CODEX_HOME/config.toml\n"
    );
    // A NUL cannot be a shell word.
    let r = finish(
        bin()
            .args([
                "render",
                "claude",
                "--launch-json",
                "-",
                "--format",
                "shell",
            ])
            .write_stdin(r#"{"agent_id":"a1","prompt":"a\u0000b"}"#),
    );
    assert_eq!(
        r,
        Run {
            code: 1,
            stdout: String::new(),
            stderr: "error: argument 8 contains a NUL character, which no shell word or process argument can carry; remove it from the launch values\n".into(),
        }
    );
}

/// A stand-in for the Codex binary: records its argv per subcommand (`codex.mcp.args`,
/// `codex.app-server.args`) and runs `body`.
fn fake_codex(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
    common::stand_in::sh_script(
        dir,
        "codex",
        &format!("printf '%s\\n' \"$@\" > \"$0.$1.args\"\n{body}"),
    )
}

#[test]
fn codex_bin_is_run_for_the_inventory_and_its_failure_refuses_the_render() {
    let dir = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let codex = fake_codex(
        dir.path(),
        &format!(
            "case \"$1\" in app-server) tr -d '\\n' < '{root}/{INVENTORY}'; echo;; \
             *) cat '{root}/{MCP_LIST_INVENTORY}';; esac"
        ),
    );
    let with_bin = run(&[
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--server-url",
        URL,
        "--kcap-bin",
        KCAP,
        "--codex-bin",
        codex.to_str().unwrap(),
    ]);
    let with_file = run(&[
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--server-url",
        URL,
        "--kcap-bin",
        KCAP,
        "--inventory",
        INVENTORY,
    ]);
    assert_eq!(with_bin.code, 0, "{}", with_bin.stderr);
    assert_eq!(with_bin, with_file);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("codex.mcp.args")).unwrap(),
        "mcp\nlist\n--json\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("codex.app-server.args")).unwrap(),
        "app-server\n"
    );

    let failing = fake_codex(dir.path(), "echo 'config.toml: bad' >&2; exit 3");
    let r = run(&[
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--codex-bin",
        failing.to_str().unwrap(),
    ]);
    assert_eq!(
        r,
        Run {
            code: 1,
            stdout: String::new(),
            stderr: format!(
                "error: {}: cannot list the Codex MCP servers to disable (`codex app-server (config/read)`): unexpected output: the answer ended before the config/read response (exit status: 3): config.toml: bad\n",
                failing.display()
            ),
        }
    );
}

/// Hostile launch values: quotes, spaces, newlines, `$`, backticks, backslashes, globs.
const HOSTILE: [&str; 4] = [
    "it's \"quoted\" $HOME `id` $(id) ${HOME}\nline 2\t\\ * ~ # ! ; & | < >",
    "/opt/my kcap/'k'\"c\"ap$x`y`",
    "a'b\nc\"d\\e",
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
        server_url: Some("http://h/$x `y` 'q' \"z\"\nnl".into()),
        kcap_bin: Some(kcap.into()),
        agent_id: agent.into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into())]),
        model: Some(model.into()),
        effort: Some(agent.into()),
        prompt: Some(prompt.into()),
        worktree: Some(format!("/w/{kcap}")),
        launch_dir: None,
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

    let mut claude = vec!["render", "claude"];
    claude.extend(common);
    let expected = claude_reviewer_args(&ctx, Policy::Lenient).unwrap();
    assert!(expected.iter().any(|a| a.contains('\n') && a.contains('`')));
    assert_round_trip(&claude, &expected);

    let mut codex = vec![
        "render",
        "codex",
        "--no-inherited-servers",
        "--worktree",
        &worktree,
    ];
    codex.extend(common);
    let expected = codex_reviewer_args(&ctx, Policy::Lenient, &[]).unwrap();
    assert_round_trip(&codex, &expected);
}

#[test]
fn codex_bin_runs_in_the_worktree_and_a_relative_path_means_the_current_directory() {
    let dir = tempfile::tempdir().unwrap();
    let worktree = dir.path().join("wt");
    std::fs::create_dir(&worktree).unwrap();
    fake_codex(
        dir.path(),
        "pwd > \"$0.cwd\"\ncase \"$1\" in app-server) echo '{\"id\":2,\"result\":{\"config\":{}}}';; *) echo '[]';; esac",
    );
    let wt = worktree.to_str().unwrap();
    let args = [
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--worktree",
        wt,
        "--codex-bin",
        "./codex",
    ];
    let r = run_in(dir.path(), &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let cwd = std::fs::read_to_string(dir.path().join("codex.cwd")).unwrap();
    assert_eq!(
        cwd.trim_end(),
        worktree.canonicalize().unwrap().to_str().unwrap()
    );

    let missing = dir.path().join("no-such-worktree");
    let args = [
        "render",
        "codex",
        "--agent-id",
        "a1",
        "--worktree",
        missing.to_str().unwrap(),
        "--codex-bin",
        "./codex",
    ];
    let r = run_in(dir.path(), &args);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr,
        format!(
            "error: --worktree {}: not a directory, so Codex's inventory cannot be taken there\n",
            missing.display()
        )
    );
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
        "json",
    ];
    let mut args = vec!["render", "claude", "--launch-json", p, "--agent-id", "a7"];
    args.extend(common);
    let r = run(&args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(r#"\"KCAP_FLOW_AGENT_ID\":\"a7\""#),
        "{}",
        r.stdout
    );

    let mut args = vec!["render", "claude", "--launch-json", p];
    args.extend(common);
    let r = run(&args);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("missing field `agent_id`"),
        "{}",
        r.stderr
    );

    let mut args = vec!["render", "claude", "--agent-id", " "];
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
