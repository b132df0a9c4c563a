//! Golden tests for Claude Code's and Codex's launches, made through the public call
//! (`Client::plan`, `tests/common/plan.rs`): exact, order-sensitive strings of the servers'
//! configuration (`claude_mcp_config`, `codex_mcp_overrides`) and of the plans' argv, with
//! what the plan moves out of the argv read back where it goes (Claude Code's `--mcp-config`
//! JSON into `mcp-config.json` and its prompt into `typed_prompt`; Codex's servers' `env`
//! tables into its `config.toml`).

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::claude::claude_mcp_config;
use kcap_mcp_registry::clients::codex::{CLOSED_FEATURES, PROJECT_DOC_OFF, codex_mcp_overrides};
use kcap_mcp_registry::clients::plan::{LaunchPlan, pr_config_note};
use kcap_mcp_registry::{
    LaunchContext, LaunchError, Policy, RejectReason, RenderError, ResultDelivery, Snapshot,
};

/// Claude Code's plan for `ctx` with its allowlist resolved under `policy`, as a launch
/// makes it.
fn claude(ctx: &LaunchContext, policy: Policy) -> Result<LaunchPlan, LaunchError> {
    crate::common::plan::of(Client::Claude, ctx, policy)
}

/// Codex's plan for `ctx` with its allowlist resolved under `policy`, as a launch makes it.
fn codex(ctx: &LaunchContext, policy: Policy) -> Result<LaunchPlan, LaunchError> {
    crate::common::plan::of(Client::Codex, ctx, policy)
}

/// The `--mcp-config` JSON of a Claude Code plan: the contents of the file (mode 0600) its
/// argv names, in the launch directory.
fn mcp_config(plan: &LaunchPlan) -> &str {
    let at = plan.argv.iter().position(|a| a == "--mcp-config").unwrap() + 1;
    assert_eq!(
        plan.argv[at],
        format!("{}/mcp-config.json", plan.launch_dir)
    );
    let file = plan
        .files
        .iter()
        .find(|f| f.path == "mcp-config.json")
        .unwrap();
    assert_eq!(file.mode, 0o600);
    &file.contents
}

/// The reviewer's prompt in `plan` (Claude Code's typed prompt, Codex's argument after the
/// last `--`), without the note on the pull request's configuration that the plan appends
/// to it when it has a worktree.
fn prompt(plan: &LaunchPlan) -> Option<String> {
    let text = match &plan.typed_prompt {
        Some(typed) => typed.text.clone(),
        None => plan.argv[plan.argv.iter().rposition(|a| a == "--")? + 1].clone(),
    };
    let Some(dir) = plan.pr_config.as_deref() else {
        return Some(text);
    };
    let note = format!("\n\n{}", pr_config_note(&plan.worktree_remove, dir));
    let bare = text.strip_suffix(&note);
    Some(
        bare.unwrap_or_else(|| panic!("no note in {text:?}"))
            .to_owned(),
    )
}

/// Asserts that a Codex plan carries exactly `overrides` (as `codex_mcp_overrides`
/// renders them): each after a `-c` of its argv, but the servers' `env` tables, which its
/// `config.toml` (mode 0600) holds instead, each in its server's table.
fn assert_codex_overrides(plan: &LaunchPlan, overrides: &[String]) {
    let (env, rest): (Vec<&String>, Vec<&String>) =
        overrides.iter().partition(|o| o.contains(".env="));
    let in_argv: Vec<&String> = plan
        .argv
        .iter()
        .enumerate()
        .filter(|(i, a)| *i > 0 && plan.argv[i - 1] == "-c" && a.starts_with("mcp_servers."))
        .map(|(_, a)| a)
        .collect();
    assert_eq!(in_argv, rest);
    let config = &plan.files[0];
    assert!(config.path.ends_with("config.toml") && config.mode == 0o600);
    assert_eq!(config.contents.matches("\nenv = ").count(), env.len());
    for e in env {
        let (id, table) = e
            .strip_prefix("mcp_servers.")
            .and_then(|e| e.split_once(".env="))
            .unwrap();
        let table = format!("[mcp_servers.{id}]\nrequired = true\nenv = {table}\n");
        assert!(
            config.contents.contains(&table),
            "{table} in {}",
            config.contents
        );
    }
}

/// The render error of a failed launch.
fn render_error(e: LaunchError) -> RenderError {
    match e {
        LaunchError::Render(e) => e,
        other => panic!("not a render error: {other:?}"),
    }
}

