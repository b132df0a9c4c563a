//! Driving a real client over ACP (Gemini CLI, OpenCode, Copilot CLI) with recorders as its
//! MCP servers: [`recorder_source`] writes a node script that logs what it was started with,
//! [`read_records`] reads those logs back, and [`drive`] starts the client, opens a session
//! and waits until every wanted server has been asked for its tools. The isolation tests of
//! Gemini CLI, OpenCode and Copilot CLI use it still; the conformance tests run through the
//! library's executor instead (`common::verify`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kcap_mcp_registry::clients::plan::LaunchPlan;
use serde_json::{Value, json};

/// A server as the records show it: argv (command first) and `KCAP_*` environment.
pub type Known = (Vec<String>, BTreeMap<String, String>);

/// What one recorder process saw.
#[derive(Debug)]
pub struct Record {
    /// The command (as the client ran it) and its arguments.
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: String,
    /// It answered `tools/list`.
    pub listed_tools: bool,
}

impl Record {
    /// The `KCAP_*` part of the environment.
    pub fn kcap_env(&self) -> BTreeMap<&str, &str> {
        self.env
            .iter()
            .filter(|(k, _)| k.starts_with("KCAP_"))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }

    /// The server this record shows: its argv and `KCAP_*` environment.
    pub fn known(&self) -> Known {
        let env = self
            .kcap_env()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        (self.argv.clone(), env)
    }
}

/// Every recorder's log in `dir`, sorted by argv.
pub fn read_records(dir: &Path) -> Vec<Record> {
    let mut records: Vec<Record> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let pid = name.strip_suffix(".json")?.to_string();
            let text = std::fs::read_to_string(dir.join(&name)).ok()?;
            let v: Value = serde_json::from_str(&text).ok()?;
            Some(Record {
                argv: serde_json::from_value(v["argv"].clone()).unwrap(),
                env: serde_json::from_value(v["env"].clone()).unwrap(),
                cwd: v["cwd"].as_str().unwrap().into(),
                listed_tools: dir.join(format!("{pid}.tools")).exists(),
            })
        })
        .collect();
    records.sort_by(|a, b| a.argv.cmp(&b.argv));
    records
}

/// A node script that logs `process.argv` (the script path as `$0`, then the arguments),
/// the environment and the cwd to `<records>/<pid>.json`, answers MCP `initialize` and
/// `tools/list` (marking `<pid>.tools`), and `-32601` to any other request (Copilot's
/// `server/discover` included).
pub fn recorder_source(records: &Path) -> String {
    recorder_source_with_tools(records, &[])
}

