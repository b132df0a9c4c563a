//! Differential test of the loader models (`clients::claude::loader`,
//! `clients::codex::loader`) against the pinned real clients.
//!
//! A deterministic generator (seeded) mutates the registration exports: field types and
//! nulls, extra and unknown fields, `type`/`url`/`command` combinations, `enabled` /
//! `disabled`, a byte order mark (one or two) and CRLF line ends, scopes (`.mcp.json`,
//! `~/.claude.json` user and local scopes) and Codex profiles, invalid neighbours that are
//! not kcap's, and `${…}`. Each variant goes to the real client and to the model:
//!
//! - Claude Code: `claude mcp list` in a throwaway `HOME` and project (project servers
//!   approved with `enableAllProjectMcpServers`), with a recorder as the server command that
//!   logs argv, `KCAP_*` env and cwd. Compared: the listed server names, the started
//!   processes (argv, env, cwd), the skipped entries and the refused files or scopes.
//! - Codex CLI: `codex mcp list --json` and `codex app-server` `config/read` under a
//!   throwaway `CODEX_HOME`. Compared: refused or not, each server's enabled flag and
//!   transport (command, args, env, cwd or url), and `enabled_tools` / `disabled_tools`.
//!
//! Every variant must agree. Without `KCAP_CLAUDE_BIN` / `KCAP_CODEX_BIN` the test is reported
//! as ignored, with the reason; with `KCAP_REQUIRE_PEERS=1` a missing client fails it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::peers::kill_group;

use common::peers::peer;
use kcap_mcp_registry::clients::claude::loader::{self as claude_model, ClaudeFile};
use kcap_mcp_registry::clients::codex::loader as codex_model;
use kcap_mcp_registry::clients::loaded::Loaded;
use serde_json::{Value, json};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        claude_code_agrees_with_its_loader_model_on_every_variant,
        codex_cli_agrees_with_its_loader_model_on_every_variant,
    ]
}

const SEED: u64 = 0x006b_6361_702d_3131;
const VARIANTS: usize = 110;
const WORKERS: usize = 2;
const TIMEOUT: Duration = Duration::from_secs(60);

/// xorshift64*: a small deterministic generator.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Runs `cmd` (stdin null unless `input`), in its own process group, killed after
/// [`TIMEOUT`]. Returns (exit code, stdout, stderr).
fn run(mut cmd: Command, input: Option<&str>) -> (Option<i32>, String, String) {
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0);
    let mut child = cmd.spawn().expect("the client starts");
    if let Some(input) = input {
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).unwrap();
    }
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            kill_group(child.id());
            let _ = child.wait();
            panic!("the client did not finish within {TIMEOUT:?}; killed its process group");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // Whatever the client left behind in its group goes too.
    kill_group(child.id());
    let text = |v: Vec<u8>| String::from_utf8_lossy(&v).into_owned();
    (
        status.code(),
        text(o.join().unwrap()),
        text(e.join().unwrap()),
    )
}

fn write_exe(path: &Path, body: &str) {
    common::stand_in::write_executable(path, body);
}

/// Runs `variants` on `WORKERS` threads; returns the failures.
fn parallel<V: Sync>(
    variants: &[V],
    check: impl Fn(usize, &V) -> Result<(), String> + Sync,
) -> Vec<String> {
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(v) = variants.get(i) else { break };
                    let result =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(i, v)))
                            .unwrap_or_else(|p| {
                                Err(format!("panicked: {:?}", p.downcast_ref::<String>()))
                            });
                    if let Err(e) = result {
                        failures.lock().unwrap().push(format!("variant {i}: {e}"));
                    }
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

fn entries() -> Vec<kcap_mcp_registry::RegistryEntry> {
    kcap_mcp_registry::ops::list::compiled_entries()
}

// ------------------------------------------------------------------------------------------
// Claude Code
// ------------------------------------------------------------------------------------------

/// One Claude variant: `.mcp.json` text and `~/.claude.json` text (either may be absent).
#[derive(Debug)]
struct ClaudeVariant {
    what: Vec<String>,
    mcp_json: Option<Vec<u8>>,
    claude_json: Option<Vec<u8>>,
}

const PROJECT: &str = "@PROJECT@";
const KCAP: &str = "@KCAP@";

