//! Carrying a plan out as a daemon would, driving Copilot CLI over ACP through a prompt,
//! and the verdict (`tests/clients/isolation_copilot.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::harness::{COPILOT_OWN, MARKER, SETTLE, Setup, TIMEOUT};
use crate::common::carry::{self, AcpRun, Timing, Until};
use crate::common::etc::{self, Etc};
use crate::common::records::{Known, Record};
use kcap_mcp_registry::clients::plan::LaunchPlan;
use serde_json::Value;

/// The servers `plan` injects, as the records would show them (argv with the command
/// first, `KCAP_*` env), from its `--additional-mcp-config` JSON.
pub fn injected(plan: &LaunchPlan) -> BTreeSet<Known> {
    let json = crate::common::records::argv_file(plan, "--additional-mcp-config");
    let config: Value = serde_json::from_str(json).unwrap();
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
    /// `<dir>/u` ([`etc::wrapper`]).
    pub overlay: Option<&'a Path>,
    /// The servers to wait for (default: every injected one).
    pub expect: Option<BTreeSet<Known>>,
    /// Stages files under `late/` in the test directory; they are copied over the test
    /// directory after the executor cleaned the worktree, just before the client starts (a
    /// wrapper script as the executor's client binary).
    pub late: Option<&'a dyn Fn()>,
    /// Where the prompt's turn ends, asked while the client runs (default: its answer).
    pub until: Option<&'a dyn Fn() -> bool>,
}

impl How<'_> {
    /// As the plan says.
    pub fn plan() -> How<'static> {
        How {
            worktree: Worktree::Cleaned,
            overlay: None,
            expect: None,
            late: None,
            until: None,
        }
    }
}

/// Carries `plan` out with the executor, under `daemon` (its environment), as `how` says:
/// Copilot through `initialize`, `session/new` and a prompt answered; returns what the
/// recorders and the model saw.
pub fn carry_out(
    setup: &Setup,
    bin: &Path,
    plan: &LaunchPlan,
    daemon: &BTreeMap<String, String>,
    how: &How<'_>,
) -> Outcome {
    let mut plan = plan.clone();
    if how.worktree == Worktree::AsIs {
        plan.worktree_remove.clear();
    }
    let mut client = bin.to_path_buf();
    if let Some(late) = how.late {
        late();
        let step = format!(
            "/usr/bin/cp -R {} {}",
            carry::sh_quote(setup.path("late/.").to_str().unwrap()),
            carry::sh_quote(setup.path("").to_str().unwrap())
        );
        client = carry::before_start(&setup.path("bin"), "copilot-late", &step, &client);
    }
    if let Some(dir) = how.overlay {
        client = etc::wrapper(
            &setup.path("bin"),
            "copilot-etc",
            Etc::Writable(dir),
            &client,
        );
    }
    let records = setup.path("records");
    // Copilot CLI's package cache, where the plan points it (`COPILOT_PKG_CACHE_HOME`): its
    // npm launcher runs the package from there, unpacking it on a first run.
    let cache = PathBuf::from(
        plan.env_value("COPILOT_PKG_CACHE_HOME")
            .expect("the plan points Copilot CLI at the package cache"),
    );
    // The installed package a test's own cache links to (`KCAP_COPILOT_CACHE`).
    let shared = PathBuf::from(std::env::var_os("KCAP_COPILOT_CACHE").unwrap_or_default());
    let seen = AcpRun {
        plan: &plan,
        launch_dir: &setup.path("launch"),
        client_bin: &client,
        client: bin,
        // The wrapper mounts the `/etc` overlay (a confined process cannot mount) or plants
        // files in the worktree after the executor cleaned it (the reviewer may not write
        // there).
        confined: how.overlay.is_none() && how.late.is_none(),
        executable: &[&setup.path("bin"), &shared],
        writable: &[&cache, &setup.path("marks")],
        daemon_env: daemon,
        records: &records,
        wanted: &how.expect.clone().unwrap_or_else(|| injected(&plan)),
        timing: Timing {
            timeout: TIMEOUT,
            settle: SETTLE,
        },
        prompt: Some((
            "Review the change.",
            how.until.map_or(Until::Answered, Until::Holds),
        )),
    }
    .carry_out();
    Outcome {
        records: seen.records,
        model: setup.model.bodies(),
        calls: calls(&records),
        stderr: seen.stderr,
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