fn ctx(allowlist: Option<Vec<Option<&str>>>) -> LaunchContext {
    LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some("/opt/kcap/bin/kcap".into()),
        agent_id: "agent-7".into(),
        mcp_allowlist: allowlist.map(|a| a.into_iter().map(|e| e.map(String::from)).collect()),
        model: Some("sonnet".into()),
        effort: Some("high".into()),
        prompt: Some("Review PR 42".into()),
        worktree: Some("/work/tree".into()),
        launch_dir: Some("/run/kcap/launch-1".into()),
        ..LaunchContext::default()
    }
}

const BASELINE_JSON: &str = r#"{"mcpServers":{"kcap-flow-result":{"command":"/opt/kcap/bin/kcap","args":["mcp","flow-result"],"env":{"KCAP_URL":"http://127.0.0.1:5100","KCAP_FLOW_AGENT_ID":"agent-7"}}}}"#;

/// The baseline's JSON in `mcp-config.json`, its prompt typed once the servers are ready
/// (`--debug-file` says when).
fn baseline_claude() -> Vec<String> {
    [
        "--permission-mode",
        "bypassPermissions",
        "--strict-mcp-config",
        "--mcp-config",
        "/run/kcap/launch-1/mcp-config.json",
        "--disallowedTools",
        "Agent",
        "--setting-sources=",
        "--settings",
        r#"{"skipDangerousModePermissionPrompt":true}"#,
        "--effort",
        "high",
        "--model",
        "sonnet",
        "--debug-file",
        "/run/kcap/launch-1/claude-debug.log",
    ]
    .map(String::from)
    .into()
}

/// The baseline's servers as `codex_mcp_overrides` renders them.
fn baseline_codex_overrides() -> Vec<String> {
    [
        "mcp_servers.kcap-flow-result.enabled=true",
        r#"mcp_servers.kcap-flow-result.command="/opt/kcap/bin/kcap""#,
        r#"mcp_servers.kcap-flow-result.args=["mcp","flow-result"]"#,
        r#"mcp_servers.kcap-flow-result.env={KCAP_URL="http://127.0.0.1:5100",KCAP_FLOW_AGENT_ID="agent-7"}"#,
        r#"mcp_servers.kcap-flow-result.default_tools_approval_mode="prompt""#,
        r#"mcp_servers.kcap-flow-result.tools={"submit_review_result"={approval_mode="approve"},"send_flow_message"={approval_mode="approve"}}"#,
    ]
    .map(String::from)
    .into()
}

/// The baseline's argv: its servers' `env` tables in `config.toml`, the note on the pull
/// request's configuration after its prompt.
fn baseline_codex() -> Vec<String> {
    let mut args: Vec<String> = [
        "--cd",
        "/work/tree",
        "--sandbox",
        "danger-full-access",
        "--ask-for-approval",
        "never",
        "--no-daemon",
    ]
    .map(String::from)
    .into();
    for f in CLOSED_FEATURES {
        args.extend(["--disable".into(), f.into()]);
    }
    args.extend([
        "-c",
        PROJECT_DOC_OFF,
        "-c",
        "mcp_servers.kcap-flow-result.enabled=true",
        "-c",
        r#"mcp_servers.kcap-flow-result.command="/opt/kcap/bin/kcap""#,
        "-c",
        r#"mcp_servers.kcap-flow-result.args=["mcp","flow-result"]"#,
        "-c",
        r#"mcp_servers.kcap-flow-result.default_tools_approval_mode="prompt""#,
        "-c",
        r#"mcp_servers.kcap-flow-result.tools={"submit_review_result"={approval_mode="approve"},"send_flow_message"={approval_mode="approve"}}"#,
        "-m",
        "sonnet",
        "-c",
        r#"model_reasoning_effort="high""#,
        "--no-alt-screen",
        "--",
    ]
    .map(String::from));
    let removed = [".codex".to_owned(), ".agents".to_owned()];
    let note = pr_config_note(&removed, "/run/kcap/launch-1/pr-config");
    args.push(format!("Review PR 42\n\n{note}"));
    args
}

#[test]
fn allowlists_that_materialize_nothing_equal_the_baseline_byte_for_byte() {
    let cases: Vec<Option<Vec<Option<&str>>>> = vec![
        None,
        Some(vec![]),
        Some(vec![None]),
        Some(vec![Some("unknown")]),
        Some(vec![Some("kcap-flows")]),
        Some(vec![Some("kcap-flow-result")]),
        Some(vec![
            Some(" KCAP-FLOWS "),
            Some(""),
            Some("\t"),
            Some("KCAP-Flow-Result"),
        ]),
    ];
    for allowlist in cases {
        let c = ctx(allowlist.clone());
        let r = c.resolve(Policy::Lenient).unwrap();
        assert_eq!(
            claude_mcp_config(&c, &r).unwrap(),
            BASELINE_JSON,
            "{allowlist:?}"
        );
        let plan = claude(&c, Policy::Lenient).unwrap();
        assert_eq!(plan.argv, baseline_claude(), "{allowlist:?}");
        assert_eq!(mcp_config(&plan), BASELINE_JSON, "{allowlist:?}");
        assert_eq!(prompt(&plan).as_deref(), Some("Review PR 42"));
        let plan = codex(&c, Policy::Lenient).unwrap();
        assert_eq!(plan.argv, baseline_codex(), "{allowlist:?}");
        assert_codex_overrides(&plan, &baseline_codex_overrides());
    }
}

