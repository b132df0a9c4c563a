//! A model of how Codex CLI 0.169.0 loads `$CODEX_HOME/config.toml` (and, with
//! `--profile NAME`, `$CODEX_HOME/NAME.config.toml` merged over it): which MCP servers it
//! starts, which it lists as disabled, and when it refuses the whole configuration.
//!
//! Measured with `codex mcp list --json` and `codex app-server` `config/read` under a
//! throwaway `CODEX_HOME` (2026-11-30); `tests/clients/differential.rs` replays generated variants
//! against the real client. Quirks, each as measured:
//!
//! - **Decoding**: one leading UTF-8 byte order mark is accepted ([`crate::decode`]); a
//!   second is a TOML syntax error (at 1:3). Any TOML error (a duplicate key included)
//!   refuses the whole configuration: Codex exits with "failed to load … configuration".
//! - **All or nothing**: every `[mcp_servers.<name>]` table is deserialized strictly: a
//!   wrong-typed known field ([`FIELDS`]) in *any* server, kcap's or not, refuses the whole
//!   file (`cwd = 5`: "invalid type: integer `5`, expected a string in `mcp_servers.a.cwd`").
//!   Unknown keys (`type`, `description`, `transport`, …) are ignored: `type = "sse"` with a
//!   `command` is still a command server.
//! - **Transport**: a table with `command` is a command server, one with `url` a network
//!   server; both, or neither ("invalid transport"), refuse the file, and so does a field of
//!   the other transport (`url` with `command`: "url is not supported for stdio"; `cwd` with
//!   `url`: "cwd is not supported for streamable_http").
//! - **Values**: a negative `startup_timeout_sec`/`tool_timeout_sec` refuses the file;
//!   `default_tools_approval_mode` must be `auto`, `prompt`, `writes` or `approve`, `auth`
//!   `oauth`, `chatgpt` or `ema_auth`. An empty `command` or `cwd` is accepted as written.
//! - **`enabled = false`**: listed, not started. `enabled_tools = []` starts the server but
//!   exposes none of its tools; `disabled_tools` hides the tools it names.
//! - **`cwd`**: passed as written; a relative one is resolved against Codex's own working
//!   directory (it starts the server there when it exists, and fails to start it when not).
//! - **Top level**: `profile = "<name>"` refuses the file ("legacy `profile = …` config is no
//!   longer supported"), as does a non-table `profiles` or `mcp_servers`. A file with no
//!   `mcp_servers` has no servers. Other top-level keys are not modelled.
//! - **Profiles**: `--profile NAME` reads `NAME.config.toml` next to `config.toml` (a missing
//!   profile file is no error) and merges it over `config.toml` table by table: a server's
//!   `env` is merged key by key, arrays and values are replaced, and the merged server is
//!   checked as above (a profile `url` over a base `command` refuses the file). A
//!   `config.toml` holding `[profiles.NAME]` for the selected profile is refused; the profile
//!   file itself is checked like `config.toml` (`profile = …` in it is refused too).

use std::collections::BTreeMap;

use crate::clients::loaded::{
    Kind, Loaded, Node, Rejected, Remote, Skipped, Source, Span, Started, parse_toml,
};
use crate::decode::decode_utf8;

/// The type Codex 0.169.0 deserializes a server field as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType {
    /// A string.
    String,
    /// A boolean.
    Bool,
    /// A non-negative number of seconds (integer or float).
    Seconds,
    /// A non-negative integer.
    Unsigned,
    /// An array of strings.
    Strings,
    /// An array of strings or tables (`env_vars`).
    EnvVars,
    /// A table of strings.
    StringTable,
    /// A table of tables (`tools.<name>`).
    TableOfTables,
    /// One of the given strings.
    OneOf(&'static [&'static str]),
}

/// Which transport a field belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldTransport {
    /// Any server.
    Any,
    /// Command (stdio) servers only: with `url` the file is refused.
    Stdio,
    /// Network (`url`) servers only: with `command` the file is refused.
    Http,
}

