//! A model of how OpenCode 1.18.33 loads the `mcp` block of its config
//! (`$XDG_CONFIG_HOME/opencode/opencode.json`): which servers it starts, which it reaches
//! over the network, which are off, and when it refuses the whole file.
//!
//! Measured with `opencode debug config` (the resolved config as JSON, nothing started) in
//! throwaway `HOME` and XDG directories (2026-11-30), with the schema in the binary as the
//! reference (`ConfigMCPV1`: `McpLocalConfig`, `McpRemoteConfig`). Quirks, each as measured:
//!
//! - **Decoding**: JSONC: `//` and `/* */` comments and trailing commas are accepted. An
//!   empty file is no config at all (no servers).
//! - **Wrong types are fatal for the whole file** ("Configuration is invalid at …", exit 1):
//!   an `mcp` that is not an object, an entry that is not an object, or an entry that is
//!   neither a valid local nor a valid remote server and has no boolean `enabled`. Valid
//!   local: `type: "local"`, `command` an array of strings, optional `environment` (an
//!   object of strings), `cwd` (a string), `enabled` (a boolean), `timeout` (a positive
//!   integer). Valid remote: `type: "remote"`, `url` a string (not checked as a URL),
//!   optional `headers` (an object of strings), `oauth` (`false` or an object of its typed
//!   fields), `enabled`, `timeout`. `null` is a wrong type.
//! - **Ignored**: an entry that is neither but has a boolean `enabled` is kept as
//!   `{"enabled": …}` and ignored at startup (no `type`), so `"type": "stdio"` next to the
//!   export's `"enabled": true` starts nothing and refuses nothing.
//! - **Dropped silently**: unknown keys, `env` included (a local server's variables go in
//!   `environment`).
//! - **Entries**: `command` is one argv array (program first); an empty one is accepted by
//!   the loader but runs nothing. `cwd` is resolved from the project directory.
//!   `"enabled": false` keeps the server configured but off.
//! - **Expansion**: `{env:NAME}` is substituted in the file's text from OpenCode's
//!   environment; an unset `NAME` becomes `""` with no warning. `$NAME` and `${NAME}` are not
//!   expanded.
//! - Measured again on seeded variants by `tests/clients/differential_opencode.rs` (2026-12-01),
//!   which found the third form, `cwd`, `oauth`, `headers` and the positive `timeout`.
//!
//! Not modelled: wrong types outside `mcp` (they refuse the file too, and are not this
//! crate's business).

use crate::clients::loaded::{
    Kind, Loaded, Node, Rejected, Remote, Skipped, Source, Span, json_root, note_fields,
    parse_jsonc, started, string_array, string_map,
};

/// What OpenCode 1.18.33 does with `bytes`, its config file `path`. `env` is OpenCode's
/// environment, for `{env:…}`.
///
/// Never fails: an unreadable file is a [`Rejected`] verdict, as the client treats it.
pub fn load(path: &str, bytes: &[u8], env: &dyn Fn(&str) -> Option<String>) -> Loaded {
    let mut loaded = Loaded::default();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        loaded.sources.push(Source {
            path: path.into(),
            text: String::from_utf8_lossy(bytes).into_owned().into(),
        });
        return loaded;
    }
    let Some(root) = json_root(path, bytes, |t| parse_jsonc(t, 0, true), &mut loaded) else {
        return loaded;
    };
    let Some(mcp) = root.get("mcp") else {
        return loaded;
    };
    let reject = |(reason, span): (String, Span), loaded: &mut Loaded| {
        loaded.rejected.push(Rejected {
            scope: "the file".into(),
            reason,
            span: Some(span),
        });
    };
    let Some(servers) = mcp.entries() else {
        reject(
            (
                format!("`mcp` must be an object, not {}", mcp.kind.noun()),
                mcp.span.clone(),
            ),
            &mut loaded,
        );
        return loaded;
    };
    let mut out = Loaded::default();
    for (name, key, node) in servers {
        if let Err(flaw) = entry(name, key, node, env, &mut out) {
            reject(flaw, &mut loaded);
            loaded.started.clear();
            loaded.remote.clear();
            loaded.skipped.clear();
            return loaded;
        }
    }
    loaded.started = out.started;
    loaded.remote = out.remote;
    loaded.skipped = out.skipped;
    loaded.sort();
    loaded
}

