//! A model of how Gemini CLI 0.61.0 loads the `mcpServers` of its settings file
//! (`~/.gemini/settings.json`): which servers a session starts, which it connects to over
//! the network, and when it refuses the file.
//!
//! Measured with `gemini mcp list` (which starts each server; `GEMINI_CLI_TRUST_WORKSPACE=true`)
//! in a throwaway `HOME` and project, with a recorder as the server command that logs its
//! argv (2026-11-30). Quirks, each as measured:
//!
//! - **Decoding**: `//` and `/* */` comments are stripped; a trailing comma refuses the whole
//!   file (exit 52, "Please fix the configuration file(s)"). A repeated key keeps its last
//!   value.
//! - **Schema errors are printed, not fatal**: an unknown key (`disabled`, `zzz`) or a
//!   wrong-typed value is reported ("Invalid configuration … Error in: mcpServers.x…") and
//!   the server is still listed. What runs then: an unknown key changes nothing (an entry with
//!   `"disabled": true` is started); a number in `args` is passed as its text; a `command`
//!   that is not a string, an `env` value that is not a string, a missing `command` or an
//!   entry that is not an object start nothing; `args` that is not an array crashes
//!   `gemini mcp list` ("server.args?.join is not a function").
//! - **Network servers**: a string `url` or `httpUrl` makes the entry a network server, even
//!   next to a `command`.
//! - **Expansion**: `$NAME`, `${NAME}` and `${NAME:-default}` are expanded in `command`, every
//!   `args` element and every `env` value, from Gemini CLI's environment; an unset `NAME`
//!   without a default stays literal (`$UNSET`, `${UNSET}`). `~` is not expanded.
//! - **Tools**: `includeTools` lists the only tools kept, `excludeTools` hides tools (and wins).
//!
//! Not measured (modelled as the closest measured case, a refusal of the file): a top level
//! or `mcpServers` that is not an object.

use crate::clients::loaded::{
    Kind, Loaded, Node, Rejected, Remote, Skipped, expand_dollar, json_root, note_fields,
    parse_jsonc, started, string_array, string_map,
};

/// What Gemini CLI 0.61.0 does with `bytes`, its settings file `path`. `env` is Gemini
/// CLI's environment, for `$…` expansion.
///
/// Never fails: an unreadable file is a [`Rejected`] verdict, as the client treats it.
pub fn load(path: &str, bytes: &[u8], env: &dyn Fn(&str) -> Option<String>) -> Loaded {
    let mut loaded = Loaded::default();
    let Some(root) = json_root(path, bytes, |t| parse_jsonc(t, 0, false), &mut loaded) else {
        return loaded;
    };
    let Some(servers) = root.get("mcpServers") else {
        return loaded;
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
        if let Err((reason, span)) = entry(name, node, env, &mut loaded) {
            loaded.skipped.push(Skipped {
                name: name.clone(),
                reason,
                disabled: false,
                span,
            });
        }
    }
    loaded.sort();
    loaded
}

fn entry(
    name: &str,
    node: &Node,
    env: &dyn Fn(&str) -> Option<String>,
    loaded: &mut Loaded,
) -> Result<(), (String, crate::clients::loaded::Span)> {
    if node.entries().is_none() {
        return Err((
            format!("the entry is {}, not an object", node.kind.noun()),
            node.span.clone(),
        ));
    }
    for key in ["url", "httpUrl"] {
        if let Some(url) = node.get(key).and_then(Node::as_str) {
            loaded.remote.push(Remote {
                name: name.into(),
                url: url.into(),
                span: node.span.clone(),
            });
            return Ok(());
        }
    }
    let mut expanded = Vec::new();
    let command = match node.get("command") {
        None => return Err(("it has no `command`".into(), node.span.clone())),
        Some(c) => match c.as_str() {
            Some(s) => expand_dollar(s, "command", env, &mut expanded),
            None => {
                return Err((
                    format!("`command` is {}, not a string", c.kind.noun()),
                    c.span.clone(),
                ));
            }
        },
    };
    let mut args = Vec::new();
    if let Some(a) = node.get("args") {
        let Kind::Array(items) = &a.kind else {
            return Err((
                format!("`args` is {}, not an array", a.kind.noun()),
                a.span.clone(),
            ));
        };
        for (i, item) in items.iter().enumerate() {
            let text = match &item.kind {
                Kind::Str(s) => s.clone(),
                Kind::Int(n) => n.to_string(),
                Kind::Float(f) => f.to_string(),
                Kind::Bool(b) => b.to_string(),
                other => {
                    return Err((
                        format!("`args[{i}]` is {}, not a string", other.noun()),
                        item.span.clone(),
                    ));
                }
            };
            args.push(expand_dollar(
                &text,
                &format!("args[{i}]"),
                env,
                &mut expanded,
            ));
        }
    }
    let mut s = started(name, node, command, args);
    if let Some(e) = node.get("env") {
        s.env = string_map(e, "env")?
            .into_iter()
            .map(|(k, v)| {
                let v = expand_dollar(&v, &format!("env.{k}"), env, &mut expanded);
                (k, v)
            })
            .collect();
    }
    if let Some(include) = node.get("includeTools") {
        s.enabled_tools = Some(string_array(include, "includeTools")?);
    }
    if let Some(exclude) = node.get("excludeTools") {
        s.disabled_tools = string_array(exclude, "excludeTools")?;
    }
    s.cwd = node.get("cwd").and_then(Node::as_str).map(String::from);
    s.expanded = expanded;
    note_fields(
        &mut s,
        node,
        &[
            "command",
            "args",
            "env",
            "cwd",
            "includeTools",
            "excludeTools",
        ],
    );
    if let Some(span) = s.fields.get("includeTools").cloned() {
        s.fields.insert("enabled_tools".into(), span);
    }
    if let Some(span) = s.fields.get("excludeTools").cloned() {
        s.fields.insert("disabled_tools".into(), span);
    }
    loaded.started.push(s);
    Ok(())
}
