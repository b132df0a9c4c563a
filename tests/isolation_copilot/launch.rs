//! Carrying a plan out as a daemon would, driving Copilot CLI over ACP through a prompt,
//! and the verdict (`tests/isolation_copilot.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::acp::{Known, Record, read_records};
use crate::harness::{COPILOT_OWN, MARKER, SETTLE, Setup, TIMEOUT};
use kcap_mcp_registry::clients::plan::LaunchPlan;
use serde_json::{Value, json};

/// The servers `plan` injects, as the records would show them (argv with the command
/// first, `KCAP_*` env), from its `--additional-mcp-config` JSON.
pub fn injected(plan: &LaunchPlan) -> BTreeSet<Known> {
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
            let argv = std::iter::once(s["command"].as_str().unwrap().to_owned())
                .chain(serde_json::from_value::<Vec<String>>(s["args"].clone()).unwrap())
                .collect();
            (argv, serde_json::from_value(s["env"].clone()).unwrap())
        })
        .collect()
}

/// The client's environment as the plan builds it: the daemon's values of `env_inherit`,
/// plus `env`, and nothing else.
pub fn built_env(daemon: &BTreeMap<String, String>, plan: &LaunchPlan) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = daemon
        .iter()
        .filter(|(name, _)| plan.env_inherit.contains(name))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for var in &plan.env {
        env.insert(var.name.clone(), var.value.clone());
    }
    env
}

/// What a launch showed.
pub struct Outcome {
    pub records: Vec<Record>,
    /// The bodies of the requests the stand-in model API received.
    pub model: Vec<Value>,
    /// The tool calls the recorders answered: (the server's argv after the command, the
    /// `tools/call` params).
    pub calls: Vec<(Vec<String>, Value)>,
    pub stderr: String,
}

/// How the daemon carries the plan out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Worktree {
    /// Removes `worktree_remove`, as the plan says.
    Cleaned,
    /// Leaves the worktree as it is (to show what the root alone closes).
    AsIs,
}

/// How a test has the plan carried out.
pub struct How<'a> {
    /// Whether `worktree_remove` is applied.
    pub worktree: Worktree,
    /// Run the client in a private mount namespace whose `/etc` is overlaid with
    /// `<dir>/u` ([`overlay_etc`]).
    pub overlay: Option<&'a Path>,
    /// The servers to wait for (default: every injected one).
    pub expect: Option<BTreeSet<Known>>,
    /// Called after the worktree is cleaned, just before the client starts.
    pub late: Option<&'a dyn Fn()>,
}

impl How<'_> {
    /// As the plan says.
    pub fn plan() -> How<'static> {
        How {
            worktree: Worktree::Cleaned,
            overlay: None,
            expect: None,
            late: None,
        }
    }
}

/// `bin` run in a private mount namespace (`unshare -m`) where `/etc` is an overlay with
/// `<dir>/u` as its upper layer (`<dir>/w` its work directory): the machine's `/etc` is never
/// written. The arguments go after it; exit status 97 if the overlay cannot be mounted.
pub fn overlay_etc(dir: &Path, bin: &Path) -> Command {
    for d in ["u", "w"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let mut cmd = Command::new("unshare");
    cmd.args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount -t overlay overlay -o \"lowerdir=/etc,upperdir=$0/u,workdir=$0/w\" /etc \
             || exit 97; exec \"$@\"",
        )
        .arg(dir)
        .arg(bin);
    cmd
}

