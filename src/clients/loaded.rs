//! What a client's loader model says about a registration file: the vocabulary every room's
//! `loader` returns ([`Loaded`], with its [`Started`], [`Remote`], [`Skipped`] and [`Rejected`]
//! servers), and a small span-carrying value tree the loaders build (from JSON and JSONC with
//! `jsonc-parser`, from TOML with `toml`'s spanned document parser) so each reads fields the
//! same way. Beside them: the reader of the facts-only clients (`load_from_facts`: Cursor, Kiro,
//! Antigravity) and JavaScript's truthiness and `String()` (`js`: Gemini CLI, Qwen Code).
//! Outside the rooms, `clients::registration` (`export`, `install`) and the operations `check`
//! and `doctor` (`ops::check`, `ops::doctor`) read verdicts and spans from here.
//!
//! Spans are byte ranges into one of [`Loaded::sources`] (the decoded text, without its
//! byte order mark), so every verdict can be shown at `line:column`.

use std::collections::BTreeMap;
use std::ops::Range;

/// A byte range in one of the [`Loaded::sources`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// Index into [`Loaded::sources`].
    pub source: usize,
    /// Byte range in that source's text.
    pub range: Range<usize>,
}

/// One file the loader read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The path as the caller named it.
    pub path: String,
    /// The decoded text (one leading byte order mark removed, see [`crate::decode`]),
    /// shared by every verdict on the same file (one per `~/.claude.json` project).
    pub text: std::sync::Arc<str>,
}

/// A server the client starts as a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Started {
    /// The server's name (its key in the file).
    pub name: String,
    /// The program, as the client passes it to the OS (after the client's own expansion).
    pub command: String,
    /// The arguments (after expansion).
    pub args: Vec<String>,
    /// The variables the entry sets (after expansion), on top of what the client passes on.
    pub env: BTreeMap<String, String>,
    /// The working directory the client starts it in, when known: Claude Code's project
    /// directory, or Codex's `cwd` as written (relative to Codex's own directory); `None`
    /// means the client's own working directory.
    pub cwd: Option<String>,
    /// Codex `enabled_tools` (`None` when absent: every tool).
    pub enabled_tools: Option<Vec<String>>,
    /// Codex `disabled_tools` (empty when absent).
    pub disabled_tools: Vec<String>,
    /// Fields whose value the client expanded (`${…}`), e.g. `args[1]`.
    pub expanded: Vec<String>,
    /// The server's name as written: its key in the file (the position `doctor` reports).
    pub key: Span,
    /// The whole entry.
    pub span: Span,
    /// The span of each field as written (`command`, `args`, `env`, `cwd`, …).
    pub fields: BTreeMap<String, Span>,
}

/// A server the client connects to over the network instead of starting a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    /// The server's name.
    pub name: String,
    /// Its `url`.
    pub url: String,
    /// The server's name as written: its key in the file.
    pub key: Span,
    /// The whole entry.
    pub span: Span,
}

/// An entry the client skips (the rest of the file still loads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The entry's name.
    pub name: String,
    /// Why, in the client's terms, e.g. `env.KCAP_URL is not a string`.
    pub reason: String,
    /// `true` when the client lists it as configured but off (Codex `enabled = false`),
    /// `false` when it refuses the entry.
    pub disabled: bool,
    /// The entry's name as written: its key in the file.
    pub key: Span,
    /// Where: the offending value, or the entry.
    pub span: Span,
}

/// A file (or one scope of a file) the client refuses as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// What is refused: `the file`, `the user scope`, `the local scope of /p`, ….
    pub scope: String,
    /// Why, in the client's terms.
    pub reason: String,
    /// Where, when the problem has a place (a syntax error, a wrong-typed value).
    pub span: Option<Span>,
}

/// The verdict of a loader model on one registration file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// The files read (a Codex profile adds the profile file).
    pub sources: Vec<Source>,
    /// Servers started as processes, sorted by name.
    pub started: Vec<Started>,
    /// Servers reached over the network, sorted by name.
    pub remote: Vec<Remote>,
    /// Entries skipped, sorted by name.
    pub skipped: Vec<Skipped>,
    /// Files or scopes refused as a whole; their servers are in none of the lists above.
    pub rejected: Vec<Rejected>,
}

