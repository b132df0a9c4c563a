/// The parts of the settings loaders (`gemini::loader`, `qwen::loader`) the two clients
/// share: Gemini CLI's `mcpServers` handling, which Qwen Code kept.
use crate::clients::loaded::{
    Kind, Loaded, Node, Remote, Skipped, Span, Started, is_url, js_strings, js_truthy, note_fields,
};

/// A reason an entry starts nothing, and where.
pub type Flaw = (String, Span);

/// `Object.entries(…)` of an `mcpServers` block as both clients iterate it, each with the
/// span of its name (its key, or an array element itself): an array holds servers named
/// `0`, `1`, …; any other non-object holds none.
pub fn entries(servers: &Node) -> Vec<(String, &Span, &Node)> {
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
pub fn each_entry(
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
pub fn object(node: &Node) -> Result<(), Flaw> {
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
pub fn network(
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
pub fn command(node: &Node, expand: impl FnOnce(&str) -> String) -> Result<String, Flaw> {
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
pub fn push_started(mut s: Started, node: &Node, mut expanded: Vec<String>, loaded: &mut Loaded) {
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
pub fn resolve_env_vars(
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