fn claude_variants() -> Vec<ClaudeVariant> {
    let opts = kcap_mcp_registry::clients::registration::RegistrationOptions {
        command: KCAP.into(),
        server_url: Some("http://127.0.0.1:9/u".into()),
        project_dir: None,
    };
    let base: Value = serde_json::from_str(
        &kcap_mcp_registry::clients::claude::registration::claude_mcp_json(&entries(), &opts)
            .unwrap(),
    )
    .unwrap();
    let values: Vec<Value> = vec![
        Value::Null,
        json!(5),
        json!(""),
        json!("x"),
        json!([]),
        json!({}),
        json!(["x", 1]),
        json!(true),
        json!(false),
        json!("no"),
        json!("stdio"),
        json!("sse"),
        json!("http"),
        json!("ws"),
        json!("bogus"),
        json!("http://127.0.0.1:9/mcp"),
        json!({"KCAP_A": 1}),
        json!({"KCAP_A": "v"}),
        json!(["mcp", "${KCAP_T:-dflt}"]),
        json!({"KCAP_URL": "${HOME}"}),
        json!("${KCAP_BIN_DIR:-@BINDIR@}/kcap"),
        json!(["mcp", "${KCAP_UNSET_VAR}"]),
    ];
    let fields = [
        "command",
        "args",
        "env",
        "type",
        "url",
        "enabled",
        "disabled",
        "cwd",
        "description",
        "transport",
        "extra",
    ];
    let mut rng = Rng(SEED);
    let mut out = Vec::new();
    for _ in 0..VARIANTS {
        let mut what = Vec::new();
        let mut servers = base["mcpServers"].as_object().unwrap().clone();
        let names: Vec<String> = servers.keys().cloned().collect();
        for _ in 0..1 + rng.below(3) {
            match rng.below(5) {
                0 => {
                    // A neighbour that is not kcap's, valid or not.
                    let mut n = json!({"command": KCAP, "args": ["other"]});
                    let f = *rng.pick(&fields);
                    let v = rng.pick(&values).clone();
                    n[f] = v.clone();
                    what.push(format!("neighbour other.{f}={v}"));
                    servers.insert("other".into(), n);
                }
                1 => {
                    let name = rng.pick(&names).clone();
                    let f = *rng.pick(&fields);
                    if let Some(o) = servers[&name].as_object_mut() {
                        o.remove(f);
                    }
                    what.push(format!("remove {name}.{f}"));
                }
                2 => {
                    let name = rng.pick(&names).clone();
                    servers.insert(name.clone(), rng.pick(&values).clone());
                    what.push(format!("{name} = {}", servers[&name]));
                }
                _ => {
                    let name = rng.pick(&names).clone();
                    let f = *rng.pick(&fields);
                    let v = rng.pick(&values).clone();
                    if let Some(o) = servers[&name].as_object_mut() {
                        o.insert(f.into(), v.clone());
                    }
                    what.push(format!("{name}.{f} = {v}"));
                }
            }
        }
        let scope = rng.below(5);
        let servers = Value::Object(servers);
        let (mcp, user) = match scope {
            0 => {
                what.push("user scope".into());
                (None, Some(json!({"mcpServers": servers})))
            }
            1 => {
                what.push("local scope".into());
                (
                    None,
                    Some(json!({"projects": {PROJECT: {"mcpServers": servers}}})),
                )
            }
            2 => {
                what.push("split: project + local scope override".into());
                let local = json!({"kcap-review": {"command": KCAP, "args": ["mcp", "local"]}});
                (
                    Some(json!({"mcpServers": servers})),
                    Some(
                        json!({"projects": {PROJECT: {"mcpServers": local}}, "mcpServers": {"kcap-memory": {"command": KCAP, "args": ["user"]}}}),
                    ),
                )
            }
            _ => (Some(json!({"mcpServers": servers})), None),
        };
        let text = |v: Value, rng: &mut Rng, what: &mut Vec<String>| {
            let mut t = serde_json::to_string_pretty(&v).unwrap();
            match rng.below(8) {
                0 => {
                    what.push("BOM".into());
                    t.insert(0, '\u{feff}');
                }
                1 => {
                    what.push("two BOMs".into());
                    t.insert_str(0, "\u{feff}\u{feff}");
                }
                2 => {
                    what.push("CRLF".into());
                    t = t.replace('\n', "\r\n");
                }
                3 if rng.chance(30) => {
                    what.push("trailing comma".into());
                    t = t.replacen("\n}", ",\n}", 1);
                    let last = t.rfind("\n}").unwrap_or(0);
                    t.insert(last, ',');
                }
                _ => {}
            }
            t.into_bytes()
        };
        let mcp_json = mcp.map(|v| text(v, &mut rng, &mut what));
        let claude_json = user.map(|v| text(v, &mut rng, &mut what));
        out.push(ClaudeVariant {
            what,
            mcp_json,
            claude_json,
        });
    }
    out
}

