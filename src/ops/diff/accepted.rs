//! Reviewed security-relevant changes that `diff --fail-on security` accepts: the
//! accepted-changes file of `diff --accepted FILE` (`docs/ci.md` runs it in CI).
//!
//! The file is TOML, one `[[accepted]]` table per accepted change, each with three
//! non-empty strings:
//!
//! ```toml
//! [[accepted]]
//! change = "kcap-search: read_only (absent) -> true"
//! by = "@alice"
//! reason = "Searches the index; writes nothing. Reviewed in PR 42."
//! ```
//!
//! `change` names one security-relevant change as `SERVER: FIELD OLD -> NEW`, each value as
//! compact JSON or `(absent)`: the text `diff` prints for a change it does not find
//! accepted. Values compare as JSON, so spacing inside them does not matter.
//!
//! The file is the record of who accepted what, kept after the merge. An entry accepts the
//! diff's change with the same server, field and values. An entry that accepts no change of
//! the diff is still valid while the new registry has the value it accepted (its NEW side: a
//! change accepted in an earlier pull request); once it does not (the server is gone, or the
//! field changed again) the entry is *stale*, and fails the diff as an unaccepted change
//! does, so the file never claims more than the registry holds.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toml::Spanned;

use super::{Change, Compare, RegistryDiff, compare_key, source_json, value};
use crate::model::EnvSource;
use crate::schema::diagnostic::SourceText;
use crate::schema::{EntryKey, Key, RegistryEntry, is_canonical_id, is_env_name, is_tool_name};
use crate::text::{ShownPath, char_name, is_forbidden_char, printable};

/// One change named by server, field and values: what an accepted-changes entry names, and
/// how a [`Change`] of the diff is matched against it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangeKey {
    /// The server id.
    pub server: String,
    /// The field, as [`Change::field`] names it.
    pub field: String,
    /// The old value (`null`: absent).
    pub old: Value,
    /// The new value (`null`: absent).
    pub new: Value,
}

impl ChangeKey {
    /// The key of a change of the diff.
    pub fn of(change: &Change) -> ChangeKey {
        ChangeKey {
            server: change.server.clone(),
            field: change.field.clone(),
            old: change.old.clone(),
            new: change.new.clone(),
        }
    }

    /// Parses `SERVER: FIELD OLD -> NEW` (values as JSON or `(absent)`), and checks that it
    /// names a change `diff` reports as security-relevant. The error says what is wrong.
    pub fn parse(text: &str) -> Result<ChangeKey, String> {
        const FORM: &str = "expected `SERVER: FIELD OLD -> NEW`, each value JSON or \
                            `(absent)`, e.g. `kcap-search: read_only (absent) -> true`";
        let (server, rest) = text.split_once(": ").ok_or(FORM)?;
        if !is_canonical_id(server) {
            return Err(format!(
                "`{}` is not a server id; {FORM}",
                printable(server)
            ));
        }
        let (field, values) = rest.split_once(' ').ok_or(FORM)?;
        let Some(kind) = FieldKind::of(field) else {
            return Err(format!(
                "`{}` is not a field `diff` reports security-relevant changes of (args, \
                 starts_flows, allowlistable, inject, read_only, driver_stamp, env.NAME, \
                 tools.NAME.unattended_safe)",
                printable(field)
            ));
        };
        // The one ` -> ` with a value on each side (a JSON value cannot be followed by more).
        let (old, new) = values
            .match_indices(" -> ")
            .find_map(|(at, arrow)| {
                Some((
                    parse_value(&values[..at])?,
                    parse_value(&values[at + arrow.len()..])?,
                ))
            })
            .ok_or(FORM)?;
        let key = ChangeKey {
            server: server.into(),
            field: field.into(),
            old,
            new,
        };
        if key.old == key.new {
            return Err(format!("`{key}` changes nothing: OLD and NEW are the same"));
        }
        if !kind.is_security(&key.new) {
            return Err(format!(
                "`{key}` is not security-relevant (`diff --help` lists what is), so \
                 `--fail-on security` never fails on it: there is nothing to accept"
            ));
        }
        Ok(key)
    }
}

