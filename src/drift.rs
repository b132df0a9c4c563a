//! Drift between the registry and a client's registration file (`check --against FILE`).
//!
//! The registry's side is [`registrations`] (every allowlistable entry), each expected to run
//! `command` (the kcap binary, `kcap` unless told otherwise) with its `args`: exactly what the
//! registration exports write. The file's side is not guessed here: each client's loader
//! model says what that client does with the file ([`crate::clients::claude::loader`],
//! [`crate::clients::codex::loader`]): which servers it starts, with which command and args,
//! which entries it skips, and whether it refuses the file (or one scope of it) as a whole.
//! Drift is the difference, and each finding is named by what the client will do, at the
//! `line:column` of the value responsible:
//!
//! - `drift-rejected`: the client refuses the file or a scope of it (none of its servers
//!   start);
//! - `drift-skipped`: the client skips a registry server's entry;
//! - `drift-disabled`: the client lists a registry server but does not start it;
//! - `drift-remote`: the client connects to a URL instead of running the kcap command;
//! - `drift-command`, `drift-args`: it runs another command or other args;
//! - `drift-tools`: it starts the server but hides some of its tools;
//! - `drift-expansion`: it expands `${…}` in the server's values, so what runs depends on
//!   each session's environment;
//! - `drift-missing`, `drift-extra`: a registry server it does not know of, or a server it
//!   starts that is not one of the registry's registrations;
//! - `drift-duplicate`: a server named twice in one scope of a JSON file; the client runs the
//!   later entry, so the earlier one (reported) hides what runs from a reader of the file.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::clients::Client;
use crate::clients::claude::loader::{self as claude, ClaudeFile};
use crate::clients::codex::loader as codex;
use crate::clients::loaded::{Loaded, Span};
use crate::clients::{
    antigravity::loader as antigravity, copilot::loader as copilot, cursor::loader as cursor,
    gemini::loader as gemini, kiro::loader as kiro, opencode::loader as opencode,
};
use crate::diagnostic::{Location, SourceText};
use crate::export::registrations;
use crate::report::Finding;
use crate::schema::RegistryEntry;
use crate::text::ShownPath;

/// The client's display name in findings: `Claude Code`, `Codex CLI`.
pub const fn client_name(client: Client) -> &'static str {
    client.display_name()
}

/// What `check --against` needs besides the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgainstOptions {
    /// Claude Code: the project directory a session runs in. For a `~/.claude.json`, the
    /// local scope of this project is merged over the user scope; without it, each project
    /// the file holds a local scope for is checked in turn (and the user scope alone when
    /// there is none), and the user scope alone as well when it registers any server. For a
    /// `.mcp.json`, servers run in it.
    pub project: Option<String>,
    /// Codex CLI: the profile (`--profile NAME`), read from `NAME.config.toml` next to the
    /// file and merged over it.
    pub codex_profile: Option<String>,
    /// The client that reads the file; `None` tells it from the file ([`detect_client`]).
    pub client: Option<Client>,
}

/// One effective server set checked: a file, or one project's view of a `~/.claude.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The file, as the user named it.
    pub path: String,
    /// The client that reads it.
    pub client: Client,
    /// The project whose view this is (`~/.claude.json` local scopes), if any.
    pub project: Option<String>,
    /// What the client's loader model says.
    pub loaded: Loaded,
    /// The differences from the registry.
    pub drift: Vec<Drift>,
}

/// A registration file that could not be read, or whose client cannot be told.
///
/// `Display` names the file and what went wrong with it; an I/O error is returned from
/// [`source`](std::error::Error::source), not displayed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RegistrationError {
    /// The file (or a Codex profile file next to it) cannot be read.
    Read {
        /// The path as the user gave it (or the profile file's).
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Which client reads the file cannot be told ([`detect_client`]).
    UnknownClient {
        /// The path as the user gave it.
        path: PathBuf,
        /// Why neither client's format fits.
        why: String,
    },
}

impl fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistrationError::Read { path, .. } => write!(f, "cannot read {}", ShownPath(path)),
            RegistrationError::UnknownClient { path, why } => {
                write!(f, "{}: {why}", ShownPath(path))
            }
        }
    }
}

