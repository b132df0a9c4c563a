//! Conformance of the ACP launch plans against the real clients: Gemini CLI 0.61.0 and
//! OpenCode 1.18.33 (issue 14). Install them with `bash scripts/install-peers.sh`, then run
//! `KCAP_GEMINI_BIN=… KCAP_OPENCODE_BIN=… cargo test --test conformance_acp`.
//!
//! Each test renders a [`LaunchPlan`] under a hostile environment and carries it out as the
//! daemon would: the user-level and the project-level configuration each declare a server
//! named like an injected one and a server named otherwise, plus (Gemini) a server named like
//! an injected server's wire alias with a guessed suffix, and (OpenCode) the daemon's own
//! environment points `OPENCODE_CONFIG` and `OPENCODE_CONFIG_DIR` at more servers. Every
//! server command is a recorder (a node script, written by `common::stand_in`) that logs its
//! argv, environment and cwd, and answers MCP `initialize` and `tools/list`. The test starts
//! the client with the plan's argv, environment and cwd, writes its files, sends ACP
//! `initialize` then `session/new` (newline-delimited JSON-RPC), waits until every injected
//! server has been asked for its tools, then closes stdin and kills the client's process
//! group (Gemini does not exit on EOF while MCP children live). The recorders' logs must show
//! exactly the injected servers, each with exactly its argv and `KCAP_*` environment.
//!
//! Offline: dummy keys, model API base URLs and proxies at a dead local port, throwaway
//! `HOME` and XDG directories. A missing client is reported as ignored (or fails under
//! `KCAP_REQUIRE_PEERS=1`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::acp::{Known, Record, Timing, drive, plan_env, recorder_source};
use common::peers::{inherited_path, peer};
use common::stand_in::write_executable;
use kcap_mcp_registry::clients::gemini::gemini_plan;
use kcap_mcp_registry::clients::opencode::opencode_plan;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchId, LaunchPlan};
use kcap_mcp_registry::{LaunchContext, Policy, ResultDelivery, Snapshot};
use serde_json::{Value, json};
use tempfile::TempDir;

/// How long one client run may take, from start to the last injected server's `tools/list`,
/// and how long to keep it running after that, so that a server it would start late (a
/// second round at `session/new`) shows in the logs.
const TIMING: Timing = Timing {
    timeout: Duration::from_secs(60),
    settle: Duration::from_secs(2),
};

/// The kcap server URL the plans carry (never contacted: the recorders ignore it).
const SERVER_URL: &str = "http://127.0.0.1:9/kcap";

/// The reviewer's agent id.
const AGENT_ID: &str = "agent-7";

/// The capability URL of a brokered launch (never contacted).
const CAPABILITY_URL: &str = "http://127.0.0.1:9/cap/t0k3n";

/// The review-context URL of a borrowed-snapshot launch (never contacted).
const REVIEW_CONTEXT_URL: &str = "http://127.0.0.1:9/review-context/workspace-mcp-configs";

fn main() {
    common::peers::main(real_client_tests![
        gemini_starts_exactly_the_injected_servers_under_a_hostile_config,
        gemini_brokered_borrowed_launch_starts_exactly_its_three_servers,
        opencode_starts_exactly_the_injected_servers_under_a_hostile_config,
        opencode_brokered_borrowed_launch_starts_exactly_its_three_servers,
        opencode_reads_the_plans_permission_rules,
    ]);
}

/// The servers `context` injects, as `args` lines: the result channel and `kcap-review`.
const DIRECT_SERVERS: [&str; 2] = ["mcp flow-result", "mcp review"];

/// The servers `brokered_borrowed_context` injects: the result channel, `kcap-review`, then
/// `kcap-review-context` (whose args are `kcap-review`'s; its env tells them apart).
const BROKERED_BORROWED_SERVERS: [&str; 3] = ["mcp flow-result", "mcp review", "mcp review"];

// ------------------------------------------------------------------------------------------
// The setup every client shares
// ------------------------------------------------------------------------------------------