/// Carries `plan` out as a daemon would, under `daemon` (its environment), as `how` says;
/// drives Copilot through `initialize`, `session/new` and a prompt; returns what the
/// recorders and the model saw.
pub fn carry_out(
    setup: &Setup,
    bin: &Path,
    plan: &LaunchPlan,
    daemon: &BTreeMap<String, String>,
    how: &How<'_>,
) -> Outcome {
    let launch = setup.path("launch");
    for dir in &plan.dirs {
        std::fs::create_dir_all(launch.join(dir)).unwrap();
    }
    for file in &plan.files {
        let path = launch.join(&file.path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &file.contents).unwrap();
    }
    let cwd = PathBuf::from(plan.cwd.as_deref().unwrap());
    if how.worktree == Worktree::Cleaned {
        for rel in &plan.worktree_remove {
            let path = cwd.join(rel);
            if path.is_dir() {
                std::fs::remove_dir_all(&path).unwrap();
            } else if path.symlink_metadata().is_ok() {
                std::fs::remove_file(&path).unwrap();
            }
        }
    }
    if let Some(late) = how.late {
        late();
    }
    let mut cmd = match how.overlay {
        None => Command::new(bin),
        Some(dir) => overlay_etc(dir, bin),
    };
    cmd.env_clear()
        .envs(built_env(daemon, plan))
        .args(&plan.argv)
        .current_dir(&cwd);
    let wanted = how.expect.clone().unwrap_or_else(|| injected(plan));
    let records = setup.path("records");
    let mut client = Acp::start(cmd);
    let init = client.request(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {}}),
    );
    assert_eq!(init["result"]["protocolVersion"], 1, "initialize: {init}");
    let session = serde_json::to_value(plan.session_new.as_ref().unwrap()).unwrap();
    let new = client.request("session/new", session);
    let Some(id) = new["result"]["sessionId"].as_str().map(str::to_owned) else {
        let stderr = client.stop();
        panic!("session/new answered {new}; stderr:\n{stderr}");
    };
    client.wait("every awaited server to list its tools", &records, || {
        let listed: BTreeSet<Known> = read_records(&records)
            .iter()
            .filter(|r| r.listed_tools)
            .map(Record::known)
            .collect();
        wanted.is_subset(&listed)
    });
    let prompt =
        json!({"sessionId": id, "prompt": [{"type": "text", "text": "Review the change."}]});
    client.request("session/prompt", prompt);
    client.wait("the model API to be asked", &records, || {
        !setup.model.bodies().is_empty()
    });
    std::thread::sleep(SETTLE);
    let stderr = client.stop();
    Outcome {
        records: read_records(&setup.path("records")),
        model: setup.model.bodies(),
        calls: calls(&records),
        stderr,
    }
}

/// The `tools/call` requests the recorders in `records` answered, with each one's argv
/// after the command.
fn calls(records: &Path) -> Vec<(Vec<String>, Value)> {
    let mut calls = Vec::new();
    for entry in std::fs::read_dir(records).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "call") {
            let started: Value = serde_json::from_str(
                &std::fs::read_to_string(path.with_extension("json")).unwrap(),
            )
            .unwrap();
            let argv: Vec<String> = serde_json::from_value(started["argv"].clone()).unwrap();
            let params = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            calls.push((argv[1..].to_vec(), params));
        }
    }
    calls
}