impl std::error::Error for RegistrationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegistrationError::Read { source, .. } => Some(source),
            RegistrationError::UnknownClient { .. } => None,
        }
    }
}

/// Which client reads `path` holding `text`.
///
/// By the file's name first, as each client names it (facts, "Registration"):
/// `opencode.json`/`opencode.jsonc` is OpenCode's, `mcp-config.json` Copilot CLI's,
/// `mcp_config.json` Antigravity's, `settings.json` in a `.gemini` directory Gemini CLI's,
/// `mcp.json` in a `.cursor` directory Cursor's and in a `settings` directory (`.kiro/settings`)
/// Kiro's. Then by extension: other `.json` files are Claude Code's, `.toml` files Codex CLI's.
/// Otherwise by content: strict JSON is Claude Code's, TOML Codex CLI's. A file named
/// otherwise is checked as another client's with `--client`.
///
/// # Errors
/// A sentence saying why no client fits.
pub fn detect_client(path: &Path, text: &str) -> Result<Client, String> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let parent = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("");
    match (parent, name) {
        (_, "opencode.json" | "opencode.jsonc") => return Ok(Client::OpenCode),
        (_, "mcp-config.json") => return Ok(Client::Copilot),
        (_, "mcp_config.json") => return Ok(Client::Antigravity),
        (".gemini", "settings.json") => return Ok(Client::Gemini),
        (".cursor", "mcp.json") => return Ok(Client::Cursor),
        ("settings", "mcp.json") => return Ok(Client::Kiro),
        _ => {}
    }
    match path.extension().and_then(|e| e.to_str()) {
        Some("json") => return Ok(Client::Claude),
        Some("toml") => return Ok(Client::Codex),
        _ => {}
    }
    let text = crate::decode::strip_bom(text);
    let json = serde_json::from_str::<serde::de::IgnoredAny>(text);
    if json.is_ok() {
        return Ok(Client::Claude);
    }
    match toml::from_str::<toml::Table>(text) {
        Ok(_) => Ok(Client::Codex),
        Err(toml_err) => Err(format!(
            "is neither a Claude Code .mcp.json or ~/.claude.json (JSON) nor a Codex config.toml \
             (TOML): it is not JSON ({}) and not TOML ({}); name it *.json or *.toml to have \
             it checked as that client's file, or name the client with `--client`",
            json.err().map(|e| e.to_string()).unwrap_or_default(),
            toml_err.message().trim_end()
        )),
    }
}

