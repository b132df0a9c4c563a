//! Conformance of the Copilot CLI launch plan against the real client, Copilot CLI 1.0.102
//! (issue 14). Install it with `bash scripts/install-peers.sh`, then run
//! `KCAP_COPILOT_BIN=… KCAP_COPILOT_CACHE=… cargo test --test conformance_copilot`.
//!
//! Each test builds a hostile environment: the user's `$COPILOT_HOME/mcp-config.json` and
//! the worktree's `.mcp.json` and `.github/mcp.json` each declare a server named like an
//! injected one and a server named otherwise, and the daemon's own environment holds
//! `COPILOT_ALLOW_ALL=true` (which trusts the worktree) and leaked `KCAP_*` values; one test
//! also trusts the worktree in `$COPILOT_HOME/config.json`, which the plan cannot undo. Every
//! server command is a recorder (a node script, written by `common::stand_in`) that logs its
//! argv, environment and cwd and answers MCP `initialize` and `tools/list`.
//!
//! The test takes the real inventory (`copilot mcp list --json` in the reviewer's
//! environment and worktree), renders the plan with it, and carries it out as the daemon
//! would: the environment less `env_remove`, plus `env`, the argv, the cwd; ACP `initialize`
//! then `session/new`. Once every injected server has been asked for its tools, and a settle
//! time later, stdin is closed and the client's process group killed. The recorders' logs
//! must show exactly the injected servers, each with exactly its argv and `KCAP_*`
//! environment, and nothing else.
//!
//! Offline: `COPILOT_OFFLINE=true`, the model provider at a dead local port, no auto-update,
//! throwaway HOME; the package cache (`XDG_CACHE_HOME`) is the shared one the installer
//! filled. A missing client is reported as ignored (or fails under `KCAP_REQUIRE_PEERS=1`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::peers::{inherited_path, peer};
use common::stand_in::write_executable;
use kcap_mcp_registry::clients::copilot::inventory::{
    INVENTORY_TIMEOUT, InheritedServer, copilot_inventory_from,
};
use kcap_mcp_registry::clients::copilot::{REMOVED_ENV, copilot_plan};
use kcap_mcp_registry::clients::plan::LaunchPlan;
use kcap_mcp_registry::{LaunchContext, Policy, ResultDelivery, Snapshot};
use serde_json::{Value, json};
use tempfile::TempDir;

/// How long one client run may take, from start to the last injected server's `tools/list`.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(90);

/// How long to keep the client running after the injected servers are up, so that a server
/// it would start late shows in the logs.
const SETTLE: Duration = Duration::from_secs(3);

fn main() {
    common::peers::main(real_client_tests![
        copilot_starts_exactly_the_injected_servers_under_a_hostile_config,
        copilot_disables_the_servers_of_a_trusted_worktree_by_inventory,
        copilot_brokered_borrowed_launch_starts_exactly_its_three_servers,
    ]);
}

struct Setup {
    root: TempDir,
}

