//! Golden launch plans: the exact JSON (`LaunchPlan::to_json`, what `render --format plan`
//! prints) of Claude Code, Codex, Gemini CLI, OpenCode, Cursor, Kiro, Antigravity and Qwen Code, lenient,
//! strict and gated; direct, brokered, borrowed-snapshot and brokered borrowed-snapshot
//! launches; the empty allowlist byte-identical to none; and every refusal.
//!
//! Antigravity refuses direct result delivery, so `plan` renders its ungated launches
//! brokered throughout (the refusal is tested alone); Cursor's strict plans are rendered with
//! the explicit opt-in (its refusal without it is tested alone).
//!
//! The golden files are `tests/fixtures/plans/<name>.json`. After an intended change, rewrite
//! them with `KCAP_BLESS=1 cargo test --test suite plan_golden::` and review the diff.

use std::path::PathBuf;

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::{PlanInputs, UnverifiedIsolation};
use kcap_mcp_registry::clients::plan::{Isolation, LaunchId, LaunchPlan};
use kcap_mcp_registry::{
    LaunchContext, LaunchError, Policy, RejectReason, RenderError, ResultDelivery, Snapshot,
};

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
        ..LaunchContext::default()
    }
}

/// The capability URL of a brokered launch.
const CAPABILITY_URL: &str = "http://127.0.0.1:41234/c4p4b1l1ty";

/// The review-context URL of a borrowed-snapshot launch.
const REVIEW_CONTEXT_URL: &str = "http://127.0.0.1:5200/review-context/workspace-mcp-configs";

fn brokered() -> ResultDelivery {
    ResultDelivery::Brokered {
        capability_url: CAPABILITY_URL.into(),
    }
}

fn borrowed() -> Snapshot {
    Snapshot::Borrowed {
        review_context_url: Some(REVIEW_CONTEXT_URL.into()),
    }
}

/// `client`'s plan for `ctx`, its allowlist resolved under `policy` (Cursor with the opt-in,
/// Antigravity brokered: see the module docs).
fn plan(client: Client, ctx: &LaunchContext, policy: Policy) -> Result<LaunchPlan, LaunchError> {
    if client == Client::Antigravity && ctx.result_delivery == ResultDelivery::Direct {
        let mut brokered_ctx = ctx.clone();
        brokered_ctx.result_delivery = brokered();
        return exact_plan(client, &brokered_ctx, policy);
    }
    exact_plan(client, ctx, policy)
}

/// `client`'s plan for `ctx` as given, its allowlist resolved under `policy` (Cursor with the
/// opt-in).
fn exact_plan(
    client: Client,
    ctx: &LaunchContext,
    policy: Policy,
) -> Result<LaunchPlan, LaunchError> {
    // The strict policy refuses a model or effort the client has no setting for (tested in
    // `launch_api.rs`): these plans leave such a value out, as the lenient plan does.
    let mut ctx = ctx.clone();
    if policy == Policy::Strict {
        let spec = client.spec();
        ctx.model = ctx.model.filter(|_| spec.carries_model);
        ctx.effort = ctx.effort.filter(|_| spec.carries_effort);
    }
    crate::common::plan::of(client, &ctx, policy)
}

