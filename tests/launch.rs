//! The executor (`kcap_mcp_registry::launch`, feature `launch`) and `kcap-mcp-registry
//! launch`, against stand-in clients: a node script that records its argv, environment, cwd
//! and the launch directory's files (and speaks ACP when its stdin is not a terminal), and
//! shell scripts for the failures.
//!
//! - a property over random plans: dirs and files land inside the launch directory with
//!   the plan's modes and contents, the child's environment is exactly the plan's (`env`,
//!   plus this process's values of `env_inherit`), argv and cwd as planned;
//! - hostile plans and launch directories are refused with nothing written, through the
//!   library and through `launch --plan`;
//! - the Cursor, Kiro (ACP) and Antigravity (terminal) plans carried out by a stand-in;
//! - a dialog (`Trust this folder?`) stops the reviewer within the bound, its process group
//!   with it; a client that does not answer or exits is reported, never waited on forever.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::stand_in::{file_mode, sh_script, write_executable};
use kcap_mcp_registry::clients::plan::{EnvVar, Isolation, LaunchPlan, PLAN_VERSION, PlanFile};
use kcap_mcp_registry::launch::{
    self, AcpEvent, ExecError, Options, PathField, Reviewer, TerminalEvent,
};
use proptest::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

// ------------------------------------------------------------------------------------------
// Stand-ins and helpers
// ------------------------------------------------------------------------------------------

/// The node binary, by absolute path: the plans' environments may have no `PATH`.
fn node() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("node"))
        .find(|p| p.is_file())
        .expect("node on PATH (the ACP tests use it too)")
}

