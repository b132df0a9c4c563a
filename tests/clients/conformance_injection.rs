//! The registry's injection data on the real clients, Claude Code (2.1.197, and 2.1.332
//! with `KCAP_CLAUDE_BIN=$KCAP_CLAUDE_NEXT_BIN`) and Codex CLI (0.169.0, and 0.171.0 with
//! `KCAP_CODEX_BIN=$KCAP_CODEX_NEXT_BIN`), issue 13: a brokered launch of a borrowed snapshot, allowlisting `kcap-review`,
//! starts exactly three servers, the result channel, `kcap-review` and
//! `kcap-review-context`, each with exactly its env; `KCAP_URL` reaches `kcap-review` only.
//!
//! Each launch is the strict plan of the public call (`Client::plan`, `tests/common/plan.rs`),
//! its files written into its launch directory. Oracles, offline (no login, no model, no
//! network), as in `tests/clients/conformance/`:
//! - Claude Code: `claude <plan argv> -- <prompt>` with stdin from `/dev/null` and the API
//!   at a dead local port starts every server of the `--mcp-config` file; once the recorders
//!   have settled the oracle kills it (`tests/clients/claude_oracle`: without a prompt
//!   2.1.197 started them before it exited at the missing prompt, 2.1.328 and 2.1.332 exit
//!   first and start none). `kcap_bin` is a recorder script that writes its argv and its
//!   whole environment.
//! - Codex: `codex <plan argv> mcp list --json`, with the plan's environment (its
//!   `CODEX_HOME` holds the `config.toml` with the servers' `env`), prints the effective
//!   server table.
//!
//! Each run gets a fresh temp `HOME` (and `CODEX_HOME`) and cwd, a cleared environment, and
//! the shared harness (`tests/common/peers.rs`): stdin from `/dev/null`, a timeout that kills
//! the client's own process group, and a missing client reported as ignored (a failure under
//! `KCAP_REQUIRE_PEERS=1`).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use common::peers::{inherited_path, peer, run};
use common::stand_in::write_executable;

use crate::claude_oracle;

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::LaunchPlan;
use kcap_mcp_registry::{LaunchContext, Policy, ResultDelivery, Snapshot};
use serde_json::{Value, json};

const SERVER_URL: &str = "http://127.0.0.1:5100";
const CAPABILITY_URL: &str = "http://127.0.0.1:7000/cap-t0k3n";
const REVIEW_CONTEXT_URL: &str = "http://127.0.0.1:7001/review-context/workspace-mcp-configs";
const AGENT: &str = "agent-13";

/// The launch under test: brokered result delivery, a borrowed snapshot, `kcap-review`
/// allowlisted (with the reserved names too, which must change nothing), in the launch
/// directory `launch_dir`.
fn launch(kcap: &Path, launch_dir: &Path) -> LaunchContext {
    LaunchContext {
        launch_dir: Some(launch_dir.to_str().unwrap().into()),
        server_url: Some(SERVER_URL.into()),
        kcap_bin: Some(kcap.to_str().unwrap().into()),
        agent_id: AGENT.into(),
        mcp_allowlist: Some(vec![
            Some("kcap-review".into()),
            Some("kcap-review-context".into()),
            Some("kcap-flow-result".into()),
        ]),
        result_delivery: ResultDelivery::Brokered {
            capability_url: CAPABILITY_URL.into(),
        },
        snapshot: Snapshot::Borrowed {
            review_context_url: Some(REVIEW_CONTEXT_URL.into()),
        },
        ..LaunchContext::default()
    }
}

/// `client`'s strict plan of `ctx` (the public call), its files written into its launch
/// directory.
fn plan(client: Client, ctx: &LaunchContext) -> LaunchPlan {
    let plan = common::plan::of(client, ctx, Policy::Strict)
        .unwrap_or_else(|e| panic!("{client} plan: {e}"));
    common::plan::write_files(&plan);
    plan
}

/// (args after the kcap binary, exact env) of the three servers, as the registry data says.
fn expected() -> BTreeSet<(Vec<String>, BTreeMap<String, String>)> {
    let env = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let args = |a: &[&str]| -> Vec<String> { a.iter().map(|s| s.to_string()).collect() };
    [
        (
            args(&["mcp", "flow-result"]),
            env(&[
                ("KCAP_FLOW_CAPABILITY_URL", CAPABILITY_URL),
                ("KCAP_FLOW_AGENT_ID", AGENT),
            ]),
        ),
        (args(&["mcp", "review"]), env(&[("KCAP_URL", SERVER_URL)])),
        (
            args(&["mcp", "review"]),
            env(&[
                ("KCAP_REVIEW_CONTEXT_MODE", "1"),
                ("KCAP_REVIEW_CONTEXT_URL", REVIEW_CONTEXT_URL),
            ]),
        ),
    ]
    .into_iter()
    .collect()
}

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        claude_starts_the_result_channel_one_allowlisted_server_and_the_review_context,
        codex_enables_the_result_channel_one_allowlisted_server_and_the_review_context,
    ]
}

