//! How a client registers MCP servers in its own files, as data every room fills in
//! (`src/clients/<client>/registration.rs`): the file's shape ([`RegistrationFormat`]), the
//! entry of one registry server ([`Node`], [`stdio_pairs`]), the whole file
//! ([`registration_file`]) and the client's loader model for it ([`FileLoader`], with the
//! vocabulary of [`crate::clients::loaded`]). `export`, `install`, `doctor` and
//! `check --against` read these; nothing here knows of a command.
//!
//! Every file is deterministic: registry order (sorted by id), fixed key order, and a
//! trailing newline. The registration files hold exactly [`registrations`]: the entries
//! with `registered` (by default the allowlistable ones), the servers a person may register
//! with a client.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

use crate::clients::Client;
use crate::clients::loaded::Loaded;
use crate::model::EnvSource;
use crate::schema::RegistryEntry;
use crate::text::pretty_json;

/// The `command` registration files give every server unless told otherwise: the kcap
/// binary, found on `PATH`.
pub const DEFAULT_COMMAND: &str = "kcap";

/// The registry entries a client registration file lists: every entry with `registered`
/// (default true for allowlistable entries), in registry order. Injection-only entries (the
/// result channel, the review context) are never registered: rule `registered-scope`.
/// Flow-starting servers are included: the recursion guard applies to reviewers, not to a
/// person's own client.
pub fn registrations(entries: &[RegistryEntry]) -> impl Iterator<Item = &RegistryEntry> {
    entries.iter().filter(|e| e.registered)
}

/// The `args` a registration of `entry` for `client` runs: the registry's, then
/// `--driver <client>` when the entry has `driver_stamp` and the client needs the stamp
/// ([`Client::stamps_driver`]).
pub fn registration_args(entry: &RegistryEntry, client: Client) -> Vec<String> {
    let mut args = entry.args.clone();
    if entry.driver_stamp && client.stamps_driver() {
        args.extend(["--driver".to_string(), client.name().to_string()]);
    }
    args
}

/// One value of a registration entry, with object keys in the order they are written: the
/// shape every client room builds its entries in, written as JSON ([`registration_file`]), as
/// TOML (Codex) or merged into a user's file (`install`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// A string.
    String(String),
    /// A boolean.
    Bool(bool),
    /// An array.
    Array(Vec<Node>),
    /// An object (a TOML table), keys in write order.
    Object(Vec<(String, Node)>),
}

impl Node {
    /// `Node::String(s)`.
    pub fn string(s: impl Into<String>) -> Node {
        Node::String(s.into())
    }

    /// An array of strings.
    pub fn strings<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> Node {
        Node::Array(
            items
                .into_iter()
                .map(|s| Node::string(s.as_ref()))
                .collect(),
        )
    }