/// Reads `path` and checks every effective server set in it against `entries` (see
/// [`AgainstOptions`]).
///
/// # Errors
/// [`RegistrationError`] when the file (or the named Codex profile file) cannot be read or
/// its client cannot be told. Everything the client itself refuses is a `drift-rejected`
/// finding instead.
pub fn check_against(
    entries: &[RegistryEntry],
    command: &str,
    path: &Path,
    opts: &AgainstOptions,
) -> Result<Vec<Checked>, RegistrationError> {
    let shown = path.display().to_string();
    let bytes = crate::decode::read_regular(path).map_err(|source| RegistrationError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let client = match opts.client {
        Some(client) => client,
        None => detect_client(path, &text).map_err(|why| RegistrationError::UnknownClient {
            path: path.to_path_buf(),
            why,
        })?,
    };
    let env = |name: &str| std::env::var(name).ok();
    let mut out = Vec::new();
    let mut texts: Option<Vec<SourceText>> = None;
    let mut push = |project: Option<String>, loaded: Loaded| {
        // Every verdict on one file shares its text (one per ~/.claude.json project): index
        // its lines once.
        let texts = match &texts {
            Some(t) if t.len() == loaded.sources.len() => t,
            _ => texts.insert(source_texts(&loaded)),
        };
        let mut drift = drift_in(entries, command, client, project.as_deref(), &loaded, texts);
        // A verdict with no source (the file is not UTF-8) still names the file.
        for d in &mut drift {
            if d.file.is_empty() {
                d.file.clone_from(&shown);
            }
        }
        out.push(Checked {
            path: shown.clone(),
            client,
            project,
            loaded,
            drift,
        });
    };
    match client {
        Client::Claude => {
            for (project, loaded) in claude_verdicts(&shown, &bytes, &text, opts, &env) {
                push(project, loaded);
            }
        }
        Client::Codex => {
            let profile = codex_profile(path, opts)?;
            let loaded = codex::load(
                &shown,
                &bytes,
                profile
                    .as_ref()
                    .map(|p| (p.name.as_str(), p.shown.as_str(), p.bytes.as_deref())),
            );
            push(None, loaded);
        }
        Client::Gemini => push(None, gemini::load(&shown, &bytes, &env)),
        Client::OpenCode => push(None, opencode::load(&shown, &bytes, &env)),
        Client::Copilot => push(None, copilot::load(&shown, &bytes, &env)),
        Client::Cursor => push(None, cursor::load(&shown, &bytes)),
        Client::Kiro => push(None, kiro::load(&shown, &bytes)),
        Client::Antigravity => push(None, antigravity::load(&shown, &bytes)),
    }
    // A server named twice: the client runs the later entry (`JSON.parse`), and a reader of
    // the file may see only the earlier one. Reported once per file, with the first verdict.
    if client != Client::Codex
        && let Some(first) = out.first_mut()
        && let Ok(text) = crate::decode::decode_utf8(&bytes)
    {
        let block = client.registration().block;
        let found = duplicate_servers(text, block, client == Client::Claude);
        if !found.is_empty() {
            let source = SourceText::new(text.to_string());
            let dups = found.into_iter().map(|(scope, name, range)| {
                let (line, column) = source.line_column(range.start);
                let (end_line, end_column) = source.line_column(range.end);
                Drift {
                    file: shown.clone(),
                    client,
                    project: None,
                    server: name,
                    kind: DriftKind::Duplicate { scope },
                    location: Location {
                        line,
                        column,
                        end_line,
                        end_column,
                    },
                }
            });
            first.drift.splice(0..0, dups);
        }
    }
    Ok(out)
}

/// The verdicts on a Claude Code file: a project `.mcp.json` once; a `~/.claude.json` for its
/// user scope alone first (a project that overrides a broken user-scope entry must not hide
/// it: every other project runs it), then for each project (or only `opts.project`). Each
/// verdict comes with the project it is labelled with.
fn claude_verdicts(
    shown: &str,
    bytes: &[u8],
    text: &str,
    opts: &AgainstOptions,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<(Option<String>, Loaded)> {
    let is_user = Path::new(shown)
        .file_name()
        .is_some_and(|n| n == ".claude.json")
        || ClaudeFile::detect(text) == ClaudeFile::UserConfig;
    let file = if is_user {
        ClaudeFile::UserConfig
    } else {
        ClaudeFile::ProjectMcpJson
    };
    let projects = match (&opts.project, file) {
        (Some(p), _) => vec![Some(p.clone())],
        (None, ClaudeFile::UserConfig) => std::iter::once(None)
            .chain(claude::local_scope_projects(bytes).into_iter().map(Some))
            .collect(),
        (None, ClaudeFile::ProjectMcpJson) => vec![None],
    };
    let dirs: Vec<Option<&str>> = projects.iter().map(Option::as_deref).collect();
    let verdicts = claude::load_many(shown, bytes, file, &dirs, env);
    let several = dirs.len() > 1;
    projects
        .into_iter()
        .zip(verdicts)
        .filter(|(project, loaded)| {
            // A user scope that registers nothing at all beside the local scopes is not
            // checked alone: kcap is then registered per project.
            let nothing = loaded.started.is_empty()
                && loaded.remote.is_empty()
                && loaded.skipped.is_empty()
                && loaded.rejected.is_empty();
            !(several && project.is_none() && nothing)
        })
        .map(|(project, loaded)| (project.filter(|_| file == ClaudeFile::UserConfig), loaded))
        .collect()
}

/// A Codex profile file read for `check --against --codex-profile NAME`.
struct CodexProfile {
    name: String,
    /// Its path, as shown in findings.
    shown: String,
    /// Its bytes; `None` when it does not exist.
    bytes: Option<Vec<u8>>,
}

/// The Codex profile file `opts.codex_profile` names, beside `path`.
///
/// # Errors
/// [`RegistrationError::Read`] when it exists but cannot be read.
fn codex_profile(
    path: &Path,
    opts: &AgainstOptions,
) -> Result<Option<CodexProfile>, RegistrationError> {
    let Some(name) = &opts.codex_profile else {
        return Ok(None);
    };
    let file = path
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("{name}.config.toml"));
    let bytes = match crate::decode::read_regular(&file) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(RegistrationError::Read { path: file, source }),
    };
    Ok(Some(CodexProfile {
        name: name.clone(),
        shown: file.display().to_string(),
        bytes,
    }))
}

