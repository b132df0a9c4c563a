//! Files generated from the registry, so no list of kcap's MCP servers is kept by hand:
//!
//! - a client's registration file (`export <client>`): [`RegistrationFormat::export`], shaped
//!   in that client's room with the vocabulary of [`crate::clients::registration`];
//! - [`denylist`]: the ids of flow-starting servers, for the kcap server's own strip list;
//! - [`json_schema`]: a JSON Schema (draft 2020-12) of one registry file, for editors.
//!
//! Every export is deterministic: registry order (sorted by id), fixed key order, and a
//! trailing newline.

use serde_json::{Map, Value, json};

use crate::model::{ALIASING_CLIENTS, EnvSource, Inject, MAX_ID_LEN};
use crate::schema::{
    ENV_NAME_PATTERN, EntryKey, ID_PATTERN, Key, MAX_DESCRIPTION_CHARS,
    MAX_QUALIFIED_TOOL_NAME_LEN, RegistryEntry, TOOL_NAME_PATTERN, ToolKey, ValueKind,
    is_forbidden_char, qualified_tool_name,
};
use crate::text::pretty_json;

#[cfg(doc)]
use crate::clients::registration::RegistrationFormat;

/// The ids of the entries with `starts_flows = true`, as a pretty-printed JSON array of
/// strings in registry order: the kcap server's own deny-list of flow-starting MCP servers.
pub fn denylist(entries: &[RegistryEntry]) -> String {
    let ids: Vec<&str> = entries
        .iter()
        .filter(|e| e.starts_flows)
        .map(|e| e.id.as_str())
        .collect();
    pretty_json(&json!(ids))
}

/// [`json_schema_value`], pretty-printed with a trailing newline.
pub fn json_schema() -> String {
    pretty_json(&json_schema_value())
}

/// A JSON Schema (draft 2020-12) of one registry file, read as JSON (as TOML editors such as
/// taplo / Even Better TOML do), generated from [`EntryKey`], [`ToolKey`], the pattern
/// constants and [`is_forbidden_char`] of [`crate::schema`].
///
/// It expresses every per-key rule: `unknown-key` (`additionalProperties: false`),
/// `wrong-type`, `missing-key` (`required`), `id-canonical`, `description-format`,
/// `args-format`, `env-name`, `env-source`, `env-constant`, `tool-name` and `inject-value`;
/// and, with `if`/`then` over one file, the rules of the injection keys: `inject-scope`,
/// `inject-always` (without the result channel's own `allowlistable`), `injection-only-starts-flows`,
/// `env-source-scope`, `capability-url-server-url`, `borrowed-snapshot-server-url`,
/// `registered-scope` and `driver-stamp-scope`. Tool names are also bounded at 55 bytes, the
/// most `tool-name-length` allows with the shortest id. The other rules need the file name,
/// other files, the parse itself, or relate keys in ways left to `check`.
pub fn json_schema_value() -> Value {
    let mut schema = object_schema(entry_key_schema);
    let fields = schema.as_object_mut().expect("an object");
    let mut head = Map::new();
    head.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    head.insert("title".into(), json!("kcap MCP server registry entry"));
    head.insert(
        "description".into(),
        json!(
            "One file of the kcap MCP server registry, registry/<id>.toml. Rules that relate \
             keys, files or the file name are checked by `kcap-mcp-registry check`."
        ),
    );
    head.append(fields);
    head.insert("allOf".into(), Value::Array(cross_key_schemas()));
    Value::Object(head)
}

/// The rules of the injection keys, as `if`/`then` schemas over one file.
fn cross_key_schemas() -> Vec<Value> {
    let rc = crate::model::RESULT_CHANNEL_ID;
    let is = |key: &str, value: Value| json!({ "required": [key], "properties": { key: { "const": value } } });
    // `env` holds a variable whose source is `source`.
    let env_has =
        |source: &str| json!({ "not": { "additionalProperties": { "not": { "const": source } } } });
    let env_with =
        |source: &str| json!({ "required": ["env"], "properties": { "env": env_has(source) } });
    let injection_only = is("allowlistable", json!(false));
    vec![
        // inject-scope
        json!({ "if": injection_only, "then": { "required": ["inject"] } }),
        json!({ "if": { "required": ["inject"] }, "then": is("allowlistable", json!(false)) }),
        // inject-always
        json!({ "if": is("inject", json!("always")), "then": is("id", json!(rc)) }),
        json!({ "if": { "required": ["inject", "id"], "properties": { "id": { "const": rc } } },
                "then": is("inject", json!("always")) }),
        // injection-only-starts-flows
        json!({ "if": { "required": ["allowlistable"], "properties": {
                    "allowlistable": { "const": false }, "id": { "not": { "const": rc } } } },
                "then": { "properties": { "starts_flows": { "const": false } } } }),
        // env-source-scope
        json!({ "if": env_with("result_capability_url"), "then": is("inject", json!("always")) }),
        json!({ "if": env_with("review_context_url"), "then": is("inject", json!("borrowed-snapshot")) }),
        // capability-url-server-url
        json!({ "if": env_with("result_capability_url"), "then": env_with("server_url") }),
        // borrowed-snapshot-server-url
        json!({ "if": is("inject", json!("borrowed-snapshot")),
                "then": { "properties": { "env": { "additionalProperties": { "not": { "const": "server_url" } } } } } }),
        // registered-scope
        json!({ "if": injection_only, "then": { "properties": { "registered": { "const": false } } } }),
        // driver-stamp-scope
        json!({ "if": is("driver_stamp", json!(true)), "then": { "properties": { "starts_flows": { "const": true } } } }),
    ]
}

