//! The Codex renderer judged on Codex's own effective configuration (issue 10): a hostile
//! user `config.toml` sets every field of the typed model ([`config::FIELDS`]) on same-named
//! copies of registry servers and on inherited servers (dotted and quoted names); the
//! reviewer argv is rendered with the inventory taken from the real Codex CLI 0.169.0; then
//! `codex <the rendered -c and --disable pairs> app-server` `config/read` must show, for each
//! server we render, exactly the fields we rendered (plus the ones Codex adds itself), every
//! inherited server disabled, and every closed feature off.
//!
//! Needs `KCAP_CODEX_BIN`; without it each test is reported as ignored with the reason, and
//! `KCAP_REQUIRE_PEERS=1` (CI) makes a missing client a failure (`common::peers`, this file's
//! harness). Every Codex run is bounded by the library's timeout, which ends the child's
//! process group.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use kcap_mcp_registry::clients::codex::app_server::config_read_raw_from;
use kcap_mcp_registry::clients::codex::config::{self, FIELDS, ServerConfig, TOOL_FIELDS};
use kcap_mcp_registry::clients::codex::inventory::{
    INVENTORY_TIMEOUT, InheritedServer, codex_inventory_with,
};
use kcap_mcp_registry::clients::codex::{CLOSED_FEATURES, codex_reviewer_args};
use kcap_mcp_registry::{LaunchContext, Policy, RenderError, lookup};
use proptest::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Fields Codex reports on every server although we did not render them, with the value.
const CODEX_ADDS: [(&str, &str); 1] = [("environment_id", "\"local\"")];

/// Fields Codex leaves out of `config/read` when they hold this value, though we render them.
const CODEX_OMITS: [(&str, &str); 3] = [
    ("required", "false"),
    ("supports_parallel_tool_calls", "false"),
    ("env_vars", "[]"),
];

fn main() {
    common::peers::main(real_client_tests![
        every_field_of_a_hostile_config_is_neutralized_or_refused,
        fields_that_cannot_be_neutralized_are_refused_by_name,
        config_read_misses_plugin_servers_and_the_merged_inventory_has_them,
        random_subsets_of_fields_are_neutralized,
        the_typed_model_lists_what_it_documents,
    ]);
}

fn codex_bin() -> Option<PathBuf> {
    common::peers::peer("KCAP_CODEX_BIN")
}

/// A throwaway Codex: own HOME, CODEX_HOME and cwd, dummy key, API at a dead local port.
struct Setup {
    bin: PathBuf,
    home: TempDir,
    cwd: TempDir,
}

impl Setup {
    fn new(bin: PathBuf, user_config: &str) -> Setup {
        let s = Setup {
            bin,
            home: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
        };
        std::fs::write(s.home.path().join("config.toml"), user_config).unwrap();
        s
    }

    fn command(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("CODEX_HOME", self.home.path())
            .env("OPENAI_API_KEY", "dummy")
            .env("OPENAI_BASE_URL", "http://127.0.0.1:9")
            .current_dir(self.cwd.path());
        c
    }

    fn inventory(&self) -> Vec<InheritedServer> {
        codex_inventory_with(|| self.command(), INVENTORY_TIMEOUT)
            .unwrap_or_else(|e| panic!("inventory: {e}"))
    }