/// [`recorder_source`], with `tools/list` answering a tool for each of `tools` (an empty
/// object as its input schema), so that the client offers them to the model.
pub fn recorder_source_with_tools(records: &Path, tools: &[&str]) -> String {
    let records = serde_json::to_string(records.to_str().unwrap()).unwrap();
    let tools = serde_json::to_string(
        &tools
            .iter()
            .map(|t| json!({"name": t, "description": t, "inputSchema": {"type": "object", "properties": {}}}))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    format!(
        r#"#!/usr/bin/env node
const fs = require("fs");
const dir = {records};
const log = (ext, text) => fs.writeFileSync(dir + "/" + process.pid + ext, text);
log(".json", JSON.stringify({{ argv: [process.argv[1], ...process.argv.slice(2)], env: process.env, cwd: process.cwd() }}));
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
let buf = "";
process.stdin.on("data", (chunk) => {{
  buf += chunk;
  let i;
  while ((i = buf.indexOf("\n")) >= 0) {{
    const line = buf.slice(0, i).trim();
    buf = buf.slice(i + 1);
    if (!line) continue;
    let m;
    try {{ m = JSON.parse(line); }} catch (e) {{ continue; }}
    if (m.id === undefined) continue;
    if (m.method === "initialize") {{
      send({{ jsonrpc: "2.0", id: m.id, result: {{ protocolVersion: "2025-06-18", capabilities: {{ tools: {{}} }}, serverInfo: {{ name: "recorder", version: "1.0.0" }} }} }});
    }} else if (m.method === "tools/list") {{
      log(".tools", "");
      send({{ jsonrpc: "2.0", id: m.id, result: {{ tools: {tools} }} }});
    }} else {{
      send({{ jsonrpc: "2.0", id: m.id, error: {{ code: -32601, message: "method not found" }} }});
    }}
  }}
}});
process.stdin.on("end", () => process.exit(0));
"#
    )
}

/// The client's environment as the plan builds it from `daemon_env`: the daemon's values of
/// `env_inherit` only, plus `env`.
pub fn plan_env(
    daemon_env: BTreeMap<String, String>,
    plan: &LaunchPlan,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = daemon_env
        .into_iter()
        .filter(|(name, _)| plan.env_inherit.contains(name))
        .collect();
    for var in &plan.env {
        env.insert(var.name.clone(), var.value.clone());
    }
    env
}

/// How long a client run may take and how long to let it settle once the servers are up.
#[derive(Clone, Copy)]
pub struct Timing {
    /// From start to the last wanted server's `tools/list`.
    pub timeout: Duration,
    /// How long to keep the client running after that, so that a server it would start late
    /// shows in the logs.
    pub settle: Duration,
}

/// Starts `cmd` (its stdio piped, in a process group of its own) as the ACP client `name`,
/// sends `initialize` then `session/new` with `session`, waits until every `wanted` server
/// (as [`Record::known`] shows it) has listed its tools in `records`, lets it settle, stops
/// the client and returns every record. Panics after `timing.timeout`.
pub fn drive(
    cmd: Command,
    name: &str,
    session: Value,
    wanted: &BTreeSet<Known>,
    records: &Path,
    timing: Timing,
) -> Vec<Record> {
    drive_with(
        cmd,
        name,
        session,
        wanted,
        records,
        timing,
        Script::default(),
    )
}

/// What [`drive_with`] does beyond [`drive`].
#[derive(Default)]
pub struct Script<'a> {
    /// How long to wait after `initialize` before sending `session/new`.
    pub delay_session: Duration,
    /// Once every wanted server has listed its tools: a `session/prompt` text to send (its
    /// answer is not awaited), and what must hold before the client settles and stops (for
    /// example: a stand-in model API got its first request); panics after the timeout.
    pub prompt: Option<(&'a str, &'a dyn Fn() -> bool)>,
}

