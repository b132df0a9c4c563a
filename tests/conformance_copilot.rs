//! Conformance of the Copilot CLI launch plan against the real client, Copilot CLI 1.0.102
//! (issue 14). Install it with `bash scripts/install-peers.sh`, then run
//! `KCAP_COPILOT_BIN=… KCAP_COPILOT_CACHE=… cargo test --test conformance_copilot`.
//!
//! Each test builds a hostile environment: the daemon user's `$COPILOT_HOME/mcp-config.json`
//! and the worktree's `.mcp.json` and `.github/mcp.json` each declare a server named like an
//! injected one and a server named otherwise, and the daemon's own environment holds
//! `COPILOT_ALLOW_ALL=true` (which trusts the worktree) and leaked `KCAP_*` values; one test
//! also trusts the worktree in the daemon user's `$COPILOT_HOME/config.json`. Every server
//! command is a recorder (a node script, written by `common::stand_in`) that logs its argv,
//! environment and cwd and answers MCP `initialize` and `tools/list`.
//!
//! The test renders the plan (plan version 3: a per-launch root, no inventory) and carries
//! it out as the daemon would: `dirs` created, `worktree_remove` applied, an empty
//! environment plus `env` and the daemon's values of `env_inherit`, the argv, the cwd; ACP
//! `initialize` then `session/new`. Once every injected server has been asked for its tools,
//! and a settle time later, stdin is closed and the client's process group killed. The
//! recorders' logs must show exactly the injected servers, each with exactly its argv and
//! `KCAP_*` environment, and nothing else. `tests/isolation_copilot.rs` covers every class of
//! issue 22.
//!
//! Offline: `COPILOT_OFFLINE=true` and the model provider at a dead local port, handed over
//! as credentials; the package cache is the shared one the installer filled
//! (`KCAP_COPILOT_CACHE`, the launch's `cache_dir`). A missing client is reported as ignored
//! (or fails under `KCAP_REQUIRE_PEERS=1`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::acp::{Known, Record, Timing, drive, plan_env, recorder_source};
use common::peers::{inherited_path, peer};
use common::stand_in::write_executable;
use kcap_mcp_registry::clients::copilot::copilot_plan;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::clients::root::Credentials;
use kcap_mcp_registry::{LaunchContext, Policy, ResultDelivery, Snapshot};
use serde_json::{Value, json};
use tempfile::TempDir;

/// How long one client run may take, from start to the last injected server's `tools/list`,
/// and how long to keep it running after that, so that a server it would start late shows in
/// the logs.
const TIMING: Timing = Timing {
    timeout: Duration::from_secs(90),
    settle: Duration::from_secs(3),
};

fn main() {
    common::peers::main(real_client_tests![
        copilot_starts_exactly_the_injected_servers_under_a_hostile_config,
        copilot_starts_no_server_of_a_trusted_worktree,
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

    /// The launch, with the per-launch directory, the shared package cache `cache` and the
    /// offline provider settings as credentials.
    fn context(&self, cache: &Path) -> LaunchContext {
        LaunchContext {
            server_url: Some("http://127.0.0.1:9/kcap".into()),
            kcap_bin: Some(self.recorder().to_str().unwrap().into()),
            agent_id: "agent-7".into(),
            mcp_allowlist: Some(vec![Some("kcap-review".into()), Some("kcap-flows".into())]),
            worktree: Some(self.worktree().to_str().unwrap().into()),
            launch_dir: Some(self.path("launch").to_str().unwrap().into()),
            cache_dir: Some(cache.to_str().unwrap().into()),
            credentials: Credentials {
                env: vec![
                    EnvVar::new("COPILOT_OFFLINE", "true"),
                    EnvVar::new("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:9/v1"),
                    EnvVar::new("COPILOT_MODEL", "gpt-4o"),
                ],
                files: Vec::new(),
            },
            ..LaunchContext::default()
        }
    }

    /// The daemon's own environment: its own home and `COPILOT_HOME`, and hostile values.
    fn daemon_env(&self) -> BTreeMap<String, String> {
        [
            ("PATH", inherited_path().into_string().unwrap()),
            ("HOME", self.path("home").to_str().unwrap().into()),
            (
                "COPILOT_HOME",
                self.path("home/.copilot").to_str().unwrap().into(),
            ),
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
    env: BTreeMap<String, String>,
) -> Vec<Record> {
    assert!(plan.files.is_empty());
    let launch = setup.path("launch");
    for dir in &plan.dirs {
        std::fs::create_dir_all(launch.join(dir)).unwrap();
    }
    let cwd = Path::new(plan.cwd.as_deref().unwrap());
    for rel in &plan.worktree_remove {
        let path = cwd.join(rel);
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else if path.exists() {
            std::fs::remove_file(&path).unwrap();
        }
    }
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .envs(plan_env(env, plan))
        .args(&plan.argv)
        .current_dir(plan.cwd.as_deref().unwrap());
    let session = serde_json::to_value(plan.session_new.as_ref().unwrap()).unwrap();
    assert_eq!(session["mcpServers"], json!([]));
    drive(
        cmd,
        "copilot",
        session,
        &injected(plan),
        &setup.path("records"),
        TIMING,
    )
}

/// Renders the plan of `ctx`, carries it out, and asserts that exactly the injected servers
/// (`args` lines `servers`) started, with exactly their argv and `KCAP_*` environment, in the
/// worktree.
fn run(setup: &Setup, bin: &Path, ctx: &LaunchContext, servers: &[&str]) {
    let plan = copilot_plan(ctx, &ctx.resolve(Policy::Lenient).unwrap()).unwrap();
    let expected = injected(&plan);
    let mut args: Vec<String> = expected
        .iter()
        .map(|(argv, _)| argv[1..].join(" "))
        .collect();
    args.sort();
    let mut want: Vec<&str> = servers.to_vec();
    want.sort();
    assert_eq!(args, want, "the servers the plan injects");
    let records = carry_out(setup, bin, &plan, setup.daemon_env());
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

/// `COPILOT_ALLOW_ALL=true` and `COPILOT_HOME` in the daemon's environment: not passed on,
/// so neither the daemon user's servers nor the worktree's start, only ours.
fn copilot_starts_exactly_the_injected_servers_under_a_hostile_config() {
    let Some((bin, cache)) = peers() else { return };
    let setup = Setup::new();
    setup.hostile();
    run(
        &setup,
        &bin,
        &setup.context(&cache),
        &["mcp flow-result", "mcp review"],
    );
}

/// A worktree the daemon user trusted in `$COPILOT_HOME/config.json` (`trustedFolders`):
/// the reviewer's `COPILOT_HOME` is its own, which trusts nothing, so the worktree's
/// `.mcp.json` servers do not start (and the plan removes the file anyway).
fn copilot_starts_no_server_of_a_trusted_worktree() {
    let Some((bin, cache)) = peers() else { return };
    let setup = Setup::new();
    setup.hostile();
    let worktree = setup.worktree();
    setup.write(
        "home/.copilot/config.json",
        &json!({"trustedFolders": [worktree.to_str().unwrap(), worktree.canonicalize().unwrap().to_str().unwrap()]}),
    );
    run(
        &setup,
        &bin,
        &setup.context(&cache),
        &["mcp flow-result", "mcp review"],
    );
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
        ..setup.context(&cache)
    };
    run(
        &setup,
        &bin,
        &ctx,
        &["mcp flow-result", "mcp review", "mcp review"],
    );
}
