//! A model of how Copilot CLI 1.0.102 loads `$COPILOT_HOME/mcp-config.json`: which servers
//! it starts, which it reaches over the network, which entries vanish, and when it refuses
//! the file.
//!
//! Measured with `copilot mcp list --json` (every field of every server it keeps, without
//! starting them) in a throwaway `HOME`, `COPILOT_OFFLINE=true` (2026-11-30), and proven on
//! seeded variants by `tests/clients/differential_copilot.rs` (2026-12-01; the file is read by the
//! native `runtime.node`, so measurement is the only reference). Quirks, each as measured:
//!
//! - **Decoding**: `//` and `/* */` comments and trailing commas are accepted (the export
//!   still writes strict JSON); any number of leading byte order marks is skipped; bytes
//!   that are not UTF-8 read as U+FFFD; a repeated key keeps its last value. Any syntax error
//!   reads as a file without `mcpServers`.
//! - **File shape**: a missing `mcpServers` (an empty file, `{}`, a top level that is not an
//!   object) or a non-object one makes the CLI exit 1 ("mcpServers: Required", "Expected
//!   object"): the file is refused.
//! - **Entries vanish silently** (no warning) when they are not an object, when the name is
//!   empty, or when a field their kind reads has the wrong type (`null` included): `type`
//!   not one of `stdio`, `local`, `http`, `sse`; `tools` not an array of strings; `timeout`
//!   not a positive integer; `disabled` not a boolean; for a command server `command`
//!   missing or not a string, `args` not an array of strings, `env` not an object of
//!   strings, `cwd` not a string; for a network server `url` not a URL, `headers` not an
//!   object of strings. The other kind's fields and unknown keys are ignored. An empty
//!   `command` is kept. A missing `args` is `[]`.
//! - **Network servers**: `type` `http` or `sse` with a `url`; without `type`, a `url` and no
//!   `command` makes an `http` server. `type: "stdio"` with a `url` is a command server.
//! - **Tools**: `tools` lists the tools kept; one `"*"` (the default) keeps all.
//! - **Off**: `"disabled": true` is listed (even as `"enabled": true`) but not started (facts,
//!   "Verified against public reports"), a network server too.
//! - **Expansion**: `${NAME}` in `args` and `env` is expanded at spawn, an unset one stays
//!   literal (facts, "Registration"; `mcp list` shows the values unexpanded, so the
//!   differential test does not judge it). `command` is not modelled as expanded.
//!
//! Not modelled: the parser's other leniencies (measured: a missing comma between members,
//! `5.`, Unicode spaces such as U+00A0 are accepted; `+5` drops the field, a hexadecimal
//! number is not a number).

use crate::clients::loaded::{
    Kind, Loaded, Node, Rejected, Remote, Skipped, Span, is_url, json_root, note_fields,
    parse_jsonc, started, string_array, string_map,
};