impl Setup {
    fn new() -> Setup {
        let setup = Setup {
            root: tempfile::tempdir().unwrap(),
        };
        for dir in ["home/.copilot", "records", "bin", "worktree/.github"] {
            std::fs::create_dir_all(setup.path(dir)).unwrap();
        }
        write_executable(&setup.recorder(), recorder_source(&setup.path("records")));
        setup
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    fn recorder(&self) -> PathBuf {
        self.path("bin/kcap")
    }

    fn worktree(&self) -> PathBuf {
        self.path("worktree")
    }

    fn write(&self, rel: &str, value: &Value) {
        std::fs::write(self.path(rel), serde_json::to_vec_pretty(value).unwrap()).unwrap();
    }

    /// The hostile configuration: every scope declares a server named like an injected
    /// one (`kcap-flow-result`, `kcap-review`) and one named otherwise.
    fn hostile(&self) {
        let rec = self.recorder();
        let rec = rec.to_str().unwrap();
        let servers = |scope: &str| {
            json!({"mcpServers": {
                "kcap-flow-result": {"type": "stdio", "command": rec, "args": [format!("{scope}-result-name")]},
                "kcap-review": {"type": "stdio", "command": rec, "args": [format!("{scope}-same-name")]},
                format!("{scope}-other"): {"type": "stdio", "command": rec, "args": [format!("{scope}-other-name")]},
            }})
        };
        self.write("home/.copilot/mcp-config.json", &servers("user"));
        self.write("worktree/.mcp.json", &servers("project"));
        self.write("worktree/.github/mcp.json", &servers("github"));
    }

    fn context(&self) -> LaunchContext {
        LaunchContext {
            server_url: Some("http://127.0.0.1:9/kcap".into()),
            kcap_bin: Some(self.recorder().to_str().unwrap().into()),
            agent_id: "agent-7".into(),
            mcp_allowlist: Some(vec![Some("kcap-review".into()), Some("kcap-flows".into())]),
            worktree: Some(self.worktree().to_str().unwrap().into()),
            ..LaunchContext::default()
        }
    }

    /// The daemon's own environment: throwaway home, Copilot offline, and hostile values.
    fn daemon_env(&self, cache: &Path) -> BTreeMap<String, String> {
        [
            ("PATH", inherited_path().into_string().unwrap()),
            ("HOME", self.path("home").to_str().unwrap().into()),
            (
                "COPILOT_HOME",
                self.path("home/.copilot").to_str().unwrap().into(),
            ),
            ("XDG_CACHE_HOME", cache.to_str().unwrap().into()),
            ("COPILOT_OFFLINE", "true".into()),
            ("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:9/v1".into()),
            ("COPILOT_MODEL", "gpt-4o".into()),
            ("COPILOT_AUTO_UPDATE", "false".into()),
            ("HTTP_PROXY", "http://127.0.0.1:9".into()),
            ("HTTPS_PROXY", "http://127.0.0.1:9".into()),
            // Trusts the worktree and approves every tool.
            ("COPILOT_ALLOW_ALL", "true".into()),
            ("KCAP_URL", "http://127.0.0.1:9/leaked".into()),
            ("KCAP_FLOW_AGENT_ID", "leaked-agent".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// `copilot mcp list --json` in the reviewer's environment (the daemon's less
    /// [`REMOVED_ENV`]) and worktree.
    fn inventory(&self, bin: &Path, env: &BTreeMap<String, String>) -> Vec<InheritedServer> {
        let mut cmd = Command::new(bin);
        cmd.env_clear().envs(env).current_dir(self.worktree());
        for name in REMOVED_ENV {
            cmd.env_remove(name);
        }
        copilot_inventory_from(cmd, INVENTORY_TIMEOUT).unwrap()
    }

    fn records(&self) -> Vec<Record> {
        let dir = self.path("records");
        let mut records: Vec<Record> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                let pid = name.strip_suffix(".json")?.to_string();
                let v: Value =
                    serde_json::from_str(&std::fs::read_to_string(dir.join(&name)).ok()?).ok()?;
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
}

#[derive(Debug)]
struct Record {
    argv: Vec<String>,
    env: BTreeMap<String, String>,
    cwd: String,
    listed_tools: bool,
}

/// A server as the records show it: argv (command first) and `KCAP_*` environment.
type Known = (Vec<String>, BTreeMap<String, String>);

impl Record {
    fn known(&self) -> Known {
        let env = self
            .env
            .iter()
            .filter(|(k, _)| k.starts_with("KCAP_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (self.argv.clone(), env)
    }
}

/// A node script that logs `process.argv`, the environment and the cwd to
/// `<records>/<pid>.json`, answers MCP `initialize` and `tools/list` (marking `<pid>.tools`)
/// and `-32601` to anything else (Copilot's `server/discover` included).
fn recorder_source(records: &Path) -> String {
    let records = serde_json::to_string(records.to_str().unwrap()).unwrap();
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
      send({{ jsonrpc: "2.0", id: m.id, result: {{ tools: [] }} }});
    }} else {{
      send({{ jsonrpc: "2.0", id: m.id, error: {{ code: -32601, message: "method not found" }} }});
    }}
  }}
}});
process.stdin.on("end", () => process.exit(0));
"#
    )
}

