//! The settings loader model Gemini CLI and Qwen Code share (`gemini::loader`,
//! `qwen::loader`): Gemini CLI's `mcpServers` handling, which Qwen Code kept, run with each
//! client's own quirks as data ([`Dialect`]).

use std::collections::BTreeMap;

use crate::clients::loaded::{
    self, Kind, Loaded, Node, Rejected, Remote, Skipped, Source, Span, Started, is_url, js_strings,
    js_truthy, json_root, note_fields, parse_jsonc, started,
};

/// Where a client's settings loader parts from its family's ([`load`]): each field one of
/// its measured quirks, written in its room with the evidence.
pub struct Dialect {
    /// `Some(reason)` when a file starting with a byte order mark is refused whole (with
    /// `reason`); `None` when the mark is skipped.
    pub bom_refused: Option<&'static str>,
    /// `Some(what happens)` when a `null` entry stops the client, so the file is refused
    /// (the reason: "the entry `NAME` is null, " then what happens); `None` when it only
    /// starts nothing.
    pub null_entry_stops: Option<&'static str>,
    /// How the load-time expansion reads `${…}` ([`resolve_env_vars`]).
    pub braced: Braced,
    /// Variables the load-time expansion never replaces (compared upper-cased).
    pub never_expanded: &'static [&'static str],
    /// What a truthy `args` that is not an array does.
    pub args_not_array: ArgsNotArray,
    /// Whether a `cwd` that is neither a string nor `null` makes the start fail (else it is
    /// ignored).
    pub cwd_must_be_string: bool,
    /// The variables a command entry's `env` sets.
    pub env: EntryEnv,
    /// Whether `env` is read before `args`: the order in which the expanded fields are listed
    /// ([`Started::expanded`]).
    pub env_first: bool,
}

/// The variables a command entry's `env` sets, given the entry, the client's expansion and
/// the fields expanded so far ([`Dialect::env`]).
pub type EntryEnv =
    fn(&Node, &Expand<'_>, &mut Vec<String>) -> Result<BTreeMap<String, String>, Flaw>;

/// What a truthy `args` that is not an array does ([`Dialect::args_not_array`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ArgsNotArray {
    /// It takes the place of the spawn options: the server starts without arguments, without
    /// the entry's `env` and `cwd`.
    DropsOptions,
    /// The entry starts nothing.
    Refused,
}

/// The load-time expansion of one client with its environment: [`resolve_env_vars`] as the
/// [`Dialect`] reads references.
pub struct Expand<'a> {
    /// The client's environment.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    dialect: &'a Dialect,
}

impl Expand<'_> {
    /// `value` expanded once; records `field` in `expanded` when it holds a reference.
    pub fn once(&self, value: &str, expanded: &mut Vec<String>, field: &str) -> String {
        let never = self.dialect.never_expanded;
        let lookup = |var: &str| {
            let upper = var.to_ascii_uppercase();
            (!never.contains(&upper.as_str()))
                .then(|| (self.env)(var))
                .flatten()
        };
        resolve_env_vars(value, self.dialect.braced, lookup, expanded, field)
    }

    /// JavaScript's `String(value)` ([`js_string`](crate::clients::loaded::js_string)) of a
    /// value whose strings go through [`Expand::once`].
    pub fn js_string(&self, node: &Node, expanded: &mut Vec<String>, field: &str) -> String {
        loaded::js_string(node, &mut |s| self.once(s, expanded, field))
    }
}

/// What the client of `dialect` does with `bytes`, its settings file `path`; `env` is its
/// environment, for `$…` expansion.
///
/// Never fails: an unreadable file is a [`Rejected`] verdict, as the client treats it.
pub fn load(
    dialect: &Dialect,
    path: &str,
    bytes: &[u8],
    env: &dyn Fn(&str) -> Option<String>,
) -> Loaded {
    let mut loaded = Loaded::default();
    // Node reads the file as UTF-8 with U+FFFD for invalid bytes.
    let text = String::from_utf8_lossy(bytes);
    if let Some(reason) = dialect.bom_refused
        && text.starts_with(crate::decode::BOM)
    {
        loaded.sources.push(Source {
            path: path.into(),
            text: text.as_ref().into(),
        });
        loaded.rejected.push(Rejected {
            scope: "the file".into(),
            reason: reason.into(),
            span: Some(Span {
                source: 0,
                range: 0..crate::decode::BOM.len_utf8(),
            }),
        });
        return loaded;
    }
    // `json_root` drops a byte order mark, as `stripUtf8Bom` does.
    let Some(root) = json_root(
        path,
        text.as_bytes(),
        |t| parse_jsonc(t, 0, false),
        &mut loaded,
    ) else {
        return loaded;
    };
    let Some(servers) = root.get("mcpServers") else {
        return loaded;
    };
    let entries = entries(servers);
    if let Some(stops) = dialect.null_entry_stops
        && let Some((name, _, node)) = entries.iter().find(|(_, _, n)| n.kind == Kind::Null)
    {
        loaded.rejected.push(Rejected {
            scope: "the file".into(),
            reason: format!("the entry `{name}` is null, {stops}"),
            span: Some(node.span.clone()),
        });
        return loaded;
    }
    let x = Expand { env, dialect };
    each_entry(entries, &mut loaded, |name, key, node, loaded| {
        entry(&x, name, key, node, loaded)
    });
    loaded
}