/// The shadowed copies of server entries named twice in `text`'s `block` object (and, with
/// `claude_projects`, in each `projects.<dir>.mcpServers`): the scope (`the user scope`,
/// `the local scope of /p`, `the file`), the name, and the byte range of each earlier key.
/// Read leniently (comments and trailing commas allowed): a file the client refuses is
/// reported as such, not here.
fn duplicate_servers(
    text: &str,
    block: &str,
    claude_projects: bool,
) -> Vec<(String, String, std::ops::Range<usize>)> {
    use jsonc_parser::ast::{Object, ObjectPropName, Value};
    let options = jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        ..Default::default()
    };
    let Ok(parsed) = jsonc_parser::parse_to_ast(text, &Default::default(), &options) else {
        return Vec::new();
    };
    let Some(Value::Object(root)) = parsed.value else {
        return Vec::new();
    };
    let name_of = |p: &jsonc_parser::ast::ObjectProp<'_>| match &p.name {
        ObjectPropName::String(s) => (s.value.to_string(), s.range.start..s.range.end),
        ObjectPropName::Word(w) => (w.value.to_string(), w.range.start..w.range.end),
    };
    let mut out = Vec::new();
    let scan = |obj: &Object<'_>, scope: &str, out: &mut Vec<_>| {
        for p in obj.properties.iter().filter(|p| name_of(p).0 == block) {
            let Value::Object(servers) = &p.value else {
                continue;
            };
            let mut last: std::collections::HashMap<String, usize> =
                std::collections::HashMap::new();
            for (i, s) in servers.properties.iter().enumerate() {
                last.insert(name_of(s).0, i);
            }
            for (i, s) in servers.properties.iter().enumerate() {
                let (name, range) = name_of(s);
                if last.get(&name) != Some(&i) {
                    out.push((scope.to_string(), name, range));
                }
            }
        }
    };
    let top = if claude_projects && root.get("projects").is_some() {
        "the user scope"
    } else {
        "the file"
    };
    scan(&root, top, &mut out);
    if claude_projects && let Some(Value::Object(projects)) = root.get("projects").map(|p| &p.value)
    {
        for p in &projects.properties {
            if let Value::Object(project) = &p.value {
                let scope = format!("the local scope of {}", name_of(p).0);
                scan(project, &scope, &mut out);
            }
        }
    }
    out
}

