//! Issue 34, "checked, then changed", on the real Gemini CLI 0.61.0 and Qwen Code 0.24.4:
//! both load the first `.gemini/.env` (`.qwen/.env`) or `.env` they find from the worktree
//! up to `/` into their environment and every MCP server's. The room's preflight
//! (`gemini_family::env_file_preflight`, run by `Client::plan`) refuses a launch while a
//! parent directory holds one, but a file written after that check and before the client
//! reads it passes it. What closes the window is the reviewer's sandbox
//! (`launch::sandbox`, on by default): the client reads only its worktree, its launch
//! directory and the system's paths, so a parent directory of the worktree outside them is
//! out of its reach whatever is written there later.
//!
//! Each test plans a launch (`Client::plan`: its preflight passes, no parent holds a file),
//! then writes `.env` into the worktree's parent directory ([`PLANTED`]: a marker, the
//! result channel's agent id and a capability URL; `Client::plan` now refuses, so the file
//! is one the check would have caught), then carries the plan out with the executor
//! (`launch::launch_with_parent_env`), the kcap binary a recorder MCP server
//! (`common::records`), until every injected server listed its tools. The judge: no planted
//! value is in any server's environment (both clients swallow the sandbox's `EACCES` on the
//! file: the confined launch runs as usual). The bites, each in a world of its own: with
//! `Confinement::Off`, and in the sandbox with the parent added to its paths (as a daemon's
//! `--sandbox-exec` holding its worktrees would), the marker reaches every server; the
//! second is why the plan refuses a worktree with a parent in its sandbox
//! (`gemini_family::readable_parent`).
//! Offline: dummy keys, the model APIs at a dead local port, a dead proxy for the rest; no
//! prompt is sent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common;

use common::peers::{inherited_path, peer, skip};
use common::records::{Record, read_records, recorder_source};
use common::stand_in::write_executable;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::dispatch::PlanInputs;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::clients::root::Credentials;
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, Options, Reviewer};
use kcap_mcp_registry::{LaunchContext, LaunchError, Policy, RenderError};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        gemini_a_parent_env_written_after_the_check_reaches_no_server,
        qwen_a_parent_env_written_after_the_check_reaches_no_server,
    ]
}

/// What the parent directory's `.env` holds: a marker no plan sets, and two variables of the
/// result channel (the red team planted these): the agent id, which the result
/// channel's server gets from its own `env` (so it shows in the review server only), and a
/// capability URL, which no server of a direct-delivery plan has.
const PLANTED: &str = "KCAP_ENV_RACE=planted\n\
                       KCAP_FLOW_AGENT_ID=planted\n\
                       KCAP_FLOW_CAPABILITY_URL=http://127.0.0.1:9/planted\n";

/// The marker of [`PLANTED`].
const MARKER: &str = "KCAP_ENV_RACE";

/// How long one client run may take until every injected server listed its tools.
const BOUND: Duration = Duration::from_secs(90);

/// Gemini CLI: its `.env` loader (`findEnvFile`, `loadEnvironment` of 0.61.0) stats the
/// parent's file, then reads it in a `try` whose `catch` is empty.
fn gemini_a_parent_env_written_after_the_check_reaches_no_server() {
    race(Client::Gemini, "KCAP_GEMINI_BIN", None, |_| {
        vec![
            EnvVar::new("GEMINI_API_KEY", "dummy-gemini-key-0123456789"),
            EnvVar::new("GOOGLE_GEMINI_BASE_URL", "http://127.0.0.1:9"),
        ]
    });
}

