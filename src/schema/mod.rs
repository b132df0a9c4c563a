//! The registry file format and every registry rule: the one implementation that both
//! `build.rs` (through `#[path]`, this file being its one entry point) and
//! `kcap-mcp-registry check` run.
//!
//! A registry is a directory holding one TOML file per MCP server, `<id>.toml`. Files are
//! parsed with the `toml` crate's spanned document parser (`toml::de::DeTable`), so every
//! [`Diagnostic`] points at the exact key or value it is about. Every violation in every file
//! is collected; nothing stops at the first, except that a file's first TOML syntax error
//! ends that file's checks.
//!
//! The parts, each depending only on those before it:
//!
//! - text checks (in `crate::text`, shared with the lean library): forbidden characters
//!   ([`is_forbidden_char`]) and [`printable`];
//! - the rule catalog [`Rule`], the keys [`EntryKey`] and [`ToolKey`], and the patterns;
//! - [`diagnostic`]: a violation and its rustc-style rendering;
//! - loading ([`load_dir`]): the directory's files, read in parallel when there are many;
//! - the per-key checks of one file, then the cross-key rules of one file;
//! - here: the directory-wide rules (`id-unique`, `result-channel-missing`,
//!   `registry-empty`, `stray-file`) and the entry points [`validate`], [`validate_dir`] and
//!   [`validate_path`].

mod cross;
pub mod diagnostic;
mod file;
mod load;
mod rules;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde::ser::{SerializeSeq, SerializeStruct};
use toml::Spanned;

pub use crate::text::{is_forbidden_char, printable};
pub use diagnostic::{Diagnostic, SourceSpan};
use file::FileCx;
pub use load::{
    LoadError, MAX_FILE_BYTES, RegistryDir, SourceFile, Stray, find_registry_dir, load_dir,
};
pub use rules::{
    ENV_NAME_PATTERN, EntryKey, ID_PATTERN, Key, MAX_DESCRIPTION_CHARS,
    MAX_QUALIFIED_TOOL_NAME_LEN, Rule, TOOL_NAME_PATTERN, ToolKey, ValueKind, is_canonical_id,
    is_env_name, is_tool_name, qualified_tool_name,
};

use crate::model::{EnvSource, Inject, RESULT_CHANNEL_ID};

/// One tool of a validated [`RegistryEntry`]. Serializes as `{"name", "unattended_safe"}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ToolEntry {
    /// Tool name.
    pub name: String,
    /// Safe for an unattended reviewer to call without approval.
    pub unattended_safe: bool,
}

/// A registry entry that passed every rule: the owned twin of the compiled
/// [`McpServer`](crate::model::McpServer), with defaults filled in. One field per
/// [`EntryKey`], in the same order.
///
/// Serializes (`list --format json`, `diff --format json`) as an object with the keys of a
/// registry file in that order; `inject` is `null` or its spelling; `env` is an array of
/// `{"name", "source"}` (`source` a source name, or `{"value": …}` for a constant) and
/// `tools` an array of `{"name", "unattended_safe"}`, because their order is meaningful.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct RegistryEntry {
    /// Canonical id.
    pub id: String,
    /// One-line description.
    pub description: String,
    /// Argv after the kcap binary.
    pub args: Vec<String>,
    /// The server can start flows.
    pub starts_flows: bool,
    /// `false` for injection-only servers.
    pub allowlistable: bool,
    /// When the launcher injects an injection-only server; `None` on allowlistable ones.
    #[serde(serialize_with = "inject_json")]
    pub inject: Option<Inject>,
    /// Registration exports register it.
    pub registered: bool,
    /// Every tool is side-effect free.
    pub read_only: bool,
    /// Registration configs run the server in the project directory.
    pub needs_project_cwd: bool,
    /// Registrations for clients that need it append `--driver <client>`.
    pub driver_stamp: bool,
    /// Shorter stem for per-launch wire names on aliasing clients; `None` uses the id.
    pub alias: Option<String>,
    /// Env vars in declaration order.
    #[serde(serialize_with = "env_json")]
    pub env: Vec<(String, EnvSource<String>)>,
    /// Tool catalog in advertised order.
    pub tools: Vec<ToolEntry>,
}

/// `inject` as `null`, `"always"` or `"borrowed-snapshot"`.
fn inject_json<S: serde::Serializer>(inject: &Option<Inject>, s: S) -> Result<S::Ok, S::Error> {
    match inject {
        Some(i) => s.serialize_str(i.name()),
        None => s.serialize_none(),
    }
}

