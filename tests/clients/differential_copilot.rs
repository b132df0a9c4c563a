//! Differential test of Copilot CLI 1.0.102's loader model (`clients::copilot::loader`)
//! against the real client, as `tests/clients/differential.rs` does for Claude Code and Codex CLI.
//!
//! A seeded generator (`tests/common/variants.rs`) mutates the registration export: hostile
//! types (`null` included) for every field and for whole entries, neighbours, repeated keys,
//! network servers of each `type`, `disabled`, `tools`, `timeout`, `headers`, every `${…}`
//! form. Twenty-five cases share one `mcp-config.json` (each case's servers are named
//! `c<i>-…`), under `$COPILOT_HOME` or the default `~/.copilot`, with byte order marks, CRLF,
//! comments or trailing commas; file-level variants (a top level or `mcpServers` of the wrong
//! type, an empty file, no `mcpServers`, invalid UTF-8, a syntax error, a repeated
//! `mcpServers`, an empty name) run alone, as does a case the model says refuses the file.
//!
//! The judge is `copilot mcp list --json`, which prints every field of every server it keeps
//! without starting any. Compared per case: the file refused or not, and per server: gone,
//! off (`"disabled": true`), a network server and its URL, or a command server with its
//! command, arguments, environment, working directory and tool filter, all as written (the
//! listing does not expand `${…}`, so the model runs with no variable set).
//!
//! Without `KCAP_COPILOT_BIN` (and `KCAP_COPILOT_CACHE`) the test is reported as ignored,
//! with the reason; with `KCAP_REQUIRE_PEERS=1` a missing client fails it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::common;
use crate::common::variants;

use common::peers::{inherited_path, peer};
use kcap_mcp_registry::clients::copilot::loader as model;
use serde_json::{Value, json};
use variants::{
    Case, Entry, Rng, SEED, Tally, batches, block_text, disagreements, mutate, parallel, subst,
};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![copilot_cli_agrees_with_its_loader_model_on_every_variant,]
}

/// Seeded cases, besides the file-level variants.
const CASES: usize = 100;
/// Cases per `mcp-config.json`.
const BATCH: usize = 25;

const FIELDS: [&str; 14] = [
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "type",
    "tools",
    "timeout",
    "disabled",
    "headers",
    "enabled",
    "description",
    "trust",
    "extra",
];

/// Where the file is: `$COPILOT_HOME/mcp-config.json`, or `~/.copilot/mcp-config.json`
/// with `COPILOT_HOME` unset.
#[derive(Clone, Copy, Debug)]
enum Level {
    CopilotHome,
    Home,
}

type Run = variants::Run<Level>;

fn base(case: usize) -> Vec<(String, Entry)> {
    variants::export(
        &kcap_mcp_registry::clients::copilot::registration::FORMAT,
        "mcpServers",
        case,
    )
}

fn case(i: usize, rng: &mut Rng) -> Case {
    let mut servers = base(i);
    let mut what = Vec::new();
    if rng.chance(40) {
        // A network server, of each kind Copilot CLI has.
        let k = rng.below(servers.len());
        let name = servers[k].0.clone();
        let kind = *rng.pick(&[
            None,
            Some("http"),
            Some("sse"),
            Some("stdio"),
            Some("local"),
        ]);
        servers[k].1.set("url", json!(format!("@URL@/{name}")));
        match kind {
            Some(kind) => servers[k].1.set("type", kind.into()),
            None => servers[k].1.remove("type"),
        }
        if rng.chance(50) {
            servers[k].1.remove("command");
        }
        what.push(format!("{name}.url = @URL@/{name}, type {kind:?}"));
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
        if rng.chance(25) {
            let k = rng.below(servers.len());
            let (f, v) = if rng.chance(50) {
                ("timeout", rng.pick(&timeouts).clone())
            } else {
                ("disabled", json!(rng.chance(70)))
            };
            what.push(format!("{}.{f} = {v}", servers[k].0));
            servers[k].1.set(f, v);
        } else {
            mutate(rng, &mut servers, &FIELDS, &mut what);
        }
    }
    Case { what, servers }
}

fn file_text(cases: &[Case], comments: bool) -> String {
    let servers: Vec<(String, Entry)> = cases.iter().flat_map(|c| c.servers.clone()).collect();
    format!(
        "{{\n  \"mcpServers\": {},\n  \"x-note\": \"mine\"\n}}\n",
        block_text(&servers, comments)
    )
}