/// Qwen Code: its loader (`findEnvFiles`, `parseEnvFiles` of 0.24.4) notes a file it cannot
/// read as a read failure and goes on.
fn qwen_a_parent_env_written_after_the_check_reaches_no_server() {
    race(Client::Qwen, "KCAP_QWEN_BIN", Some("gpt-4o"), |_| {
        vec![
            EnvVar::new("OPENAI_API_KEY", "sk-dummy-0123456789abcdefghij"),
            EnvVar::new("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
        ]
    });
}

/// The test of `client` (its binary in `var`): a confined launch (the default) and the bite
/// (`Confinement::Off`), each in a world of its own.
fn race(
    client: Client,
    var: &'static str,
    model: Option<&str>,
    credentials: fn(&World) -> Vec<EnvVar>,
) {
    let Some(bin) = peer(var) else { return };
    if let Some(missing) = sandbox::missing() {
        skip(format!("this kernel lacks {missing}"));
        return;
    }
    let run = |reach: Reach| {
        let world = World::new();
        let plan = world.plan(client, model, credentials(&world));
        world.plant(client, model, credentials(&world));
        world.carry_out(&plan, &bin, reach)
    };
    let confined = run(Reach::Default);
    let parent_allowed = run(Reach::ParentAllowed);
    let open = run(Reach::Off);
    eprintln!(
        "{client}: planted values in the servers' environments: sandboxed (default) {:?}; \
         the parent allowed {:?}; sandbox off {:?}",
        planted_in(&confined),
        planted_in(&parent_allowed),
        planted_in(&open)
    );
    // The bite: without the sandbox the parent's file reaches every server; and in the
    // sandbox too once the parent is within its boundary, so what keeps it out is the
    // parent lying outside the boundary.
    for (seen, how) in [
        (&open, "with the sandbox off"),
        (&parent_allowed, "with the parent allowed"),
    ] {
        assert!(
            seen.iter()
                .all(|r| r.env.get(MARKER).map(String::as_str) == Some("planted")),
            "{client}: {how} the planted `.env` did not reach every server: {:?}",
            planted_in(seen)
        );
    }
    assert!(
        planted_in(&confined).values().all(BTreeMap::is_empty),
        "{client}: a `.env` written into the worktree's parent after the check reached a \
         server in the default sandbox: {:?}",
        planted_in(&confined)
    );
}

/// The reviewer's sandbox in one run.
#[derive(Clone, Copy)]
enum Reach {
    /// The default (`Confinement::BestEffort`, the whole sandbox on this kernel).
    Default,
    /// The default, with the worktree's parent (where the `.env` is) added to what the
    /// reviewer may read (`Options::with_sandbox_read_exec`).
    ParentAllowed,
    /// `Confinement::Off`.
    Off,
}

/// For each server (its argv, joined), the variables of its environment whose value is a
/// planted one.
fn planted_in(records: &[Record]) -> BTreeMap<String, BTreeMap<String, String>> {
    records
        .iter()
        .map(|r| {
            let planted = r
                .env
                .iter()
                .filter(|(_, v)| v.contains("planted"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (r.argv[1..].join(" "), planted)
        })
        .collect()
}

/// One launch's world in a new temporary directory (`<root>`): the worktree `<root>/wt`,
/// the launch directory `<root>/launch`, the recorder as the kcap binary
/// `<root>/bin/kcap`, its logs in `<root>/records`. `<root>` is the worktree's parent, where
/// the test plants the `.env`.
struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        for dir in ["wt", "bin", "records"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("wt/README.md"), "the change under review\n").unwrap();
        write_executable(
            &root.join("bin/kcap"),
            recorder_source(&root.join("records")),
        );
        World { _tmp: tmp, root }
    }

    /// The launch: the result channel and `kcap-review`, the recorder as the kcap binary.
    fn context(&self, model: Option<&str>, credentials: Vec<EnvVar>) -> LaunchContext {
        LaunchContext {
            agent_id: "a1".into(),
            server_url: Some("http://127.0.0.1:9".into()),
            kcap_bin: Some(self.root.join("bin/kcap").display().to_string()),
            mcp_allowlist: Some(vec![Some("kcap-review".into())]),
            model: model.map(str::to_owned),
            worktree: Some(self.root.join("wt").display().to_string()),
            launch_dir: Some(self.root.join("launch").display().to_string()),
            credentials: Credentials {
                env: credentials,
                files: Vec::new(),
            },
            ..LaunchContext::default()
        }
    }

    /// `client`'s plan (`Client::plan`, lenient; its preflight passes), with a dead proxy
    /// for anything but the loopback interface.
    fn plan(&self, client: Client, model: Option<&str>, credentials: Vec<EnvVar>) -> LaunchPlan {
        crate::common::tool_attacks::offline_plan(client, &self.context(model, credentials))
    }

    /// Writes [`PLANTED`] as `.env` in the worktree's parent, after the plan's check; asserts
    /// that the check, run now, would refuse it.
    fn plant(&self, client: Client, model: Option<&str>, credentials: Vec<EnvVar>) {
        let file = self.root.join(".env");
        std::fs::write(&file, PLANTED).unwrap();
        let refused = client
            .plan(
                &self.context(model, credentials),
                &PlanInputs::new(Policy::Lenient),
            )
            .err();
        assert!(
            matches!(
                &refused,
                Some(LaunchError::Render(RenderError::ParentEnvFile { client: c, file: f }))
                    if *c == client && *f == file
            ),
            "{client}: the preflight, run after the file was written, refuses it: {refused:?}"
        );
    }

    /// Carries `plan` out with `bin` and the sandbox as `reach` says, until every injected
    /// server listed its tools; what the recorders saw.
    fn carry_out(&self, plan: &LaunchPlan, bin: &Path, reach: Reach) -> Vec<Record> {
        let client = plan.client;
        let records = self.root.join("records");
        let mut options = common::carry::reach(
            Options::default()
                .with_handshake_timeout(BOUND)
                .with_die_with_parent(true),
            &[bin, &self.root.join("bin")],
            &[&records],
        );
        match reach {
            Reach::Default => {}
            // As a daemon would that adds a directory holding its worktrees.
            Reach::ParentAllowed => options = options.with_sandbox_read_exec(&self.root),
            Reach::Off => options = options.with_confinement(Confinement::Off),
        }
        let daemon_env = |name: &str| (name == "PATH").then(inherited_path);
        let started = Instant::now();
        let reviewer = launch::launch_with_parent_env(plan, bin, &options, &daemon_env)
            .unwrap_or_else(|e| panic!("{client}: {}", common::carry::chain(&e)));
        let Reviewer::Acp(session) = &reviewer else {
            panic!("{client} runs over ACP")
        };
        while read_records(&records)
            .iter()
            .filter(|r| r.listed_tools)
            .count()
            < plan.servers.len()
        {
            assert!(
                started.elapsed() < BOUND,
                "{client}: not every injected server listed its tools: {:?}; stderr:\n{}",
                read_records(&records),
                session.stderr_tail()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        // Let a server started late show up.
        std::thread::sleep(Duration::from_secs(1));
        reviewer.stop().unwrap();
        let seen = read_records(&records);
        assert_eq!(seen.len(), plan.servers.len(), "{client}: {seen:?}");
        seen
    }
}
