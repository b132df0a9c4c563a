//! Differential test of OpenCode 1.18.33's loader model (`clients::opencode::loader`) against
//! the real client, as `tests/clients/differential.rs` does for Claude Code and Codex CLI.
//!
//! A seeded generator (`tests/common/variants.rs`) mutates the registration export: hostile
//! types (`null` included) for every field and for whole entries, neighbours, repeated keys,
//! remote servers, `enabled`, `timeout`, `cwd`, `headers`, `oauth`, `env` next to
//! `environment`, and `{env:…}` beside the `$…` forms OpenCode does not expand. Cases the model
//! says load share one config file (each case's servers are named `c<i>-…`), written as the
//! global `opencode.json` or `opencode.jsonc`, a project's `opencode.json` or the file
//! `OPENCODE_CONFIG` names, with a byte order mark, CRLF, comments or trailing commas. Cases
//! the model says refuse the file share another: OpenCode names every invalid path, so each
//! case is judged by whether its servers are named. File-level variants (two byte order marks,
//! a syntax error, an empty file, a top level or `mcp` of the wrong type) run alone.
//!
//! The judge is `opencode debug config`, the resolved configuration, with nothing started.
//! Compared per case: the file refused or not, and per server: a command server with its argv,
//! environment and `cwd`, a remote one with its URL, off (`"enabled": false`), or nothing (no
//! `type` left, or an empty command).
//!
//! Without `KCAP_OPENCODE_BIN` the test is reported as ignored, with the reason; with
//! `KCAP_REQUIRE_PEERS=1` a missing client fails it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::common;
use crate::common::variants;

use common::peers::{inherited_path, peer};
use kcap_mcp_registry::clients::opencode::loader as model;
use serde_json::{Value, json};
use variants::{
    Case, Entry, Rng, SEED, Tally, batches, block_text, client_vars, disagreements, mutate,
    parallel, subst,
};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![opencode_agrees_with_its_loader_model_on_every_variant,]
}

/// Seeded cases, besides the file-level variants.
const CASES: usize = 100;
/// Cases per config file.
const BATCH: usize = 30;

const FIELDS: [&str; 13] = [
    "type",
    "command",
    "environment",
    "env",
    "enabled",
    "timeout",
    "url",
    "cwd",
    "headers",
    "oauth",
    "args",
    "description",
    "extra",
];

#[derive(Clone, Copy, Debug)]
enum Place {
    GlobalJson,
    GlobalJsonc,
    Project,
    ConfigEnv,
}

/// Where the file goes, and whether the model says it refuses it.
#[derive(Clone, Copy, Debug)]
struct Level {
    place: Place,
    refused: bool,
}

type Run = variants::Run<Level>;

fn base(case: usize) -> Vec<(String, Entry)> {
    variants::export(
        &kcap_mcp_registry::clients::opencode::registration::FORMAT,
        "mcp",
        case,
    )
}

/// `$…` forms and `{env:…}` as OpenCode meets them: in the argv, `environment`, `cwd`, `url`.
fn expansion(rng: &mut Rng, servers: &mut [(String, Entry)], what: &mut Vec<String>) {
    let k = rng.below(servers.len());
    let form = *rng.pick(&variants::EXPANSIONS);
    let name = servers[k].0.clone();
    let (f, v) = match rng.below(4) {
        0 => ("command", json!(["@KCAP@", form, format!("a{form}b")])),
        1 => (
            "environment",
            json!({"KCAP_X": form, "KCAP_Y": format!("a{form}b")}),
        ),
        2 => ("cwd", json!(format!("{form}/x"))),
        _ => ("url", json!(format!("@URL@/{name}/{form}"))),
    };
    what.push(format!("{name}.{f} = {v}"));
    servers[k].1.set(f, v);
}

