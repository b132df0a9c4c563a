//! The executor (`kcap_mcp_registry::launch`, feature `launch`) and `kcap-mcp-registry
//! launch`, against stand-in clients: a node script that records its argv, environment, cwd
//! and the launch directory's files (and speaks ACP when its stdin is not a terminal), and
//! shell scripts for the failures.
//!
//! - a property over random plans: dirs and files land inside the launch directory with
//!   the plan's modes and contents, the child's environment is exactly the plan's (`env`,
//!   plus this process's values of `env_inherit`), argv and cwd as planned;
//! - hostile plans and launch directories are refused with nothing written, through the
//!   library and through `launch --plan`;
//! - the Cursor, Kiro (ACP) and Antigravity (terminal) plans carried out by a stand-in;
//! - a dialog (`Trust this folder?`) stops the reviewer within the bound, its process group
//!   with it; a client that does not answer or exits is reported, never waited on forever.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::carry::terminal_plan;
use common::stand_in::{file_mode, sh_script, write_executable};
use kcap_mcp_registry::clients::plan::{
    Dialog, EnvVar, Isolation, LaunchPlan, PLAN_VERSION, PlanFile, Sandbox, pr_config_note,
};
use kcap_mcp_registry::launch::{
    self, AcpEvent, ExecError, Options, PathField, Reviewer, TerminalEvent,
};
use proptest::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

mod carried;
mod command;
mod hangs;
mod hostile;
mod properties;

// What only the CLI's tests use (`command.rs`, `launch_plan`'s callers).
#[cfg(feature = "cli")]
use carried::hostile_worktree;
#[cfg(feature = "cli")]
use carried::{assert_carried_out, facts_only};
pub(crate) use hangs::acp_plan;
#[cfg(feature = "cli")]
pub(crate) use hostile::launch_plan;

/// The node binary, by absolute path: the plans' environments may have no `PATH`.
pub(super) fn node() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("node"))
        .find(|p| p.is_file())
        .expect("node on PATH (the ACP tests use it too)")
}

/// The stand-in of [`stand_in_client`] in `dir`, recording under `dir/records` (created),
/// and its records' base: the executor's sandbox (on by default) lets it write only there
/// beyond its launch directory ([`recording`]).
pub(super) fn recording_stand_in(dir: &Path) -> (PathBuf, PathBuf) {
    let records = dir.join("records");
    std::fs::create_dir(&records).unwrap();
    let base = records.join("record");
    (stand_in_client(dir, &base), base)
}

/// The default options, with the records of [`recording_stand_in`] in `dir` inside the
/// sandbox's boundary.
pub(super) fn recording(dir: &Path) -> Options {
    Options::default().with_sandbox_read_write(dir.join("records"))
}

