//! Views of the registry for people: `list` (a table or JSON of the entries) and `resolve`
//! (what each allowlist entry resolves to), plus [`compiled_entries`], the compiled-in
//! registry as [`RegistryEntry`] values so every view and export has one input type, and
//! [`stale_binary`], `check`'s test for a binary built from another version of the registry.

use std::fmt::Write as _;
use std::path::Path;

use crate::allowlist::{Policy, RejectReason, SkipKind};
use crate::model::McpServer;
use crate::registry::Registry;
use crate::schema::{RegistryEntry, ToolEntry};
use crate::text::pretty_json as pretty;

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
        inject,
        registered,
        read_only,
        needs_project_cwd,
        driver_stamp,
        alias,
        env,
        tools,
    } = *s;
    RegistryEntry {
        id: id.into(),
        description: description.into(),
        args: args.iter().map(|&a| a.into()).collect(),
        starts_flows,
        allowlistable,
        inject,
        registered,
        read_only,
        needs_project_cwd,
        driver_stamp,
        alias: alias.map(String::from),
        env: env
            .iter()
            .map(|&(n, src)| (n.into(), src.map(String::from)))
            .collect(),
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
/// subset of the registry keys `starts_flows`, `read_only`, `needs_project_cwd`, `driver_stamp`
/// that are set, and `injection_only` for `allowlistable = false`; `-` for none), `TOOLS`
/// (`safe/total`: how many of the entry's tools are `unattended_safe`, of how many), `ARGS` (space-joined) and
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
            (e.starts_flows, "starts_flows"),
            (!e.allowlistable, "injection_only"),
            (e.read_only, "read_only"),
            (e.needs_project_cwd, "needs_project_cwd"),
            (e.driver_stamp, "driver_stamp"),
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

/// Resolves `names` as one allowlist against the compiled-in registry and reports each
/// entry: what it materializes, or why it does not. Under [`Policy::Strict`] every entry the
/// strict policy refuses is reported (not only the first, as
/// [`resolve_allowlist`](crate::resolve_allowlist) returns), each judged on its own;
/// injection-only and duplicate entries stay skipped. An unknown name gets a did-you-mean
/// suggestion ([`suggest_id`]).
pub fn resolve_report(names: &[String], policy: Policy) -> ResolveReport {
    resolve_report_in(Registry::compiled(), names, policy)
}

/// [`resolve_report`] against `registry`.
pub fn resolve_report_in(registry: Registry, names: &[String], policy: Policy) -> ResolveReport {
    let entries: Vec<Option<&str>> = names.iter().map(|n| Some(n.as_str())).collect();
    let lenient = registry
        .resolve(&entries, Policy::Lenient)
        .expect("the lenient policy never rejects an allowlist");
    let mut skipped = lenient.skipped().peekable();
    let mut text = String::new();
    let mut rejected = false;
    for (index, name) in names.iter().enumerate() {
        let _ = write!(text, "\"{}\" -> ", name.escape_debug());
        let rejection = match policy {
            Policy::Strict => registry
                .resolve(&[Some(name.as_str())], Policy::Strict)
                .err(),
            Policy::Lenient => None,
        };
        let skip = skipped.next_if(|s| s.index == index);
        match (rejection, skip) {
            (Some(r), _) => {
                rejected = true;
                let (reason, why) = (r.reason.name(), r.reason.explanation());
                let _ = write!(text, "rejected ({reason}): {why}");
                if r.reason == RejectReason::Unknown {
                    did_you_mean(&mut text, registry, name);
                }
                text.push('\n');
            }
            (None, Some(s)) => {
                let _ = write!(text, "skipped ({}): {}", s.kind.name(), s.kind.reason());
                if s.kind == SkipKind::Unknown {
                    did_you_mean(&mut text, registry, name);
                }
                text.push('\n');
            }
            (None, None) => {
                let id = registry.lookup(name).map_or("", |s| s.id);
                let _ = writeln!(text, "{id}");
            }
        }
    }
    ResolveReport { text, rejected }
}

/// Appends `; did you mean "ID"?` when [`suggest_id`] has a suggestion.
fn did_you_mean(text: &mut String, registry: Registry, name: &str) {
    if let Some(id) = suggest_id(registry, name) {
        let _ = write!(text, "; did you mean \"{id}\"?");
    }
}

/// The registry id most like `name` (trimmed, ASCII lower case; Jaro-Winkler similarity of
/// at least 0.8, as `check` suggests keys), for an allowlist entry that names no server.
///
/// ```
/// use kcap_mcp_registry::{Registry, ops::list::suggest_id};
///
/// assert_eq!(suggest_id(Registry::compiled(), "kcap-reveiw"), Some("kcap-review"));
/// assert_eq!(suggest_id(Registry::compiled(), "github"), None);
/// ```
pub fn suggest_id(registry: Registry, name: &str) -> Option<&'static str> {
    let name = name.trim().to_ascii_lowercase();
    registry
        .servers()
        .iter()
        .map(|s| (strsim::jaro_winkler(&name, s.id), s.id))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, id)| id)
}

