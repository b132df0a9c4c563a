//! Differential test of Qwen Code 0.24.4's loader model (`clients::qwen::loader`) against the
//! real client, as `tests/clients/differential_gemini.rs` does for Gemini CLI.
//!
//! The judge is `qwen mcp list`: it prints one line per server, `name: <command args> (stdio)`,
//! `name: <httpUrl> (http)` or `name: <url> (sse)`, and starts every user-level command
//! server, one after the other, to probe it (project-level ones are listed "Pending
//! approval" and not started). It has no JSON output, shows no environment, and ignores
//! `mcp.excluded` and `mcp.allowed`. So the variants are built around what it can judge:
//! each server's command is a link named after the server to a recorder that logs argv,
//! environment and working directory, and per server name the test compares the listed
//! transport and text (command and arguments, or URL) and, at the user level, the start
//! (argv, the `KCAP_*` variables, cwd), or that nothing started.
//!
//! A seeded generator mutates the registration export: network servers of each kind (`url`,
//! `httpUrl`, with a `type` that Qwen ignores in settings), every `$…` form in `command`,
//! `args`, `env`, `cwd` and `url`, `null` and empty `args`, numbers in `env`, a missing or empty
//! `command`, an existing or missing `cwd`, ignored keys (`disabled`, `trust`, `timeout`,
//! `description`, `includeTools`, `type`), neighbours, repeated entries and fields, entries
//! that are not objects. Twenty cases share one settings file at the user or project level,
//! with comments, CRLF or a byte order mark; file-level variants (a trailing comma, a top
//! level that is not an object) run alone at the user level.
//!
//! What the oracle cannot judge, and is not generated: `mcp.excluded`/`mcp.allowed` (the
//! list ignores them; the conformance tests cover them in ACP), `env` of project servers and
//! any variable outside `KCAP_*`, `args` that are not arrays or `null` (`false`, `0`, `""`
//! and strings crash the listing: `server.args?.join is not a function`),
//! `null` entries, and non-string `args` elements.
//!
//! Without `KCAP_QWEN_BIN` the test is reported as ignored, with the reason; with
//! `KCAP_REQUIRE_PEERS=1` a missing client fails it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::common;
use crate::common::variants;

use common::peers::{inherited_path, peer};
use kcap_mcp_registry::clients::loaded::Loaded;
use kcap_mcp_registry::clients::qwen::loader as model;
use serde_json::{Value, json};
use variants::{
    Case, Entry, Listener, Rng, SEED, Tally, batches, block_text, client_vars, disagreements,
    parallel, subst,
};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![qwen_code_agrees_with_its_loader_model_on_every_variant,]
}

/// Seeded cases, besides the file-level variants.
const CASES: usize = 120;
/// Cases per settings file.
const BATCH: usize = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    User,
    Project,
}

type Run = variants::Run<Level>;

/// The export of case `case`, its servers named `c<case>-<id>`, each command a link named
/// after the server.
fn base(case: usize) -> Vec<(String, Entry)> {
    variants::export(
        &kcap_mcp_registry::clients::qwen::registration::FORMAT,
        "mcpServers",
        case,
    )
    .into_iter()
    .map(|(name, mut e)| {
        e.set("command", json!(format!("@BINDIR@/{name}")));
        (name, e)
    })
    .collect()
}

/// `$…` forms Qwen Code reads, and some it leaves as written.
const FORMS: [&str; 9] = [
    "$XV_SET",
    "${XV_SET}",
    "${XV_UNSET}",
    "$XV_UNSET",
    "${XV_SET:-d}",
    "$$XV_SET",
    "${XV_REF}",
    "$SESSION_ID",
    "a${}b$1",
];