/// A node stand-in client that writes `<record>.json` (argv, env, cwd, whether its stdin is
/// a terminal, and every entry under the launch directory, the parent of `HOME`, with its
/// mode and a file's contents); in a terminal it prints a line and exits, else it answers
/// ACP `initialize` and `session/new` (recording the params), and for `session/prompt`
/// (recorded) sends a `session/update`, asks permission for a tool (the answer recorded)
/// and ends the turn.
fn stand_in_client(dir: &Path, record: &Path) -> PathBuf {
    let record = serde_json::to_string(record.to_str().unwrap()).unwrap();
    let body = format!(
        r#"#!{node}
const fs = require("fs");
const path = require("path");
const out = {record};
const walk = (dir, rel, acc) => {{
  for (const name of fs.readdirSync(dir).sort()) {{
    const p = path.join(dir, name), r = rel ? rel + "/" + name : name;
    const st = fs.lstatSync(p);
    const entry = {{ path: r, mode: st.mode & 0o7777, type: st.isSymbolicLink() ? "link" : st.isDirectory() ? "dir" : "file" }};
    if (entry.type === "file") entry.contents = fs.readFileSync(p, "utf8");
    acc.push(entry);
    if (entry.type === "dir") walk(p, r, acc);
  }}
  return acc;
}};
const home = process.env.HOME;
const files = home ? walk(path.dirname(home), "", []) : [];
fs.writeFileSync(out + ".json", JSON.stringify({{ argv: process.argv.slice(2), env: process.env, cwd: process.cwd(), tty: process.stdin.isTTY === true, files }}));
if (process.stdin.isTTY) {{
  process.stdout.write("\x1b[1mstand-in\x1b[0m ran in a terminal\r\n");
  process.exit(0);
}}
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
let buf = "", prompt = null;
process.stdin.on("data", (chunk) => {{
  buf += chunk;
  let i;
  while ((i = buf.indexOf("\n")) >= 0) {{
    const line = buf.slice(0, i).trim();
    buf = buf.slice(i + 1);
    if (!line) continue;
    const m = JSON.parse(line);
    if (m.method === "initialize") {{
      send({{ jsonrpc: "2.0", id: m.id, result: {{ protocolVersion: 1, agentCapabilities: {{}}, authMethods: [] }} }});
    }} else if (m.method === "session/new") {{
      fs.writeFileSync(out + ".session.json", JSON.stringify(m.params));
      send({{ jsonrpc: "2.0", id: m.id, result: {{ sessionId: "stand-in-1" }} }});
    }} else if (m.method === "session/prompt") {{
      prompt = m.id;
      fs.writeFileSync(out + ".prompt.json", JSON.stringify(m.params));
      process.stderr.write("thinking\n");
      send({{ jsonrpc: "2.0", method: "session/update", params: {{ sessionId: "stand-in-1", update: {{ sessionUpdate: "agent_message_chunk", content: {{ type: "text", text: "looking" }} }} }} }});
      send({{ jsonrpc: "2.0", id: "perm-1", method: "session/request_permission", params: {{ sessionId: "stand-in-1", toolCall: {{ toolCallId: "c1", title: "Write notes.md", kind: "edit" }}, options: [{{ optionId: "allow", name: "Allow", kind: "allow_once" }}, {{ optionId: "reject", name: "Reject", kind: "reject_once" }}] }} }});
    }} else if (m.id === "perm-1") {{
      fs.writeFileSync(out + ".permission.json", JSON.stringify(m));
      send({{ jsonrpc: "2.0", id: prompt, result: {{ stopReason: "end_turn" }} }});
    }}
  }}
}});
process.stdin.on("end", () => process.exit(0));
"#,
        node = node().display()
    );
    let path = dir.join("stand-in-client");
    write_executable(&path, body);
    path
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// What the stand-in recorded, once it wrote it (it may still be starting).
fn record(path: &Path) -> Value {
    let file = path.with_extension("json");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !file.exists() {
        assert!(Instant::now() < deadline, "no record at {}", file.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
    read_json(&file)
}

/// The environment the plan gives its client, with this process's values of `env_inherit`.
fn expected_env(plan: &LaunchPlan) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = plan
        .env_inherit
        .iter()
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
        .collect();
    env.extend(plan.env.iter().map(|v| (v.name.clone(), v.value.clone())));
    env
}

fn recorded_env(record: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(record["env"].clone()).unwrap()
}

/// A terminal plan (no `session_new`) for the stand-in, in `launch_dir`.
fn bare_plan(record: &Path, launch_dir: &Path) -> LaunchPlan {
    let dir = launch_dir.display();
    LaunchPlan {
        version: PLAN_VERSION,
        client: "stand-in".into(),
        isolation: Isolation::Verified,
        cwd: None,
        argv: vec![record.display().to_string()],
        env: vec![EnvVar::new("HOME", format!("{dir}/home"))],
        env_inherit: vec!["PATH".into()],
        dirs: vec!["home".into()],
        files: vec![PlanFile {
            path: "home/.config/x.json".into(),
            contents: "{}".into(),
            mode: 0o600,
        }],
        worktree_remove: vec![],
        session_new: None,
        servers: vec![],
    }
}

/// Reads the terminal reviewer's events until it exits (bounded); returns its output.
fn until_exit(reviewer: &mut Reviewer) -> String {
    let Reviewer::Terminal(session) = reviewer else {
        panic!("not a terminal reviewer")
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut output = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "the stand-in did not exit");
        match session.next_event(Duration::from_secs(1)).unwrap() {
            Some(TerminalEvent::Output(bytes)) => output.extend(bytes),
            Some(TerminalEvent::Exited(status)) => {
                assert!(status.is_some_and(|s| s.success()), "{status:?}");
                return String::from_utf8_lossy(&output).into_owned();
            }
            _ => {}
        }
    }
}

/// Processes whose process group is `pgid` (from /proc).
fn group_members(pgid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …: comm may hold spaces, so split after the last ')'.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        if fields.get(2).and_then(|f| f.parse::<u32>().ok()) == Some(pgid) {
            found.push(pid);
        }
    }
    found
}

/// Every path under `dir`, relative, sorted (links not followed).
fn tree(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            out.insert(path.strip_prefix(dir).unwrap().display().to_string());
            if entry.file_type().unwrap().is_dir() {
                todo.push(path);
            }
        }
    }
    out
}

// ------------------------------------------------------------------------------------------
// The property over random plans
// ------------------------------------------------------------------------------------------

fn dir_path() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec!["a", "b", "c.d"]), 1..4)
        .prop_map(|c| c.join("/"))
}

/// Names from this process's environment (set here or not) the plan may inherit.
const INHERITABLE: [&str; 5] = [
    "PATH",
    "TERM",
    "LANG",
    "CARGO_PKG_NAME",
    "KCAP_TEST_NEVER_SET",
];