#[test]
fn allowlisted_servers_follow_the_result_channel_in_allowlist_order() {
    let c = ctx(Some(vec![
        Some("kcap-sessions"),
        Some(" KCAP-REVIEW\n"),
        Some("kcap-flows"),
        None,
        Some("kcap-sessions"),
        Some("kcap-memory"),
        Some("nope"),
    ]));
    let r = c.resolve(Policy::Lenient).unwrap();
    assert_eq!(
        claude_mcp_config(&c, &r).unwrap(),
        concat!(
            r#"{"mcpServers":{"kcap-flow-result":{"command":"/opt/kcap/bin/kcap","args":["mcp","flow-result"],"env":{"KCAP_URL":"http://127.0.0.1:5100","KCAP_FLOW_AGENT_ID":"agent-7"}},"#,
            r#""kcap-sessions":{"command":"/opt/kcap/bin/kcap","args":["mcp","sessions"],"env":{"KCAP_URL":"http://127.0.0.1:5100"}},"#,
            r#""kcap-review":{"command":"/opt/kcap/bin/kcap","args":["mcp","review"],"env":{"KCAP_URL":"http://127.0.0.1:5100"}},"#,
            r#""kcap-memory":{"command":"/opt/kcap/bin/kcap","args":["mcp","memory"],"env":{"KCAP_URL":"http://127.0.0.1:5100"}}}}"#,
        )
    );
    let overrides = codex_mcp_overrides(&c, &r).unwrap();
    assert_eq!(
        overrides,
        [
            "mcp_servers.kcap-flow-result.enabled=true",
            r#"mcp_servers.kcap-flow-result.command="/opt/kcap/bin/kcap""#,
            r#"mcp_servers.kcap-flow-result.args=["mcp","flow-result"]"#,
            r#"mcp_servers.kcap-flow-result.env={KCAP_URL="http://127.0.0.1:5100",KCAP_FLOW_AGENT_ID="agent-7"}"#,
            r#"mcp_servers.kcap-flow-result.default_tools_approval_mode="prompt""#,
            r#"mcp_servers.kcap-flow-result.tools={"submit_review_result"={approval_mode="approve"},"send_flow_message"={approval_mode="approve"}}"#,
            "mcp_servers.kcap-sessions.enabled=true",
            r#"mcp_servers.kcap-sessions.command="/opt/kcap/bin/kcap""#,
            r#"mcp_servers.kcap-sessions.args=["mcp","sessions"]"#,
            r#"mcp_servers.kcap-sessions.env={KCAP_URL="http://127.0.0.1:5100"}"#,
            r#"mcp_servers.kcap-sessions.default_tools_approval_mode="approve""#,
            r#"mcp_servers.kcap-sessions.tools={"search_sessions"={approval_mode="approve"},"get_session_summary"={approval_mode="approve"},"get_session_transcript"={approval_mode="approve"},"get_turn"={approval_mode="approve"},"list_turns"={approval_mode="approve"}}"#,
            "mcp_servers.kcap-review.enabled=true",
            r#"mcp_servers.kcap-review.command="/opt/kcap/bin/kcap""#,
            r#"mcp_servers.kcap-review.args=["mcp","review"]"#,
            r#"mcp_servers.kcap-review.env={KCAP_URL="http://127.0.0.1:5100"}"#,
            r#"mcp_servers.kcap-review.default_tools_approval_mode="approve""#,
            r#"mcp_servers.kcap-review.tools={"get_pr_summary"={approval_mode="approve"},"list_pr_files"={approval_mode="approve"},"get_file_context"={approval_mode="approve"},"search_context"={approval_mode="approve"},"list_sessions"={approval_mode="approve"},"get_transcript"={approval_mode="approve"}}"#,
            "mcp_servers.kcap-memory.enabled=true",
            r#"mcp_servers.kcap-memory.command="/opt/kcap/bin/kcap""#,
            r#"mcp_servers.kcap-memory.args=["mcp","memory"]"#,
            r#"mcp_servers.kcap-memory.env={KCAP_URL="http://127.0.0.1:5100"}"#,
            r#"mcp_servers.kcap-memory.default_tools_approval_mode="prompt""#,
        ]
    );
    let skipped: Vec<String> = r.skipped().map(|s| s.to_string()).collect();
    assert_eq!(
        skipped,
        [
            r#"MCP allowlist entry 3 "kcap-flows" skipped: can start flows (recursion guard)"#,
            "MCP allowlist entry 4 null skipped: blank",
            r#"MCP allowlist entry 5 "kcap-sessions" skipped: duplicate of an earlier entry"#,
            r#"MCP allowlist entry 7 "nope" skipped: not a kcap MCP server"#,
        ]
    );
}