    /// `config/read` with `extra` before `app-server`.
    fn config_read(&self, extra: &[String]) -> Value {
        let mut c = self.command();
        c.args(extra);
        config_read_raw_from(c, TIMEOUT).unwrap_or_else(|e| panic!("config/read: {e}"))
    }
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

/// What `config/read` must show for server `id`: the fields rendered for it, with Codex's
/// additions and omissions.
fn expected_table(pairs: &[String], id: &str) -> Value {
    let prefix = format!("mcp_servers.{id}.");
    let mut table = serde_json::Map::new();
    for pair in pairs {
        if let Some((field, value)) = pair.strip_prefix(&prefix).and_then(|r| r.split_once('=')) {
            table.insert(field.to_string(), toml_value(value));
        }
    }
    for (field, value) in CODEX_OMITS {
        if table.get(field) == Some(&toml_value(value)) {
            table.remove(field);
        }
    }
    for (field, value) in CODEX_ADDS {
        table
            .entry(field.to_string())
            .or_insert_with(|| toml_value(value));
    }
    normalize(Value::Object(table))
}

fn effective_table(config: &Value, name: &str) -> ServerConfig {
    serde_json::from_value(config["mcp_servers"][name].clone())
        .unwrap_or_else(|e| panic!("{name}: {e}: {}", config["mcp_servers"][name]))
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

/// Renders for `allowlist` against `setup`'s real inventory, reads the effective config with
/// the rendered pairs, and checks every rendered server, every inherited one and the features.
fn assert_isolated(setup: &Setup, c: &LaunchContext) {
    let inventory = setup.inventory();
    let argv = codex_reviewer_args(c, &c.resolve(Policy::Lenient).unwrap(), &inventory)
        .unwrap_or_else(|e| panic!("render: {e}"));
    let pairs = override_pairs(&argv);
    let config = setup.config_read(&pairs);
    let rendered: Vec<&str> = std::iter::once("kcap-flow-result")
        .chain(c.resolve(Policy::Lenient).unwrap().servers().map(|s| s.id))
        .collect();
    for id in &rendered {
        let effective = normalize(serde_json::to_value(effective_table(&config, id)).unwrap());
        assert_eq!(
            effective,
            expected_table(&pairs, id),
            "{id}: the effective table differs from what we rendered\n{pairs:#?}"
        );
    }
    for s in inventory
        .iter()
        .filter(|s| !rendered.contains(&s.name.as_str()))
    {
        assert_eq!(
            effective_table(&config, &s.name).enabled,
            Some(false),
            "inherited {} is not disabled",
            s.name
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

fn every_field_of_a_hostile_config_is_neutralized_or_refused() {
    let Some(bin) = codex_bin() else { return };
    // Same-named copies of every registry server whose fields can all be neutralized
    // (catalog servers), plus the inherited ones.
    let ids = ["kcap-flow-result", "kcap-review", "kcap-sessions"];
    let mut user = String::from(HOSTILE_INHERITED);
    for id in ids {
        user.push_str(&hostile_same_named(id));
    }
    let setup = Setup::new(bin.clone(), &user);

    // The hostile config really sets every field of the model, and Codex reports no field
    // the model does not know.
    let before = setup.config_read(&[]);
    let servers: BTreeMap<String, ServerConfig> =
        serde_json::from_value(before["mcp_servers"].clone()).unwrap();
    for field in FIELDS {
        assert!(
            servers
                .values()
                .any(|s| s.set_fields().iter().any(|f| f == field)),
            "the hostile config does not set `{field}`"
        );
    }
    for (name, s) in &servers {
        assert!(
            s.unknown.is_empty(),
            "{name}: unknown fields {:?}",
            s.unknown
        );
        for (tool, t) in s.tools.iter().flatten() {
            assert!(t.unknown.is_empty(), "{name}.tools.{tool}: {:?}", t.unknown);
        }
    }
    let raw_tool_keys: Vec<String> = servers
        .values()
        .flat_map(|s| s.tools.iter().flatten())
        .flat_map(|(_, t)| {
            serde_json::to_value(t)
                .unwrap()
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        raw_tool_keys
            .iter()
            .all(|k| TOOL_FIELDS.contains(&k.as_str()))
    );

    let mut c = ctx(&["kcap-review", "kcap-sessions"]);
    c.worktree = Some(setup.cwd.path().to_str().unwrap().into());
    assert_isolated(&setup, &c);

    // Without a worktree, an inherited `cwd` is refused.
    c.worktree = None;
    let err = codex_reviewer_args(&c, &c.resolve(Policy::Lenient).unwrap(), &setup.inventory())
        .unwrap_err();
    assert_eq!(
        err,
        RenderError::CodexInheritedField {
            server: "kcap-flow-result".into(),
            field: "cwd".into()
        }
    );
}

fn fields_that_cannot_be_neutralized_are_refused_by_name() {
    let Some(bin) = codex_bin() else { return };
    let cases = [
        (
            "[mcp_servers.kcap-memory]\ncommand = \"k\"\nenabled_tools = [\"foo\"]\n",
            "kcap-memory",
            "enabled_tools",
        ),
        (
            "[mcp_servers.kcap-review]\ncommand = \"k\"\nenv = { KCAP_URL = \"u\", EXTRA = \"s\" }\n",
            "kcap-review",
            "env.EXTRA",
        ),
        (
            "[mcp_servers.kcap-review]\nurl = \"https://x\"\nhttp_headers = { A = \"b\" }\n",
            "kcap-review",
            "url",
        ),
    ];
    for (user, server, field) in cases {
        let setup = Setup::new(bin.clone(), user);
        let c = ctx(&[server]);
        let err = codex_reviewer_args(&c, &c.resolve(Policy::Lenient).unwrap(), &setup.inventory())
            .unwrap_err();
        assert_eq!(
            err,
            RenderError::CodexInheritedField {
                server: server.into(),
                field: field.into()
            },
            "{user}"
        );
    }
}

fn config_read_misses_plugin_servers_and_the_merged_inventory_has_them() {
    let Some(bin) = codex_bin() else { return };
    let setup = Setup::new(bin, "[plugins.\"p1@m1\"]\nenabled = true\n");
    let plugin = setup.home.path().join("plugins/cache/m1/p1/local");
    std::fs::create_dir_all(plugin.join(".codex-plugin")).unwrap();
    std::fs::write(
        plugin.join(".codex-plugin/plugin.json"),
        r#"{"name":"p1","version":"1.0.0","description":"x"}"#,
    )
    .unwrap();
    std::fs::write(
        plugin.join(".mcp.json"),
        r#"{"mcpServers":{"plug-srv":{"command":"echo","args":["hi"]}}}"#,
    )
    .unwrap();
    let config = setup.config_read(&[]);
    assert!(
        config["mcp_servers"].get("plug-srv").is_none(),
        "{}",
        config["mcp_servers"]
    );
    let inventory = setup.inventory();
    let plug = inventory
        .iter()
        .find(|s| s.name == "plug-srv")
        .expect("merged");
    assert!(plug.config.is_none());
    // `--disable plugins` (in every reviewer argv) removes it from what Codex would start.
    let mut c = setup.command();
    c.args(["--disable", "plugins", "mcp", "list", "--json"]);
    let out = c.output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
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

/// A property test over random subsets of fields and values of a same-named server. Each
/// case starts Codex three times (about 1 s here), so 10 cases stay well under a minute.
fn random_subsets_of_fields_are_neutralized() {
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
        let mut user = format!("[mcp_servers.{server}]\ncommand = \"k\"\n");
        let mut seen = Vec::new();
        for (field, value) in fields {
            if seen.contains(&field) || (field == "enabled_tools" && server == "kcap-flow-result") {
                continue;
            }
            seen.push(field);
            user.push_str(&format!("{field} = {value}\n"));
        }
        let setup = Setup::new(bin.clone(), &user);
        let mut c = ctx(&["kcap-review"]);
        c.worktree = Some(setup.cwd.path().to_str().unwrap().into());
        assert_isolated(&setup, &c);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

fn the_typed_model_lists_what_it_documents() {
    // Not a Codex run: the field list and the default approval constants agree with the model.
    let all: ServerConfig = serde_json::from_value(serde_json::json!({
        "command":"c","args":[],"env":{},"env_vars":[],"cwd":"/","url":"u",
        "bearer_token_env_var":"b","http_headers":{},"env_http_headers":{},"environment_id":"e",
        "enabled":true,"required":true,"supports_parallel_tool_calls":true,
        "startup_timeout_sec":1.0,"tool_timeout_sec":1.0,"default_tools_approval_mode":"auto",
        "enabled_tools":[],"disabled_tools":[],"scopes":[],"oauth":{},"oauth_resource":"r",
        "tools":{}
    }))
    .unwrap();
    assert!(all.unknown.is_empty(), "{:?}", all.unknown);
    assert_eq!(all.set_fields(), FIELDS);
    assert_eq!((config::APPROVE, config::PROMPT), ("approve", "prompt"));
}