/// The render error `client`'s plan for `ctx` fails with (panics on any other outcome).
fn refusal(client: Client, ctx: &LaunchContext, policy: Policy) -> RenderError {
    match plan(client, ctx, policy) {
        Err(LaunchError::Render(e)) => e,
        other => panic!("{client}: {other:?}"),
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

const CLIENTS: [Client; 9] = [
    Client::Claude,
    Client::Codex,
    Client::Gemini,
    Client::OpenCode,
    Client::Copilot,
    Client::Cursor,
    Client::Kiro,
    Client::Antigravity,
    Client::Qwen,
];

/// The ACP clients and Antigravity: each needs an absolute worktree.
const WORKTREE_CLIENTS: [Client; 7] = [
    Client::Gemini,
    Client::OpenCode,
    Client::Copilot,
    Client::Cursor,
    Client::Kiro,
    Client::Antigravity,
    Client::Qwen,
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
        if client == Client::Cursor {
            // Cursor cannot hide its built-in tools (`--force` runs every one unasked): the
            // one call refuses it under the strict policy (`clients::tools`).
            let mut inputs = PlanInputs::new(Policy::Strict);
            inputs.unverified_isolation = UnverifiedIsolation::Allow;
            let c = LaunchContext {
                model: None,
                effort: None,
                ..c.clone()
            };
            let err = client.plan(&c, &inputs).unwrap_err();
            assert!(
                matches!(
                    &err,
                    LaunchError::Render(RenderError::UnaskedTools { client: Client::Cursor, tools })
                        if tools == &["*"]
                ),
                "{err}"
            );
            continue;
        }
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
fn brokered_and_borrowed_plans_inject_by_the_registry_data() {
    // Brokered: the result channel carries KCAP_FLOW_CAPABILITY_URL instead of KCAP_URL.
    // Borrowed: kcap-review-context comes last, with its review-context URL and mode. Gemini
    // aliases every injected server, the reserved ones too. Strict plans, but Cursor's, which
    // the strict policy refuses (above): its plans are lenient.
    for (name, delivery, snapshot) in [
        ("brokered", brokered(), Snapshot::Own),
        ("borrowed", ResultDelivery::Direct, borrowed()),
        ("brokered-borrowed", brokered(), borrowed()),
    ] {
        let mut c = ctx(Some(&["kcap-review"]));
        c.result_delivery = delivery;
        c.snapshot = snapshot;
        for client in CLIENTS {
            let policy = match client {
                Client::Cursor => Policy::Lenient,
                _ => Policy::Strict,
            };
            let p = plan(client, &c, policy).unwrap();
            let ids: Vec<&str> = p.servers.iter().map(|s| s.id.as_str()).collect();
            let expected: &[&str] = match name {
                "brokered" => &["kcap-flow-result", "kcap-review"],
                _ => &["kcap-flow-result", "kcap-review", "kcap-review-context"],
            };
            assert_eq!(ids, expected, "{client} {name}");
            golden(&format!("{client}-{name}"), &p.to_json());
        }
    }
}

#[test]
fn brokered_and_borrowed_refusals_reach_every_client() {
    let mut blank = ctx(None);
    blank.result_delivery = ResultDelivery::Brokered {
        capability_url: " ".into(),
    };
    let mut no_url = ctx(None);
    no_url.snapshot = Snapshot::Borrowed {
        review_context_url: None,
    };
    for client in CLIENTS {
        assert_eq!(
            refusal(client, &blank, Policy::Lenient),
            RenderError::BlankCapabilityUrl,
            "{client}"
        );
        assert_eq!(
            refusal(client, &no_url, Policy::Lenient),
            RenderError::MissingReviewContextUrl,
            "{client}"
        );
    }
}

#[test]
fn empty_allowlist_is_byte_identical_to_none() {
    for client in CLIENTS {
        for policy in [Policy::Lenient, Policy::Strict] {
            if client == Client::Cursor && policy == Policy::Strict {
                // Refused alike (above).
                assert_eq!(
                    refusal(client, &ctx(None), policy),
                    refusal(client, &ctx(Some(&[])), policy)
                );
                continue;
            }
            let none = plan(client, &ctx(None), policy).unwrap().to_json();
            let empty = plan(client, &ctx(Some(&[])), policy).unwrap().to_json();
            assert_eq!(empty, none, "{client} {policy:?}");
            // The strict plan hides the client's built-in tools with effects
            // (`clients::tools`), so the goldens are the lenient plans.
            if policy == Policy::Lenient {
                golden(&format!("{client}-baseline"), &none);
            }
        }
    }
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
            refusal(client, &c, Policy::Lenient),
            RenderError::BlankAgentId,
            "{client}"
        );
    }
}

#[test]
fn acp_clients_refuse_a_missing_or_relative_worktree() {
    for worktree in [None, Some("tree"), Some(" ")] {
        let mut c = ctx(None);
        c.worktree = worktree.map(String::from);
        for client in WORKTREE_CLIENTS {
            let err = refusal(client, &c, Policy::Lenient);
            assert_eq!(
                err,
                RenderError::NeedsAbsolute {
                    client,
                    field: "worktree"
                }
            );
            let what = match client {
                Client::Antigravity => "the directory it starts in",
                _ => "the ACP session's `cwd`",
            };
            assert_eq!(
                err.to_string(),
                format!(
                    "cannot render the {client} launch: it needs the reviewer's worktree ({what}) \
                     as an absolute path; give the launch its `worktree` (--worktree DIR)"
                )
            );
        }
    }
}

#[test]
fn every_client_refuses_a_missing_or_relative_launch_dir() {
    for dir in [None, Some("launch"), Some("")] {
        let mut c = ctx(None);
        c.launch_dir = dir.map(String::from);
        for client in Client::ALL {
            let err = plan(client, &c, Policy::Lenient).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "cannot render the {client} launch: it needs a per-launch directory as an \
                     absolute path; give the launch its `launch_dir` (--launch-dir DIR)"
                )
            );
        }
    }
}

