//! The Codex CLI's inherited MCP servers. `-c mcp_servers={}` cannot remove them, so the
//! Codex renderer disables each by name, and neutralizes field by field one that has the name
//! of a server it enables; this inventory is how it knows both.
//!
//! Two sources, merged (Codex CLI 0.169.0): the effective configuration from `codex
//! app-server` `config/read` ([`super::app_server`]), which shows every field of every server
//! of the configuration files, and `codex mcp list --json`, which hides most fields but is the
//! only one that lists servers provided by plugins. Both run at once, in the reviewer's
//! environment and working directory. Fail-closed: any error of either is an
//! [`InventoryError`], never an empty inventory.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::app_server::{self, CONFIG_READ_COMMAND};
use super::config::ServerConfig;
use crate::clients::process::{self, RunError, run_to_end};

/// One MCP server Codex would start, as `codex mcp list --json` (Codex CLI 0.169.0)
/// reports it, with its effective configuration entry when `config/read` reports it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct InheritedServer {
    /// Server name: the key under `[mcp_servers]`, possibly dotted (`"corp.flows"`).
    pub name: String,
    /// Whether Codex would start it.
    pub enabled: bool,
    /// How Codex reaches it.
    pub transport: Transport,
    /// `startup_timeout_sec`, when set.
    #[serde(default)]
    pub startup_timeout_sec: Option<f64>,
    /// `tool_timeout_sec`, when set.
    #[serde(default)]
    pub tool_timeout_sec: Option<f64>,
    /// Every field of the entry, from `config/read`; `None` when only `codex mcp list` saw the
    /// server (a plugin's server, or an inventory saved from `mcp list`), whose hidden fields
    /// are unknown.
    #[serde(skip)]
    pub config: Option<ServerConfig>,
}

impl InheritedServer {
    /// The server as `config/read` reports it under `name`. An entry with neither `command`
    /// nor `url` (Codex rejects such a file) is taken as stdio with an empty command.
    pub fn from_config(name: String, config: ServerConfig) -> InheritedServer {
        let transport = match &config.url {
            Some(url) if config.command.is_none() => Transport::StreamableHttp { url: url.clone() },
            _ => Transport::Stdio {
                command: config.command.clone().unwrap_or_default(),
                args: config.args.clone().unwrap_or_default(),
                env: config.env.clone(),
                env_vars: config.env_vars.clone().unwrap_or_default(),
                cwd: config.cwd.clone(),
            },
        };
        InheritedServer {
            name,
            enabled: config.enabled.unwrap_or(true),
            transport,
            startup_timeout_sec: config.startup_timeout_sec,
            tool_timeout_sec: config.tool_timeout_sec,
            config: Some(config),
        }
    }
}

/// `mcp list` entries in their order, each with its `config/read` entry, then the
/// `config/read` entries `mcp list` does not show.
pub fn merge_inventories(
    listed: Vec<InheritedServer>,
    mut configured: BTreeMap<String, ServerConfig>,
) -> Vec<InheritedServer> {
    let mut out: Vec<InheritedServer> = listed
        .into_iter()
        .map(|s| match configured.remove(&s.name) {
            Some(config) => InheritedServer::from_config(s.name, config),
            None => s,
        })
        .collect();
    out.extend(
        configured
            .into_iter()
            .map(|(name, config)| InheritedServer::from_config(name, config)),
    );
    out
}

/// The `transport` object of an [`InheritedServer`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Transport {
    /// A process Codex spawns.
    Stdio {
        /// Program.
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Extra environment, `null` when unset.
        #[serde(default)]
        env: Option<BTreeMap<String, String>>,
        /// Variables forwarded from Codex's own environment (names or `{name, source}`).
        #[serde(default)]
        env_vars: Vec<super::config::EnvVar>,
        /// Working directory, `null` when unset.
        #[serde(default)]
        cwd: Option<String>,
    },
    /// A streamable HTTP server.
    StreamableHttp {
        /// Its URL.
        url: String,
    },
}