/// One entry: a local or a remote server, or, when it is neither but has a boolean
/// `enabled`, the schema's third form `{"enabled": …}`, which OpenCode 1.18.33 keeps (every
/// other key dropped) and then ignores at startup ("Ignoring MCP config entry without type"):
/// measured by `tests/clients/differential_opencode.rs` (2026-12-01) and in the binary's
/// `mcp: Record(String, Union([Local | Remote, Struct({enabled: Boolean})]))`.
fn entry(
    name: &str,
    key: &Span,
    node: &Node,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut Loaded,
) -> Result<(), (String, Span)> {
    if node.entries().is_none() {
        return Err((
            format!("`mcp.{name}` is {}, not an object", node.kind.noun()),
            node.span.clone(),
        ));
    }
    let server = match node.get("type").and_then(Node::as_str) {
        Some("local") => local(name, key, node, env),
        Some("remote") => remote(name, key, node, env),
        _ => Err((
            format!(
                "`mcp.{name}.type` must be \"local\" or \"remote\", not {}",
                node.get("type")
                    .map_or("missing".to_string(), |t| match t.as_str() {
                        Some(s) => serde_json::to_string(s).unwrap_or_default(),
                        None => t.kind.noun().to_string(),
                    })
            ),
            node.get("type").map_or(&node.span, |t| &t.span).clone(),
        )),
    };
    match server {
        Ok(Server::Local(s)) => out.started.push(s),
        Ok(Server::Remote(r)) => out.remote.push(r),
        Ok(Server::Off) => off(name, key, node, out),
        Ok(Server::Nothing(reason, span)) => out.skipped.push(Skipped {
            name: name.into(),
            reason,
            disabled: false,
            key: key.clone(),
            span,
        }),
        Err(flaw) => match node.get("enabled") {
            Some(Node {
                kind: Kind::Bool(_),
                span,
            }) => out.skipped.push(Skipped {
                name: name.into(),
                reason: format!(
                    "{}; with a boolean `enabled` OpenCode keeps only `enabled` and ignores \
                     the entry (no `type`)",
                    flaw.0
                ),
                disabled: false,
                key: key.clone(),
                span: span.clone(),
            }),
            _ => return Err(flaw),
        },
    }
    Ok(())
}

/// What a valid local or remote entry is.
enum Server {
    Local(crate::clients::loaded::Started),
    Remote(Remote),
    Off,
    Nothing(String, Span),
}

/// The fields both forms share: `enabled` (a boolean) and `timeout` (a positive integer).
fn enabled(name: &str, node: &Node) -> Result<bool, (String, Span)> {
    if let Some(t) = node.get("timeout")
        && !matches!(t.kind, Kind::Int(n) if n > 0)
        && !matches!(t.kind, Kind::Float(f) if f >= 1.0 && f.fract() == 0.0)
    {
        return Err((
            format!("`mcp.{name}.timeout` is not a positive integer"),
            t.span.clone(),
        ));
    }
    match node.get("enabled") {
        None => Ok(true),
        Some(Node {
            kind: Kind::Bool(b),
            ..
        }) => Ok(*b),
        Some(e) => Err((
            format!("`mcp.{name}.enabled` is {}, not a boolean", e.kind.noun()),
            e.span.clone(),
        )),
    }
}