/// A throwaway machine for one client run: home, XDG directories, the worktree, the
/// per-launch directory and the recorders' logs.
struct Setup {
    root: TempDir,
}

impl Setup {
    fn new() -> Setup {
        let setup = Setup {
            root: tempfile::tempdir().unwrap(),
        };
        for dir in [
            "home",
            "xdg-config",
            "xdg-data",
            "xdg-cache",
            "xdg-state",
            "launch",
            "records",
            "bin",
        ] {
            std::fs::create_dir_all(setup.path(dir)).unwrap();
        }
        // The worktree sits one level below a directory that holds a config of its own too
        // (OpenCode reads parent directories).
        std::fs::create_dir_all(setup.worktree()).unwrap();
        write_executable(&setup.recorder(), recorder_source(&setup.path("records")));
        setup
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    fn home(&self) -> PathBuf {
        self.path("home")
    }

    fn worktree(&self) -> PathBuf {
        self.path("parent/worktree")
    }

    fn recorder(&self) -> PathBuf {
        self.path("bin/kcap")
    }

    fn write(&self, path: &Path, value: &Value) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
    }

    /// The launch the plans are rendered for: the recorder as the kcap binary, the result
    /// channel plus `kcap-review` (and `kcap-flows`, which the recursion guard strips).
    fn context(&self) -> LaunchContext {
        LaunchContext {
            server_url: Some(SERVER_URL.into()),
            kcap_bin: Some(self.recorder().to_str().unwrap().into()),
            agent_id: AGENT_ID.into(),
            mcp_allowlist: Some(vec![Some("kcap-review".into()), Some("kcap-flows".into())]),
            worktree: Some(self.worktree().to_str().unwrap().into()),
            launch_dir: Some(self.path("launch").to_str().unwrap().into()),
            ..LaunchContext::default()
        }
    }

    /// [`Setup::context`] for a borrowed snapshot whose result is brokered: the result
    /// channel gets `KCAP_FLOW_CAPABILITY_URL` instead of `KCAP_URL`, and
    /// `kcap-review-context` is injected after `kcap-review`.
    fn brokered_borrowed_context(&self) -> LaunchContext {
        LaunchContext {
            result_delivery: ResultDelivery::Brokered {
                capability_url: CAPABILITY_URL.into(),
            },
            snapshot: Snapshot::Borrowed {
                review_context_url: Some(REVIEW_CONTEXT_URL.into()),
            },
            ..self.context()
        }
    }