impl Loaded {
    /// Sorts every list by name (the loaders call it last).
    pub(crate) fn sort(&mut self) {
        self.started.sort_by(|a, b| a.name.cmp(&b.name));
        self.remote.sort_by(|a, b| a.name.cmp(&b.name));
        self.skipped.sort_by(|a, b| a.name.cmp(&b.name));
    }
}

/// A parsed value with its span: the common shape of a JSON or TOML document.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub(crate) kind: Kind,
    pub(crate) span: Span,
}

/// The kinds of [`Node`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    Null,
    Bool(bool),
    /// A number as written (JSON) or an integer (TOML).
    Int(i128),
    Float(f64),
    Str(String),
    /// A TOML date-time (as written).
    Datetime,
    Array(Vec<Node>),
    /// Keys in order of first appearance; a repeated JSON key keeps its last value, as
    /// `JSON.parse` does. Each key has its own span.
    Table(Vec<(String, Span, Node)>),
}

mod js;
pub(crate) use js::{js_string, js_strings, js_truthy};

impl Kind {
    /// The JSON/TOML kind word used in reasons: `a string`, `null`, ….
    pub(crate) fn noun(&self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool(_) => "a boolean",
            Kind::Int(_) | Kind::Float(_) => "a number",
            Kind::Str(_) => "a string",
            Kind::Datetime => "a date-time",
            Kind::Array(_) => "an array",
            Kind::Table(_) => "an object",
        }
    }
}

impl Node {
    /// The value of `key` when this is a table holding it.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            Kind::Table(entries) => entries.iter().find(|(k, _, _)| k == key).map(|(_, _, v)| v),
            _ => None,
        }
    }

    /// The entries when this is a table.
    pub(crate) fn entries(&self) -> Option<&[(String, Span, Node)]> {
        match &self.kind {
            Kind::Table(entries) => Some(entries),
            _ => None,
        }
    }

    /// The string when this is one.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Parses strict JSON (RFC 8259, as `JSON.parse` reads it) into a [`Node`] whose spans point
/// into `source`. `text` must be the decoded text of that source.
///
/// # Errors
/// The parser's message and the byte offset it points at.
#[cfg(feature = "cli")]
pub(crate) fn parse_json(text: &str, source: usize) -> Result<Node, (String, usize)> {
    // Strictness from serde_json (no comments, trailing commas, single quotes, …); spans
    // from jsonc-parser, which is run with every extension off.
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        let offset = offset_of(text, e.line(), e.column());
        let message = e.to_string();
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m)
            .to_string();
        return Err((message, offset));
    }
    let options = jsonc_parser::ParseOptions {
        allow_comments: false,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    jsonc_to_node(text, source, &options)
}

/// Parses JSON with `//` and `/* */` comments (and trailing commas when `trailing_commas`),
/// as the clients that read JSONC do (Gemini CLI, OpenCode, Copilot CLI), into a [`Node`]
/// whose spans point into `source`.
///
/// # Errors
/// The parser's message and the byte offset it points at.
#[cfg(feature = "cli")]
pub(crate) fn parse_jsonc(
    text: &str,
    source: usize,
    trailing_commas: bool,
) -> Result<Node, (String, usize)> {
    parse_json_syntax(text, source, true, trailing_commas)
}

