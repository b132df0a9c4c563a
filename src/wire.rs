//! The launch command as the daemon receives it (JSON, snake_case), reduced to the fields a
//! reviewer launch reads. Every field but `agent_id` is additive: payloads without it (old
//! servers) read as today's behaviour (no allowlist, direct result delivery, the daemon
//! user's own checkout), and readers without it (old daemons) ignore it.

use std::fmt;

use serde::de::{
    DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde::{Deserialize, Serialize};

/// A launch command: the fields of the daemon's launch payload that shape a reviewer's MCP
/// configuration. Unknown sibling fields are ignored, so it reads any newer payload.
///
/// It is read from a JSON object only (an array is refused, not read by position), and a key
/// given twice is an error (`duplicate field `model``), an unknown key included: which of two
/// values a reader takes differs between JSON parsers, so a payload that two of them could
/// read differently is refused.
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LaunchCommand {
    /// The reviewer's agent id (`KCAP_FLOW_AGENT_ID` of the result channel). Required: a
    /// payload without it is an error, never an empty id.
    pub agent_id: String,
    /// The flow's MCP allowlist: absent or `null` → `None`; `null` elements are kept as
    /// `None` entries (resolution reports them as blank). A non-string element is an error
    /// naming its index, e.g. `mcp_allowlist[2]: invalid type: integer `7`, expected a string`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp_allowlist: Option<Vec<Option<String>>>,
    /// Model name for the reviewer, if the flow sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Reasoning effort for the reviewer, if the flow sets one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// The reviewer's prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Brokered result delivery's capability URL
    /// ([`ResultDelivery::Brokered`](crate::ResultDelivery::Brokered)); absent or `null` →
    /// direct delivery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_capability_url: Option<String>,
    /// The reviewer reviews a borrowed snapshot ([`Snapshot::Borrowed`](crate::Snapshot)).
    /// Absent → `false`; a `review_context_url` marks a borrowed snapshot too.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub borrowed_snapshot: bool,
    /// The borrowed snapshot's review-context URL; absent or `null` with
    /// `borrowed_snapshot: true` fails the render
    /// ([`RenderError::MissingReviewContextUrl`](crate::RenderError::MissingReviewContextUrl)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_context_url: Option<String>,
}

impl<'de> Deserialize<'de> for LaunchCommand {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        LaunchSeed { agent_id: None }.deserialize(d)
    }
}

impl LaunchCommand {
    /// Reads a launch command from JSON `text`, with `agent_id` when the text has none (the
    /// CLI's `--agent-id`); otherwise as [`Deserialize`] does.
    ///
    /// # Errors
    /// `serde_json`'s error, with its line and column.
    pub fn from_json(
        text: &str,
        agent_id: Option<&str>,
    ) -> Result<LaunchCommand, serde_json::Error> {
        let mut d = serde_json::Deserializer::from_str(text);
        let cmd = LaunchSeed {
            agent_id: agent_id.map(str::to_owned),
        }
        .deserialize(&mut d)?;
        d.end()?;
        Ok(cmd)
    }
}

/// Reads a [`LaunchCommand`] from an object, each key at most once, `agent_id` defaulting
/// to the seed's.
struct LaunchSeed {
    agent_id: Option<String>,
}

impl<'de> DeserializeSeed<'de> for LaunchSeed {
    type Value = LaunchCommand;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<LaunchCommand, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LaunchSeed {
    type Value = LaunchCommand;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a launch command (a JSON object)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LaunchCommand, A::Error> {
        let mut cmd = LaunchCommand::default();
        let mut agent_id = None;
        let mut seen = std::collections::BTreeSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(A::Error::custom(format_args!(
                    "duplicate field `{}`",
                    key.escape_debug()
                )));
            }
            match key.as_str() {
                "agent_id" => agent_id = Some(map.next_value()?),
                "mcp_allowlist" => cmd.mcp_allowlist = map.next_value_seed(Allowlist)?,
                "model" => cmd.model = map.next_value()?,
                "effort" => cmd.effort = map.next_value()?,
                "prompt" => cmd.prompt = map.next_value()?,
                "result_capability_url" => cmd.result_capability_url = map.next_value()?,
                "borrowed_snapshot" => cmd.borrowed_snapshot = map.next_value()?,
                "review_context_url" => cmd.review_context_url = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        cmd.agent_id = agent_id
            .or(self.agent_id)
            .ok_or_else(|| A::Error::missing_field("agent_id"))?;
        Ok(cmd)
    }
}

/// `mcp_allowlist`'s value: [`allowlist`].
struct Allowlist;

impl<'de> DeserializeSeed<'de> for Allowlist {
    type Value = Option<Vec<Option<String>>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        allowlist(d)
    }
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
