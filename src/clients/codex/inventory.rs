//! The Codex CLI's inherited MCP servers: what `codex mcp list --json` reports from the
//! user's `$CODEX_HOME/config.toml` and plugins. `-c mcp_servers={}` cannot remove them, so
//! the Codex renderer disables each by name; this inventory is how it knows the names.
//! Fail-closed: anything but the expected JSON array is an [`IsolationError`], never an
//! empty inventory.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;

/// One MCP server Codex would start, as `codex mcp list --json` (Codex CLI 0.169.0)
/// reports it.
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
        /// Names of variables forwarded from Codex's own environment.
        #[serde(default)]
        env_vars: Vec<String>,
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
#[derive(Debug)]
pub enum IsolationError {
    /// The Codex binary could not be started or its output read.
    Spawn(std::io::Error),
    /// It did not finish within the timeout (it was killed).
    Timeout(Duration),
    /// It exited unsuccessfully.
    Exit {
        /// The exit status, as `std` displays it.
        status: String,
        /// Its standard error, lossily decoded.
        stderr: String,
    },
    /// Its output is not the expected JSON array.
    Parse(String),
}

impl fmt::Display for IsolationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("cannot list the Codex MCP servers to disable (`codex mcp list --json`): ")?;
        match self {
            IsolationError::Spawn(e) => write!(f, "{e}"),
            IsolationError::Timeout(t) => write!(f, "no answer within {} s", t.as_secs_f64()),
            IsolationError::Exit { status, stderr } => {
                write!(f, "{status}: {}", stderr.trim().escape_debug())
            }
            IsolationError::Parse(e) => write!(f, "unexpected output: {e}"),
        }
    }
}

impl std::error::Error for IsolationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IsolationError::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

/// Parses `codex mcp list --json` output: a JSON array of server objects. Unknown fields are
/// ignored; a missing `name`, `enabled` or `transport`, or an unknown transport type, fails.
///
/// # Errors
/// [`IsolationError::Parse`] for anything but that array (an empty string included).
///
/// ```
/// use kcap_mcp_registry::clients::codex::inventory::{parse_inventory, Transport};
///
/// let inv = parse_inventory(r#"[{"name":"corp.flows","enabled":true,
///   "transport":{"type":"stdio","command":"flows","args":[],"env":null,"env_vars":[],"cwd":null},
///   "startup_timeout_sec":null,"tool_timeout_sec":null,"auth_status":"unsupported"}]"#).unwrap();
/// assert_eq!(inv[0].name, "corp.flows");
/// assert!(matches!(inv[0].transport, Transport::Stdio { .. }));
/// assert!(parse_inventory("").is_err());
/// assert!(parse_inventory("{}").is_err());
/// // One leading byte order mark is accepted (`crate::decode`), a second is not.
/// assert!(parse_inventory("\u{feff}[]").is_ok());
/// assert!(parse_inventory("\u{feff}\u{feff}[]").is_err());
/// ```
pub fn parse_inventory(json: &str) -> Result<Vec<InheritedServer>, IsolationError> {
    serde_json::from_str(crate::decode::strip_bom(json))
        .map_err(|e| IsolationError::Parse(e.to_string()))
}

/// How long [`codex_inventory`] waits for `codex mcp list --json`.
pub const INVENTORY_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `<codex_bin> mcp list --json` with the current environment (run it with the
/// environment the reviewer will get: the same `CODEX_HOME`), waits at most
/// [`INVENTORY_TIMEOUT`], and parses the output with [`parse_inventory`].
///
/// # Errors
/// [`IsolationError`] when Codex cannot run, times out, exits non-zero, or prints anything
/// but the expected JSON array.
pub fn codex_inventory(codex_bin: &Path) -> Result<Vec<InheritedServer>, IsolationError> {
    codex_inventory_within(codex_bin, INVENTORY_TIMEOUT)
}

/// [`codex_inventory`] with an explicit timeout.
///
/// # Errors
/// As [`codex_inventory`].
pub fn codex_inventory_within(
    codex_bin: &Path,
    timeout: Duration,
) -> Result<Vec<InheritedServer>, IsolationError> {
    codex_inventory_from(Command::new(codex_bin), timeout)
}

/// Runs `mcp list --json` through `codex`, a [`Command`] for the Codex binary that the caller
/// has given the reviewer's environment and working directory (`env`, `env_clear`,
/// `current_dir`): Codex reads `$CODEX_HOME/config.toml` and, in a trusted project, the
/// working directory's `.codex/config.toml`, so the inventory must be taken where and as the
/// reviewer will run. Stdin, stdout and stderr are set here; waits at most `timeout`.
///
/// # Errors
/// As [`codex_inventory`].
pub fn codex_inventory_from(
    mut codex: Command,
    timeout: Duration,
) -> Result<Vec<InheritedServer>, IsolationError> {
    let mut child = codex
        .args(["mcp", "list", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(IsolationError::Spawn)?;
    // Each pipe is read on its own thread, which reports through a channel, so a grandchild
    // that keeps a pipe open cannot hold us past the deadline.
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = tx.send(pipe.read_to_end(&mut buf).map(|_| buf));
        });
        rx
    };
    let stdout = read_all(Box::new(child.stdout.take().expect("piped")));
    let stderr = read_all(Box::new(child.stderr.take().expect("piped")));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(IsolationError::Spawn)? {
            break status;
        }
        if Instant::now() >= deadline {
            // Best effort: the child may have exited in between.
            let _ = child.kill();
            let _ = child.wait();
            return Err(IsolationError::Timeout(timeout));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let collect = |rx: mpsc::Receiver<std::io::Result<Vec<u8>>>| {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(read) => read.map_err(IsolationError::Spawn),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(IsolationError::Timeout(timeout)),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(IsolationError::Spawn(
                std::io::Error::other("the pipe reader stopped without a result"),
            )),
        }
    };
    let (out, err) = (collect(stdout)?, collect(stderr)?);
    if !status.success() {
        return Err(IsolationError::Exit {
            status: status.to_string(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        });
    }
    let out = std::str::from_utf8(&out).map_err(|e| IsolationError::Parse(e.to_string()))?;
    parse_inventory(out)
}
