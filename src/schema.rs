//! The registry file format and every registry rule: the one implementation that both
//! `build.rs` (through `#[path]`) and `kcap-mcp-registry check` run.
//!
//! A registry is a directory holding one TOML file per MCP server, `<id>.toml`. Files are
//! parsed with the `toml` crate's spanned document parser (`toml::de::DeTable`), so every
//! [`Diagnostic`] points at the exact key or value it is about. Every violation in every file
//! is collected; nothing stops at the first.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diagnostic::{Diagnostic, SourceText, printable};
use crate::model::{EnvSource, MAX_ID_LEN, RESULT_CHANNEL_ID};

/// A registry rule. Each has a stable kebab-case [`Rule::name`] used in diagnostics
/// (`error[id-canonical]: …`), in `check --format json`, and in tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// The file is valid UTF-8 (a leading UTF-8 BOM is accepted).
    TomlUtf8,
    /// The file is valid TOML.
    TomlSyntax,
    /// Only the documented keys appear.
    UnknownKey,
    /// Every key has its documented type.
    WrongType,
    /// Every required key is present (`starts_flows` must be explicit).
    MissingKey,
    /// `id` is `^[a-z][a-z0-9-]*[a-z0-9]$`, ASCII, at most 64 bytes.
    IdCanonical,
    /// `id` equals the file stem exactly.
    IdFileStem,
    /// Ids are unique across the directory, ignoring ASCII case.
    IdUnique,
    /// `description` is one line of 1 to 300 characters without control or invisible
    /// characters ([`is_forbidden_char`]).
    DescriptionFormat,
    /// `args` is non-empty; no element is empty, holds a control or invisible character
    /// ([`is_forbidden_char`]), or holds `${`.
    ArgsFormat,
    /// Env names match `^[A-Z][A-Z0-9_]*$`.
    EnvName,
    /// Env sources are `"server_url"` or `"agent_id"`.
    EnvSource,
    /// Tool names match `^[A-Za-z0-9_.-]{1,128}$`.
    ToolName,
    /// Tool names are unique within an entry.
    ToolUnique,
    /// `kcap-flow-result.toml` exists.
    ResultChannelMissing,
    /// `kcap-flow-result` has `allowlistable = false`.
    ResultChannelAllowlistable,
    /// `kcap-flow-result` has `starts_flows = false`.
    ResultChannelStartsFlows,
    /// The `agent_id` env source appears only on entries with `allowlistable = false`.
    AgentIdInjectionOnly,
    /// `starts_flows = true` requires `read_only = false`.
    StartsFlowsReadOnly,
    /// `starts_flows = true` forbids `unattended_safe = true` tools.
    StartsFlowsUnattendedSafe,
    /// `unattended_safe = true` tools appear only on `read_only` or non-allowlistable entries.
    UnattendedSafeScope,
    /// The directory holds at least one `.toml` file.
    RegistryEmpty,
}

impl Rule {
    /// Every rule, in the order the README's rules table lists them.
    pub const ALL: [Rule; 22] = [
        Rule::TomlUtf8,
        Rule::TomlSyntax,
        Rule::UnknownKey,
        Rule::WrongType,
        Rule::MissingKey,
        Rule::IdCanonical,
        Rule::IdFileStem,
        Rule::IdUnique,
        Rule::DescriptionFormat,
        Rule::ArgsFormat,
        Rule::EnvName,
        Rule::EnvSource,
        Rule::ToolName,
        Rule::ToolUnique,
        Rule::ResultChannelMissing,
        Rule::ResultChannelAllowlistable,
        Rule::ResultChannelStartsFlows,
        Rule::AgentIdInjectionOnly,
        Rule::StartsFlowsReadOnly,
        Rule::StartsFlowsUnattendedSafe,
        Rule::UnattendedSafeScope,
        Rule::RegistryEmpty,
    ];

    /// The stable kebab-case name, e.g. `"id-canonical"`.
    pub const fn name(self) -> &'static str {
        match self {
            Rule::TomlUtf8 => "toml-utf8",
            Rule::TomlSyntax => "toml-syntax",
            Rule::UnknownKey => "unknown-key",
            Rule::WrongType => "wrong-type",
            Rule::MissingKey => "missing-key",
            Rule::IdCanonical => "id-canonical",
            Rule::IdFileStem => "id-file-stem",
            Rule::IdUnique => "id-unique",
            Rule::DescriptionFormat => "description-format",
            Rule::ArgsFormat => "args-format",
            Rule::EnvName => "env-name",
            Rule::EnvSource => "env-source",
            Rule::ToolName => "tool-name",
            Rule::ToolUnique => "tool-unique",
            Rule::ResultChannelMissing => "result-channel-missing",
            Rule::ResultChannelAllowlistable => "result-channel-allowlistable",
            Rule::ResultChannelStartsFlows => "result-channel-starts-flows",
            Rule::AgentIdInjectionOnly => "agent-id-injection-only",
            Rule::StartsFlowsReadOnly => "starts-flows-read-only",
            Rule::StartsFlowsUnattendedSafe => "starts-flows-unattended-safe",
            Rule::UnattendedSafeScope => "unattended-safe-scope",
            Rule::RegistryEmpty => "registry-empty",
        }
    }

    /// The rule from its [`Rule::name`]; `None` for an unknown name.
    pub fn from_name(name: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The TOML type a registry key must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A TOML string.
    String,
    /// A TOML boolean.
    Bool,
    /// An array of TOML strings.
    StringArray,
    /// A table whose values are env source strings (`NAME = "server_url"`).
    EnvTable,
    /// An array of tables (`[[tools]]`).
    ToolArray,
}