    /// The environment the daemon itself runs with: a throwaway home, dead API URLs, and
    /// whatever `hostile` adds.
    fn daemon_env(&self, hostile: &[(&str, String)]) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = [
            ("PATH", inherited_path().into_string().unwrap()),
            ("HOME", self.home().to_str().unwrap().into()),
            (
                "XDG_CONFIG_HOME",
                self.path("xdg-config").to_str().unwrap().into(),
            ),
            (
                "XDG_DATA_HOME",
                self.path("xdg-data").to_str().unwrap().into(),
            ),
            (
                "XDG_CACHE_HOME",
                self.path("xdg-cache").to_str().unwrap().into(),
            ),
            (
                "XDG_STATE_HOME",
                self.path("xdg-state").to_str().unwrap().into(),
            ),
            ("HTTP_PROXY", "http://127.0.0.1:9".into()),
            ("HTTPS_PROXY", "http://127.0.0.1:9".into()),
            // OpenCode's ACP front end talks to its own server on the loopback interface over
            // HTTP, through the proxy unless told otherwise (session/new then fails with
            // "service failure", measured on 1.18.33).
            ("NO_PROXY", "127.0.0.1,localhost".into()),
            // A daemon that itself runs under a flow must not leak its ids to the servers.
            ("KCAP_URL", "http://127.0.0.1:9/leaked".into()),
            ("KCAP_FLOW_AGENT_ID", "leaked-agent".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        env.extend(hostile.iter().map(|(k, v)| (k.to_string(), v.clone())));
        env
    }

    /// Carries `plan` out under `daemon_env` and returns what every recorder logged, once
    /// every injected server has answered `tools/list` (or panics after the timeout).
    fn carry_out(
        &self,
        bin: &Path,
        plan: &LaunchPlan,
        daemon_env: BTreeMap<String, String>,
    ) -> Vec<Record> {
        common::acp::prepare(plan, &self.path("launch"));
        let mut cmd = Command::new(bin);
        cmd.env_clear()
            .envs(plan_env(daemon_env, plan))
            .args(&plan.argv)
            .current_dir(plan.cwd.as_deref().expect("ACP plans name the cwd"));
        let session = plan.session_new.as_ref().expect("an ACP plan");
        drive(
            cmd,
            &plan.client,
            serde_json::to_value(session).unwrap(),
            &session_servers(plan),
            &self.path("records"),
            TIMING,
        )
    }
}

/// The servers `plan`'s `session/new` injects, as the records would show them (a server is
/// known by its argv and `KCAP_*` env: `kcap-review-context` has `kcap-review`'s args).
fn session_servers(plan: &LaunchPlan) -> BTreeSet<Known> {
    let session = plan.session_new.as_ref().expect("an ACP plan");
    session
        .mcp_servers
        .iter()
        .map(|s| {
            let argv = std::iter::once(s.command.clone())
                .chain(s.args.clone())
                .collect();
            let env = s
                .env
                .iter()
                .map(|v| (v.name.clone(), v.value.clone()))
                .collect();
            (argv, env)
        })
        .collect()
}

/// Asserts that the records show exactly the plan's servers (counting distinct servers, not
/// spawns), each with exactly its argv and `KCAP_*` environment, and that the plan injects
/// the servers whose `args` are `servers`, in order.
fn assert_exactly_injected(
    plan: &LaunchPlan,
    servers: &[&str],
    records: &[Record],
    recorder: &Path,
) {
    let session = plan.session_new.as_ref().unwrap();
    assert_eq!(
        session
            .mcp_servers
            .iter()
            .map(|s| s.args.join(" "))
            .collect::<Vec<_>>(),
        servers,
        "the servers the plan injects"
    );
    let expected = session_servers(plan);
    assert_eq!(
        expected.len(),
        servers.len(),
        "two injected servers are alike"
    );
    let mut seen = BTreeSet::new();
    for record in records {
        assert_eq!(record.argv[0], recorder.to_str().unwrap());
        seen.insert(record.known());
    }
    assert_eq!(
        seen, expected,
        "{}: the servers started (argv, KCAP_* env) are not exactly the injected ones",
        plan.client
    );
}

/// The plan of `render(ctx, resolution)` for `ctx` under the lenient policy.
fn plan_of<E: std::fmt::Debug>(
    ctx: &LaunchContext,
    render: impl FnOnce(
        &LaunchContext,
        &kcap_mcp_registry::Resolution<'_, String>,
    ) -> Result<LaunchPlan, E>,
) -> LaunchPlan {
    let resolution = ctx.resolve(Policy::Lenient).unwrap();
    render(ctx, &resolution).unwrap()
}

// ------------------------------------------------------------------------------------------
// Gemini CLI
// ------------------------------------------------------------------------------------------

fn gemini_starts_exactly_the_injected_servers_under_a_hostile_config() {
    let Some(bin) = peer("KCAP_GEMINI_BIN") else {
        return;
    };
    gemini_under_a_hostile_config(&bin, Setup::context, &DIRECT_SERVERS);
}

/// A brokered result and a borrowed snapshot: the three servers (all aliased) start with
/// exactly their env, the result channel's capability URL and no `KCAP_URL`.
fn gemini_brokered_borrowed_launch_starts_exactly_its_three_servers() {
    let Some(bin) = peer("KCAP_GEMINI_BIN") else {
        return;
    };
    gemini_under_a_hostile_config(
        &bin,
        Setup::brokered_borrowed_context,
        &BROKERED_BORROWED_SERVERS,
    );
}

/// Renders the Gemini plan of `context` and carries it out under a hostile configuration
/// (every scope declares servers named like the injected ones, their guessed aliases and
/// others, and widens the allow list); exactly the `injected` servers start.
fn gemini_under_a_hostile_config(
    bin: &Path,
    context: fn(&Setup) -> LaunchContext,
    injected: &[&str],
) {
    let setup = Setup::new();
    let id = LaunchId::random().unwrap();
    let mut ctx = context(&setup);
    // The daemon hands the reviewer its credentials; its own environment reaches nothing.
    ctx.credentials.env = vec![
        EnvVar::new("GEMINI_API_KEY", "dummy"),
        EnvVar::new("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9"),
    ];
    let mut plan = plan_of(&ctx, |ctx, r| gemini_plan(ctx, r, &id));
    // The test's own additions, to stay offline: Gemini's other traffic (usage statistics)
    // goes to a dead proxy.
    plan.env.extend(
        [
            ("HTTP_PROXY", "http://127.0.0.1:9"),
            ("HTTPS_PROXY", "http://127.0.0.1:9"),
            ("NO_PROXY", "127.0.0.1,localhost"),
        ]
        .map(|(n, v)| EnvVar::new(n, v)),
    );
    assert!(
        plan.servers
            .iter()
            .all(|s| s.wire_name == id.wire_name(kcap_mcp_registry::lookup(&s.id).unwrap())),
        "every injected server is aliased: {:?}",
        plan.servers
    );
    let rec = setup.recorder();
    let rec = rec.to_str().unwrap();
    // A guess at the alias: the right shape, another suffix.
    let guess = LaunchId::from_hex("0000000000000000").unwrap();
    let servers = |scope: &str| {
        json!({
            "kcap-review": {"command": rec, "args": [format!("{scope}-same-name")]},
            "kcap-flow-result": {"command": rec, "args": [format!("{scope}-result-name")]},
            guess.alias("kcap-review"): {"command": rec, "args": [format!("{scope}-alias-guess")]},
            format!("{scope}-other"): {"command": rec, "args": [format!("{scope}-other-name")]},
        })
    };
    let settings = |scope: &str| {
        json!({
            "mcpServers": servers(scope),
            // Tries to widen what starts.
            "mcp": {"allowed": ["kcap-review", format!("{scope}-other"), guess.alias("kcap-review")]},
            "security": {"folderTrust": {"enabled": true}},
        })
    };
    setup.write(
        &setup.home().join(".gemini/settings.json"),
        &settings("user"),
    );
    setup.write(
        &setup.worktree().join(".gemini/settings.json"),
        &settings("project"),
    );
    // Credentials in the daemon's own environment reach nothing: the plan's env replaces it.
    let env = setup.daemon_env(&[("GEMINI_API_KEY", "leaked-key".into())]);
    let records = setup.carry_out(bin, &plan, env);
    assert_exactly_injected(&plan, injected, &records, &setup.recorder());
    for record in &records {
        assert_eq!(
            Path::new(&record.cwd),
            setup.worktree().canonicalize().unwrap()
        );
    }
}

// ------------------------------------------------------------------------------------------
// OpenCode
// ------------------------------------------------------------------------------------------

/// OpenCode's config with a server named like an injected one and one named otherwise.
fn opencode_config(rec: &str, scope: &str) -> Value {
    let local = |arg: String| json!({"type": "local", "command": [rec, arg], "enabled": true});
    json!({
        "$schema": "https://opencode.ai/config.json",
        "mcp": {
            "kcap-review": local(format!("{scope}-same-name")),
            "kcap-flow-result": local(format!("{scope}-result-name")),
            format!("{scope}-other"): local(format!("{scope}-other-name")),
        }
    })
}

/// The hostile OpenCode setup: servers in the user's config, `~/.opencode`, the worktree's
/// and its parent's `opencode.json` and `.opencode/`, and in the files `OPENCODE_CONFIG` and
/// `OPENCODE_CONFIG_DIR` name; returns the daemon's environment.
fn hostile_opencode(setup: &Setup) -> BTreeMap<String, String> {
    let rec = setup.recorder();
    let rec = rec.to_str().unwrap();
    setup.write(
        &setup.path("xdg-config/opencode/opencode.json"),
        &opencode_config(rec, "user"),
    );
    setup.write(
        &setup.home().join(".opencode/opencode.json"),
        &opencode_config(rec, "homedot"),
    );
    setup.write(
        &setup.worktree().join("opencode.json"),
        &opencode_config(rec, "project"),
    );
    setup.write(
        &setup.worktree().join(".opencode/opencode.json"),
        &opencode_config(rec, "projectdot"),
    );
    setup.write(
        &setup.path("parent/opencode.json"),
        &opencode_config(rec, "parent"),
    );
    setup.write(
        &setup.path("extra/config.json"),
        &opencode_config(rec, "envfile"),
    );
    setup.write(
        &setup.path("extra-dir/opencode.json"),
        &opencode_config(rec, "envdir"),
    );
    setup.daemon_env(&[
        (
            "OPENCODE_CONFIG",
            setup.path("extra/config.json").to_str().unwrap().into(),
        ),
        (
            "OPENCODE_CONFIG_DIR",
            setup.path("extra-dir").to_str().unwrap().into(),
        ),
        (
            "OPENCODE_CONFIG_CONTENT",
            serde_json::to_string(&opencode_config(rec, "envcontent")).unwrap(),
        ),
        ("OPENCODE_DISABLE_AUTOUPDATE", "1".into()),
        ("OPENCODE_DISABLE_MODELS_FETCH", "1".into()),
    ])
}

fn opencode_starts_exactly_the_injected_servers_under_a_hostile_config() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    let setup = Setup::new();
    let env = hostile_opencode(&setup);
    let plan = plan_of(&setup.context(), opencode_plan);
    let records = setup.carry_out(&bin, &plan, env);
    assert_exactly_injected(&plan, &DIRECT_SERVERS, &records, &setup.recorder());
}

