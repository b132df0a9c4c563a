//! The Claude Code oracle shared by `tests/clients/conformance/` and `tests/clients/conformance_claude.rs`:
//! run a reviewer launch until the MCP servers it starts have been recorded, then stop it.
//!
//! Works on both Claude Code versions the suite runs (measured 2026-11-30):
//! - 2.1.197 starts the `--mcp-config` servers even when it then exits at a missing prompt;
//!   2.1.328 exits at a missing prompt *before* starting them. So the oracle always gives a
//!   prompt ([`PROMPT`]).
//! - With a prompt and `ANTHROPIC_BASE_URL` at a dead local port, both start the servers,
//!   then retry the API for minutes. So the oracle watches the recorder's log and, once every
//!   started recorder is done and no new one has started for [`QUIET`], kills the client's
//!   process group. When nothing has started after [`NOTHING_WAIT`], it stops too (a launch
//!   that starts no server).
//! - With the API at a stand-in that refuses the turn (HTTP 400; `conformance::claude`),
//!   2.1.197 and 2.1.332 start the servers, send the model request and exit (measured
//!   2026-12-05: the servers' starts came before the first request), so the run ends when the
//!   client does, well before [`QUIET`] or [`NOTHING_WAIT`].
//! - 2.1.328 starts a stdio server a second time when the first process exits at once
//!   (2.1.197 does not): count distinct servers, not starts.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The prompt every oracle run gives (it never reaches a model: the API is a dead port).
pub const PROMPT: &str = "Reply with OK.";

/// How long no new recorder may start before the run is considered settled.
pub const QUIET: Duration = Duration::from_millis(2500);

/// How long to wait for a first recorder before concluding that none will start.
pub const NOTHING_WAIT: Duration = Duration::from_secs(10);

/// The longest one oracle run may take; past it the client is killed and the test fails.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(40);

/// Variables Claude Code adds to every MCP server's environment (probed per version);
/// `session`: started by a reviewer session, not by `claude mcp list`.
pub fn added_env(version: &str, session: bool) -> Vec<&'static str> {
    let mut names = vec![
        "AI_AGENT",
        "CLAUDECODE",
        "CLAUDE_CODE_ENTRYPOINT",
        "CLAUDE_CODE_SESSION_ID",
        "CLAUDE_PROJECT_DIR",
        "COREPACK_ENABLE_AUTO_PIN",
        "NoDefaultCurrentDirectoryInExePath",
    ];
    if version != "2.1.197" {
        // New in 2.1.328 (probed): a notes dir, the launching session ids, and, in a
        // session only, the socket and token of its inter-session messaging.
        names.extend([
            "CLAUDE_CODE_CHILD_NOTES_DIR",
            "CLAUDE_CODE_LAUNCHED_BY_SESSION_IDS",
        ]);
        if session {
            names.extend([
                "CLAUDE_CODE_MESSAGING_SOCKET",
                "CLAUDE_CODE_MESSAGING_TOKEN",
            ]);
        }
    }
    names
}

/// `bin --version` (e.g. `2.1.197`), run with a throwaway `HOME` and a timeout.
pub fn version(bin: &Path) -> String {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .next()
        .unwrap_or_else(|| panic!("{} --version printed nothing", bin.display()))
        .to_string()
}

/// Names in `dir` ending in `ext`, without it.
fn marks(dir: &Path, ext: &str) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(ext).map(str::to_string)
        })
        .collect()
}

/// Runs `cmd` (stdin `/dev/null`, stdout and stderr to `log`, its own process group) until
/// the recorders writing `<pid>.start` / `<pid>.done` into `records` have settled, or it
/// exits; then kills its process group. Panics (after killing it) past [`RUN_TIMEOUT`].
pub fn run_until_recorded(mut cmd: Command, records: &Path, log: &Path) {
    let out = std::fs::File::create(log).unwrap();
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0);
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start claude: {e}"));
    let started = Instant::now();
    let mut last_change = Instant::now();
    let mut seen = BTreeSet::new();
    let failure = loop {
        std::thread::sleep(Duration::from_millis(50));
        let (start, done) = (marks(records, ".start"), marks(records, ".done"));
        if start != seen {
            seen = start.clone();
            last_change = Instant::now();
        }
        let exited = child.try_wait().unwrap().is_some();
        let settled = start == done
            && if seen.is_empty() {
                exited || started.elapsed() >= NOTHING_WAIT
            } else {
                exited || last_change.elapsed() >= QUIET
            };
        if settled {
            break None;
        }
        if started.elapsed() >= RUN_TIMEOUT {
            break Some(format!(
                "claude: recorders did not settle within {} s (started {start:?}, done {done:?})",
                RUN_TIMEOUT.as_secs()
            ));
        }
    };
    // The child is not reaped yet, so its pid (= the group id) cannot be reused.
    crate::common::peers::kill_group(child.id());
    let _ = child.kill();
    let _ = child.wait();
    if let Some(message) = failure {
        panic!(
            "{message}; its output:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }
}

/// An MCP recorder: logs argv, env and cwd to `<records>/<pid>.json`, lists two tools per
/// server (named after its `mcp <kind>` argument), and answers nothing else.
pub fn mcp_recorder(records: &Path) -> String {
    let records = serde_json::to_string(records.to_str().unwrap()).unwrap();
    format!(
        r#"#!/usr/bin/env node
const fs = require("fs");
fs.writeFileSync({records} + "/" + process.pid + ".json", JSON.stringify({{ argv: process.argv.slice(2), env: process.env, cwd: process.cwd() }}));
const tools = process.argv[3] === "flow-result" ? ["submit_review_result", "send_flow_message"] : ["get_pr_summary", "list_pr_files"];
let buf = "";
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
process.stdin.on("data", (c) => {{
  buf += c; let i;
  while ((i = buf.indexOf("\n")) >= 0) {{
    const line = buf.slice(0, i).trim(); buf = buf.slice(i + 1);
    let m; try {{ m = JSON.parse(line); }} catch (e) {{ continue; }}
    if (m.id === undefined) continue;
    if (m.method === "initialize") send({{ jsonrpc: "2.0", id: m.id, result: {{ protocolVersion: "2025-06-18", capabilities: {{ tools: {{}} }}, serverInfo: {{ name: "r", version: "1" }} }} }});
    else if (m.method === "tools/list") send({{ jsonrpc: "2.0", id: m.id, result: {{ tools: tools.map((t) => ({{ name: t, description: t, inputSchema: {{ type: "object" }} }})) }} }});
    else send({{ jsonrpc: "2.0", id: m.id, error: {{ code: -32601, message: "no" }} }});
  }}
}});
process.stdin.on("end", () => process.exit(0));
"#
    )
}

/// The last of a terminal's output, as text (escape sequences left in, for the message).
pub fn screen(output: &[u8]) -> String {
    let text = String::from_utf8_lossy(output);
    let chars: Vec<char> = text.chars().collect();
    chars[chars.len().saturating_sub(3000)..].iter().collect()
}
