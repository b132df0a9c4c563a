//! Views of the registry for people: `list` (a table or JSON of the entries) and `resolve`
//! (what each allowlist entry resolves to), plus [`compiled_entries`], the compiled-in
//! registry as [`RegistryEntry`] values so every view and export has one input type.

use std::fmt::Write as _;

use crate::allowlist::{Policy, resolve_allowlist};
use crate::export::pretty;
use crate::model::McpServer;
use crate::schema::{RegistryEntry, ToolEntry};

/// The compiled-in registry ([`crate::servers`]) as owned entries, sorted by id: the same
/// values `validate_dir` returns for the `registry/` directory it was built from.
pub fn compiled_entries() -> Vec<RegistryEntry> {
    crate::servers().iter().map(entry_of).collect()
}

/// One compiled server as a [`RegistryEntry`].
pub fn entry_of(s: &McpServer) -> RegistryEntry {
    // Every field by name, no `..`: a new registry key does not compile until it is here.
    let McpServer {
        id,
        description,
        args,
        starts_flows,
        allowlistable,
        read_only,
        needs_project_cwd,
        env,
        tools,
    } = *s;
    RegistryEntry {
        id: id.into(),
        description: description.into(),
        args: args.iter().map(|&a| a.into()).collect(),
        starts_flows,
        allowlistable,
        read_only,
        needs_project_cwd,
        env: env.iter().map(|&(n, src)| (n.into(), src)).collect(),
        tools: tools
            .iter()
            .map(|t| ToolEntry {
                name: t.name.into(),
                unattended_safe: t.unattended_safe,
            })
            .collect(),
    }
}

/// The entries as a pretty-printed JSON array in the shape of [`RegistryEntry`]'s `Serialize`
/// (the keys of a registry file, in file order), with a trailing newline.
pub fn list_json(entries: &[RegistryEntry]) -> String {
    pretty(&entries)
}

/// The entries as an aligned text table, one row per entry: `ID`, `FLAGS` (a comma-separated
/// subset of `starts-flows`, `injection-only`, `read-only`, `project-cwd`, or `-`), `TOOLS`
/// (`safe/total`: how many tools are `unattended_safe`), `ARGS` (space-joined) and
/// `DESCRIPTION`. Columns are separated by two spaces; the last is not padded.
pub fn list_table(entries: &[RegistryEntry]) -> String {
    let mut rows = vec![[
        "ID".to_string(),
        "FLAGS".into(),
        "TOOLS".into(),
        "ARGS".into(),
        "DESCRIPTION".into(),
    ]];
    for e in entries {
        let flags: Vec<&str> = [
            (e.starts_flows, "starts-flows"),
            (!e.allowlistable, "injection-only"),
            (e.read_only, "read-only"),
            (e.needs_project_cwd, "project-cwd"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
        let safe = e.tools.iter().filter(|t| t.unattended_safe).count();
        rows.push([
            e.id.clone(),
            if flags.is_empty() {
                "-".into()
            } else {
                flags.join(",")
            },
            format!("{safe}/{}", e.tools.len()),
            e.args.join(" "),
            e.description.clone(),
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        for (i, width) in widths.iter().enumerate() {
            let _ = write!(out, "{:<width$}  ", row[i]);
        }
        out.push_str(&row[4]);
        out.push('\n');
    }
    out
}

/// What `resolve` prints for allowlist `names`, and whether the strict policy rejected any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolveReport {
    /// One line per entry (each ending in `\n`), in allowlist order:
    /// `"<entry>" -> <canonical id>`, `"<entry>" -> skipped (<kind>): <reason>`, or, under
    /// the strict policy, `"<entry>" -> rejected (<reason>): <explanation>`. Entries are
    /// escaped with `str::escape_debug`.
    pub text: String,
    /// Whether any entry was rejected (only under [`Policy::Strict`]).
    pub rejected: bool,
}

/// Resolves `names` as one allowlist and reports each entry: what it materializes, or why it
/// does not. Under [`Policy::Strict`] every entry the strict policy refuses is reported
/// (not only the first, as [`resolve_allowlist`] returns), each judged on its own;
/// injection-only and duplicate entries stay skipped.
pub fn resolve_report(names: &[String], policy: Policy) -> ResolveReport {
    let entries: Vec<Option<&str>> = names.iter().map(|n| Some(n.as_str())).collect();
    let lenient = resolve_allowlist(&entries, Policy::Lenient)
        .expect("the lenient policy never rejects an allowlist");
    let mut skipped = lenient.skipped().peekable();
    let mut text = String::new();
    let mut rejected = false;
    for (index, name) in names.iter().enumerate() {
        let _ = write!(text, "\"{}\" -> ", name.escape_debug());
        let rejection = match policy {
            Policy::Strict => resolve_allowlist(&[Some(name.as_str())], Policy::Strict).err(),
            Policy::Lenient => None,
        };
        let skip = skipped.next_if(|s| s.index == index);
        match (rejection, skip) {
            (Some(r), _) => {
                rejected = true;
                let (reason, why) = (r.reason.name(), r.reason.explanation());
                let _ = writeln!(text, "rejected ({reason}): {why}");
            }
            (None, Some(s)) => {
                let _ = writeln!(text, "skipped ({}): {}", s.kind.name(), s.kind.reason());
            }
            (None, None) => {
                let id = crate::lookup(name).map_or("", |s| s.id);
                let _ = writeln!(text, "{id}");
            }
        }
    }
    ResolveReport { text, rejected }
}