/// A brokered result and a borrowed snapshot under the hostile OpenCode setup: the three
/// servers start with exactly their env.
fn opencode_brokered_borrowed_launch_starts_exactly_its_three_servers() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    let setup = Setup::new();
    let env = hostile_opencode(&setup);
    let plan = plan_of(&setup.brokered_borrowed_context(), opencode_plan);
    let records = setup.carry_out(&bin, &plan, env);
    assert_exactly_injected(
        &plan,
        &BROKERED_BORROWED_SERVERS,
        &records,
        &setup.recorder(),
    );
}

/// `opencode debug config` (no server started) under the plan's environment shows the
/// plan's permission rules exactly, and no MCP server from any config layer.
fn opencode_reads_the_plans_permission_rules() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    let setup = Setup::new();
    let env = hostile_opencode(&setup);
    let plan = plan_of(&setup.context(), opencode_plan);
    let env = common::acp::plan_env(env, &plan);
    let permission = plan
        .env
        .iter()
        .find(|v| v.name == "OPENCODE_PERMISSION")
        .unwrap()
        .value
        .clone();
    let mut cmd = Command::new(&bin);
    cmd.env_clear()
        .envs(&env)
        .args(["debug", "config"])
        .current_dir(setup.worktree());
    let out = common::peers::run(cmd, "opencode debug config");
    assert!(out.status.success(), "{}", out.stderr);
    let config: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "opencode debug config: {e}:\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let wanted: Value = serde_json::from_str(&permission).unwrap();
    assert_eq!(config["permission"], wanted);
    assert_eq!(
        config.get("mcp").cloned().unwrap_or(json!({})),
        json!({}),
        "{config:#}"
    );
}