fn refused_alone(case: &Case) -> bool {
    let text = file_text(std::slice::from_ref(case), false);
    !model::load("m", text.as_bytes(), &|_| None)
        .rejected
        .is_empty()
}

fn runs() -> Vec<Run> {
    let mut rng = Rng(SEED ^ 0xc0b1);
    let cases: Vec<Case> = (0..CASES).map(|i| case(i, &mut rng)).collect();
    let solo = |c: &Case| {
        let text = file_text(std::slice::from_ref(c), false).into_bytes();
        (Level::CopilotHome, text)
    };
    let mut out = batches(
        cases,
        BATCH,
        &mut rng,
        refused_alone,
        |_| false,
        solo,
        |batch, rng| {
            let mut what = Vec::new();
            let level = *rng.pick(&[Level::CopilotHome, Level::Home]);
            let comments = rng.chance(40);
            let mut text = file_text(batch, comments);
            match rng.below(5) {
                0 => {
                    what.push("BOM".into());
                    text.insert(0, '\u{feff}');
                }
                1 => {
                    what.push("two BOMs and a space".into());
                    text.insert_str(0, "\u{feff} \u{feff}");
                }
                2 => {
                    what.push("CRLF".into());
                    text = text.replace('\n', "\r\n");
                }
                3 => {
                    what.push("trailing commas".into());
                    text = text
                        .replacen("}\n  },", "},\n  },", 1)
                        .replacen("\n}\n", ",\n}\n", 1);
                }
                _ => {}
            }
            if comments {
                what.push("comments".into());
            }
            what.push(format!("{level:?}"));
            (what, level, text.into_bytes())
        },
    );
    out.extend(file_variants());
    out
}

/// A file-level variant: the file of one case made hostile, and the case it then holds.
type Make<'a> = &'a dyn Fn(&str, &Case) -> (Vec<u8>, Case);

/// The file-level variants, each alone with one case of its own.
fn file_variants() -> Vec<Run> {
    let mut out = Vec::new();
    let mut i = 900;
    let mut push = |what: &str, make: Make| {
        i += 1;
        let c = Case {
            what: vec![],
            servers: base(i),
        };
        let (text, c) = make(&file_text(std::slice::from_ref(&c), false), &c);
        out.push(Run {
            what: vec![what.to_string()],
            cases: vec![c],
            level: Level::Home,
            text,
        });
    };
    let same = |t: String, c: &Case| (t.into_bytes(), c.clone());
    push("empty file", &|_, c| same(String::new(), c));
    push("no mcpServers", &|_, c| same("{\"x\": 1}".into(), c));
    push("top level is an array", &|t, c| same(format!("[{t}]"), c));
    push("top level is null", &|_, c| same("null".into(), c));
    for (what, block) in [
        ("mcpServers is null", "null"),
        ("mcpServers is an array", "[{\"command\": \"@KCAP@\"}]"),
        ("mcpServers is a string", "\"ab\""),
        ("mcpServers is empty", "{}"),
    ] {
        push(what, &|_, c| {
            same(format!("{{\"mcpServers\": {block}}}"), c)
        });
    }
    push("a syntax error", &|t, c| {
        same(t.replacen("\"args\": [", "\"args\": [,", 1), c)
    });
    push("three BOMs", &|t, c| {
        same(format!("\u{feff}\u{feff}\u{feff}{t}"), c)
    });
    push("invalid UTF-8 in an argument", &|t, c| {
        let t = t.replacen("\"args\": [", "\"args\": [\"@BAD@\", ", 1);
        let bytes = variants::replace_bytes(t.as_bytes(), b"@BAD@", &[b'a', 0xff, b'b']);
        (bytes, c.clone())
    });
    push("mcpServers written twice", &|t, c| {
        let first = "\"mcpServers\": {\"x\": {\"command\": \"@KCAP@\"}},\n  \"mcpServers\"";
        same(t.replacen("\"mcpServers\"", first, 1), c)
    });
    push("an empty name and a space in one", &|t, c| {
        let mut c = c.clone();
        c.servers[0].0 = String::new();
        c.servers[1].0 = "a name".into();
        let _ = t;
        same(file_text(std::slice::from_ref(&c), false), &c)
    });
    out
}

