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

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::carry::terminal_plan;
use common::stand_in::{file_mode, sh_script, write_executable};
use kcap_mcp_registry::clients::plan::{
    Dialog, EnvVar, Isolation, LaunchPlan, PLAN_VERSION, PlanFile, Sandbox, pr_config_note,
};
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

/// The stand-in of [`stand_in_client`] in `dir`, recording under `dir/records` (created),
/// and its records' base: the executor's sandbox (on by default) lets it write only there
/// beyond its launch directory ([`recording`]).
fn recording_stand_in(dir: &Path) -> (PathBuf, PathBuf) {
    let records = dir.join("records");
    std::fs::create_dir(&records).unwrap();
    let base = records.join("record");
    (stand_in_client(dir, &base), base)
}

/// The default options, with the records of [`recording_stand_in`] in `dir` inside the
/// sandbox's boundary.
fn recording(dir: &Path) -> Options {
    Options::default().with_sandbox_read_write(dir.join("records"))
}

/// A node stand-in client that writes `<record>.json` (argv, env, cwd, whether its stdin is
/// a terminal, and every entry under the launch directory, the parent of `HOME`, with its
/// mode and, where its owner may read it, a file's contents); in a terminal it prints a line and exits, else it answers
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
    // What the client can read: it holds no capability (not even as root), so a file the
    // plan made without its owner's read bit is not its to read.
    if (entry.type === "file" && (st.mode & 0o400)) entry.contents = fs.readFileSync(p, "utf8");
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

/// A terminal plan (no `session_new`) for the stand-in, in `launch_dir`: a Codex plan's
/// shape (the client only names the reviewer in messages).
pub(crate) fn bare_plan(record: &Path, launch_dir: &Path) -> LaunchPlan {
    LaunchPlan {
        argv: vec![record.display().to_string()],
        env_inherit: vec!["PATH".into()],
        files: vec![PlanFile {
            path: "home/.config/x.json".into(),
            contents: "{}".into(),
            mode: 0o600,
        }],
        ..terminal_plan(kcap_mcp_registry::clients::Client::Codex, launch_dir)
    }
}

/// Reads the terminal reviewer's events until it exits (bounded); returns its output.
fn until_exit(reviewer: &mut Reviewer) -> String {
    let (output, status) = common::carry::until_exit(reviewer, Duration::from_secs(30));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    output
}