/// The client over ACP (newline-delimited JSON-RPC on stdin/stdout), in its own process group.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<Vec<u8>>,
    started: Instant,
}

impl Client {
    fn start(mut cmd: Command) -> Client {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start copilot: {e}"));
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
        }
    }

    /// Sends request `id` and returns its `result`; panics on an error or after the timeout.
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
        loop {
            let left = CLIENT_TIMEOUT.saturating_sub(self.started.elapsed());
            let Ok(line) = self.lines.recv_timeout(left) else {
                let stderr = self.stop();
                panic!("copilot: no answer to {method}; stderr:\n{stderr}");
            };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["id"] == json!(id) && v.get("method").is_none() {
                if let Some(error) = v.get("error") {
                    let stderr = self.stop();
                    panic!("copilot: {method} failed: {error}; stderr:\n{stderr}");
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

/// The servers `plan` injects, as the records would show them, read back from its
/// `--additional-mcp-config` JSON.
fn injected(plan: &LaunchPlan) -> BTreeSet<Known> {
    let i = plan
        .argv
        .iter()
        .position(|a| a == "--additional-mcp-config")
        .unwrap();
    let config: Value = serde_json::from_str(&plan.argv[i + 1]).unwrap();
    config["mcpServers"]
        .as_object()
        .unwrap()
        .values()
        .map(|s| {
            let argv = std::iter::once(s["command"].as_str().unwrap().to_string())
                .chain(serde_json::from_value::<Vec<String>>(s["args"].clone()).unwrap())
                .collect();
            (argv, serde_json::from_value(s["env"].clone()).unwrap())
        })
        .collect()
}

/// Carries `plan` out under `daemon_env`; returns every record once all injected servers
/// listed their tools and the settle time passed.
fn carry_out(
    setup: &Setup,
    bin: &Path,
    plan: &LaunchPlan,
    mut env: BTreeMap<String, String>,
) -> Vec<Record> {
    assert!(plan.files.is_empty());
    for name in &plan.env_remove {
        env.remove(name);
    }
    for var in &plan.env {
        env.insert(var.name.clone(), var.value.clone());
    }
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .envs(&env)
        .args(&plan.argv)
        .current_dir(plan.cwd.as_deref().unwrap());
    let mut client = Client::start(cmd);
    let result = client.request(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(result["protocolVersion"], 1, "initialize answered {result}");
    let session = serde_json::to_value(plan.session_new.as_ref().unwrap()).unwrap();
    assert_eq!(session["mcpServers"], json!([]));
    let result = client.request(2, "session/new", session);
    assert!(
        result["sessionId"].is_string(),
        "session/new answered {result}"
    );
    let wanted = injected(plan);
    loop {
        let listed: BTreeSet<Known> = setup
            .records()
            .iter()
            .filter(|r| r.listed_tools)
            .map(Record::known)
            .collect();
        if wanted.is_subset(&listed) {
            break;
        }
        if client.started.elapsed() > CLIENT_TIMEOUT {
            let stderr = client.stop();
            panic!(
                "copilot: not every injected server listed its tools within {} s; listed \
                 {listed:?}, records {:?}; stderr:\n{stderr}",
                CLIENT_TIMEOUT.as_secs(),
                setup.records()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(SETTLE);
    client.stop();
    setup.records()
}

/// Renders the plan of `ctx` with the real inventory, carries it out, and asserts that
/// exactly the injected servers (`args` lines `servers`) started, with exactly their argv and
/// `KCAP_*` environment, in the worktree. Returns the inventory.
fn run(
    setup: &Setup,
    bin: &Path,
    cache: &Path,
    ctx: &LaunchContext,
    servers: &[&str],
) -> Vec<InheritedServer> {
    let env = setup.daemon_env(cache);
    let inventory = setup.inventory(bin, &env);
    let plan = copilot_plan(ctx, &ctx.resolve(Policy::Lenient).unwrap(), &inventory).unwrap();
    let expected = injected(&plan);
    let mut args: Vec<String> = expected
        .iter()
        .map(|(argv, _)| argv[1..].join(" "))
        .collect();
    args.sort();
    let mut want: Vec<&str> = servers.to_vec();
    want.sort();
    assert_eq!(args, want, "the servers the plan injects");
    let records = carry_out(setup, bin, &plan, env);
    let seen: BTreeSet<Known> = records.iter().map(Record::known).collect();
    assert_eq!(
        seen, expected,
        "the servers started (argv, KCAP_* env) are not exactly the injected ones"
    );
    assert_eq!(seen.len(), servers.len(), "two injected servers are alike");
    for record in &records {
        assert_eq!(
            Path::new(&record.cwd),
            setup.worktree().canonicalize().unwrap()
        );
    }
    inventory
}

fn names(inventory: &[InheritedServer]) -> Vec<(&str, &str)> {
    inventory
        .iter()
        .map(|s| (s.name.as_str(), s.source.as_str()))
        .collect()
}

fn peers() -> Option<(PathBuf, PathBuf)> {
    let bin = peer("KCAP_COPILOT_BIN")?;
    let cache = peer_dir("KCAP_COPILOT_CACHE")?;
    Some((bin, cache))
}

/// The shared package cache: must be set with the binary (the installer prints both).
fn peer_dir(var: &str) -> Option<PathBuf> {
    let dir = std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let dir = dir
        .unwrap_or_else(|| panic!("{var} is not set; `bash scripts/install-peers.sh` prints it"));
    assert!(dir.is_dir(), "{var}={} is not a directory", dir.display());
    Some(dir)
}

/// `COPILOT_ALLOW_ALL=true` in the daemon's environment: removed, so the worktree is not
/// trusted and its servers are not listed; the user's other server is disabled by name, the
/// user's same-named ones are replaced by ours.
fn copilot_starts_exactly_the_injected_servers_under_a_hostile_config() {
    let Some((bin, cache)) = peers() else { return };
    let setup = Setup::new();
    setup.hostile();
    let inventory = run(
        &setup,
        &bin,
        &cache,
        &setup.context(),
        &["mcp flow-result", "mcp review"],
    );
    assert_eq!(
        names(&inventory),
        [
            ("kcap-flow-result", "user"),
            ("kcap-review", "user"),
            ("user-other", "user")
        ]
    );
}

/// A worktree the user trusted in `$COPILOT_HOME/config.json` (`trustedFolders`): its
/// `.mcp.json` servers load whatever the environment says, so the inventory lists them and
/// the plan disables the other-named one by name.
fn copilot_disables_the_servers_of_a_trusted_worktree_by_inventory() {
    let Some((bin, cache)) = peers() else { return };
    let setup = Setup::new();
    setup.hostile();
    let worktree = setup.worktree();
    setup.write(
        "home/.copilot/config.json",
        &json!({"trustedFolders": [worktree.to_str().unwrap(), worktree.canonicalize().unwrap().to_str().unwrap()]}),
    );
    let inventory = run(
        &setup,
        &bin,
        &cache,
        &setup.context(),
        &["mcp flow-result", "mcp review"],
    );
    let listed = names(&inventory);
    assert!(
        listed.contains(&("project-other", "workspace")),
        "{listed:?}"
    );
    assert!(listed.contains(&("user-other", "user")), "{listed:?}");
}

/// A brokered result and a borrowed snapshot: the three servers start with exactly their env
/// (the capability URL on the result channel, no `KCAP_URL` there).
fn copilot_brokered_borrowed_launch_starts_exactly_its_three_servers() {
    let Some((bin, cache)) = peers() else { return };
    let setup = Setup::new();
    setup.hostile();
    let ctx = LaunchContext {
        result_delivery: ResultDelivery::Brokered {
            capability_url: "http://127.0.0.1:9/cap/t0k3n".into(),
        },
        snapshot: Snapshot::Borrowed {
            review_context_url: Some(
                "http://127.0.0.1:9/review-context/workspace-mcp-configs".into(),
            ),
        },
        ..setup.context()
    };
    run(
        &setup,
        &bin,
        &cache,
        &ctx,
        &["mcp flow-result", "mcp review", "mcp review"],
    );
}
