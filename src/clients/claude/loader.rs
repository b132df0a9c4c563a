//! A model of how Claude Code 2.1.197 loads its registration files: which MCP servers a
//! session started in a project directory runs, which entries it skips, and which files or
//! scopes it refuses.
//!
//! Files ([`ClaudeFile`]): a project's `.mcp.json` (project scope), and the user's
//! `~/.claude.json`, which holds the user scope (`mcpServers`) and one local scope per
//! project (`projects.<absolute project dir>.mcpServers`). For one project, a local server
//! wins over a project server of the same name, which wins over a user server.
//!
//! Every rule below was measured with `claude mcp list` (which starts each server for a
//! health check) in a throwaway `HOME` and project, with a recorder as the server command
//! that logs its argv, environment and working directory (2026-11-30); `tests/clients/differential.rs`
//! replays generated variants against the real client. Quirks, each as measured:
//!
//! - **Decoding**: one leading UTF-8 byte order mark is accepted ([`crate::decode`]); the file
//!   must otherwise be strict JSON (`JSON.parse`: no comments, no trailing commas), or the
//!   whole file is refused ("MCP config is not a valid JSON"). A repeated key keeps its last
//!   value. CRLF line ends are whitespace.
//! - **File shape**: a `.mcp.json` that is not an object, or whose `mcpServers` is missing
//!   or not an object, is refused as a whole. In `~/.claude.json` a missing `mcpServers` means
//!   no user servers; a non-object one refuses the user scope only (local scopes still load);
//!   a non-object `projects.<dir>.mcpServers` refuses that local scope only; a non-object
//!   `projects` is ignored. Project keys match the directory exactly (a trailing `/` does not).
//! - **Entries**: a server entry that is not an object is skipped with a warning. A `type`
//!   that is not a string is skipped ("type: expected \"stdio\""); an unknown string is
//!   skipped ("unknown MCP server type"); `"sse"`, `"http"` and `"ws"` need a string `url`
//!   (else skipped) and make a network server. Without `type`, or with `"stdio"`, the entry
//!   is a command: `command` must be a non-empty string, `args` (when present) an array of
//!   strings, `env` (when present) an object of strings; `null` counts as present and wrong.
//!   Any violation skips the entry only. Other keys, `url`, `cwd`, `enabled`, `disabled` and
//!   `description` included, are ignored: an entry with `"enabled": false` is started.
//! - **Expansion**: `${NAME}` and `${NAME:-default}` are expanded in `command`, every `args`
//!   element and every `env` value, from Claude Code's own environment; an unset `NAME`
//!   without a default stays literal (with a "Missing environment variables" warning, and the
//!   server still starts).
//! - **Processes**: every command server runs in the project directory, with Claude Code's
//!   environment plus the entry's `env`.

use std::collections::BTreeMap;

use crate::clients::loaded::{
    Kind, Loaded, Node, Rejected, Remote, Skipped, Source, Span, Started, parse_json,
};
use crate::decode::decode_utf8;

/// The keys of a server entry Claude Code 2.1.197 reads (see the module docs, "Entries"):
/// every other key (`description`, `cwd`, `enabled`, …) is ignored, so two entries that
/// differ only in those run the same server.
pub const ENTRY_KEYS: [&str; 5] = ["type", "command", "args", "env", "url"];

/// Which registration file of Claude Code the bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaudeFile {
    /// A project's `.mcp.json`: `{"mcpServers": {…}}`.
    ProjectMcpJson,
    /// The user's `~/.claude.json`: user scope `mcpServers`, local scopes under `projects`.
    UserConfig,
}

impl ClaudeFile {
    /// Tells the two apart by content: a JSON object with a `projects` key, or without
    /// `mcpServers`, is a `~/.claude.json`; anything else is a `.mcp.json`.
    pub fn detect(text: &str) -> ClaudeFile {
        match serde_json::from_str::<serde_json::Value>(crate::decode::strip_bom(text)) {
            Ok(serde_json::Value::Object(o))
                if o.contains_key("projects") || !o.contains_key("mcpServers") =>
            {
                ClaudeFile::UserConfig
            }
            _ => ClaudeFile::ProjectMcpJson,
        }
    }
}