/// Parses JSON with `jsonc-parser`, comments and trailing commas allowed as told and every
/// other extension off: the parser and options `install` reads a registration file with, so
/// an error points where `install`'s message says.
///
/// # Errors
/// The parser's message and the byte offset it points at.
#[cfg(feature = "cli")]
pub(crate) fn parse_json_syntax(
    text: &str,
    source: usize,
    comments: bool,
    trailing_commas: bool,
) -> Result<Node, (String, usize)> {
    let options = jsonc_parser::ParseOptions {
        allow_comments: comments,
        allow_loose_object_property_names: false,
        allow_trailing_commas: trailing_commas,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    jsonc_to_node(text, source, &options)
}

#[cfg(feature = "cli")]
fn jsonc_to_node(
    text: &str,
    source: usize,
    options: &jsonc_parser::ParseOptions,
) -> Result<Node, (String, usize)> {
    use jsonc_parser::ast::{ObjectPropName, Value};
    let parsed = jsonc_parser::parse_to_ast(text, &Default::default(), options)
        .map_err(|e| (e.kind().to_string(), e.range().start))?;
    let Some(value) = parsed.value else {
        return Err(("the file holds no JSON value".into(), 0));
    };
    fn convert(v: &Value<'_>, source: usize) -> Node {
        let span = |r: &jsonc_parser::common::Range| Span {
            source,
            range: r.start..r.end,
        };
        let (kind, range) = match v {
            Value::NullKeyword(n) => (Kind::Null, &n.range),
            Value::BooleanLit(b) => (Kind::Bool(b.value), &b.range),
            Value::NumberLit(n) => (
                n.value
                    .parse::<i128>()
                    .map(Kind::Int)
                    .unwrap_or_else(|_| Kind::Float(n.value.parse().unwrap_or(f64::NAN))),
                &n.range,
            ),
            Value::StringLit(s) => (Kind::Str(s.value.to_string()), &s.range),
            Value::Array(a) => (
                Kind::Array(a.elements.iter().map(|e| convert(e, source)).collect()),
                &a.range,
            ),
            Value::Object(o) => {
                let mut entries: Vec<(String, Span, Node)> = Vec::new();
                // Name → index in `entries`: a repeated key is found in constant time, so
                // an object of 200,000 servers is read in linear time.
                let mut index: std::collections::HashMap<String, usize> =
                    std::collections::HashMap::with_capacity(o.properties.len());
                for p in &o.properties {
                    let (name, range) = match &p.name {
                        ObjectPropName::String(s) => (s.value.to_string(), &s.range),
                        ObjectPropName::Word(w) => (w.value.to_string(), &w.range),
                    };
                    let value = convert(&p.value, source);
                    match index.get(&name) {
                        Some(&i) => {
                            entries[i].1 = span(range);
                            entries[i].2 = value;
                        }
                        None => {
                            index.insert(name.clone(), entries.len());
                            entries.push((name, span(range), value));
                        }
                    }
                }
                (Kind::Table(entries), &o.range)
            }
        };
        Node {
            kind,
            span: span(range),
        }
    }
    Ok(convert(&value, source))
}

/// Parses a TOML document into a [`Node`] whose spans point into `source`.
///
/// # Errors
/// The parser's message and the byte offset it points at.
#[cfg(feature = "cli")]
pub(crate) fn parse_toml(text: &str, source: usize) -> Result<Node, (String, usize)> {
    use toml::de::{DeTable, DeValue};
    // The `toml` parser skips a leading byte order mark itself; the caller has dropped the
    // one a client accepts, so one left here is the second: a syntax error, as for Codex.
    if text.starts_with(crate::decode::BOM) {
        return Err((
            "a second byte order mark: key with no value, expected `=`".into(),
            0,
        ));
    }
    let doc = DeTable::parse(text).map_err(|e| {
        (
            e.message().trim_end().to_string(),
            e.span().map_or(0, |s| s.start),
        )
    })?;
    fn table(t: &DeTable<'_>, range: Range<usize>, source: usize) -> Node {
        let entries = t
            .iter()
            .map(|(k, v)| {
                let key_span = Span {
                    source,
                    range: k.span(),
                };
                (
                    k.get_ref().to_string(),
                    key_span,
                    value(v.get_ref(), v.span(), source),
                )
            })
            .collect();
        Node {
            kind: Kind::Table(entries),
            span: Span { source, range },
        }
    }
    fn value(v: &DeValue<'_>, range: Range<usize>, source: usize) -> Node {
        let kind = match v {
            DeValue::String(s) => Kind::Str(s.to_string()),
            DeValue::Integer(i) => {
                let radix = i.radix();
                let digits = i.as_str().replace('_', "");
                let (neg, digits) = match digits.strip_prefix('-') {
                    Some(d) => (true, d.to_string()),
                    None => (false, digits.trim_start_matches('+').to_string()),
                };
                let digits = if radix == 10 {
                    digits.as_str()
                } else {
                    &digits[2..]
                };
                let n = i128::from_str_radix(digits, radix).unwrap_or(0);
                Kind::Int(if neg { -n } else { n })
            }
            DeValue::Float(f) => {
                Kind::Float(f.as_str().replace('_', "").parse().unwrap_or(f64::NAN))
            }
            DeValue::Boolean(b) => Kind::Bool(*b),
            DeValue::Datetime(_) => Kind::Datetime,
            DeValue::Array(a) => Kind::Array(
                a.iter()
                    .map(|e| value(e.get_ref(), e.span(), source))
                    .collect(),
            ),
            DeValue::Table(t) => return table(t, range, source),
        };
        Node {
            kind,
            span: Span { source, range },
        }
    }
    Ok(table(doc.get_ref(), doc.span(), source))
}

/// The byte offset of 1-based `line` and `column` (serde_json's error position).
#[cfg(feature = "cli")]
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    let rest = &text[start.min(text.len())..];
    let col: usize = rest
        .chars()
        .take(column.saturating_sub(1))
        .map(char::len_utf8)
        .sum();
    (start + col).min(text.len())
}