/// One mutation of a case's servers.
fn mutate(rng: &mut Rng, servers: &mut Vec<(String, Entry)>, what: &mut Vec<String>) {
    let names: Vec<String> = servers.iter().map(|(n, _)| n.clone()).collect();
    let name = rng.pick(&names).clone();
    let prefix = name
        .split_once('-')
        .map(|(p, _)| p)
        .unwrap_or("c")
        .to_owned();
    let set = |servers: &mut Vec<(String, Entry)>, key: &str, v: Value| {
        for (n, e) in servers.iter_mut() {
            if *n == name {
                e.set(key, v.clone());
            }
        }
    };
    let (key, v): (&str, Value) = match rng.below(11) {
        0 => {
            let (key, kind) = *rng.pick(&[
                ("url", None),
                ("url", Some("http")),
                ("url", Some("stdio")),
                ("httpUrl", None),
                ("httpUrl", Some("sse")),
            ]);
            if let Some(kind) = kind {
                set(servers, "type", json!(kind));
            }
            let form = if rng.chance(50) {
                ""
            } else {
                *rng.pick(&FORMS)
            };
            (key, json!(format!("@URL@/{name}/{form}")))
        }
        1 => {
            let c = *rng.pick(&[
                "$XV_BINDIR/@NAME@",
                "${XV_BINDIR}/@NAME@",
                "${XV_UNSET}/@NAME@",
                "${XV_BINDIR:-x}/@NAME@",
                "@BINDIR@/@NAME@-missing",
                "",
            ]);
            ("command", json!(c.replace("@NAME@", &name)))
        }
        2 => {
            let v = match rng.below(4) {
                0 => json!(["mcp", *rng.pick(&FORMS), format!("a{}b", rng.pick(&FORMS))]),
                // `false`, `0` and `""` would crash the listing (`server.args?.join is not a
                // function`) after the start: not judgeable.
                1 => rng.pick(&[json!(null), json!([])]).clone(),
                2 => json!(["", "a b", "--driver", "x"]),
                _ => json!(["mcp"]),
            };
            ("args", v)
        }
        3 => {
            let form = *rng.pick(&FORMS);
            let v = match rng.below(3) {
                0 => json!({"KCAP_X": form, "KCAP_Y": format!("a{form}b")}),
                1 => json!({"KCAP_N": 7, "KCAP_F": 1.5, "KCAP_E": ""}),
                _ => json!({}),
            };
            ("env", v)
        }
        4 => {
            let c = *rng.pick(&["$XV_DIR", "${XV_DIR}", "${XV_UNSET}", "", "@BINDIR@"]);
            ("cwd", json!(c))
        }
        5 => {
            let (k, v) = rng
                .pick(&[
                    ("disabled", json!(true)),
                    ("trust", json!(false)),
                    ("timeout", json!(5000)),
                    ("description", json!("$XV_SET")),
                    ("includeTools", json!(["x"])),
                    ("type", json!("sse")),
                    ("headers", json!({"X": "$XV_SET"})),
                ])
                .clone();
            (k, v)
        }
        6 => {
            for (n, e) in servers.iter_mut() {
                if *n == name {
                    e.remove("command");
                }
            }
            what.push(format!("remove {name}.command"));
            return;
        }
        7 => {
            let other = format!("{prefix}-other{}", servers.len());
            what.push(format!("neighbour {other}"));
            let e = Entry::Fields(vec![
                ("command".into(), json!(format!("@BINDIR@/{other}"))),
                ("args".into(), json!(["other", "$XV_SET"])),
            ]);
            servers.push((other, e));
            return;
        }
        8 => {
            // A repeated entry: the last one counts.
            let i = servers.iter().position(|(n, _)| *n == name).unwrap();
            let decoy = Entry::Fields(vec![
                ("command".into(), json!(format!("@BINDIR@/{name}"))),
                ("args".into(), json!(["decoy"])),
            ]);
            what.push(format!("{name} written twice, first as a decoy"));
            servers.insert(i, (name, decoy));
            return;
        }
        9 => {
            let v = rng
                .pick(&[json!(5), json!("x"), json!(true), json!([]), json!({})])
                .clone();
            what.push(format!("{name} = {v}"));
            for (n, e) in servers.iter_mut() {
                if *n == name {
                    *e = Entry::Raw(v.clone());
                }
            }
            return;
        }
        _ => ("args", json!(["mcp", "review", "$XV_SET"])),
    };
    what.push(format!("{name}.{key} = {v}"));
    set(servers, key, v);
}

