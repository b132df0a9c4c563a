//! The Codex plan judged on Codex's own effective configuration (issue 10, then issue 26
//! item 4): a hostile user `config.toml` (in the daemon's `CODEX_HOME`) and a hostile
//! worktree `.codex/config.toml` (the worktree the plan trusts) set every server field Codex
//! CLI 0.169.0 reports on same-named copies of registry servers and on other servers (dotted
//! and quoted names), and turn the closed features on. The plan is rendered with no
//! inventory and carried out; then `codex <the plan's -c and --disable pairs> app-server`
//! `config/read`, with the plan's environment in its cwd, must show exactly the servers we
//! render, each with exactly the fields we rendered (plus `required = true` from the plan's
//! `config.toml` and what Codex adds itself), and every closed feature off.
//!
//! Needs `KCAP_CODEX_BIN`; without it each test is reported as ignored with the reason, and
//! `KCAP_REQUIRE_PEERS=1` (CI) makes a missing client a failure (`common::peers`, this file's
//! harness). Every Codex run is bounded (30 s) and its process group killed.

use crate::common;
use kcap_mcp_registry::Client;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use kcap_mcp_registry::clients::codex::CLOSED_FEATURES;
use kcap_mcp_registry::{LaunchContext, Policy, lookup};
use proptest::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Fields Codex reports on every server although we did not render them, with the value.
const CODEX_ADDS: [(&str, &str); 1] = [("environment_id", "\"local\"")];

/// Every field of a server entry `config/read` reports on 0.169.0 (`RawMcpServerConfig` in
/// `codex-rs/config/src/mcp_types.rs`, measured): the hostile configurations set them all.
const FIELDS: [&str; 22] = [
    "command",
    "args",
    "env",
    "env_vars",
    "cwd",
    "url",
    "bearer_token_env_var",
    "http_headers",
    "env_http_headers",
    "environment_id",
    "enabled",
    "required",
    "supports_parallel_tool_calls",
    "startup_timeout_sec",
    "tool_timeout_sec",
    "default_tools_approval_mode",
    "enabled_tools",
    "disabled_tools",
    "scopes",
    "oauth",
    "oauth_resource",
    "tools",
];

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        every_field_of_a_hostile_config_stays_out_of_the_plan,
        random_subsets_of_fields_stay_out_of_the_plan,
    ]
}

fn codex_bin() -> Option<PathBuf> {
    common::peers::peer("KCAP_CODEX_BIN")
}

/// A throwaway daemon for Codex: its own HOME (which is its CODEX_HOME, holding the user's
/// `config.toml`), a worktree (holding the repository's `.codex/config.toml`), a launch
/// directory; a dummy key and the API at a dead local port.
struct Setup {
    bin: PathBuf,
    home: TempDir,
    cwd: TempDir,
    launch: TempDir,
    /// The wrapper script and what it wrote.
    scratch: TempDir,
}

impl Setup {
    fn new(bin: PathBuf, user_config: &str, project_config: &str) -> Setup {
        let s = Setup {
            bin,
            home: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
            launch: tempfile::tempdir().unwrap(),
            scratch: tempfile::tempdir().unwrap(),
        };
        std::fs::write(s.home.path().join("config.toml"), user_config).unwrap();
        std::fs::create_dir(s.cwd.path().join(".codex")).unwrap();
        std::fs::write(s.cwd.path().join(".codex/config.toml"), project_config).unwrap();
        s
    }

    /// Codex in the daemon's own environment, in the worktree.
    fn command(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.env_clear()
            .envs(self.daemon_env())
            .current_dir(self.cwd.path());
        c
    }