/// The first steps every JSON loader shares: decodes `bytes` (one leading byte order mark
/// dropped), records the source, parses it with `parse` and requires an object at the top.
/// Returns the root, or `None` with the file recorded as refused in `loaded`.
#[cfg(feature = "cli")]
pub(crate) fn json_root(
    path: &str,
    bytes: &[u8],
    parse: impl Fn(&str) -> Result<Node, (String, usize)>,
    loaded: &mut Loaded,
) -> Option<Node> {
    let text = match crate::decode::decode_utf8(bytes) {
        Ok(text) => text.to_string(),
        Err(e) => {
            loaded.rejected.push(Rejected {
                scope: "the file".into(),
                reason: format!(
                    "it is not UTF-8 (invalid byte at offset {})",
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
    let root = match parse(&text) {
        Ok(root) => root,
        Err((message, offset)) => {
            loaded.rejected.push(Rejected {
                scope: "the file".into(),
                reason: format!("it is not valid JSON: {message}"),
                span: Some(Span {
                    source: 0,
                    range: offset..offset,
                }),
            });
            return None;
        }
    };
    if root.entries().is_none() {
        loaded.rejected.push(Rejected {
            scope: "the file".into(),
            reason: format!("the file must be a JSON object, not {}", root.kind.noun()),
            span: Some(root.span.clone()),
        });
        return None;
    }
    Some(root)
}

/// A value that breaks an entry: why, and where.
pub(crate) type Flaw = (String, Span);

/// `node` (the field `field`) as an array of strings.
pub(crate) fn string_array(node: &Node, field: &str) -> Result<Vec<String>, Flaw> {
    let Kind::Array(items) = &node.kind else {
        return Err((
            format!("`{field}` is {}, not an array", node.kind.noun()),
            node.span.clone(),
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_str().map(String::from).ok_or_else(|| {
                (
                    format!("`{field}[{i}]` is {}, not a string", item.kind.noun()),
                    item.span.clone(),
                )
            })
        })
        .collect()
}

/// `node` (the field `field`) as an object of strings.
pub(crate) fn string_map(node: &Node, field: &str) -> Result<BTreeMap<String, String>, Flaw> {
    let Some(entries) = node.entries() else {
        return Err((
            format!("`{field}` is {}, not an object", node.kind.noun()),
            node.span.clone(),
        ));
    };
    entries
        .iter()
        .map(|(key, _, value)| {
            value
                .as_str()
                .map(|s| (key.clone(), s.to_string()))
                .ok_or_else(|| {
                    (
                        format!("`{field}.{key}` is {}, not a string", value.kind.noun()),
                        value.span.clone(),
                    )
                })
        })
        .collect()
}

/// A started server named `name` (written at `key`) with no tool filter and no working
/// directory; the loaders fill in the rest.
pub(crate) fn started(
    name: &str,
    key: &Span,
    node: &Node,
    command: String,
    args: Vec<String>,
) -> Started {
    Started {
        name: name.into(),
        command,
        args,
        env: BTreeMap::new(),
        cwd: None,
        enabled_tools: None,
        disabled_tools: Vec::new(),
        expanded: Vec::new(),
        key: key.clone(),
        span: node.span.clone(),
        fields: BTreeMap::new(),
    }
}

/// Records `fields` of `node` that are present, with their spans, in `started.fields`.
pub(crate) fn note_fields(started: &mut Started, node: &Node, fields: &[&str]) {
    for f in fields {
        if let Some(v) = node.get(f) {
            started.fields.insert((*f).to_string(), v.span.clone());
        }
    }
}

/// The loader the facts support for a client that cannot be run here (Cursor, Kiro,
/// Antigravity; facts "Registration" [K]): strict JSON, servers under `mcpServers` (a
/// missing block means none, a non-object one refuses the file), each a command entry
/// (`command` a non-empty string, `args` an array of strings, `env` an object of strings;
/// a violation skips the entry) or a network one (a string `url`, no `command`). No
/// expansion is modelled. `empty_is_empty`: a 0-byte (or blank) file counts as `{}`.
#[cfg(feature = "cli")]
pub(crate) fn load_from_facts(path: &str, bytes: &[u8], empty_is_empty: bool) -> Loaded {
    let mut loaded = Loaded::default();
    let blank = bytes.iter().all(u8::is_ascii_whitespace);
    if empty_is_empty && blank {
        loaded.sources.push(Source {
            path: path.into(),
            text: String::from_utf8_lossy(bytes).into_owned().into(),
        });
        return loaded;
    }
    let Some(root) = json_root(path, bytes, |t| parse_json(t, 0), &mut loaded) else {
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
    for (name, key, node) in servers {
        let entry = (|| -> Result<Option<Started>, Flaw> {
            if node.entries().is_none() {
                return Err((
                    format!("the entry is {}, not an object", node.kind.noun()),
                    node.span.clone(),
                ));
            }
            let command = match node.get("command") {
                None => match node.get("url").and_then(Node::as_str) {
                    Some(url) => {
                        loaded.remote.push(Remote {
                            name: name.clone(),
                            url: url.into(),
                            key: key.clone(),
                            span: node.span.clone(),
                        });
                        return Ok(None);
                    }
                    None => return Err(("it has no `command`".into(), node.span.clone())),
                },
                Some(c) => match c.as_str() {
                    Some("") => return Err(("`command` is empty".into(), c.span.clone())),
                    Some(s) => s.to_string(),
                    None => {
                        return Err((
                            format!("`command` is {}, not a string", c.kind.noun()),
                            c.span.clone(),
                        ));
                    }
                },
            };
            let args = match node.get("args") {
                Some(a) => string_array(a, "args")?,
                None => Vec::new(),
            };
            let mut s = started(name, key, node, command, args);
            if let Some(e) = node.get("env") {
                s.env = string_map(e, "env")?;
            }
            note_fields(&mut s, node, &["command", "args", "env"]);
            Ok(Some(s))
        })();
        match entry {
            Ok(Some(s)) => loaded.started.push(s),
            Ok(None) => {}
            Err((reason, span)) => loaded.skipped.push(Skipped {
                name: name.clone(),
                reason,
                disabled: false,
                key: key.clone(),
                span,
            }),
        }
    }
    loaded.sort();
    loaded
}

/// Whether a WHATWG URL parser (JavaScript's `new URL(text)`, Rust's `url`) accepts `text` as
/// an absolute URL: a scheme, and a host for the special schemes (leading and trailing
/// spaces and control characters ignored). What Gemini CLI and Copilot CLI check a network
/// server's URL with; percent-encoding and IP address rules are not modelled.
#[cfg(feature = "cli")]
pub(crate) fn is_url(text: &str) -> bool {
    let text = text.trim_matches(|c: char| c <= ' ');
    let Some((scheme, rest)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        || !chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return false;
    }
    let scheme = scheme.to_ascii_lowercase();
    if ["http", "https", "ws", "wss", "ftp"].contains(&scheme.as_str()) {
        let host = rest
            .trim_start_matches(['/', '\\'])
            .split(['/', '\\', '?', '#'])
            .next()
            .unwrap_or("");
        let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
        return !host.is_empty() && !host.contains(' ');
    }
    true
}