/// `env` as `[{"name": …, "source": "server_url" | … | {"value": "…"}}, …]`.
fn env_json<S: serde::Serializer>(
    env: &[(String, EnvSource<String>)],
    s: S,
) -> Result<S::Ok, S::Error> {
    struct Source<'a>(&'a EnvSource<String>);
    impl Serialize for Source<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            match (self.0.name(), self.0) {
                (Some(name), _) => s.serialize_str(name),
                (None, EnvSource::Constant(value)) => {
                    let mut c = s.serialize_struct("Constant", 1)?;
                    c.serialize_field("value", value)?;
                    c.end()
                }
                (None, _) => unreachable!("every source but a constant has a name"),
            }
        }
    }
    struct Var<'a>(&'a str, &'a EnvSource<String>);
    impl Serialize for Var<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let mut var = s.serialize_struct("EnvVar", 2)?;
            var.serialize_field("name", self.0)?;
            var.serialize_field("source", &Source(self.1))?;
            var.end()
        }
    }
    let mut seq = s.serialize_seq(Some(env.len()))?;
    for (name, source) in env {
        seq.serialize_element(&Var(name, source))?;
    }
    seq.end()
}

/// The registry's canonical form: `entries` (sorted by id, as [`validate`] returns them) as
/// compact JSON in the shape of [`RegistryEntry`]'s `Serialize`. Two registries have the same
/// canonical form exactly when they compile to the same table.
pub fn canonical_form(entries: &[RegistryEntry]) -> Vec<u8> {
    serde_json::to_vec(entries).expect("registry entries serialize to JSON")
}

/// The registry digest: SHA-256 of [`canonical_form`], as 64 lower-case hex digits. `build.rs`
/// compiles it in as `registry::DIGEST`; `check` compares a directory's with it.
pub fn digest(entries: &[RegistryEntry]) -> String {
    use sha2::Digest as _;
    let hash = sha2::Sha256::digest(canonical_form(entries));
    let mut hex = String::with_capacity(64);
    for b in hash.iter() {
        hex.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        hex.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    hex
}

/// Why [`validate_dir`] produced no registry.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckError {
    /// The directory or a file in it could not be read.
    Load(LoadError),
    /// The registry breaks one or more rules; every violation is listed, in file order.
    Invalid(Vec<Diagnostic>),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Load(e) => e.fmt(f),
            CheckError::Invalid(d) => write!(f, "{} registry rule violation(s)", d.len()),
        }
    }
}

impl std::error::Error for CheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckError::Load(e) => e.source(),
            CheckError::Invalid(_) => None,
        }
    }
}

/// Loads and validates the registry in `dir`: [`load_dir`] then [`validate`].
///
/// # Errors
/// [`CheckError::Load`] on I/O failure, [`CheckError::Invalid`] with every violation.
pub fn validate_dir(dir: &Path) -> Result<Vec<RegistryEntry>, CheckError> {
    let loaded = load_dir(dir).map_err(CheckError::Load)?;
    validate(&loaded, &dir.display().to_string()).map_err(CheckError::Invalid)
}

/// [`validate_dir`] for a directory; for a file, checks that one file of its directory with
/// the directory's cross-file rules (`id-unique` and `result-channel-missing`; a file that is
/// not `*.toml` is a `stray-file`) and returns its entry. Violations in the directory's
/// other files are not reported.
///
/// # Errors
/// [`CheckError::Load`] when `path`, its directory or one of its `.toml` files cannot be
/// read; [`CheckError::Invalid`] with every violation that concerns `path`.
pub fn validate_path(path: &Path) -> Result<Vec<RegistryEntry>, CheckError> {
    let meta = std::fs::metadata(path).map_err(|source| {
        CheckError::Load(LoadError {
            path: path.to_path_buf(),
            source,
        })
    })?;
    if meta.is_dir() {
        return validate_dir(path);
    }
    let shown = path.parent().unwrap_or(Path::new(""));
    let dir = if shown.as_os_str().is_empty() {
        Path::new(".")
    } else {
        shown
    };
    let loaded = load::load(dir, shown).map_err(CheckError::Load)?;
    let name = path.display().to_string();
    let (entries, diags) = check_all(&loaded, &dir.display().to_string());
    let diags: Vec<Diagnostic> = diags
        .into_iter()
        .filter(|d| d.path == name || d.rule == Rule::ResultChannelMissing)
        .collect();
    if !diags.is_empty() {
        return Err(CheckError::Invalid(diags));
    }
    Ok(entries
        .into_iter()
        .filter(|(path, _)| *path == name)
        .map(|(_, e)| e)
        .collect())
}

/// Applies every registry rule to `dir`, the whole content of the directory named
/// `dir_path` (used for directory-level diagnostics).
///
/// Returns the entries sorted by id when no rule is broken.
///
/// # Errors
/// Every violation in every file, files in the given order and each file's diagnostics in
/// source order, then directory-level ones.
pub fn validate(dir: &RegistryDir, dir_path: &str) -> Result<Vec<RegistryEntry>, Vec<Diagnostic>> {
    let (entries, diags) = check_all(dir, dir_path);
    if diags.is_empty() {
        let mut entries: Vec<RegistryEntry> = entries.into_iter().map(|(_, e)| e).collect();
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(entries)
    } else {
        Err(diags)
    }
}