/// Claude Code's environment in the test (everything else is cleared).
fn claude_env(home: &Path, bin_dir: &Path) -> Vec<(String, String)> {
    vec![
        (
            "PATH".into(),
            format!(
                "{}:{}",
                bin_dir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        ),
        ("HOME".into(), home.display().to_string()),
        ("IS_SANDBOX".into(), "1".into()),
        ("ANTHROPIC_API_KEY".into(), "dummy".into()),
        ("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9".into()),
        ("HTTPS_PROXY".into(), "http://127.0.0.1:9".into()),
        ("HTTP_PROXY".into(), "http://127.0.0.1:9".into()),
        ("DISABLE_AUTOUPDATER".into(), "1".into()),
    ]
}

/// A started server: command, args, env, cwd.
type Process = (String, Vec<String>, BTreeMap<String, String>, String);

/// What the real client did, in comparable form.
#[derive(Debug, PartialEq, Eq)]
struct ClaudeSeen {
    listed: BTreeSet<String>,
    processes: BTreeSet<(Vec<String>, BTreeMap<String, String>, String)>,
    skipped: BTreeSet<String>,
    refused: usize,
}

fn check_claude(bin: &Path, v: &ClaudeVariant) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (home, project, bin_dir, rec) = (
        root.join("home"),
        root.join("project"),
        root.join("bin"),
        root.join("rec"),
    );
    for d in [&home.join(".claude"), &project, &bin_dir, &rec] {
        std::fs::create_dir_all(d).unwrap();
    }
    let kcap = bin_dir.join("kcap");
    write_exe(
        &kcap,
        &format!(
            "#!/bin/sh\nd='{}'\n: > \"$d/$$.start\"\nprintf '%s\\0' \"$0\" \"$@\" > \"$d/$$.argv\"\nenv -0 > \"$d/$$.env\"\npwd -P > \"$d/$$.cwd\"\n: > \"$d/$$.done\"\nexit 0\n",
            rec.display()
        ),
    );
    std::fs::write(
        home.join(".claude/settings.json"),
        r#"{"enableAllProjectMcpServers":true}"#,
    )
    .unwrap();
    let subst = |b: &[u8]| -> Vec<u8> {
        String::from_utf8(b.to_vec())
            .unwrap()
            .replace(PROJECT, project.to_str().unwrap())
            .replace(KCAP, kcap.to_str().unwrap())
            .replace("@BINDIR@", bin_dir.to_str().unwrap())
            .into_bytes()
    };
    let mcp = v.mcp_json.as_deref().map(subst);
    let user = v.claude_json.as_deref().map(subst);
    if let Some(m) = &mcp {
        std::fs::write(project.join(".mcp.json"), m).unwrap();
    }
    if let Some(u) = &user {
        std::fs::write(home.join(".claude.json"), u).unwrap();
    }
    let env = claude_env(&home, &bin_dir);
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .envs(env.iter().cloned())
        .args(["mcp", "list"])
        .current_dir(&project);
    let (code, stdout, stderr) = run(cmd, None);
    // A `~/.claude.json` that is not JSON stops Claude Code altogether (exit 1,
    // "Configuration error", the file backed up as corrupted): nothing is listed or started.
    let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let corrupt_user = user.as_ref().is_some_and(|u| {
        claude_model::load("~/.claude.json", u, ClaudeFile::UserConfig, None, &lookup)
            .rejected
            .iter()
            .any(|r| r.scope == "the file")
    });
    let client_stopped = code == Some(1) && stderr.contains("Configuration error in");
    if corrupt_user || client_stopped {
        return if corrupt_user == client_stopped {
            Ok(())
        } else {
            Err(format!(
                "{:?}: model says corrupt ~/.claude.json: {corrupt_user}; client stopped: {client_stopped}: {stderr}",
                v.what
            ))
        };
    }
    if code != Some(0) {
        return Err(format!("claude mcp list exited {code:?}: {stderr}"));
    }
    // Recorders exit at once; wait until every started one is done.
    let marks = |ext: &str| -> BTreeSet<String> {
        std::fs::read_dir(&rec)
            .unwrap()
            .filter_map(|e| {
                e.unwrap()
                    .file_name()
                    .into_string()
                    .unwrap()
                    .strip_suffix(ext)
                    .map(String::from)
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while marks(".start") != marks(".done") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut seen = ClaudeSeen {
        listed: BTreeSet::new(),
        processes: BTreeSet::new(),
        skipped: BTreeSet::new(),
        refused: 0,
    };
    for line in stdout.lines() {
        if let Some((name, rest)) = line.split_once(": ")
            && (rest.contains(" - \u{2718}")
                || rest.contains(" - \u{2713}")
                || rest.contains(" - \u{23f8}"))
            && !line.starts_with(' ')
        {
            seen.listed.insert(name.to_string());
        }
        if let Some(rest) = line
            .strip_prefix(" \u{2514} [Warning] [")
            .or_else(|| line.strip_prefix(" \u{251c} [Warning] ["))
            && rest.contains("Skipped")
        {
            seen.skipped
                .insert(rest.split_once(']').unwrap().0.to_string());
        }
        // A refused file's heading: `[Failed to parse]` on 2.1.197, `[Has errors]` on
        // 2.1.328 and 2.1.332 (measured, 2026-12-05, `claude mcp list` on a `.mcp.json` that
        // is not JSON, has no `mcpServers`, has a non-object one, or is an array: the same
        // files refused on each, the same error lines, the JSON error with `(line 1,
        // column 44)` added; a skipped entry's file is `[Contains warnings]` on 2.1.197,
        // `[Has warnings]` on the newer ones, its `[Warning] [name]` line the same).
        if line.starts_with("[Failed to parse]") || line.starts_with("[Has errors]") {
            seen.refused += 1;
        }
    }
    for pid in marks(".done") {
        let read = |ext: &str| std::fs::read(rec.join(format!("{pid}.{ext}"))).unwrap();
        let argv: Vec<String> = String::from_utf8(read("argv"))
            .unwrap()
            .trim_end_matches('\0')
            .split('\0')
            .map(String::from)
            .collect();
        let env: BTreeMap<String, String> = String::from_utf8(read("env"))
            .unwrap()
            .split('\0')
            .filter_map(|kv| kv.split_once('='))
            .filter(|(k, _)| k.starts_with("KCAP_"))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cwd = String::from_utf8(read("cwd"))
            .unwrap()
            .trim_end()
            .to_string();
        seen.processes.insert((argv, env, cwd));
    }
    // The model, given the same bytes and environment.
    let project_s = project.to_str().unwrap();
    let mut models: Vec<Loaded> = Vec::new();
    if let Some(u) = &user {
        models.push(claude_model::load(
            "~/.claude.json",
            u,
            ClaudeFile::UserConfig,
            Some(project_s),
            &lookup,
        ));
    }
    if let Some(m) = &mcp {
        models.push(claude_model::load(
            ".mcp.json",
            m,
            ClaudeFile::ProjectMcpJson,
            Some(project_s),
            &lookup,
        ));
    }
    // Precedence: local and user scopes (one model) and project scope; local > project > user.
    let mut started: BTreeMap<String, Process> = BTreeMap::new();
    let mut listed = BTreeSet::new();
    let mut skipped = BTreeSet::new();
    let mut refused = 0;
    let user_model = user.as_ref().map(|_| &models[0]);
    let project_model = mcp.as_ref().map(|_| models.last().unwrap());
    let local_names: BTreeSet<String> = match &user {
        Some(u) => {
            let local_only = claude_model::load(
                "~/.claude.json",
                &subst(&strip_user_scope(u)),
                ClaudeFile::UserConfig,
                Some(project_s),
                &lookup,
            );
            local_only
                .started
                .iter()
                .map(|s| s.name.clone())
                .chain(local_only.remote.iter().map(|r| r.name.clone()))
                .collect()
        }
        None => BTreeSet::new(),
    };
    let order: Vec<(&Loaded, bool)> = [(user_model, false), (project_model, true)]
        .into_iter()
        .filter_map(|(m, p)| m.map(|m| (m, p)))
        .collect();
    for (m, is_project) in order {
        refused += m.rejected.len();
        for k in &m.skipped {
            skipped.insert(k.name.clone());
        }
        for s in &m.started {
            if is_project && local_names.contains(&s.name) {
                continue;
            }
            listed.insert(s.name.clone());
            started.insert(
                s.name.clone(),
                (
                    s.command.clone(),
                    s.args.clone(),
                    s.env.clone(),
                    s.cwd.clone().unwrap_or_default(),
                ),
            );
        }
        for r in &m.remote {
            if is_project && local_names.contains(&r.name) {
                continue;
            }
            listed.insert(r.name.clone());
            started.remove(&r.name);
        }
    }
    let processes = started
        .values()
        .filter(|(c, _, _, _)| c == kcap.to_str().unwrap())
        .map(|(c, a, e, cwd)| {
            let mut argv = vec![c.clone()];
            argv.extend(a.iter().cloned());
            let env = e
                .iter()
                .filter(|(k, _)| k.starts_with("KCAP_"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (argv, env, cwd.clone())
        })
        .collect();
    let model = ClaudeSeen {
        listed,
        processes,
        skipped,
        refused,
    };
    if model != seen {
        return Err(format!(
            "{:?}\nmodel: {model:#?}\nclient: {seen:#?}\nstdout:\n{stdout}",
            v.what
        ));
    }
    Ok(())
}

/// A `~/.claude.json` without its user scope, to tell which names its local scope holds.
fn strip_user_scope(bytes: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_start_matches('\u{feff}');
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(mut o)) => {
            o.remove("mcpServers");
            serde_json::to_vec(&o).unwrap()
        }
        _ => bytes.to_vec(),
    }
}

fn claude_code_agrees_with_its_loader_model_on_every_variant() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    let variants = claude_variants();
    let failures = parallel(&variants, |_, v| check_claude(&bin, v));
    // Straight to the process's stderr, past libtest's output capture.
    let _ = writeln!(
        std::io::stderr(),
        "differential: {} Claude Code variants ran (seed {SEED:#x}), {} disagreed",
        variants.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

// ------------------------------------------------------------------------------------------
// Codex CLI
// ------------------------------------------------------------------------------------------

#[derive(Debug)]
struct CodexVariant {
    what: Vec<String>,
    config: Vec<u8>,
    profile: Option<Vec<u8>>,
}

type Table = Vec<(String, String)>;

fn toml_text(top: &[String], servers: &[(String, Table)]) -> String {
    let mut t = String::new();
    for line in top {
        t.push_str(line);
        t.push('\n');
    }
    for (name, fields) in servers {
        t.push_str(&format!(
            "\n[mcp_servers.{}]\n",
            kcap_mcp_registry::clients::codex::toml_basic_string(name)
        ));
        for (k, v) in fields {
            t.push_str(&format!("{k} = {v}\n"));
        }
    }
    t
}

fn codex_variants() -> Vec<CodexVariant> {
    let base: Vec<(String, Table)> = entries()
        .iter()
        .filter(|e| e.allowlistable)
        .map(|e| {
            let args: Vec<String> = e.args.iter().map(|a| format!("{a:?}")).collect();
            (
                e.id.clone(),
                vec![
                    ("command".to_string(), format!("{:?}", "kcap")),
                    ("args".to_string(), format!("[{}]", args.join(", "))),
                    (
                        "env".to_string(),
                        r#"{ KCAP_URL = "http://127.0.0.1:9/u" }"#.to_string(),
                    ),
                ],
            )
        })
        .collect();
    let values = [
        "5",
        "-1",
        "1.5",
        "\"\"",
        "\"x\"",
        "\"rel\"",
        "[]",
        "[\"a\", 1]",
        "[\"review\"]",
        "{}",
        "{ KCAP_A = 1 }",
        "{ KCAP_A = \"v\" }",
        "true",
        "false",
        "\"no\"",
        "\"sse\"",
        "\"stdio\"",
        "\"http://127.0.0.1:9/mcp\"",
        "\"approve\"",
        "\"bad\"",
        "{ t = { approval_mode = \"approve\" } }",
        "\"${KCAP_X}\"",
    ];
    let fields = [
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "type",
        "enabled",
        "required",
        "enabled_tools",
        "disabled_tools",
        "startup_timeout_sec",
        "tool_timeout_sec",
        "description",
        "transport",
        "default_tools_approval_mode",
        "tools",
        "bearer_token_env_var",
        "env_vars",
        "name",
    ];
    let mut rng = Rng(SEED ^ 0xc0de);
    let mut out = Vec::new();
    for _ in 0..VARIANTS {
        let mut what = Vec::new();
        let mut servers = base.clone();
        let mut top: Vec<String> = Vec::new();
        let set = |servers: &mut Vec<(String, Table)>, i: usize, k: &str, v: &str| {
            let t = &mut servers[i].1;
            match t.iter_mut().find(|(f, _)| f == k) {
                Some(slot) => slot.1 = v.to_string(),
                None => t.push((k.to_string(), v.to_string())),
            }
        };
        for _ in 0..1 + rng.below(2) {
            match rng.below(6) {
                0 => {
                    let f = *rng.pick(&fields);
                    let v = *rng.pick(&values);
                    servers.push(("other".into(), vec![("command".into(), "\"other\"".into())]));
                    let i = servers.len() - 1;
                    set(&mut servers, i, f, v);
                    what.push(format!("neighbour other.{f} = {v}"));
                }
                1 => {
                    let i = rng.below(servers.len());
                    let f = *rng.pick(&fields);
                    servers[i].1.retain(|(k, _)| k != f);
                    what.push(format!("remove {}.{f}", servers[i].0));
                }
                _ => {
                    let i = rng.below(servers.len());
                    let f = *rng.pick(&fields);
                    let v = *rng.pick(&values);
                    set(&mut servers, i, f, v);
                    what.push(format!("{}.{f} = {v}", servers[i].0));
                }
            }
        }
        let mut profile = None;
        match rng.below(10) {
            0 => {
                top.push("profile = \"p\"".into());
                what.push("profile = \"p\"".into());
            }
            1 => {
                top.push("model = \"o3\"".into());
                servers.clear();
                what.push("only model".into());
            }
            2 | 3 => {
                // Part of the servers move into the profile file, and one is overridden there.
                let k = rng.below(servers.len().max(1));
                let mut prof: Vec<(String, Table)> = servers.split_off(k);
                let i = rng.below(servers.len().max(1));
                if let Some((name, _)) = servers.get(i) {
                    let f = *rng.pick(&["args", "env", "enabled", "url", "cwd", "command"]);
                    let v = *rng.pick(&values);
                    prof.push((name.clone(), vec![(f.to_string(), v.to_string())]));
                    what.push(format!("profile overrides {name}.{f} = {v}"));
                }
                what.push(format!("profile holds {} tables", prof.len()));
                let mut ptop = Vec::new();
                if rng.chance(10) {
                    ptop.push("profile = \"q\"".to_string());
                    what.push("profile file sets profile".into());
                }
                profile = Some(toml_text(&ptop, &prof));
                if rng.chance(15) {
                    top.push("[profiles.p]\nmodel = \"o3\"".into());
                    what.push("legacy [profiles.p]".into());
                }
            }
            _ => {}
        }
        let mut text = toml_text(&top, &servers);
        match rng.below(8) {
            0 => {
                text.insert(0, '\u{feff}');
                what.push("BOM".into());
            }
            1 => {
                text.insert_str(0, "\u{feff}\u{feff}");
                what.push("two BOMs".into());
            }
            2 => {
                text = text.replace('\n', "\r\n");
                what.push("CRLF".into());
            }
            _ => {}
        }
        out.push(CodexVariant {
            what,
            config: text.into_bytes(),
            profile: profile.map(String::into_bytes),
        });
    }
    out
}

/// What Codex or the model says, in comparable form: `None` when the configuration is
/// refused; else each server with enabled flag, transport and tool filters.
type CodexSeen = Option<BTreeMap<String, Value>>;

fn model_seen(l: &Loaded) -> CodexSeen {
    if !l.rejected.is_empty() {
        return None;
    }
    let mut out = BTreeMap::new();
    for s in &l.started {
        out.insert(
            s.name.clone(),
            json!({"enabled": true, "command": s.command, "args": s.args, "env": s.env, "cwd": s.cwd,
                   "enabled_tools": s.enabled_tools, "disabled_tools": s.disabled_tools}),
        );
    }
    for r in &l.remote {
        out.insert(r.name.clone(), json!({"enabled": true, "url": r.url}));
    }
    for k in &l.skipped {
        out.insert(k.name.clone(), json!({"enabled": false}));
    }
    Some(out)
}

fn check_codex(bin: &Path, v: &CodexVariant) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let (home, codex_home, cwd) = (
        dir.path().join("home"),
        dir.path().join("codex"),
        dir.path().join("cwd"),
    );
    for d in [&home, &codex_home, &cwd] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(codex_home.join("config.toml"), &v.config).unwrap();
    if let Some(p) = &v.profile {
        std::fs::write(codex_home.join("p.config.toml"), p).unwrap();
    }
    let command = |tail: &[&str]| {
        let mut cmd = Command::new(bin);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &home)
            .env("CODEX_HOME", &codex_home)
            .current_dir(&cwd);
        if v.profile.is_some() {
            cmd.args(["--profile", "p"]);
        }
        cmd.args(tail);
        cmd
    };
    let (code, stdout, stderr) = run(command(&["mcp", "list", "--json"]), None);
    let seen: CodexSeen = if code == Some(0) {
        let list: Value = serde_json::from_str(&stdout)
            .map_err(|e| format!("mcp list printed no JSON ({e}): {stdout}"))?;
        // Tool filters come from `config/read`, which shows every field.
        let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"t","version":"1"}}});
        let read =
            json!({"jsonrpc":"2.0","id":2,"method":"config/read","params":{"includeLayers":false}});
        // `--profile` does not apply to `app-server` on 0.169.0 (it exits: "--profile only
        // applies to runtime commands"), so profile variants compare `mcp list` only.
        let config = if v.profile.is_some() {
            Value::Null
        } else {
            app_server_read(
                command(&["app-server"]),
                &[init, json!({"jsonrpc":"2.0","method":"initialized"}), read],
            )
            .map_err(|e| format!("{e}: {:?}\n{}", v.what, String::from_utf8_lossy(&v.config)))?
        };
        let servers = &config["result"]["config"]["mcp_servers"];
        let mut out = BTreeMap::new();
        for s in list.as_array().unwrap() {
            let name = s["name"].as_str().unwrap().to_string();
            let t = &s["transport"];
            let entry = if s["enabled"] == json!(false) {
                json!({"enabled": false})
            } else if t["type"] == "stdio" {
                let c = &servers[&name];
                json!({"enabled": true, "command": t["command"], "args": t["args"],
                       "env": if t["env"].is_null() { json!({}) } else { t["env"].clone() }, "cwd": t["cwd"],
                       "enabled_tools": c.get("enabled_tools").cloned().unwrap_or(Value::Null),
                       "disabled_tools": c.get("disabled_tools").cloned().filter(|d| !d.is_null()).unwrap_or(json!([]))})
            } else {
                json!({"enabled": true, "url": t["url"]})
            };
            out.insert(name, entry);
        }
        Some(out)
    } else if stderr.contains("failed to load") {
        None
    } else {
        return Err(format!(
            "codex mcp list exited {code:?} without a configuration error: {stderr}"
        ));
    };
    let profile = v
        .profile
        .as_deref()
        .map(|b| ("p", "p.config.toml", Some(b)));
    let mut model = model_seen(&codex_model::load("config.toml", &v.config, profile));
    if v.profile.is_some()
        && let Some(m) = &mut model
    {
        for s in m.values_mut().filter(|s| s.get("enabled_tools").is_some()) {
            s["enabled_tools"] = Value::Null;
            s["disabled_tools"] = json!([]);
        }
    }
    if model != seen {
        return Err(format!(
            "{:?}\nconfig:\n{}\nprofile:\n{}\nmodel: {model:#?}\nclient: {seen:#?}\nstderr: {stderr}",
            v.what,
            String::from_utf8_lossy(&v.config),
            String::from_utf8_lossy(v.profile.as_deref().unwrap_or_default())
        ));
    }
    Ok(())
}

/// Sends `messages` to `codex app-server` and returns the response with id 2.
fn app_server_read(mut cmd: Command, messages: &[Value]) -> Result<Value, String> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    for m in messages {
        writeln!(stdin, "{m}").map_err(|e| e.to_string())?;
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
    let result = rx
        .recv_timeout(TIMEOUT)
        .map_err(|_| "app-server gave no config/read answer".to_string());
    drop(stdin);
    kill_group(pid);
    let _ = child.wait();
    result
}

fn codex_cli_agrees_with_its_loader_model_on_every_variant() {
    let Some(bin) = peer("KCAP_CODEX_BIN") else {
        return;
    };
    let variants = codex_variants();
    let failures = parallel(&variants, |_, v| check_codex(&bin, v));
    let _ = writeln!(
        std::io::stderr(),
        "differential: {} Codex CLI variants ran (seed {SEED:#x}), {} disagreed",
        variants.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