    /// The value as `serde_json`'s tree (object keys sorted, as `serde_json` keeps them).
    pub fn to_json(&self) -> Value {
        match self {
            Node::String(s) => Value::String(s.clone()),
            Node::Bool(b) => Value::Bool(*b),
            Node::Array(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            Node::Object(pairs) => Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// The object's value at `key`.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Object(pairs) => pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::String(v) => s.serialize_str(v),
            Node::Bool(v) => s.serialize_bool(*v),
            Node::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Node::Object(pairs) => {
                let mut map = s.serialize_map(Some(pairs.len()))?;
                for (k, v) in pairs {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

/// The syntax of a client's registration file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// JSON, strict unless the client reads comments or trailing commas.
    Json {
        /// `//` and `/* */` comments are allowed.
        comments: bool,
        /// Trailing commas in objects and arrays are allowed.
        trailing_commas: bool,
    },
    /// TOML (Codex CLI's `config.toml`).
    Toml,
}

/// Where a client's user-level registration file is, as a function of the environment
/// (`var(NAME)`: the variable's value, `None` when unset; callers treat empty as unset).
pub type DefaultConfig = fn(&dyn Fn(&str) -> Option<OsString>) -> Result<PathBuf, String>;

/// How one client's registration file is shaped: every fact lives in that client's room
/// (`src/clients/<client>/registration.rs`), with its version and evidence.
#[derive(Clone, Copy)]
pub struct RegistrationFormat {
    /// The client.
    pub client: Client,
    /// The file's syntax.
    pub syntax: Syntax,
    /// The key of the block holding the servers, by name (`mcpServers`, `mcp`,
    /// `mcp_servers`).
    pub block: &'static str,
    /// The entry of one registry server for this client.
    pub entry: fn(&RegistryEntry, &RegistrationOptions) -> Node,
    /// The entry fields whose strings the client expands ([`Self::expands`]).
    pub expanded_fields: &'static [&'static str],
    /// The substrings that start an expansion in [`Self::expanded_fields`] (`${`, `{env:`):
    /// a value holding one is refused ([`RegistrationError::Expansion`]), since the client
    /// would run something else than the registry says. Empty: the client expands nothing.
    pub expands: &'static [&'static str],
    /// An empty (0-byte or blank) file counts as an empty configuration; otherwise the
    /// client refuses it, and so does `install`.
    pub empty_file_is_empty: bool,
    /// The user-level file `install` edits by default.
    pub default_config: DefaultConfig,
    /// The variable that moves [`Self::default_config`] (`CODEX_HOME`, …), if any.
    pub default_config_var: Option<&'static str>,
    /// The repository-level files the client reads MCP servers from when started in a
    /// project directory (`doctor --project` reads each one).
    pub project_files: &'static [ProjectFile],
    /// The keys of a server entry the client reads; any other key is ignored by it (so a
    /// difference there is none). `None`: the client's loader model reads every key.
    pub entry_keys: Option<&'static [&'static str]>,
    /// How the file switches one server off (`enabled = false`), as a drift finding quotes
    /// it; `None` for a client with no such switch.
    pub disabled_setting: Option<&'static str>,
    /// The names of this client's registration files, as `check --against` tells a file's
    /// client without `--client`: `(directory, file)`, the
    /// directory `""` for any. No two clients claim the same name.
    pub file_names: &'static [(&'static str, &'static str)],
    /// The extension (`json`, `toml`) of the files no client's name claims that are read as
    /// this client's, as are, by content, unnamed files of that syntax. At most one client
    /// claims each extension.
    pub claims_extension: Option<&'static str>,
    /// The client's loader model for one whole file: what `check --against` compares with
    /// the registry, one verdict per effective server set.
    pub load: FileLoader,
    /// The key of an object whose members each hold a `block` of their own (Claude Code's
    /// `projects.<dir>.mcpServers` in `~/.claude.json`): servers named twice are looked for
    /// there too.
    pub project_blocks: Option<&'static str>,
    /// `check --against --project DIR` applies to this client's files (the project a
    /// session runs in selects its view of the file).
    pub takes_project: bool,
    /// The profile file `check --against --codex-profile NAME` reads for a file at a path:
    /// `None` for a client with no profiles.
    pub profile_file: Option<fn(&Path, &str) -> PathBuf>,
    /// The whole file `export <client>` prints: [`registration_file`] for the JSON clients.
    pub export: fn(&[RegistryEntry], &RegistrationOptions) -> Result<String, RegistrationError>,
    /// Entries take the project directory as their `cwd`
    /// ([`RegistrationOptions::project_dir`]; `export <client> --project-dir DIR`).
    pub writes_project_dir: bool,
}

/// A repository-level file a client reads MCP servers from: a path relative to the
/// directory the client is started in, and the client's loader model for it.
#[derive(Clone, Copy)]
pub struct ProjectFile {
    /// The path relative to the project directory, `/`-separated (`.mcp.json`,
    /// `.codex/config.toml`).
    pub path: &'static str,
    /// What the client does with the file: `load(shown path, bytes, project directory
    /// (absolute), the client's environment)`.
    pub load: ProjectLoader,
}

/// The loader model of a [`ProjectFile`].
pub type ProjectLoader = fn(&str, &[u8], &str, &dyn Fn(&str) -> Option<String>) -> Loaded;

impl fmt::Debug for ProjectFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProjectFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for RegistrationFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistrationFormat")
            .field("client", &self.client)
            .field("syntax", &self.syntax)
            .field("block", &self.block)
            .finish_non_exhaustive()
    }
}