/// Codex's MCP inventory could not be established; the reviewer must not launch.
///
/// `Display` says what happened in one layer (without naming the binary or file: the
/// caller knows which it ran or read); the cause, where there is one, is returned from
/// [`source`](std::error::Error::source) and not displayed.
#[derive(Debug)]
#[non_exhaustive]
pub enum InventoryError {
    /// The Codex binary could not be started, or its output could not be read.
    Spawn(std::io::Error),
    /// It did not finish within the timeout (it was killed).
    Timeout(Duration),
    /// It exited unsuccessfully.
    Exit {
        /// Its exit status.
        status: ExitStatus,
        /// Its standard error, lossily decoded.
        stderr: String,
    },
    /// Its output (or the saved inventory) is not the expected JSON; the [`ParseError`] (the
    /// `source`) says where and why.
    Parse(ParseError),
    /// `codex app-server` `config/read` failed; the inner error (the `source`) says how.
    ConfigRead(Box<InventoryError>),
}

/// The name this error had before it covered reading a saved inventory too.
#[doc(hidden)]
pub type IsolationError = InventoryError;

impl fmt::Display for InventoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InventoryError::Spawn(_) => f.write_str("the Codex binary could not be run"),
            InventoryError::Timeout(t) => process::write_timeout(f, "the Codex binary", *t),
            InventoryError::Exit { status, stderr } => {
                process::write_exit(f, "the Codex binary", status, stderr)
            }
            InventoryError::Parse(_) => write!(
                f,
                "the inventory is not the JSON `codex mcp list --json` or {CONFIG_READ_COMMAND} \
                 prints"
            ),
            InventoryError::ConfigRead(_) => write!(f, "{CONFIG_READ_COMMAND} failed"),
        }
    }
}

impl std::error::Error for InventoryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InventoryError::Spawn(e) => Some(e),
            InventoryError::ConfigRead(e) => Some(e),
            InventoryError::Parse(e) => Some(e),
            InventoryError::Timeout(_) | InventoryError::Exit { .. } => None,
        }
    }
}

impl From<ParseError> for InventoryError {
    fn from(e: ParseError) -> Self {
        InventoryError::Parse(e)
    }
}

/// What is wrong with Codex's answer, or with a saved inventory ([`InventoryError::Parse`]).
///
/// `Display` names the problem in one layer; a JSON or UTF-8 error behind it is the
/// [`source`](std::error::Error::source), except for [`ParseError::Json`], which shows as the
/// parser's own error (its line and column). Text taken from the answer is shown escaped.
#[derive(Debug)]
#[non_exhaustive]
pub enum ParseError {
    /// The text is not JSON, or not the shape `codex mcp list --json` prints (a missing
    /// `name`, `enabled` or `transport`, an unknown transport type, trailing text, …).
    Json(serde_json::Error),
    /// A line `codex app-server` printed is not JSON.
    AnswerLine {
        /// The line, cut to its first 200 bytes.
        line: String,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// A server entry of `config.mcp_servers` has a known field of the wrong type.
    McpServers(serde_json::Error),
    /// The output is not UTF-8.
    NotUtf8(std::str::Utf8Error),
    /// `codex mcp list --json` printed something other than a JSON array.
    NotAnArray {
        /// The first 200 characters printed.
        start: String,
    },
    /// A JSON object that is neither a `config/read` response nor its `result`: it has no
    /// `result.config` or `config` object.
    NotConfigRead,
    /// A JSON-RPC request was answered with an error.
    Rpc {
        /// The request's method (`initialize`, `config/read`).
        method: &'static str,
        /// The answer's `error` member.
        error: serde_json::Value,
    },
    /// `codex app-server` closed its output and exited successfully without answering
    /// `config/read`.
    Truncated {
        /// Its exit status.
        status: ExitStatus,
        /// Its standard error, lossily decoded.
        stderr: String,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Json(e) => e.fmt(f),
            ParseError::AnswerLine { line, .. } => write!(
                f,
                "a line of the answer is not JSON: \"{}\"",
                line.escape_debug()
            ),
            ParseError::McpServers(_) => f.write_str("in `config.mcp_servers`"),
            ParseError::NotUtf8(_) => f.write_str("the output is not UTF-8"),
            ParseError::NotAnArray { start } => {
                write!(f, "expected a JSON array, got: {}", start.escape_debug())
            }
            ParseError::NotConfigRead => f.write_str(
                "expected a config/read answer: an object with `result.config` or `config`",
            ),
            ParseError::Rpc { method, error } => write!(
                f,
                "{method} answered with an error: {}",
                crate::text::printable(&error.to_string())
            ),
            ParseError::Truncated { status, stderr } => {
                write!(
                    f,
                    "the answer ended before the config/read response ({status})"
                )?;
                match stderr.trim() {
                    "" => Ok(()),
                    err => write!(f, ", printing \"{}\"", err.escape_debug()),
                }
            }
        }
    }
}