/// `SERVER: FIELD OLD -> NEW`, the form [`ChangeKey::parse`] reads; control characters in
/// values are JSON escapes, so the text is one printable line.
impl fmt::Display for ChangeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} {} -> {}",
            self.server,
            self.field,
            shown_value(&self.old),
            shown_value(&self.new)
        )
    }
}

fn shown_value(v: &Value) -> String {
    match v {
        Value::Null => "(absent)".into(),
        v => v.to_string(),
    }
}

fn parse_value(text: &str) -> Option<Value> {
    let text = text.trim();
    if text == "(absent)" {
        return Some(Value::Null);
    }
    serde_json::from_str(text).ok()
}

/// A field security-relevant changes are reported for.
enum FieldKind {
    /// A key compared whole (`args`, `read_only`, …).
    Whole(EntryKey),
    /// `env.NAME`: the variable's source.
    Env(String),
    /// `tools.NAME.unattended_safe`.
    ToolSafe(String),
}

impl FieldKind {
    fn of(field: &str) -> Option<FieldKind> {
        if let Some(name) = field.strip_prefix("env.") {
            return is_env_name(name).then(|| FieldKind::Env(name.into()));
        }
        if let Some(rest) = field.strip_prefix("tools.") {
            let name = rest.strip_suffix(".unattended_safe")?;
            return is_tool_name(name).then(|| FieldKind::ToolSafe(name.into()));
        }
        let key = EntryKey::from_name(field)?;
        matches!(compare_key(key), Compare::Whole { security: true, .. })
            .then_some(FieldKind::Whole(key))
    }

    /// Whether a change of this field to `new` is security-relevant (as `diff` decides).
    fn is_security(&self, new: &Value) -> bool {
        match self {
            FieldKind::Whole(_) => true,
            FieldKind::Env(_) => *new == source_json(&EnvSource::AgentId),
            FieldKind::ToolSafe(_) => *new == json!(true),
        }
    }

    /// The field's value in `entry`, as the diff shows it (`null`: absent).
    fn value_in(&self, entry: &RegistryEntry) -> Value {
        match self {
            FieldKind::Whole(key) => value(entry, *key),
            FieldKind::Env(name) => entry
                .env
                .iter()
                .find(|(n, _)| n == name)
                .map_or(Value::Null, |(_, s)| source_json(s)),
            FieldKind::ToolSafe(name) => entry
                .tools
                .iter()
                .find(|t| t.name == *name)
                .map_or(Value::Null, |t| json!(t.unattended_safe)),
        }
    }
}

/// One entry of the accepted-changes file.
#[derive(Clone, Debug, PartialEq)]
pub struct Acceptance {
    /// The change it accepts.
    pub change: ChangeKey,
    /// Who accepted it.
    pub by: String,
    /// Why.
    pub reason: String,
    /// 1-based line and column of its `change` value in the file.
    pub line: usize,
    /// See [`Acceptance::line`].
    pub column: usize,
}

/// The accepted-changes file, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct AcceptedChanges {
    path: PathBuf,
    exists: bool,
    entries: Vec<Acceptance>,
}

/// Why the accepted-changes file cannot be used (the `diff` exits 2).
#[derive(Debug)]
pub enum AcceptedError {
    /// The file exists but cannot be read.
    Read {
        /// The file, as shown.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a valid accepted-changes file.
    Invalid {
        /// The file, as shown.
        path: String,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl fmt::Display for AcceptedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcceptedError::Read { path, source } => write!(f, "cannot read {path}: {source}"),
            AcceptedError::Invalid {
                path,
                line,
                column,
                message,
            } => write!(f, "{path}:{line}:{column}: {message}"),
        }
    }
}

impl std::error::Error for AcceptedError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    #[serde(default)]
    accepted: Vec<EntryToml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryToml {
    change: Spanned<String>,
    by: Spanned<String>,
    reason: Spanned<String>,
}

