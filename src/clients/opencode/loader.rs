//! A model of how OpenCode 1.18.33 loads the `mcp` block of its config
//! (`$XDG_CONFIG_HOME/opencode/opencode.json`): which servers it starts, which it reaches
//! over the network, which are off, and when it refuses the whole file.
//!
//! Measured with `opencode debug config` (the resolved config as JSON, nothing started) in
//! throwaway `HOME` and XDG directories (2026-11-30). Quirks, each as measured:
//!
//! - **Decoding**: JSONC: `//` and `/* */` comments and trailing commas are accepted. An
//!   empty file is no config at all (no servers).
//! - **Wrong types are fatal for the whole file** ("Configuration is invalid at …", exit 1):
//!   an `mcp` that is not an object, an entry that is not an object or whose `type` is not
//!   `"local"` or `"remote"` (`"stdio"` included), a `command` that is not an array of
//!   strings, an `environment` that is not an object of strings, an `enabled` that is not a
//!   boolean, a `timeout` that is not a number, a remote `url` that is not a string.
//! - **Dropped silently**: unknown keys, `env` included (a local server's variables go in
//!   `environment`).
//! - **Entries**: `command` is one argv array (program first); an empty one is accepted by
//!   the loader but runs nothing. `"enabled": false` keeps the server configured but off.
//! - **Expansion**: `{env:NAME}` is substituted in the file's text from OpenCode's
//!   environment; an unset `NAME` becomes `""` with no warning. `$NAME` and `${NAME}` are not
//!   expanded.
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
    for (name, _, node) in servers {
        if let Err(flaw) = entry(name, node, env, &mut out) {
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

#[allow(
    clippy::too_many_lines,
    reason = "one check per measured OpenCode 1.18.33 field rule, in the order its schema reports them"
)]
fn entry(
    name: &str,
    node: &Node,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut Loaded,
) -> Result<(), (String, Span)> {
    let at = |field: &str| format!("mcp.{name}.{field}");
    if node.entries().is_none() {
        return Err((
            format!("`mcp.{name}` is {}, not an object", node.kind.noun()),
            node.span.clone(),
        ));
    }
    let kind = node.get("type");
    let enabled = match node.get("enabled") {
        None => true,
        Some(Node {
            kind: Kind::Bool(b),
            ..
        }) => *b,
        Some(e) => {
            return Err((
                format!("`{}` is {}, not a boolean", at("enabled"), e.kind.noun()),
                e.span.clone(),
            ));
        }
    };
    if let Some(t) = node.get("timeout")
        && !matches!(t.kind, Kind::Int(_) | Kind::Float(_))
    {
        return Err((
            format!("`{}` is {}, not a number", at("timeout"), t.kind.noun()),
            t.span.clone(),
        ));
    }
    match kind.and_then(Node::as_str) {
        Some("remote") => {
            let url = match node.get("url") {
                Some(u) => u.as_str().ok_or_else(|| {
                    (
                        format!("`{}` is {}, not a string", at("url"), u.kind.noun()),
                        u.span.clone(),
                    )
                })?,
                None => return Err((format!("`{}` is required", at("url")), node.span.clone())),
            };
            if enabled {
                out.remote.push(Remote {
                    name: name.into(),
                    url: substitute(url, "url", env, &mut Vec::new()),
                    span: node.span.clone(),
                });
            } else {
                off(name, node, out);
            }
            Ok(())
        }
        Some("local") => {
            let command = match node.get("command") {
                Some(c) => string_array(c, &at("command"))?,
                None => {
                    return Err((
                        format!("`{}` is required", at("command")),
                        node.span.clone(),
                    ));
                }
            };
            let mut expanded = Vec::new();
            let mut argv = command
                .iter()
                .enumerate()
                .map(|(i, a)| substitute(a, &format!("command[{i}]"), env, &mut expanded));
            let program = argv.next();
            let args: Vec<String> = argv.collect();
            let environment = match node.get("environment") {
                Some(e) => string_map(e, &at("environment"))?,
                None => Default::default(),
            };
            if !enabled {
                off(name, node, out);
                return Ok(());
            }
            let Some(program) = program else {
                out.skipped.push(Skipped {
                    name: name.into(),
                    reason: "`command` is empty, so nothing runs".into(),
                    disabled: false,
                    span: node.get("command").map_or(&node.span, |c| &c.span).clone(),
                });
                return Ok(());
            };
            let mut s = started(name, node, program, args);
            s.env = environment
                .into_iter()
                .map(|(k, v)| {
                    let v = substitute(&v, &format!("environment.{k}"), env, &mut expanded);
                    (k, v)
                })
                .collect();
            s.expanded = expanded;
            note_fields(&mut s, node, &["command", "environment"]);
            if let Some(span) = s.fields.get("command").cloned() {
                s.fields.insert("args".into(), span);
            }
            out.started.push(s);
            Ok(())
        }
        _ => Err((
            format!(
                "`{}` must be \"local\" or \"remote\", not {}",
                at("type"),
                kind.map_or("missing".to_string(), |t| match t.as_str() {
                    Some(s) => serde_json::to_string(s).unwrap_or_default(),
                    None => t.kind.noun().to_string(),
                })
            ),
            kind.map_or(&node.span, |t| &t.span).clone(),
        )),
    }
}

fn off(name: &str, node: &Node, out: &mut Loaded) {
    out.skipped.push(Skipped {
        name: name.into(),
        reason: "`\"enabled\": false`".into(),
        disabled: true,
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