/// Every `[mcp_servers.<name>]` field Codex CLI 0.169.0 knows, with its type and transport
/// (measured: each field given a wrong type, or the other transport). Keys not listed are
/// ignored by Codex.
pub const FIELDS: &[(&str, FieldType, FieldTransport)] = &[
    ("command", FieldType::String, FieldTransport::Stdio),
    ("args", FieldType::Strings, FieldTransport::Stdio),
    ("env", FieldType::StringTable, FieldTransport::Stdio),
    ("env_vars", FieldType::EnvVars, FieldTransport::Stdio),
    ("cwd", FieldType::String, FieldTransport::Stdio),
    ("url", FieldType::String, FieldTransport::Http),
    (
        "bearer_token_env_var",
        FieldType::String,
        FieldTransport::Http,
    ),
    ("http_headers", FieldType::StringTable, FieldTransport::Http),
    (
        "env_http_headers",
        FieldType::StringTable,
        FieldTransport::Http,
    ),
    (
        "http_headers_helper",
        FieldType::String,
        FieldTransport::Http,
    ),
    ("oauth_resource", FieldType::String, FieldTransport::Http),
    ("scopes", FieldType::Strings, FieldTransport::Any),
    (
        "auth",
        FieldType::OneOf(&["oauth", "chatgpt", "ema_auth"]),
        FieldTransport::Any,
    ),
    ("enabled", FieldType::Bool, FieldTransport::Any),
    ("required", FieldType::Bool, FieldTransport::Any),
    (
        "supports_parallel_tool_calls",
        FieldType::Bool,
        FieldTransport::Any,
    ),
    ("enabled_tools", FieldType::Strings, FieldTransport::Any),
    ("disabled_tools", FieldType::Strings, FieldTransport::Any),
    (
        "startup_timeout_sec",
        FieldType::Seconds,
        FieldTransport::Any,
    ),
    ("tool_timeout_sec", FieldType::Seconds, FieldTransport::Any),
    (
        "startup_timeout_ms",
        FieldType::Unsigned,
        FieldTransport::Any,
    ),
    ("tools", FieldType::TableOfTables, FieldTransport::Any),
    (
        "default_tools_approval_mode",
        FieldType::OneOf(&["auto", "prompt", "writes", "approve"]),
        FieldTransport::Any,
    ),
    ("environment_id", FieldType::String, FieldTransport::Any),
    ("name", FieldType::String, FieldTransport::Any),
];

/// The names of [`FIELDS`]: the keys of a server entry Codex reads.
pub const FIELD_NAMES: [&str; FIELDS.len()] = {
    let mut names = [""; FIELDS.len()];
    let mut i = 0;
    while i < FIELDS.len() {
        names[i] = FIELDS[i].0;
        i += 1;
    }
    names
};

/// What Codex CLI 0.169.0 does with `config` (the bytes of `config.toml` at `path`) and,
/// when a profile is selected, `profile = (name, path, bytes)` (bytes `None`: no profile
/// file). Never fails: what Codex refuses is a [`Rejected`] verdict.
pub fn load(path: &str, config: &[u8], profile: Option<(&str, &str, Option<&[u8]>)>) -> Loaded {
    let mut loaded = Loaded::default();
    let Some(mut root) = parse(path, config, &mut loaded) else {
        return loaded;
    };
    if let Err(r) = top_level(&root) {
        loaded.rejected.push(r);
        return loaded;
    }
    if let Some((name, profile_path, bytes)) = profile {
        if let Some(p) = root.get("profiles").and_then(|p| p.get(name)) {
            loaded.rejected.push(Rejected {
                scope: "the configuration".into(),
                reason: format!(
                    "--profile `{name}` cannot be used while {path} holds a legacy `[profiles.{name}]` table; move it into {name}.config.toml"
                ),
                span: Some(p.span.clone()),
            });
            return loaded;
        }
        if let Some(bytes) = bytes {
            let Some(over) = parse(profile_path, bytes, &mut loaded) else {
                return loaded;
            };
            if let Err(r) = top_level(&over) {
                loaded.rejected.push(r);
                return loaded;
            }
            merge(&mut root, over);
        }
    }
    if let Some(servers) = root.get("mcp_servers").and_then(Node::entries) {
        let mut verdicts = Vec::new();
        for (name, key, table) in servers {
            match server(name, key, table) {
                Ok(v) => verdicts.push(v),
                Err(r) => {
                    loaded.rejected.push(r);
                    return loaded;
                }
            }
        }
        for v in verdicts {
            match v {
                Verdict::Started(s) => loaded.started.push(s),
                Verdict::Remote(r) => loaded.remote.push(r),
                Verdict::Disabled(s) => loaded.skipped.push(s),
            }
        }
    }
    loaded.sort();
    loaded
}

