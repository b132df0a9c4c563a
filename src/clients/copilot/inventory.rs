//! The MCP servers Copilot CLI would start on its own: the user's
//! `$COPILOT_HOME/mcp-config.json` and, in a trusted folder, the workspace's `.mcp.json`
//! (else `.github/mcp.json`). `--additional-mcp-config` cannot remove them, so the Copilot
//! renderer disables each by name ([`super::copilot_plan`]); this inventory is how it knows
//! them.
//!
//! The source is `copilot mcp list --json` (Copilot CLI 1.0.102), run in the reviewer's
//! environment and working directory: it reads the same files as the reviewer, without
//! starting any server. Measured shape (2026-11-30, throwaway `HOME`, `COPILOT_OFFLINE=true`):
//! one JSON object `{"mcpServers": {"<name>": {…}}}`, each entry the configured fields plus
//! `"source"` (`"user"`, `"workspace"`, …), `"enabled"` (always `true`, even for a
//! `"disabled": true` entry) and, for a workspace server, `"sourcePath"`; no servers is
//! `{"mcpServers": {}}`. A file Copilot refuses (no `mcpServers`, not JSON) makes it exit 1.
//!
//! Fail-closed: a run that cannot start, times out, exits non-zero, or prints anything but
//! that shape is an [`InventoryError`], never "no servers".

use std::fmt;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::clients::process::{self, RunError, run_to_end};

/// One MCP server Copilot CLI 1.0.102 would start on its own, as `copilot mcp list --json`
/// reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InheritedServer {
    /// The server's name (its key under `mcpServers`).
    pub name: String,
    /// Where it comes from: `user`, `workspace`, or another value a later Copilot adds.
    pub source: String,
    /// Its `"disabled"` field: a disabled server is listed but not started. The renderer
    /// disables it by name all the same.
    pub disabled: bool,
}

/// One entry as `mcp list --json` prints it: the fields this crate reads. Unknown fields are
/// ignored; `source` and `enabled` are required, so an answer of another shape fails.
#[derive(Deserialize)]
struct Entry {
    source: String,
    #[allow(dead_code)] // required for the shape; always `true` in 1.0.102
    enabled: bool,
    #[serde(default)]
    disabled: Option<bool>,
}

/// The whole answer: `{"mcpServers": {…}}`, nothing else required.
#[derive(Deserialize)]
struct Answer {
    #[serde(rename = "mcpServers")]
    mcp_servers: serde_json::Map<String, serde_json::Value>,
}

/// Copilot CLI's MCP inventory could not be established; the reviewer must not launch.
///
/// `Display` says what happened in one layer (without naming the binary or file: the caller
/// knows which it ran or read); the cause, where there is one, is returned from
/// [`source`](std::error::Error::source) and not displayed.
#[derive(Debug)]
#[non_exhaustive]
pub enum InventoryError {
    /// The Copilot binary could not be started, or its output could not be read.
    Spawn(std::io::Error),
    /// It did not finish within the timeout (its process group was ended).
    Timeout(Duration),
    /// It exited unsuccessfully (Copilot exits 1 on an `mcp-config.json` it refuses).
    Exit {
        /// Its exit status.
        status: ExitStatus,
        /// Its standard error, lossily decoded.
        stderr: String,
    },
    /// Its output (or the saved inventory) is not the JSON `copilot mcp list --json` prints;
    /// the [`ParseError`] (the `source`) says where and why.
    Parse(ParseError),
}

impl fmt::Display for InventoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InventoryError::Spawn(_) => f.write_str("the Copilot CLI binary could not be run"),
            InventoryError::Timeout(t) => process::write_timeout(f, "the Copilot CLI binary", *t),
            InventoryError::Exit { status, stderr } => {
                process::write_exit(f, "the Copilot CLI binary", status, stderr)
            }
            InventoryError::Parse(_) => {
                f.write_str("the inventory is not the JSON `copilot mcp list --json` prints")
            }
        }
    }
}

impl std::error::Error for InventoryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InventoryError::Spawn(e) => Some(e),
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

/// What is wrong with Copilot's answer, or with a saved inventory ([`InventoryError::Parse`]).
/// Text taken from the answer is shown escaped.
#[derive(Debug)]
#[non_exhaustive]
pub enum ParseError {
    /// The text is not JSON, or not an object with an object `mcpServers` (the parser's own
    /// error, with its line and column).
    Json(serde_json::Error),
    /// The output is not UTF-8.
    NotUtf8(std::str::Utf8Error),
    /// The text is not a JSON object (serde would read a one-element array as the object).
    NotAnObject {
        /// The first 200 characters.
        start: String,
    },
    /// A server entry is not an object with a string `source` and a boolean `enabled` (and,
    /// when present, a boolean `disabled`).
    Entry {
        /// The server's name.
        server: String,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// A server's name is empty or holds a NUL, which no `--disable-mcp-server` argument can
    /// carry.
    BadName {
        /// The name.
        name: String,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Json(e) => e.fmt(f),
            ParseError::NotUtf8(_) => f.write_str("the output is not UTF-8"),
            ParseError::NotAnObject { start } => {
                write!(f, "expected a JSON object, got: {}", start.escape_debug())
            }
            ParseError::Entry { server, source } => write!(
                f,
                "server \"{}\": {source} (expected an object with a string `source` and a \
                 boolean `enabled`)",
                server.escape_debug()
            ),
            ParseError::BadName { name } => write!(
                f,
                "server name \"{}\" cannot be passed to --disable-mcp-server (empty or NUL)",
                name.escape_debug()
            ),
        }
    }
}