fn case(i: usize, rng: &mut Rng) -> Case {
    let mut servers = base(i);
    let mut what = Vec::new();
    if rng.chance(40) {
        let k = rng.below(servers.len());
        let name = servers[k].0.clone();
        servers[k].1 = Entry::from(json!({"type": "remote", "url": format!("@URL@/{name}"),
                                          "enabled": true}));
        what.push(format!("{name} remote"));
    }
    let timeouts = [
        json!(1),
        json!(0),
        json!(-1),
        json!(1.5),
        json!(2.0),
        json!("5"),
    ];
    for _ in 0..1 + rng.below(3) {
        match rng.below(8) {
            0 => expansion(rng, &mut servers, &mut what),
            1 => {
                let k = rng.below(servers.len());
                let (f, v) = match rng.below(4) {
                    0 => ("timeout", rng.pick(&timeouts).clone()),
                    1 => ("enabled", json!(false)),
                    2 => (
                        "cwd",
                        json!(*rng.pick(&["sub", "/tmp", "", "{env:XV_DIR}"])),
                    ),
                    _ => (
                        "oauth",
                        rng.pick(&[
                            json!(false),
                            json!({"clientId": "x"}),
                            json!({"callbackPort": 0}),
                        ])
                        .clone(),
                    ),
                };
                what.push(format!("{}.{f} = {v}", servers[k].0));
                servers[k].1.set(f, v);
            }
            _ => mutate(rng, &mut servers, &FIELDS, &mut what),
        }
    }
    Case { what, servers }
}

fn file_text(cases: &[Case], comments: bool) -> String {
    let servers: Vec<(String, Entry)> = cases.iter().flat_map(|c| c.servers.clone()).collect();
    format!(
        "{{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"mcp\": {}\n}}\n",
        block_text(&servers, comments)
    )
}

fn refused_alone(case: &Case) -> bool {
    let text = file_text(std::slice::from_ref(case), false);
    !model::load("o", text.as_bytes(), &|_| None)
        .rejected
        .is_empty()
}

fn runs() -> Vec<Run> {
    let mut rng = Rng(SEED ^ 0x0c0d);
    let cases: Vec<Case> = (0..CASES).map(|i| case(i, &mut rng)).collect();
    let (refusing, loading): (Vec<Case>, Vec<Case>) = cases.into_iter().partition(refused_alone);
    let places = [
        Place::GlobalJson,
        Place::GlobalJsonc,
        Place::Project,
        Place::ConfigEnv,
    ];
    let never = |_: &Case| false;
    let solo = |_: &Case| -> (Level, Vec<u8>) { unreachable!("no case runs alone") };
    let mut out = batches(
        loading,
        BATCH,
        &mut rng,
        never,
        never,
        solo,
        |batch, rng| {
            let mut what = Vec::new();
            let place = *rng.pick(&places);
            let comments = rng.chance(40);
            let mut text = file_text(batch, comments);
            match rng.below(4) {
                0 => {
                    what.push("BOM".into());
                    text.insert(0, '\u{feff}');
                }
                1 => {
                    what.push("CRLF".into());
                    text = text.replace('\n', "\r\n");
                }
                2 => {
                    what.push("trailing commas".into());
                    text = text.replacen("}\n  }\n}", "},\n  },\n}", 1);
                }
                _ => {}
            }
            if comments {
                what.push("comments".into());
            }
            what.push(format!("{place:?}"));
            let level = Level {
                place,
                refused: false,
            };
            (what, level, text.into_bytes())
        },
    );
    let level = Level {
        place: Place::GlobalJson,
        refused: true,
    };
    for chunk in refusing.chunks(BATCH) {
        out.push(Run {
            what: vec!["cases the model says refuse the file".into()],
            cases: chunk.to_vec(),
            level,
            text: file_text(chunk, false).into_bytes(),
        });
    }
    out.extend(file_variants());
    out
}