impl ValueKind {
    /// How a message names the type, e.g. "a boolean".
    pub const fn describe(self) -> &'static str {
        match self {
            ValueKind::String => "a string",
            ValueKind::Bool => "a boolean",
            ValueKind::StringArray => "an array of strings",
            ValueKind::EnvTable => "a table of NAME = \"server_url\" | \"agent_id\"",
            ValueKind::ToolArray => "an array of [[tools]] tables",
        }
    }
}

/// One documented key of a registry file (or of a `[[tools]]` table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    /// The key as written in TOML.
    pub name: &'static str,
    /// The type its value must have.
    pub kind: ValueKind,
    /// Whether the key must be present.
    pub required: bool,
    /// What the key means, one sentence (used in the JSON Schema export).
    pub meaning: &'static str,
}

const fn key(
    name: &'static str,
    kind: ValueKind,
    required: bool,
    meaning: &'static str,
) -> KeySpec {
    KeySpec {
        name,
        kind,
        required,
        meaning,
    }
}

/// The keys of a registry file, in documentation order.
pub const ENTRY_KEYS: [KeySpec; 9] = [
    key(
        "id",
        ValueKind::String,
        true,
        "Canonical id; equals the file stem.",
    ),
    key(
        "description",
        ValueKind::String,
        true,
        "One line of 1 to 300 characters.",
    ),
    key(
        "args",
        ValueKind::StringArray,
        true,
        "Argv after the kcap binary.",
    ),
    key(
        "starts_flows",
        ValueKind::Bool,
        true,
        "The server can start flows; the recursion guard strips it from every allowlist.",
    ),
    key(
        "allowlistable",
        ValueKind::Bool,
        false,
        "Default true. false = injection-only, never materialized from an allowlist.",
    ),
    key(
        "read_only",
        ValueKind::Bool,
        false,
        "Default false. Every tool is side-effect free.",
    ),
    key(
        "needs_project_cwd",
        ValueKind::Bool,
        false,
        "Default false. Registration configs run the server in the project directory.",
    ),
    key(
        "env",
        ValueKind::EnvTable,
        false,
        "Env vars the launcher sets: NAME = \"server_url\" | \"agent_id\".",
    ),
    key(
        "tools",
        ValueKind::ToolArray,
        false,
        "Catalog of the tools the server serves, in advertised order.",
    ),
];

/// The keys of one `[[tools]]` table.
pub const TOOL_KEYS: [KeySpec; 2] = [
    key("name", ValueKind::String, true, "Tool name."),
    key(
        "unattended_safe",
        ValueKind::Bool,
        false,
        "Default false. Safe for an unattended reviewer to call without approval.",
    ),
];

/// Pattern of a canonical id (rule `id-canonical`), as a regular expression.
pub const ID_PATTERN: &str = "^[a-z][a-z0-9-]*[a-z0-9]$";
/// Pattern of an env name (rule `env-name`).
pub const ENV_NAME_PATTERN: &str = "^[A-Z][A-Z0-9_]*$";
/// Pattern of a tool name (rule `tool-name`).
pub const TOOL_NAME_PATTERN: &str = "^[A-Za-z0-9_.-]{1,128}$";
/// Longest description, in characters (rule `description-format`).
pub const MAX_DESCRIPTION_CHARS: usize = 300;

/// Whether `id` is canonical: `^[a-z][a-z0-9-]*[a-z0-9]$` and at most 64 bytes.
pub fn is_canonical_id(id: &str) -> bool {
    let b = id.as_bytes();
    b.len() >= 2
        && b.len() <= MAX_ID_LEN
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1] != b'-'
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

/// Whether `name` matches `^[A-Z][A-Z0-9_]*$`.
pub fn is_env_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_uppercase()
        && b.iter()
            .all(|&c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
}

