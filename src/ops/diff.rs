//! What a registry change means (`diff OLD_DIR NEW_DIR`): servers added and removed, every
//! changed field, and the security-relevant flips listed first. Which keys are
//! security-relevant is one table (`compare_key`), matched exhaustively over [`EntryKey`].
//!
//! Security-relevant ([`Change::security`]): any change of `args` (what runs),
//! `starts_flows`, `allowlistable`, `inject` (what the launcher injects), `read_only` or
//! `driver_stamp` (what registrations run); a new server that starts flows (the server's own
//! deny-list needs it), claims `read_only` (its tools may be auto-approved) or is injected; a
//! tool becoming `unattended_safe` (a flip to `true`, or a new tool — on a new or an existing
//! server — that is `unattended_safe`); an env var whose source becomes `agent_id` (a changed
//! source, or a new env var, on a new or an existing server).

pub mod accepted;

use std::cmp::Ordering;
use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Value, json};

use crate::model::{EnvSource, Inject};
use crate::schema::{EntryKey, Key, RegistryEntry};
use crate::text::pretty_json as pretty;

/// One changed field of a server present in both registries, or a security-relevant field of
/// a new server.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// The server id.
    pub server: String,
    /// The field: `description`, `args`, `starts_flows`, `allowlistable`, `read_only`,
    /// `needs_project_cwd`, `env.<NAME>` (its source), `tools.<name>.unattended_safe`, or
    /// `tools` (the order of the tools both versions have).
    pub field: String,
    /// The old value; `null` when the field is new.
    pub old: Value,
    /// The new value; `null` when the field is gone.
    pub new: Value,
    /// Whether the change is security-relevant (see the module docs).
    #[serde(skip)]
    pub security: bool,
}

/// Everything that differs between two registries.
#[derive(Clone, Debug, PartialEq)]
pub struct RegistryDiff {
    /// Servers only in the new registry, sorted by id.
    pub added: Vec<RegistryEntry>,
    /// Servers only in the old registry, sorted by id.
    pub removed: Vec<RegistryEntry>,
    /// Field changes, by server id, then in field order.
    pub changes: Vec<Change>,
}

/// How `diff` treats one registry key: the one table of keys and their security relevance.
#[derive(Clone, Copy)]
enum Compare {
    /// The id: what entries are matched by, never a change.
    Identity,
    /// The whole value ([`value`]). `security`: any change of it is security-relevant.
    /// `flag_new`: a new server with it `true` is a security-relevant change too.
    Whole { security: bool, flag_new: bool },
    /// Each env var's source, by name; security-relevant when it becomes `agent_id` (also on
    /// a new server).
    EnvSources,
    /// Each tool's `unattended_safe`, by name; security-relevant when it becomes `true` (also
    /// on a new server). Then the order of the tools both versions have (not relevant).
    Tools,
}

/// The table: how each key is compared. Exhaustive, so a new key does not compile until it
/// is placed here.
fn compare_key(key: EntryKey) -> Compare {
    let whole = |security, flag_new| Compare::Whole { security, flag_new };
    match key {
        EntryKey::Id => Compare::Identity,
        // An alias changes only the stem of a per-launch wire name; what the name gate
        // admits rests on the random suffix.
        EntryKey::Description
        | EntryKey::NeedsProjectCwd
        | EntryKey::Registered
        | EntryKey::Alias => whole(false, false),
        EntryKey::Args | EntryKey::Allowlistable | EntryKey::DriverStamp => whole(true, false),
        EntryKey::StartsFlows | EntryKey::ReadOnly | EntryKey::Inject => whole(true, true),
        EntryKey::Env => Compare::EnvSources,
        EntryKey::Tools => Compare::Tools,
    }
}

/// The value of a [`Compare::Whole`] key as JSON.
fn value(e: &RegistryEntry, key: EntryKey) -> Value {
    match key {
        EntryKey::Id => json!(e.id),
        EntryKey::Description => json!(e.description),
        EntryKey::Args => json!(e.args),
        EntryKey::StartsFlows => json!(e.starts_flows),
        EntryKey::Allowlistable => json!(e.allowlistable),
        EntryKey::Inject => json!(e.inject.map(Inject::name)),
        EntryKey::Registered => json!(e.registered),
        EntryKey::ReadOnly => json!(e.read_only),
        EntryKey::NeedsProjectCwd => json!(e.needs_project_cwd),
        EntryKey::DriverStamp => json!(e.driver_stamp),
        EntryKey::Alias => json!(e.alias),
        EntryKey::Env => json!(
            e.env
                .iter()
                .map(|(n, s)| (n, source_json(s)))
                .collect::<Vec<_>>()
        ),
        EntryKey::Tools => json!(e.tools),
    }
}