/// Whether `client` treats the server entries `a` and `b` (JSON, as in its registration
/// file's block) the same: byte-for-byte the same value, or both started by its loader model
/// with the same command, args, env, working directory and tool filters (or both reached at
/// the same URL), where every key in which they differ is one the loader model reads (and so
/// compared through what it starts) or one the client ignores (Claude Code:
/// [`claude::ENTRY_KEYS`]; Codex CLI: keys outside [`codex::FIELDS`]). `install` adopts,
/// and `doctor` accepts, an entry the client treats as kcap's, whatever its spelling
/// (`"type": "stdio"`, `"env": {}`, no `description`).
pub fn same_to_client(
    client: Client,
    name: &str,
    a: &serde_json::Value,
    b: &serde_json::Value,
) -> bool {
    use serde_json::Value;
    if a == b {
        return true;
    }
    let (Value::Object(ma), Value::Object(mb)) = (a, b) else {
        return false;
    };
    const MODELLED: [&str; 8] = [
        "command",
        "args",
        "env",
        "type",
        "url",
        "cwd",
        "enabled_tools",
        "disabled_tools",
    ];
    // A key the client does not read is no difference to it.
    let ignored = |key: &str| {
        client
            .registration()
            .entry_keys
            .is_some_and(|keys| !keys.contains(&key))
    };
    let differing = ma
        .keys()
        .chain(mb.keys())
        .filter(|k| ma.get(*k) != mb.get(*k));
    for key in differing {
        if !MODELLED.contains(&key.as_str()) && !ignored(key) {
            return false;
        }
    }
    let view = |value: &Value| {
        let loaded = load_one(client, name, value)?;
        if !loaded.rejected.is_empty() || !loaded.skipped.is_empty() {
            return None;
        }
        match (loaded.started.as_slice(), loaded.remote.as_slice()) {
            ([s], []) if s.name == name && s.expanded.is_empty() => Some(format!(
                "{:?}",
                (
                    &s.command,
                    &s.args,
                    &s.env,
                    &s.cwd,
                    &s.enabled_tools,
                    &s.disabled_tools
                )
            )),
            ([], [r]) if r.name == name => Some(format!("url {:?}", r.url)),
            _ => None,
        }
    };
    match (view(a), view(b)) {
        (Some(va), Some(vb)) => va == vb,
        _ => false,
    }
}

/// What `client`'s loader model makes of a file holding only the entry `name` = `value` in
/// its block; `None` when that file cannot be written (a TOML value that has no TOML form).
fn load_one(client: Client, name: &str, value: &serde_json::Value) -> Option<Loaded> {
    let block = client.registration().block;
    let mut servers = serde_json::Map::new();
    servers.insert(name.to_string(), value.clone());
    let mut root = serde_json::Map::new();
    root.insert(block.to_string(), serde_json::Value::Object(servers));
    let root = serde_json::Value::Object(root);
    let no_env = |_: &str| None;
    let path = "entry";
    let json = || serde_json::to_vec(&root).ok();
    Some(match client {
        Client::Claude => claude::load(path, &json()?, ClaudeFile::ProjectMcpJson, None, &no_env),
        Client::Codex => {
            let text = toml::to_string(&root).ok()?;
            codex::load(path, text.as_bytes(), None)
        }
        Client::Gemini => gemini::load(path, &json()?, &no_env),
        Client::OpenCode => opencode::load(path, &json()?, &no_env),
        Client::Copilot => copilot::load(path, &json()?, &no_env),
        Client::Cursor => cursor::load(path, &json()?),
        Client::Kiro => kiro::load(path, &json()?),
        Client::Antigravity => antigravity::load(path, &json()?),
    })
}

/// How a registration file differs from the registry for one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriftKind {
    /// The client refuses the file or one scope of it.
    Rejected {
        /// What is refused (`the file`, `the user scope`, …).
        scope: String,
        /// The client's reason.
        reason: String,
    },
    /// The client skips the registry server's entry.
    Skipped {
        /// The client's reason.
        reason: String,
    },
    /// The client lists the server but does not start it (Codex `enabled = false`).
    Disabled,
    /// The client connects to a URL instead of running the command.
    Remote {
        /// The URL.
        url: String,
    },
    /// The registry lists the server; the client does not know it.
    Missing {
        /// The expected command.
        command: String,
        /// The expected args.
        args: Vec<String>,
    },
    /// The client starts a server that is not one of the registry's registrations.
    Extra {
        /// Set when the name is a registry entry that is not allowlistable (injection-only).
        injection_only: bool,
    },
    /// The client runs another command.
    Command {
        /// The expected command.
        expected: String,
        /// What the client runs.
        found: String,
    },
    /// The client passes other args.
    Args {
        /// The registry's args.
        expected: Vec<String>,
        /// What the client passes.
        found: Vec<String>,
    },
    /// The client starts the server but hides tools the registry lists.
    Tools {
        /// The hidden tools, in registry order.
        hidden: Vec<String>,
        /// The setting responsible, e.g. `enabled_tools = []`.
        setting: String,
    },
    /// The server is named twice in one scope: this earlier entry is shadowed by the later
    /// one, which the client runs.
    Duplicate {
        /// The scope (`the file`, `the user scope`, `the local scope of /p`).
        scope: String,
    },
    /// The client expands `${…}` in a value of the server.
    Expansion {
        /// The fields, e.g. `command`, `args[1]`.
        fields: Vec<String>,
    },
}