/// The file-level variants, each alone with one case of its own.
fn file_variants() -> Vec<Run> {
    let mut out = Vec::new();
    let mut i = 900;
    let mut push = |what: &str, make: &dyn Fn(&str) -> Vec<u8>| {
        i += 1;
        let c = Case {
            what: vec![],
            servers: base(i),
        };
        let text = make(&file_text(std::slice::from_ref(&c), false));
        let level = Level {
            place: Place::GlobalJson,
            refused: false,
        };
        out.push(Run {
            what: vec![what.to_string()],
            cases: vec![c],
            level,
            text,
        });
    };
    push("two BOMs", &|t| format!("\u{feff}\u{feff}{t}").into_bytes());
    push("a syntax error", &|t| {
        t.replacen("\"command\": [", "\"command\": [,", 1)
            .into_bytes()
    });
    push("empty file", &|_| Vec::new());
    push("top level is an array", &|t| format!("[{t}]").into_bytes());
    push("mcp is null", &|_| b"{\"mcp\": null}".to_vec());
    push("mcp is an array", &|_| b"{\"mcp\": []}".to_vec());
    push("mcp written twice", &|t| {
        let first =
            "\"mcp\": {\"x\": {\"type\": \"local\", \"command\": [\"@KCAP@\"]}},\n  \"mcp\"";
        t.replacen("\"mcp\"", first, 1).into_bytes()
    });
    push("an entry is null", &|t| {
        t.replacen("\"mcp\": {", "\"mcp\": {\"n\": null,", 1)
            .into_bytes()
    });
    out
}

/// What one server is, in comparable form.
#[derive(Debug, PartialEq, Eq)]
enum Is {
    /// A command server: argv, `environment`, `cwd`.
    Command(Vec<String>, BTreeMap<String, String>, Option<String>),
    /// A remote server at this URL.
    Network(String),
    /// `"enabled": false`.
    Off,
    /// Kept but starts nothing (no `type` left, an empty command).
    Nothing,
    /// Not in the resolved configuration, or in a refused file.
    Gone,
}

/// The resolved configuration's verdict on one server.
fn resolved(s: &Value) -> Is {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    match s["type"].as_str() {
        None => Is::Nothing,
        Some(_) if s["enabled"] == json!(false) => Is::Off,
        Some("remote") => Is::Network(s["url"].as_str().unwrap().to_string()),
        Some(_) if strings(&s["command"]).is_empty() => Is::Nothing,
        Some(_) => Is::Command(
            strings(&s["command"]),
            s["environment"]
                .as_object()
                .map(|e| {
                    e.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                        .collect()
                })
                .unwrap_or_default(),
            s["cwd"].as_str().map(String::from),
        ),
    }
}

fn check_run(bin: &Path, r: &Run) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (home, project, config) = (root.join("home"), root.join("project"), root.join("config"));
    for d in [
        &home,
        &project,
        &config.join("opencode"),
        &root.join("custom"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    let text = subst(
        &r.text,
        &[
            ("@URL@", "http://127.0.0.1:9".to_string()),
            ("@KCAP@", root.join("bin/kcap").display().to_string()),
            ("@BINDIR@", root.join("bin").display().to_string()),
        ],
    );
    let path = match r.level.place {
        Place::GlobalJson => config.join("opencode/opencode.json"),
        Place::GlobalJsonc => config.join("opencode/opencode.jsonc"),
        Place::Project => project.join("opencode.json"),
        Place::ConfigEnv => root.join("custom/opencode.json"),
    };
    std::fs::write(&path, &text).unwrap();
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), inherited_path().into_string().unwrap()),
        ("HOME".into(), home.display().to_string()),
        ("XDG_CONFIG_HOME".into(), config.display().to_string()),
        (
            "XDG_DATA_HOME".into(),
            root.join("data").display().to_string(),
        ),
        (
            "XDG_CACHE_HOME".into(),
            root.join("cache").display().to_string(),
        ),
        (
            "XDG_STATE_HOME".into(),
            root.join("state").display().to_string(),
        ),
        ("OPENCODE_DISABLE_AUTOUPDATE".into(), "1".into()),
        ("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()),
    ];
    env.extend(client_vars(&root));
    if let Place::ConfigEnv = r.level.place {
        env.push(("OPENCODE_CONFIG".into(), path.display().to_string()));
    }
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .envs(env.iter().cloned())
        .args(["debug", "config"])
        .current_dir(&project);
    let out = TALLY.run(cmd, "opencode debug config");
    let refused = !out.status.success();
    if refused && !out.stderr.contains("Configuration is invalid") && !out.stderr.contains("JSON") {
        return Err(format!(
            "{:?}: opencode debug config exited {} without a configuration error: {}",
            r.what, out.status, out.stderr
        ));
    }
    let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let failures = if r.level.refused {
        judge_refusals(r, refused, &out.stderr, &lookup)
    } else {
        judge_servers(r, refused, &out.stdout, &text, &lookup)?
    };
    if !failures.is_empty() {
        return Err(format!(
            "{:?}\n{}\nfile:\n{}\nstderr:\n{}",
            r.what,
            failures.join("\n"),
            String::from_utf8_lossy(&text),
            out.stderr
        ));
    }
    TALLY.add("refused files", usize::from(refused));
    Ok(())
}