/// The project directories `~/.claude.json` holds a local scope for (keys of `projects`
/// whose value has an `mcpServers` key), in file order; empty for anything else.
pub fn local_scope_projects(bytes: &[u8]) -> Vec<String> {
    let Ok(text) = decode_utf8(bytes) else {
        return Vec::new();
    };
    let Ok(root) = parse_json(text, 0) else {
        return Vec::new();
    };
    root.get("projects")
        .and_then(Node::entries)
        .map(|projects| {
            projects
                .iter()
                .filter(|(_, _, p)| p.get("mcpServers").is_some())
                .map(|(dir, _, _)| dir.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// What Claude Code 2.1.197 does with `bytes`, the file `path` of kind `file`, in a session
/// started in `project_dir` (absolute, as Claude Code resolves it; `None` checks the user
/// scope of a `~/.claude.json` alone). `env` is Claude Code's environment, for `${…}`.
///
/// Never fails: an unreadable file is a [`Rejected`] verdict, as the client treats it.
pub fn load(
    path: &str,
    bytes: &[u8],
    file: ClaudeFile,
    project_dir: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Loaded {
    load_many(path, bytes, file, &[project_dir], env)
        .pop()
        .expect("one verdict per project")
}

/// [`load`] for each of `project_dirs` in turn (one verdict each, in that order), with the
/// file decoded and parsed once and its text shared: linear in the file's size, however
/// many projects a `~/.claude.json` holds.
pub fn load_many(
    path: &str,
    bytes: &[u8],
    file: ClaudeFile,
    project_dirs: &[Option<&str>],
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<Loaded> {
    let mut first = Loaded::default();
    let each = |loaded: Loaded| vec![loaded; project_dirs.len()];
    let text = match decode_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            first.rejected.push(Rejected {
                scope: "the file".into(),
                reason: format!(
                    "it is not UTF-8 (invalid byte at offset {})",
                    e.valid_up_to()
                ),
                span: None,
            });
            return each(first);
        }
    };
    first.sources.push(Source {
        path: path.into(),
        text: text.into(),
    });
    let root = match parse_json(text, 0) {
        Ok(root) => root,
        Err((message, offset)) => {
            first.rejected.push(Rejected {
                scope: "the file".into(),
                reason: format!("it is not valid JSON: {message}"),
                span: Some(Span {
                    source: 0,
                    range: offset..offset,
                }),
            });
            return each(first);
        }
    };
    if root.entries().is_none() {
        first.rejected.push(Rejected {
            scope: "the file".into(),
            reason: format!("the file must be a JSON object, not {}", root.kind.noun()),
            span: Some(root.span.clone()),
        });
        return each(first);
    }
    project_dirs
        .iter()
        .map(|project_dir| {
            let mut loaded = Loaded {
                sources: first.sources.clone(),
                ..Loaded::default()
            };
            load_root(&root, file, *project_dir, env, &mut loaded);
            loaded
        })
        .collect()
}

/// The servers of the parsed `root` for `project_dir`, into `loaded`.
fn load_root(
    root: &Node,
    file: ClaudeFile,
    project_dir: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    loaded: &mut Loaded,
) {
    let mut servers: BTreeMap<String, Entry<'_>> = BTreeMap::new();
    match file {
        ClaudeFile::ProjectMcpJson => {
            scope(
                root,
                "mcpServers",
                "the file",
                true,
                &mut servers,
                &mut loaded.rejected,
                &root.span,
            );
        }
        ClaudeFile::UserConfig => {
            scope(
                root,
                "mcpServers",
                "the user scope",
                false,
                &mut servers,
                &mut loaded.rejected,
                &root.span,
            );
            if let Some(dir) = project_dir
                && let Some(project) = root.get("projects").and_then(|p| p.get(dir))
                && project.entries().is_some()
            {
                let what = format!("the local scope of {dir}");
                scope(
                    project,
                    "mcpServers",
                    &what,
                    false,
                    &mut servers,
                    &mut loaded.rejected,
                    &project.span,
                );
            }
        }
    }
    for (name, entry) in servers {
        classify(&name, entry, project_dir, env, loaded);
    }
    loaded.sort();
}

/// A server entry and its key's span.
struct Entry<'n> {
    node: &'n Node,
    key: &'n Span,
}

/// Adds the servers of `parent.<key>` to `servers` (later scopes win), or records the scope
/// as refused. `required`: a missing key refuses the scope (`.mcp.json`) instead of meaning
/// no servers.
fn scope<'n>(
    parent: &'n Node,
    key: &str,
    what: &str,
    required: bool,
    servers: &mut BTreeMap<String, Entry<'n>>,
    rejected: &mut Vec<Rejected>,
    parent_span: &Span,
) {
    match parent.get(key) {
        None if required => rejected.push(Rejected {
            scope: what.into(),
            reason: format!("it has no `{key}` object"),
            span: Some(parent_span.clone()),
        }),
        None => {}
        Some(node) => match node.entries() {
            Some(entries) => {
                for (name, key, value) in entries {
                    servers.insert(name.clone(), Entry { node: value, key });
                }
            }
            None => rejected.push(Rejected {
                scope: what.into(),
                reason: format!("`{key}` must be an object, not {}", node.kind.noun()),
                span: Some(node.span.clone()),
            }),
        },
    }
}

/// The server types that are reached over the network and need a `url`.
const REMOTE_TYPES: [&str; 3] = ["sse", "http", "ws"];

#[allow(
    clippy::too_many_lines,
    reason = "one case per measured Claude Code 2.1.197 quirk, in the order the client checks them; split, the order would be lost"
)]
fn classify(
    name: &str,
    entry: Entry<'_>,
    project_dir: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    loaded: &mut Loaded,
) {
    let (node, name_span) = (entry.node, entry.key);
    let skip = |reason: String, span: &Span, loaded: &mut Loaded| {
        loaded.skipped.push(Skipped {
            name: name.into(),
            reason,
            disabled: false,
            key: name_span.clone(),
            span: span.clone(),
        });
    };
    if node.entries().is_none() {
        return skip(
            format!("the entry is {}, not an object", node.kind.noun()),
            &node.span,
            loaded,
        );
    }
    if let Some(t) = node.get("type") {
        match t.as_str() {
            None => {
                return skip(
                    format!("`type` is {}, not \"stdio\"", t.kind.noun()),
                    &t.span,
                    loaded,
                );
            }
            Some("stdio") => {}
            Some(kind) if REMOTE_TYPES.contains(&kind) => {
                return match node.get("url") {
                    Some(Node {
                        kind: Kind::Str(url),
                        ..
                    }) => loaded.remote.push(Remote {
                        name: name.into(),
                        url: url.clone(),
                        key: name_span.clone(),
                        span: node.span.clone(),
                    }),
                    Some(u) => skip(
                        format!("`url` is {}, not a string", u.kind.noun()),
                        &u.span,
                        loaded,
                    ),
                    None => skip(format!("a `{kind}` server needs a `url`"), &t.span, loaded),
                };
            }
            Some(other) => {
                return skip(
                    format!("unknown server type {}", json(other)),
                    &t.span,
                    loaded,
                );
            }
        }
    }
    let mut fields = BTreeMap::new();
    let mut expanded = Vec::new();
    let command = match node.get("command") {
        Some(Node {
            kind: Kind::Str(c),
            span,
        }) if !c.is_empty() => {
            fields.insert("command".to_string(), span.clone());
            expand(c, "command", env, &mut expanded)
        }
        Some(Node {
            kind: Kind::Str(_),
            span,
        }) => return skip("`command` is empty".into(), span, loaded),
        Some(c) => {
            return skip(
                format!("`command` is {}, not a string", c.kind.noun()),
                &c.span,
                loaded,
            );
        }
        None => return skip("it has no `command`".into(), &node.span, loaded),
    };
    let mut args = Vec::new();
    if let Some(a) = node.get("args") {
        let Kind::Array(items) = &a.kind else {
            return skip(
                format!("`args` is {}, not an array", a.kind.noun()),
                &a.span,
                loaded,
            );
        };
        for (i, item) in items.iter().enumerate() {
            let Some(s) = item.as_str() else {
                return skip(
                    format!("`args[{i}]` is {}, not a string", item.kind.noun()),
                    &item.span,
                    loaded,
                );
            };
            args.push(expand(s, &format!("args[{i}]"), env, &mut expanded));
        }
        fields.insert("args".to_string(), a.span.clone());
    }
    let mut vars = BTreeMap::new();
    if let Some(e) = node.get("env") {
        let Some(entries) = e.entries() else {
            return skip(
                format!("`env` is {}, not an object", e.kind.noun()),
                &e.span,
                loaded,
            );
        };
        for (key, _, value) in entries {
            let Some(s) = value.as_str() else {
                return skip(
                    format!("`env.{key}` is {}, not a string", value.kind.noun()),
                    &value.span,
                    loaded,
                );
            };
            vars.insert(
                key.clone(),
                expand(s, &format!("env.{key}"), env, &mut expanded),
            );
        }
        fields.insert("env".to_string(), e.span.clone());
    }
    loaded.started.push(Started {
        name: name.into(),
        command,
        args,
        env: vars,
        cwd: project_dir.map(String::from),
        enabled_tools: None,
        disabled_tools: Vec::new(),
        expanded,
        key: name_span.clone(),
        span: node.span.clone(),
        fields,
    });
}

/// Claude Code's expansion of `${NAME}` and `${NAME:-default}` in `value` (no escape; an
/// unset `NAME` without a default stays literal). Records `field` in `expanded` when the
/// value holds a reference.
pub fn expand(
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
        let inner = &rest[start + 2..start + 2 + len];
        let (var, default) = match inner.split_once(":-") {
            Some((var, default)) => (var, Some(default)),
            None => (inner, None),
        };
        match (env(var), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => out.push_str(&rest[start..start + 3 + len]),
        }
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    if any {
        expanded.push(field.into());
    }
    out
}

fn json(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}