/// One difference between the registry and what a client does with a registration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    /// The file, as the user named it (a Codex profile file for a value from there).
    pub file: String,
    /// The client.
    pub client: Client,
    /// The `~/.claude.json` project whose view this is, if any.
    pub project: Option<String>,
    /// The server's name (empty for a rejected file or scope).
    pub server: String,
    /// How it differs.
    pub kind: DriftKind,
    /// Where in `file`.
    pub location: Location,
}

impl Drift {
    /// The stable rule name (see the module docs).
    pub const fn rule(&self) -> &'static str {
        match self.kind {
            DriftKind::Rejected { .. } => "drift-rejected",
            DriftKind::Skipped { .. } => "drift-skipped",
            DriftKind::Disabled => "drift-disabled",
            DriftKind::Remote { .. } => "drift-remote",
            DriftKind::Missing { .. } => "drift-missing",
            DriftKind::Extra { .. } => "drift-extra",
            DriftKind::Command { .. } => "drift-command",
            DriftKind::Args { .. } => "drift-args",
            DriftKind::Tools { .. } => "drift-tools",
            DriftKind::Expansion { .. } => "drift-expansion",
            DriftKind::Duplicate { .. } => "drift-duplicate",
        }
    }

    /// This drift as a [`Finding`] at its location, with a message saying what the client
    /// does and a help saying how to fix it.
    #[allow(
        clippy::too_many_lines,
        reason = "one message and help per drift kind, each worded for its client"
    )]
    pub fn finding(&self) -> Finding {
        let server = crate::text::printable(&self.server);
        let client = client_name(self.client);
        let file = crate::text::printable(&self.file);
        let file = match &self.project {
            Some(p) => format!("{file} (project {})", crate::text::printable(p)),
            None => file.into_owned(),
        };
        let export = self.client.name();
        let regenerate = format!("regenerate it with `kcap-mcp-registry export {export}`");
        let (message, help) = match &self.kind {
            DriftKind::Rejected { scope, reason } => (
                if scope == "the file" || scope == "the configuration" {
                    format!("{client} rejects this file, {file}: {reason}")
                } else {
                    format!("{client} rejects {scope} of {file}: {reason}")
                },
                format!("fix it: until then {client} starts none of the servers in {scope}"),
            ),
            DriftKind::Duplicate { scope } => (
                format!(
                    "MCP server `{server}` is named twice in {scope} of {file}: {client} runs \
                     the later entry, and this earlier one, which a reader may take for it, is \
                     ignored"
                ),
                "remove one of the two entries (doctor reports the file as malformed and install \
                 refuses it until then)"
                    .into(),
            ),
            DriftKind::Skipped { reason } => (
                format!("skipped by {client}: MCP server `{server}` in {file}: {reason}"),
                format!("write the entry as the export does, or {regenerate}"),
            ),
            DriftKind::Disabled => {
                // Only a client with an off switch reports a server as disabled.
                let off = self.client.registration().disabled_setting.unwrap_or("disabled");
                (
                    format!("not started by {client}: MCP server `{server}` in {file} has `{off}`"),
                    format!("remove `{off}`, or {regenerate}"),
                )
            }
            DriftKind::Remote { url } => (
                format!(
                    "{client} connects MCP server `{server}` in {file} to {} instead of running the kcap command",
                    json(url)
                ),
                "remove `url` and `type` from it: kcap's MCP servers run as the kcap command".into(),
            ),
            DriftKind::Missing { command, args } => (
                format!("MCP server `{server}` is in the registry but {client} does not load it from {file}"),
                format!(
                    "register it with command {} and args {}, or {regenerate}",
                    json(command),
                    json(args)
                ),
            ),
            DriftKind::Extra { injection_only: true } => (
                format!("{client} starts `{server}` from {file}, an injection-only registry entry"),
                "remove it: the launcher injects it into reviewers with their agent id, and no client registers it".into(),
            ),
            DriftKind::Extra { injection_only: false } => (
                format!("{client} starts MCP server `{server}` from {file}, which is not in the registry"),
                format!("remove it, or add `registry/{server}.toml` if it is a kcap MCP server"),
            ),
            DriftKind::Command { expected, found } => (
                format!(
                    "{client} runs MCP server `{server}` in {file} as {}, not {}",
                    json(found),
                    json(expected)
                ),
                format!(
                    "set its `command` to {} (or pass `--kcap-bin` with the kcap binary this file uses)",
                    json(expected)
                ),
            ),
            DriftKind::Args { expected, found } => (
                format!(
                    "{client} passes MCP server `{server}` in {file} the args {}; the registry has {}",
                    json(found),
                    json(expected)
                ),
                format!("set its `args` to {}", json(expected)),
            ),
            DriftKind::Tools { hidden, setting } => (
                format!(
                    "{client} starts MCP server `{server}` in {file} but hides its tools {} (`{setting}`)",
                    json(hidden)
                ),
                format!("remove `enabled_tools` and `disabled_tools` from it, or {regenerate}"),
            ),
            DriftKind::Expansion { fields } => {
                // Only a client that expands something reports an expansion.
                let start = self.client.registration().expands.first().copied().unwrap_or("$");
                let end = if start.contains('{') { "}" } else { "" };
                let what = format!("`{start}…{end}`");
                let how = format!("without `{start}`: {}", self.client.display_name());
                (
                    format!(
                        "{client} expands {what} in MCP server `{server}` in {file} ({}), so what runs depends on each session's environment",
                        fields.join(", ")
                    ),
                    format!("write the values {how} offers no escape"),
                )
            }
        };
        Finding {
            file: self.file.clone(),
            location: Some(self.location),
            rule: self.rule(),
            message,
            help,
        }
    }
}