#[test]
fn gemini_refuses_expansion_in_env_values_only() {
    let mut c = ctx(None);
    c.agent_id = "a${HOME}".into();
    let err = refusal(Client::Gemini, &c, Policy::Lenient);
    assert_eq!(
        err,
        RenderError::Expansion {
            client: Client::Gemini,
            server: "kcap-flow-result".into(),
            field: "env.KCAP_FLOW_AGENT_ID".into(),
            expands: kcap_mcp_registry::clients::gemini::EXPANDS,
        }
    );
    assert_eq!(
        err.to_string(),
        "cannot render the Gemini CLI launch: `kcap-flow-result.env.KCAP_FLOW_AGENT_ID` contains \
         `${`, which Gemini CLI expands as a variable reference in ACP server env values; remove \
         `${` from that value"
    );
    // `args` are not expanded: a kcap binary path with `${` is fine.
    let mut c = ctx(None);
    c.kcap_bin = Some("/opt/${x}/kcap".into());
    assert!(plan(Client::Gemini, &c, Policy::Lenient).is_ok());
    // The review-context URL is an env value too.
    let mut c = ctx(None);
    c.snapshot = Snapshot::Borrowed {
        review_context_url: Some("http://127.0.0.1:5200/${USER}".into()),
    };
    assert_eq!(
        refusal(Client::Gemini, &c, Policy::Lenient),
        RenderError::Expansion {
            client: Client::Gemini,
            server: "kcap-review-context".into(),
            field: "env.KCAP_REVIEW_CONTEXT_URL".into(),
            expands: kcap_mcp_registry::clients::gemini::EXPANDS,
        }
    );
}