/// Decodes and parses one file into `loaded.sources`; a failure is recorded as the verdict.
fn parse(path: &str, bytes: &[u8], loaded: &mut Loaded) -> Option<Node> {
    let source = loaded.sources.len();
    let text = match decode_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(e) => {
            loaded.rejected.push(Rejected {
                scope: "the configuration".into(),
                reason: format!(
                    "{path} is not UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ),
                span: None,
            });
            return None;
        }
    };
    loaded.sources.push(Source {
        path: path.into(),
        text: text.as_str().into(),
    });
    match parse_toml(&text, source) {
        Ok(root) => Some(root),
        Err((message, offset)) => {
            loaded.rejected.push(Rejected {
                scope: "the configuration".into(),
                reason: format!("it is not valid TOML: {message}"),
                span: Some(Span {
                    source,
                    range: offset..offset,
                }),
            });
            None
        }
    }
}

fn reject(reason: String, span: &Span) -> Rejected {
    Rejected {
        scope: "the configuration".into(),
        reason,
        span: Some(span.clone()),
    }
}

/// The top-level keys Codex refuses in either file.
fn top_level(root: &Node) -> Result<(), Rejected> {
    if let Some(p) = root.get("profile") {
        return Err(match p.as_str() {
            Some(name) => reject(
                format!(
                    "legacy `profile = {}` is no longer supported; select the profile with `--profile {name}` and a {name}.config.toml",
                    json(name)
                ),
                &p.span,
            ),
            None => reject(
                format!("`profile` is {}, not a string", p.kind.noun()),
                &p.span,
            ),
        });
    }
    for key in ["profiles", "mcp_servers"] {
        if let Some(v) = root.get(key)
            && v.entries().is_none()
        {
            return Err(reject(
                format!("`{key}` is {}, not a table", v.kind.noun()),
                &v.span,
            ));
        }
    }
    Ok(())
}

/// Merges `over` into `base` as Codex merges a profile file: tables key by key, anything
/// else replaced.
fn merge(base: &mut Node, over: Node) {
    let Kind::Table(over_entries) = over.kind else {
        *base = over;
        return;
    };
    let Kind::Table(base_entries) = &mut base.kind else {
        *base = Node {
            kind: Kind::Table(over_entries),
            span: over.span,
        };
        return;
    };
    for (key, key_span, value) in over_entries {
        match base_entries.iter_mut().find(|(k, _, _)| *k == key) {
            Some(slot)
                if matches!(slot.2.kind, Kind::Table(_))
                    && matches!(value.kind, Kind::Table(_)) =>
            {
                merge(&mut slot.2, value)
            }
            Some(slot) => {
                slot.1 = key_span;
                slot.2 = value;
            }
            None => base_entries.push((key, key_span, value)),
        }
    }
}

enum Verdict {
    Started(Started),
    Remote(Remote),
    Disabled(Skipped),
}

