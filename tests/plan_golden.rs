//! Golden launch plans: the exact JSON (`LaunchPlan::to_json`, what `render --format plan`
//! prints) of Claude Code, Codex, Gemini CLI and OpenCode, lenient, strict and gated; the
//! empty allowlist byte-identical to none; and every refusal.
//!
//! The golden files are `tests/fixtures/plans/<name>.json`. After an intended change, rewrite
//! them with `KCAP_BLESS=1 cargo test --test plan_golden` and review the diff.

use std::path::PathBuf;

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::claude::{claude_plan, claude_reviewer_args};
use kcap_mcp_registry::clients::codex::{codex_plan, codex_reviewer_args};
use kcap_mcp_registry::clients::gemini::gemini_plan;
use kcap_mcp_registry::clients::opencode::opencode_plan;
use kcap_mcp_registry::clients::plan::{LaunchId, LaunchPlan};
use kcap_mcp_registry::{LaunchContext, LaunchError, Policy, RejectReason, RenderError};

const LAUNCH_ID: &str = "0123456789abcdef";

fn ctx(allowlist: Option<&[&str]>) -> LaunchContext {
    LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some("/opt/kcap/bin/kcap".into()),
        agent_id: "agent-7".into(),
        mcp_allowlist: allowlist.map(|a| a.iter().map(|e| Some((*e).to_string())).collect()),
        model: Some("sonnet".into()),
        effort: Some("high".into()),
        prompt: Some("Review PR 42".into()),
        worktree: Some("/work/tree".into()),
        launch_dir: Some("/run/kcap/launch-1".into()),
    }
}

fn plan(client: Client, ctx: &LaunchContext, policy: Policy) -> Result<LaunchPlan, LaunchError> {
    let id = LaunchId::from_hex(LAUNCH_ID).unwrap();
    match client {
        Client::Claude => claude_plan(ctx, policy),
        Client::Codex => codex_plan(ctx, policy, &[]),
        Client::Gemini => gemini_plan(ctx, policy, &id),
        Client::OpenCode => opencode_plan(ctx, policy),
        _ => unreachable!("a client without a room"),
    }
}

/// Compares `actual` with `tests/fixtures/plans/<name>.json` (or writes it under
/// `KCAP_BLESS=1`).
fn golden(name: &str, actual: &str) {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/plans/{name}.json"));
    if std::env::var_os("KCAP_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; KCAP_BLESS=1 writes it", path.display()));
    assert_eq!(
        actual,
        expected,
        "{name}: the plan differs from {}",
        path.display()
    );
}

const CLIENTS: [Client; 4] = [
    Client::Claude,
    Client::Codex,
    Client::Gemini,
    Client::OpenCode,
];

#[test]
fn lenient_plans_with_every_kind_of_entry() {
    // kcap-flows (starts flows), an unknown entry, a duplicate and the result channel are
    // skipped; kcap-memory (not read-only) is kept under the lenient policy.
    let c = ctx(Some(&[
        "kcap-review",
        "kcap-flows",
        "nope",
        "KCAP-REVIEW",
        "kcap-flow-result",
        "kcap-memory",
        "kcap-analytics",
    ]));
    for client in CLIENTS {
        let p = plan(client, &c, Policy::Lenient).unwrap();
        golden(&format!("{client}-lenient"), &p.to_json());
    }
}

#[test]
fn strict_plans_with_read_only_servers() {
    let c = ctx(Some(&["kcap-review", "kcap-sessions"]));
    for client in CLIENTS {
        let p = plan(client, &c, Policy::Strict).unwrap();
        golden(&format!("{client}-strict"), &p.to_json());
    }
}

#[test]
fn gated_plans_inject_nothing() {
    let mut c = ctx(Some(&["kcap-review"]));
    c.server_url = None;
    for client in CLIENTS {
        let p = plan(client, &c, Policy::Lenient).unwrap();
        assert!(p.servers.is_empty(), "{client}");
        golden(&format!("{client}-gated"), &p.to_json());
    }
}

#[test]
fn empty_allowlist_is_byte_identical_to_none() {
    for client in CLIENTS {
        for policy in [Policy::Lenient, Policy::Strict] {
            let none = plan(client, &ctx(None), policy).unwrap().to_json();
            let empty = plan(client, &ctx(Some(&[])), policy).unwrap().to_json();
            assert_eq!(empty, none, "{client} {policy:?}");
            golden(&format!("{client}-baseline"), &none);
        }
    }
}

