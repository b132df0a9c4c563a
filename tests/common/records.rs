//! Recorder MCP servers and what they saw: [`recorder_source`] writes a node script that logs
//! what it was started with (argv, environment, cwd) and answers MCP `initialize` and
//! `tools/list`; [`read_records`] reads those logs back; [`plan_env`] is the environment a
//! plan gives its client, computed here independently of the executor, as the judges'
//! expectation. The runs themselves go through the library's executor (`common::carry`).

use std::collections::BTreeMap;
use std::path::Path;

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

/// A stdio MCP server in Node (newline-delimited JSON-RPC, MCP's stdio transport): the one
/// loop every stand-in server of these tests shares. The script defines `fs`, `send(m)` and
/// `reply(m, result)`; given `records`, also `dir` (that directory), `log(ext, text)` (writes
/// `<dir>/<pid><ext>`), and it first writes `<pid>.json`: its argv (`PROBED_AS` or its own
/// path as `$0`, when a probe ran it: `super::door::write_probe`), environment and cwd, as
/// [`read_records`] reads them. Then `setup` (JS statements) runs. After `delay` it reads its
/// input: it answers `initialize` (echoing the client's protocol version), drops
/// notifications, and hands every other request `m` to `answer` (JS statements that
/// `return true` once they answered); `-32601` for the rest.
pub fn node_mcp_server(
    records: Option<&Path>,
    setup: &str,
    answer: &str,
    delay: std::time::Duration,
) -> String {
    let records = match records {
        Some(dir) => format!(
            r#"const dir = {};
const log = (ext, text) => fs.writeFileSync(dir + "/" + process.pid + ext, text);
log(".json", JSON.stringify({{ argv: [process.env.PROBED_AS || process.argv[1], ...process.argv.slice(2)], env: process.env, cwd: process.cwd() }}));
"#,
            serde_json::to_string(dir.to_str().unwrap()).unwrap()
        ),
        None => String::new(),
    };
    format!(
        r#"#!/usr/bin/env node
const fs = require("fs");
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
const reply = (m, result) => send({{ jsonrpc: "2.0", id: m.id, result }});
{records}{setup}
const answer = (m) => {{ {answer} }};
const serve = () => {{
  let buf = "";
  process.stdin.on("data", (chunk) => {{
    buf += chunk;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {{
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      let m;
      try {{ m = JSON.parse(line); }} catch (e) {{ continue; }}
      if (m.id === undefined) continue;
      if (m.method === "initialize") {{
        reply(m, {{ protocolVersion: (m.params && m.params.protocolVersion) || "2025-06-18", capabilities: {{ tools: {{}} }}, serverInfo: {{ name: "stand-in", version: "1.0.0" }} }});
      }} else if (!answer(m)) {{
        send({{ jsonrpc: "2.0", id: m.id, error: {{ code: -32601, message: "method not found" }} }});
      }}
    }}
  }});
  process.stdin.on("end", () => process.exit(0));
  process.stdin.resume();
}};
process.stdin.pause();
setTimeout(serve, {ms});
"#,
        ms = delay.as_millis()
    )
}

/// A tool for each of `names`, as `tools/list` answers it (an empty object as its input
/// schema, its name as its description): a JS array literal.
pub fn js_tools(names: &[&str]) -> String {
    serde_json::to_string(
        &names
            .iter()
            .map(|t| json!({"name": t, "description": t, "inputSchema": {"type": "object", "properties": {}}}))
            .collect::<Vec<_>>(),
    )
    .unwrap()
}

/// A recorder ([`node_mcp_server`] with `records`) that answers `tools/list` with one tool,
/// `recorded` (a server that lists none is a failed one to Gemini CLI), marking
/// `<pid>.tools`, and `-32601` to any other request (Copilot's `server/discover` included).
pub fn recorder_source(records: &Path) -> String {
    recorder_source_with_tools(records, &["recorded"])
}

/// [`recorder_source`], with `tools/list` answering a tool for each of `tools`
/// ([`js_tools`]), so that the client offers them to the model.
pub fn recorder_source_with_tools(records: &Path, tools: &[&str]) -> String {
    node_mcp_server(
        Some(records),
        &format!("const tools = {};", js_tools(tools)),
        r#"if (m.method !== "tools/list") return false; log(".tools", ""); reply(m, { tools }); return true;"#,
        std::time::Duration::ZERO,
    )
}

/// The contents of the plan file that the argv value after `flag` names (`<launch dir>/<file>`,
/// or `@` and that, as Copilot CLI takes it), which the executor writes with mode 0600: where
/// a plan keeps a server list that holds secrets out of the argv. Panics unless it is one.
pub fn argv_file<'a>(plan: &'a LaunchPlan, flag: &str) -> &'a str {
    let at = plan.argv.iter().position(|a| a == flag).unwrap();
    let value = &plan.argv[at + 1];
    let path = value.strip_prefix('@').unwrap_or(value);
    let rel = path
        .strip_prefix(&format!("{}/", plan.launch_dir))
        .unwrap_or_else(|| panic!("{value} is not a file of the launch directory"));
    let file = plan.files.iter().find(|f| f.path == rel).unwrap();
    assert_eq!(file.mode, 0o600, "{rel}");
    &file.contents
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

/// A stdio MCP server ([`node_mcp_server`], no records) that sleeps `delay` before it reads
/// anything, then answers `tools/list` with one tool of the registry server its last
/// argument names (`mcp flow-result`: `submit_review_result`; `mcp review`:
/// `get_pr_summary`).
pub fn listing_server_source(delay: std::time::Duration) -> String {
    node_mcp_server(
        None,
        r#"const name = { "flow-result": "submit_review_result", "review": "get_pr_summary" }[process.argv[process.argv.length - 1]] || "unknown_tool";"#,
        r#"if (m.method !== "tools/list") return false; reply(m, { tools: [{ name, description: name, inputSchema: { type: "object", properties: {} } }] }); return true;"#,
        delay,
    )
}