/// What Copilot CLI 1.0.102 does with `bytes`, its `mcp-config.json` at `path`. `env` is
/// Copilot's environment, for `${…}` expansion.
///
/// Never fails: an unreadable file is a [`Rejected`] verdict, as the client treats it.
pub fn load(path: &str, bytes: &[u8], env: &dyn Fn(&str) -> Option<String>) -> Loaded {
    let mut loaded = Loaded::default();
    let text = decoded(bytes);
    let Some(root) = json_root(
        path,
        text.as_bytes(),
        |t| parse_jsonc(t, 0, true),
        &mut loaded,
    ) else {
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
    for (name, key, node) in servers {
        if let Err((reason, span, disabled)) = entry(name, key, node, env, &mut loaded) {
            loaded.skipped.push(Skipped {
                name: name.clone(),
                reason,
                disabled,
                key: key.clone(),
                span,
            });
        }
    }
    loaded.sort();
    loaded
}

/// `bytes` as Copilot CLI 1.0.102 reads them (measured by `tests/clients/differential_copilot.rs`):
/// bytes that are not UTF-8 as U+FFFD, and every byte order mark before the first value
/// skipped, between spaces too. Marks after the first become three spaces (the same
/// length), so spans keep their offsets; [`json_root`] drops the first, as for every client.
fn decoded(bytes: &[u8]) -> String {
    const BOM: char = crate::decode::BOM;
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    let start = if text.starts_with(BOM) {
        BOM.len_utf8()
    } else {
        0
    };
    let rest = text[start..].trim_start_matches(|c: char| c.is_whitespace() || c == BOM);
    let end = text.len() - rest.len();
    let lead = text[start..end].replace(BOM, "   ");
    text.replace_range(start..end, &lead);
    text
}

/// The types Copilot CLI accepts.
const TYPES: [&str; 4] = ["stdio", "local", "http", "sse"];

#[allow(
    clippy::too_many_lines,
    reason = "one check per measured Copilot CLI 1.0.102 field rule, common fields first, then \
              those of the entry's kind"
)]
fn entry(
    name: &str,
    key: &Span,
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
    if name.is_empty() {
        return Err(flaw(("an empty name is dropped".into(), node.span.clone())));
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
        && !matches!(t.kind, Kind::Int(n) if n > 0)
        && !matches!(t.kind, Kind::Float(f) if f >= 1.0 && f.fract() == 0.0)
    {
        return Err(flaw((
            format!("`timeout` is {}, not a positive integer", describe(t)),
            t.span.clone(),
        )));
    }
    let tools = match node.get("tools") {
        Some(t) => Some(string_array(t, "tools").map_err(flaw)?),
        None => None,
    };
    let disabled = match node.get("disabled") {
        None => false,
        Some(Node {
            kind: Kind::Bool(b),
            ..
        }) => *b,
        Some(d) => {
            return Err(flaw((
                format!("`disabled` is {}, not a boolean", d.kind.noun()),
                d.span.clone(),
            )));
        }
    };
    let off = |node: &Node| {
        let d = node.get("disabled").map_or(&node.span, |d| &d.span);
        Err(("`\"disabled\": true`".into(), d.clone(), true))
    };
    if matches!(kind, Some("http" | "sse")) {
        let url = match node.get("url") {
            Some(u) => match u.as_str() {
                Some(text) if is_url(text) => text,
                _ => {
                    return Err(flaw((
                        format!("`url` is {}, not a URL", describe(u)),
                        u.span.clone(),
                    )));
                }
            },
            None => {
                return Err(flaw((
                    "a network server needs a `url`".into(),
                    node.span.clone(),
                )));
            }
        };
        if let Some(h) = node.get("headers") {
            string_map(h, "headers").map_err(flaw)?;
        }
        if disabled {
            return off(node);
        }
        loaded.remote.push(Remote {
            name: name.into(),
            url: url.into(),
            key: key.clone(),
            span: node.span.clone(),
        });
        return Ok(());
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
    let mut s = started(name, key, node, command, args);
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
    s.cwd = match node.get("cwd") {
        None => None,
        Some(c) => Some(c.as_str().map(String::from).ok_or_else(|| {
            flaw((
                format!("`cwd` is {}, not a string", c.kind.noun()),
                c.span.clone(),
            ))
        })?),
    };
    if disabled {
        return off(node);
    }
    s.enabled_tools = tools.filter(|t| !t.iter().any(|x| x == "*"));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &[u8]) -> Loaded {
        load("mcp-config.json", text, &|_| None)
    }

    fn names(l: &Loaded) -> (Vec<&str>, Vec<&str>, Vec<(&str, bool)>) {
        (
            l.started.iter().map(|s| s.name.as_str()).collect(),
            l.remote.iter().map(|s| s.name.as_str()).collect(),
            l.skipped
                .iter()
                .map(|s| (s.name.as_str(), s.disabled))
                .collect(),
        )
    }

    #[test]
    fn wrong_types_of_the_entrys_kind_make_it_vanish() {
        // 1.0.102, `mcp list --json`: timeout 0, -1, 1.5 and null vanished, 5000000000 and
        // 2.0 were kept; cwd 5, disabled "yes", a url "x", headers {"A": 1} vanished; a url
        // of 5 on a stdio entry was ignored; an empty name vanished.
        let l = one(br#"{"mcpServers": {
            "t0": {"command": "/r", "timeout": 0}, "t1": {"command": "/r", "timeout": 1.5},
            "t2": {"command": "/r", "timeout": 5000000000}, "t3": {"command": "/r", "timeout": 2.0},
            "t4": {"command": "/r", "timeout": null}, "c": {"command": "/r", "cwd": 5},
            "d": {"command": "/r", "disabled": "yes"}, "u": {"type": "http", "url": "x"},
            "h": {"type": "sse", "url": "http://h/", "headers": {"A": 1}},
            "s": {"type": "stdio", "command": "/r", "url": 5}, "": {"command": "/r"}}}"#);
        let (started, remote, skipped) = names(&l);
        assert_eq!(started, ["s", "t2", "t3"]);
        assert!(remote.is_empty());
        assert_eq!(skipped.len(), 8, "{skipped:?}");
        assert!(skipped.iter().all(|(_, off)| !off));
    }

    #[test]
    fn leading_byte_order_marks_are_skipped_and_bad_bytes_read_as_replacement() {
        // 1.0.102: three marks, or two with a space between, and an `args` byte 0xff read.
        let l = one(b"\xef\xbb\xbf \xef\xbb\xbf\xef\xbb\xbf{\"mcpServers\": {\"a\": {\"command\": \"/r\", \"args\": [\"a\xffb\"]}}}");
        assert!(l.rejected.is_empty(), "{l:?}");
        assert_eq!(l.started[0].args, ["a\u{fffd}b"]);
    }

    #[test]
    fn a_disabled_network_server_is_off() {
        // 1.0.102: listed with "disabled": true, like a command server.
        let l = one(
            br#"{"mcpServers": {"b": {"type": "http", "url": "http://h/", "disabled": true}}}"#,
        );
        assert_eq!(names(&l).2, [("b", true)]);
    }
}