/// A node stand-in client that writes `<record>.json` (argv, env, cwd, whether its stdin is
/// a terminal, and every entry under the launch directory, the parent of `HOME`, with its
/// mode and, where its owner may read it, a file's contents); in a terminal it prints a line and exits, else it answers
/// ACP `initialize` and `session/new` (recording the params), and for `session/prompt`
/// (recorded) sends a `session/update`, asks permission for a tool (the answer recorded)
/// and ends the turn.
pub(super) fn stand_in_client(dir: &Path, record: &Path) -> PathBuf {
    let record = serde_json::to_string(record.to_str().unwrap()).unwrap();
    let body = format!(
        r#"#!{node}
const fs = require("fs");
const path = require("path");
const out = {record};
const walk = (dir, rel, acc) => {{
  for (const name of fs.readdirSync(dir).sort()) {{
    const p = path.join(dir, name), r = rel ? rel + "/" + name : name;
    const st = fs.lstatSync(p);
    const entry = {{ path: r, mode: st.mode & 0o7777, type: st.isSymbolicLink() ? "link" : st.isDirectory() ? "dir" : "file" }};
    // What the client can read: it holds no capability (not even as root), so a file the
    // plan made without its owner's read bit is not its to read.
    if (entry.type === "file" && (st.mode & 0o400)) entry.contents = fs.readFileSync(p, "utf8");
    acc.push(entry);
    if (entry.type === "dir") walk(p, r, acc);
  }}
  return acc;
}};
const home = process.env.HOME;
const files = home ? walk(path.dirname(home), "", []) : [];
fs.writeFileSync(out + ".json", JSON.stringify({{ argv: process.argv.slice(2), env: process.env, cwd: process.cwd(), tty: process.stdin.isTTY === true, files }}));
if (process.stdin.isTTY) {{
  process.stdout.write("\x1b[1mstand-in\x1b[0m ran in a terminal\r\n");
  process.exit(0);
}}
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
let buf = "", prompt = null;
process.stdin.on("data", (chunk) => {{
  buf += chunk;
  let i;
  while ((i = buf.indexOf("\n")) >= 0) {{
    const line = buf.slice(0, i).trim();
    buf = buf.slice(i + 1);
    if (!line) continue;
    const m = JSON.parse(line);
    if (m.method === "initialize") {{
      send({{ jsonrpc: "2.0", id: m.id, result: {{ protocolVersion: 1, agentCapabilities: {{}}, authMethods: [] }} }});
    }} else if (m.method === "session/new") {{
      fs.writeFileSync(out + ".session.json", JSON.stringify(m.params));
      send({{ jsonrpc: "2.0", id: m.id, result: {{ sessionId: "stand-in-1" }} }});
    }} else if (m.method === "session/prompt") {{
      prompt = m.id;
      fs.writeFileSync(out + ".prompt.json", JSON.stringify(m.params));
      process.stderr.write("thinking\n");
      send({{ jsonrpc: "2.0", method: "session/update", params: {{ sessionId: "stand-in-1", update: {{ sessionUpdate: "agent_message_chunk", content: {{ type: "text", text: "looking" }} }} }} }});
      send({{ jsonrpc: "2.0", id: "perm-1", method: "session/request_permission", params: {{ sessionId: "stand-in-1", toolCall: {{ toolCallId: "c1", title: "Write notes.md", kind: "edit" }}, options: [{{ optionId: "allow", name: "Allow", kind: "allow_once" }}, {{ optionId: "reject", name: "Reject", kind: "reject_once" }}] }} }});
    }} else if (m.id === "perm-1") {{
      fs.writeFileSync(out + ".permission.json", JSON.stringify(m));
      send({{ jsonrpc: "2.0", id: prompt, result: {{ stopReason: "end_turn" }} }});
    }}
  }}
}});
process.stdin.on("end", () => process.exit(0));
"#,
        node = node().display()
    );
    let path = dir.join("stand-in-client");
    write_executable(&path, body);
    path
}

pub(super) fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// What the stand-in recorded, once it wrote it (it may still be starting).
pub(super) fn record(path: &Path) -> Value {
    let file = path.with_extension("json");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !file.exists() {
        assert!(Instant::now() < deadline, "no record at {}", file.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
    read_json(&file)
}

/// The environment the plan gives its client, with this process's values of `env_inherit`.
pub(super) fn expected_env(plan: &LaunchPlan) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = plan
        .env_inherit
        .iter()
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
        .collect();
    env.extend(plan.env.iter().map(|v| (v.name.clone(), v.value.clone())));
    env
}

pub(super) fn recorded_env(record: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(record["env"].clone()).unwrap()
}

/// A terminal plan (no `session_new`) for the stand-in, in `launch_dir`: a Codex plan's
/// shape (the client only names the reviewer in messages).
pub(crate) fn bare_plan(record: &Path, launch_dir: &Path) -> LaunchPlan {
    LaunchPlan {
        argv: vec![record.display().to_string()],
        env_inherit: vec!["PATH".into()],
        files: vec![PlanFile {
            path: "home/.config/x.json".into(),
            contents: "{}".into(),
            mode: 0o600,
        }],
        ..terminal_plan(kcap_mcp_registry::clients::Client::Codex, launch_dir)
    }
}

/// Reads the terminal reviewer's events until it exits (bounded); returns its output.
pub(super) fn until_exit(reviewer: &mut Reviewer) -> String {
    let (output, status) = common::carry::until_exit(reviewer, Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    output
}

/// Live processes (not zombies) whose process group is `pgid`, after at most 5 s for the
/// killed ones to go.
pub(crate) fn group_members(pgid: u32) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let found = group_members_now(pgid);
        if found.is_empty() || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(super) fn group_members_now(pgid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …: comm may hold spaces, so split after the last ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        let zombie = fields.first() == Some(&"Z");
        if !zombie && fields.get(2).and_then(|f| f.parse::<u32>().ok()) == Some(pgid) {
            found.push(pid);
        }
    }
    found
}

/// Every path under `dir`, relative, sorted (links not followed).
pub(super) fn tree(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            out.insert(path.strip_prefix(dir).unwrap().display().to_string());
            if entry.file_type().unwrap().is_dir() {
                todo.push(path);
            }
        }
    }
    out
}
