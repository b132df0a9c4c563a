//! The launch command's `mcp_allowlist` field is additive in both directions.

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