/// [`drive`], with a pause before `session/new` and a prompt after the servers are up
/// ([`Script`]).
pub fn drive_with(
    cmd: Command,
    name: &str,
    session: Value,
    wanted: &BTreeSet<Known>,
    records: &Path,
    timing: Timing,
    script: Script<'_>,
) -> Vec<Record> {
    let mut client = Client::start(cmd, name, timing.timeout);
    let result = client.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(result["protocolVersion"], 1, "initialize answered {result}");
    std::thread::sleep(script.delay_session);
    let result = client.request(2, "session/new", session);
    assert!(
        result["sessionId"].is_string(),
        "session/new answered {result}"
    );
    loop {
        let listed: BTreeSet<Known> = read_records(records)
            .iter()
            .filter(|r| r.listed_tools)
            .map(Record::known)
            .collect();
        if wanted.is_subset(&listed) {
            break;
        }
        if client.started.elapsed() > timing.timeout {
            let stderr = client.stop();
            panic!(
                "{name}: not every injected server was asked for its tools within {} s; \
                 listed {listed:?}, records {:?}; stderr:\n{stderr}",
                timing.timeout.as_secs(),
                read_records(records)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some((text, done)) = script.prompt {
        let session_id = result["sessionId"].clone();
        client.send(
            3,
            "session/prompt",
            json!({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}),
        );
        while !done() {
            if client.started.elapsed() > timing.timeout {
                let stderr = client.stop();
                panic!(
                    "{name}: the prompt did not get where it should within {} s; stderr:\n{stderr}",
                    timing.timeout.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    std::thread::sleep(timing.settle);
    client.stop();
    read_records(records)
}

/// Applies `plan`'s files to disk as the daemon does before a launch: creates
/// [`LaunchPlan::dirs`] and writes [`LaunchPlan::files`] under `launch_dir`, and removes each
/// existing [`LaunchPlan::worktree_remove`] path (file or directory) from the plan's cwd.
pub fn prepare(plan: &LaunchPlan, launch_dir: &Path) {
    let relative = |p: &str| !p.starts_with('/') && !p.split('/').any(|c| c == ".." || c == ".");
    for dir in &plan.dirs {
        assert!(relative(dir), "{dir}");
        std::fs::create_dir_all(launch_dir.join(dir)).unwrap();
    }
    for file in &plan.files {
        assert!(relative(&file.path), "{}", file.path);
        let path = launch_dir.join(&file.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &file.contents).unwrap();
    }
    if let Some(cwd) = &plan.cwd {
        for rel in &plan.worktree_remove {
            assert!(relative(rel), "{rel}");
            let path = Path::new(cwd).join(rel);
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path).unwrap(),
                Ok(_) => std::fs::remove_file(&path).unwrap(),
                Err(_) => {}
            }
        }
    }
}

/// A client process driven over ACP (newline-delimited JSON-RPC on stdin/stdout), in its own
/// process group.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<Vec<u8>>,
    started: Instant,
    timeout: Duration,
    name: String,
}

impl Client {
    fn start(mut cmd: Command, name: &str, timeout: Duration) -> Client {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let mut stderr_pipe = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (etx, stderr) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = std::io::Read::read_to_end(&mut stderr_pipe, &mut buf);
            let _ = etx.send(buf);
        });
        Client {
            child,
            stdin,
            lines,
            stderr,
            started: Instant::now(),
            timeout,
            name: name.into(),
        }
    }

    /// Sends request `id` without waiting for its answer.
    fn send(&mut self, id: u64, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends request `id` and returns its `result`, skipping lines that are not JSON-RPC and
    /// the client's own requests; panics on an error response or after the timeout.
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(id, method, params);
        loop {
            let left = self.timeout.saturating_sub(self.started.elapsed());
            let Ok(line) = self.lines.recv_timeout(left) else {
                let stderr = self.stop();
                panic!(
                    "{}: no answer to {method} within {} s; stderr:\n{stderr}",
                    self.name,
                    self.timeout.as_secs()
                );
            };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue; // not a JSON-RPC message (a log line)
            };
            if v["id"] == json!(id) && v.get("method").is_none() {
                if let Some(error) = v.get("error") {
                    let stderr = self.stop();
                    panic!("{}: {method} failed: {error}; stderr:\n{stderr}", self.name);
                }
                return v["result"].clone();
            }
        }
    }

    /// Closes stdin, kills the client's process group, and returns its stderr.
    fn stop(&mut self) -> String {
        drop(self.stdin.take());
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let stderr = self
            .stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default();
        String::from_utf8_lossy(&stderr).into_owned()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            self.stop();
        }
    }
}

/// [`drive`], then ACP `session/prompt` with `prompt` as one text block once every `wanted`
/// server has listed its tools; returns the records and the prompt's result, after letting
/// the client settle. Panics after `timing.timeout` (from start to the prompt's answer).
pub fn drive_prompt(
    cmd: Command,
    name: &str,
    session: Value,
    wanted: &BTreeSet<Known>,
    records: &Path,
    timing: Timing,
    prompt: &str,
) -> (Vec<Record>, Value) {
    let mut client = Client::start(cmd, name, timing.timeout);
    let result = client.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(result["protocolVersion"], 1, "initialize answered {result}");
    let result = client.request(2, "session/new", session);
    let Some(session_id) = result["sessionId"].as_str().map(str::to_owned) else {
        panic!("session/new answered {result}");
    };
    loop {
        let listed: BTreeSet<Known> = read_records(records)
            .iter()
            .filter(|r| r.listed_tools)
            .map(Record::known)
            .collect();
        if wanted.is_subset(&listed) {
            break;
        }
        if client.started.elapsed() > timing.timeout {
            let stderr = client.stop();
            panic!(
                "{name}: not every injected server was asked for its tools within {} s; \
                 listed {listed:?}; stderr:\n{stderr}",
                timing.timeout.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let answer = client.request(
        3,
        "session/prompt",
        json!({"sessionId": session_id, "prompt": [{"type": "text", "text": prompt}]}),
    );
    std::thread::sleep(timing.settle);
    client.stop();
    (read_records(records), answer)
}