#[test]
fn option_like_model_is_refused_where_it_reaches_argv() {
    let mut c = ctx(None);
    c.model = Some("--yolo".into());
    for client in [
        Client::Claude,
        Client::Codex,
        Client::Gemini,
        Client::Copilot,
        Client::Qwen,
    ] {
        assert_eq!(
            refusal(client, &c, Policy::Lenient),
            RenderError::OptionLike { field: "model" },
            "{client}"
        );
    }
    // OpenCode, Cursor, Kiro and Antigravity take no model on their command line.
    for client in [
        Client::OpenCode,
        Client::Cursor,
        Client::Kiro,
        Client::Antigravity,
    ] {
        assert!(plan(client, &c, Policy::Lenient).is_ok(), "{client}");
    }
    // Antigravity takes the prompt as the value of `-p`.
    let mut c = ctx(None);
    c.prompt = Some("-x".into());
    assert_eq!(
        refusal(Client::Antigravity, &c, Policy::Lenient),
        RenderError::OptionLike { field: "prompt" }
    );
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

#[test]
fn only_the_facts_only_clients_are_unverified_and_strict_refuses_cursor_without_the_opt_in() {
    let c = ctx(Some(&["kcap-review"]));
    for client in CLIENTS {
        let p = plan(client, &c, Policy::Lenient).unwrap();
        assert_eq!(
            p.isolation.is_verified(),
            !client.spec().unverified_isolation,
            "{client}"
        );
    }
    // Without the model and effort Cursor has no setting for, which the strict policy
    // refuses first.
    let refused = |c: &LaunchContext, policy: Policy| {
        let mut inputs = crate::common::plan::inputs(policy);
        inputs.unverified_isolation = UnverifiedIsolation::Refuse;
        let c = LaunchContext {
            model: None,
            effort: None,
            ..c.clone()
        };
        Client::Cursor.plan(&c, &inputs)
    };
    let err = match refused(&c, Policy::Strict) {
        Err(LaunchError::Render(e)) => e,
        other => panic!("cursor: {other:?}"),
    };
    assert_eq!(
        err,
        RenderError::UnverifiedIsolation {
            client: Client::Cursor
        }
    );
    assert_eq!(
        err.to_string(),
        "cannot render the cursor launch: its isolation from the MCP servers the user or the \
         reviewed repository configured is not verified, so one of them (a flow-starting one \
         included) could start beside kcap's; opt in explicitly \
         (`LaunchRequest::allow_unverified_isolation`, or `PlanInputs::unverified_isolation = \
         UnverifiedIsolation::Allow`; --allow-unverified-isolation)"
    );
    // Refused under the lenient policy too.
    assert!(refused(&c, Policy::Lenient).is_err());
    // Gated too: the user's own servers do not depend on ours.
    let mut gated = c.clone();
    gated.kcap_bin = None;
    assert!(refused(&gated, Policy::Strict).is_err());
    // The opt-in renders it, marked unverified (lenient: under the strict policy Cursor's
    // tools that run unasked refuse it, `clients::tools`).
    let allowed = crate::common::plan::lenient(Client::Cursor, &c);
    match allowed.isolation {
        Isolation::Unverified { reason } => assert!(reason.contains("~/.cursor/mcp.json")),
        Isolation::Verified { .. } => panic!("cursor verified"),
    }
}

#[test]
fn antigravity_refuses_direct_delivery_unless_gated() {
    let c = ctx(Some(&["kcap-review"]));
    let err = match exact_plan(Client::Antigravity, &c, Policy::Strict) {
        Err(LaunchError::Render(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        err,
        RenderError::NeedsBrokeredDelivery {
            client: Client::Antigravity
        }
    );
    assert_eq!(
        err.to_string(),
        "cannot render the antigravity launch: it runs with a HOME of its own, so the result \
         channel needs brokered delivery; give the launch its capability URL \
         (`result_capability_url` in the launch command; --result-capability-url URL)"
    );
    // A gated launch has no result channel to deliver through (the lenient policy plans it,
    // warning; the strict one refuses it, `RenderError::Gated`).
    let mut gated = c.clone();
    gated.server_url = None;
    let p = exact_plan(Client::Antigravity, &gated, Policy::Lenient).unwrap();
    assert!(p.servers.is_empty());
    assert_eq!(
        refusal(Client::Antigravity, &gated, Policy::Strict),
        RenderError::Gated {
            client: Client::Antigravity
        }
    );
}

#[test]
fn facts_only_clients_refuse_expansion_anywhere() {
    for client in [Client::Cursor, Client::Kiro, Client::Antigravity] {
        let mut c = ctx(None);
        c.agent_id = "a${HOME}".into();
        let err = refusal(client, &c, Policy::Lenient);
        assert_eq!(
            err,
            RenderError::Expansion {
                client,
                server: "kcap-flow-result".into(),
                field: "env.KCAP_FLOW_AGENT_ID".into(),
                expands: kcap_mcp_registry::clients::UNKNOWN_EXPANSION,
            }
        );
        assert_eq!(
            err.to_string(),
            format!(
                "cannot render the {} launch: `kcap-flow-result.env.KCAP_FLOW_AGENT_ID` \
                 contains `${{`, and whether the client expands it as a variable reference is \
                 not established, so it is refused as if it did; remove `${{` from that value",
                client.display_name()
            )
        );
        let mut c = ctx(None);
        c.kcap_bin = Some("/opt/${x}/kcap".into());
        assert_eq!(
            refusal(client, &c, Policy::Lenient),
            RenderError::Expansion {
                client,
                server: "kcap-flow-result".into(),
                field: "command".into(),
                expands: kcap_mcp_registry::clients::UNKNOWN_EXPANSION,
            }
        );
        let mut c = ctx(None);
        c.result_delivery = ResultDelivery::Brokered {
            capability_url: "http://127.0.0.1:1/${T}".into(),
        };
        assert_eq!(
            refusal(client, &c, Policy::Lenient),
            RenderError::Expansion {
                client,
                server: "kcap-flow-result".into(),
                field: "env.KCAP_FLOW_CAPABILITY_URL".into(),
                expands: kcap_mcp_registry::clients::UNKNOWN_EXPANSION,
            }
        );
    }
}

#[test]
fn kiro_trusts_exactly_the_admitted_tools_under_aliased_names() {
    // kcap-analytics is read-only without a catalog: no per-tool rule, so nothing trusted;
    // kcap-memory (lenient) has no unattended-safe tool.
    let c = ctx(Some(&["kcap-sessions", "kcap-analytics", "kcap-memory"]));
    let p = plan(Client::Kiro, &c, Policy::Lenient).unwrap();
    let s = |server: &str, tool: &str| format!("@{server}-{LAUNCH_ID}/{tool}");
    let expected: Vec<String> = ["fs_read".to_string(), "thinking".to_string()]
        .into_iter()
        .chain(
            ["submit_review_result", "send_flow_message"]
                .iter()
                .map(|t| s("kcap-flow-result", t)),
        )
        .chain(
            [
                "search_sessions",
                "get_session_summary",
                "get_session_transcript",
                "get_turn",
                "list_turns",
            ]
            .iter()
            .map(|t| s("kcap-sessions", t)),
        )
        .collect();
    assert_eq!(p.argv, ["acp", "--trust-tools", &expected.join(",")]);
    let wire: Vec<&str> = p.servers.iter().map(|s| s.wire_name.as_str()).collect();
    assert_eq!(
        wire,
        [
            "kcap-flow-result-0123456789abcdef",
            "kcap-sessions-0123456789abcdef",
            "kcap-analytics-0123456789abcdef",
            "kcap-memory-0123456789abcdef"
        ]
    );
    // Gated: the built-in read tools only.
    let mut gated = c.clone();
    gated.server_url = None;
    let p = plan(Client::Kiro, &gated, Policy::Lenient).unwrap();
    assert_eq!(p.argv, ["acp", "--trust-tools", "fs_read,thinking"]);
}

#[test]
fn copilot_refuses_expansion_in_command_args_and_env() {
    let mut c = ctx(None);
    c.kcap_bin = Some("/opt/${x}/kcap".into());
    let err = refusal(Client::Copilot, &c, Policy::Lenient);
    assert_eq!(
        err,
        RenderError::Expansion {
            client: Client::Copilot,
            server: "kcap-flow-result".into(),
            field: "command".into(),
            expands: kcap_mcp_registry::clients::copilot::EXPANDS,
        }
    );
    assert_eq!(
        err.to_string(),
        "cannot render the Copilot CLI launch: `kcap-flow-result.command` contains `${`, which \
         Copilot CLI expands as a variable reference when it starts the server; remove `${` \
         from that value"
    );
    let mut c = ctx(None);
    c.agent_id = "a${HOME}".into();
    assert_eq!(
        refusal(Client::Copilot, &c, Policy::Lenient),
        RenderError::Expansion {
            client: Client::Copilot,
            server: "kcap-flow-result".into(),
            field: "env.KCAP_FLOW_AGENT_ID".into(),
            expands: kcap_mcp_registry::clients::copilot::EXPANDS,
        }
    );
    let mut c = ctx(Some(&["kcap-review"]));
    c.snapshot = Snapshot::Borrowed {
        review_context_url: Some("http://127.0.0.1:5200/${USER}".into()),
    };
    assert_eq!(
        refusal(Client::Copilot, &c, Policy::Lenient),
        RenderError::Expansion {
            client: Client::Copilot,
            server: "kcap-review-context".into(),
            field: "env.KCAP_REVIEW_CONTEXT_URL".into(),
            expands: kcap_mcp_registry::clients::copilot::EXPANDS,
        }
    );
    // The registry's args never hold `${`; a custom registry's would be refused as
    // `args[i]` (the same check).
}

#[test]
fn copilot_is_rooted_in_the_launch_dir_and_shares_only_its_package_cache() {
    let mut c = ctx(Some(&["kcap-review"]));
    let p = plan(Client::Copilot, &c, Policy::Strict).unwrap();
    // No inventory: nothing but ours is configured in the per-launch COPILOT_HOME.
    assert!(!p.argv.iter().any(|a| a.starts_with("--disable-mcp-server")));
    assert_eq!(
        p.env_value("COPILOT_HOME"),
        Some("/run/kcap/launch-1/home/.copilot")
    );
    assert!(p.dirs.contains(&"home/.copilot".to_owned()));
    assert_eq!(p.env_value("COPILOT_PKG_CACHE_HOME"), None);
    c.cache_dir = Some("/var/cache/kcap".into());
    let p = plan(Client::Copilot, &c, Policy::Strict).unwrap();
    assert_eq!(
        p.env_value("XDG_CACHE_HOME"),
        Some("/run/kcap/launch-1/home/.cache")
    );
    assert_eq!(
        p.env_value("COPILOT_PKG_CACHE_HOME"),
        Some("/var/cache/kcap/copilot")
    );
    for refused in [
        "GH_TOKEN",
        "COPILOT_PROVIDER_API_KEY_COMMAND",
        "COPILOT_ALLOW_ALL",
    ] {
        let mut c = c.clone();
        c.credentials.env = vec![kcap_mcp_registry::clients::plan::EnvVar::new(refused, "x")];
        assert!(matches!(
            refusal(Client::Copilot, &c, Policy::Strict),
            RenderError::CredentialNotAccepted { name, .. } if name == refused
        ));
    }
}

#[test]
fn opencode_refuses_a_model_it_would_expand_and_takes_every_other() {
    for model in [
        "{file:/home/u/.ssh/id_ed25519}",
        "{env:ANTHROPIC_API_KEY}",
        "a{b",
    ] {
        let mut c = ctx(None);
        c.model = Some(model.into());
        let e = refusal(Client::OpenCode, &c, Policy::Lenient);
        assert_eq!(
            e.to_string(),
            "cannot render the OpenCode launch: its `model` contains `{`, which OpenCode expands \
             in its configuration (`{env:NAME}` to a variable, `{file:PATH}` to a file's \
             contents); give the model without `{`",
            "{model}"
        );
    }
    let mut c = ctx(None);
    c.model = Some("anthropic/claude-haiku-4-5".into());
    assert!(plan(Client::OpenCode, &c, Policy::Lenient).is_ok());
}