    fn daemon_env(&self) -> BTreeMap<String, String> {
        let home = self.home.path().to_str().unwrap().to_owned();
        [
            (
                "PATH",
                common::peers::inherited_path().into_string().unwrap(),
            ),
            ("HOME", home.clone()),
            ("CODEX_HOME", home),
            ("OPENAI_API_KEY", "dummy".into()),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// `c` (with this setup's worktree and launch directory) rendered by `Client::plan` and
    /// carried out by the executor, with a wrapper as its client binary that runs Codex as
    /// the plan starts it (exactly the plan's environment, in its cwd) but as `codex <the
    /// plan's -c/--disable pairs> app-server`, and asks it `config/read` ([`config_read`]'s
    /// messages). Returns the effective `config` object and the pairs.
    fn planned(&self, c: &LaunchContext) -> (Value, Vec<String>) {
        let mut c = c.clone();
        c.worktree = Some(self.cwd.path().to_str().unwrap().into());
        c.launch_dir = Some(self.launch.path().to_str().unwrap().into());
        let plan = crate::common::plan::lenient(Client::Codex, &c);
        let out = self.scratch.path().join("answers.jsonl");
        let messages: Vec<String> = MESSAGES
            .iter()
            .map(|m| common::carry::sh_quote(m))
            .collect();
        let wrapper = common::stand_in::sh_script(
            self.scratch.path(),
            "codex-config-read",
            &format!(
                "n=$#; i=0; prev=\nwhile [ $i -lt $n ]; do\n  a=$1; shift; i=$((i+1))\n  \
                 if [ \"$prev\" = -c ] || [ \"$prev\" = --disable ]; then set -- \"$@\" \"$prev\" \"$a\"; fi\n  \
                 prev=$a\ndone\n\
                 {{ printf '%s\\n' {}; exec /usr/bin/sleep 120; }} | exec {} \"$@\" app-server >{} 2>/dev/null",
                messages.join(" "),
                common::carry::sh_quote(self.bin.to_str().unwrap()),
                common::carry::sh_quote(out.to_str().unwrap()),
            ),
        );
        // In the sandbox: Codex behind the wrapper, and the scratch directory (the wrapper
        // and its answers only) writable.
        let options = common::carry::reach(
            kcap_mcp_registry::launch::Options::default().with_die_with_parent(true),
            &[&self.bin],
            &[self.scratch.path()],
        );
        let mut t = common::carry::Terminal::start(&plan, &wrapper, &self.daemon_env(), &options);
        let deadline = std::time::Instant::now() + TIMEOUT;
        let answer = loop {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            if let Some(v) = text
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|v| v["id"] == 2)
            {
                break v;
            }
            assert!(
                std::time::Instant::now() < deadline && t.exited.is_none(),
                "codex app-server gave no config/read answer: {text}"
            );
            t.read(Duration::from_millis(100));
        };
        t.stop();
        assert!(answer.get("error").is_none(), "config/read: {answer}");
        // What the plan renders: its `-c` pairs, and each server's `env`, which the plan
        // writes into its `config.toml` instead (no secret in the argv).
        let mut pairs = override_pairs(&plan.argv);
        let config: toml::Table = toml::from_str(&plan.files[0].contents).unwrap();
        for (id, server) in config["mcp_servers"].as_table().unwrap() {
            if let Some(env) = server.get("env") {
                pairs.push(format!("mcp_servers.{id}.env={env}"));
            }
        }
        (answer["result"]["config"].clone(), pairs)
    }
}

/// What [`config_read`] sends `codex app-server`: `initialize`, `initialized`, `config/read`.
const MESSAGES: [&str; 3] = [
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}}"#,
    r#"{"jsonrpc":"2.0","method":"initialized"}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"config/read","params":{"includeLayers":false}}"#,
];

/// `config/read` of `codex <extra…> app-server` (`initialize`, `initialized`, then
/// `config/read`): the effective `config` object. Bounded by [`TIMEOUT`]; the process group
/// is killed after the answer.
fn config_read(mut cmd: Command, extra: &[String]) -> Value {
    cmd.args(extra)
        .arg("app-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = cmd.spawn().expect("start codex app-server");
    let mut stdin = child.stdin.take().unwrap();
    for m in MESSAGES {
        writeln!(stdin, "{m}").unwrap();
    }
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && v["id"] == 2
            {
                let _ = tx.send(v);
                return;
            }
        }
    });
    let answer = rx.recv_timeout(TIMEOUT);
    drop(stdin);
    crate::common::peers::kill_group(child.id());
    let _ = child.wait();
    let answer = answer.expect("codex app-server gave no config/read answer");
    assert!(answer.get("error").is_none(), "config/read: {answer}");
    answer["result"]["config"].clone()
}

/// The `-c` and `--disable` pairs of a reviewer argv (what `app-server` accepts too).
fn override_pairs(argv: &[String]) -> Vec<String> {
    argv.windows(2)
        .filter(|w| w[0] == "-c" || w[0] == "--disable")
        .flat_map(|w| w.to_vec())
        .collect()
}