prop_compose! {
    fn random_plan()(
        dirs in prop::collection::vec(dir_path(), 0..4),
        files in prop::collection::vec(
            (prop::option::of(dir_path()), 0u32..=0o777, "[^\u{0}]{0,40}"),
            0..5,
        ),
        env in prop::collection::btree_map("[A-Z][A-Z0-9_]{0,6}", "[^\u{0}]{0,24}", 0..6),
        inherit in prop::sample::subsequence(INHERITABLE.to_vec(), 0..=INHERITABLE.len()),
        args in prop::collection::vec("[^\u{0}]{0,12}", 0..3),
        in_worktree in any::<bool>(),
        existing_empty in any::<bool>(),
    ) -> (LaunchPlan, bool, bool) {
        let files = files
            .into_iter()
            .enumerate()
            .map(|(i, (dir, mode, contents))| PlanFile {
                path: match dir { Some(d) => format!("{d}/f{i}"), None => format!("f{i}") },
                contents,
                mode,
            })
            .collect();
        let env = env
            .into_iter()
            .filter(|(n, _)| !inherit.contains(&n.as_str()))
            .map(|(n, v)| EnvVar::new(n, v))
            .collect();
        let plan = LaunchPlan {
            version: PLAN_VERSION,
            client: "stand-in".into(),
            isolation: Isolation::Verified,
            cwd: None,
            argv: args,
            env,
            env_inherit: inherit.into_iter().map(String::from).collect(),
            dirs,
            files,
            worktree_remove: vec![],
            session_new: None,
            servers: vec![],
        };
        (plan, in_worktree, existing_empty)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_random_plan_is_carried_out_exactly((plan, in_worktree, existing_empty) in random_plan()) {
        let tmp = TempDir::new().unwrap();
        let record_base = tmp.path().join("record");
        let client = stand_in_client(tmp.path(), &record_base);
        let launch_dir = tmp.path().join("launch");
        if existing_empty {
            std::fs::create_dir(&launch_dir).unwrap();
        }
        let worktree = tmp.path().join("worktree");
        std::fs::create_dir(&worktree).unwrap();
        let mut plan = plan;
        // The stand-in finds the launch directory as HOME's parent.
        plan.env.retain(|v| v.name != "HOME");
        plan.env.push(EnvVar::new("HOME", launch_dir.join("home").display().to_string()));
        plan.env_inherit.retain(|n| n != "HOME");
        plan.argv.insert(0, record_base.display().to_string());
        plan.cwd = in_worktree.then(|| worktree.display().to_string());

        let mut reviewer = launch::launch(&plan, &launch_dir, &client, &Options::default()).unwrap();
        until_exit(&mut reviewer);
        let rec = record(&record_base);

        // Exactly the plan's environment, values byte for byte; argv and cwd as planned.
        prop_assert_eq!(recorded_env(&rec), expected_env(&plan));
        prop_assert_eq!(&rec["argv"], &serde_json::to_value(&plan.argv).unwrap());
        let cwd = plan.cwd.clone().map_or(launch_dir.clone(), PathBuf::from);
        prop_assert_eq!(rec["cwd"].as_str().unwrap(), cwd.to_str().unwrap());
        prop_assert_eq!(rec["tty"].as_bool(), Some(true));

        // Every dir (0700) and file (its mode, its contents), and nothing else.
        let mut wanted_dirs: BTreeSet<String> = BTreeSet::new();
        for path in plan.dirs.iter().chain(plan.files.iter().map(|f| &f.path)) {
            for (i, _) in path.match_indices('/') {
                wanted_dirs.insert(path[..i].to_owned());
            }
        }
        wanted_dirs.extend(plan.dirs.iter().cloned());
        prop_assert_eq!(file_mode(&launch_dir), 0o700);
        for dir in &wanted_dirs {
            let meta = std::fs::symlink_metadata(launch_dir.join(dir)).unwrap();
            prop_assert!(meta.is_dir());
            prop_assert_eq!(file_mode(&launch_dir.join(dir)), 0o700, "{}", dir);
        }
        for file in &plan.files {
            let path = launch_dir.join(&file.path);
            prop_assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
            prop_assert_eq!(file_mode(&path), file.mode, "{}", file.path);
            prop_assert_eq!(std::fs::read_to_string(&path).unwrap(), file.contents.clone());
        }
        let all: BTreeSet<String> = wanted_dirs
            .iter()
            .cloned()
            .chain(plan.files.iter().map(|f| f.path.clone()))
            .collect();
        prop_assert_eq!(tree(&launch_dir), all);

        reviewer.stop().unwrap();
        prop_assert!(!launch_dir.exists(), "the launch directory is removed on stop");
    }
}

// ------------------------------------------------------------------------------------------
// Hostile plans and launch directories: refused, nothing written
// ------------------------------------------------------------------------------------------

/// A machine for one hostile case: a launch directory path, a worktree, and a directory
/// outside both that a link may point at.
struct Hostile {
    tmp: TempDir,
}

impl Hostile {
    fn new() -> Hostile {
        let tmp = TempDir::new().unwrap();
        for d in ["worktree", "outside"] {
            std::fs::create_dir(tmp.path().join(d)).unwrap();
        }
        Hostile { tmp }
    }
    fn launch_dir(&self) -> PathBuf {
        self.tmp.path().join("launch")
    }
    fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }
    fn plan(&self) -> LaunchPlan {
        let mut plan = bare_plan(Path::new("/nonexistent/record"), &self.launch_dir());
        plan.cwd = Some(self.tmp.path().join("worktree").display().to_string());
        plan
    }
    /// Everything under the machine, to compare before and after.
    fn snapshot(&self) -> BTreeSet<String> {
        tree(self.tmp.path())
    }
}