/// Compares two registries in one pass over both, in O(old + new) comparisons of entries.
/// Each side is taken in id order (as `validate_dir` returns it; another order is sorted
/// first).
pub fn diff(old: &[RegistryEntry], new: &[RegistryEntry]) -> RegistryDiff {
    let mut d = RegistryDiff {
        added: Vec::new(),
        removed: Vec::new(),
        changes: Vec::new(),
    };
    let (old, new) = (by_id(old), by_id(new));
    let (mut o, mut n) = (old.iter().peekable(), new.iter().peekable());
    loop {
        let order = match (o.peek(), n.peek()) {
            (Some(a), Some(b)) => a.id.cmp(&b.id),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => break,
        };
        match order {
            Ordering::Less => d.removed.extend(o.next().map(|&e| e.clone())),
            Ordering::Greater => {
                let added = n.next().expect("peeked");
                new_server_flips(added, &mut d.changes);
                d.added.push((*added).clone());
            }
            Ordering::Equal => {
                let (a, b) = (o.next().expect("peeked"), n.next().expect("peeked"));
                compare(a, b, &mut d.changes);
            }
        }
    }
    d
}

/// `entries` in id order, without sorting when they already are.
fn by_id(entries: &[RegistryEntry]) -> Vec<&RegistryEntry> {
    let mut refs: Vec<&RegistryEntry> = entries.iter().collect();
    if !refs.is_sorted_by(|a, b| a.id <= b.id) {
        refs.sort_by(|a, b| a.id.cmp(&b.id));
    }
    refs
}

fn change(server: &str, field: &str, old: Value, new: Value, security: bool) -> Change {
    Change {
        server: server.into(),
        field: field.into(),
        old,
        new,
        security,
    }
}

/// The security-relevant facts of a server that did not exist before.
fn new_server_flips(n: &RegistryEntry, out: &mut Vec<Change>) {
    for &key in EntryKey::ALL {
        match compare_key(key) {
            Compare::Identity
            | Compare::Whole {
                flag_new: false, ..
            } => {}
            Compare::Whole { flag_new: true, .. } => {
                // Set: `true`, or an `inject` condition.
                let v = value(n, key);
                if !matches!(v, Value::Null | Value::Bool(false)) {
                    out.push(change(&n.id, key.name(), Value::Null, v, true));
                }
            }
            Compare::EnvSources => {
                for (name, src) in n.env.iter().filter(|(_, s)| *s == EnvSource::AgentId) {
                    out.push(change(
                        &n.id,
                        &format!("env.{name}"),
                        Value::Null,
                        source_json(src),
                        true,
                    ));
                }
            }
            Compare::Tools => {
                for t in n.tools.iter().filter(|t| t.unattended_safe) {
                    out.push(change(
                        &n.id,
                        &format!("tools.{}.unattended_safe", t.name),
                        Value::Null,
                        json!(true),
                        true,
                    ));
                }
            }
        }
    }
}

/// Every changed field of a server in both registries, in key order.
fn compare(o: &RegistryEntry, n: &RegistryEntry, out: &mut Vec<Change>) {
    let id = &n.id;
    let mut field = |name: &str, old: Value, new: Value, security: bool| {
        if old != new {
            out.push(change(id, name, old, new, security));
        }
    };
    for &key in EntryKey::ALL {
        match compare_key(key) {
            Compare::Identity => {}
            Compare::Whole { security, .. } => {
                field(key.name(), value(o, key), value(n, key), security);
            }
            Compare::EnvSources => {
                let source = |e: &RegistryEntry, name: &str| {
                    e.env
                        .iter()
                        .find(|(n, _)| n == name)
                        .map_or(Value::Null, |(_, s)| source_json(s))
                };
                let mut names: Vec<&str> = n.env.iter().map(|(name, _)| name.as_str()).collect();
                names.extend(
                    o.env
                        .iter()
                        .map(|(name, _)| name.as_str())
                        .filter(|name| !n.env.iter().any(|(m, _)| m == name)),
                );
                for name in names {
                    let (old, new) = (source(o, name), source(n, name));
                    let security = new == source_json(&EnvSource::AgentId);
                    field(&format!("env.{name}"), old, new, security);
                }
            }
            Compare::Tools => {
                let safe = |e: &RegistryEntry, name: &str| {
                    e.tools
                        .iter()
                        .find(|t| t.name == name)
                        .map_or(Value::Null, |t| json!(t.unattended_safe))
                };
                let mut names: Vec<&str> = n.tools.iter().map(|t| t.name.as_str()).collect();
                names.extend(
                    o.tools
                        .iter()
                        .map(|t| t.name.as_str())
                        .filter(|name| !n.tools.iter().any(|t| t.name == *name)),
                );
                for name in names {
                    let (old, new) = (safe(o, name), safe(n, name));
                    let security = new == json!(true);
                    field(&format!("tools.{name}.unattended_safe"), old, new, security);
                }
                let common = |a: &RegistryEntry, b: &RegistryEntry| -> Vec<String> {
                    a.tools
                        .iter()
                        .filter(|t| b.tools.iter().any(|u| u.name == t.name))
                        .map(|t| t.name.clone())
                        .collect()
                };
                field("tools", json!(common(o, n)), json!(common(n, o)), false);
            }
        }
    }
}