/// Numbers as f64, so `30` and `30.0` compare equal.
fn normalize(v: Value) -> Value {
    match v {
        Value::Number(n) => serde_json::json!(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.into_iter().map(normalize).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, normalize(v))).collect()),
        v => v,
    }
}

fn toml_value(text: &str) -> Value {
    let doc: toml::Table = toml::from_str(&format!("v = {text}")).unwrap();
    serde_json::to_value(&doc["v"]).unwrap()
}

/// What `config/read` must show for server `id`: the fields rendered for it, `required =
/// true` from the plan's `config.toml`, and what Codex adds.
fn expected_table(pairs: &[String], id: &str) -> Value {
    let prefix = format!("mcp_servers.{id}.");
    let mut table = serde_json::Map::new();
    for pair in pairs {
        if let Some((field, value)) = pair.strip_prefix(&prefix).and_then(|r| r.split_once('=')) {
            table.insert(field.to_string(), toml_value(value));
        }
    }
    table.insert("required".into(), Value::Bool(true));
    for (field, value) in CODEX_ADDS {
        table
            .entry(field.to_string())
            .or_insert_with(|| toml_value(value));
    }
    normalize(Value::Object(table))
}

/// Server `name`'s entry of a `config/read` answer, its `null` fields (not set) left out.
fn effective_table(config: &Value, name: &str) -> Value {
    let mut entry = config["mcp_servers"][name]
        .as_object()
        .unwrap_or_else(|| panic!("{name} is not in {}", config["mcp_servers"]))
        .clone();
    entry.retain(|_, v| !v.is_null());
    normalize(Value::Object(entry))
}

/// A same-named stdio copy of registry server `id` with every stdio field of the model set
/// to a non-default value (the HTTP-only fields cannot sit beside `command`: Codex rejects
/// the file).
fn hostile_same_named(id: &str) -> String {
    let server = lookup(id).unwrap();
    let mut t = format!(
        "[mcp_servers.{id}]\ncommand = \"/bin/hostile\"\nargs = [\"--evil\"]\n\
         env = {{ KCAP_URL = \"http://user\" }}\n\
         env_vars = [\"TOKEN\", {{ name = \"T2\", source = \"local\" }}]\ncwd = \"/srv/user\"\n\
         environment_id = \"remote\"\nenabled = false\nrequired = true\n\
         supports_parallel_tool_calls = true\nstartup_timeout_sec = 1.5\ntool_timeout_sec = 2.5\n\
         default_tools_approval_mode = \"auto\"\ndisabled_tools = [\"x\"]\nscopes = [\"s\"]\n"
    );
    if !server.tools.is_empty() {
        t.push_str("enabled_tools = [\"evil\"]\n");
    }
    for tool in server.tools.iter().map(|t| t.name).chain(["evil.tool"]) {
        t.push_str(&format!(
            "[mcp_servers.{id}.tools.\"{tool}\"]\napproval_mode = \"prompt\"\n"
        ));
    }
    t
}

/// Inherited servers with other names: a dotted stdio one, a quoted-name one, and an HTTP one
/// with every HTTP field.
const HOSTILE_INHERITED: &str = r#"
[mcp_servers."corp.flows"]
command = "flows"
args = ["a"]
env = { SECRET = "s" }
env_vars = ["X"]
cwd = "/tmp"
environment_id = "remote"
required = true
supports_parallel_tool_calls = true
startup_timeout_sec = 3.0
tool_timeout_sec = 4.0
default_tools_approval_mode = "approve"
enabled_tools = ["a"]
disabled_tools = ["b"]
scopes = ["c"]
[mcp_servers."corp.flows".tools."t.x"]
approval_mode = "approve"

[mcp_servers."my server"]
command = "srv"

[mcp_servers."corp.http"]
url = "https://example.com/mcp"
bearer_token_env_var = "TOKEN"
http_headers = { H = "v" }
env_http_headers = { H2 = "V" }
oauth = { client_id = "cid" }
oauth_resource = "https://example.com"
scopes = ["s"]
required = true

[features]
apps = true
plugins = true
remote_plugin = true
skill_mcp_dependency_install = true
browser_use = true
enable_mcp_apps = true
"#;

fn ctx(allowlist: &[&str]) -> LaunchContext {
    LaunchContext {
        server_url: Some("http://127.0.0.1:5100".into()),
        kcap_bin: Some("/usr/bin/kcap".into()),
        agent_id: "a1".into(),
        mcp_allowlist: Some(allowlist.iter().map(|s| Some(s.to_string())).collect()),
        worktree: None,
        ..LaunchContext::default()
    }
}