/// `$HOME` (or `%USERPROFILE%`) joined with `parts`: the default location of a user-level
/// file. An empty variable counts as unset.
pub fn home_path(
    var: &dyn Fn(&str) -> Option<OsString>,
    parts: &[&str],
) -> Result<PathBuf, String> {
    let home = set_var(var, "HOME")
        .or_else(|| set_var(var, "USERPROFILE"))
        .ok_or("HOME is not set, so the default config location is unknown; give --config PATH")?;
    Ok(parts
        .iter()
        .fold(PathBuf::from(home), |p, part| p.join(part)))
}

/// `var(name)` unless unset or empty.
pub fn set_var(var: &dyn Fn(&str) -> Option<OsString>, name: &str) -> Option<OsString> {
    var(name).filter(|v| !v.is_empty())
}

/// A registration that cannot be written safely.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistrationError {
    /// A value holds a substring the client expands ([`RegistrationFormat::expands`]), so
    /// the client would run something else than the registry says, and offers no escape.
    Expansion {
        /// The client.
        client: Client,
        /// The registry server.
        server: String,
        /// The field, e.g. `command`, `args[1]`, `env.KCAP_URL`, `command[0]`.
        field: String,
        /// The substring found, e.g. `${`.
        token: &'static str,
    },
}

impl fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistrationError::Expansion {
                client,
                server,
                field,
                token,
            } => {
                let client = client.display_name();
                write!(
                    f,
                    "cannot register MCP server `{server}` with {client}: `{field}` contains \
                     `{token}`, which {client} expands and cannot escape; use a value without \
                     `{token}` (e.g. another --kcap-bin or --server-url)"
                )
            }
        }
    }
}

impl std::error::Error for RegistrationError {}

/// The entries a registration file for `format`'s client holds: `(id, entry)` for each of
/// [`registrations`], in registry order.
///
/// # Errors
/// [`RegistrationError::Expansion`] for the first value the client would expand.
pub fn registration_entries(
    format: &RegistrationFormat,
    entries: &[RegistryEntry],
    opts: &RegistrationOptions,
) -> Result<Vec<(String, Node)>, RegistrationError> {
    let mut out = Vec::new();
    for entry in registrations(entries) {
        let node = (format.entry)(entry, opts);
        for field in format.expanded_fields {
            if let Some(value) = node.get(field) {
                refuse_expansion(format, &entry.id, field, value)?;
            }
        }
        out.push((entry.id.clone(), node));
    }
    Ok(out)
}

fn refuse_expansion(
    format: &RegistrationFormat,
    server: &str,
    path: &str,
    value: &Node,
) -> Result<(), RegistrationError> {
    match value {
        Node::String(s) => match format.expands.iter().find(|t| s.contains(**t)) {
            Some(token) => Err(RegistrationError::Expansion {
                client: format.client,
                server: server.to_string(),
                field: path.to_string(),
                token,
            }),
            None => Ok(()),
        },
        Node::Bool(_) => Ok(()),
        Node::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| refuse_expansion(format, server, &format!("{path}[{i}]"), v)),
        Node::Object(pairs) => pairs
            .iter()
            .try_for_each(|(k, v)| refuse_expansion(format, server, &format!("{path}.{k}"), v)),
    }
}

/// A JSON registration file for `format`'s client: `{"<block>": {"<id>": <entry>, …}}`,
/// pretty-printed (two-space indent) with a trailing newline. The same entries `install`
/// merges into a user's file.
///
/// # Errors
/// [`RegistrationError::Expansion`], see [`registration_entries`].
pub fn registration_file(
    format: &RegistrationFormat,
    entries: &[RegistryEntry],
    opts: &RegistrationOptions,
) -> Result<String, RegistrationError> {
    let servers = registration_entries(format, entries, opts)?;
    let root = Node::Object(vec![(format.block.to_string(), Node::Object(servers))]);
    Ok(pretty_json(&root))
}

