//! A model of how Copilot CLI 1.0.102 loads `$COPILOT_HOME/mcp-config.json`: which servers
//! it starts, which it reaches over the network, which entries vanish, and when it refuses
//! the file.
//!
//! Measured with `copilot mcp list --json` (every field of every server it keeps, without
//! starting them) in a throwaway `HOME`, `COPILOT_OFFLINE=true` (2026-11-30). Quirks, each as
//! measured:
//!
//! - **Decoding**: `//` and `/* */` comments and trailing commas are accepted (the export
//!   still writes strict JSON); one leading byte order mark is accepted; a repeated key keeps
//!   its last value.
//! - **File shape**: a missing `mcpServers` (an empty file, `{}`) or a non-object one makes
//!   the CLI exit 1 ("mcpServers: Required", "Expected object"): the file is refused.
//! - **Entries vanish silently** (no warning) when they are not an object, when `type` is not
//!   one of `stdio`, `local`, `http`, `sse`, when `command` is missing or not a string, when
//!   `args` is not an array of strings, `env` not an object of strings (`null` included),
//!   `tools` not an array of strings, or `timeout` not a number. An empty `command` is kept.
//!   Unknown keys are ignored. A missing `args` is `[]`.
//! - **Network servers**: `type` `http` or `sse` with a string `url`; without `type`, a `url`
//!   and no `command` makes an `http` server. `type: "stdio"` with a `url` is a command server.
//! - **Tools**: `tools` lists the tools kept; `["*"]` (the default) keeps all.
//! - **Off**: `"disabled": true` is listed (even as `"enabled": true`) but not started (facts,
//!   "Verified against public reports").
//! - **Expansion**: `${NAME}` in `args` and `env` is expanded at spawn, an unset one stays
//!   literal (facts, "Registration"; `mcp list` shows the values unexpanded). `command` is
//!   not modelled as expanded.

use crate::clients::loaded::{
    Kind, Loaded, Node, Rejected, Remote, Skipped, Span, json_root, note_fields, parse_jsonc,
    started, string_array, string_map,
};

/// What Copilot CLI 1.0.102 does with `bytes`, its `mcp-config.json` at `path`. `env` is
/// Copilot's environment, for `${…}` expansion.
///
/// Never fails: an unreadable file is a [`Rejected`] verdict, as the client treats it.
pub fn load(path: &str, bytes: &[u8], env: &dyn Fn(&str) -> Option<String>) -> Loaded {
    let mut loaded = Loaded::default();
    let Some(root) = json_root(path, bytes, |t| parse_jsonc(t, 0, true), &mut loaded) else {
        return loaded;
    };
    let servers = match root.get("mcpServers") {
        None => {
            loaded.rejected.push(Rejected {
                scope: "the file".into(),
                reason: "`mcpServers` is required".into(),
                span: Some(root.span.clone()),
            });
            return loaded;
        }
        Some(s) => s,
    };
    let Some(servers) = servers.entries() else {
        loaded.rejected.push(Rejected {
            scope: "the file".into(),
            reason: format!(
                "`mcpServers` must be an object, not {}",
                servers.kind.noun()
            ),
            span: Some(servers.span.clone()),
        });
        return loaded;
    };
    for (name, _, node) in servers {
        if let Err((reason, span, disabled)) = entry(name, node, env, &mut loaded) {
            loaded.skipped.push(Skipped {
                name: name.clone(),
                reason,
                disabled,
                span,
            });
        }
    }
    loaded.sort();
    loaded
}

/// The types Copilot CLI accepts.
const TYPES: [&str; 4] = ["stdio", "local", "http", "sse"];

fn entry(
    name: &str,
    node: &Node,
    env: &dyn Fn(&str) -> Option<String>,
    loaded: &mut Loaded,
) -> Result<(), (String, Span, bool)> {
    let flaw = |(reason, span): (String, Span)| (reason, span, false);
    if node.entries().is_none() {
        return Err(flaw((
            format!("the entry is {}, not an object", node.kind.noun()),
            node.span.clone(),
        )));
    }
    let kind = match node.get("type") {
        None if node.get("url").is_some() && node.get("command").is_none() => Some("http"),
        None => None,
        Some(t) => match t.as_str() {
            Some(k) if TYPES.contains(&k) => Some(k),
            _ => {
                return Err(flaw((
                    format!("`type` is {}, not one of {TYPES:?}", describe(t)),
                    t.span.clone(),
                )));
            }
        },
    };
    if let Some(t) = node.get("timeout")
        && !matches!(t.kind, Kind::Int(_) | Kind::Float(_))
    {
        return Err(flaw((
            format!("`timeout` is {}, not a number", t.kind.noun()),
            t.span.clone(),
        )));
    }
    let tools = match node.get("tools") {
        Some(t) => Some(string_array(t, "tools").map_err(flaw)?),
        None => None,
    };
    if matches!(kind, Some("http" | "sse")) {
        return match node.get("url").and_then(Node::as_str) {
            Some(url) => {
                loaded.remote.push(Remote {
                    name: name.into(),
                    url: url.into(),
                    span: node.span.clone(),
                });
                Ok(())
            }
            None => Err(flaw((
                "a network server needs a string `url`".into(),
                node.span.clone(),
            ))),
        };
    }
    let command = match node.get("command") {
        None => return Err(flaw(("it has no `command`".into(), node.span.clone()))),
        Some(c) => c.as_str().map(String::from).ok_or_else(|| {
            flaw((
                format!("`command` is {}, not a string", c.kind.noun()),
                c.span.clone(),
            ))
        })?,
    };
    let mut expanded = Vec::new();
    let args = match node.get("args") {
        Some(a) => string_array(a, "args").map_err(flaw)?,
        None => Vec::new(),
    };
    let args = args
        .iter()
        .enumerate()
        .map(|(i, a)| expand(a, &format!("args[{i}]"), env, &mut expanded))
        .collect();
    let mut s = started(name, node, command, args);
    if let Some(e) = node.get("env") {
        s.env = string_map(e, "env")
            .map_err(flaw)?
            .into_iter()
            .map(|(k, v)| {
                let v = expand(&v, &format!("env.{k}"), env, &mut expanded);
                (k, v)
            })
            .collect();
    }
    if let Some(d) = node.get("disabled")
        && d.kind == Kind::Bool(true)
    {
        return Err(("`\"disabled\": true`".into(), d.span.clone(), true));
    }
    s.enabled_tools = tools.filter(|t| !t.iter().any(|x| x == "*"));
    s.cwd = node.get("cwd").and_then(Node::as_str).map(String::from);
    s.expanded = expanded;
    note_fields(&mut s, node, &["command", "args", "env", "cwd", "tools"]);
    if let Some(span) = s.fields.get("tools").cloned() {
        s.fields.insert("enabled_tools".into(), span);
    }
    loaded.started.push(s);
    Ok(())
}

fn describe(node: &Node) -> String {
    match node.as_str() {
        Some(s) => serde_json::to_string(s).unwrap_or_default(),
        None => node.kind.noun().to_string(),
    }
}

/// Copilot's `${NAME}` expansion at spawn: a set `NAME` is replaced, an unset one stays.
fn expand(
    value: &str,
    field: &str,
    env: &dyn Fn(&str) -> Option<String>,
    expanded: &mut Vec<String>,
) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    let mut any = false;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        any = true;
        out.push_str(&rest[..start]);
        let var = &rest[start + 2..start + 2 + len];
        match env(var) {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[start..start + 3 + len]),
        }
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    if any {
        expanded.push(field.to_string());
    }
    out
}