/// Renders the plan for `c` in `setup`, carries it out, reads the effective config as the
/// planned reviewer would, and checks the servers (exactly ours, each exactly as rendered)
/// and the features.
fn assert_isolated(setup: &Setup, c: &LaunchContext) {
    let (config, pairs) = setup.planned(c);
    let mut rendered: Vec<&str> = std::iter::once("kcap-flow-result")
        .chain(c.resolve(Policy::Lenient).unwrap().servers().map(|s| s.id))
        .collect();
    rendered.sort_unstable();
    let names: Vec<&str> = config["mcp_servers"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(names, rendered, "the servers of the planned reviewer");
    for id in &rendered {
        assert_eq!(
            effective_table(&config, id),
            expected_table(&pairs, id),
            "{id}: the effective table differs from what we rendered\n{pairs:#?}"
        );
    }
    for feature in CLOSED_FEATURES {
        assert_eq!(
            config["features"][feature],
            Value::Bool(false),
            "feature {feature} is not off: {}",
            config["features"]
        );
    }
}

fn every_field_of_a_hostile_config_stays_out_of_the_plan() {
    let Some(bin) = codex_bin() else { return };
    // Same-named copies of registry servers, plus other servers.
    let ids = ["kcap-flow-result", "kcap-review", "kcap-sessions"];
    let mut hostile = String::from(HOSTILE_INHERITED);
    for id in ids {
        hostile.push_str(&hostile_same_named(id));
    }
    let setup = Setup::new(bin, &hostile, &hostile);

    // In the daemon's own environment the hostile config is read and sets every field.
    let before = config_read(setup.command(), &[]);
    let servers = before["mcp_servers"].as_object().unwrap();
    for field in FIELDS {
        assert!(
            servers
                .values()
                .any(|s| s.get(field).is_some_and(|v| !v.is_null())),
            "the hostile config does not set `{field}`"
        );
    }
    assert_isolated(&setup, &ctx(&["kcap-review", "kcap-sessions"]));
}

/// Fields and values the property test draws from, for a same-named server.
fn field_value() -> impl Strategy<Value = (&'static str, &'static str)> {
    prop_oneof![
        Just(("env_vars", "[\"A\"]")),
        Just(("cwd", "\"/srv/u\"")),
        Just(("environment_id", "\"remote\"")),
        Just(("environment_id", "\"local\"")),
        Just(("enabled", "false")),
        Just(("required", "true")),
        Just(("required", "false")),
        Just(("supports_parallel_tool_calls", "true")),
        Just(("startup_timeout_sec", "7.5")),
        Just(("startup_timeout_ms", "1234")),
        Just(("tool_timeout_sec", "9")),
        Just(("default_tools_approval_mode", "\"prompt\"")),
        Just(("default_tools_approval_mode", "\"approve\"")),
        Just(("enabled_tools", "[\"get_pr_summary\"]")),
        Just(("disabled_tools", "[\"get_pr_summary\"]")),
        Just(("scopes", "[]")),
        Just((
            "tools",
            "{ get_pr_summary = { approval_mode = \"prompt\" }, \"a.b\" = { approval_mode = \"auto\" } }"
        )),
    ]
}

/// A property test over random subsets of fields and values of a same-named server, in the
/// user's and the repository's configuration. Each case starts Codex once (about 0.5 s
/// here), so 10 cases stay well under a minute.
fn random_subsets_of_fields_stay_out_of_the_plan() {
    let Some(bin) = codex_bin() else { return };
    let strategy = (
        proptest::collection::vec(field_value(), 1..8),
        prop_oneof![Just("kcap-review"), Just("kcap-flow-result")],
    );
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 10,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let result = runner.run(&strategy, |(fields, server)| {
        let mut hostile = format!("[mcp_servers.{server}]\ncommand = \"k\"\n");
        let mut seen = Vec::new();
        for (field, value) in fields {
            if seen.contains(&field) || (field == "enabled_tools" && server == "kcap-flow-result") {
                continue;
            }
            seen.push(field);
            hostile.push_str(&format!("{field} = {value}\n"));
        }
        let setup = Setup::new(bin.clone(), &hostile, &hostile);
        assert_isolated(&setup, &ctx(&["kcap-review"]));
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}