/// Each hostile case: its name, how it sets the machine up and changes the plan, and what
/// the refusal must be.
type Case = (
    &'static str,
    fn(&Hostile, &mut LaunchPlan),
    fn(&ExecError) -> bool,
);

fn hostile_cases() -> Vec<Case> {
    vec![
        (
            "a `..` dir",
            |_, p| p.dirs.push("home/../../outside".into()),
            |e| {
                matches!(
                    e,
                    ExecError::BadPath {
                        field: PathField::Dirs,
                        ..
                    }
                )
            },
        ),
        (
            "an absolute file path",
            |h, p| p.files[0].path = h.outside().join("x").display().to_string(),
            |e| {
                matches!(
                    e,
                    ExecError::BadPath {
                        field: PathField::Files,
                        ..
                    }
                )
            },
        ),
        (
            "a `..` worktree path",
            |_, p| p.worktree_remove.push("../outside".into()),
            |e| {
                matches!(
                    e,
                    ExecError::BadPath {
                        field: PathField::WorktreeRemove,
                        ..
                    }
                )
            },
        ),
        (
            "an empty component",
            |_, p| p.files[0].path = "home//x".into(),
            |e| matches!(e, ExecError::BadPath { .. }),
        ),
        (
            "a symlink planted in the launch directory",
            |h, _| {
                std::fs::create_dir(h.launch_dir()).unwrap();
                std::os::unix::fs::symlink(h.outside(), h.launch_dir().join("home")).unwrap();
            },
            |e| matches!(e, ExecError::LaunchDirNotEmpty { .. }),
        ),
        (
            "a launch directory that is a symlink",
            |h, _| std::os::unix::fs::symlink(h.outside(), h.launch_dir()).unwrap(),
            |e| matches!(e, ExecError::LaunchDirNotDir { .. }),
        ),
        (
            "a worktree path through a symlink",
            |h, p| {
                std::fs::write(h.outside().join("settings.json"), "{}").unwrap();
                let link = h.tmp.path().join("worktree/.gemini");
                std::os::unix::fs::symlink(h.outside(), link).unwrap();
                p.worktree_remove.push(".gemini/settings.json".into());
            },
            |e| {
                matches!(
                    e,
                    ExecError::Symlink {
                        field: PathField::WorktreeRemove,
                        ..
                    }
                )
            },
        ),
        (
            "a plan of version 2",
            |_, p| p.version = 2,
            |e| matches!(e, ExecError::Version { found: 2, .. }),
        ),
        (
            "a plan of version 4",
            |_, p| p.version = 4,
            |e| matches!(e, ExecError::Version { found: 4, .. }),
        ),
        (
            "a setuid file mode",
            |_, p| p.files[0].mode = 0o4755,
            |e| matches!(e, ExecError::BadMode { .. }),
        ),
        (
            "a variable both set and inherited",
            |_, p| p.env_inherit.push("HOME".into()),
            |e| matches!(e, ExecError::BadEnv { .. }),
        ),
        (
            "a file that is also a parent",
            |_, p| p.dirs.push("home/.config/x.json/y".into()),
            |e| {
                matches!(
                    e,
                    ExecError::BadPath {
                        field: PathField::Files,
                        ..
                    }
                )
            },
        ),
    ]
}

