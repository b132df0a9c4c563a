//! `lookup`, `servers` and `result_channel` against the bundled registry.

use kcap_mcp_registry::{EnvSource, Inject, lookup, result_channel, servers};

fn id(name: &str) -> Option<&'static str> {
    lookup(name).map(|s| s.id)
}

#[test]
fn exact_upper_mixed_and_padded_names_resolve_to_the_canonical_id() {
    assert_eq!(id("kcap-review"), Some("kcap-review"));
    assert_eq!(id("KCAP-REVIEW"), Some("kcap-review"));
    assert_eq!(id("Kcap-ReVieW"), Some("kcap-review"));
    assert_eq!(id("  kcap-sessions  "), Some("kcap-sessions"));
    assert_eq!(id("\tkcap-memory\t"), Some("kcap-memory"));
    assert_eq!(id("\u{a0}kcap-analytics\u{a0}"), Some("kcap-analytics"));
    assert_eq!(id("kcap-workitems\n"), Some("kcap-workitems"));
    assert_eq!(id("\r\n KCAP-FLOWS \u{3000}"), Some("kcap-flows"));
}

#[test]
fn blank_and_unknown_names_are_none() {
    for name in [
        "",
        " ",
        "\t\n",
        "\u{a0}",
        "kcap",
        "kcap-review-x",
        "kcap_review",
        "kcap -review",
        "review",
    ] {
        assert_eq!(id(name), None, "{name:?}");
    }
}

#[test]
fn non_ascii_never_folds() {
    // Turkish dotted capital I, Kelvin sign, Cyrillic look-alikes, full-width letters.
    for name in [
        "KCAP-REV\u{130}EW",
        "\u{212A}CAP-REVIEW",
        "kcap-r\u{435}view",
        "\u{441}ap",
        "ｋcap-review",
        "kcap-review\u{200b}",
    ] {
        assert_eq!(id(name), None, "{name:?}");
    }
}

#[test]
fn huge_names_are_none() {
    let huge = "k".repeat(1 << 20);
    assert_eq!(id(&huge), None);
    let padded = format!("{}kcap-review{}", " ".repeat(1 << 19), " ".repeat(1 << 19));
    assert_eq!(id(&padded), Some("kcap-review"));
}

#[test]
fn the_result_channel_is_found_but_not_allowlistable() {
    let rc = lookup("KCAP-FLOW-RESULT").expect("found by lookup");
    assert!(std::ptr::eq(rc, result_channel()));
    assert!(!rc.allowlistable);
    assert!(!rc.starts_flows);
    assert_eq!(rc.args, ["mcp", "flow-result"]);
    assert_eq!(
        rc.env,
        [
            ("KCAP_URL", EnvSource::ServerUrl),
            ("KCAP_FLOW_CAPABILITY_URL", EnvSource::ResultCapabilityUrl),
            ("KCAP_FLOW_AGENT_ID", EnvSource::AgentId)
        ]
    );
    assert_eq!(
        (rc.inject, rc.registered, rc.driver_stamp),
        (Some(Inject::Always), false, false)
    );
    let tools: Vec<_> = rc
        .tools
        .iter()
        .map(|t| (t.name, t.unattended_safe))
        .collect();
    assert_eq!(
        tools,
        [("submit_review_result", true), ("send_flow_message", true)]
    );
}

#[test]
fn bundled_registry_contents() {
    let got: Vec<_> = servers()
        .iter()
        .map(|s| {
            (
                s.id,
                s.args,
                s.starts_flows,
                s.allowlistable,
                s.read_only,
                s.needs_project_cwd,
            )
        })
        .collect();
    // (id, args, starts_flows, allowlistable, read_only, needs_project_cwd)
    type Row = (
        &'static str,
        &'static [&'static str],
        bool,
        bool,
        bool,
        bool,
    );
    let expected: Vec<Row> = vec![
        (
            "kcap-analytics",
            &["mcp", "analytics"],
            false,
            true,
            true,
            true,
        ),
        (
            "kcap-flow-result",
            &["mcp", "flow-result"],
            false,
            false,
            false,
            false,
        ),
        ("kcap-flows", &["mcp", "flows"], true, true, false, true),
        ("kcap-memory", &["mcp", "memory"], false, true, false, true),
        ("kcap-review", &["mcp", "review"], false, true, true, false),
        (
            "kcap-review-context",
            &["mcp", "review"],
            false,
            false,
            true,
            false,
        ),
        (
            "kcap-sessions",
            &["mcp", "sessions"],
            false,
            true,
            true,
            true,
        ),
        (
            "kcap-workitems",
            &["mcp", "workitems"],
            false,
            true,
            false,
            true,
        ),
    ];
    assert_eq!(got, expected);
    for s in servers().iter().filter(|s| s.allowlistable) {
        assert_eq!(s.env, [("KCAP_URL", EnvSource::ServerUrl)], "{}", s.id);
        assert_eq!((s.inject, s.registered), (None, true), "{}", s.id);
        assert_eq!(s.driver_stamp, s.id == "kcap-flows", "{}", s.id);
    }
    // The review context: injected into borrowed snapshots only, never registered, no
    // KCAP_URL, one read-only tool.
    let rc = lookup("kcap-review-context").unwrap();
    assert_eq!(
        (rc.inject, rc.registered, rc.read_only, rc.starts_flows),
        (Some(Inject::BorrowedSnapshot), false, true, false)
    );
    assert_eq!(
        rc.env,
        [
            ("KCAP_REVIEW_CONTEXT_MODE", EnvSource::Constant("1")),
            ("KCAP_REVIEW_CONTEXT_URL", EnvSource::ReviewContextUrl)
        ]
    );
    assert_eq!(
        rc.tools,
        [kcap_mcp_registry::Tool {
            name: "get_branch_authored_mcp_configs",
            unattended_safe: true
        }]
    );
    let tool_names =
        |id: &str| -> Vec<&str> { lookup(id).unwrap().tools.iter().map(|t| t.name).collect() };
    let review = tool_names("kcap-review");
    assert_eq!(
        review,
        [
            "get_pr_summary",
            "list_pr_files",
            "get_file_context",
            "search_context",
            "list_sessions",
            "get_transcript"
        ]
    );
    let sessions = tool_names("kcap-sessions");
    assert_eq!(
        sessions,
        [
            "search_sessions",
            "get_session_summary",
            "get_session_transcript",
            "get_turn",
            "list_turns"
        ]
    );
}

#[test]
fn every_id_resolves_to_itself() {
    for s in servers() {
        assert!(std::ptr::eq(lookup(s.id).unwrap(), s));
        assert!(std::ptr::eq(lookup(&s.id.to_ascii_uppercase()).unwrap(), s));
    }
}
