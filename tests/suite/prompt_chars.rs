//! Control characters in the reviewer's prompt (issue 33, item 5): the library (`Client::plan`,
//! `LaunchRequest`) and the CLI refuse, with one error, a prompt holding a character the
//! client's path cannot carry, before any file is touched; and carry the rest.
//!
//! The rule (`clients::plan::is_refused_in_terminal_prompt`): a prompt that reaches its
//! client through a pseudo-terminal (Claude Code typed, Codex CLI and Antigravity in argv)
//! may hold no control character but line breaks and tabs; the invisible characters
//! (bidirectional controls, zero-width) are text there; an ACP client's prompt, a JSON
//! string in `session/prompt`, carries every character.

#[cfg(feature = "cli")]
use crate::common;

#[cfg(feature = "cli")]
use std::path::Path;

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::{PlanInputs, UnverifiedIsolation};
#[cfg(feature = "cli")]
use kcap_mcp_registry::clients::plan::TypedPrompt;
use kcap_mcp_registry::clients::plan::{LaunchId, LaunchSecret};
use kcap_mcp_registry::{LaunchContext, LaunchError, Policy, RenderError, ResultDelivery};

/// Each character, and whether a terminal client's prompt may hold it.
const CASES: [(char, bool); 10] = [
    ('\n', true),
    ('\t', true),
    ('\r', true),
    ('\u{202e}', true),
    ('\u{200b}', true),
    ('\u{1b}', false),
    ('\u{7}', false),
    ('\u{7f}', false),
    ('\u{9b}', false),
    ('\u{3}', false),
];

fn ctx(prompt: &str) -> LaunchContext {
    LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some("/opt/kcap".into()),
        agent_id: "a1".into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into())]),
        worktree: Some("/work/tree".into()),
        launch_dir: Some("/run/kcap/l1".into()),
        result_delivery: ResultDelivery::Brokered {
            capability_url: "http://127.0.0.1:4100/t".into(),
        },
        prompt: Some(prompt.into()),
        ..LaunchContext::default()
    }
}

fn inputs() -> PlanInputs {
    let mut inputs = PlanInputs::new(Policy::Lenient);
    inputs.launch_id = Some(LaunchId::from_hex("0123456789abcdef").unwrap());
    inputs.launch_secret = Some(LaunchSecret::from_bytes([7; 16]));
    inputs.unverified_isolation = UnverifiedIsolation::Allow;
    inputs.system_root = std::env::temp_dir().join("kcap-prompt-chars-empty-root");
    inputs
}

fn prompt_with(c: char) -> String {
    format!("Review the change.{c}Then report.")
}

/// The library's answer for `client` and the prompt holding `c`: `Ok(true)` when the planned
/// client gets the prompt whole (in argv, typed, or later over ACP), the error's message when
/// refused.
fn library(client: Client, c: char) -> Result<bool, String> {
    let prompt = prompt_with(c);
    match client.plan(&ctx(&prompt), &inputs()) {
        Ok(planned) => {
            let plan = &planned.plan;
            let typed = plan.typed_prompt.as_ref().map(|t| t.text.as_str());
            let carried = plan.argv.iter().any(|a| a.contains(&prompt))
                || typed.is_some_and(|t| t.starts_with(&prompt))
                || plan.session_new.is_some();
            Ok(carried)
        }
        Err(LaunchError::Render(e @ RenderError::ForbiddenChar { .. })) => {
            let RenderError::ForbiddenChar {
                field,
                value,
                found,
            } = &e
            else {
                unreachable!()
            };
            assert_eq!((*field, *found), ("prompt", c), "{client}: {e}");
            assert!(value.starts_with(&prompt), "{client}: {value:?}");
            Err(e.to_string())
        }
        Err(e) => panic!("{client} {c:?}: {e}"),
    }
}

#[test]
fn a_terminal_clients_prompt_may_hold_line_breaks_tabs_and_invisible_characters_only() {
    let mut terminal = Vec::new();
    for client in Client::ALL {
        let clean = client.plan(&ctx("Review."), &inputs()).unwrap();
        let in_a_terminal = clean.plan.session_new.is_none();
        if in_a_terminal {
            terminal.push(client.name());
        }
        for (c, kept) in CASES {
            match library(client, c) {
                Ok(carried) => {
                    assert!(kept || !in_a_terminal, "{client} took {c:?}");
                    assert!(carried, "{client} lost the prompt holding {c:?}");
                }
                Err(message) => {
                    assert!(in_a_terminal && !kept, "{client} refused {c:?}: {message}");
                    assert!(
                        message.starts_with(&format!(
                            "the reviewer's `prompt` `{}",
                            prompt_with(c).escape_debug()
                        )) && message.ends_with(&format!(
                            "` contains {}; give it without one",
                            kcap_mcp_registry::text::char_name(c)
                        )),
                        "{client}: {message}"
                    );
                }
            }
        }
    }
    assert_eq!(terminal, ["claude", "codex", "antigravity"]);
}

