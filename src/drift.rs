//! Drift between the registry and a client's registration file (`check --against FILE`):
//! a Claude Code `.mcp.json` or a Codex CLI `config.toml`, told apart by content.
//!
//! The registry's side is [`registrations`] (every allowlistable entry), each with the
//! expected `command` (the kcap binary, `kcap` unless told otherwise) and its `args`: exactly
//! what [`crate::export::claude_mcp_json`] and [`crate::export::codex_toml`] write. A server
//! the registry lists and the file lacks is *missing*; a server the file lists and the
//! registry does not is *extra*; a server in both with another `command` or `args`, turned
//! off with `enabled = false`, or pointed elsewhere (`url`, a `type` other than `stdio`)
//! differs.
//! Other keys (`env`, `cwd`, `description`, timeouts) are not compared.

use std::fmt;
use std::path::Path;

use crate::export::registrations;
use crate::report::Finding;
use crate::schema::Entry;

/// Which client a registration file is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Client {
    /// Claude Code: a JSON object with an `mcpServers` object (`.mcp.json`).
    Claude,
    /// Codex CLI: TOML with an `mcp_servers` table (`config.toml`).
    Codex,
}

impl Client {
    /// `"Claude Code"` or `"Codex CLI"`.
    pub const fn name(self) -> &'static str {
        match self {
            Client::Claude => "Claude Code",
            Client::Codex => "Codex CLI",
        }
    }
}

/// One MCP server a registration file registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registered {
    /// The server's name (its key).
    pub name: String,
    /// Its `command`; `None` for a server without one (a URL server).
    pub command: Option<String>,
    /// Its `args`; empty when absent.
    pub args: Vec<String>,
    /// `false` when the file sets `enabled = false` (Codex); `true` otherwise.
    pub enabled: bool,
    /// What makes it a remote server instead of a command: `url = "…"` or a `type` other
    /// than `stdio` (as the file writes it); `None` for a command server.
    pub remote: Option<String>,
}

/// A parsed registration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrationFile {
    /// The path as the user gave it.
    pub path: String,
    /// Which client it is for.
    pub client: Client,
    /// The servers it registers, sorted by name.
    pub servers: Vec<Registered>,
}

/// A registration file that could not be read or understood.
#[derive(Debug)]
pub struct RegistrationError {
    /// The path as the user gave it.
    pub path: String,
    /// What is wrong, e.g. `cannot read it: No such file or directory (os error 2)`.
    pub problem: String,
}

impl fmt::Display for RegistrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}",
            crate::diagnostic::printable(&self.path),
            self.problem
        )
    }
}

impl std::error::Error for RegistrationError {}

/// Reads and parses the registration file at `path` (see [`parse_registration`]).
///
/// # Errors
/// [`RegistrationError`] when it cannot be read or is not a registration file.
pub fn read_registration(path: &Path) -> Result<RegistrationFile, RegistrationError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| RegistrationError {
        path: shown.clone(),
        problem: format!("cannot read it: {e}"),
    })?;
    parse_registration(&shown, &text)
}

/// Parses a registration file's text. A valid JSON object with an `mcpServers` key is a
/// Claude Code `.mcp.json`; TOML with an `mcp_servers` key is a Codex `config.toml`.
/// Each server must be an object/table whose `command`, when present, is a string and whose
/// `args`, when present, is an array of strings.
///
/// # Errors
/// [`RegistrationError`] for anything else, saying which of the two shapes it misses and why.
pub fn parse_registration(path: &str, text: &str) -> Result<RegistrationFile, RegistrationError> {
    let err = |problem: String| RegistrationError {
        path: path.to_string(),
        problem,
    };
    const NEITHER: &str = "is neither a Claude Code .mcp.json (a JSON object with `mcpServers`) \
                           nor a Codex config.toml (TOML with an `[mcp_servers]` table)";
    let json = serde_json::from_str::<serde_json::Value>(text);
    if let Ok(value) = &json {
        let Some(servers) = value.as_object().and_then(|o| o.get("mcpServers")) else {
            return Err(err(format!(
                "{NEITHER}: it is JSON without a top-level `mcpServers` key"
            )));
        };
        let servers = servers
            .as_object()
            .ok_or_else(|| err("`mcpServers` must be a JSON object of servers".into()))?;
        let mut servers: Vec<Registered> = servers
            .iter()
            .map(|(name, v)| json_server(name, v).map_err(&err))
            .collect::<Result<_, _>>()?;
        servers.sort_by(|a, b| a.name.cmp(&b.name));
        return Ok(RegistrationFile {
            path: path.into(),
            client: Client::Claude,
            servers,
        });
    }
    let table = match toml::from_str::<toml::Table>(text) {
        Ok(table) => table,
        Err(toml_err) => {
            let json_err = json.err().map(|e| e.to_string()).unwrap_or_default();
            let toml_err = toml_err.message().trim_end().to_string();
            return Err(err(format!(
                "{NEITHER}: it is not JSON ({json_err}) and not TOML ({toml_err})"
            )));
        }
    };
    let Some(servers) = table.get("mcp_servers") else {
        return Err(err(format!(
            "{NEITHER}: it is TOML without an `mcp_servers` table"
        )));
    };
    let servers = servers
        .as_table()
        .ok_or_else(|| err("`mcp_servers` must be a TOML table of servers".into()))?;
    let mut servers: Vec<Registered> = servers
        .iter()
        .map(|(name, v)| toml_server(name, v).map_err(&err))
        .collect::<Result<_, _>>()?;
    servers.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(RegistrationFile {
        path: path.into(),
        client: Client::Codex,
        servers,
    })
}