/// Every rule: the entries of the files that broke none (with their paths), and every
/// diagnostic.
fn check_all(dir: &RegistryDir, dir_path: &str) -> (Vec<(String, RegistryEntry)>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let mut entries = Vec::new();
    // Every id seen (valid or not), for the directory-wide rules.
    let mut ids: Vec<FileId> = Vec::new();
    let mut aliases: Vec<FileId> = Vec::new();
    let mut has_result_channel = false;
    for (file, checked) in dir
        .files
        .iter()
        .zip(load::parallel_map(&dir.files, check_file))
    {
        has_result_channel |= checked.result_channel;
        ids.extend(checked.id);
        aliases.extend(checked.alias);
        entries.extend(checked.entry.map(|e| (file.path.clone(), e)));
        diags.extend(checked.diags);
    }
    id_unique(&ids, &mut diags);
    alias_unique(&ids, &aliases, &mut diags);
    stray_file(&dir.strays, &mut diags);
    if dir.files.is_empty() {
        diags.push(dir_diag(
            Rule::RegistryEmpty,
            dir_path,
            "the registry directory holds no `.toml` file".into(),
            "add one `<id>.toml` file per MCP server".into(),
        ));
    } else if !has_result_channel {
        diags.push(dir_diag(
            Rule::ResultChannelMissing,
            dir_path,
            format!("the reserved result channel `{RESULT_CHANNEL_ID}` has no registry entry"),
            format!(
                "add `{RESULT_CHANNEL_ID}.toml` with `allowlistable = false` and `starts_flows = false`"
            ),
        ));
    }
    (entries, diags)
}

/// Where a file sets its `id`, for the directory-wide rules.
struct FileId {
    /// The file's path as diagnostics show it.
    path: String,
    /// The id as written.
    id: String,
    /// Where the `id` value is.
    span: SourceSpan,
}

/// What one file contributes to [`validate`].
struct CheckedFile {
    /// Its diagnostics, in source order.
    diags: Vec<Diagnostic>,
    /// Its entry, when the file broke no rule.
    entry: Option<RegistryEntry>,
    /// Its id, when it has a string `id`.
    id: Option<FileId>,
    /// Its alias, when it has a string `alias`.
    alias: Option<FileId>,
    /// Its stem or its id is the result channel's.
    result_channel: bool,
}

/// Every rule that concerns one file alone.
fn check_file(file: &SourceFile) -> CheckedFile {
    let mut result_channel = file.stem == RESULT_CHANNEL_ID;
    let mut id = None;
    let mut alias = None;
    let mut entry = None;
    let mut cx = FileCx::new(&file.path);
    if let Some(raw) = cx.parse(&file.bytes) {
        if let Some(raw_id) = &raw.id {
            result_channel |= raw_id.get_ref() == RESULT_CHANNEL_ID;
            id = Some(FileId {
                path: file.path.clone(),
                id: raw_id.get_ref().clone(),
                span: SourceSpan {
                    range: raw_id.span(),
                    source: cx.source().clone(),
                },
            });
        }
        if let Some(raw_alias) = &raw.alias {
            alias = Some(FileId {
                path: file.path.clone(),
                id: raw_alias.get_ref().clone(),
                span: SourceSpan {
                    range: raw_alias.span(),
                    source: cx.source().clone(),
                },
            });
        }
        cross::check(&mut cx, &raw, &file.stem);
        if cx.diags.is_empty() {
            entry = raw.into_entry();
        }
    }
    cx.diags
        .sort_by_key(|d| d.span.as_ref().map_or(0, |s| s.range.start));
    CheckedFile {
        diags: cx.diags,
        entry,
        id,
        alias,
        result_channel,
    }
}

impl file::RawEntry {
    /// The entry with defaults filled in, when every required key parsed.
    fn into_entry(self) -> Option<RegistryEntry> {
        let flag = |v: Option<Spanned<bool>>, default: bool| v.map_or(default, |v| *v.get_ref());
        let allowlistable = flag(self.allowlistable, true);
        Some(RegistryEntry {
            id: self.id?.into_inner(),
            description: self.description?.into_inner(),
            args: self.args?,
            starts_flows: *self.starts_flows?.get_ref(),
            allowlistable,
            inject: self.inject.map(Spanned::into_inner),
            // Rule `registered-scope` keeps it false on injection-only entries.
            registered: flag(self.registered, allowlistable),
            read_only: flag(self.read_only, false),
            needs_project_cwd: flag(self.needs_project_cwd, false),
            driver_stamp: flag(self.driver_stamp, false),
            alias: self.alias.map(Spanned::into_inner),
            env: self
                .env
                .unwrap_or_default()
                .into_iter()
                .map(|(n, s)| (n, s.into_inner()))
                .collect(),
            tools: self
                .tools
                .unwrap_or_default()
                .into_iter()
                .map(|t| ToolEntry {
                    name: t.name.map(Spanned::into_inner).unwrap_or_default(),
                    unattended_safe: flag(t.unattended_safe, false),
                })
                .collect(),
        })
    }
}