impl std::error::Error for ParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Shown as themselves, so not repeated as a cause.
            ParseError::Json(e) | ParseError::Entry { source: e, .. } => e.source(),
            ParseError::NotUtf8(e) => Some(e),
            ParseError::BadName { .. } | ParseError::NotAnObject { .. } => None,
        }
    }
}

/// Parses `copilot mcp list --json` output (Copilot CLI 1.0.102), saved or fresh: a JSON
/// object whose `mcpServers` object maps each server name to an entry with a string `source`
/// and a boolean `enabled` (other fields ignored). Servers come sorted by name. One
/// leading byte order mark is accepted.
///
/// # Errors
/// [`InventoryError::Parse`] for anything else: an empty text, an array, a missing or
/// non-object `mcpServers`, an entry of another shape, an empty name, trailing text.
///
/// ```
/// use kcap_mcp_registry::clients::copilot::inventory::parse_inventory;
///
/// let inv = parse_inventory(r#"{"mcpServers":{"corp":{"tools":["*"],"command":"corp",
///   "args":[],"source":"user","enabled":true}}}"#).unwrap();
/// assert_eq!((inv[0].name.as_str(), inv[0].source.as_str()), ("corp", "user"));
/// assert!(parse_inventory(r#"{"mcpServers":{}}"#).unwrap().is_empty());
/// assert!(parse_inventory("").is_err());
/// assert!(parse_inventory("{}").is_err());
/// assert!(parse_inventory("[]").is_err());
/// ```
pub fn parse_inventory(json: &str) -> Result<Vec<InheritedServer>, InventoryError> {
    let json = crate::decode::strip_bom(json);
    if !json.trim_start().starts_with('{') {
        return Err(ParseError::NotAnObject {
            start: json.chars().take(200).collect(),
        }
        .into());
    }
    let answer: Answer = serde_json::from_str(json).map_err(ParseError::Json)?;
    answer
        .mcp_servers
        .into_iter()
        .map(|(name, value)| {
            if name.is_empty() || name.contains('\0') {
                return Err(ParseError::BadName { name }.into());
            }
            if !value.is_object() {
                // serde would read an array as the entry's fields in order.
                let source = serde::de::Error::custom(format!(
                    "the entry is {}, not an object",
                    match value {
                        serde_json::Value::Array(_) => "an array",
                        serde_json::Value::String(_) => "a string",
                        serde_json::Value::Number(_) => "a number",
                        serde_json::Value::Bool(_) => "a boolean",
                        _ => "null",
                    }
                ));
                return Err(ParseError::Entry {
                    server: name,
                    source,
                }
                .into());
            }
            match serde_json::from_value::<Entry>(value) {
                Ok(entry) => Ok(InheritedServer {
                    name,
                    source: entry.source,
                    disabled: entry.disabled.unwrap_or(false),
                }),
                Err(source) => Err(ParseError::Entry {
                    server: name,
                    source,
                }
                .into()),
            }
        })
        .collect()
}

/// How long [`copilot_inventory`] waits for Copilot CLI. Measured: 0.6 s warm; the first run
/// unpacks its package (~235 MB) into `$XDG_CACHE_HOME/copilot/pkg`.
pub const INVENTORY_TIMEOUT: Duration = Duration::from_secs(60);

/// [`copilot_inventory_from`] with `Command::new(copilot_bin)` and the current environment
/// and directory, waiting at most [`INVENTORY_TIMEOUT`].
///
/// # Errors
/// As [`copilot_inventory_from`].
pub fn copilot_inventory(copilot_bin: &Path) -> Result<Vec<InheritedServer>, InventoryError> {
    copilot_inventory_from(Command::new(copilot_bin), INVENTORY_TIMEOUT)
}

/// Runs `<copilot> mcp list --json` and parses it with [`parse_inventory`]. `copilot` is a
/// [`Command`] for the Copilot binary that the caller has given the reviewer's environment
/// (the plan's `env_remove` applied, so `COPILOT_ALLOW_ALL` is gone, and the same `HOME` /
/// `COPILOT_HOME`) and working directory (the worktree, whose `.mcp.json` a trusted folder
/// adds); stdin, stdout and stderr are set here. The child runs in its own process group,
/// ended on timeout. Waits at most `timeout`.
///
/// # Errors
/// [`InventoryError`] when Copilot cannot run, times out, exits non-zero, or prints anything
/// but the expected JSON.
pub fn copilot_inventory_from(
    mut copilot: Command,
    timeout: Duration,
) -> Result<Vec<InheritedServer>, InventoryError> {
    let deadline = Instant::now() + timeout;
    let finished =
        run_to_end(copilot.args(["mcp", "list", "--json"]), deadline).map_err(|e| match e {
            RunError::Spawn(e) => InventoryError::Spawn(e),
            RunError::Timeout => InventoryError::Timeout(timeout),
        })?;
    if !finished.status.success() {
        return Err(InventoryError::Exit {
            status: finished.status,
            stderr: String::from_utf8_lossy(&finished.stderr).into_owned(),
        });
    }
    let out = std::str::from_utf8(&finished.stdout).map_err(ParseError::NotUtf8)?;
    parse_inventory(out)
}