impl std::error::Error for ParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Shown as itself (see the type's docs), so not repeated as a cause.
            ParseError::Json(e) => e.source(),
            ParseError::AnswerLine { source, .. } => Some(source),
            ParseError::McpServers(e) => Some(e),
            ParseError::NotUtf8(e) => Some(e),
            ParseError::NotAnArray { .. }
            | ParseError::NotConfigRead
            | ParseError::Rpc { .. }
            | ParseError::Truncated { .. } => None,
        }
    }
}

/// Parses a saved inventory: `codex mcp list --json` output (a JSON array of server objects;
/// unknown fields are ignored; a missing `name`, `enabled` or `transport`, or an unknown
/// transport type, fails), or a saved `codex app-server` `config/read` answer (a JSON object,
/// see [`app_server::parse_config_read`]), whose entries carry every field.
///
/// # Errors
/// [`InventoryError::Parse`] for anything else (an empty string included): a
/// [`ParseError::Json`] for an array, as [`app_server::parse_config_read`] for an object.
///
/// ```
/// use kcap_mcp_registry::clients::codex::inventory::{parse_inventory, Transport};
///
/// let inv = parse_inventory(r#"[{"name":"corp.flows","enabled":true,
///   "transport":{"type":"stdio","command":"flows","args":[],"env":null,"env_vars":[],"cwd":null},
///   "startup_timeout_sec":null,"tool_timeout_sec":null,"auth_status":"unsupported"}]"#).unwrap();
/// assert_eq!(inv[0].name, "corp.flows");
/// assert!(matches!(inv[0].transport, Transport::Stdio { .. }));
/// assert!(inv[0].config.is_none());
///
/// let inv = parse_inventory(r#"{"id":2,"result":{"config":{"mcp_servers":
///   {"corp.flows":{"command":"flows","required":true}}}}}"#).unwrap();
/// assert_eq!(inv[0].config.as_ref().unwrap().required, Some(true));
/// assert!(parse_inventory("").is_err());
/// assert!(parse_inventory("{}").is_err());
/// // One leading byte order mark is accepted (`crate::decode`), a second is not.
/// assert!(parse_inventory("\u{feff}[]").is_ok());
/// assert!(parse_inventory("\u{feff}\u{feff}[]").is_err());
/// ```
pub fn parse_inventory(json: &str) -> Result<Vec<InheritedServer>, InventoryError> {
    let json = crate::decode::strip_bom(json);
    if json.trim_start().starts_with('{') {
        let servers = app_server::parse_config_read(json)?;
        return Ok(merge_inventories(Vec::new(), servers));
    }
    serde_json::from_str(json).map_err(|e| ParseError::Json(e).into())
}

/// How long [`codex_inventory`] waits for Codex (both commands together).
pub const INVENTORY_TIMEOUT: Duration = Duration::from_secs(20);

/// [`codex_inventory_from`] with `Command::new(codex_bin)` and the current environment (run
/// it with the environment the reviewer will get: the same `CODEX_HOME`), waiting at most
/// [`INVENTORY_TIMEOUT`].
///
/// # Errors
/// As [`codex_inventory_from`].
pub fn codex_inventory(codex_bin: &Path) -> Result<Vec<InheritedServer>, InventoryError> {
    codex_inventory_within(codex_bin, INVENTORY_TIMEOUT)
}