#[test]
fn claude_and_codex_plans_carry_their_argv_unchanged() {
    let c = ctx(Some(&["kcap-review", "kcap-memory"]));
    assert_eq!(
        claude_plan(&c, Policy::Lenient).unwrap().argv,
        claude_reviewer_args(&c, Policy::Lenient).unwrap()
    );
    assert_eq!(
        codex_plan(&c, Policy::Lenient, &[]).unwrap().argv,
        codex_reviewer_args(&c, Policy::Lenient, &[]).unwrap()
    );
}

#[test]
fn strict_rejection_refuses_every_client() {
    let c = ctx(Some(&["kcap-review", "kcap-memory"]));
    for client in CLIENTS {
        match plan(client, &c, Policy::Strict) {
            Err(LaunchError::Rejected(r)) => {
                assert_eq!(
                    (r.index, r.reason),
                    (1, RejectReason::NotReadOnly),
                    "{client}"
                );
            }
            other => panic!("{client}: {other:?}"),
        }
    }
}

#[test]
fn blank_agent_id_refuses_every_client() {
    let mut c = ctx(None);
    c.agent_id = " ".into();
    for client in CLIENTS {
        assert_eq!(
            plan(client, &c, Policy::Lenient).unwrap_err(),
            LaunchError::Render(RenderError::BlankAgentId),
            "{client}"
        );
    }
}

#[test]
fn acp_clients_refuse_a_missing_or_relative_worktree() {
    for worktree in [None, Some("tree"), Some(" ")] {
        let mut c = ctx(None);
        c.worktree = worktree.map(String::from);
        for client in [Client::Gemini, Client::OpenCode] {
            let err = plan(client, &c, Policy::Lenient).unwrap_err();
            assert_eq!(
                err,
                LaunchError::Render(RenderError::NeedsAbsolute {
                    client,
                    field: "worktree"
                })
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "cannot render the {client} launch: it needs the reviewer's worktree (the ACP \
                     session's `cwd`) as an absolute path; give the launch its `worktree` \
                     (--worktree DIR)"
                )
            );
        }
    }
}

#[test]
fn opencode_refuses_a_missing_or_relative_launch_dir() {
    for dir in [None, Some("launch"), Some("")] {
        let mut c = ctx(None);
        c.launch_dir = dir.map(String::from);
        let err = opencode_plan(&c, Policy::Lenient).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot render the opencode launch: it needs a per-launch directory as an absolute \
             path; give the launch its `launch_dir` (--launch-dir DIR)"
        );
    }
}

#[test]
fn gemini_refuses_expansion_in_env_values_only() {
    let mut c = ctx(None);
    c.agent_id = "a${HOME}".into();
    let err =
        gemini_plan(&c, Policy::Lenient, &LaunchId::from_hex(LAUNCH_ID).unwrap()).unwrap_err();
    assert_eq!(
        err,
        LaunchError::Render(RenderError::GeminiExpansion {
            server: "kcap-flow-result",
            field: "env.KCAP_FLOW_AGENT_ID".into()
        })
    );
    assert_eq!(
        err.to_string(),
        "cannot render the Gemini CLI session: `kcap-flow-result.env.KCAP_FLOW_AGENT_ID` contains \
         `${`, which Gemini CLI expands as a variable reference in ACP server env values; remove \
         `${` from that value"
    );
    // `args` are not expanded: a kcap binary path with `${` is fine.
    let mut c = ctx(None);
    c.kcap_bin = Some("/opt/${x}/kcap".into());
    assert!(gemini_plan(&c, Policy::Lenient, &LaunchId::from_hex(LAUNCH_ID).unwrap()).is_ok());
}

#[test]
fn option_like_model_is_refused_where_it_reaches_argv() {
    let mut c = ctx(None);
    c.model = Some("--yolo".into());
    for client in [Client::Claude, Client::Codex, Client::Gemini] {
        assert_eq!(
            plan(client, &c, Policy::Lenient).unwrap_err(),
            LaunchError::Render(RenderError::OptionLike { field: "model" }),
            "{client}"
        );
    }
    // OpenCode takes no model on its command line.
    assert!(opencode_plan(&c, Policy::Lenient).is_ok());
}

#[test]
fn launch_ids_are_random_and_checked() {
    let a = LaunchId::random().unwrap();
    let b = LaunchId::random().unwrap();
    assert_ne!(a, b, "two draws of 64 random bits collided");
    assert_eq!(a.hex().len(), 16);
    assert!(
        a.hex()
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    assert_eq!(LaunchId::from_hex(&a.hex()).unwrap(), a);
    for bad in [
        "",
        "0123456789abcde",
        "0123456789abcdef0",
        "0123456789abcdeg",
        "+123456789abcdef",
        "é123456789abcde",
    ] {
        assert!(LaunchId::from_hex(bad).is_err(), "{bad:?}");
    }
    assert_eq!(format!("{a:?}"), "LaunchId(…)");
}
