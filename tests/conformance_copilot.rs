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
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::acp::{Known, Record, Timing, drive, plan_env, recorder_source};
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