/// `command`, `args` (with [`registration_args`]) and `env` when set: the stdio entry most
/// clients share, as the first keys of an entry.
pub fn stdio_pairs(
    e: &RegistryEntry,
    opts: &RegistrationOptions,
    client: Client,
) -> Vec<(String, Node)> {
    let mut pairs = vec![
        ("command".into(), Node::string(&opts.command)),
        ("args".into(), Node::strings(registration_args(e, client))),
    ];
    if let Some(env) = env_node(e, opts) {
        pairs.push(("env".into(), env));
    }
    pairs
}

/// The `env` object of `entry` (its `server_url` vars, when [`RegistrationOptions::server_url`] is set) as a [`Node`], or `None` when
/// there is nothing to write.
pub fn env_node(entry: &RegistryEntry, opts: &RegistrationOptions) -> Option<Node> {
    let env = opts.env(entry);
    (!env.is_empty()).then(|| {
        Node::Object(
            env.into_iter()
                .map(|(k, v)| (k.to_string(), Node::string(v)))
                .collect(),
        )
    })
}

/// What the registration exports write besides the registry's own data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrationOptions {
    /// The `command` of every server (the kcap binary); [`DEFAULT_COMMAND`] by default.
    pub command: String,
    /// When set, every env var whose source is `server_url` is written with this value;
    /// otherwise no `env` is written and the kcap binary uses its own configuration.
    pub server_url: Option<String>,
    /// Codex only: an absolute project directory, written as `cwd` of every server with
    /// `needs_project_cwd`. Codex starts a server whose `cwd` is unset in its own working
    /// directory, and fails to start one with a relative `cwd`.
    pub project_dir: Option<String>,
}

impl Default for RegistrationOptions {
    fn default() -> Self {
        RegistrationOptions {
            command: DEFAULT_COMMAND.into(),
            server_url: None,
            project_dir: None,
        }
    }
}

impl RegistrationOptions {
    /// The env vars written for `entry`: those whose source is `server_url`, in registry
    /// order, when [`RegistrationOptions::server_url`] is set.
    pub(crate) fn env<'e>(&'e self, entry: &'e RegistryEntry) -> Vec<(&'e str, &'e str)> {
        let Some(url) = &self.server_url else {
            return Vec::new();
        };
        entry
            .env
            .iter()
            .filter(|(_, src)| *src == EnvSource::ServerUrl)
            .map(|(name, _)| (name.as_str(), url.as_str()))
            .collect()
    }
}

/// A registration file handed to a client's loader model ([`RegistrationFormat::load`]).
pub struct FileToLoad<'a> {
    /// The file's path, as findings show it.
    pub shown: &'a str,
    /// Its bytes.
    pub bytes: &'a [u8],
    /// The project directory a session runs in (`--project`), for a client whose format
    /// [`RegistrationFormat::takes_project`].
    pub project: Option<&'a str>,
    /// The profile file (`--codex-profile`), for a client whose format has a
    /// [`RegistrationFormat::profile_file`].
    pub profile: Option<&'a ProfileFile>,
    /// The client's environment, for the values it expands.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// A profile file read for `check --against --codex-profile NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileFile {
    /// The profile's name.
    pub name: String,
    /// Its path, as findings show it.
    pub shown: String,
    /// Its bytes; `None` when it does not exist (the client then reads the file alone).
    pub bytes: Option<Vec<u8>>,
}

/// One effective server set of a file: the project whose view it is (a `~/.claude.json`
/// local scope), if any, and what the client's loader model makes of it.
pub type Verdict = (Option<String>, Loaded);

/// A client's loader model for one whole registration file: its verdicts, at least one.
pub type FileLoader = fn(&FileToLoad<'_>) -> Vec<Verdict>;