fn claude_starts_the_result_channel_one_allowlisted_server_and_the_review_context() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let records = scratch.path().join("records");
    std::fs::create_dir(&records).unwrap();
    let kcap = scratch.path().join("kcap");
    // The recorder: argv (NUL-separated) and the whole environment, then exit at once.
    let script = format!(
        "#!/bin/sh\nd='{}'\n: > \"$d/$$.start\"\nprintf '%s\\0' \"$@\" > \"$d/$$.argv\"\n\
         env -0 > \"$d/$$.env\"\n: > \"$d/$$.done\"\nexit 0\n",
        records.display()
    );
    write_executable(&kcap, script);

    let ctx = launch(&kcap, &scratch.path().join("launch"));
    let args = plan(Client::Claude, &ctx).argv;
    let parent_env: [(&str, std::ffi::OsString); 7] = [
        ("PATH", inherited_path()),
        ("HOME", home.path().into()),
        ("IS_SANDBOX", "1".into()),
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9".into()),
        ("HTTPS_PROXY", "http://127.0.0.1:9".into()),
        ("HTTP_PROXY", "http://127.0.0.1:9".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
    ];
    let mut cmd = Command::new(&bin);
    cmd.env_clear()
        .envs(parent_env.iter().cloned())
        .args(&args)
        .args(["--", claude_oracle::PROMPT])
        .current_dir(project.path());
    claude_oracle::run_until_recorded(cmd, &records, &scratch.path().join("claude.log"));
    let added = claude_oracle::added_env(&claude_oracle::version(&bin), true);
    let pids: BTreeSet<String> = std::fs::read_dir(&records)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".done").map(str::to_string)
        })
        .collect();

    let ours: BTreeSet<&str> = [
        "KCAP_URL",
        "KCAP_FLOW_CAPABILITY_URL",
        "KCAP_FLOW_AGENT_ID",
        "KCAP_REVIEW_CONTEXT_MODE",
        "KCAP_REVIEW_CONTEXT_URL",
    ]
    .into();
    let mut servers = BTreeSet::new();
    for pid in &pids {
        let read = |ext: &str| std::fs::read(records.join(format!("{pid}.{ext}"))).unwrap();
        let argv: Vec<String> = read("argv")
            .strip_suffix(b"\0")
            .unwrap()
            .split(|&b| b == 0)
            .map(|a| String::from_utf8(a.to_vec()).unwrap())
            .collect();
        let env: BTreeMap<String, String> = read("env")
            .strip_suffix(b"\0")
            .unwrap()
            .split(|&b| b == 0)
            .map(|kv| {
                let kv = String::from_utf8_lossy(kv);
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect();
        // Nothing but Claude Code's own environment, what it adds, `PWD` and the entry's env.
        let extra: Vec<&String> = env
            .keys()
            .filter(|k| {
                !parent_env.iter().any(|(p, _)| p == k)
                    && !added.contains(&k.as_str())
                    && *k != "PWD"
                    && !ours.contains(k.as_str())
            })
            .collect();
        assert!(
            extra.is_empty(),
            "unexpected variables {extra:?} for {argv:?}"
        );
        let kcap_env = env
            .into_iter()
            .filter(|(k, _)| ours.contains(k.as_str()))
            .collect();
        // Distinct servers: a recorder that exits at once may be started again.
        servers.insert((argv, kcap_env));
    }
    assert_eq!(servers, expected(), "the servers Claude Code started");
    assert!(
        servers
            .iter()
            .filter(|(_, env)| env.contains_key("KCAP_URL"))
            .all(|(args, env)| args == &["mcp", "review"] && env.len() == 1),
        "KCAP_URL reaches kcap-review only"
    );
}

fn codex_enables_the_result_channel_one_allowlisted_server_and_the_review_context() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let launch_dir = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let kcap = Path::new("/opt/kcap/bin/kcap");
    // The plan's environment: its `HOME` and `CODEX_HOME` in the launch directory.
    let plan = plan(Client::Codex, &launch(kcap, launch_dir.path()));
    let mut cmd = Command::new(&bin);
    cmd.env_clear()
        .env("PATH", inherited_path())
        .envs(plan.env.iter().map(|v| (&v.name, &v.value)))
        .current_dir(cwd.path())
        .args(common::plan::argv_before_prompt(&plan))
        .args(["mcp", "list", "--json"]);
    let out = run(cmd, "codex mcp list --json");
    assert!(out.status.success(), "codex failed: {}", out.stderr);
    let table: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut table = table.as_array().expect("an array of servers").clone();
    // The strict plan hides the namespace of Codex's task-thread tools behind a disabled
    // server of that name (`clients::codex::tools`): listed, never started.
    let hidden = table.iter().position(|s| s["name"] == "codex_tui");
    let hidden = table.remove(hidden.expect("the strict plan's `codex_tui`"));
    assert_eq!(
        (&hidden["enabled"], &hidden["transport"]["command"]),
        (&json!(false), &json!("/bin/false"))
    );
    let names: Vec<&str> = table.iter().map(|s| s["name"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        ["kcap-flow-result", "kcap-review", "kcap-review-context"]
    );
    let mut servers = BTreeSet::new();
    for s in &table {
        assert_eq!(s["enabled"], json!(true), "{s}");
        let transport = &s["transport"];
        assert_eq!(transport["type"], "stdio", "{s}");
        assert_eq!(transport["command"], kcap.to_str().unwrap(), "{s}");
        assert_eq!(transport["env_vars"], json!([]), "{s}");
        let args: Vec<String> = serde_json::from_value(transport["args"].clone()).unwrap();
        let env: BTreeMap<String, String> =
            serde_json::from_value(transport["env"].clone()).unwrap();
        servers.insert((args, env));
    }
    assert_eq!(servers, expected(), "the servers Codex enables");
    let url_holders: Vec<&str> = table
        .iter()
        .filter(|s| s["transport"]["env"].get("KCAP_URL").is_some())
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        url_holders,
        ["kcap-review"],
        "KCAP_URL reaches kcap-review only"
    );
}