fn case(i: usize, rng: &mut Rng) -> Case {
    let mut servers = base(i);
    let mut what = Vec::new();
    for _ in 0..1 + rng.below(3) {
        mutate(rng, &mut servers, &mut what);
    }
    Case { what, servers }
}

fn file_text(cases: &[Case], comments: bool) -> String {
    let servers: Vec<(String, Entry)> = cases.iter().flat_map(|c| c.servers.clone()).collect();
    format!(
        "{{\n  \"$version\": 4,\n  \"mcpServers\": {}\n}}\n",
        block_text(&servers, comments)
    )
}

fn runs() -> Vec<Run> {
    let mut rng = Rng(SEED ^ 0x7177);
    let cases: Vec<Case> = (0..CASES).map(|i| case(i, &mut rng)).collect();
    let mut out = batches(
        cases,
        BATCH,
        &mut rng,
        |_| false,
        |_| false,
        |c| {
            (
                Level::User,
                file_text(std::slice::from_ref(c), false).into_bytes(),
            )
        },
        |batch, rng| {
            let mut what = Vec::new();
            let level = *rng.pick(&[Level::User, Level::User, Level::Project]);
            let comments = rng.chance(30);
            let mut text = file_text(batch, comments);
            if rng.chance(33) {
                what.push("CRLF".into());
                text = text.replace('\n', "\r\n");
            }
            if rng.chance(25) {
                what.push("byte order mark".into());
                text.insert(0, '\u{feff}');
            }
            if comments {
                what.push("comments".into());
            }
            what.push(format!("{level:?} level"));
            (what, level, text.into_bytes())
        },
    );
    for (i, (what, text)) in [
        (
            "a trailing comma",
            file_text(&[plain(990)], false).replacen("}\n}", "},\n}", 1),
        ),
        (
            "a top level that is an array",
            "[{\"mcpServers\": {}}]".into(),
        ),
        ("mcpServers that is an array", {
            let c = plain(991);
            let e: Vec<String> = c.servers.iter().map(|(_, e)| entry_text(e)).collect();
            format!("{{\"mcpServers\": [{}]}}", e.join(", "))
        }),
    ]
    .into_iter()
    .enumerate()
    {
        let mut c = plain(990 + i);
        if what.starts_with("mcpServers that") {
            // Named `0`, `1`, … by the array.
            c.servers = c
                .servers
                .iter()
                .enumerate()
                .map(|(k, (_, e))| (k.to_string(), e.clone()))
                .collect();
        }
        out.push(Run {
            what: vec![what.into()],
            cases: vec![c],
            level: Level::User,
            text: text.into_bytes(),
        });
    }
    out
}

fn plain(i: usize) -> Case {
    Case {
        what: vec![],
        servers: base(i),
    }
}

fn entry_text(e: &Entry) -> String {
    let text = block_text(&[("x".into(), e.clone())], false);
    let (_, rest) = text.split_once(": ").unwrap();
    rest.trim_end_matches("\n  }").to_string()
}

/// A start: argv after the command, its `KCAP_*` variables, its cwd.
type Start = (Vec<String>, BTreeMap<String, String>, String);

/// What one server did, as the list and the recorder show it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Did {
    /// The listed text after `name: ` (command and arguments, or URL, and the transport);
    /// `None` where the model says nothing is started or reached (not compared).
    listed: Option<String>,
    /// The start, if any.
    started: Option<Start>,
}

/// Qwen Code's environment in the test (everything else is cleared).
fn qwen_env(home: &Path, root: &Path) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".into(), inherited_path().into_string().unwrap()),
        ("HOME".into(), home.display().to_string()),
        ("HTTPS_PROXY".into(), "http://127.0.0.1:9".into()),
        ("HTTP_PROXY".into(), "http://127.0.0.1:9".into()),
        ("NO_PROXY".into(), "127.0.0.1".into()),
        ("XV_BINDIR".into(), root.join("bin").display().to_string()),
        ("SESSION_ID".into(), "sess".into()),
    ];
    env.extend(client_vars(root));
    env
}