/// Whether `name` matches `^[A-Za-z0-9_.-]{1,128}$`.
pub fn is_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// Whether `c` may not appear in a one-line text: a Unicode control character (C0, DEL, C1),
/// a line/paragraph separator (U+2028, U+2029), or an invisible character that can make text
/// read other than it is: every `Default_Ignorable_Code_Point` of Unicode 16's
/// `DerivedCoreProperties.txt` (zero-width characters, joiners, bidirectional controls,
/// variation selectors, Hangul fillers, tag characters, …) and every other format character
/// (general category `Cf`).
pub fn is_forbidden_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c as u32,
            // Default_Ignorable_Code_Point
            0x00AD
                | 0x034F
                | 0x061C
                | 0x115F..=0x1160
                | 0x17B4..=0x17B5
                | 0x180B..=0x180F
                | 0x200B..=0x200F
                | 0x202A..=0x202E
                | 0x2060..=0x206F
                | 0x3164
                | 0xFE00..=0xFE0F
                | 0xFEFF
                | 0xFFA0
                | 0xFFF0..=0xFFF8
                | 0x1BCA0..=0x1BCA3
                | 0x1D173..=0x1D17A
                | 0xE0000..=0xE0FFF
                // Other format characters (Cf), and the line and paragraph separators
                | 0x0600..=0x0605
                | 0x06DD
                | 0x070F
                | 0x0890..=0x0891
                | 0x08E2
                | 0x110BD
                | 0x110CD
                | 0x13430..=0x1343F
                | 0xFFF9..=0xFFFB
                | 0x2028..=0x2029
        )
}

/// One tool of a validated [`Entry`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ToolEntry {
    /// Tool name.
    pub name: String,
    /// Safe for an unattended reviewer to call without approval.
    pub unattended_safe: bool,
}

/// A registry entry that passed every rule: the owned twin of the compiled
/// [`McpServer`](crate::model::McpServer), with defaults filled in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
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
    /// Every tool is side-effect free.
    pub read_only: bool,
    /// Registration configs run the server in the project directory.
    pub needs_project_cwd: bool,
    /// Env vars in declaration order.
    pub env: Vec<(String, EnvSource)>,
    /// Tool catalog in advertised order.
    pub tools: Vec<ToolEntry>,
}

/// A registry file as read from disk, before validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// The path as diagnostics show it, e.g. `registry/kcap-review.toml`.
    pub path: String,
    /// The file name without `.toml` (lossy UTF-8 for non-UTF-8 names).
    pub stem: String,
    /// The raw bytes.
    pub bytes: Vec<u8>,
}

/// Reading the registry directory failed; nothing was validated.
#[derive(Debug)]
pub struct LoadError {
    /// The directory or file that could not be read.
    pub path: PathBuf,
    /// The I/O error.
    pub source: io::Error,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The I/O error is the `source()`, not repeated here (see `LaunchError`).
        write!(
            f,
            "cannot read {}",
            crate::diagnostic::ShownPath(&self.path)
        )
    }
}

impl std::error::Error for LoadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
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

