//! The recorder: the MCP server `verify` gives a client in place of the kcap binary, for the
//! injected servers and for every server of the hostile configurations alike.
//!
//! It is this crate's own binary, started through a symbolic link named [`RECORDER_NAME`]
//! ([`install`]): the plan fixes a server's arguments (`mcp review`), so the binary learns
//! that it is to record from the name it was started by, and where to record from the
//! directory that name is in. Each start writes `<pid>.json` there (its argv, environment
//! and working directory) before it reads anything, then answers MCP over stdio: `initialize`
//! (a server with tools), `tools/list` (one tool, [`RECORDED_TOOL`]'s; it marks
//! `<pid>.tools`, so `verify` knows the client got as far as asking), `ping`, and "method
//! not found" to anything else.
//! Notifications are ignored; it exits when its standard input closes.
//!
//! Before it records, it tries what [`ATTACKS_FILE`] in its directory lists (reading the
//! daemon's files, signalling the daemon, writing outside the launch directory: the attacks
//! of issue 31 from inside the reviewer) and records whether each got through
//! ([`Record::reached`]), so `verify` judges the sandbox by what a server of the reviewer
//! could do.

use std::collections::BTreeMap;
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The name of the one tool the recorder lists (no input, never called): a server that lists
/// none is a failed one to Gemini CLI 0.61.0 ("No prompts, tools, or resources found on the server",
/// logged as a discovery error, which stops the launch: `clients::gemini::ready`), and the
/// kcap servers the recorder stands in for all have tools.
pub const RECORDED_TOOL: &str = "recorded";

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The file name the recorder is started by: the binary that sees it as its own name
/// (`argv[0]`) records instead of running its command line ([`run_if_recorder`]).
pub const RECORDER_NAME: &str = "kcap-verify-recorder";

/// What one start of the recorder saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Its argv, the command first (as the client started it), lossily decoded.
    pub argv: Vec<String>,
    /// Its whole environment, lossily decoded.
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: String,
    /// Its process id.
    pub pid: u32,
    /// Whether the client asked it for its tools (`tools/list`).
    #[serde(default)]
    pub listed_tools: bool,
    /// Each attack of [`ATTACKS_FILE`], by name: whether it got through.
    #[serde(default)]
    pub reached: BTreeMap<String, bool>,
}

/// The file in the recorder's directory listing what each start tries to reach: a JSON
/// array of [`Attack`]s.
pub const ATTACKS_FILE: &str = "attacks.json";

/// What a recorder start tries, from inside the reviewer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attack {
    /// Its name in [`Record::reached`] (`daemon-home`, `daemon-environ`, …).
    pub name: String,
    /// What it tries.
    #[serde(flatten)]
    pub kind: AttackKind,
}

/// How an [`Attack`] tries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum AttackKind {
    /// Read a byte of this file.
    Read {
        /// An absolute path.
        path: PathBuf,
    },
    /// Create a file `planted-<pid>` in this directory.
    Write {
        /// An absolute path.
        dir: PathBuf,
    },
    /// Signal this process (signal 0: the permission check alone).
    Signal {
        /// Its process id.
        pid: i32,
    },
}

impl AttackKind {
    /// Whether it got through.
    fn attempt(&self) -> bool {
        use std::io::Read as _;
        match self {
            AttackKind::Read { path } => std::fs::File::open(path)
                .and_then(|mut f| f.read(&mut [0u8; 1]))
                .is_ok(),
            AttackKind::Write { dir } => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(dir.join(format!("planted-{}", std::process::id())))
                .is_ok(),
            AttackKind::Signal { pid } => rustix::process::Pid::from_raw(*pid)
                .is_some_and(|pid| rustix::process::test_kill_process(pid).is_ok()),
        }
    }
}