/// The model's verdict per name, for a file at `level` in a run whose recorder links are in
/// `bin_dir` and whose project directory is `project`.
fn model_did(
    loaded: &Loaded,
    level: Level,
    bin_dir: &Path,
    project: &Path,
) -> BTreeMap<String, Did> {
    let mut out = BTreeMap::new();
    for s in &loaded.started {
        let listed = Some(format!("{} {} (stdio)", s.command, s.args.join(" ")));
        let cwd = s
            .cwd
            .clone()
            .unwrap_or_else(|| project.display().to_string());
        // Spawned only at the user level, from a command that exists, in a cwd that exists.
        let runs = level == Level::User
            && Path::new(&s.command).parent() == Some(bin_dir)
            && Path::new(&s.command).exists()
            && Path::new(&cwd).is_dir();
        let env = s
            .env
            .iter()
            .filter(|(k, _)| k.starts_with("KCAP_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let started = runs.then(|| (s.args.clone(), env, cwd));
        out.insert(s.name.clone(), Did { listed, started });
    }
    for s in &loaded.skipped {
        out.entry(s.name.clone()).or_insert(Did {
            listed: None,
            started: None,
        });
    }
    out
}

/// Runs one settings file and compares.
fn check_run(bin: &Path, r: &Run) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (home, project, bin_dir, rec) = (
        root.join("home"),
        root.join("project"),
        root.join("bin"),
        root.join("rec"),
    );
    for d in [&home.join(".qwen"), &project.join(".qwen"), &bin_dir, &rec] {
        std::fs::create_dir_all(d).unwrap();
    }
    let kcap = bin_dir.join("kcap");
    variants::write_recorder(&kcap, &rec);
    for c in &r.cases {
        for (name, _) in &c.servers {
            let _ = std::os::unix::fs::symlink(&kcap, bin_dir.join(name));
        }
    }
    let listener = Listener::start();
    let text = subst(
        &r.text,
        &[
            ("@URL@", listener.url()),
            ("@KCAP@", kcap.display().to_string()),
            ("@BINDIR@", bin_dir.display().to_string()),
        ],
    );
    let path = match r.level {
        Level::User => home.join(".qwen/settings.json"),
        Level::Project => project.join(".qwen/settings.json"),
    };
    std::fs::write(&path, &text).unwrap();
    let env = qwen_env(&home, &root);
    let lookup: BTreeMap<String, String> = env.iter().cloned().collect();
    let loaded = model::load("settings.json", &text, &|n| lookup.get(n).cloned());
    let model_refused = !loaded.rejected.is_empty();
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .envs(env.iter().cloned())
        .args(["mcp", "list"])
        .current_dir(&project);
    let out = TALLY.run(cmd, "qwen mcp list");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    // A refused user file stops the command; a refused project file is reset to `{}`.
    let refused = match r.level {
        Level::User => !out.status.success(),
        Level::Project => project.join(".qwen/settings.json.corrupted").exists(),
    };
    let mut model_did = if model_refused {
        BTreeMap::new()
    } else {
        model_did(&loaded, r.level, &bin_dir, &project)
    };
    // Remote servers: the listed URL and transport.
    for remote in &loaded.remote {
        if model_refused {
            break;
        }
        let node_kind = if listed_http(&text, &remote.name) {
            "http"
        } else {
            "sse"
        };
        model_did.insert(
            remote.name.clone(),
            Did {
                listed: Some(format!("{} ({node_kind})", remote.url)),
                started: None,
            },
        );
    }
    // The client's verdicts: the listed lines, and the starts by the link they ran.
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    for line in stdout.lines() {
        let plain = strip_ansi(line);
        let Some(rest) = plain.split_once(' ').map(|(_, r)| r) else {
            continue;
        };
        let Some((name, info)) = rest.split_once(": ") else {
            continue;
        };
        let Some((info, _status)) = info.rsplit_once(" - ") else {
            continue;
        };
        listed.insert(name.to_string(), info.to_string());
    }
    let mut starts: BTreeMap<String, Start> = BTreeMap::new();
    for (argv, env, cwd) in variants::records(&rec) {
        let name = Path::new(&argv[0])
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let env = env
            .into_iter()
            .filter(|(k, _)| k.starts_with("KCAP_"))
            .collect();
        starts.insert(name, (argv[1..].to_vec(), env, cwd));
    }
    let mut client_did: BTreeMap<String, Did> = BTreeMap::new();
    for (name, m) in &model_did {
        client_did.insert(
            name.clone(),
            Did {
                listed: m.listed.as_ref().and(listed.get(name).cloned()),
                started: starts.remove(name),
            },
        );
    }
    // Listed by the client and unknown to the model (or started and unknown).
    for name in listed.keys() {
        if !model_did.contains_key(name) {
            client_did.insert(
                name.clone(),
                Did {
                    listed: listed.get(name).cloned(),
                    started: starts.remove(name),
                },
            );
        }
    }
    let failures_extra: Vec<String> = starts.keys().map(|n| format!("{n} started")).collect();
    let mut failures = disagreements(&r.cases, (model_refused, refused), &model_did, &client_did);
    failures.extend(failures_extra);
    if failures.is_empty() {
        TALLY.add("refused files", usize::from(refused));
        for d in client_did.values() {
            match (&d.listed, &d.started) {
                (_, Some(_)) => TALLY.add("servers started", 1),
                (Some(l), None) if l.ends_with("(stdio)") => TALLY.add("servers listed only", 1),
                (Some(_), None) => TALLY.add("network servers listed", 1),
                (None, None) => TALLY.add("servers doing nothing", 1),
            }
        }
        Ok(())
    } else {
        Err(format!(
            "{:?}\n{}\nfile:\n{}\nstdout:\n{stdout}\nstderr:\n{}",
            r.what,
            failures.join("\n"),
            String::from_utf8_lossy(&text),
            out.stderr
        ))
    }
}

/// Whether the last entry named `name` in `text` has a truthy `httpUrl` (listed `(http)`).
fn listed_http(text: &[u8], name: &str) -> bool {
    let text = String::from_utf8_lossy(text);
    let text = text.trim_start_matches('\u{feff}');
    let loaded = model::load("s", text.as_bytes(), &|_| None);
    loaded.remote.iter().any(|r| r.name == name) && {
        // The model's remote URL came from `httpUrl` when one is truthy.
        let v: Option<Value> = jsonc_entry(text, name);
        v.and_then(|e| e.get("httpUrl").cloned())
            .is_some_and(|u| u.as_str().is_some_and(|s| !s.is_empty()))
    }
}

/// The last entry named `name` of the `mcpServers` object in `text` (comments stripped by a
/// round trip through the model's parser is not public: a plain JSON parse after dropping
/// `//` and `/* */` comments the generator writes).
fn jsonc_entry(text: &str, name: &str) -> Option<Value> {
    let no_comments: String = text
        .lines()
        .map(|l| match l.find(" // a comment") {
            Some(i) => &l[..i],
            None => l,
        })
        .filter(|l| l.trim() != "/* block, */")
        .collect::<Vec<_>>()
        .join("\n");
    let v: Value = serde_json::from_str(&no_comments).ok()?;
    v.get("mcpServers")?.get(name).cloned()
}

/// `line` without ANSI colour sequences.
fn strip_ansi(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

static TALLY: Tally = Tally::new();

fn qwen_code_agrees_with_its_loader_model_on_every_variant() {
    let Some(bin) = peer("KCAP_QWEN_BIN") else {
        return;
    };
    let runs = runs();
    let started = Instant::now();
    let failures = parallel(&runs, |_, r| check_run(&bin, r));
    let secs = started.elapsed().as_secs_f64();
    TALLY.report("Qwen Code", &runs, failures.len(), secs, SEED);
    let variants: usize = runs.iter().map(|r| r.cases.len()).sum();
    assert!(variants >= 100, "{variants} variants");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
