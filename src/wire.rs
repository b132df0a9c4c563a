//! The launch command as the daemon receives it (JSON, snake_case), reduced to the fields a
//! reviewer launch reads. Every field but `agent_id` is additive: payloads without it (old
//! servers) read as today's behaviour (no allowlist, direct result delivery, the daemon
//! user's own checkout), and readers without it (old daemons) ignore it.

use std::fmt;

use serde::de::{Deserializer, Error as _, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

/// A launch command: the fields of the daemon's launch payload that shape a reviewer's MCP
/// configuration. Unknown sibling fields are ignored, so it reads any newer payload.
///
/// ```
/// use kcap_mcp_registry::LaunchCommand;
///
/// let cmd: LaunchCommand = serde_json::from_str(
///     r#"{"agent_id":"a1","mcp_allowlist":["kcap-review",null],"future_field":1}"#,
/// ).unwrap();
/// assert_eq!(cmd.mcp_allowlist, Some(vec![Some("kcap-review".into()), None]));
/// let old: LaunchCommand = serde_json::from_str(r#"{"agent_id":"a1"}"#).unwrap();
/// assert_eq!(old.mcp_allowlist, None);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchCommand {
    /// The reviewer's agent id (`KCAP_FLOW_AGENT_ID` of the result channel). Required: a
    /// payload without it is an error, never an empty id.
    pub agent_id: String,
    /// The flow's MCP allowlist: absent or `null` → `None`; `null` elements are kept as
    /// `None` entries (resolution reports them as blank). A non-string element is an error
    /// naming its index, e.g. `mcp_allowlist[2]: invalid type: integer `7`, expected a string`.
    #[serde(
        default,
        deserialize_with = "allowlist",
        skip_serializing_if = "Option::is_none"
    )]
    pub mcp_allowlist: Option<Vec<Option<String>>>,
    /// Model name for the reviewer, if the flow sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Reasoning effort for the reviewer, if the flow sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// The reviewer's prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Brokered result delivery's capability URL
    /// ([`ResultDelivery::Brokered`](crate::ResultDelivery::Brokered)); absent or `null` →
    /// direct delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_capability_url: Option<String>,
    /// The reviewer reviews a borrowed snapshot ([`Snapshot::Borrowed`](crate::Snapshot)).
    /// Absent → `false`; a `review_context_url` marks a borrowed snapshot too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub borrowed_snapshot: bool,
    /// The borrowed snapshot's review-context URL; absent or `null` with
    /// `borrowed_snapshot: true` fails the render
    /// ([`RenderError::MissingReviewContextUrl`](crate::RenderError::MissingReviewContextUrl)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_context_url: Option<String>,
}

fn allowlist<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<Option<String>>>, D::Error> {
    struct Entries;
    impl<'de> Visitor<'de> for Entries {
        type Value = Option<Vec<Option<String>>>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an array of strings or nulls, or null")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
            loop {
                let i = out.len();
                match seq.next_element::<Option<String>>() {
                    Ok(Some(entry)) => out.push(entry),
                    Ok(None) => return Ok(Some(out)),
                    Err(e) => return Err(A::Error::custom(format!("mcp_allowlist[{i}]: {e}"))),
                }
            }
        }
    }
    d.deserialize_option(Entries)
}