impl AcceptedChanges {
    /// Reads and checks the file at `path`. A file that does not exist accepts nothing (a
    /// repository starts without one; `diff` says so when it fails).
    pub fn read(path: &Path) -> Result<AcceptedChanges, AcceptedError> {
        match std::fs::read_to_string(path) {
            Ok(text) => AcceptedChanges::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(AcceptedChanges {
                path: path.into(),
                exists: false,
                entries: Vec::new(),
            }),
            Err(source) => Err(AcceptedError::Read {
                path: ShownPath(path).to_string(),
                source,
            }),
        }
    }

    /// Checks `text`, the content of the file at `path`: TOML of the shape in the module
    /// docs, each `change` a security-relevant change ([`ChangeKey::parse`]) named once,
    /// `by` and `reason` not blank.
    pub fn parse(text: &str, path: &Path) -> Result<AcceptedChanges, AcceptedError> {
        let source = SourceText::new(text.to_string());
        let invalid = |offset: usize, message: String| {
            let (line, column) = source.line_column(offset);
            AcceptedError::Invalid {
                path: ShownPath(path).to_string(),
                line,
                column,
                message,
            }
        };
        let file: FileToml = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            invalid(
                offset,
                format!(
                    "{} (an accepted-changes file holds `[[accepted]]` tables of `change`, \
                     `by` and `reason`)",
                    e.message().trim_end()
                ),
            )
        })?;
        let mut entries: Vec<Acceptance> = Vec::new();
        for e in file.accepted {
            for (name, field) in [("change", &e.change), ("by", &e.by), ("reason", &e.reason)] {
                if let Some(c) = field.get_ref().chars().find(|&c| is_forbidden_char(c)) {
                    return Err(invalid(
                        field.span().start,
                        format!(
                            "`{name}` contains {}, which the review would show as is: remove it",
                            char_name(c)
                        ),
                    ));
                }
            }
            let at = e.change.span().start;
            let change = ChangeKey::parse(e.change.get_ref()).map_err(|m| invalid(at, m))?;
            for (name, field, what) in [
                ("by", &e.by, "who reviewed the change"),
                ("reason", &e.reason, "why the change is safe"),
            ] {
                if field.get_ref().trim().is_empty() {
                    return Err(invalid(
                        field.span().start,
                        format!("`{name}` is empty: say {what}"),
                    ));
                }
            }
            let (line, column) = source.line_column(at);
            if let Some(first) = entries.iter().find(|a| a.change == change) {
                return Err(invalid(
                    at,
                    format!(
                        "`{change}` is accepted twice (first at line {}): remove one entry",
                        first.line
                    ),
                ));
            }
            entries.push(Acceptance {
                change,
                by: e.by.into_inner(),
                reason: e.reason.into_inner(),
                line,
                column,
            });
        }
        Ok(AcceptedChanges {
            path: path.into(),
            exists: true,
            entries,
        })
    }

    /// The entries, in file order.
    pub fn entries(&self) -> &[Acceptance] {
        &self.entries
    }

    /// Which security-relevant changes of `diff` the file accepts, and which of its entries
    /// are stale against `new`, the registry `diff` compared to.
    pub fn review<'a>(&'a self, diff: &'a RegistryDiff, new: &[RegistryEntry]) -> Review<'a> {
        let verdicts: Vec<(&Change, Option<&Acceptance>)> = diff
            .security()
            .map(|c| {
                let key = ChangeKey::of(c);
                (c, self.entries.iter().find(|a| a.change == key))
            })
            .collect();
        let stale = self
            .entries
            .iter()
            .filter(|a| !verdicts.iter().any(|(_, by)| by.is_some_and(|b| b == *a)))
            .filter_map(|a| Some((a, stale_reason(&a.change, diff, new)?)))
            .collect();
        Review {
            file: self,
            diff,
            verdicts,
            stale,
        }
    }

    fn shown_path(&self) -> String {
        ShownPath(&self.path).to_string()
    }
}