/// `{"type":"object","properties":{…},"required":[…],"additionalProperties":false}` over
/// every key of `K`.
fn object_schema<K: Key>(key_schema: fn(K) -> Value) -> Value {
    let mut properties = Map::new();
    for &key in K::ALL {
        let mut s = key_schema(key);
        s.as_object_mut()
            .expect("an object")
            .insert("description".into(), json!(key.meaning()));
        properties.insert(key.name().into(), s);
    }
    let required: Vec<&str> = K::ALL
        .iter()
        .filter(|k| k.required())
        .map(|k| k.name())
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn entry_key_schema(key: EntryKey) -> Value {
    match key {
        EntryKey::Id => json!({
            "type": "string",
            "pattern": ID_PATTERN,
            "maxLength": MAX_ID_LEN,
        }),
        EntryKey::Description => json!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_DESCRIPTION_CHARS,
            "pattern": one_line_pattern(),
        }),
        EntryKey::Args => json!({
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "string",
                "minLength": 1,
                "pattern": one_line_pattern(),
                // Claude Code expands `${…}` and offers no escape (rule `args-format`).
                "not": { "pattern": "\\$\\{" },
            },
        }),
        EntryKey::Tools => json!({
            "type": "array",
            "items": object_schema(tool_key_schema),
        }),
        EntryKey::Inject => json!({
            "type": "string",
            "enum": Inject::ALL.map(Inject::name),
        }),
        // Shorter than the id (rule `alias-format`), which the schema cannot compare.
        EntryKey::Alias => json!({
            "type": "string",
            "pattern": ID_PATTERN,
            "maxLength": MAX_ID_LEN - 1,
        }),
        EntryKey::StartsFlows
        | EntryKey::Allowlistable
        | EntryKey::Registered
        | EntryKey::ReadOnly
        | EntryKey::NeedsProjectCwd
        | EntryKey::DriverStamp
        | EntryKey::Env => kind_schema(key.kind()),
    }
}

fn tool_key_schema(key: ToolKey) -> Value {
    match key {
        ToolKey::Name => json!({
            "type": "string",
            "pattern": TOOL_NAME_PATTERN,
            // The longest tool name rule `tool-name-length` (which knows the id and alias)
            // can pass: `mcp__<id>__<tool>` within 64 bytes with the shortest (2-byte) id, and
            // each aliasing client's name within its limit with a 2-byte stem.
            "maxLength": ALIASING_CLIENTS
                .iter()
                .map(|c| c.max_len - c.aliased_len("ab", ""))
                .fold(
                    MAX_QUALIFIED_TOOL_NAME_LEN - qualified_tool_name("", "").len() - 2,
                    usize::min,
                ),
        }),
        ToolKey::UnattendedSafe => kind_schema(key.kind()),
    }
}

fn kind_schema(kind: ValueKind) -> Value {
    match kind {
        ValueKind::String => json!({ "type": "string" }),
        ValueKind::Bool => json!({ "type": "boolean" }),
        ValueKind::StringArray => json!({ "type": "array", "items": { "type": "string" } }),
        ValueKind::EnvTable => json!({
            "type": "object",
            "propertyNames": { "pattern": ENV_NAME_PATTERN },
            "additionalProperties": {
                "oneOf": [
                    {
                        "type": "string",
                        "enum": EnvSource::ALL.map(|s| s.name().unwrap_or_default()),
                    },
                    {
                        "type": "object",
                        "properties": {
                            // Rule `env-constant`: as an argument (`args-format`).
                            "value": {
                                "type": "string",
                                "minLength": 1,
                                "pattern": one_line_pattern(),
                                "not": { "pattern": "\\$\\{" },
                            },
                        },
                        "required": ["value"],
                        "additionalProperties": false,
                    },
                ],
            },
        }),
        ValueKind::ToolArray => json!({ "type": "array", "items": { "type": "object" } }),
    }
}

/// `^[^…]*$` excluding every character [`is_forbidden_char`] forbids, as `\uXXXX` ranges
/// (all of them are in the Basic Multilingual Plane, which a test checks).
pub fn one_line_pattern() -> String {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    // `\uXXXX` names Basic Multilingual Plane characters only; the invisible characters
    // beyond it (tag characters, …) are left to `check`.
    for c in (0..=0xFFFF_u32).filter_map(char::from_u32) {
        if !is_forbidden_char(c) {
            continue;
        }
        let c = c as u32;
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == c => *end = c,
            _ => ranges.push((c, c)),
        }
    }
    let mut class = String::new();
    for (start, end) in ranges {
        class.push_str(&format!("\\u{start:04x}"));
        if end > start {
            class.push_str(&format!("-\\u{end:04x}"));
        }
    }
    format!("^[^{class}]*$")
}
