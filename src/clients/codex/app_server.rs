//! Codex's effective configuration through `codex app-server` (Codex CLI 0.169.0): newline-
//! delimited JSON-RPC on stdin/stdout. The exchange is `initialize` (id 1), the
//! `initialized` notification, then `config/read` with `{"includeLayers": false}` (id 2);
//! the answer's `result.config.mcp_servers` holds every field of every server of the
//! configuration files (user, trusted project, `-c`), in the shape of
//! [`ServerConfig`]. It does **not** hold servers that plugins
//! provide (measured: a plugin's `.mcp.json` server is listed by `codex mcp list --json` and
//! absent from `config/read`), so [`super::inventory`] merges both.
//!
//! Fail-closed: a hung, truncated, malformed or error answer is an [`InventoryError`], never
//! an empty configuration.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use crate::clients::process::Group;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::config::ServerConfig;
use super::inventory::{InventoryError, ParseError};

/// The three JSON-RPC lines written to `codex app-server`.
pub const CONFIG_READ_REQUEST: &str = concat!(
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"kcap-mcp-registry","version":"0"}}}"#,
    "\n",
    r#"{"jsonrpc":"2.0","method":"initialized"}"#,
    "\n",
    r#"{"jsonrpc":"2.0","id":2,"method":"config/read","params":{"includeLayers":false}}"#,
    "\n",
);

/// The command named in error messages.
pub const CONFIG_READ_COMMAND: &str = "codex app-server (config/read)";

/// Parses a saved `config/read` answer: the whole JSON-RPC response (`{"id":2,"result":…}`)
/// or its `result` (`{"config":…}`). Returns the `mcp_servers` table by server name; a
/// missing or `null` table is empty.
///
/// # Errors
/// [`InventoryError::Parse`] for a JSON-RPC error ([`ParseError::Rpc`]), text that is not
/// JSON ([`ParseError::Json`]), anything but such an object ([`ParseError::NotConfigRead`]),
/// or a server entry whose known fields have the wrong type ([`ParseError::McpServers`]).
///
/// ```
/// use kcap_mcp_registry::clients::codex::app_server::parse_config_read;
///
/// let servers = parse_config_read(r#"{"id":2,"result":{"config":{"mcp_servers":
///   {"a.b":{"command":"x","required":true,"new_field":1}}}}}"#).unwrap();
/// assert_eq!(servers["a.b"].required, Some(true));
/// assert!(servers["a.b"].unknown.contains_key("new_field"));
/// assert!(parse_config_read(r#"{"id":2,"error":{"code":-1,"message":"no"}}"#).is_err());
/// ```
pub fn parse_config_read(json: &str) -> Result<BTreeMap<String, ServerConfig>, InventoryError> {
    let value: serde_json::Value = serde_json::from_str(json).map_err(ParseError::Json)?;
    servers_of(value)
}

fn servers_of(value: serde_json::Value) -> Result<BTreeMap<String, ServerConfig>, InventoryError> {
    let mut config = config_of(value)?;
    match config.get_mut("mcp_servers").map(serde_json::Value::take) {
        None | Some(serde_json::Value::Null) => Ok(BTreeMap::new()),
        Some(servers) => {
            serde_json::from_value(servers).map_err(|e| ParseError::McpServers(e).into())
        }
    }
}

/// The `config` object of a `config/read` answer (whole response or its `result`).
fn config_of(mut value: serde_json::Value) -> Result<serde_json::Value, InventoryError> {
    if let Some(error) = value.get_mut("error") {
        return Err(ParseError::Rpc {
            method: "config/read",
            error: error.take(),
        }
        .into());
    }
    if let Some(result) = value.get_mut("result") {
        value = result.take();
    }
    match value.get_mut("config").filter(|c| c.is_object()) {
        Some(config) => Ok(config.take()),
        None => Err(ParseError::NotConfigRead.into()),
    }
}

/// Starts `codex app-server` (`codex` given the reviewer's environment and working directory,
/// like [`super::inventory::codex_inventory_from`]), performs the `config/read` exchange and
/// returns the effective `mcp_servers` table. The child and its process group are ended as
/// soon as the answer arrives, and on every failure; waits at most `timeout` in all.
///
/// # Errors
/// [`InventoryError`]: Codex cannot start, exits or closes stdout before answering
/// (truncated), prints a line that is not JSON, answers with an error or a malformed
/// configuration, or does not answer within `timeout`.
pub fn config_read_from(
    codex: Command,
    timeout: Duration,
) -> Result<BTreeMap<String, ServerConfig>, InventoryError> {
    let mut config = config_read_raw_from(codex, timeout)?;
    servers_of(serde_json::json!({ "config": config.take() }))
}

/// [`config_read_from`], returning the whole effective `config` object (`features`,
/// `mcp_servers`, …) as Codex sent it.
///
/// # Errors
/// As [`config_read_from`].
pub fn config_read_raw_from(
    mut codex: Command,
    timeout: Duration,
) -> Result<serde_json::Value, InventoryError> {
    let deadline = Instant::now() + timeout;
    let mut child = Group::spawn(
        codex
            .arg("app-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(InventoryError::Spawn)?;
    let stdout = child.0.stdout.take().expect("piped");
    let stderr = child.0.stderr.take().expect("piped");
    let mut stdin = child.0.stdin.take().expect("piped");
    // Lines (and then EOF) arrive through a channel, so a silent child cannot hold us.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let (err_tx, err_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut { stderr }, &mut buf);
        let _ = err_tx.send(buf);
    });
    // A child that has already exited makes this fail with EPIPE: then its output tells why.
    let _ = stdin.write_all(CONFIG_READ_REQUEST.as_bytes());
    let _ = stdin.flush();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(line)) => {
                if line.trim().is_empty() {
                    continue;
                }
                let mut value: serde_json::Value =
                    serde_json::from_str(&line).map_err(|source| ParseError::AnswerLine {
                        line: truncate(&line).to_string(),
                        source,
                    })?;
                if value.get("id") == Some(&serde_json::Value::from(1))
                    && let Some(error) = value.get_mut("error")
                {
                    return Err(ParseError::Rpc {
                        method: "initialize",
                        error: error.take(),
                    }
                    .into());
                }
                if value.get("id") == Some(&serde_json::Value::from(2)) {
                    drop(stdin);
                    return config_of(value);
                }
            }
            Ok(Err(e)) => return Err(InventoryError::Spawn(e)),
            Err(mpsc::RecvTimeoutError::Timeout) => return Err(InventoryError::Timeout(timeout)),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                drop(stdin);
                let status = child.0.wait().map_err(InventoryError::Spawn)?;
                let left = deadline.saturating_duration_since(Instant::now());
                let stderr = err_rx.recv_timeout(left).unwrap_or_default();
                let stderr = String::from_utf8_lossy(&stderr).into_owned();
                // A failed Codex is reported as such; one that exited cleanly without the
                // answer printed something else.
                if !status.success() {
                    return Err(InventoryError::Exit { status, stderr });
                }
                return Err(ParseError::Truncated { status, stderr }.into());
            }
        }
    }
}

/// `line` cut to its first 200 bytes (at a character boundary).
fn truncate(line: &str) -> &str {
    let mut end = line.len().min(200);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}