#[test]
fn gated_contexts_render_no_mcp_server() {
    let gates: [fn(&mut LaunchContext); 4] = [
        |c| c.server_url = None,
        |c| c.kcap_bin = None,
        |c| c.server_url = Some("  ".into()),
        |c| c.kcap_bin = Some(String::new()),
    ];
    for gate in gates {
        let mut c = ctx(Some(vec![Some("kcap-review"), Some("kcap-memory")]));
        gate(&mut c);
        assert!(c.is_gated());
        let r = c.resolve(Policy::Lenient).unwrap();
        assert_eq!(claude_mcp_config(&c, &r).unwrap(), r#"{"mcpServers":{}}"#);
        assert_eq!(codex_mcp_overrides(&c, &r).unwrap(), Vec::<String>::new());
    }
}

#[test]
fn claude_refuses_values_that_it_would_expand() {
    // (edit of the baseline context, server, field named in the error)
    type Case = (fn(&mut LaunchContext), &'static str, &'static str);
    let cases: [Case; 4] = [
        (
            |c| c.kcap_bin = Some("/opt/${HOME}/kcap".into()),
            "kcap-flow-result",
            "command",
        ),
        (
            |c| c.server_url = Some("http://h/${X:-y}".into()),
            "kcap-flow-result",
            "env.KCAP_URL",
        ),
        (
            |c| c.agent_id = "a${B}".into(),
            "kcap-flow-result",
            "env.KCAP_FLOW_AGENT_ID",
        ),
        (
            |c| c.server_url = Some("http://h/$${X}".into()),
            "kcap-flow-result",
            "env.KCAP_URL",
        ),
    ];
    for (edit, server, field) in cases {
        let mut c = ctx(None);
        edit(&mut c);
        let r = c.resolve(Policy::Lenient).unwrap();
        let err = claude_mcp_config(&c, &r).unwrap_err();
        assert_eq!(
            err,
            RenderError::Expansion {
                client: kcap_mcp_registry::clients::Client::Claude,
                server: server.to_string(),
                field: field.into(),
                expands: kcap_mcp_registry::clients::claude::EXPANDS,
            }
        );
        assert!(
            err.to_string()
                .contains(&format!("`{server}.{field}` contains `${{`")),
            "{err}"
        );
        assert_eq!(render_error(claude(&c, Policy::Lenient).unwrap_err()), err);
    }
    // `$HOME` without braces is not expanded by Claude Code and passes through.
    let mut c = ctx(None);
    c.server_url = Some("http://h/$HOME".into());
    let r = c.resolve(Policy::Lenient).unwrap();
    assert!(
        claude_mcp_config(&c, &r)
            .unwrap()
            .contains(r#""KCAP_URL":"http://h/$HOME""#)
    );
}

#[test]
fn strict_policy_rejects_the_first_offending_entry() {
    // (allowlist, expected rejection: index, entry, reason)
    type Expected = Option<(usize, Option<&'static str>, RejectReason)>;
    let cases: Vec<(Vec<Option<&str>>, Expected)> = vec![
        (
            vec![
                Some("kcap-review"),
                Some("KCAP-SESSIONS"),
                Some("kcap-analytics"),
            ],
            None,
        ),
        (
            vec![
                Some("kcap-flow-result"),
                Some("kcap-review"),
                Some("kcap-review"),
            ],
            None,
        ),
        (
            vec![Some("kcap-review"), Some("kcap-memory")],
            Some((1, Some("kcap-memory"), RejectReason::NotReadOnly)),
        ),
        (
            vec![Some("kcap-workitems")],
            Some((0, Some("kcap-workitems"), RejectReason::NotReadOnly)),
        ),
        (
            vec![Some(" kcap-FLOWS")],
            Some((0, Some(" kcap-FLOWS"), RejectReason::StartsFlows)),
        ),
        (
            vec![Some("kcap-review"), None],
            Some((1, None, RejectReason::Blank)),
        ),
        (vec![Some("  ")], Some((0, Some("  "), RejectReason::Blank))),
        (
            vec![Some("kcap-revue")],
            Some((0, Some("kcap-revue"), RejectReason::Unknown)),
        ),
    ];
    for (allowlist, expected) in cases {
        let c = ctx(Some(allowlist.clone()));
        let got = c
            .resolve(Policy::Strict)
            .err()
            .map(|r| (r.index, r.entry, r.reason));
        let expected = expected.map(|(i, e, r)| (i, e.map(String::from), r));
        assert_eq!(got, expected, "{allowlist:?}");
    }
    let c = ctx(Some(vec![Some("kcap-memory\n")]));
    let err = claude(&c, Policy::Strict).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"MCP allowlist entry 1 "kcap-memory\n" is refused by the strict policy: the server is not read-only, so its tools need approval; remove it from the flow's MCP allowlist, or plan with the lenient policy, which admits it"#
    );
}

#[test]
fn codex_model_and_effort_rules() {
    let args = |model: Option<&str>, effort: Option<&str>| {
        let mut c = ctx(None);
        c.model = model.map(String::from);
        c.effort = effort.map(String::from);
        c.prompt = None;
        c.worktree = None;
        let a = codex(&c, Policy::Lenient).unwrap().argv;
        let tail = a
            .iter()
            .position(|x| x.starts_with("mcp_servers.kcap-flow-result.tools="))
            .unwrap()
            + 1;
        a[tail..].to_vec()
    };
    assert_eq!(args(None, None), ["--no-alt-screen"]);
    assert_eq!(args(Some(""), Some("")), ["--no-alt-screen"]);
    assert_eq!(args(Some("Default"), Some("AUTO")), ["--no-alt-screen"]);
    assert_eq!(
        args(Some("gpt-5"), Some("max")),
        [
            "-m",
            "gpt-5",
            "-c",
            r#"model_reasoning_effort="xhigh""#,
            "--no-alt-screen"
        ]
    );
    assert_eq!(
        args(None, Some("lo\"w")),
        ["-c", r#"model_reasoning_effort="lo\"w""#, "--no-alt-screen"]
    );
}

#[test]
fn a_codex_prompt_that_codex_would_run_as_a_shell_command_is_refused() {
    let with_prompt = |prompt: &str| {
        let mut c = ctx(None);
        c.prompt = Some(prompt.into());
        c
    };
    for prompt in ["!touch x", " !touch x", "\n\t!touch x"] {
        let e = render_error(codex(&with_prompt(prompt), Policy::Lenient).unwrap_err());
        assert_eq!(
            e,
            RenderError::PromptIsCommand {
                client: kcap_mcp_registry::Client::Codex,
                prefix: '!',
                runs: "which Codex CLI runs as a local shell command at start, outside its own \
                       sandbox",
            },
            "{prompt:?}"
        );
        assert_eq!(
            e.to_string(),
            "cannot render the Codex CLI launch: the reviewer's prompt starts with `!`, which \
             Codex CLI runs as a local shell command at start, outside its own sandbox; start \
             the prompt with text (e.g. `Review: …`)"
        );
    }
    // A `!` anywhere else is text, for both.
    let plan = codex(&with_prompt("Review! !x"), Policy::Lenient).unwrap();
    assert_eq!(plan.argv[plan.argv.len() - 2], "--");
    assert_eq!(prompt(&plan).as_deref(), Some("Review! !x"));
    let plan = claude(&with_prompt("Review! !x"), Policy::Lenient).unwrap();
    assert_eq!(prompt(&plan).as_deref(), Some("Review! !x"));
    // Claude Code's plan types its prompt, and typed, a leading `!` is its bash mode: refused
    // as well (`claude::ready`, `tests/clients/first_turn.rs`).
    assert_eq!(
        render_error(claude(&with_prompt("!touch x"), Policy::Lenient).unwrap_err()),
        RenderError::PromptIsCommand {
            client: Client::Claude,
            prefix: '!',
            runs: "which Claude Code's terminal runs as a shell command (its bash mode) when typed",
        }
    );
}

#[test]
fn claude_optional_args_follow_the_json_and_the_prompt_is_typed_not_given() {
    let mut c = ctx(None);
    c.model = None;
    c.effort = Some(String::new());
    c.prompt = Some("-x --strict-mcp-config".into());
    let plan = claude(&c, Policy::Lenient).unwrap();
    assert_eq!(mcp_config(&plan), BASELINE_JSON);
    assert_eq!(
        plan.argv[5..],
        [
            "--disallowedTools",
            "Agent",
            "--setting-sources=",
            "--settings",
            r#"{"skipDangerousModePermissionPrompt":true}"#,
            "--debug-file",
            "/run/kcap/launch-1/claude-debug.log",
        ]
    );
    // A prompt that reads like options is typed, never an argument.
    assert_eq!(prompt(&plan).as_deref(), Some("-x --strict-mcp-config"));
    assert!(
        !plan.argv.iter().any(|a| a.contains("-x")),
        "{:?}",
        plan.argv
    );
    c.prompt = None;
    let plan = claude(&c, Policy::Lenient).unwrap();
    assert_eq!(plan.typed_prompt, None);
    assert_eq!(
        plan.argv.last().unwrap(),
        r#"{"skipDangerousModePermissionPrompt":true}"#
    );
}

#[test]
fn values_that_would_read_as_options_are_refused() {
    // (edit of the baseline context, the field refused)
    type Case = (fn(&mut LaunchContext), &'static str);
    let cases: [Case; 2] = [
        (|c| c.model = Some("-weird".into()), "model"),
        (|c| c.effort = Some("--max".into()), "effort"),
    ];
    for (edit, field) in cases {
        let mut c = ctx(None);
        edit(&mut c);
        let claude = claude(&c, Policy::Lenient);
        let codex = codex(&c, Policy::Lenient);
        let refused = RenderError::OptionLike { field };
        assert_eq!(render_error(claude.unwrap_err()), refused);
        // Codex puts the effort inside a `-c` value.
        match field {
            "effort" => assert!(codex.is_ok()),
            _ => assert_eq!(render_error(codex.unwrap_err()), refused),
        }
    }
    // A worktree starting with `-` is relative: the plan refuses it as such, for both, before
    // the argv is rendered (an absolute one starts with `/`).
    let mut c = ctx(None);
    c.worktree = Some("-w".into());
    for client in [Client::Claude, Client::Codex] {
        assert_eq!(
            crate::common::plan::refusal(client, &c, Policy::Lenient),
            RenderError::NeedsAbsolute {
                client,
                field: "worktree"
            }
        );
    }
    assert_eq!(
        RenderError::OptionLike { field: "model" }.to_string(),
        "the reviewer's `model` starts with `-`, so the client would read it as an option; use a value that does not start with `-`"
    );
}

const CAPABILITY_URL: &str = "http://127.0.0.1:7000/cap-t0k3n";
const REVIEW_CONTEXT_URL: &str = "http://127.0.0.1:7001/review-context/workspace-mcp-configs";

/// `ctx` allowlisting `kcap-review`, with a delivery mode and a snapshot.
fn injection_ctx(brokered: bool, borrowed: Option<Option<&str>>) -> LaunchContext {
    LaunchContext {
        result_delivery: if brokered {
            ResultDelivery::Brokered {
                capability_url: CAPABILITY_URL.into(),
            }
        } else {
            ResultDelivery::Direct
        },
        snapshot: match borrowed {
            None => Snapshot::Own,
            Some(url) => Snapshot::Borrowed {
                review_context_url: url.map(String::from),
            },
        },
        ..ctx(Some(vec![Some("kcap-review")]))
    }
}

const RESULT_DIRECT: &str = r#""kcap-flow-result":{"command":"/opt/kcap/bin/kcap","args":["mcp","flow-result"],"env":{"KCAP_URL":"http://127.0.0.1:5100","KCAP_FLOW_AGENT_ID":"agent-7"}}"#;
const RESULT_BROKERED: &str = r#""kcap-flow-result":{"command":"/opt/kcap/bin/kcap","args":["mcp","flow-result"],"env":{"KCAP_FLOW_CAPABILITY_URL":"http://127.0.0.1:7000/cap-t0k3n","KCAP_FLOW_AGENT_ID":"agent-7"}}"#;
const REVIEW: &str = r#""kcap-review":{"command":"/opt/kcap/bin/kcap","args":["mcp","review"],"env":{"KCAP_URL":"http://127.0.0.1:5100"}}"#;
const REVIEW_CONTEXT: &str = r#""kcap-review-context":{"command":"/opt/kcap/bin/kcap","args":["mcp","review"],"env":{"KCAP_REVIEW_CONTEXT_MODE":"1","KCAP_REVIEW_CONTEXT_URL":"http://127.0.0.1:7001/review-context/workspace-mcp-configs"}}"#;

fn claude_json(servers: &[&str]) -> String {
    format!(r#"{{"mcpServers":{{{}}}}}"#, servers.join(","))
}

/// The Codex overrides of the result channel (`brokered` or direct), `kcap-review`, and the
/// review context when `borrowed`.
fn codex_overrides(brokered: bool, borrowed: bool) -> Vec<String> {
    let mut out = vec![
        "mcp_servers.kcap-flow-result.enabled=true".to_string(),
        r#"mcp_servers.kcap-flow-result.command="/opt/kcap/bin/kcap""#.into(),
        r#"mcp_servers.kcap-flow-result.args=["mcp","flow-result"]"#.into(),
        if brokered {
            r#"mcp_servers.kcap-flow-result.env={KCAP_FLOW_CAPABILITY_URL="http://127.0.0.1:7000/cap-t0k3n",KCAP_FLOW_AGENT_ID="agent-7"}"#.into()
        } else {
            r#"mcp_servers.kcap-flow-result.env={KCAP_URL="http://127.0.0.1:5100",KCAP_FLOW_AGENT_ID="agent-7"}"#.into()
        },
        r#"mcp_servers.kcap-flow-result.default_tools_approval_mode="prompt""#.into(),
        r#"mcp_servers.kcap-flow-result.tools={"submit_review_result"={approval_mode="approve"},"send_flow_message"={approval_mode="approve"}}"#.into(),
        "mcp_servers.kcap-review.enabled=true".into(),
        r#"mcp_servers.kcap-review.command="/opt/kcap/bin/kcap""#.into(),
        r#"mcp_servers.kcap-review.args=["mcp","review"]"#.into(),
        r#"mcp_servers.kcap-review.env={KCAP_URL="http://127.0.0.1:5100"}"#.into(),
        r#"mcp_servers.kcap-review.default_tools_approval_mode="approve""#.into(),
        r#"mcp_servers.kcap-review.tools={"get_pr_summary"={approval_mode="approve"},"list_pr_files"={approval_mode="approve"},"get_file_context"={approval_mode="approve"},"search_context"={approval_mode="approve"},"list_sessions"={approval_mode="approve"},"get_transcript"={approval_mode="approve"}}"#.into(),
    ];
    if borrowed {
        out.extend([
            "mcp_servers.kcap-review-context.enabled=true".into(),
            r#"mcp_servers.kcap-review-context.command="/opt/kcap/bin/kcap""#.into(),
            r#"mcp_servers.kcap-review-context.args=["mcp","review"]"#.into(),
            r#"mcp_servers.kcap-review-context.env={KCAP_REVIEW_CONTEXT_MODE="1",KCAP_REVIEW_CONTEXT_URL="http://127.0.0.1:7001/review-context/workspace-mcp-configs"}"#.into(),
            r#"mcp_servers.kcap-review-context.default_tools_approval_mode="approve""#.into(),
            r#"mcp_servers.kcap-review-context.tools={"get_branch_authored_mcp_configs"={approval_mode="approve"}}"#.into(),
        ]);
    }
    out
}

#[test]
fn direct_brokered_borrowed_and_brokered_borrowed_launches() {
    let cases = [
        (false, false, vec![RESULT_DIRECT, REVIEW]),
        (true, false, vec![RESULT_BROKERED, REVIEW]),
        (false, true, vec![RESULT_DIRECT, REVIEW, REVIEW_CONTEXT]),
        (true, true, vec![RESULT_BROKERED, REVIEW, REVIEW_CONTEXT]),
    ];
    for (brokered, borrowed, claude_servers) in cases {
        let c = injection_ctx(brokered, borrowed.then_some(Some(REVIEW_CONTEXT_URL)));
        let r = c.resolve(Policy::Lenient).unwrap();
        let what = format!("brokered {brokered}, borrowed {borrowed}");
        assert_eq!(
            claude_mcp_config(&c, &r).unwrap(),
            claude_json(&claude_servers),
            "{what}"
        );
        assert_eq!(
            codex_mcp_overrides(&c, &r).unwrap(),
            codex_overrides(brokered, borrowed),
            "{what}"
        );
        // The plans carry these servers, and the argv around them is the baseline's (the
        // lenient plans: the strict ones also hide the built-in tools, `clients::tools`).
        let claude = claude(&c, Policy::Lenient).unwrap();
        assert_eq!(mcp_config(&claude), claude_json(&claude_servers), "{what}");
        assert_eq!(claude.argv, baseline_claude(), "{what}");
        let codex = codex(&c, Policy::Lenient).unwrap();
        assert_codex_overrides(&codex, &codex_overrides(brokered, borrowed));
    }
}

#[test]
fn the_direct_own_checkout_launch_is_the_unchanged_baseline() {
    // Every new field at its default, spelled out: byte-identical to the baseline.
    let c = LaunchContext {
        result_delivery: ResultDelivery::Direct,
        snapshot: Snapshot::Own,
        ..ctx(None)
    };
    assert_eq!(c, ctx(None));
    let r = c.resolve(Policy::Lenient).unwrap();
    assert_eq!(claude_mcp_config(&c, &r).unwrap(), BASELINE_JSON);
    let plan = claude(&c, Policy::Lenient).unwrap();
    assert_eq!(plan.argv, baseline_claude());
    assert_eq!(mcp_config(&plan), BASELINE_JSON);
    let plan = codex(&c, Policy::Lenient).unwrap();
    assert_eq!(plan.argv, baseline_codex());
    assert_codex_overrides(&plan, &baseline_codex_overrides());
}

#[test]
fn a_borrowed_snapshot_without_a_review_context_url_is_refused() {
    for (brokered, url) in [
        (false, None),
        (true, None),
        (false, Some("")),
        (true, Some("  ")),
    ] {
        let c = injection_ctx(brokered, Some(url));
        let r = c.resolve(Policy::Lenient).unwrap();
        assert_eq!(
            claude_mcp_config(&c, &r),
            Err(RenderError::MissingReviewContextUrl),
            "{url:?}"
        );
        assert_eq!(
            codex_mcp_overrides(&c, &r),
            Err(RenderError::MissingReviewContextUrl),
            "{url:?}"
        );
        let err = render_error(claude(&c, Policy::Lenient).unwrap_err());
        assert_eq!(err, RenderError::MissingReviewContextUrl);
        assert_eq!(
            err.to_string(),
            "a borrowed-snapshot review needs the review-context URL (KCAP_REVIEW_CONTEXT_URL of its review-context server), but none is set; give the launch its review-context URL"
        );
        assert_eq!(
            render_error(codex(&c, Policy::Lenient).unwrap_err()),
            RenderError::MissingReviewContextUrl
        );
    }
    // A blank capability URL is refused too; gated launches need neither.
    let mut c = injection_ctx(true, None);
    c.result_delivery = ResultDelivery::Brokered {
        capability_url: " ".into(),
    };
    assert_eq!(
        render_error(claude(&c, Policy::Lenient).unwrap_err()),
        RenderError::BlankCapabilityUrl
    );
    assert_eq!(
        render_error(codex(&c, Policy::Lenient).unwrap_err()),
        RenderError::BlankCapabilityUrl
    );
    let gated = LaunchContext {
        server_url: None,
        ..injection_ctx(true, Some(None))
    };
    let r = gated.resolve(Policy::Lenient).unwrap();
    assert_eq!(
        claude_mcp_config(&gated, &r).unwrap(),
        r#"{"mcpServers":{}}"#
    );
}

#[test]
fn allowlisting_the_review_context_injects_nothing_and_claude_refuses_an_expanding_url() {
    // Named in the allowlist of an own-checkout launch: a no-op (lenient) and harmless
    // (strict), as for the result channel; in a borrowed one it is injected once, last.
    let mut c = injection_ctx(false, None);
    c.mcp_allowlist = Some(vec![
        Some("kcap-review-context".into()),
        Some("kcap-review".into()),
    ]);
    for policy in [Policy::Lenient, Policy::Strict] {
        let r = c.resolve(policy).unwrap();
        assert_eq!(
            claude_mcp_config(&c, &r).unwrap(),
            claude_json(&[RESULT_DIRECT, REVIEW])
        );
    }
    let skipped: Vec<String> = c
        .resolve(Policy::Lenient)
        .unwrap()
        .skipped()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        skipped,
        [
            "MCP allowlist entry 1 \"kcap-review-context\" skipped: injection-only, never materialized from an allowlist"
        ]
    );
    c.snapshot = Snapshot::Borrowed {
        review_context_url: Some(REVIEW_CONTEXT_URL.into()),
    };
    let r = c.resolve(Policy::Strict).unwrap();
    assert_eq!(
        claude_mcp_config(&c, &r).unwrap(),
        claude_json(&[RESULT_DIRECT, REVIEW, REVIEW_CONTEXT])
    );
    let mut c = c.clone();
    c.snapshot = Snapshot::Borrowed {
        review_context_url: Some("http://h/${HOME}".into()),
    };
    let r = c.resolve(Policy::Strict).unwrap();
    assert_eq!(
        claude_mcp_config(&c, &r),
        Err(RenderError::Expansion {
            client: kcap_mcp_registry::clients::Client::Claude,
            server: "kcap-review-context".into(),
            field: "env.KCAP_REVIEW_CONTEXT_URL".into(),
            expands: kcap_mcp_registry::clients::claude::EXPANDS,
        })
    );
}