impl RegistryDiff {
    /// The security-relevant changes, in server order.
    pub fn security(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.security)
    }

    /// Whether any change is security-relevant (`--fail-on security` exits 1).
    pub fn has_security(&self) -> bool {
        self.security().next().is_some()
    }

    /// Whether the registries are the same.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changes.is_empty()
    }

    /// The diff as pretty-printed JSON (trailing newline):
    /// `{"security": [Change…], "added": [entry…], "removed": [entry…], "changes": [Change…]}`
    /// where each change is `{"server", "field", "old", "new"}` (`null` for an absent side),
    /// `changes` holds the changes that are not security-relevant, and each entry has the
    /// shape of `list --format json`.
    pub fn json(&self) -> String {
        self.json_with::<(), ()>(|_| None, None)
    }

    /// [`json`](Self::json) with `"accepted": accepted(change)` on each security-relevant
    /// change where it is `Some`, and `"stale_acceptances": stale` at the end when `Some`.
    fn json_with<A: Serialize, S: Serialize>(
        &self,
        accepted: impl Fn(&Change) -> Option<Option<A>>,
        stale: Option<S>,
    ) -> String {
        #[derive(Serialize)]
        struct SecurityJson<'a, A> {
            #[serde(flatten)]
            change: &'a Change,
            #[serde(skip_serializing_if = "Option::is_none")]
            accepted: Option<Option<A>>,
        }
        #[derive(Serialize)]
        struct DiffJson<'a, A, S> {
            security: Vec<SecurityJson<'a, A>>,
            added: &'a [RegistryEntry],
            removed: &'a [RegistryEntry],
            changes: Vec<&'a Change>,
            #[serde(skip_serializing_if = "Option::is_none")]
            stale_acceptances: Option<S>,
        }
        pretty(&DiffJson {
            security: self
                .security()
                .map(|change| SecurityJson {
                    change,
                    accepted: accepted(change),
                })
                .collect(),
            added: &self.added,
            removed: &self.removed,
            changes: self.changes.iter().filter(|c| !c.security).collect(),
            stale_acceptances: stale,
        })
    }

    /// The diff as GitHub-flavoured Markdown for a pull request comment: a
    /// `## MCP server registry changes` heading, then the sections `Security-relevant
    /// changes`, `Added servers`, `Removed servers` and `Other changes`, each only when not
    /// empty, or `No changes.`. Values are JSON in code spans, and so are descriptions, so no
    /// registry text is read as Markdown or HTML.
    pub fn markdown(&self) -> String {
        self.markdown_marked(|_| String::new(), "")
    }

    /// [`markdown`](Self::markdown) with `mark(change)` after each security-relevant change
    /// and `tail` (sections of its own) at the end.
    fn markdown_marked(&self, mark: impl Fn(&Change) -> String, tail: &str) -> String {
        let mut out = String::from("## MCP server registry changes\n");
        if self.is_empty() {
            out.push_str("\nNo changes.\n");
            out.push_str(tail);
            return out;
        }
        let security: Vec<&Change> = self.security().collect();
        let other: Vec<&Change> = self.changes.iter().filter(|c| !c.security).collect();
        section(&mut out, "Security-relevant changes", &security, |c| {
            change_line(c) + &mark(c)
        });
        let added: Vec<&RegistryEntry> = self.added.iter().collect();
        section(&mut out, "Added servers", &added, |e| {
            format!(
                "{}: {} (args {}, starts_flows {}, allowlistable {}, read_only {})",
                code(&e.id),
                code(&e.description),
                code(&json!(e.args).to_string()),
                code(&e.starts_flows.to_string()),
                code(&e.allowlistable.to_string()),
                code(&e.read_only.to_string()),
            )
        });
        let removed: Vec<&RegistryEntry> = self.removed.iter().collect();
        section(&mut out, "Removed servers", &removed, |e| {
            format!("{}: {}", code(&e.id), code(&e.description))
        });
        section(&mut out, "Other changes", &other, change_line);
        out.push_str(tail);
        out
    }
}

fn section<T>(out: &mut String, title: &str, items: &[T], line: impl Fn(&T) -> String) {
    if items.is_empty() {
        return;
    }
    let _ = write!(out, "\n### {title} ({})\n\n", items.len());
    for item in items {
        let _ = writeln!(out, "- {}", line(item));
    }
}

fn change_line(c: &&Change) -> String {
    let value = |v: &Value| match v {
        Value::Null => "(absent)".to_string(),
        v => code(&v.to_string()),
    };
    format!(
        "{}: {} {} → {}",
        code(&c.server),
        code(&c.field),
        value(&c.old),
        value(&c.new)
    )
}

/// `s` as a Markdown code span, with a fence longer than any run of backticks in it
/// (CommonMark), padded with spaces when it starts or ends with a backtick.
fn code(s: &str) -> String {
    let longest = s.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{s}{pad}{fence}")
}

/// An env source as a registry file spells it: `"server_url"`, or `{"value": "…"}`.
fn source_json(src: &EnvSource<String>) -> Value {
    match (src.name(), src) {
        (_, EnvSource::Constant(value)) => json!({ "value": value }),
        (name, _) => json!(name),
    }
}

#[cfg(test)]
mod tests {
    use super::code;

    #[test]
    fn code_spans_survive_backticks() {
        assert_eq!(code("a"), "`a`");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x``"), "``` `x`` ```");
    }
}