#[test]
fn a_launch_request_refuses_such_a_prompt_as_the_client_call_does() {
    use kcap_mcp_registry::{LaunchCommand, LaunchRequest};
    let prompt = prompt_with('\u{1b}');
    let cmd: LaunchCommand = serde_json::from_value(serde_json::json!({
        "agent_id": "a1",
        "mcp_allowlist": ["kcap-review"],
        "prompt": prompt,
    }))
    .unwrap();
    for client in [Client::Codex, Client::Claude] {
        let e = LaunchRequest::new(client, cmd.clone())
            .server("http://127.0.0.1:5100", "/opt/kcap")
            .launch_dir("/run/kcap/l1")
            .worktree("/work/tree")
            .plan()
            .unwrap_err();
        assert!(
            matches!(
                &e,
                LaunchError::Render(RenderError::ForbiddenChar {
                    field: "prompt",
                    found: '\u{1b}',
                    ..
                })
            ),
            "{client}: {e}"
        );
    }
    let planned = LaunchRequest::new(Client::Gemini, cmd)
        .server("http://127.0.0.1:5100", "/opt/kcap")
        .launch_dir("/run/kcap/l1")
        .worktree("/work/tree")
        .plan();
    assert!(planned.is_ok(), "{:?}", planned.err());
}

/// The CLI's `render` gives the library's message, word for word, and renders what the
/// library renders.
#[cfg(feature = "cli")]
#[test]
fn render_refuses_such_a_prompt_with_the_librarys_error() {
    let mut refused = Vec::new();
    for client in Client::ALL {
        let mut args = vec![
            "render",
            client.name(),
            "--agent-id",
            "a1",
            "--launch-dir",
            "/run/kcap/l1",
            "--worktree",
            "/work/tree",
            "--server-url",
            "http://127.0.0.1:5100",
            "--kcap-bin",
            "/opt/kcap",
            "--allowlist",
            "kcap-review",
            "--format",
            "plan",
        ];
        if client.spec().unverified_isolation {
            args.push("--allow-unverified-isolation");
        }
        if client == Client::Antigravity {
            args.extend(["--result-capability-url", "http://127.0.0.1:4100/t"]);
        }
        for (c, _) in CASES {
            let prompt = prompt_with(c);
            let mut all = args.clone();
            all.extend(["--prompt", &prompt]);
            let r = common::run(&all);
            match library(client, c) {
                Ok(_) => assert_eq!(r.code, 0, "{client} {c:?}: {r:?}"),
                Err(message) => {
                    assert_eq!(r.code, 1, "{client} {c:?}: {r:?}");
                    assert_eq!(r.stderr, format!("error: {message}\n"), "{client} {c:?}");
                    assert_eq!(r.stdout, "");
                    refused.push((client.name(), c));
                }
            }
        }
    }
    let escape = |client| refused.contains(&(client, '\u{1b}'));
    assert!(
        escape("claude") && escape("codex") && escape("antigravity"),
        "{refused:?}"
    );
}

/// A plan (saved, or made by hand) whose typed prompt holds a key is refused by the executor
/// before anything is created, through the library and `launch --plan`; one holding line
/// breaks and a tab is carried out.
#[cfg(feature = "cli")]
#[test]
fn the_executor_refuses_a_typed_prompt_holding_a_key_before_creating_anything() {
    use kcap_mcp_registry::launch::{self, ExecError, Options};
    let tmp = tempfile::tempdir().unwrap();
    let bin = common::stand_in::sh_script(tmp.path(), "quick", "exit 0");
    let plan_with = |text: &str, dir: &Path| {
        let mut plan = common::carry::terminal_plan(Client::Claude, dir);
        plan.typed_prompt = Some(TypedPrompt {
            text: text.into(),
            log: "home/log".into(),
            ready: vec!["never".into()],
            failed: vec![],
            message_after: 0,
        });
        plan
    };
    let dir = tmp.path().join("l1");
    for (c, kept) in CASES {
        let plan = plan_with(&prompt_with(c), &dir);
        if kept {
            assert!(launch::check(&plan).is_ok(), "{c:?}");
            continue;
        }
        let e = launch::launch(&plan, &bin, &Options::default()).unwrap_err();
        assert!(
            matches!(e, ExecError::TypedPromptChar { found } if found == c),
            "{c:?}: {e}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "check the plan: the typed prompt contains {}, which typed into the client's \
                 terminal would be a key, not text; give the prompt without it (line breaks \
                 and tabs are kept)",
                kcap_mcp_registry::text::char_name(c)
            )
        );
        assert!(!dir.exists(), "{c:?}: the launch directory was created");
    }
    #[cfg(feature = "cli")]
    {
        let file = tmp.path().join("plan.json");
        std::fs::write(&file, plan_with(&prompt_with('\u{1b}'), &dir).to_json()).unwrap();
        let r = crate::launch::launch_plan(&file, &dir, &bin, &[]);
        assert_eq!(r.code, 1, "{r:?}");
        assert_eq!(
            r.stderr,
            "error: check the plan: the typed prompt contains an escape character (U+001B), \
             which typed into the client's terminal would be a key, not text; give the prompt \
             without it (line breaks and tabs are kept)\n"
        );
        assert!(!dir.exists());
    }
}
