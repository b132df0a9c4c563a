//! OpenCode's credential file, `$XDG_DATA_HOME/opencode/auth.json`, reduced to its
//! credentials for a reviewer's per-launch root.
//!
//! OpenCode 1.18.33 reads it as an object keyed by provider id (or URL), each entry one of
//! (its `Auth` schema, read from the bundle):
//! - `{"type": "api", "key": …, "metadata"?: {string: string}}`: an API key;
//! - `{"type": "oauth", "refresh": …, "access": …, "expires": <number>, "accountId"?: …,
//!   "enterpriseUrl"?: …}`: OAuth tokens;
//! - `{"type": "wellknown", "key": …, "token": …}` under a URL: at every start OpenCode
//!   fetches `<url>/.well-known/opencode` (and the `remote_config.url` it names) and merges
//!   the configuration it returns, MCP servers, plugins and permissions included (measured:
//!   a server named there started beside the injected ones); a failed fetch aborts the start.
//!
//! Entries that do not match the schema are ignored by OpenCode. [`keep_credentials`] keeps
//! the `api` and `oauth` entries with exactly the schema's fields, and drops the rest.

use serde_json::{Map, Value};

/// `auth.json`'s `api` and `oauth` entries, each with only the fields OpenCode's schema
/// gives it; `wellknown` entries (remote configuration), entries of another type and
/// entries OpenCode itself would ignore (a required field missing or mistyped) are dropped.
/// The result is compact JSON, keys sorted.
///
/// # Errors
/// The contents are not JSON, or not a JSON object.
///
/// ```
/// use kcap_mcp_registry::clients::opencode::auth::keep_credentials;
///
/// let user = r#"{
///   "anthropic": {"type": "api", "key": "sk-1", "note": "x"},
///   "https://corp.example": {"type": "wellknown", "key": "TOKEN", "token": "t"}
/// }"#;
/// assert_eq!(
///     keep_credentials(user).unwrap(),
///     r#"{"anthropic":{"key":"sk-1","type":"api"}}"#
/// );
/// assert!(keep_credentials("[]").is_err());
/// ```
pub fn keep_credentials(contents: &str) -> Result<String, String> {
    let value: Value =
        serde_json::from_str(contents).map_err(|e| format!("is not valid JSON ({e})"))?;
    let Value::Object(entries) = value else {
        return Err("is not a JSON object".into());
    };
    let kept: Map<String, Value> = entries
        .into_iter()
        .filter_map(|(provider, entry)| Some((provider, credential(&entry)?)))
        .collect();
    Ok(Value::Object(kept).to_string())
}

/// One entry's credential fields, or `None` for an entry that is not a valid `api` or
/// `oauth` one.
fn credential(entry: &Value) -> Option<Value> {
    let mut kept = Map::new();
    let mut copy = |field: &str, valid: fn(&Value) -> bool, required: bool| -> Option<()> {
        match entry.get(field) {
            Some(v) if valid(v) => {
                kept.insert(field.to_owned(), v.clone());
                Some(())
            }
            Some(_) => None,
            None if required => None,
            None => Some(()),
        }
    };
    match entry.get("type")?.as_str()? {
        "api" => {
            copy("type", Value::is_string, true)?;
            copy("key", Value::is_string, true)?;
            copy("metadata", string_map, false)?;
        }
        "oauth" => {
            copy("type", Value::is_string, true)?;
            copy("refresh", Value::is_string, true)?;
            copy("access", Value::is_string, true)?;
            copy("expires", Value::is_number, true)?;
            copy("accountId", Value::is_string, false)?;
            copy("enterpriseUrl", Value::is_string, false)?;
        }
        _ => return None,
    }
    Some(Value::Object(kept))
}

/// An object whose values are all strings.
fn string_map(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.values().all(Value::is_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_api_and_oauth_fields_only() {
        let user = r#"{
          "anthropic": {"type": "api", "key": "sk-1", "metadata": {"a": "b"}, "extra": 1},
          "openai": {"type": "oauth", "refresh": "r", "access": "a", "expires": 17,
                     "accountId": "acc", "enterpriseUrl": "https://e", "x": true},
          "http://127.0.0.1:9": {"type": "wellknown", "key": "K", "token": "t"},
          "other": {"type": "future", "key": "k"},
          "nokey": {"type": "api"},
          "badmeta": {"type": "api", "key": "k", "metadata": {"a": 1}},
          "badexp": {"type": "oauth", "refresh": "r", "access": "a", "expires": "soon"},
          "notype": {"key": "k"},
          "scalar": "sk-2"
        }"#;
        let kept: Value = serde_json::from_str(&keep_credentials(user).unwrap()).unwrap();
        assert_eq!(
            kept,
            serde_json::json!({
                "anthropic": {"type": "api", "key": "sk-1", "metadata": {"a": "b"}},
                "openai": {"type": "oauth", "refresh": "r", "access": "a", "expires": 17,
                           "accountId": "acc", "enterpriseUrl": "https://e"}
            })
        );
    }

    #[test]
    fn refuses_what_is_not_an_object() {
        assert_eq!(keep_credentials("{}").unwrap(), "{}");
        assert_eq!(keep_credentials("[]").unwrap_err(), "is not a JSON object");
        assert!(
            keep_credentials("{")
                .unwrap_err()
                .starts_with("is not valid JSON")
        );
    }
}