/// One entry: a network server ([`network`]), else a command server.
fn entry(
    x: &Expand<'_>,
    name: &str,
    key: &Span,
    node: &Node,
    loaded: &mut Loaded,
) -> Result<(), Flaw> {
    object(node)?;
    if let Some(remote) = network(name, key, node, |u, key| {
        x.js_string(u, &mut Vec::new(), key)
    }) {
        loaded.remote.push(remote?);
        return Ok(());
    }
    let dialect = x.dialect;
    let mut expanded = Vec::new();
    let command = command(node, |s| x.once(s, &mut expanded, "command"))?;
    let (vars, args) = if dialect.env_first {
        let vars = (dialect.env)(node, x, &mut expanded)?;
        (vars, args(x, node, &mut expanded)?)
    } else {
        let args = args(x, node, &mut expanded)?;
        ((dialect.env)(node, x, &mut expanded)?, args)
    };
    let (args, options) = match args {
        Some(args) => (args, true),
        None => (Vec::new(), false),
    };
    let mut s = started(name, key, node, command, args);
    if options {
        s.env = vars;
        s.cwd = cwd(x, node, &mut expanded)?;
    }
    push_started(s, node, expanded, loaded);
    Ok(())
}

/// The entry's arguments, each JavaScript's `String(…)` after the expansion: `[]` when
/// `args` is falsy; `None` when a truthy non-array takes the place of the spawn options.
///
/// # Errors
/// A truthy non-array `args` where the dialect refuses it.
fn args(
    x: &Expand<'_>,
    node: &Node,
    expanded: &mut Vec<String>,
) -> Result<Option<Vec<String>>, Flaw> {
    let Some(a) = node.get("args").filter(|a| js_truthy(a)) else {
        return Ok(Some(Vec::new()));
    };
    match &a.kind {
        Kind::Array(items) => Ok(Some(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| x.js_string(item, expanded, &format!("args[{i}]")))
                .collect(),
        )),
        other => match x.dialect.args_not_array {
            ArgsNotArray::DropsOptions => Ok(None),
            ArgsNotArray::Refused => Err((
                format!("`args` is {}, not an array", other.noun()),
                a.span.clone(),
            )),
        },
    }
}

/// The entry's working directory: a non-empty string after the expansion, else none.
///
/// # Errors
/// Another value than a string or `null`, where the dialect makes the start fail.
fn cwd(x: &Expand<'_>, node: &Node, expanded: &mut Vec<String>) -> Result<Option<String>, Flaw> {
    let Some(c) = node.get("cwd") else {
        return Ok(None);
    };
    match &c.kind {
        Kind::Str(text) => Ok(Some(x.once(text, expanded, "cwd")).filter(|c| !c.is_empty())),
        Kind::Null => Ok(None),
        other if x.dialect.cwd_must_be_string => Err((
            format!("`cwd` is {}, not a string", other.noun()),
            c.span.clone(),
        )),
        _ => Ok(None),
    }
}

/// A reason an entry starts nothing, and where.
pub type Flaw = (String, Span);

/// `Object.entries(…)` of an `mcpServers` block as both clients iterate it, each with the
/// span of its name (its key, or an array element itself): an array holds servers named
/// `0`, `1`, …; any other non-object holds none.
fn entries(servers: &Node) -> Vec<(String, &Span, &Node)> {
    match &servers.kind {
        Kind::Table(entries) => entries.iter().map(|(k, s, n)| (k.clone(), s, n)).collect(),
        Kind::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, n)| (i.to_string(), &n.span, n))
            .collect(),
        _ => Vec::new(),
    }
}