/// Tries every attack of `dir`'s [`ATTACKS_FILE`] (none when it is missing or unreadable).
fn attempt_all(dir: &Path) -> BTreeMap<String, bool> {
    let attacks: Vec<Attack> = std::fs::read(dir.join(ATTACKS_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    attacks
        .iter()
        .map(|a| (a.name.clone(), a.kind.attempt()))
        .collect()
}

impl Record {
    /// Its `KCAP_*` variables: the part of the environment the plan gives a kcap server.
    pub fn kcap_env(&self) -> BTreeMap<String, String> {
        self.env
            .iter()
            .filter(|(k, _)| k.starts_with("KCAP_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// Creates the recorder in `dir` (an existing, empty directory the records go to): a
/// symbolic link named [`RECORDER_NAME`] to `program`, this crate's binary. Returns the
/// link's path, the command to give the client.
///
/// # Errors
/// The link cannot be created.
pub fn install(dir: &Path, program: &Path) -> std::io::Result<PathBuf> {
    let link = dir.join(RECORDER_NAME);
    std::os::unix::fs::symlink(program, &link)?;
    Ok(link)
}

/// Runs the recorder when this process was started by the name [`RECORDER_NAME`], and
/// returns its exit code; `None` otherwise (run the command line as usual). The binary's
/// `main` calls it first.
pub fn run_if_recorder() -> Option<ExitCode> {
    let argv0 = PathBuf::from(std::env::args_os().next()?);
    if argv0.file_name()? != RECORDER_NAME {
        return None;
    }
    let dir = argv0.parent().filter(|d| !d.as_os_str().is_empty())?;
    Some(match serve(dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{RECORDER_NAME}: cannot record in {}: {e}", dir.display());
            ExitCode::from(2)
        }
    })
}

/// Records this start in `dir`, then answers MCP on stdin and stdout until stdin closes.
fn serve(dir: &Path) -> std::io::Result<()> {
    let pid = std::process::id();
    let record = Record {
        argv: std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        env: std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect(),
        cwd: std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_default(),
        pid,
        listed_tools: false,
        reached: attempt_all(dir),
    };
    let text = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
    // Written under another name and renamed: a reader never sees half a record.
    let tmp = dir.join(format!(".{pid}.json.tmp"));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join(format!("{pid}.json")))?;
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(line.trim()) else {
            continue;
        };
        let Some(id) = message.get("id").filter(|id| !id.is_null()) else {
            continue; // a notification
        };
        let answer = match message.get("method").and_then(Value::as_str) {
            Some("initialize") => json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": RECORDER_NAME, "version": env!("CARGO_PKG_VERSION")},
            }}),
            Some("tools/list") => {
                std::fs::write(dir.join(format!("{pid}.tools")), "")?;
                json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{
                    "name": RECORDED_TOOL,
                    "description": "kcap verify's recorder: it records its start",
                    "inputSchema": {"type": "object", "properties": {}},
                }]}})
            }
            Some("ping") => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            _ => json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32601, "message": "method not found"}}),
        };
        if writeln!(stdout, "{answer}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    Ok(())
}

/// Every record in `dir`, ordered by argv then process id.
///
/// # Errors
/// `dir` cannot be read, or a record in it cannot be read or parsed.
pub fn read_records(dir: &Path) -> std::io::Result<Vec<Record>> {
    let mut records = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        // `<pid>.json` only: not a record being written (`.<pid>.json.tmp`), not
        // [`ATTACKS_FILE`].
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .filter(|pid| pid.parse::<u32>().is_ok())
        else {
            continue;
        };
        let path = dir.join(&name);
        let text = std::fs::read(&path)?;
        let mut record: Record = serde_json::from_slice(&text).map_err(|e| {
            std::io::Error::other(format!("{} is not a record: {e}", path.display()))
        })?;
        record.listed_tools = dir.join(format!("{pid}.tools")).exists();
        records.push(record);
    }
    records.sort_by(|a, b| (&a.argv, a.pid).cmp(&(&b.argv, b.pid)));
    Ok(records)
}