/// Whether this process runs as root (then it can give a directory away).
fn root() -> bool {
    let probe = TempDir::new().unwrap();
    std::fs::metadata(probe.path()).unwrap().uid() == 0
}

#[test]
fn hostile_plans_are_refused_by_the_library_with_nothing_written() {
    for (name, setup, expected) in hostile_cases() {
        let h = Hostile::new();
        let mut plan = h.plan();
        setup(&h, &mut plan);
        let before = h.snapshot();
        let e = launch::launch(
            &plan,
            &h.launch_dir(),
            Path::new("/bin/true"),
            &Options::default(),
        )
        .expect_err(name);
        assert!(expected(&e), "{name}: {e:?}");
        assert!(e.to_string().starts_with("check the plan: "), "{name}: {e}");
        assert_eq!(h.snapshot(), before, "{name}: something was written");
        assert!(launch::check(&plan, &h.launch_dir()).is_err(), "{name}");
    }
}

#[test]
fn a_launch_directory_of_another_user_is_refused() {
    if !root() {
        eprintln!("not root: cannot give a directory to another user; skipped");
        return;
    }
    let h = Hostile::new();
    std::fs::create_dir(h.launch_dir()).unwrap();
    std::os::unix::fs::chown(h.launch_dir(), Some(65534), Some(65534)).unwrap();
    let before = h.snapshot();
    let e = launch::launch(
        &h.plan(),
        &h.launch_dir(),
        Path::new("/bin/true"),
        &Options::default(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            ExecError::LaunchDirNotOwned {
                owner: 65534,
                uid: 0,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(h.snapshot(), before);
    assert!(e.to_string().contains("belongs to uid 65534"), "{e}");
}

#[cfg(feature = "cli")]
#[test]
fn hostile_plans_are_refused_by_launch_plan_with_nothing_written() {
    let mut cases = hostile_cases();
    if root() {
        cases.push((
            "a launch directory of another user",
            |h, _| {
                std::fs::create_dir(h.launch_dir()).unwrap();
                std::os::unix::fs::chown(h.launch_dir(), Some(65534), Some(65534)).unwrap();
            },
            |_| true,
        ));
    }
    for (name, setup, _) in cases {
        let h = Hostile::new();
        let mut plan = h.plan();
        setup(&h, &mut plan);
        let file = h.tmp.path().join("plan.json");
        std::fs::write(&file, plan.to_json()).unwrap();
        let before = h.snapshot();
        let launch_dir = h.launch_dir();
        let r = common::run(&[
            "launch",
            "--plan",
            file.to_str().unwrap(),
            "--launch-dir",
            launch_dir.to_str().unwrap(),
            "--client-bin",
            "/bin/true",
        ]);
        assert_eq!(r.code, 1, "{name}: {r:?}");
        assert!(
            r.stderr.starts_with("error: check the plan: "),
            "{name}: {r:?}"
        );
        assert_eq!(r.stdout, "", "{name}");
        assert_eq!(h.snapshot(), before, "{name}: something was written");
    }
}

#[cfg(feature = "cli")]
#[test]
fn a_version_2_plan_is_refused_by_its_version_before_its_shape() {
    let h = Hostile::new();
    let mut plan: Value = serde_json::to_value(h.plan()).unwrap();
    plan["version"] = 2.into();
    plan["env_remove"] = serde_json::json!(["KCAP_FLOW_AGENT_ID"]);
    let file = h.tmp.path().join("plan.json");
    std::fs::write(&file, plan.to_string()).unwrap();
    let before = h.snapshot();
    let launch_dir = h.launch_dir();
    let r = common::run(&[
        "launch",
        "--plan",
        file.to_str().unwrap(),
        "--launch-dir",
        launch_dir.to_str().unwrap(),
        "--client-bin",
        "/bin/true",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains("the plan is version 2; this executor carries out version 3"),
        "{r:?}"
    );
    assert_eq!(h.snapshot(), before);
}