/// `entry` on each of `entries`, an entry it refuses [`Skipped`] with its flaw; then the
/// verdict sorted.
fn each_entry(
    entries: Vec<(String, &Span, &Node)>,
    loaded: &mut Loaded,
    mut entry: impl FnMut(&str, &Span, &Node, &mut Loaded) -> Result<(), Flaw>,
) {
    for (name, key, node) in entries {
        if let Err((reason, span)) = entry(&name, key, node, loaded) {
            loaded.skipped.push(Skipped {
                name,
                reason,
                disabled: false,
                key: key.clone(),
                span,
            });
        }
    }
    loaded.sort();
}

/// `Err` unless the entry is an object.
///
/// # Errors
/// The entry's kind, as a flaw.
fn object(node: &Node) -> Result<(), Flaw> {
    match node.entries() {
        Some(_) => Ok(()),
        None => Err((
            format!("the entry is {}, not an object", node.kind.noun()),
            node.span.clone(),
        )),
    }
}

/// A network server when the entry has a truthy `httpUrl`, else a truthy `url` (which
/// wins over `command`; `httpUrl` over `url`, as in `createUrlTransport`), its text
/// `string(value, key)`: `Err` when that is not a URL, so nothing is reached.
fn network(
    name: &str,
    name_span: &Span,
    node: &Node,
    mut string: impl FnMut(&Node, &str) -> String,
) -> Option<Result<Remote, Flaw>> {
    let (key, u) = ["httpUrl", "url"]
        .into_iter()
        .find_map(|key| node.get(key).filter(|u| js_truthy(u)).map(|u| (key, u)))?;
    let url = string(u, key);
    Some(if is_url(&url) {
        Ok(Remote {
            name: name.into(),
            url,
            key: name_span.clone(),
            span: node.span.clone(),
        })
    } else {
        Err((
            format!("`{key}` is {url:?}, not a URL, so nothing is reached"),
            u.span.clone(),
        ))
    })
}

/// The entry's `command`, a truthy string, through `expand`.
///
/// # Errors
/// A flaw when there is no truthy `command` or it is not a string.
fn command(node: &Node, expand: impl FnOnce(&str) -> String) -> Result<String, Flaw> {
    match node.get("command").filter(|c| js_truthy(c)) {
        None => Err((
            "it has no `command`, `url` or `httpUrl`".into(),
            node.span.clone(),
        )),
        Some(c) => match c.as_str() {
            Some(s) => Ok(expand(s)),
            None => Err((
                format!("`command` is {}, not a string", c.kind.noun()),
                c.span.clone(),
            )),
        },
    }
}

/// Finishes a started server and adds it to `loaded`: `includeTools` lists the only tools
/// kept, `excludeTools` hides tools; `expanded` the fields the client's expansion changed;
/// the spans of its fields.
fn push_started(mut s: Started, node: &Node, mut expanded: Vec<String>, loaded: &mut Loaded) {
    s.enabled_tools = node.get("includeTools").and_then(js_strings);
    s.disabled_tools = node
        .get("excludeTools")
        .and_then(js_strings)
        .unwrap_or_default();
    expanded.dedup();
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
}

/// A `${…}` reference after its `$`, from the text after the `{`: (name, default, length
/// from the `{` through the `}`), or `None` when it is not one.
pub type Braced = fn(&str) -> Option<(&str, Option<&str>, usize)>;

/// The load-time expansion both clients run on every string of the file
/// (`resolveEnvVarsInString`): one left-to-right pass replacing `$NAME` (`\w+`) and
/// `${…}` (as `braced` reads it) by `lookup(NAME)`, else the default, else leaving the
/// reference as written. Records `field` in `expanded` when `value` holds a reference.
fn resolve_env_vars(
    value: &str,
    braced: Braced,
    lookup: impl Fn(&str) -> Option<String>,
    expanded: &mut Vec<String>,
    field: &str,
) -> String {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    let mut any = false;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let word_len = after.find(|c: char| !word(c)).unwrap_or(after.len());
        let found = if word_len > 0 {
            Some((&after[..word_len], None, word_len))
        } else {
            after.strip_prefix('{').and_then(braced)
        };
        match found {
            Some((var, default, len)) => {
                any = true;
                let whole = &rest[at..at + 1 + len];
                match (lookup(var), default) {
                    (Some(v), _) => out.push_str(&v),
                    (None, Some(d)) => out.push_str(d),
                    (None, None) => out.push_str(whole),
                }
                rest = &after[len..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    if any && !expanded.iter().any(|f| f == field) {
        expanded.push(field.to_string());
    }
    out
}