/// Checks one server table as Codex deserializes it.
#[allow(
    clippy::too_many_lines,
    reason = "one arm per field of Codex 0.169.0's server table, as its deserializer checks them"
)]
fn server(name: &str, name_span: &Span, table: &Node) -> Result<Verdict, Rejected> {
    let at = |key: &str| format!("mcp_servers.{}.{key}", toml_key(name));
    let Some(entries) = table.entries() else {
        return Err(reject(
            format!(
                "`mcp_servers.{}` is {}, not a table",
                toml_key(name),
                table.kind.noun()
            ),
            &table.span,
        ));
    };
    for (key, _, value) in entries {
        if let Some((_, ty, _)) = FIELDS.iter().find(|(f, _, _)| f == key) {
            check_type(*ty, value, &at(key))?;
        }
    }
    let command = table.get("command");
    let url = table.get("url");
    let transport = match (command, url) {
        (Some(_), Some(u)) => {
            return Err(reject(
                format!("`{}` is not supported for a command server", at("url")),
                &u.span,
            ));
        }
        (None, None) => {
            return Err(reject(
                format!(
                    "`mcp_servers.{}` has neither `command` nor `url` (invalid transport)",
                    toml_key(name)
                ),
                &table.span,
            ));
        }
        (Some(_), None) => FieldTransport::Stdio,
        (None, Some(_)) => FieldTransport::Http,
    };
    for (key, key_span, _) in entries {
        if let Some((_, _, t)) = FIELDS.iter().find(|(f, _, _)| f == key)
            && *t != FieldTransport::Any
            && *t != transport
        {
            let kind = if transport == FieldTransport::Stdio {
                "a command server"
            } else {
                "a `url` server"
            };
            return Err(reject(
                format!("`{}` is not supported for {kind}", at(key)),
                key_span,
            ));
        }
    }
    if let Some(e) = table.get("enabled")
        && e.kind == Kind::Bool(false)
    {
        return Ok(Verdict::Disabled(Skipped {
            name: name.into(),
            reason: "`enabled = false`: Codex lists it as disabled and does not start it".into(),
            disabled: true,
            key: name_span.clone(),
            span: e.span.clone(),
        }));
    }
    if let Some(url) = url {
        return Ok(Verdict::Remote(Remote {
            name: name.into(),
            url: url.as_str().unwrap_or_default().into(),
            key: name_span.clone(),
            span: table.span.clone(),
        }));
    }
    let strings = |key: &str| -> Option<Vec<String>> {
        match &table.get(key)?.kind {
            Kind::Array(items) => Some(
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(String::from))
                    .collect(),
            ),
            _ => None,
        }
    };
    let mut fields = BTreeMap::new();
    for (key, _, value) in entries {
        fields.insert(key.clone(), value.span.clone());
    }
    Ok(Verdict::Started(Started {
        name: name.into(),
        command: command.and_then(Node::as_str).unwrap_or_default().into(),
        args: strings("args").unwrap_or_default(),
        env: table
            .get("env")
            .and_then(Node::entries)
            .map(|e| {
                e.iter()
                    .filter_map(|(k, _, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default(),
        cwd: table.get("cwd").and_then(Node::as_str).map(String::from),
        enabled_tools: strings("enabled_tools"),
        disabled_tools: strings("disabled_tools").unwrap_or_default(),
        expanded: Vec::new(),
        key: name_span.clone(),
        span: table.span.clone(),
        fields,
    }))
}

fn check_type(ty: FieldType, value: &Node, at: &str) -> Result<(), Rejected> {
    let wrong = |expected: &str, node: &Node, at: &str| {
        Err(reject(
            format!("`{at}` is {}, not {expected}", node.kind.noun()),
            &node.span,
        ))
    };
    match (ty, &value.kind) {
        (FieldType::String, Kind::Str(_)) | (FieldType::Bool, Kind::Bool(_)) => Ok(()),
        (FieldType::String, _) => wrong("a string", value, at),
        (FieldType::Bool, _) => wrong("a boolean", value, at),
        (FieldType::Seconds, Kind::Int(n)) if *n >= 0 => Ok(()),
        (FieldType::Seconds, Kind::Float(f)) if *f >= 0.0 => Ok(()),
        (FieldType::Seconds, Kind::Int(_) | Kind::Float(_)) => Err(reject(
            format!("`{at}` is negative; Codex cannot make it a duration"),
            &value.span,
        )),
        (FieldType::Seconds, _) => wrong("a number of seconds", value, at),
        (FieldType::Unsigned, Kind::Int(n)) if *n >= 0 => Ok(()),
        (FieldType::Unsigned, _) => wrong("a non-negative integer", value, at),
        (FieldType::Strings | FieldType::EnvVars, Kind::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let ok = matches!(item.kind, Kind::Str(_))
                    || (ty == FieldType::EnvVars && matches!(item.kind, Kind::Table(_)));
                if !ok {
                    return wrong("a string", item, &format!("{at}[{i}]"));
                }
            }
            Ok(())
        }
        (FieldType::Strings | FieldType::EnvVars, _) => wrong("an array", value, at),
        (FieldType::StringTable, Kind::Table(entries)) => {
            for (k, _, v) in entries {
                if !matches!(v.kind, Kind::Str(_)) {
                    return wrong("a string", v, &format!("{at}.{}", toml_key(k)));
                }
            }
            Ok(())
        }
        (FieldType::StringTable | FieldType::TableOfTables, _)
            if !matches!(value.kind, Kind::Table(_)) =>
        {
            wrong("a table", value, at)
        }
        (FieldType::TableOfTables, Kind::Table(entries)) => {
            for (k, _, v) in entries {
                if !matches!(v.kind, Kind::Table(_)) {
                    return wrong("a table", v, &format!("{at}.{}", toml_key(k)));
                }
            }
            Ok(())
        }
        (FieldType::OneOf(options), Kind::Str(s)) if options.contains(&s.as_str()) => Ok(()),
        (FieldType::OneOf(options), Kind::Str(s)) => Err(reject(
            format!("`{at}` is {}, not one of {}", json(s), options.join(", ")),
            &value.span,
        )),
        (FieldType::OneOf(_), _) => wrong("a string", value, at),
        (_, _) => Ok(()),
    }
}

/// A server name as a TOML key: bare when it can be, quoted otherwise.
fn toml_key(name: &str) -> String {
    if !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        name.into()
    } else {
        super::toml_basic_string(name)
    }
}

fn json(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}