/// The warning `check DIR` prints when `dir` is the registry directory this binary was built
/// from ([`registry::SOURCE_DIR`](crate::registry::SOURCE_DIR), compared as canonical paths)
/// but holds another registry: `checked` (the entries `dir` validated to, or `None` when it
/// broke a rule, which the compiled table did not) has another
/// [`digest`](crate::schema::digest) than [`registry::DIGEST`](crate::registry::DIGEST).
/// `None` when `dir` is another directory or holds the compiled registry, so it is silent
/// after an edit followed by a build (`cargo run -- check`).
///
/// It names the true cause, told by modification times: a registry file newer than this
/// binary was edited after the build (rebuild); when every file is older, one was replaced by
/// an older one (`cp -p`, `tar x`, `rsync -t`) and cargo, which reruns `build.rs` only when a
/// watched file is newer than its last run (rust-lang/cargo#10791), kept the old table.
pub fn stale_binary(dir: &Path, checked: Option<&[RegistryEntry]>) -> Option<String> {
    let built_from = Path::new(crate::registry::SOURCE_DIR);
    if dir.canonicalize().ok()?.as_path() != built_from {
        return None;
    }
    let digest = checked.map(crate::schema::digest);
    if digest.as_deref() == Some(crate::registry::DIGEST) {
        return None;
    }
    let what = match &digest {
        Some(d) => format!("digest {d}, compiled {}", crate::registry::DIGEST),
        None => "it breaks rules the compiled one passed".into(),
    };
    let built = std::env::current_exe()
        .and_then(|exe| exe.metadata())
        .and_then(|m| m.modified())
        .ok();
    let newer = built.and_then(|built| newest_registry_file(dir).filter(|(t, _)| *t > built));
    Some(match newer {
        Some((_, file)) => format!(
            "{} changed after this binary was built ({what}): `check` judged the files \
             themselves, but `list`, `resolve` and `render` use the registry compiled in; \
             rebuild to compile in the new one ({} is newer than the binary)",
            dir.display(),
            file.display()
        ),
        None => format!(
            "this binary was built from a different registry: rebuild. {} differs from the \
             registry compiled in ({what}), yet no file in it is newer than the binary: a file \
             was replaced by an older one, and cargo reruns build.rs only for registry files \
             newer than its last run (rust-lang/cargo#10791); `touch {}/*.toml` and build again",
            dir.display(),
            dir.display()
        ),
    })
}

/// The newest `*.toml` file of `dir` and its modification time.
fn newest_registry_file(dir: &Path) -> Option<(std::time::SystemTime, std::path::PathBuf)> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| {
            let path = e.ok()?.path();
            let toml = path
                .extension()
                .is_some_and(|x| x.eq_ignore_ascii_case("toml"));
            let modified = toml.then(|| path.metadata().ok()?.modified().ok())??;
            Some((modified, path))
        })
        .max()
}