/// Reads every `*.toml` file (extension in any case) directly in `dir`, sorted by file name.
/// Other files and subdirectories are ignored (rule 11); a `*.toml` entry that is not a
/// regular file (after following symlinks) is an error, not skipped. Diagnostic paths are
/// `dir` joined with the file name, as given.
///
/// # Errors
/// [`LoadError`] when `dir` or one of its `.toml` files cannot be read.
pub fn load_dir(dir: &Path) -> Result<Vec<SourceFile>, LoadError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LoadError { path, source }
    };
    let mut paths = Vec::new();
    for item in std::fs::read_dir(dir).map_err(err(dir))? {
        let item = item.map_err(err(dir))?;
        let path = item.path();
        if path
            .extension()
            .is_none_or(|e| !e.eq_ignore_ascii_case("toml"))
        {
            continue;
        }
        // The directory entry's type costs no system call; a symlink is followed.
        let is_file = match item.file_type() {
            Ok(t) if !t.is_symlink() => t.is_file(),
            _ => path.is_file(),
        };
        if !is_file {
            // Never silently skipped, never opened (a FIFO would block).
            return Err(LoadError {
                path,
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a regular file (a directory, FIFO, socket, or a symlink that leads \
                     nowhere); registry entries must be regular `.toml` files",
                ),
            });
        }
        paths.push(path);
    }
    let read = |path: &PathBuf| {
        let stem = path
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        let bytes = read_file(path).map_err(err(path))?;
        Ok(SourceFile {
            path: path.display().to_string(),
            stem,
            bytes,
        })
    };
    let mut files = parallel_map(&paths, read)
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// `fs::read` without asking the file's size first (`fs::read` and `read_to_end` spend a
/// `statx`, and `read_to_end` an `lseek`, per file): open, read until end of file into a
/// stack buffer, close, and copy out exactly the bytes read.
fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    use io::Read as _;
    let mut file = std::fs::File::open(path)?;
    let mut buf = [0u8; 8192];
    let mut len = 0;
    while len < buf.len() {
        match file.read(&mut buf[len..]) {
            Ok(0) => return Ok(buf[..len].to_vec()),
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // Larger than any real registry file: read the rest as `fs::read` would.
    let mut bytes = buf.to_vec();
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Files one thread takes at least: below this, threads cost more than they save.
const FILES_PER_THREAD: usize = 256;

/// `items.iter().map(f).collect()`, on up to `available_parallelism` scoped threads for
/// large inputs. Results keep the order of `items`; a panic in `f` is re-raised.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let threads = cores.min(items.len() / FILES_PER_THREAD);
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let f = &f;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(items.len().div_ceil(threads))
            .map(|chunk| scope.spawn(move || chunk.iter().map(f).collect::<Vec<R>>()))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// Loads and validates the registry in `dir`: [`load_dir`] then [`validate`].
///
/// # Errors
/// [`CheckError::Load`] on I/O failure, [`CheckError::Invalid`] with every violation.
pub fn validate_dir(dir: &Path) -> Result<Vec<Entry>, CheckError> {
    let files = load_dir(dir).map_err(CheckError::Load)?;
    validate(&files, &dir.display().to_string()).map_err(CheckError::Invalid)
}

/// Applies every registry rule to `files`, the whole content of the directory named
/// `dir_path` (used for directory-level diagnostics).
///
/// Returns the entries sorted by id when no rule is broken.
///
/// # Errors
/// Every violation in every file, files in the given order and each file's diagnostics in
/// source order, then directory-level ones.
pub fn validate(files: &[SourceFile], dir_path: &str) -> Result<Vec<Entry>, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut entries = Vec::new();
    // Every id seen (valid or not), for the directory-wide rules.
    let mut ids: Vec<(String, Spanned<String>, Arc<SourceText>)> = Vec::new();
    let mut has_result_channel = false;
    for file in parallel_map(files, check_file) {
        has_result_channel |= file.result_channel;
        ids.extend(file.id);
        entries.extend(file.entry);
        diags.extend(file.diags);
    }
    check_unique_ids(&ids, &mut diags);
    if files.is_empty() {
        diags.push(dir_diag(
            Rule::RegistryEmpty,
            dir_path,
            "the registry directory holds no `.toml` file".into(),
            "add one `<id>.toml` file per MCP server; other files are ignored".into(),
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
    if diags.is_empty() {
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(entries)
    } else {
        Err(diags)
    }
}

/// What one file contributes to [`validate`].
struct CheckedFile {
    /// Its diagnostics, in source order.
    diags: Vec<Diagnostic>,
    /// Its entry, when the file broke no rule.
    entry: Option<Entry>,
    /// `(path, id, source)` for the directory-wide rules, when it has a string `id`.
    id: Option<(String, Spanned<String>, Arc<SourceText>)>,
    /// Its stem or its id is the result channel's.
    result_channel: bool,
}

/// Every rule that concerns one file alone.
fn check_file(file: &SourceFile) -> CheckedFile {
    let mut result_channel = file.stem == RESULT_CHANNEL_ID;
    let mut id = None;
    let mut entry = None;
    let mut cx = FileCx {
        path: &file.path,
        source: Arc::new(SourceText::new(String::new())),
        diags: Vec::new(),
    };
    if let Some(raw) = cx.parse(&file.bytes) {
        if let Some(raw_id) = &raw.id {
            result_channel |= raw_id.get_ref() == RESULT_CHANNEL_ID;
            id = Some((file.path.clone(), raw_id.clone(), cx.source.clone()));
        }
        let checked = cx.check_entry(raw, &file.stem);
        if cx.diags.is_empty() {
            entry = checked;
        }
    }
    cx.diags
        .sort_by_key(|d| d.span.as_ref().map_or(0, |s| s.start));
    CheckedFile {
        diags: cx.diags,
        entry,
        id,
        result_channel,
    }
}

fn dir_diag(rule: Rule, path: &str, message: String, help: String) -> Diagnostic {
    Diagnostic {
        rule,
        path: path.to_string(),
        span: None,
        source: None,
        message,
        help,
    }
}

/// Rule `id-unique`: a later file whose id equals an earlier one's, ignoring ASCII case.
fn check_unique_ids(
    ids: &[(String, Spanned<String>, Arc<SourceText>)],
    diags: &mut Vec<Diagnostic>,
) {
    // A file whose id is canonical and matches its name keeps the id; the other is blamed.
    let proper = |(path, id, _): &(String, Spanned<String>, Arc<SourceText>)| {
        is_canonical_id(id.get_ref())
            && Path::new(path)
                .file_stem()
                .is_some_and(|s| s == id.get_ref().as_str())
    };
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by_key(|&i| !proper(&ids[i]));
    let mut first_of: HashMap<String, usize> = HashMap::with_capacity(ids.len());
    for i in order {
        let (path, id, source) = &ids[i];
        let first = *first_of
            .entry(id.get_ref().to_ascii_lowercase())
            .or_insert(i);
        if first == i {
            continue;
        }
        let (first_path, first_id, _) = &ids[first];
        diags.push(Diagnostic {
            rule: Rule::IdUnique,
            path: path.clone(),
            span: Some(id.span()),
            source: Some(source.clone()),
            message: if first_id.get_ref() == id.get_ref() {
                format!(
                    "id `{}` is already used in {}",
                    printable(id.get_ref()),
                    printable(first_path)
                )
            } else {
                format!(
                    "id `{}` is already used as `{}` in {} (ids are compared ignoring case)",
                    printable(id.get_ref()),
                    printable(first_id.get_ref()),
                    printable(first_path)
                )
            },
            help: "give each MCP server its own id, or delete the duplicate file".into(),
        });
    }
}

/// A tool table as parsed, before the cross-key rules.
struct RawTool {
    name: Option<Spanned<String>>,
    unattended_safe: Option<Spanned<bool>>,
}

/// A registry file's keys as parsed; `None` where the key is absent or has the wrong type.
#[derive(Default)]
struct RawEntry {
    id: Option<Spanned<String>>,
    description: Option<Spanned<String>>,
    args: Option<Vec<String>>,
    starts_flows: Option<Spanned<bool>>,
    allowlistable: Option<Spanned<bool>>,
    read_only: Option<Spanned<bool>>,
    needs_project_cwd: Option<Spanned<bool>>,
    env: Option<Vec<(String, Spanned<EnvSource>)>>,
    tools: Option<Vec<RawTool>>,
}

/// Checks one file, collecting its diagnostics.
struct FileCx<'a> {
    path: &'a str,
    source: Arc<SourceText>,
    diags: Vec<Diagnostic>,
}

impl FileCx<'_> {
    fn report(&mut self, rule: Rule, span: Range<usize>, message: String, help: String) {
        self.diags.push(Diagnostic {
            rule,
            path: self.path.to_string(),
            span: Some(span),
            source: Some(self.source.clone()),
            message,
            help,
        });
    }

    /// Rules `toml-utf8`, `toml-syntax`, `unknown-key`, `wrong-type`, `missing-key`, and the
    /// per-value format rules. `None` when the file is not TOML at all.
    fn parse(&mut self, bytes: &[u8]) -> Option<RawEntry> {
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
        let text = match std::str::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                self.source =
                    Arc::new(SourceText::new(String::from_utf8_lossy(bytes).into_owned()));
                let at = e.valid_up_to();
                self.report(
                    Rule::TomlUtf8,
                    at..at + char::REPLACEMENT_CHARACTER.len_utf8(),
                    "the file is not valid UTF-8".into(),
                    "save the file as UTF-8 (TOML requires it)".into(),
                );
                return None;
            }
        };
        self.source = Arc::new(SourceText::new(text.to_owned()));
        let source = self.source.clone();
        let (table, errors) = DeTable::parse_recoverable(source.text());
        if !errors.is_empty() {
            let mut seen: Vec<(Range<usize>, String)> = Vec::new();
            for e in errors {
                let span = e.span().unwrap_or(0..0);
                let message = printable(e.message().trim_end()).into_owned();
                // The recovering parser can report one mistake twice.
                if seen.contains(&(span.clone(), message.clone())) {
                    continue;
                }
                seen.push((span.clone(), message.clone()));
                self.report(
                    Rule::TomlSyntax,
                    span,
                    format!("invalid TOML: {message}"),
                    "fix the TOML syntax (TOML 1.1, a superset of 1.0: https://toml.io/en/v1.1.0)"
                        .into(),
                );
            }
            return None;
        }
        let mut raw = RawEntry::default();
        let mut misspelled = Vec::new();
        let table = table.into_inner();
        for (k, v) in sorted(&table) {
            let Some(spec) = ENTRY_KEYS.iter().find(|s| s.name == k.get_ref().as_ref()) else {
                misspelled.extend(self.unknown_key(k, &ENTRY_KEYS, ""));
                continue;
            };
            let n = spec.name;
            match n {
                "id" => raw.id = self.string(v, n),
                "description" => raw.description = self.description(v),
                "args" => raw.args = self.args(v),
                "starts_flows" => raw.starts_flows = self.bool(v, n),
                "allowlistable" => raw.allowlistable = self.bool(v, n),
                "read_only" => raw.read_only = self.bool(v, n),
                "needs_project_cwd" => raw.needs_project_cwd = self.bool(v, n),
                "env" => raw.env = self.env(v),
                _ => raw.tools = self.tools(v),
            }
        }
        self.missing_keys(&table, &ENTRY_KEYS, &misspelled, 0..0, "");
        Some(raw)
    }

    /// Rule `unknown-key`. Returns the suggested key, if any.
    fn unknown_key(
        &mut self,
        k: &Spanned<std::borrow::Cow<'_, str>>,
        keys: &[KeySpec],
        at: &str,
    ) -> Option<&'static str> {
        let name = k.get_ref().as_ref();
        let valid = keys.iter().map(|s| s.name).collect::<Vec<_>>().join(", ");
        let suggestion = did_you_mean(name, keys.iter().map(|s| s.name));
        let help = match suggestion {
            Some(s) => format!("did you mean `{s}`? (valid keys{at}: {valid})"),
            None => format!("remove it (valid keys{at}: {valid})"),
        };
        self.report(
            Rule::UnknownKey,
            k.span(),
            format!("unknown key `{}`{at}", printable(name)),
            help,
        );
        suggestion
    }

    /// Rule `missing-key`, except for keys an unknown key was taken for (a misspelling is
    /// reported once, as `unknown-key`).
    fn missing_keys(
        &mut self,
        table: &DeTable<'_>,
        keys: &[KeySpec],
        misspelled: &[&str],
        span: Range<usize>,
        at: &str,
    ) {
        for spec in keys.iter().filter(|s| s.required) {
            if !table.keys().any(|k| k.get_ref() == spec.name) && !misspelled.contains(&spec.name) {
                let help = if spec.name == "starts_flows" {
                    "add `starts_flows = true` or `starts_flows = false`: it must be explicit"
                        .into()
                } else {
                    format!("add `{}`, {}", spec.name, spec.kind.describe())
                };
                self.report(
                    Rule::MissingKey,
                    span.clone(),
                    format!("required key `{}` is missing{at}", spec.name),
                    help,
                );
            }
        }
    }

    fn wrong_type(&mut self, v: &Spanned<DeValue<'_>>, what: &str, kind: ValueKind) {
        self.wrong_type_as(v, what, kind.describe());
    }

    /// Rule `wrong-type`: `what` must be `expected` (e.g. "a boolean").
    fn wrong_type_as(&mut self, v: &Spanned<DeValue<'_>>, what: &str, expected: &str) {
        self.report(
            Rule::WrongType,
            v.span(),
            format!(
                "`{what}` must be {expected}, found {}",
                article(v.get_ref().type_str())
            ),
            format!("write `{what}` as {expected}"),
        );
    }

    fn string(&mut self, v: &Spanned<DeValue<'_>>, what: &str) -> Option<Spanned<String>> {
        match v.get_ref() {
            DeValue::String(s) => Some(Spanned::new(v.span(), s.to_string())),
            _ => {
                self.wrong_type(v, what, ValueKind::String);
                None
            }
        }
    }

    fn bool(&mut self, v: &Spanned<DeValue<'_>>, what: &str) -> Option<Spanned<bool>> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(Spanned::new(v.span(), *b)),
            _ => {
                self.wrong_type(v, what, ValueKind::Bool);
                None
            }
        }
    }

    fn description(&mut self, v: &Spanned<DeValue<'_>>) -> Option<Spanned<String>> {
        let d = self.string(v, "description")?;
        let chars = d.get_ref().chars().count();
        let problem = if chars == 0 {
            Some("is empty".to_string())
        } else if chars > MAX_DESCRIPTION_CHARS {
            Some(format!("is {chars} characters long"))
        } else {
            d.get_ref()
                .chars()
                .find(|&c| is_forbidden_char(c))
                .map(|c| {
                    format!(
                        "contains {}, a control or invisible character",
                        c.escape_unicode()
                    )
                })
        };
        match problem {
            Some(p) => {
                self.report(
                    Rule::DescriptionFormat,
                    d.span(),
                    format!("`description` {p}"),
                    format!(
                        "write one line of 1 to {MAX_DESCRIPTION_CHARS} characters without control, invisible or line-break characters"
                    ),
                );
                None
            }
            None => Some(d),
        }
    }

    fn args(&mut self, v: &Spanned<DeValue<'_>>) -> Option<Vec<String>> {
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong_type(v, "args", ValueKind::StringArray);
            return None;
        };
        if items.is_empty() {
            self.report(
                Rule::ArgsFormat,
                v.span(),
                "`args` is empty".into(),
                "list the argv after the kcap binary, e.g. `args = [\"mcp\", \"review\"]`".into(),
            );
            return None;
        }
        let mut out = Vec::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let Some(s) = self.string(item, &format!("args[{i}]")) else {
                ok = false;
                continue;
            };
            let problem = if s.get_ref().is_empty() {
                Some("is empty".to_string())
            } else if let Some(c) = s.get_ref().chars().find(|&c| is_forbidden_char(c)) {
                Some(format!(
                    "contains {}, a control or invisible character",
                    c.escape_unicode()
                ))
            } else if s.get_ref().contains("${") {
                Some("contains `${`, which Claude Code expands as a variable reference".into())
            } else {
                None
            };
            if let Some(p) = problem {
                ok = false;
                self.report(
                    Rule::ArgsFormat,
                    s.span(),
                    format!("`args[{i}]` {p}"),
                    "write each argument as a non-empty, single-line string without `${`".into(),
                );
            }
            out.push(s.into_inner());
        }
        ok.then_some(out)
    }

    fn env(&mut self, v: &Spanned<DeValue<'_>>) -> Option<Vec<(String, Spanned<EnvSource>)>> {
        let DeValue::Table(table) = v.get_ref() else {
            self.wrong_type(v, "env", ValueKind::EnvTable);
            return None;
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (k, val) in sorted(table) {
            let name = k.get_ref().to_string();
            if !is_env_name(&name) {
                ok = false;
                self.report(
                    Rule::EnvName,
                    k.span(),
                    format!(
                        "env name `{}` does not match {ENV_NAME_PATTERN}",
                        printable(&name)
                    ),
                    "use upper-case ASCII letters, digits and `_`, starting with a letter".into(),
                );
            }
            let what = format!("env.{}", printable(&name));
            let Some(src) = self.string(val, &what) else {
                ok = false;
                continue;
            };
            match EnvSource::from_name(src.get_ref()) {
                Some(s) => out.push((name, Spanned::new(src.span(), s))),
                None => {
                    ok = false;
                    let names = EnvSource::ALL.map(|s| s.name());
                    let hint = did_you_mean(src.get_ref(), names.iter().copied())
                        .map_or(String::new(), |s| format!("did you mean `\"{s}\"`? "));
                    self.report(
                        Rule::EnvSource,
                        src.span(),
                        format!(
                            "unknown env source `{}` for `{what}`",
                            printable(src.get_ref())
                        ),
                        format!("{hint}the source is `\"server_url\"` or `\"agent_id\"`"),
                    );
                }
            }
        }
        ok.then_some(out)
    }

    fn tools(&mut self, v: &Spanned<DeValue<'_>>) -> Option<Vec<RawTool>> {
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong_type(v, "tools", ValueKind::ToolArray);
            return None;
        };
        let mut out = Vec::new();
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let DeValue::Table(table) = item.get_ref() else {
                ok = false;
                self.wrong_type_as(item, &format!("tools[{i}]"), "a [[tools]] table");
                continue;
            };
            let at = format!(" in tools[{i}]");
            let mut tool = RawTool {
                name: None,
                unattended_safe: None,
            };
            let mut misspelled = Vec::new();
            for (k, val) in sorted(table) {
                match k.get_ref().as_ref() {
                    "name" => tool.name = self.tool_name(val, i, &out),
                    "unattended_safe" => {
                        tool.unattended_safe =
                            self.bool(val, &format!("tools[{i}].unattended_safe"))
                    }
                    _ => misspelled.extend(self.unknown_key(k, &TOOL_KEYS, &at)),
                }
            }
            self.missing_keys(table, &TOOL_KEYS, &misspelled, item.span(), &at);
            ok &= tool.name.is_some();
            out.push(tool);
        }
        ok.then_some(out)
    }

    fn tool_name(
        &mut self,
        v: &Spanned<DeValue<'_>>,
        i: usize,
        earlier: &[RawTool],
    ) -> Option<Spanned<String>> {
        let name = self.string(v, &format!("tools[{i}].name"))?;
        if !is_tool_name(name.get_ref()) {
            self.report(
                Rule::ToolName,
                name.span(),
                format!(
                    "tool name `{}` does not match {TOOL_NAME_PATTERN}",
                    printable(name.get_ref())
                ),
                "use 1 to 128 ASCII letters, digits, `_`, `.` or `-`".into(),
            );
            return None;
        }
        if earlier.iter().any(|t| {
            t.name
                .as_ref()
                .is_some_and(|n| n.get_ref() == name.get_ref())
        }) {
            self.report(
                Rule::ToolUnique,
                name.span(),
                format!("tool `{}` is listed twice", name.get_ref()),
                "remove the second `[[tools]]` table for it".into(),
            );
            return None;
        }
        Some(name)
    }

    /// The rules that relate keys to each other and to the file name. Returns the entry when
    /// every required key parsed.
    fn check_entry(&mut self, raw: RawEntry, stem: &str) -> Option<Entry> {
        if let Some(id) = &raw.id {
            self.check_id(id, stem);
        }
        let allowlistable = raw.allowlistable.as_ref().is_none_or(|a| *a.get_ref());
        let read_only = raw.read_only.as_ref().is_some_and(|r| *r.get_ref());
        let starts_flows = raw.starts_flows.as_ref().is_some_and(|s| *s.get_ref());
        let is_result_channel = raw
            .id
            .as_ref()
            .is_some_and(|id| id.get_ref() == RESULT_CHANNEL_ID);

        if is_result_channel && allowlistable {
            let span = raw
                .allowlistable
                .as_ref()
                .map_or_else(|| raw.id.as_ref().map_or(0..0, |i| i.span()), |a| a.span());
            self.report(
                Rule::ResultChannelAllowlistable,
                span,
                format!("`{RESULT_CHANNEL_ID}` is the reserved result channel and must not be allowlistable"),
                "set `allowlistable = false`: the launcher injects the result channel itself".into(),
            );
        }
        if let (true, Some(s)) = (
            is_result_channel,
            raw.starts_flows.as_ref().filter(|s| *s.get_ref()),
        ) {
            self.report(
                Rule::ResultChannelStartsFlows,
                s.span(),
                format!(
                    "`{RESULT_CHANNEL_ID}` is injected into every reviewer and must not start flows"
                ),
                "set `starts_flows = false`".into(),
            );
        }
        if let (Some(env), true) = (&raw.env, allowlistable) {
            for (name, src) in env
                .iter()
                .filter(|(_, s)| *s.get_ref() == EnvSource::AgentId)
            {
                self.report(
                    Rule::AgentIdInjectionOnly,
                    src.span(),
                    format!("`env.{name}` takes the agent id, but this entry is allowlistable"),
                    "only `allowlistable = false` entries may receive the agent id: use `\"server_url\"` or set `allowlistable = false`".into(),
                );
            }
        }
        if let (true, Some(r)) = (
            starts_flows,
            raw.read_only.as_ref().filter(|r| *r.get_ref()),
        ) {
            self.report(
                Rule::StartsFlowsReadOnly,
                r.span(),
                "an entry with `starts_flows = true` cannot be `read_only`: starting a flow is a side effect".into(),
                "set `read_only = false` (or remove it)".into(),
            );
        }
        for tool in raw.tools.iter().flatten() {
            let Some(safe) = tool.unattended_safe.as_ref().filter(|s| *s.get_ref()) else {
                continue;
            };
            let name = tool.name.as_ref().map_or("?", |n| n.get_ref().as_str());
            if starts_flows {
                self.report(
                    Rule::StartsFlowsUnattendedSafe,
                    safe.span(),
                    format!("tool `{name}` is `unattended_safe`, but its server can start flows"),
                    "set `unattended_safe = false`: starting flows always needs approval".into(),
                );
            } else if allowlistable && !read_only {
                self.report(
                    Rule::UnattendedSafeScope,
                    safe.span(),
                    format!("tool `{name}` is `unattended_safe`, but its server is neither `read_only` nor injection-only"),
                    "set `unattended_safe = false`, or mark the server `read_only = true` if every tool is side-effect free".into(),
                );
            }
        }
        Some(Entry {
            id: raw.id?.into_inner(),
            description: raw.description?.into_inner(),
            args: raw.args?,
            starts_flows: *raw.starts_flows?.get_ref(),
            allowlistable,
            read_only,
            needs_project_cwd: raw.needs_project_cwd.is_some_and(|n| *n.get_ref()),
            env: raw
                .env
                .unwrap_or_default()
                .into_iter()
                .map(|(n, s)| (n, s.into_inner()))
                .collect(),
            tools: raw
                .tools
                .unwrap_or_default()
                .into_iter()
                .map(|t| ToolEntry {
                    name: t.name.map(Spanned::into_inner).unwrap_or_default(),
                    unattended_safe: t.unattended_safe.is_some_and(|s| *s.get_ref()),
                })
                .collect(),
        })
    }

    /// Rules `id-canonical` and `id-file-stem`.
    fn check_id(&mut self, id: &Spanned<String>, stem: &str) {
        let s = id.get_ref();
        if !is_canonical_id(s) {
            let lower = s.trim().to_ascii_lowercase();
            let help = if is_canonical_id(&lower) {
                format!("write it as `{lower}` (and name the file `{lower}.toml`)")
            } else {
                format!(
                    "use 2 to {MAX_ID_LEN} lower-case ASCII letters, digits and `-`, starting with a letter and not ending with `-`"
                )
            };
            self.report(
                Rule::IdCanonical,
                id.span(),
                format!(
                    "id `{}` is not canonical ({ID_PATTERN}, at most {MAX_ID_LEN} bytes)",
                    printable(s)
                ),
                help,
            );
        } else if s != stem {
            self.report(
                Rule::IdFileStem,
                id.span(),
                format!(
                    "id `{s}` does not match the file name `{}.toml`",
                    printable(stem)
                ),
                if is_canonical_id(stem) {
                    format!("rename the file to `{s}.toml`, or set `id = \"{stem}\"`")
                } else {
                    format!("rename the file to `{s}.toml`")
                },
            );
        }
    }
}

/// A table's entries in source order (the parser's map is sorted by key).
fn sorted<'t, 'i>(
    table: &'t DeTable<'i>,
) -> Vec<(
    &'t Spanned<std::borrow::Cow<'i, str>>,
    &'t Spanned<DeValue<'i>>,
)> {
    let mut items: Vec<_> = table.iter().collect();
    items.sort_by_key(|(k, _)| k.span().start);
    items
}

/// "a string", "an integer", "an array", …
fn article(type_name: &str) -> String {
    let a = if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{a} {type_name}")
}

/// The closest candidate to `name` by Jaro-Winkler similarity (at least 0.8), as clap does.
fn did_you_mean<'c>(name: &str, candidates: impl Iterator<Item = &'c str>) -> Option<&'c str> {
    candidates
        .map(|c| (strsim::jaro_winkler(name, c), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}
