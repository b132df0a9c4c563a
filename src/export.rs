//! Files generated from the registry, so no list of kcap's MCP servers is kept by hand:
//!
//! - [`crate::clients::claude::registration::claude_mcp_json`]: a project `.mcp.json` for
//!   Claude Code (in Claude Code's room, with the loader model that reads it);
//! - [`crate::clients::codex::registration::codex_toml`]: `[mcp_servers.<id>]` tables for
//!   Codex CLI's `config.toml` (in Codex's room);
//! - [`denylist`]: the ids of flow-starting servers, for the kcap server's own strip list;
//! - [`json_schema`]: a JSON Schema (draft 2020-12) of one registry file, for editors.
//!
//! Every export is deterministic: registry order (sorted by id), fixed key order, and a
//! trailing newline. The registration files hold exactly [`registrations`]: the
//! allowlistable entries, the servers a person may register with a client. `check --against`
//! compares a registration file with the same list, so an export never drifts from itself.

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::model::{EnvSource, MAX_ID_LEN};
use crate::schema::{
    ENV_NAME_PATTERN, EntryKey, ID_PATTERN, Key, MAX_DESCRIPTION_CHARS, RegistryEntry,
    TOOL_NAME_PATTERN, ToolKey, ValueKind, is_forbidden_char,
};

/// The `command` registration files give every server unless told otherwise: the kcap
/// binary, found on `PATH`.
pub const DEFAULT_COMMAND: &str = "kcap";

/// The registry entries a client registration file lists: every allowlistable entry, in
/// registry order. Injection-only entries (the result channel `kcap-flow-result`) need the
/// launcher's agent id and are never registered. Flow-starting servers are included: the
/// recursion guard applies to reviewers, not to a person's own client.
pub fn registrations(entries: &[RegistryEntry]) -> impl Iterator<Item = &RegistryEntry> {
    entries.iter().filter(|e| e.allowlistable)
}

/// What the registration exports write besides the registry's own data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrationOptions {
    /// The `command` of every server (the kcap binary); [`DEFAULT_COMMAND`] by default.
    pub command: String,
    /// When set, every env var whose source is `server_url` is written with this value;
    /// otherwise no `env` is written and the kcap binary uses its own configuration.
    pub server_url: Option<String>,
    /// Codex only: an absolute project directory, written as `cwd` of every server with
    /// `needs_project_cwd`. Codex starts a server whose `cwd` is unset in its own working
    /// directory, and fails to start one with a relative `cwd`.
    pub project_dir: Option<String>,
}

impl Default for RegistrationOptions {
    fn default() -> Self {
        RegistrationOptions {
            command: DEFAULT_COMMAND.into(),
            server_url: None,
            project_dir: None,
        }
    }
}

impl RegistrationOptions {
    /// The env vars written for `entry`: those whose source is `server_url`, in registry
    /// order, when [`RegistrationOptions::server_url`] is set.
    pub(crate) fn env<'e>(&'e self, entry: &'e RegistryEntry) -> Vec<(&'e str, &'e str)> {
        let Some(url) = &self.server_url else {
            return Vec::new();
        };
        entry
            .env
            .iter()
            .filter(|(_, src)| *src == EnvSource::ServerUrl)
            .map(|(name, _)| (name.as_str(), url.as_str()))
            .collect()
    }
}

/// The ids of the entries with `starts_flows = true`, as a pretty-printed JSON array of
/// strings in registry order: the kcap server's own deny-list of flow-starting MCP servers.
pub fn denylist(entries: &[RegistryEntry]) -> String {
    let ids: Vec<&str> = entries
        .iter()
        .filter(|e| e.starts_flows)
        .map(|e| e.id.as_str())
        .collect();
    pretty(&json!(ids))
}

/// [`json_schema_value`], pretty-printed with a trailing newline.
pub fn json_schema() -> String {
    pretty(&json_schema_value())
}

/// A JSON Schema (draft 2020-12) of one registry file, read as JSON (as TOML editors such as
/// taplo / Even Better TOML do), generated from [`EntryKey`], [`ToolKey`], the pattern
/// constants and [`is_forbidden_char`] of [`crate::schema`].
///
/// It expresses every per-key rule: `unknown-key` (`additionalProperties: false`),
/// `wrong-type`, `missing-key` (`required`), `id-canonical`, `description-format`,
/// `args-format`, `env-name`, `env-source` and `tool-name`. The other rules need the file
/// name, other files, the parse itself, or relate several keys; only `check` runs them.
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
    Value::Object(head)
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
        EntryKey::StartsFlows
        | EntryKey::Allowlistable
        | EntryKey::ReadOnly
        | EntryKey::NeedsProjectCwd
        | EntryKey::Env => kind_schema(key.kind()),
    }
}

fn tool_key_schema(key: ToolKey) -> Value {
    match key {
        ToolKey::Name => json!({
            "type": "string",
            "pattern": TOOL_NAME_PATTERN,
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
                "type": "string",
                "enum": EnvSource::ALL.map(EnvSource::name),
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

/// Pretty JSON (two-space indent) with a trailing newline.
pub(crate) fn pretty<T: Serialize>(value: &T) -> String {
    let mut out = serde_json::to_string_pretty(value).expect("JSON values serialize");
    out.push('\n');
    out
}