/// Why `key`, accepting no change of `diff`, is stale: the diff changes its field otherwise
/// (the entry names the wrong values), or the registry `new` does not have the value it
/// accepted. `None` while `new` holds it (a change accepted earlier).
fn stale_reason(key: &ChangeKey, diff: &RegistryDiff, new: &[RegistryEntry]) -> Option<String> {
    if let Some(c) = diff
        .changes
        .iter()
        .find(|c| c.server == key.server && c.field == key.field)
    {
        return Some(format!("the diff has `{}` instead", ChangeKey::of(c)));
    }
    let kind = FieldKind::of(&key.field).expect("parsed keys name known fields");
    let Some(entry) = new.iter().find(|e| e.id == key.server) else {
        return Some(format!(
            "`{}` is not in the new registry, and the diff has no such change",
            key.server
        ));
    };
    let now = kind.value_in(entry);
    (now != key.new).then(|| {
        format!(
            "the new registry has `{}` `{}` = {}, and the diff has no such change",
            key.server,
            key.field,
            shown_value(&now)
        )
    })
}

/// The accepted-changes file applied to one diff.
#[derive(Debug)]
pub struct Review<'a> {
    file: &'a AcceptedChanges,
    diff: &'a RegistryDiff,
    /// Each security-relevant change of the diff, in order, with the entry accepting it.
    verdicts: Vec<(&'a Change, Option<&'a Acceptance>)>,
    /// Entries that accept no change of the diff and that the new registry does not hold,
    /// with why.
    stale: Vec<(&'a Acceptance, String)>,
}

impl Review<'_> {
    /// Whether every security-relevant change is accepted and no entry is stale (`diff
    /// --fail-on security --accepted FILE` exits 0).
    pub fn passes(&self) -> bool {
        self.unaccepted().next().is_none() && self.stale.is_empty()
    }

    /// The security-relevant changes no entry accepts, in order.
    pub fn unaccepted(&self) -> impl Iterator<Item = &Change> {
        self.verdicts
            .iter()
            .filter(|(_, by)| by.is_none())
            .map(|(c, _)| *c)
    }

    /// The stale entries, in file order, each with why it is stale.
    pub fn stale(&self) -> &[(&Acceptance, String)] {
        &self.stale
    }

    /// What standard error says: for each unaccepted change an entry to paste into the file
    /// once reviewed, and each stale entry by position; empty when the review passes.
    pub fn report(&self) -> String {
        let mut out = String::new();
        let path = self.file.shown_path();
        let unaccepted: Vec<&Change> = self.unaccepted().collect();
        if !unaccepted.is_empty() {
            let n = unaccepted.len();
            let (changes, are) = if n == 1 {
                ("change is", "it")
            } else {
                ("changes are", "each")
            };
            let (missing, there) = if self.file.exists {
                (String::new(), "there")
            } else {
                (" (it does not exist)".into(), "in a new file of that name")
            };
            out.push_str(&format!(
                "error: {n} security-relevant {changes} not accepted in {path}{missing}; \
                 once reviewed, accept {are} with an entry {there}:\n"
            ));
            for c in &unaccepted {
                out.push_str(&format!(
                    "\n[[accepted]]\nchange = {}\nby = \"\"      # who reviewed it\nreason = \"\"  # why it is safe\n",
                    toml_string(&ChangeKey::of(c).to_string())
                ));
            }
            if !self.stale.is_empty() {
                out.push('\n');
            }
        }
        for (a, why) in &self.stale {
            out.push_str(&format!(
                "error: {path}:{}:{}: stale acceptance `{}`: {why}; remove \
                 the entry\n",
                a.line, a.column, a.change
            ));
        }
        out
    }

    /// The diff as Markdown ([`RegistryDiff::markdown`]) with each security-relevant change
    /// marked `accepted by BY: REASON` or `not accepted`, and a `Stale acceptances` section
    /// when there are any.
    pub fn markdown(&self) -> String {
        let mark = |c: &Change| match self.acceptance(c) {
            Some(a) => format!(
                " — accepted by {}: {}",
                super::code(&a.by),
                super::code(&a.reason)
            ),
            None => " — **not accepted**".into(),
        };
        let mut tail = String::new();
        if !self.stale.is_empty() {
            tail.push_str(&format!(
                "\n### Stale acceptances ({})\n\n",
                self.stale.len()
            ));
            for (a, why) in &self.stale {
                tail.push_str(&format!(
                    "- {} ({} line {}): {}\n",
                    super::code(&a.change.to_string()),
                    super::code(&self.file.shown_path()),
                    a.line,
                    why
                ));
            }
        }
        self.diff.markdown_marked(mark, &tail)
    }

    /// The diff as JSON ([`RegistryDiff::json`]) with `"accepted": {"by", "reason"}` (or
    /// `null`) on each security-relevant change, and `"stale_acceptances"`: `[{"change",
    /// "line", "column", "by", "reason", "why"}]`.
    pub fn json(&self) -> String {
        #[derive(Serialize)]
        struct AcceptedJson<'a> {
            by: &'a str,
            reason: &'a str,
        }
        #[derive(Serialize)]
        struct StaleJson<'a> {
            change: String,
            line: usize,
            column: usize,
            by: &'a str,
            reason: &'a str,
            why: &'a str,
        }
        let stale: Vec<StaleJson> = self
            .stale
            .iter()
            .map(|(a, why)| StaleJson {
                change: a.change.to_string(),
                line: a.line,
                column: a.column,
                by: &a.by,
                reason: &a.reason,
                why,
            })
            .collect();
        self.diff.json_with(
            |c| {
                Some(self.acceptance(c).map(|a| AcceptedJson {
                    by: &a.by,
                    reason: &a.reason,
                }))
            },
            Some(stale),
        )
    }

    fn acceptance(&self, change: &Change) -> Option<&Acceptance> {
        self.verdicts
            .iter()
            .find(|(c, _)| std::ptr::eq(*c, change))
            .and_then(|(_, a)| *a)
    }
}