fn dir_diag(rule: Rule, path: &str, message: String, help: String) -> Diagnostic {
    Diagnostic {
        rule,
        path: path.to_string(),
        span: None,
        message,
        help,
    }
}

/// Rule `id-unique`: a later file whose id equals an earlier one's, ignoring ASCII case.
fn id_unique(ids: &[FileId], diags: &mut Vec<Diagnostic>) {
    // A file whose id is canonical and matches its name keeps the id; the other is blamed.
    let proper = |f: &FileId| {
        is_canonical_id(&f.id)
            && Path::new(&f.path)
                .file_stem()
                .is_some_and(|s| s == f.id.as_str())
    };
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| !proper(&ids[i]));
    let mut first_of: HashMap<String, usize> = HashMap::with_capacity(ids.len());
    for i in order {
        let this = &ids[i];
        let first = *first_of.entry(this.id.to_ascii_lowercase()).or_insert(i);
        if first == i {
            continue;
        }
        let first = &ids[first];
        diags.push(Diagnostic {
            rule: Rule::IdUnique,
            path: this.path.clone(),
            span: Some(this.span.clone()),
            message: if first.id == this.id {
                format!(
                    "id `{}` is already used in {}",
                    printable(&this.id),
                    printable(&first.path)
                )
            } else {
                format!(
                    "id `{}` is already used as `{}` in {} (ids are compared ignoring case)",
                    printable(&this.id),
                    printable(&first.id),
                    printable(&first.path)
                )
            },
            help: "give each MCP server its own id, or delete the duplicate file".into(),
        });
    }
}

/// Rule `alias-unique`: an alias equal to another file's id, or to an earlier file's alias,
/// ignoring ASCII case. (An alias equal to its own id breaks `alias-format`.) Linear in the
/// number of files: one map of the ids, one of the aliases seen.
fn alias_unique(ids: &[FileId], aliases: &[FileId], diags: &mut Vec<Diagnostic>) {
    // Per lower-cased id, the first two files with it: one of them is not the alias's own.
    let mut by_id: HashMap<String, [Option<&FileId>; 2]> = HashMap::with_capacity(ids.len());
    for id in ids {
        let slot = by_id.entry(id.id.to_ascii_lowercase()).or_default();
        if slot[0].is_none() {
            slot[0] = Some(id);
        } else if slot[1].is_none() {
            slot[1] = Some(id);
        }
    }
    let mut seen: HashMap<String, &FileId> = HashMap::with_capacity(aliases.len());
    for alias in aliases {
        let key = alias.id.to_ascii_lowercase();
        let clash = by_id
            .get(&key)
            .and_then(|firsts| firsts.iter().flatten().find(|i| i.path != alias.path))
            .map(|i| ("id", *i))
            .or_else(|| seen.get(&key).map(|a| ("alias", *a)));
        seen.entry(key).or_insert(alias);
        let Some((what, other)) = clash else {
            continue;
        };
        diags.push(Diagnostic {
            rule: Rule::AliasUnique,
            path: alias.path.clone(),
            span: Some(alias.span.clone()),
            message: format!(
                "alias `{}` is already used as the {what} `{}` in {}, so two servers of one launch could share a wire name",
                printable(&alias.id),
                printable(&other.id),
                printable(&other.path)
            ),
            help: "give this server an alias no other entry has as its id or alias".into(),
        });
    }
}

/// Rule `stray-file`: a file that is not read as a registry entry, or a subdirectory holding
/// `.toml` files, so a misnamed entry never passes unseen.
fn stray_file(strays: &[Stray], diags: &mut Vec<Diagnostic>) {
    for stray in strays {
        let name = Path::new(&stray.path)
            .file_name()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        let name = printable(&name);
        let (message, help) = if stray.is_dir {
            (
                format!("`{name}/` is a subdirectory holding `.toml` files, which the registry does not read"),
                "move each MCP server's `<id>.toml` into the registry directory itself, or remove the subdirectory".to_string(),
            )
        } else {
            let stem = name.split('.').next().unwrap_or_default();
            (
                format!("`{name}` is not a registry file: only `<id>.toml` files are read"),
                format!(
                    "rename it to `{}.toml` if it describes an MCP server, or remove it (README files and dotfiles may stay)",
                    stem
                ),
            )
        };
        diags.push(dir_diag(Rule::StrayFile, &stray.path, message, help));
    }
}