/// The verdict every launch must meet: exactly the injected servers started, each with
/// exactly its argv and `KCAP_*` environment, in the worktree, and no variable that neither
/// the plan nor Copilot itself set; no hook marker; the model offered exactly the tools the
/// plan admits (the result channel's first), and none of the hostile instruction text; the
/// result channel's `submit_review_result`, called by the model, ran (once, on our server).
pub fn assert_isolated(setup: &Setup, plan: &LaunchPlan, outcome: &Outcome) {
    let expected = injected(plan);
    let seen: BTreeSet<Known> = outcome.records.iter().map(Record::known).collect();
    assert_eq!(
        seen, expected,
        "the servers that started (argv, KCAP_* env) are not exactly the injected ones; \
         stderr:\n{}",
        outcome.stderr
    );
    assert_eq!(
        outcome.records.len(),
        expected.len(),
        "a server started twice"
    );
    let allowed: BTreeSet<&str> = plan
        .env
        .iter()
        .map(|v| v.name.as_str())
        .chain(plan.env_inherit.iter().map(String::as_str))
        .chain(COPILOT_OWN)
        .collect();
    let worktree = setup.worktree().canonicalize().unwrap();
    for record in &outcome.records {
        let foreign: Vec<&String> = record
            .env
            .keys()
            .filter(|k| !k.starts_with("KCAP_") && !allowed.contains(k.as_str()))
            .collect();
        assert!(foreign.is_empty(), "{:?} got {foreign:?}", record.argv);
        for var in plan.env.iter().filter(|v| record.env.contains_key(&v.name)) {
            assert_eq!(record.env[&var.name], var.value, "{:?}", record.argv);
        }
        assert_eq!(Path::new(&record.cwd), worktree);
    }
    assert_eq!(setup.marks(), Vec::<String>::new(), "hooks ran");
    let want: Vec<&str> = plan
        .argv
        .iter()
        .filter_map(|a| a.strip_prefix("--available-tools="))
        .collect();
    assert_eq!(want[0], "kcap-flow-result-submit_review_result");
    assert!(!outcome.model.is_empty(), "the model API was never asked");
    for body in &outcome.model {
        let mut offered: Vec<&str> = body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["function"]["name"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        offered.sort_unstable();
        let mut want = want.clone();
        want.sort_unstable();
        assert_eq!(offered, want, "the tools the model was offered");
        assert!(
            !body.to_string().contains(MARKER),
            "hostile instructions reached the model"
        );
    }
    let called: Vec<(Vec<String>, &str)> = outcome
        .calls
        .iter()
        .map(|(argv, params)| (argv.clone(), params["name"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(
        called,
        [(
            vec!["mcp".to_owned(), "flow-result".to_owned()],
            "submit_review_result"
        )],
        "the result tool call"
    );
}

/// A client process driven over ACP in its own process group.
struct Acp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: mpsc::Receiver<Vec<u8>>,
    started: Instant,
    next: u64,
}

impl Acp {
    fn start(mut cmd: Command) -> Acp {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd.spawn().expect("start copilot");
        let stdout = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (etx, stderr) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = std::io::Read::read_to_end(&mut err, &mut buf);
            let _ = etx.send(buf);
        });
        Acp {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            started: Instant::now(),
            next: 1,
        }
    }

    fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        let _ = writeln!(stdin, "{msg}");
        let _ = stdin.flush();
    }

    /// Sends a request and returns the whole response; answers the client's own requests
    /// (a permission request is cancelled: nobody approves anything) meanwhile.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let left = TIMEOUT.saturating_sub(self.started.elapsed());
            let Ok(line) = self.lines.recv_timeout(left) else {
                let stderr = self.stop();
                panic!("copilot: no answer to {method} in time; stderr:\n{stderr}");
            };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["id"] == json!(id) && v.get("method").is_none() {
                return v;
            }
            if let (Some(_), Some(m)) = (v.get("id"), v["method"].as_str()) {
                let answer = if m == "session/request_permission" {
                    json!({"jsonrpc": "2.0", "id": v["id"], "result": {"outcome": {"outcome": "cancelled"}}})
                } else {
                    json!({"jsonrpc": "2.0", "id": v["id"], "error": {"code": -32601, "message": "no"}})
                };
                self.send(&answer);
            }
        }
    }

    /// Waits until `done`, failing after [`TIMEOUT`] from the start (with the records in
    /// `records`).
    fn wait(&mut self, what: &str, records: &Path, done: impl Fn() -> bool) {
        while !done() {
            if self.started.elapsed() > TIMEOUT {
                let stderr = self.stop();
                panic!(
                    "copilot: timed out waiting for {what}; records {:?}; stderr:\n{stderr}",
                    read_records(records)
                );
            }
            while self.lines.try_recv().is_ok() {}
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Closes stdin, gives the client a moment to end its session (its end-of-session hooks
    /// would run then), kills its process group, returns its stderr.
    fn stop(&mut self) -> String {
        drop(self.stdin.take());
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(100));
        }
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

impl Drop for Acp {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            self.stop();
        }
    }
}