/// [`codex_inventory`] with an explicit timeout.
///
/// # Errors
/// As [`codex_inventory_from`].
pub fn codex_inventory_within(
    codex_bin: &Path,
    timeout: Duration,
) -> Result<Vec<InheritedServer>, InventoryError> {
    codex_inventory_with(|| Command::new(codex_bin), timeout)
}

/// The inventory through `codex`, a [`Command`] for the Codex binary that the caller has
/// given the reviewer's environment and working directory (`env`, `env_remove`,
/// `current_dir`): Codex reads `$CODEX_HOME/config.toml` and, in a trusted project, the
/// working directory's `.codex/config.toml`, so the inventory must be taken where and as the
/// reviewer will run. Two commands are built from it (program, arguments, environment
/// changes and working directory are copied); `std` does not let `env_clear` be seen, so a
/// caller that clears the environment uses [`codex_inventory_with`] instead. Waits at most
/// `timeout`.
///
/// # Errors
/// As [`codex_inventory_with`].
pub fn codex_inventory_from(
    codex: Command,
    timeout: Duration,
) -> Result<Vec<InheritedServer>, InventoryError> {
    let make = || {
        let mut c = Command::new(codex.get_program());
        c.args(codex.get_args());
        for (k, v) in codex.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        if let Some(dir) = codex.get_current_dir() {
            c.current_dir(dir);
        }
        c
    };
    codex_inventory_with(make, timeout)
}

/// Runs `<codex> app-server` (`config/read`, see [`app_server::config_read_from`]) and
/// `<codex> mcp list --json` at the same time, each from a fresh `make()` [`Command`] (the
/// reviewer's environment and working directory; stdin, stdout and stderr are set here), and
/// merges them with [`merge_inventories`]. Each child runs in its own process group, which is
/// ended on timeout or failure. Waits at most `timeout` in all.
///
/// # Errors
/// [`InventoryError`] when either cannot run, times out, exits non-zero, or answers anything
/// but the expected JSON ([`InventoryError::ConfigRead`] wraps the `config/read` failure).
pub fn codex_inventory_with(
    mut make: impl FnMut() -> Command,
    timeout: Duration,
) -> Result<Vec<InheritedServer>, InventoryError> {
    let deadline = Instant::now() + timeout;
    let config_read = make();
    let reader = std::thread::spawn(move || app_server::config_read_from(config_read, timeout));
    let listed = mcp_list(make(), deadline, timeout);
    let configured = reader
        .join()
        .unwrap_or_else(|_| {
            Err(InventoryError::Spawn(std::io::Error::other(
                "the config/read reader stopped without a result",
            )))
        })
        .map_err(|e| InventoryError::ConfigRead(Box::new(e)));
    // The `config/read` failure is named first: it is the source that sees every field.
    let configured = configured?;
    Ok(merge_inventories(listed?, configured))
}

/// `<codex> mcp list --json`, parsed with [`parse_inventory`] (array form only).
fn mcp_list(
    mut codex: Command,
    deadline: Instant,
    timeout: Duration,
) -> Result<Vec<InheritedServer>, InventoryError> {
    let finished =
        run_to_end(codex.args(["mcp", "list", "--json"]), deadline).map_err(|e| match e {
            RunError::Spawn(e) => InventoryError::Spawn(e),
            RunError::Timeout => InventoryError::Timeout(timeout),
        })?;
    let (status, out, err) = (finished.status, finished.stdout, finished.stderr);
    if !status.success() {
        return Err(InventoryError::Exit {
            status,
            stderr: String::from_utf8_lossy(&err).into_owned(),
        });
    }
    let out = std::str::from_utf8(&out).map_err(ParseError::NotUtf8)?;
    if !out.trim_start().starts_with('[') {
        return Err(ParseError::NotAnArray {
            start: out.chars().take(200).collect(),
        }
        .into());
    }
    parse_inventory(out)
}