/// `s` as a TOML string: basic (JSON escapes are TOML escapes) unless it holds `"` and a
/// literal string can hold it as is.
fn toml_string(s: &str) -> String {
    if s.contains('"') && !s.contains('\'') && !s.chars().any(char::is_control) {
        format!("'{s}'")
    } else {
        serde_json::to_string(s).expect("a string serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::{ChangeKey, toml_string};
    use serde_json::json;

    #[test]
    fn a_key_round_trips_through_its_text() {
        for text in [
            "kcap-new: read_only (absent) -> true",
            r#"kcap-notes: args ["mcp","notes"] -> ["mcp","notes","--read-only"]"#,
            r#"kcap-audit: env.KCAP_AUDIT_ID {"value":"1"} -> "agent_id""#,
            r#"kcap-x: args ["a -> b"] -> ["c"]"#,
            "kcap-notes: tools.list_notes.unattended_safe false -> true",
        ] {
            assert_eq!(ChangeKey::parse(text).unwrap().to_string(), text);
        }
        let spaced = ChangeKey::parse(r#"kcap-x: args [ "a" ,"b"] -> ["a"]"#).unwrap();
        assert_eq!(spaced.old, json!(["a", "b"]));
    }

    #[test]
    fn a_key_that_names_no_security_change_is_refused() {
        let err = |t: &str| ChangeKey::parse(t).unwrap_err();
        assert!(err("kcap-x read_only true").starts_with("expected `SERVER: FIELD"));
        assert!(err("kcap-x: description \"a\" -> \"b\"").starts_with("`description` is not"));
        assert!(err("kcap-x: read_only true -> true").ends_with("OLD and NEW are the same"));
        assert!(
            err("kcap-x: tools.t.unattended_safe true -> false")
                .contains("is not security-relevant")
        );
        assert!(err("Kcap: read_only false -> true").starts_with("`Kcap` is not a server id"));
        assert!(err("kcap-x: read_only fals -> true").starts_with("expected"));
    }

    #[test]
    fn toml_strings_are_valid_toml() {
        for s in [r#"a "b" c"#, r#"it's "x""#, "plain", "tab\there"] {
            let doc: toml::Table = toml::from_str(&format!("v = {}", toml_string(s))).unwrap();
            assert_eq!(doc["v"].as_str(), Some(s));
        }
        assert_eq!(toml_string(r#"a "b""#), r#"'a "b"'"#);
    }
}