/// What one server is, in comparable form.
#[derive(Debug, PartialEq, Eq)]
enum Is {
    /// A command server: command, args, env, cwd, the tools kept (`None`: all).
    Command(
        String,
        Vec<String>,
        BTreeMap<String, String>,
        Option<String>,
        Option<Vec<String>>,
    ),
    /// A network server at this URL.
    Network(String),
    /// Listed with `"disabled": true`, not started.
    Off,
    Gone,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The listing's verdict on one server.
fn listed(s: &Value) -> Is {
    if s["disabled"] == json!(true) {
        return Is::Off;
    }
    if let Some(command) = s["command"].as_str() {
        let env = s["env"]
            .as_object()
            .map(|e| {
                e.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let tools = strings(&s["tools"]);
        let tools = (!tools.iter().any(|t| t == "*")).then_some(tools);
        Is::Command(
            command.to_string(),
            strings(&s["args"]),
            env,
            s["cwd"].as_str().map(String::from),
            tools,
        )
    } else {
        Is::Network(s["url"].as_str().unwrap_or_default().to_string())
    }
}

/// The shared unpacked package: must be set with the binary (the installer prints both).
fn cache() -> PathBuf {
    let dir = std::env::var_os("KCAP_COPILOT_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .expect("KCAP_COPILOT_CACHE is not set; `bash scripts/install-peers.sh` prints it");
    assert!(
        dir.is_dir(),
        "KCAP_COPILOT_CACHE={} is not a directory",
        dir.display()
    );
    dir
}

fn check_run(bin: &Path, cache: &Path, r: &Run) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let home = root.join("home");
    let copilot_home = match r.level {
        Level::CopilotHome => root.join("copilot-home"),
        Level::Home => home.join(".copilot"),
    };
    std::fs::create_dir_all(&copilot_home).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let text = subst(
        &r.text,
        &[
            ("@URL@", "http://127.0.0.1:9".to_string()),
            ("@KCAP@", root.join("bin/kcap").display().to_string()),
            ("@BINDIR@", root.join("bin").display().to_string()),
        ],
    );
    std::fs::write(copilot_home.join("mcp-config.json"), &text).unwrap();
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", inherited_path())
        .env("HOME", &home)
        .env("XDG_CACHE_HOME", cache)
        .env("COPILOT_OFFLINE", "true")
        .env("COPILOT_AUTO_UPDATE", "false")
        .env("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:9/v1")
        .args(["mcp", "list", "--json"])
        .current_dir(&home);
    if let Level::CopilotHome = r.level {
        cmd.env("COPILOT_HOME", &copilot_home);
    }
    let out = TALLY.run(cmd, "copilot mcp list --json");
    let refused = !out.status.success();
    if refused && !out.stderr.contains("mcpServers") {
        return Err(format!(
            "{:?}: copilot mcp list exited {} without a configuration error: {}",
            r.what, out.status, out.stderr
        ));
    }
    let list: Value = if refused {
        json!({"mcpServers": {}})
    } else {
        serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("mcp list printed no JSON ({e}): {}", out.stderr))?
    };
    let m = model::load("mcp-config.json", &text, &|_| None);
    let model_refused = !m.rejected.is_empty();
    let mut client_did = BTreeMap::new();
    let mut model_did = BTreeMap::new();
    for n in r.cases.iter().flat_map(Case::names) {
        let client = list["mcpServers"].get(&n).map_or(Is::Gone, listed);
        let model = if let Some(s) = m.started.iter().find(|s| s.name == n) {
            Is::Command(
                s.command.clone(),
                s.args.clone(),
                s.env.clone(),
                s.cwd.clone(),
                s.enabled_tools.clone(),
            )
        } else if let Some(rm) = m.remote.iter().find(|x| x.name == n) {
            Is::Network(rm.url.clone())
        } else if m.skipped.iter().any(|k| k.name == n && k.disabled) {
            Is::Off
        } else {
            Is::Gone
        };
        client_did.insert(n.clone(), client);
        model_did.insert(n, model);
    }
    let failures = disagreements(&r.cases, (model_refused, refused), &model_did, &client_did);
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
    for d in client_did.values() {
        let kind = match d {
            Is::Command(..) => "command servers",
            Is::Network(_) => "network servers",
            Is::Off => "servers off",
            Is::Gone => "servers gone",
        };
        TALLY.add(kind, 1);
    }
    Ok(())
}

static TALLY: Tally = Tally::new();

fn copilot_cli_agrees_with_its_loader_model_on_every_variant() {
    let Some(bin) = peer("KCAP_COPILOT_BIN") else {
        return;
    };
    let cache = cache();
    let runs = runs();
    let started = Instant::now();
    let failures = parallel(&runs, |_, r| check_run(&bin, &cache, r));
    let secs = started.elapsed().as_secs_f64();
    TALLY.report("Copilot CLI", &runs, failures.len(), secs, SEED);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