/// One registered server's `command` and `args` from its JSON value (a Codex TOML table is
/// converted to JSON first). `at(key)` names a field as the file spells it
/// (`` `mcpServers.x.args` ``), `table` the kind of value a server must be.
fn registered(
    name: &str,
    v: &serde_json::Value,
    at: impl Fn(&str) -> String,
    table: &str,
) -> Result<Registered, String> {
    let obj = v
        .as_object()
        .ok_or_else(|| format!("{} must be {table}", at("")))?;
    let command = match obj.get("command") {
        None => None,
        Some(c) => Some(
            c.as_str()
                .ok_or_else(|| format!("{} must be a string", at(".command")))?
                .to_string(),
        ),
    };
    let args = match obj.get("args") {
        None => Vec::new(),
        Some(a) => a
            .as_array()
            .and_then(|a| a.iter().map(|s| s.as_str().map(String::from)).collect())
            .ok_or_else(|| format!("{} must be an array of strings", at(".args")))?,
    };
    let enabled = match obj.get("enabled") {
        None => true,
        Some(e) => e
            .as_bool()
            .ok_or_else(|| format!("{} must be a boolean", at(".enabled")))?,
    };
    let remote = match (obj.get("type").and_then(|t| t.as_str()), obj.get("url")) {
        (Some(t), _) if t != "stdio" => Some(format!("type = {}", json(t))),
        (_, Some(url)) => Some(format!("url = {url}")),
        _ => None,
    };
    Ok(Registered {
        name: name.into(),
        command,
        args,
        enabled,
        remote,
    })
}

fn json_server(name: &str, v: &serde_json::Value) -> Result<Registered, String> {
    let at = |key: &str| format!("`mcpServers.{}{key}`", name.escape_debug());
    registered(name, v, at, "a JSON object")
}

fn toml_server(name: &str, v: &toml::Value) -> Result<Registered, String> {
    let at = |key: &str| format!("`mcp_servers.\"{}\"{key}`", name.escape_debug());
    // Every TOML value has a JSON form (datetimes become objects, never strings).
    let v = serde_json::to_value(v).map_err(|e| format!("{}: {e}", at("")))?;
    registered(name, &v, at, "a TOML table")
}

/// How a registration file differs from the registry for one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriftKind {
    /// The registry lists the server; the file does not register it.
    Missing {
        /// The expected command.
        command: String,
        /// The expected args.
        args: Vec<String>,
    },
    /// The file registers a server that is not one of the registry's registrations.
    Extra {
        /// Set when the name is a registry entry that is not allowlistable (injection-only).
        injection_only: bool,
    },
    /// The file's `command` is not the expected one.
    Command {
        /// The expected command.
        expected: String,
        /// The file's command; `None` when it has none.
        found: Option<String>,
    },
    /// The file turns the server off (`enabled = false`).
    Disabled,
    /// The file points the server somewhere else (`url`, or a `type` other than `stdio`).
    Remote {
        /// The offending setting, e.g. `url = "https://…"`.
        found: String,
    },
    /// The file's `args` are not the registry's.
    Args {
        /// The registry's args.
        expected: Vec<String>,
        /// The file's args.
        found: Vec<String>,
    },
}

/// One difference between the registry and a registration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Drift {
    /// The registration file, as the user named it.
    pub file: String,
    /// Which client it is for.
    pub client: Client,
    /// The server's name.
    pub server: String,
    /// How it differs.
    pub kind: DriftKind,
}