/// A run of cases the model says refuse the file: each case must be named among the invalid
/// paths (`↳ … mcp.<name>…`), and the file refused.
fn judge_refusals(
    r: &Run,
    refused: bool,
    stderr: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let named: BTreeSet<&str> = stderr
        .lines()
        .filter(|l| l.starts_with('\u{21b3}'))
        .filter_map(|l| {
            l.rsplit_once(" mcp.")
                .map(|(_, p)| p.split('.').next().unwrap())
        })
        .collect();
    let mut out = Vec::new();
    if !refused {
        out.push("the client loaded the file".into());
    }
    for c in &r.cases {
        let alone = file_text(std::slice::from_ref(c), false);
        let model = !model::load("o", alone.as_bytes(), env).rejected.is_empty();
        let client = c.names().iter().any(|n| named.contains(n.as_str()));
        if model != client {
            out.push(format!(
                "{:?}: model refuses it: {model}; client names it: {client}",
                c.what
            ));
        }
    }
    if out.is_empty() {
        TALLY.add("refusing cases", r.cases.len());
    }
    out
}

fn judge_servers(
    r: &Run,
    refused: bool,
    stdout: &[u8],
    text: &[u8],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, String> {
    let config: Value = if refused {
        json!({})
    } else {
        serde_json::from_slice(stdout).map_err(|e| format!("debug config printed no JSON: {e}"))?
    };
    let m = model::load("opencode.json", text, env);
    let model_refused = !m.rejected.is_empty();
    let mut client_did = BTreeMap::new();
    let mut model_did = BTreeMap::new();
    for n in r.cases.iter().flat_map(Case::names) {
        let client = config["mcp"].get(&n).map_or(Is::Gone, resolved);
        let model = if model_refused {
            Is::Gone
        } else if let Some(s) = m.started.iter().find(|s| s.name == n) {
            let mut argv = vec![s.command.clone()];
            argv.extend(s.args.iter().cloned());
            Is::Command(argv, s.env.clone(), s.cwd.clone())
        } else if let Some(rm) = m.remote.iter().find(|x| x.name == n) {
            Is::Network(rm.url.clone())
        } else if let Some(k) = m.skipped.iter().find(|k| k.name == n) {
            if k.disabled { Is::Off } else { Is::Nothing }
        } else {
            Is::Gone
        };
        client_did.insert(n.clone(), client);
        model_did.insert(n, model);
    }
    let failures = disagreements(&r.cases, (model_refused, refused), &model_did, &client_did);
    if failures.is_empty() {
        for client in client_did.values() {
            let kind = match client {
                Is::Command(..) => "command servers",
                Is::Network(_) => "remote servers",
                Is::Off => "servers off",
                Is::Nothing => "servers ignored",
                Is::Gone => "servers gone",
            };
            TALLY.add(kind, 1);
        }
    }
    Ok(failures)
}

static TALLY: Tally = Tally::new();

fn opencode_agrees_with_its_loader_model_on_every_variant() {
    let Some(bin) = peer("KCAP_OPENCODE_BIN") else {
        return;
    };
    let runs = runs();
    let started = Instant::now();
    let failures = parallel(&runs, |_, r| check_run(&bin, r));
    let secs = started.elapsed().as_secs_f64();
    TALLY.report("OpenCode", &runs, failures.len(), secs, SEED);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