/// A value for messages, shaped like compact JSON (strings quoted, arrays bracketed), with
/// each string escaped by the crate's one adapter ([`crate::text::printable`]: `\u{1b}`), as
/// every other report line shows user input.
fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    fn shown(v: &serde_json::Value, out: &mut String) {
        match v {
            serde_json::Value::String(s) => {
                out.push('"');
                out.push_str(&crate::text::printable(s));
                out.push('"');
            }
            serde_json::Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    shown(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    shown(
        &serde_json::to_value(value).expect("strings serialize"),
        &mut out,
    );
    out
}

/// Every difference between the registry `entries` (as [`registrations`], each expected to
/// run `command`) and what `client` does according to `loaded`: refusals first, then
/// registry servers in registry order, then extra ones sorted by name.
pub fn drift(
    entries: &[RegistryEntry],
    command: &str,
    client: Client,
    project: Option<&str>,
    loaded: &Loaded,
) -> Vec<Drift> {
    drift_in(
        entries,
        command,
        client,
        project,
        loaded,
        &source_texts(loaded),
    )
}

/// The line index of each of `loaded`'s sources.
fn source_texts(loaded: &Loaded) -> Vec<SourceText> {
    loaded
        .sources
        .iter()
        .map(|s| SourceText::new(s.text.to_string()))
        .collect()
}

/// [`drift`] with the line index of `loaded`'s sources built once by the caller (one
/// `~/.claude.json` is checked once per project, against the same text).
#[allow(
    clippy::too_many_lines,
    reason = "one comparison per registration field, in the order findings are reported"
)]
fn drift_in(
    entries: &[RegistryEntry],
    command: &str,
    client: Client,
    project: Option<&str>,
    loaded: &Loaded,
    texts: &[SourceText],
) -> Vec<Drift> {
    let file_of = |span: Option<&Span>| {
        let i = span.map_or(0, |s| s.source);
        loaded
            .sources
            .get(i)
            .map(|s| s.path.clone())
            .unwrap_or_default()
    };
    let locate = |span: Option<&Span>| match span.and_then(|s| Some((s, texts.get(s.source)?))) {
        Some((s, text)) => {
            let (line, column) = text.line_column(s.range.start);
            let (end_line, end_column) = text.line_column(s.range.end);
            Location {
                line,
                column,
                end_line,
                end_column,
            }
        }
        None => Location {
            line: 1,
            column: 1,
            end_line: 1,
            end_column: 1,
        },
    };
    let mut out = Vec::new();
    let mut make = |server: &str, kind, span: Option<&Span>| {
        out.push(Drift {
            file: file_of(span),
            client,
            project: project.map(String::from),
            server: server.into(),
            kind,
            location: locate(span),
        })
    };
    for r in &loaded.rejected {
        make(
            "",
            DriftKind::Rejected {
                scope: r.scope.clone(),
                reason: r.reason.clone(),
            },
            r.span.as_ref(),
        );
    }
    let whole_file_rejected = loaded
        .rejected
        .iter()
        .any(|r| r.scope == "the file" || r.scope == "the configuration");
    if whole_file_rejected {
        return out;
    }
    for entry in registrations(entries) {
        let expected_args = crate::export::registration_args(entry, client);
        if let Some(s) = loaded.started.iter().find(|s| s.name == entry.id) {
            let field = |f: &str| s.fields.get(f).or(Some(&s.span));
            if !s.expanded.is_empty() {
                make(
                    &entry.id,
                    DriftKind::Expansion {
                        fields: s.expanded.clone(),
                    },
                    Some(&s.span),
                );
            }
            if s.command != command {
                make(
                    &entry.id,
                    DriftKind::Command {
                        expected: command.into(),
                        found: s.command.clone(),
                    },
                    field("command"),
                );
            }
            if s.args != expected_args {
                make(
                    &entry.id,
                    DriftKind::Args {
                        expected: expected_args.clone(),
                        found: s.args.clone(),
                    },
                    field("args"),
                );
            }
            let tools: Vec<&str> = entry.tools.iter().map(|t| t.name.as_str()).collect();
            let mut hidden: Vec<String> = Vec::new();
            let mut setting = String::new();
            if let Some(enabled) = &s.enabled_tools {
                let h: Vec<String> = if enabled.is_empty() {
                    // No tool at all, whatever the registry lists.
                    vec!["*".into()]
                } else {
                    tools
                        .iter()
                        .filter(|t| !enabled.iter().any(|e| e == *t))
                        .map(|t| t.to_string())
                        .collect()
                };
                if !h.is_empty() {
                    setting = format!("enabled_tools = {}", json(enabled));
                    hidden = h;
                }
            }
            let disabled: Vec<String> = tools
                .iter()
                .filter(|t| s.disabled_tools.iter().any(|d| d == *t))
                .map(|t| t.to_string())
                .collect();
            if !disabled.is_empty() {
                if setting.is_empty() {
                    setting = format!("disabled_tools = {}", json(&s.disabled_tools));
                }
                hidden.extend(disabled);
            }
            if !hidden.is_empty() {
                let span = if setting.starts_with("enabled") {
                    field("enabled_tools")
                } else {
                    field("disabled_tools")
                };
                make(&entry.id, DriftKind::Tools { hidden, setting }, span);
            }
        } else if let Some(r) = loaded.remote.iter().find(|r| r.name == entry.id) {
            make(
                &entry.id,
                DriftKind::Remote { url: r.url.clone() },
                Some(&r.span),
            );
        } else if let Some(k) = loaded.skipped.iter().find(|k| k.name == entry.id) {
            let kind = if k.disabled {
                DriftKind::Disabled
            } else {
                DriftKind::Skipped {
                    reason: k.reason.clone(),
                }
            };
            make(&entry.id, kind, Some(&k.span));
        } else {
            make(
                &entry.id,
                DriftKind::Missing {
                    command: command.into(),
                    args: expected_args.clone(),
                },
                None,
            );
        }
    }
    let extras = loaded
        .started
        .iter()
        .map(|s| (&s.name, &s.span))
        .chain(loaded.remote.iter().map(|r| (&r.name, &r.span)));
    let mut extras: Vec<_> = extras
        .filter(|(name, _)| !registrations(entries).any(|e| &e.id == *name))
        .collect();
    extras.sort_by(|a, b| a.0.cmp(b.0));
    for (name, span) in extras {
        let injection_only = entries.iter().any(|e| &e.id == name);
        make(name, DriftKind::Extra { injection_only }, Some(span));
    }
    out
}