fn local(
    name: &str,
    key: &Span,
    node: &Node,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Server, (String, Span)> {
    let at = |field: &str| format!("mcp.{name}.{field}");
    let on = enabled(name, node)?;
    let command = match node.get("command") {
        Some(c) => string_array(c, &at("command"))?,
        None => {
            return Err((
                format!("`{}` is required", at("command")),
                node.span.clone(),
            ));
        }
    };
    let environment = match node.get("environment") {
        Some(e) => string_map(e, &at("environment"))?,
        None => Default::default(),
    };
    let cwd = match node.get("cwd") {
        Some(c) => Some(c.as_str().ok_or_else(|| {
            (
                format!("`{}` is {}, not a string", at("cwd"), c.kind.noun()),
                c.span.clone(),
            )
        })?),
        None => None,
    };
    if !on {
        return Ok(Server::Off);
    }
    let mut expanded = Vec::new();
    let mut argv = command
        .iter()
        .enumerate()
        .map(|(i, a)| substitute(a, &format!("command[{i}]"), env, &mut expanded));
    let Some(program) = argv.next() else {
        let span = node.get("command").map_or(&node.span, |c| &c.span).clone();
        return Ok(Server::Nothing(
            "`command` is empty, so nothing runs".into(),
            span,
        ));
    };
    let args: Vec<String> = argv.collect();
    let mut s = started(name, key, node, program, args);
    s.env = environment
        .into_iter()
        .map(|(k, v)| {
            let v = substitute(&v, &format!("environment.{k}"), env, &mut expanded);
            (k, v)
        })
        .collect();
    s.cwd = cwd.map(|c| substitute(c, "cwd", env, &mut expanded));
    s.expanded = expanded;
    note_fields(&mut s, node, &["command", "environment", "cwd"]);
    if let Some(span) = s.fields.get("command").cloned() {
        s.fields.insert("args".into(), span);
    }
    Ok(Server::Local(s))
}

fn remote(
    name: &str,
    key: &Span,
    node: &Node,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Server, (String, Span)> {
    let at = |field: &str| format!("mcp.{name}.{field}");
    let on = enabled(name, node)?;
    let url = match node.get("url") {
        Some(u) => u.as_str().ok_or_else(|| {
            (
                format!("`{}` is {}, not a string", at("url"), u.kind.noun()),
                u.span.clone(),
            )
        })?,
        None => return Err((format!("`{}` is required", at("url")), node.span.clone())),
    };
    if let Some(h) = node.get("headers") {
        string_map(h, &at("headers"))?;
    }
    if let Some(o) = node.get("oauth")
        && o.kind != Kind::Bool(false)
    {
        oauth(o, &at("oauth"))?;
    }
    if !on {
        return Ok(Server::Off);
    }
    Ok(Server::Remote(Remote {
        name: name.into(),
        url: substitute(url, "url", env, &mut Vec::new()),
        key: key.clone(),
        span: node.span.clone(),
    }))
}

/// `oauth`: `false`, or an object of `clientId`, `clientSecret`, `scope`, `redirectUri`
/// (strings) and `callbackPort` (an integer from 1 to 65535), each optional.
fn oauth(node: &Node, at: &str) -> Result<(), (String, Span)> {
    let Some(fields) = node.entries() else {
        return Err((
            format!("`{at}` is {}, not `false` or an object", node.kind.noun()),
            node.span.clone(),
        ));
    };
    for (key, _, value) in fields {
        let ok = match key.as_str() {
            "clientId" | "clientSecret" | "scope" | "redirectUri" => value.as_str().is_some(),
            "callbackPort" => matches!(value.kind, Kind::Int(1..=65535)),
            _ => true,
        };
        if !ok {
            return Err((
                format!("`{at}.{key}` has the wrong type"),
                value.span.clone(),
            ));
        }
    }
    Ok(())
}

fn off(name: &str, key: &Span, node: &Node, out: &mut Loaded) {
    out.skipped.push(Skipped {
        name: name.into(),
        reason: "`\"enabled\": false`".into(),
        disabled: true,
        key: key.clone(),
        span: node.get("enabled").map_or(&node.span, |e| &e.span).clone(),
    });
}

/// OpenCode's `{env:NAME}` substitution (an unset `NAME` becomes `""`). Records `field` in
/// `expanded` when the value holds one.
fn substitute(
    value: &str,
    field: &str,
    env: &dyn Fn(&str) -> Option<String>,
    expanded: &mut Vec<String>,
) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    let mut any = false;
    while let Some(start) = rest.find("{env:") {
        let Some(len) = rest[start + 5..].find('}') else {
            break;
        };
        any = true;
        out.push_str(&rest[..start]);
        out.push_str(&env(&rest[start + 5..start + 5 + len]).unwrap_or_default());
        rest = &rest[start + 6 + len..];
    }
    out.push_str(rest);
    if any {
        expanded.push(field.to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Loaded {
        load("opencode.json", text.as_bytes(), &|n| {
            (n == "XV_SET").then(|| "setval".to_string())
        })
    }

    #[test]
    fn an_invalid_entry_with_a_boolean_enabled_is_kept_as_enabled_only_and_ignored() {
        // 1.18.33, `opencode debug config`: {"type": "stdio", "command": ["x"], "enabled":
        // true} resolved to {"enabled": true} (exit 0); without `enabled` it refused the file.
        let l = one(
            r#"{"mcp": {"a": {"type": "stdio", "command": ["x"], "enabled": true},
                        "b": {"type": "local", "command": 5, "enabled": false},
                        "c": {"enabled": true}}}"#,
        );
        assert!(l.rejected.is_empty() && l.started.is_empty(), "{l:?}");
        let skipped: Vec<(&str, bool)> = l
            .skipped
            .iter()
            .map(|s| (s.name.as_str(), s.disabled))
            .collect();
        assert_eq!(skipped, [("a", false), ("b", false), ("c", false)]);
        let l = one(r#"{"mcp": {"a": {"type": "stdio", "command": ["x"]}}}"#);
        assert_eq!(l.rejected.len(), 1);
    }

    #[test]
    fn cwd_timeout_headers_and_oauth_are_typed() {
        // 1.18.33: "Expected a value greater than 0, got 0", "Expected an integer, got 1.5",
        // "Expected string | undefined, got null mcp.a.cwd", "… got 5 mcp.d.oauth.clientId".
        for bad in [
            r#""timeout": 0"#,
            r#""timeout": 1.5"#,
            r#""cwd": null"#,
            r#""cwd": 5"#,
        ] {
            let text =
                format!(r#"{{"mcp": {{"a": {{"type": "local", "command": ["x"], {bad}}}}}}}"#);
            assert_eq!(one(&text).rejected.len(), 1, "{bad}");
        }
        for bad in [
            r#""headers": {"A": 1}"#,
            r#""oauth": {"clientId": 5}"#,
            r#""oauth": true"#,
        ] {
            let text = format!(r#"{{"mcp": {{"a": {{"type": "remote", "url": "x", {bad}}}}}}}"#);
            assert_eq!(one(&text).rejected.len(), 1, "{bad}");
        }
        let l = one(
            r#"{"mcp": {"a": {"type": "local", "command": ["x"], "cwd": "{env:XV_SET}/d", "timeout": 2.0},
                        "b": {"type": "remote", "url": "x", "oauth": false, "headers": {"A": "b"}}}}"#,
        );
        assert_eq!(l.started[0].cwd.as_deref(), Some("setval/d"));
        assert_eq!(l.remote[0].url, "x");
    }
}