/// Live processes (not zombies) whose process group is `pgid`, after at most 5 s for the
/// killed ones to go.
pub(crate) fn group_members(pgid: u32) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let found = group_members_now(pgid);
        if found.is_empty() || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn group_members_now(pgid: u32) -> Vec<u32> {
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
        let zombie = fields.first() == Some(&"Z");
        if !zombie && fields.get(2).and_then(|f| f.parse::<u32>().ok()) == Some(pgid) {
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
            client: kcap_mcp_registry::clients::Client::Gemini,
            isolation: Isolation::Verified {
            proven_on: Vec::new(),
        },
            cwd: None,
            // Set to the test's launch directory once it is made.
            launch_dir: String::new(),
            argv: args,
            env,
            env_inherit: inherit.into_iter().map(String::from).collect(),
            dirs,
            files,
            worktree_remove: vec![],
            pr_config: None,
            session_new: None,
            typed_prompt: None,
            servers_ready: None,
            dialogs: Vec::new(),
            unasked: Vec::new(),
            servers: vec![],
            // Set with the launch directory.
            sandbox: Sandbox::default(),
            door: None,
        };
        (plan, in_worktree, existing_empty)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_random_plan_is_carried_out_exactly((plan, in_worktree, existing_empty) in random_plan()) {
        let tmp = TempDir::new().unwrap();
        let (client, record_base) = recording_stand_in(tmp.path());
        let launch_dir = tmp.path().join("launch");
        if existing_empty {
            std::fs::create_dir(&launch_dir).unwrap();
        }
        let worktree = tmp.path().join("worktree");
        std::fs::create_dir(&worktree).unwrap();
        let mut plan = plan;
        plan.launch_dir = launch_dir.display().to_string();
        // The stand-in finds the launch directory as HOME's parent.
        plan.env.retain(|v| v.name != "HOME");
        plan.env.push(EnvVar::new("HOME", launch_dir.join("home").display().to_string()));
        plan.env_inherit.retain(|n| n != "HOME");
        plan.argv.insert(0, record_base.display().to_string());
        plan.cwd = in_worktree.then(|| worktree.display().to_string());
        plan.sandbox = Sandbox::new(&plan.launch_dir, plan.cwd.as_deref());

        let mut reviewer = launch::launch(&plan, &client, &recording(tmp.path())).unwrap();
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
            "a plan of version 4",
            |_, p| p.version = 4,
            |e| matches!(e, ExecError::Version { found: 4, .. }),
        ),
        (
            "a plan of the next version",
            |_, p| p.version = PLAN_VERSION + 1,
            |e| matches!(e, ExecError::Version { found, .. } if *found == PLAN_VERSION + 1),
        ),
        (
            "a relative sandbox path",
            |_, p| p.sandbox.read_write.push("records".into()),
            |e| {
                matches!(
                    e,
                    ExecError::BadPath {
                        field: PathField::Sandbox,
                        ..
                    }
                )
            },
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
        let e = launch::launch(&plan, Path::new("/bin/true"), &Options::default()).expect_err(name);
        assert!(expected(&e), "{name}: {e:?}");
        assert!(e.to_string().starts_with("check the plan: "), "{name}: {e}");
        assert_eq!(h.snapshot(), before, "{name}: something was written");
        assert!(launch::check(&plan).is_err(), "{name}");
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
    let e = launch::launch(&h.plan(), Path::new("/bin/true"), &Options::default()).unwrap_err();
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

/// `kcap-mcp-registry launch --plan FILE --launch-dir DIR --client-bin BIN`, then `more`.
#[cfg(feature = "cli")]
pub(crate) fn launch_plan(
    file: &Path,
    launch_dir: &Path,
    bin: &Path,
    more: &[&str],
) -> common::Run {
    let mut args = vec![
        "launch",
        "--plan",
        file.to_str().unwrap(),
        "--launch-dir",
        launch_dir.to_str().unwrap(),
        "--client-bin",
        bin.to_str().unwrap(),
    ];
    args.extend(more);
    common::run(&args)
}

/// The executor takes the launch directory from the plan; the CLI refuses a `--launch-dir`
/// that is not the plan's.
#[cfg(feature = "cli")]
#[test]
fn launch_plan_refuses_another_launch_dir_than_the_plans() {
    let h = Hostile::new();
    let mut plan = h.plan();
    plan.launch_dir = h.outside().display().to_string();
    let file = h.tmp.path().join("plan.json");
    std::fs::write(&file, plan.to_json()).unwrap();
    let before = h.snapshot();
    let launch_dir = h.launch_dir();
    let r = launch_plan(&file, &launch_dir, Path::new("/bin/true"), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(
        r.stderr,
        format!(
            "error: the plan was rendered for launch directory {}, not {}: its HOME and client \
             directories point there; render it again for {}\n",
            h.outside().display(),
            launch_dir.display(),
            launch_dir.display()
        )
    );
    assert_eq!(h.snapshot(), before, "something was written");
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
        let r = launch_plan(&file, &launch_dir, Path::new("/bin/true"), &[]);
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
    let r = launch_plan(&file, &launch_dir, Path::new("/bin/true"), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains(&format!(
            "the plan is version 2; this executor carries out version {PLAN_VERSION}"
        )),
        "{r:?}"
    );
    assert_eq!(h.snapshot(), before);
}

// ------------------------------------------------------------------------------------------
// Cursor, Kiro and Antigravity plans, carried out by a stand-in client
// ------------------------------------------------------------------------------------------

mod facts_only {
    use super::*;
    use kcap_mcp_registry::clients::antigravity::antigravity_plan;
    use kcap_mcp_registry::clients::cursor::cursor_plan;
    use kcap_mcp_registry::clients::dispatch::UnverifiedIsolation;
    use kcap_mcp_registry::clients::kiro::kiro_plan;
    use kcap_mcp_registry::clients::plan::LaunchId;
    use kcap_mcp_registry::{LaunchContext, Policy, ResultDelivery};

    pub const PROMPT: &str = "Review PR 42";

    /// A launch of `kcap-review` into `tmp`: worktree `tmp/worktree`, launch directory
    /// `tmp/launch`, brokered result delivery (Antigravity needs it).
    pub fn ctx(tmp: &Path) -> LaunchContext {
        LaunchContext {
            server_url: Some("http://127.0.0.1:9/kcap".into()),
            kcap_bin: Some("/opt/kcap/bin/kcap".into()),
            agent_id: "agent-7".into(),
            mcp_allowlist: Some(vec![Some("kcap-review".into())]),
            prompt: Some(PROMPT.into()),
            worktree: Some(tmp.join("worktree").display().to_string()),
            launch_dir: Some(tmp.join("launch").display().to_string()),
            result_delivery: ResultDelivery::from_capability_url(Some(
                "http://127.0.0.1:9/cap/t0k3n".into(),
            )),
            ..LaunchContext::default()
        }
    }

    pub fn plan(client: &str, ctx: &LaunchContext) -> LaunchPlan {
        let r = ctx.resolve(Policy::Lenient).unwrap();
        let id = LaunchId::from_hex("0123456789abcdef").unwrap();
        match client {
            "cursor" => cursor_plan(ctx, &r, UnverifiedIsolation::Allow),
            "kiro" => kiro_plan(ctx, &r, &id),
            "antigravity" => antigravity_plan(ctx, &r),
            _ => unreachable!(),
        }
        .unwrap()
    }
}

/// Sets up the worktree with each of the plan's `worktree_remove` paths (a directory with a
/// file in it) and a file the plan does not name.
fn hostile_worktree(plan: &LaunchPlan) {
    let worktree = Path::new(plan.cwd.as_deref().unwrap());
    std::fs::create_dir_all(worktree).unwrap();
    std::fs::write(worktree.join("main.rs"), "fn main() {}").unwrap();
    for rel in &plan.worktree_remove {
        std::fs::create_dir_all(worktree.join(rel)).unwrap();
        std::fs::write(worktree.join(rel).join("mcp.json"), r#"{"mcpServers":{}}"#).unwrap();
    }
}

/// The stand-in's record shows the plan carried out: argv, environment, cwd, the launch
/// directory's dirs and files; the worktree paths are gone, the other file is there.
fn assert_carried_out(plan: &LaunchPlan, rec: &Value) {
    assert_eq!(rec["argv"], serde_json::to_value(&plan.argv).unwrap());
    assert_eq!(recorded_env(rec), expected_env(plan));
    assert_eq!(rec["cwd"].as_str(), plan.cwd.as_deref());
    let entries: BTreeMap<String, Value> = rec["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["path"].as_str().unwrap().to_owned(), e.clone()))
        .collect();
    for dir in &plan.dirs {
        assert_eq!(entries[dir]["type"], "dir", "{dir}");
        assert_eq!(entries[dir]["mode"], 0o700, "{dir}");
    }
    for file in &plan.files {
        let e = &entries[&file.path];
        assert_eq!(
            (&e["type"], &e["mode"]),
            (&"file".into(), &file.mode.into())
        );
        assert_eq!(e["contents"].as_str(), Some(file.contents.as_str()));
    }
    let worktree = Path::new(plan.cwd.as_deref().unwrap());
    for rel in &plan.worktree_remove {
        assert!(!worktree.join(rel).exists(), "{rel} was not removed");
    }
    assert!(worktree.join("main.rs").is_file());
}

/// Runs an ACP plan's prompt to its end, returning the events.
fn prompt_to_end(reviewer: &mut Reviewer, prompt: &str) -> Vec<AcpEvent> {
    let Reviewer::Acp(session) = reviewer else {
        panic!("not an ACP reviewer")
    };
    assert_eq!(session.session_id(), "stand-in-1");
    let id = session.prompt(prompt).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut events = Vec::new();
    loop {
        assert!(
            Instant::now() < deadline,
            "no answer to the prompt: {events:?}"
        );
        if let Some(event) = session.next_event(Duration::from_secs(1)).unwrap() {
            let done = matches!(&event, AcpEvent::PromptDone { id: i, .. } if *i == id);
            events.push(event);
            if done {
                return events;
            }
        }
    }
}

fn acp_plan_is_carried_out(client: &str) {
    let tmp = TempDir::new().unwrap();
    let (bin, record_base) = recording_stand_in(tmp.path());
    let plan = facts_only::plan(client, &facts_only::ctx(tmp.path()));
    assert!(plan.session_new.is_some(), "{client} is an ACP client");
    hostile_worktree(&plan);
    let launch_dir = tmp.path().join("launch");
    let mut reviewer = launch::launch(&plan, &bin, &recording(tmp.path())).unwrap();
    let pid = reviewer.pid();
    let events = prompt_to_end(&mut reviewer, facts_only::PROMPT);

    assert!(
        events.iter().any(|e| matches!(e, AcpEvent::Update(p)
        if p["update"]["content"]["text"] == "looking")),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AcpEvent::PermissionDenied { tool_call }
        if tool_call["toolCallId"] == "c1")),
        "{events:?}"
    );
    assert!(events.contains(&AcpEvent::PromptDone {
        id: 3,
        stop_reason: "end_turn".into()
    }));
    let rec = record(&record_base);
    assert_eq!(rec["tty"], false);
    assert_carried_out(&plan, &rec);
    let session = read_json(&record_base.with_extension("session.json"));
    assert_eq!(session, serde_json::to_value(&plan.session_new).unwrap());
    // The first prompt says where the pull request's client configuration is kept.
    let prompt = read_json(&record_base.with_extension("prompt.json"));
    let note = pr_config_note(&plan.worktree_remove, plan.pr_config.as_deref().unwrap());
    assert!(
        note.contains(&format!("{}/pr-config/", plan.launch_dir)),
        "{note}"
    );
    assert_eq!(
        prompt,
        serde_json::json!({"sessionId": "stand-in-1", "prompt": [
            {"type": "text", "text": facts_only::PROMPT},
            {"type": "text", "text": note},
        ]})
    );
    let answer = read_json(&record_base.with_extension("permission.json"));
    assert_eq!(
        answer["result"]["outcome"],
        serde_json::json!({"outcome": "selected", "optionId": "reject"})
    );

    reviewer.stop().unwrap();
    assert!(!launch_dir.exists());
    assert_eq!(group_members(pid), Vec::<u32>::new());
}

#[test]
fn a_cursor_plan_is_carried_out_by_a_stand_in() {
    acp_plan_is_carried_out("cursor");
}

#[test]
fn a_kiro_plan_is_carried_out_by_a_stand_in() {
    acp_plan_is_carried_out("kiro");
}

#[test]
fn an_antigravity_plan_is_carried_out_by_a_stand_in_in_a_terminal() {
    let tmp = TempDir::new().unwrap();
    let (bin, record_base) = recording_stand_in(tmp.path());
    let plan = facts_only::plan("antigravity", &facts_only::ctx(tmp.path()));
    assert!(plan.session_new.is_none());
    hostile_worktree(&plan);
    let launch_dir = tmp.path().join("launch");
    let mut reviewer = launch::launch(&plan, &bin, &recording(tmp.path())).unwrap();
    let output = until_exit(&mut reviewer);
    assert!(
        output.contains("stand-in\x1b[0m ran in a terminal"),
        "{output:?}"
    );
    let rec = record(&record_base);
    assert_eq!(rec["tty"], true);
    assert_carried_out(&plan, &rec);
    reviewer.stop().unwrap();
    assert!(!launch_dir.exists());
}

// ------------------------------------------------------------------------------------------
// Never hang: dialogs, silent and dying clients
// ------------------------------------------------------------------------------------------

#[test]
fn a_reviewer_at_a_trust_dialog_is_stopped_with_its_process_group_within_the_bound() {
    for (text, dialog) in [
        (
            "\\033[1mTrust this folder?\\033[0m Codex can read, edit",
            "Trust this folder?",
        ),
        ("1 hook needs review before it can run.", "hooks review"),
    ] {
        let tmp = TempDir::new().unwrap();
        let launch_dir = tmp.path().join("launch");
        let bin = sh_script(
            tmp.path(),
            "dialog",
            &format!("sleep 60 &\nprintf '{text}\\n'\nwait"),
        );
        // The dialogs are the plan's: Codex's room names these (`codex::DIALOGS`).
        let mut plan = bare_plan(Path::new("unused"), &launch_dir);
        plan.dialogs = Dialog::all(kcap_mcp_registry::clients::codex::DIALOGS);
        let options = Options::default().with_dialog_quiet(Duration::from_secs(1));
        let started = Instant::now();
        let mut reviewer = launch::launch(&plan, &bin, &options).unwrap();
        let pid = reviewer.pid();
        let Reviewer::Terminal(session) = &mut reviewer else {
            panic!()
        };
        let e = loop {
            match session.next_event(Duration::from_secs(5)) {
                Ok(Some(TerminalEvent::Exited(s))) => panic!("exited: {s:?}"),
                Ok(_) => assert!(started.elapsed() < Duration::from_secs(10), "not detected"),
                Err(e) => break e,
            }
        };
        assert!(started.elapsed() < Duration::from_secs(10));
        let ExecError::Dialog { dialog: name, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(name.contains(dialog), "{name}");
        assert!(
            e.to_string()
                .starts_with("run the reviewer: codex waits at"),
            "{e}"
        );
        // The shell and its `sleep` are gone.
        assert_eq!(group_members(pid), Vec::<u32>::new());
        drop(reviewer);
        assert!(!launch_dir.exists());
    }
}

#[test]
fn a_quiet_reviewer_without_a_dialog_is_not_stopped() {
    let tmp = TempDir::new().unwrap();
    let launch_dir = tmp.path().join("launch");
    // Codex's trust text on a plan whose dialogs are Claude Code's: not one of its own.
    let bin = sh_script(
        tmp.path(),
        "quiet",
        "printf 'Reviewing the diff\\n'\nprintf 'Trust this folder?\\n'\nsleep 3",
    );
    let mut plan = bare_plan(Path::new("unused"), &launch_dir);
    plan.dialogs = Dialog::all(kcap_mcp_registry::clients::claude::state::DIALOGS);
    let options = Options::default().with_dialog_quiet(Duration::from_millis(300));
    let mut reviewer = launch::launch(&plan, &bin, &options).unwrap();
    let Reviewer::Terminal(session) = &mut reviewer else {
        panic!()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline);
        if let Some(TerminalEvent::Exited(s)) = session.next_event(Duration::from_secs(1)).unwrap()
        {
            assert!(s.unwrap().success());
            break;
        }
    }
}

/// An ACP plan (one `session_new`) for a shell stand-in in `launch_dir`.
pub(crate) fn acp_plan(launch_dir: &Path) -> LaunchPlan {
    let mut plan = bare_plan(Path::new("unused"), launch_dir);
    plan.session_new = Some(kcap_mcp_registry::clients::plan::SessionNew {
        cwd: launch_dir.display().to_string(),
        mcp_servers: vec![],
    });
    plan
}

#[test]
fn an_acp_client_that_does_not_answer_or_exits_or_answers_wrong_is_reported() {
    type Expected = fn(&ExecError) -> bool;
    let cases: [(&str, &str, Expected); 3] = [
        ("silent", "exec sleep 60", |e| {
            matches!(
                e,
                ExecError::Timeout {
                    step: launch::Step::Initialize,
                    ..
                }
            )
        }),
        ("dying", "echo 'no credentials found' >&2\nexit 3", |e| {
            matches!(e, ExecError::Exited { step: launch::Step::Initialize, status: Some(s), stderr, .. }
                if s.code() == Some(3) && stderr.contains("no credentials found"))
        }),
        (
            "wrong",
            "read line\necho '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":2}}'\nexec sleep 60",
            |e| {
                matches!(
                    e,
                    ExecError::Protocol {
                        step: launch::Step::Initialize,
                        ..
                    }
                )
            },
        ),
    ];
    for (name, body, expected) in cases {
        let tmp = TempDir::new().unwrap();
        let launch_dir = tmp.path().join("launch");
        let bin = sh_script(tmp.path(), name, body);
        let options = Options::default().with_handshake_timeout(Duration::from_secs(2));
        let started = Instant::now();
        let e = launch::launch(&acp_plan(&launch_dir), &bin, &options).unwrap_err();
        assert!(expected(&e), "{name}: {e:?}");
        assert!(started.elapsed() < Duration::from_secs(10), "{name}");
        assert!(
            !launch_dir.exists(),
            "{name}: the launch directory is removed"
        );
    }
}

#[test]
fn a_client_that_cannot_start_is_named_and_its_launch_directory_removed() {
    let tmp = TempDir::new().unwrap();
    let launch_dir = tmp.path().join("launch");
    let missing = tmp.path().join("no-such-client");
    for plan in [
        bare_plan(Path::new("x"), &launch_dir),
        acp_plan(&launch_dir),
    ] {
        let e = launch::launch(&plan, &missing, &Options::default()).unwrap_err();
        assert!(matches!(e, ExecError::Start { .. }), "{e:?}");
        assert!(e.to_string().contains("no-such-client"), "{e}");
        let source = std::error::Error::source(&e).unwrap().to_string();
        assert!(source.contains("No such file"), "{source}");
        assert!(!launch_dir.exists());
    }
}

// ------------------------------------------------------------------------------------------
// The command
// ------------------------------------------------------------------------------------------

#[cfg(feature = "cli")]
#[test]
fn launch_streams_a_kiro_reviewers_acp_events() {
    let tmp = TempDir::new().unwrap();
    let (bin, record_base) = recording_stand_in(tmp.path());
    std::fs::create_dir(tmp.path().join("worktree")).unwrap();
    let s = |p: PathBuf| p.display().to_string();
    let r = common::run(&[
        "launch",
        "kiro",
        "--allow-unverified-isolation",
        "--agent-id",
        "agent-7",
        "--allowlist",
        "kcap-review",
        "--server-url",
        "http://127.0.0.1:9/kcap",
        "--kcap-bin",
        "/opt/kcap/bin/kcap",
        "--worktree",
        &s(tmp.path().join("worktree")),
        "--launch-dir",
        &s(tmp.path().join("launch")),
        "--launch-id",
        "0123456789abcdef",
        "--prompt",
        "Review PR 42",
        "--client-bin",
        &s(bin),
        "--timeout",
        "30",
        "--sandbox-write",
        &s(tmp.path().join("records")),
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "session stand-in-1", "{r:?}");
    assert!(lines.contains(&r#"update {"content":{"text":"looking","type":"text"},"sessionUpdate":"agent_message_chunk"}"#), "{r:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("permission refused {") && l.contains(r#""toolCallId":"c1""#)),
        "{r:?}"
    );
    // (The stand-in's "thinking" on stderr may come after the turn ends: two pipes.)
    assert_eq!(lines.last(), Some(&"done end_turn"), "{r:?}");
    assert!(r.stderr.contains("started kiro ("), "{r:?}");
    assert!(!tmp.path().join("launch").exists());
    let prompt = read_json(&record_base.with_extension("prompt.json"));
    assert_eq!(prompt["prompt"][0]["text"], "Review PR 42");
}

#[cfg(feature = "cli")]
#[test]
fn launch_plan_carries_out_a_saved_antigravity_plan_in_a_terminal() {
    let tmp = TempDir::new().unwrap();
    let (bin, record_base) = recording_stand_in(tmp.path());
    let plan = facts_only::plan("antigravity", &facts_only::ctx(tmp.path()));
    hostile_worktree(&plan);
    let file = tmp.path().join("plan.json");
    std::fs::write(&file, plan.to_json()).unwrap();
    let launch_dir = tmp.path().join("launch");
    let records = tmp.path().join("records");
    let args = [
        "launch",
        "--plan",
        file.to_str().unwrap(),
        "--launch-dir",
        launch_dir.to_str().unwrap(),
        "--client-bin",
        bin.to_str().unwrap(),
        "--sandbox-write",
        records.to_str().unwrap(),
    ];

    // A dry run prints the plan and the steps, and creates and starts nothing.
    let mut dry = args.to_vec();
    dry.push("--dry-run");
    let r = common::run(&dry);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with(&plan.to_json()), "{r:?}");
    assert!(
        r.stdout
            .contains(&format!("\n1. check the plan (version {PLAN_VERSION}")),
        "{r:?}"
    );
    assert!(r.stdout.contains("in a pseudo-terminal"), "{r:?}");
    assert!(!launch_dir.exists() && !record_base.with_extension("json").exists());

    let r = common::run(&args);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.stdout, "output \\u{1b}[1mstand-in\\u{1b}[0m ran in a terminal\nexited exit status: 0\n",
        "{r:?}"
    );
    assert_carried_out(&plan, &record(&record_base));
    assert!(!launch_dir.exists());
}

/// A `worktree_remove` path is removed in any ASCII capitalisation of each component (Copilot
/// CLI 1.0.102 loads `agents.md`, `AGENTS.MD`, `.github/Copilot-Instructions.md`: issue 34),
/// and nothing else: files of other names stay, as does a file that only contains the name.
#[test]
fn worktree_paths_are_removed_in_any_capitalisation() {
    let tmp = TempDir::new().unwrap();
    let worktree = tmp.path().join("worktree");
    let kept = [
        "README.md",
        ".github/workflows/ci.yml",
        "docs/AGENTS.md.txt",
        "AGENTS.md.bak",
    ];
    let removed = [
        "AGENTS.md",
        "agents.md",
        "Agents.MD",
        ".github/copilot-instructions.md",
        ".github/Copilot-Instructions.md",
        ".GitHub/COPILOT-INSTRUCTIONS.MD",
        ".github/hooks/pre.json",
        ".GITHUB/Hooks/post.json",
    ];
    for rel in kept.iter().chain(&removed) {
        let path = worktree.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "x").unwrap();
    }
    let launch_dir = tmp.path().join("launch");
    let record = tmp.path().join("record");
    let mut plan = bare_plan(&record, &launch_dir);
    plan.argv.clear();
    plan.cwd = Some(worktree.display().to_string());
    plan.sandbox = Sandbox::new(&plan.launch_dir, plan.cwd.as_deref());
    plan.worktree_remove = [
        "AGENTS.md",
        ".github/copilot-instructions.md",
        ".github/hooks",
    ]
    .map(String::from)
    .into();
    let mut reviewer = launch::launch(&plan, Path::new("/bin/true"), &Options::default()).unwrap();
    until_exit(&mut reviewer);
    reviewer.stop().unwrap();
    for rel in kept {
        assert!(worktree.join(rel).is_file(), "{rel} was removed");
    }
    for rel in removed {
        assert!(!worktree.join(rel).exists(), "{rel} was not removed");
    }
}
