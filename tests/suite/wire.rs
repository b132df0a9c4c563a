//! The launch command's `mcp_allowlist`, `result_capability_url`, `borrowed_snapshot` and
//! `review_context_url` fields are additive in both directions.

use kcap_mcp_registry::LaunchCommand;
use serde::Deserialize;

/// The launch command as a reader from before `mcp_allowlist` existed saw it (frozen).
#[derive(Debug, Deserialize, PartialEq)]
struct OldLaunchCommand {
    agent_id: String,
    model: Option<String>,
    effort: Option<String>,
    prompt: Option<String>,
}

fn read(json: &str) -> Result<LaunchCommand, String> {
    serde_json::from_str(json).map_err(|e| e.to_string())
}

#[test]
fn absent_and_null_are_none_and_null_elements_are_kept() {
    assert_eq!(read(r#"{"agent_id":"a"}"#).unwrap().mcp_allowlist, None);
    assert_eq!(
        read(r#"{"agent_id":"a","mcp_allowlist":null}"#)
            .unwrap()
            .mcp_allowlist,
        None
    );
    assert_eq!(
        read(r#"{"agent_id":"a","mcp_allowlist":[]}"#)
            .unwrap()
            .mcp_allowlist,
        Some(vec![])
    );
    assert_eq!(
        read(r#"{"agent_id":"a","mcp_allowlist":[null," KCAP-Review ",null]}"#)
            .unwrap()
            .mcp_allowlist,
        Some(vec![None, Some(" KCAP-Review ".into()), None])
    );
}

#[test]
fn unknown_sibling_fields_are_ignored() {
    let cmd = read(
        r#"{"agent_id":"a7","run_id":"r","mcp_allowlist":["kcap-review"],"model":"m","effort":"high","prompt":"p","nested":{"x":[1]}}"#,
    )
    .unwrap();
    assert_eq!(
        cmd,
        LaunchCommand {
            agent_id: "a7".into(),
            mcp_allowlist: Some(vec![Some("kcap-review".into())]),
            model: Some("m".into()),
            effort: Some("high".into()),
            prompt: Some("p".into()),
            ..LaunchCommand::default()
        }
    );
}

#[test]
fn a_non_string_element_is_an_error_naming_its_index() {
    let err = read(r#"{"agent_id":"a","mcp_allowlist":["kcap-review",7]}"#).unwrap_err();
    assert!(
        err.starts_with("mcp_allowlist[1]: invalid type: integer `7`, expected a string"),
        "{err}"
    );
    let err = read(r#"{"agent_id":"a","mcp_allowlist":[{"id":"x"}]}"#).unwrap_err();
    assert!(
        err.starts_with("mcp_allowlist[0]: invalid type: map, expected a string"),
        "{err}"
    );
    let err = read(r#"{"mcp_allowlist":["kcap-review"]}"#).unwrap_err();
    assert!(err.starts_with("missing field `agent_id`"), "{err}");
    let err = read(r#"{"agent_id":"a","mcp_allowlist":"kcap-review"}"#).unwrap_err();
    assert!(
        err.contains("expected an array of strings or nulls, or null"),
        "{err}"
    );
}

#[test]
fn an_old_reader_reads_a_new_payload_and_a_new_reader_an_old_one() {
    let new = LaunchCommand {
        agent_id: "a1".into(),
        mcp_allowlist: Some(vec![Some("kcap-review".into()), None]),
        model: Some("m".into()),
        effort: None,
        prompt: Some("p".into()),
        ..LaunchCommand::default()
    };
    let json = serde_json::to_string(&new).unwrap();
    assert_eq!(
        json,
        r#"{"agent_id":"a1","mcp_allowlist":["kcap-review",null],"model":"m","prompt":"p"}"#
    );
    let old: OldLaunchCommand = serde_json::from_str(&json).unwrap();
    assert_eq!(
        old,
        OldLaunchCommand {
            agent_id: "a1".into(),
            model: Some("m".into()),
            effort: None,
            prompt: Some("p".into())
        }
    );
    assert_eq!(serde_json::from_str::<LaunchCommand>(&json).unwrap(), new);

    let old_payload = r#"{"agent_id":"a1","model":"m","effort":"low","prompt":"p"}"#;
    let read_new = read(old_payload).unwrap();
    assert_eq!(read_new.mcp_allowlist, None);
    // Without an allowlist the field is not written at all: old readers see the old shape.
    assert_eq!(serde_json::to_string(&read_new).unwrap(), old_payload);
}

#[test]
fn the_delivery_and_snapshot_fields_are_additive_in_both_directions() {
    let new = LaunchCommand {
        agent_id: "a1".into(),
        prompt: Some("p".into()),
        result_capability_url: Some("http://127.0.0.1:7000/t0k".into()),
        borrowed_snapshot: true,
        review_context_url: Some(
            "http://127.0.0.1:7001/review-context/workspace-mcp-configs".into(),
        ),
        ..LaunchCommand::default()
    };
    let json = serde_json::to_string(&new).unwrap();
    assert_eq!(
        json,
        r#"{"agent_id":"a1","prompt":"p","result_capability_url":"http://127.0.0.1:7000/t0k","borrowed_snapshot":true,"review_context_url":"http://127.0.0.1:7001/review-context/workspace-mcp-configs"}"#
    );
    // An old reader ignores the new fields; a new reader reads them back.
    let old: OldLaunchCommand = serde_json::from_str(&json).unwrap();
    assert_eq!(
        old,
        OldLaunchCommand {
            agent_id: "a1".into(),
            model: None,
            effort: None,
            prompt: Some("p".into())
        }
    );
    assert_eq!(read(&json).unwrap(), new);

    // An old payload: direct delivery, the daemon user's own checkout, and written back
    // unchanged (no new field appears).
    let old_payload = r#"{"agent_id":"a1","prompt":"p"}"#;
    let cmd = read(old_payload).unwrap();
    assert_eq!(
        (
            &cmd.result_capability_url,
            cmd.borrowed_snapshot,
            &cmd.review_context_url
        ),
        (&None, false, &None)
    );
    assert_eq!(serde_json::to_string(&cmd).unwrap(), old_payload);
    let nulls = read(
        r#"{"agent_id":"a1","prompt":"p","result_capability_url":null,"review_context_url":null}"#,
    )
    .unwrap();
    assert_eq!(nulls, cmd);
}

#[cfg(feature = "cli")]
#[test]
fn an_old_payload_launches_as_today_and_a_new_one_brokered_and_borrowed() {
    use kcap_mcp_registry::ops::render::{LaunchOverrides, launch_context};
    use kcap_mcp_registry::{ResultDelivery, Snapshot};

    let old = launch_context(
        Some(read(r#"{"agent_id":"a1"}"#).unwrap()),
        LaunchOverrides::default(),
    );
    assert_eq!(
        (old.result_delivery, old.snapshot),
        (ResultDelivery::Direct, Snapshot::Own)
    );
    let new = launch_context(
        Some(
            read(r#"{"agent_id":"a1","result_capability_url":"http://c","review_context_url":"http://r"}"#)
                .unwrap(),
        ),
        LaunchOverrides::default(),
    );
    assert_eq!(
        (new.result_delivery, new.snapshot),
        (
            ResultDelivery::Brokered {
                capability_url: "http://c".into()
            },
            Snapshot::Borrowed {
                review_context_url: Some("http://r".into())
            }
        )
    );
    // `borrowed_snapshot` without a URL stays a borrowed snapshot (whose render then fails).
    let no_url = launch_context(
        Some(read(r#"{"agent_id":"a1","borrowed_snapshot":true}"#).unwrap()),
        LaunchOverrides::default(),
    );
    assert_eq!(
        no_url.snapshot,
        Snapshot::Borrowed {
            review_context_url: None
        }
    );
    // Flags override the payload's fields.
    let flagged = launch_context(
        Some(read(r#"{"agent_id":"a1","result_capability_url":"http://c"}"#).unwrap()),
        LaunchOverrides {
            result_capability_url: Some("http://flag".into()),
            review_context_url: Some("http://r2".into()),
            ..LaunchOverrides::default()
        },
    );
    assert_eq!(
        (flagged.result_delivery, flagged.snapshot),
        (
            ResultDelivery::Brokered {
                capability_url: "http://flag".into()
            },
            Snapshot::Borrowed {
                review_context_url: Some("http://r2".into())
            }
        )
    );
}

#[test]
fn a_launch_command_is_an_object_with_each_key_once() {
    // An array is not read by position.
    assert_eq!(
        read(r#"["a1", ["kcap-review"]]"#).unwrap_err(),
        "invalid type: sequence, expected a launch command (a JSON object) at line 1 column 0"
    );
    // A key given twice, known or not: two JSON readers could take different values.
    for (json, key, column) in [
        (r#"{"agent_id":"a1","agent_id":"a2"}"#, "agent_id", 27),
        (r#"{"agent_id":"a1","model":"m","model":"n"}"#, "model", 36),
        (r#"{"agent_id":"a1","future":1,"future":2}"#, "future", 36),
    ] {
        assert_eq!(
            read(json).unwrap_err(),
            format!("duplicate field `{key}` at line 1 column {column}")
        );
    }
    // The CLI's `--agent-id` fallback reads the same way.
    let e = LaunchCommand::from_json(r#"{"model":"m","model":"n"}"#, Some("a1")).unwrap_err();
    assert_eq!(e.to_string(), "duplicate field `model` at line 1 column 20");
    let cmd = LaunchCommand::from_json(r#"{"model":"m"}"#, Some("a1")).unwrap();
    assert_eq!(
        (cmd.agent_id.as_str(), cmd.model.as_deref()),
        ("a1", Some("m"))
    );
    let cmd = LaunchCommand::from_json(r#"{"agent_id":"a0"}"#, Some("a1")).unwrap();
    assert_eq!(cmd.agent_id, "a0", "the payload's own id wins");
    assert_eq!(
        LaunchCommand::from_json(r#"{"agent_id":"a0"} x"#, None)
            .unwrap_err()
            .to_string(),
        "trailing characters at line 1 column 19"
    );
}