impl Drift {
    /// The stable rule name: `drift-missing`, `drift-extra`, `drift-disabled`,
    /// `drift-remote`, `drift-command` or `drift-args`.
    pub const fn rule(&self) -> &'static str {
        match self.kind {
            DriftKind::Missing { .. } => "drift-missing",
            DriftKind::Extra { .. } => "drift-extra",
            DriftKind::Disabled => "drift-disabled",
            DriftKind::Remote { .. } => "drift-remote",
            DriftKind::Command { .. } => "drift-command",
            DriftKind::Args { .. } => "drift-args",
        }
    }

    /// This drift as a [`Finding`] (no location), with a message naming the server and the
    /// file, and a help saying how to fix it.
    pub fn finding(&self) -> Finding {
        let server = self.server.escape_debug();
        // Escaped: a hostile file name cannot forge or break a report line.
        let file = crate::diagnostic::printable(&self.file);
        let export = match self.client {
            Client::Claude => "claude-mcp-json",
            Client::Codex => "codex-toml",
        };
        let (message, help) = match &self.kind {
            DriftKind::Missing { command, args } => (
                format!("MCP server `{server}` is in the registry but not registered in {file}"),
                format!(
                    "register it with command {} and args {}, or regenerate the file with `kcap-mcp-registry export {export}`",
                    json(command),
                    json(args)
                ),
            ),
            DriftKind::Extra { injection_only: true } => (
                format!("{file} registers `{server}`, an injection-only registry entry"),
                "remove it: the launcher injects it into reviewers with their agent id, and no client registers it".into(),
            ),
            DriftKind::Extra { injection_only: false } => (
                format!("{file} registers MCP server `{server}`, which is not in the registry"),
                format!("remove it, or add `registry/{server}.toml` if it is a kcap MCP server"),
            ),
            DriftKind::Disabled => (
                format!("MCP server `{server}` is registered in {file} but disabled (`enabled = false`)"),
                "remove `enabled = false`, or regenerate the file with `kcap-mcp-registry export codex-toml`".into(),
            ),
            DriftKind::Remote { found } => (
                format!(
                    "MCP server `{server}` in {file} is a remote server ({}), not the registry's kcap command",
                    crate::diagnostic::printable(found)
                ),
                "remove `url` and `type` from it: kcap's MCP servers run as the kcap command".into(),
            ),
            DriftKind::Command { expected, found } => (
                match found {
                    Some(found) => format!(
                        "MCP server `{server}` runs {} in {file}, not {}",
                        json(found),
                        json(expected)
                    ),
                    None => format!(
                        "MCP server `{server}` has no `command` in {file}; the registry runs {}",
                        json(expected)
                    ),
                },
                format!(
                    "set its `command` to {} (or pass `--kcap-bin` with the kcap binary this file uses)",
                    json(expected)
                ),
            ),
            DriftKind::Args { expected, found } => (
                format!(
                    "MCP server `{server}` has args {} in {file}; the registry has {}",
                    json(found),
                    json(expected)
                ),
                format!("set its `args` to {}", json(expected)),
            ),
        };
        Finding {
            file: self.file.clone(),
            location: None,
            rule: self.rule(),
            message,
            help,
        }
    }
}

/// A value as compact JSON, for messages: strings quoted and escaped, arrays bracketed.
fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("strings serialize")
}

/// Every difference between the registry `entries` (as [`registrations`], each expected to
/// run `command`) and `file`: missing and differing servers in registry order, then extra
/// ones sorted by name.
pub fn drift(entries: &[Entry], command: &str, file: &RegistrationFile) -> Vec<Drift> {
    let mut out = Vec::new();
    let make = |server: &str, kind| Drift {
        file: file.path.clone(),
        client: file.client,
        server: server.into(),
        kind,
    };
    for entry in registrations(entries) {
        let Some(found) = file.servers.iter().find(|s| s.name == entry.id) else {
            out.push(make(
                &entry.id,
                DriftKind::Missing {
                    command: command.into(),
                    args: entry.args.clone(),
                },
            ));
            continue;
        };
        if !found.enabled {
            out.push(make(&entry.id, DriftKind::Disabled));
        }
        // A server without a command is reported as such (drift-command) just below.
        if let (Some(remote), Some(_)) = (&found.remote, &found.command) {
            out.push(make(
                &entry.id,
                DriftKind::Remote {
                    found: remote.clone(),
                },
            ));
        }
        if found.command.as_deref() != Some(command) {
            out.push(make(
                &entry.id,
                DriftKind::Command {
                    expected: command.into(),
                    found: found.command.clone(),
                },
            ));
        }
        // A server without a command (a URL server) has no args to compare.
        if found.command.is_some() && found.args != entry.args {
            out.push(make(
                &entry.id,
                DriftKind::Args {
                    expected: entry.args.clone(),
                    found: found.args.clone(),
                },
            ));
        }
    }
    for server in &file.servers {
        if registrations(entries).any(|e| e.id == server.name) {
            continue;
        }
        let injection_only = entries.iter().any(|e| e.id == server.name);
        out.push(make(&server.name, DriftKind::Extra { injection_only }));
    }
    out
}
